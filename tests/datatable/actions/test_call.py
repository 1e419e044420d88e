"""What every action shares (actions/call.py): the metadata probe remembered per process and the slow way when it is
gone."""

from __future__ import annotations

from typing import Any

from skillyard import SkillYard
from support.datatable import context, make_table, run


async def test_vanished_metadata_is_redone_the_slow_way(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=3)
    assert (await run(yard, context(org), "query", table_id=table_id))["pageInfo"]["totalRows"] == 3
    await conn.execute(f"DROP SCHEMA org_data_{org} CASCADE")
    gone = await run(yard, context(org), "query", table_id=table_id)
    assert gone["ok"] is False and gone.get("need_param") == "table_id", gone
    assert "no tables yet" in gone["error"]
