"""Review findings on the built-in datatable skill: each test failed before its fix (through SkillYard.run)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard

pytestmark = pytest.mark.usefixtures("home", "db_env")

FIELDS = [
    {"title": "姓名", "uidt": "文本", "required": True},
    {"title": "编号", "uidt": "文本", "unique": True},
    {"title": "网址", "uidt": "链接"},
]


@pytest.fixture
async def yard() -> AsyncIterator[SkillYard]:
    async with SkillYard() as y:
        yield y


@pytest.fixture
def org() -> str:
    return "r" + uuid.uuid4().hex[:12]


def context(org: str, **extra: Any) -> dict[str, Any]:
    return {"org_id": org, "team_role": "owner", "role_id": "staff", "session_id": f"s-{org}", **extra}


async def run(yard: SkillYard, ctx: dict[str, Any], action: str, **params: Any) -> dict[str, Any]:
    return await yard.run("datatable", {"action": action, "payload": params}, context=ctx)


async def make_table(yard: SkillYard, org: str, rows: int = 0) -> str:
    created = await run(yard, context(org), "create_table", table_name="客户", fields=FIELDS)
    assert created["ok"], created
    if rows:
        records = [{"姓名": f"人{i}", "编号": f"B{i}"} for i in range(rows)]
        batch = await run(yard, context(org), "insert_batch", table_id=created["id"], records=records)
        assert batch["inserted"] == rows, batch
    return str(created["id"])


async def test_confirm_token_given_in_camel_case_is_honoured(yard: SkillYard, org: str, conn: Any) -> None:
    """A model writing ``confirmToken`` (or ``token``) must redeem the token, not get a fresh one forever."""
    table_id = await make_table(yard, org, rows=12)
    ctx = context(org, chat_mode=True)
    ids = [r["id"] for r in (await run(yard, ctx, "query", table_id=table_id))["list"]]
    asked = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids)
    assert asked["needs_confirmation"] is True
    done = await yard.run(
        "datatable",
        {
            "action": "delete_batch",
            "payload": {"table_id": table_id, "row_ids": ids, "confirmToken": asked["confirm_token"]},
        },
        context=ctx,
    )
    assert done["ok"] and done["deleted"] == 12, done
    assert "confirmToken → confirm_token" in done["action_note"]
    assert await conn.fetchval(f'SELECT count(*) FROM org_data_{org}."客户"') == 0


async def test_bad_link_error_carries_no_downloadable_url(yard: SkillYard, org: str) -> None:
    """The platform materializes links found in a reply's text; a fix hint must not contain a real URL."""
    table_id = await make_table(yard, org)
    env = await run(yard, context(org), "insert", table_id=table_id, data={"姓名": "甲", "网址": "example.com"})
    assert env["ok"] is False and "网址" in env["error"]
    assert "could not download" not in json.dumps(env.get("warnings", []))
    assert "://example" not in env["error"]


async def test_insert_batch_on_conflict_skip_counts_duplicates_as_skipped(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=2)
    records = [{"姓名": "重复", "编号": "B1"}, {"姓名": "新", "编号": "N1"}]
    env = await run(yard, context(org), "insert_batch", table_id=table_id, records=records, on_conflict="skip")
    assert env["ok"], env
    assert (env["inserted"], env["skipped"], env["failed"], env["errors"]) == (1, 1, 0, []), env
    assert env["verified_total"] == 1
    plain = await run(yard, context(org), "insert_batch", table_id=table_id, records=[{"姓名": "x", "编号": "B0"}])
    assert plain["failed"] == 1 and plain["skipped"] == 0  # without on_conflict a duplicate still fails


async def test_insert_batch_on_conflict_skip_needs_a_unique_field(yard: SkillYard, org: str) -> None:
    created = await run(
        yard, context(org), "create_table", table_name="无唯一", fields=[{"title": "名", "uidt": "文本"}]
    )
    env = await run(
        yard, context(org), "insert_batch", table_id=created["id"], records=[{"名": "a"}], on_conflict="skip"
    )
    assert env["ok"] is False and env["need_param"] == "on_conflict"
    bad = await run(yard, context(org), "insert_batch", table_id=created["id"], records=[{"名": "a"}], on_conflict="x")
    assert bad["ok"] is False and bad["need_param"] == "on_conflict"


async def test_import_file_wrapping_the_rows_in_an_object_is_refused(yard: SkillYard, org: str) -> None:
    """``{"records": [...]}`` on one line used to be read as one JSON Lines row: 0 inserted, 1 skipped, ok."""
    table_id = await make_table(yard, org)
    ctx = context(org)
    workspace = Path(yard.workspace(ctx["session_id"]))
    workspace.mkdir(parents=True, exist_ok=True)
    rows = [{"姓名": "甲", "编号": "W1"}, {"姓名": "乙", "编号": "W2"}]
    (workspace / "wrapped.json").write_text(json.dumps({"records": rows}, ensure_ascii=False), encoding="utf-8")
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file="wrapped.json")
    assert env["ok"] is False and env["need_param"] == "file" and "'records'" in env["error"], env
    (workspace / "one.jsonl").write_text(json.dumps(rows[0], ensure_ascii=False) + "\n", encoding="utf-8")
    single = await run(yard, ctx, "insert_from_file", table_id=table_id, file="one.jsonl")
    assert single["ok"] and single["inserted"] == 1  # a one-line JSON Lines file is still one row
