"""The deleting actions through the skill (actions/delete.py): confirm tokens in chat mode, backups, and 确认 never
standing in for a token."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from support.datatable import backups, context, count, make_table, run


async def test_delete_by_needs_a_token_in_chat_mode_and_backs_up(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=12)
    ctx = context(org, chat_mode=True)
    filters = [{"field": "城市", "op": "eq", "value": "上海"}]
    asked = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters)
    assert asked["needs_confirmation"] is True and asked["affected"] == 12 and asked["confirm_token"]
    assert await conn.fetchval(f'SELECT count(*) FROM org_data_{org}."客户"') == 12

    other = await run(
        yard,
        ctx,
        "delete_by",
        table_id=table_id,
        filters=[{"field": "金额", "op": "gt", "value": 0}],
        confirm_token=asked["confirm_token"],
    )
    assert other["ok"] is False and other["need_param"] == "confirm_token"
    done = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters, confirm_token=asked["confirm_token"])
    assert done["ok"] and done["deleted"] == 12
    backup = Path(done["backup_file"])
    assert backup in backups(yard, ctx) and len(json.loads(backup.read_text(encoding="utf-8"))) == 12
    reused = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters, confirm_token=asked["confirm_token"])
    assert reused["ok"] is False and "already used" in reused["error"]

    empty = await run(yard, ctx, "delete_by", table_id=table_id, filters=[])
    assert empty["ok"] is False and empty["need_param"] == "filters"


async def test_delete_batch_small_runs_at_once_large_asks(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    ids = [r["id"] for r in (await run(yard, ctx, "query", table_id=table_id))["list"]]
    small = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids[:3])
    assert (small["deleted"], small["requested"]) == (3, 3) and small["backup_file"]
    large = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids[3:])
    assert large["needs_confirmation"] is True and large["affected"] == 12
    unattended = await run(yard, context(org, chat_mode=False), "delete_batch", table_id=table_id, row_ids=ids[3:])
    assert unattended["deleted"] == 12


@pytest.mark.spec("§3.5")
@pytest.mark.spec("§7.7")
async def test_confirm_flag_or_prefix_never_replaces_the_delete_token(yard: SkillYard, org: str, conn: Any) -> None:
    """§7.7: more than 10 rows in chat mode need the confirm_token; 确认=true is the structure actions' dry run."""
    table_id = await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    filters = [{"field": "金额", "op": "gte", "value": 0}]
    flagged = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters, 确认=True)
    assert flagged["ok"] and flagged.get("needs_confirmation") is True and "deleted" not in flagged, flagged
    prefixed = await yard.run(
        "datatable",
        {"action": "确认按条件删除", "payload": {"table_id": table_id, "filters": filters}},
        context=ctx,
    )
    assert prefixed["ok"] and prefixed.get("needs_confirmation") is True, prefixed
    sql = await run(yard, ctx, "sql_execute", sql="DELETE FROM 客户 WHERE 金额 >= 0", confirmed=True)
    assert sql["ok"] and sql.get("needs_confirmation") is True, sql
    assert await count(conn, org) == 15
