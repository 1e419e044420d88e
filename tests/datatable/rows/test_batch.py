"""The batch steps of the writes (rows/batch.py, spec §7.4): the 1–100 row limit."""

from __future__ import annotations

from typing import Any

import pytest

from skillyard import SkillYard
from support.datatable import context, count, make_table, run


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.spec("§7.8.7")
async def test_batch_limits_point_to_insert_from_file(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    records = [{"姓名": str(i)} for i in range(101)]
    for action, params in [
        ("insert_batch", {"records": records}),
        ("upsert", {"records": records, "key_fields": ["姓名"]}),
        ("upsert", {"data": records, "key_fields": ["姓名"]}),
        ("insert", {"data": records}),
    ]:
        env = await run(yard, ctx, action, table_id=table_id, **params)
        assert env["ok"] is False and "insert_from_file" in env["error"], (action, env)
    assert await count(conn, org) == 0
    exact = await run(yard, ctx, "insert_batch", table_id=table_id, records=records[:100])
    assert exact["inserted"] == 100
    changed = [{**r, "城市": "深圳"} for r in records[:100]]
    up = await run(yard, ctx, "upsert", table_id=table_id, key_fields="姓名", records=changed)
    assert (up["inserted"], up["updated"], up["verified_total"]) == (0, 100, 100), up
