"""The names the skill claims (store/names.py): an organisation's schema name."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.store.schema import StoreError

from skillyard import SkillYard
from support.datatable import FIELDS, context, run


def test_schema_naming() -> None:
    assert store_schema.schema_for("Org-42_AB") == "org_data_org42ab"
    assert store_schema.schema_for("abc") == "org_data_abc"
    assert store_schema.schema_for("组织-7") == "org_data_7"
    assert store_schema.schema_for(123) == "org_data_123"


@pytest.mark.parametrize("org", ["", "   ", None, "---", "组织"])
def test_blank_org_is_a_config_error(org: Any) -> None:
    with pytest.raises(StoreError) as info:
        store_schema.schema_for(org)
    assert info.value.error_type == "config"
    assert info.value.non_retriable is True
    assert "org_id" in str(info.value)


def test_too_long_org_is_refused() -> None:
    with pytest.raises(StoreError) as info:
        store_schema.schema_for("a" * 60)
    assert info.value.error_type == "config"


@pytest.mark.spec("§7.1")
async def test_schema_name_is_org_lowercased_without_non_alphanumerics(yard: SkillYard, conn: Any) -> None:
    raw = "Acme-" + uuid.uuid4().hex[:8].upper() + ".Ltd"
    env = await run(yard, context(raw), "create_table", table_name="客户", fields=FIELDS)
    assert env["ok"], env
    expected = "org_data_" + re.sub(r"[^a-z0-9]", "", raw.lower())
    assert await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", expected) == 1
    cols = await conn.fetch(
        "SELECT column_name, data_type, column_default FROM information_schema.columns "
        "WHERE table_schema = $1 AND table_name = '客户' ORDER BY ordinal_position",
        expected,
    )
    by_name = {c["column_name"]: c for c in cols}
    assert by_name["id"]["data_type"] == "bigint" and "nextval" in (by_name["id"]["column_default"] or "")
    assert "created_at" in by_name
