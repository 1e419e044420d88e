"""The writing actions through the skill (actions/write.py): their reply shapes, verified_total, an array given to
insert, upsert with one data object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from support.datatable import context, count, make_table, run, write_json


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.spec("§7.8.7")
async def test_verified_total_counts_this_operation_not_the_table(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org, rows=7)
    batch = await run(yard, ctx, "insert_batch", table_id=table_id, records=[{"姓名": "a"}, {"姓名": "b"}, {}])
    assert (batch["inserted"], batch["skipped"], batch["failed"], batch["verified_total"]) == (2, 1, 0, 2), batch
    assert set(batch) >= {"inserted", "skipped", "failed", "errors", "verified_total"}
    up = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields=["姓名"],
        records=[{"姓名": "a", "城市": "北京"}, {"姓名": "新"}],
    )
    assert (up["inserted"], up["updated"], up["failed"], up["verified_total"]) == (1, 1, 0, 2), up
    assert set(up) >= {"inserted", "updated", "failed", "errors", "verified_total"}
    rel = write_json(yard, ctx, "import/x.json", [{"姓名": f"f{i}"} for i in range(120)])
    imported = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert (imported["inserted"], imported["verified_total"]) == (120, 120), imported
    assert set(imported) >= {"inserted", "skipped", "failed", "errors", "verified_total"}


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.spec("§7.8.7")
async def test_insert_with_array_is_a_batch_reported_in_action_note(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    env = await run(yard, ctx, "insert", table_id=table_id, data=[{"姓名": "a"}, {"姓名": "b", "金额": "1万"}])
    assert env["ok"] and env["inserted"] == 1 and env["failed"] == 1 and env["verified_total"] == 1, env
    assert "insert_batch" in env["action_note"]


async def test_upsert_with_single_data_object_and_no_unique_constraint(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org, rows=3)
    up = await run(yard, ctx, "upsert", table_id=table_id, key_fields="姓名", data={"姓名": "人1", "城市": "深圳"})
    assert up["ok"] and (up["inserted"], up["updated"], up["verified_total"]) == (0, 1, 1), up
    new = await run(
        yard, ctx, "upsert", table_id=table_id, key_fields=["姓名", "工号"], data={"姓名": "人1", "工号": "E9"}
    )
    assert (new["inserted"], new["updated"]) == (1, 0), new
    assert await count(conn, org) == 4
    missing = await run(yard, ctx, "upsert", table_id=table_id, data={"姓名": "x"})
    assert missing["ok"] is False and missing["need_param"] == "key_fields"


@pytest.mark.spec("§7.3")
async def test_row_write_and_delete_reply_shapes(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org, chat_mode=False)
    ins = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "甲", "金额": "1.5"})
    assert ins["ok"] and ins["id"] == ins["data"]["id"] and ins["data"]["金额"] == 1.5, ins
    batch = await run(yard, ctx, "insert_batch", table_id=table_id, records=[{"姓名": "乙"}, {"姓名": "丙"}])
    assert set(batch) >= {"inserted", "skipped", "failed", "errors", "verified_total", "ids"}, batch
    assert batch["errors"] == [] and len(batch["ids"]) == 2 and all(isinstance(i, int) for i in batch["ids"])
    up = await run(yard, ctx, "upsert", table_id=table_id, key_fields=["姓名"], records=[{"姓名": "乙", "金额": 2}])
    assert {k: up[k] for k in ("inserted", "updated", "failed", "errors", "verified_total")} == {
        "inserted": 0,
        "updated": 1,
        "failed": 0,
        "errors": [],
        "verified_total": 1,
    }, up
    upd = await run(yard, ctx, "update", table_id=table_id, row_id=ins["id"], data={"城市": "北京"})
    assert upd["ok"] and set(upd["data"]) == {"id", "created_at", "姓名", "工号", "城市", "金额"}, upd
    by = await run(
        yard,
        ctx,
        "update_by",
        table_id=table_id,
        filters=[{"field": "姓名", "op": "eq", "value": "丙"}],
        data={"金额": 3},
    )
    assert by["ok"] and by["updated"] == 1, by
    one = await run(yard, ctx, "delete", table_id=table_id, row_id=ins["id"])
    assert one["ok"] and one["data"] is True and one["deleted"] == 1, one
    missing = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=[batch["ids"][0], 999999])
    assert missing["ok"] and (missing["deleted"], missing["requested"]) == (1, 2) and missing["backup_file"], missing
    saved = json.loads(Path(missing["backup_file"]).read_text(encoding="utf-8"))
    assert [r["id"] for r in saved] == [batch["ids"][0]]
    none = await run(yard, ctx, "delete_by", table_id=table_id, filters=[{"field": "姓名", "op": "eq", "value": "无"}])
    assert none["ok"] and none["deleted"] == 0 and "backup_file" in none, none
