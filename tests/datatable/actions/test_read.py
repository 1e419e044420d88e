"""The reading actions through the skill (actions/read.py): list_tables, list_columns, query and aggregate and the
shapes of their replies."""

from __future__ import annotations

import pytest

from skillyard import SkillYard
from support.datatable import COLUMN_KEYS, context, make_table, run


@pytest.mark.spec("§7.3")
async def test_list_tables_shape_and_creation_order(yard: SkillYard, org: str) -> None:
    ids = [await make_table(yard, org, title=t, fields=[{"title": "名称", "uidt": "文本"}]) for t in ("乙", "甲", "丙")]
    env = await run(yard, context(org), "list_tables")
    assert env["ok"] and env["count"] == 3, env
    assert [t["id"] for t in env["data"]] == ids and [t["title"] for t in env["data"]] == ["乙", "甲", "丙"]
    for table in env["data"]:
        assert set(table) == {"id", "title", "schema", "qualified"}, table
        assert table["schema"] == f"org_data_{org}" and table["title"] in table["qualified"]
        assert table["qualified"].startswith(f'"org_data_{org}".') or table["qualified"].startswith(f"org_data_{org}.")


@pytest.mark.spec("§7.3")
async def test_list_columns_shape_types_and_field_order(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    assert (await run(yard, ctx, "add_field", table_id=table_id, field={"title": "备注", "uidt": "长文本"}))["ok"]
    assert (await run(yard, ctx, "delete_field", table_id=table_id, field_title="工号", 确认=True))["ok"]
    env = await run(yard, ctx, "list_columns", table_id=table_id)
    assert env["ok"] and env["count"] == 4 and env["table"]["id"] == table_id, env
    assert [c["title"] for c in env["data"]] == ["姓名", "城市", "金额", "备注"]
    for col in env["data"]:
        assert set(col) == COLUMN_KEYS, col
        assert isinstance(col["required"], bool) and isinstance(col["unique"], bool), col
        assert isinstance(col["options"], list), col
        assert col["precision"] is None or isinstance(col["precision"], int), col
        assert col["scale"] is None or isinstance(col["scale"], int), col


@pytest.mark.spec("§7.3")
async def test_query_page_info_over_pages(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=5)
    ctx = context(org)
    pages = []
    for offset in (0, 2, 4):
        env = await run(yard, ctx, "query", table_id=table_id, limit=2, offset=offset, sort="id")
        assert env["ok"] and set(env) >= {"list", "pageInfo"}, env
        pages.append((env["pageInfo"], [r["id"] for r in env["list"]]))
        for row in env["list"]:
            assert set(row) == {"id", "created_at", "姓名", "工号", "城市", "金额"}, row
            assert isinstance(row["id"], int) and isinstance(row["created_at"], str)
    assert [p["page"] for p, _ in pages] == [1, 2, 3]
    assert all(p["pageSize"] == 2 and p["totalRows"] == 5 for p, _ in pages)
    assert [p["isLastPage"] for p, _ in pages] == [False, False, True]
    assert [ids for _, ids in pages] == [[1, 2], [3, 4], [5]]


@pytest.mark.spec("§7.3")
async def test_aggregate_shape_alias_defaults_and_numbers(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=6)
    env = await run(
        yard,
        context(org),
        "aggregate",
        table_id=table_id,
        metrics=[{"field": "金额", "op": "sum"}, {"op": "count"}, {"field": "金额", "op": "avg", "alias": "平均"}],
        group_by="工号",
        sort="工号",
    )
    assert env["ok"] and set(env) >= {"rows", "group_by", "metrics"}, env
    assert env["group_by"] == ["工号"]
    assert [m["alias"] for m in env["metrics"]] == ["金额_sum", "count", "平均"]
    assert env["rows"] == [
        {"工号": "E0", "金额_sum": 3, "count": 2, "平均": 1.5},
        {"工号": "E1", "金额_sum": 5, "count": 2, "平均": 2.5},
        {"工号": "E2", "金额_sum": 7, "count": 2, "平均": 3.5},
    ]
    for row in env["rows"]:
        assert all(isinstance(row[k], int | float) for k in ("金额_sum", "count", "平均")), row
