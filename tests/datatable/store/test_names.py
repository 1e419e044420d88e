"""The names the skill claims (store/names.py): an organisation's schema name."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from skillyard.builtin_skills.datatable.store.names import schema_name
from skillyard.builtin_skills.datatable.store.owners import resolve_schema
from skillyard.builtin_skills.datatable.store.schema import StoreError

from skillyard import SkillYard
from support.datatable import FIELDS, context, run


def test_schema_naming() -> None:
    """An id that is its own key keeps the bare name; any other id gets its key and a hash of the whole id."""
    assert schema_name("abc") == "org_data_abc"
    assert re.fullmatch(r"org_data_org42ab_[0-9a-f]{8}", schema_name("Org-42_AB"))
    assert re.fullmatch(r"org_data_7_[0-9a-f]{8}", schema_name("组织-7"))
    assert re.fullmatch(r"org_data_h_[0-9a-f]{8}", schema_name("组织"))
    assert schema_name("123") == "org_data_123"


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("华为1", "腾讯1"),
        ("ACME", "acme"),
        ("a-c-m-e", "acme"),
        ("集团acme", "acme"),
        ("acme\0", "acme"),
        ("组织", "公司"),
    ],
)
def test_different_raw_ids_never_share_a_schema_name(one: str, other: str) -> None:
    """Hardening issue 1: the bare rule of §7.1 gave each pair one schema (one tenant read the other's tables)."""
    assert schema_name(one) != schema_name(other)


@pytest.mark.parametrize("org", ["a" * 60, "A" * 200, "组" * 100 + "x" * 80])
def test_long_ids_are_capped_with_their_hash(org: str) -> None:
    name = schema_name(org)
    assert len(name.encode()) <= 63 and re.search(r"_[0-9a-f]{8}$", name)
    assert schema_name(org + "b") != name


@pytest.mark.parametrize("org", ["", "   ", None])
async def test_blank_org_is_a_config_error(conn: Any, org: Any) -> None:
    with pytest.raises(StoreError) as info:
        await resolve_schema(conn, org)
    assert info.value.error_type == "config"
    assert info.value.non_retriable is True
    assert "org_id" in str(info.value)


@pytest.mark.spec("§7.1")
async def test_schema_name_is_org_lowercased_without_non_alphanumerics(yard: SkillYard, conn: Any) -> None:
    raw = "Acme-" + uuid.uuid4().hex[:8].upper() + ".Ltd"
    env = await run(yard, context(raw), "create_table", table_name="客户", fields=FIELDS)
    assert env["ok"], env
    expected = schema_name(raw)  # the id is not its own key: its key and a hash (see test_schema_naming)
    assert await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", expected) == 1
    cols = await conn.fetch(
        "SELECT column_name, data_type, column_default FROM information_schema.columns "
        "WHERE table_schema = $1 AND table_name = '客户' ORDER BY ordinal_position",
        expected,
    )
    by_name = {c["column_name"]: c for c in cols}
    assert by_name["id"]["data_type"] == "bigint" and "nextval" in (by_name["id"]["column_default"] or "")
    assert "created_at" in by_name
