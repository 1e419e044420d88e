"""The reading row functions (rows/read.py, spec §7.3, §7.4): query and aggregate."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.rows import read as rows_read
from skillyard.builtin_skills.datatable.rows.errors import RowsError

from skillyard import SkillYard
from support.datatable import context, make_table, run
from support.datatable.rows import names_by_number


async def test_query_shape_and_defaults(conn: asyncpg.Connection, people) -> None:
    result = await rows_read.query(conn, people)
    assert set(result) == {"list", "pageInfo"}
    assert result["pageInfo"] == {"totalRows": 5, "page": 1, "pageSize": 100, "isLastPage": True}
    ids = [r["id"] for r in result["list"]]
    assert ids == sorted(ids, reverse=True)  # default -id


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"field": "部门", "op": "eq", "value": "研发"}, ["张三", "王五"]),
        ({"field": "部门", "op": "ne", "value": "研发"}, ["李四", "赵六_%", "孙七"]),
        ({"field": "薪资", "op": "gt", "value": 12000.5}, ["王五", "赵六_%"]),
        ({"field": "薪资", "op": "gte", "value": "12,000.50"}, ["张三", "王五", "赵六_%"]),
        ({"field": "薪资", "op": "lt", "value": 12000.5}, ["李四"]),
        ({"field": "薪资", "op": "lte", "value": 12000.5}, ["张三", "李四"]),
        ({"field": "姓名", "op": "contains", "value": "_%"}, ["赵六_%"]),
        ({"field": "姓名", "op": "contains", "value": "四"}, ["李四"]),
        ({"field": "工号", "op": "in", "value": [1, "3", 5]}, ["张三", "王五", "孙七"]),
        ({"field": "入职日期", "op": "between", "value": ["2023-01-01", "2024-12-31"]}, ["张三", "李四"]),
        ({"field": "入职日期", "op": "is_null"}, ["赵六_%", "孙七"]),
        ({"field": "技能", "op": "not_null"}, ["张三", "王五", "赵六_%"]),
        ({"field": "在职", "op": "eq", "value": "是"}, ["张三", "王五", "孙七"]),
        ({"field": "技能", "op": "contains", "value": "Python"}, ["张三", "赵六_%"]),
        ({"field": "技能", "op": "contains", "value": ["Python", "SQL"]}, ["张三"]),
        ({"field": "技能", "op": "in", "value": ["Go", "SQL"]}, ["张三", "王五"]),
        ({"field": "技能", "op": "eq", "value": "Go"}, ["王五"]),
        ({"field": "技能", "op": "ne", "value": "Go"}, ["张三", "李四", "赵六_%", "孙七"]),
        ({"field": "打卡时间", "op": "gte", "value": "2024-05-01 08:00+08:00"}, ["张三"]),
        ({"field": "工号", "op": "eq", "value": ""}, []),
    ],
)
async def test_every_filter_op(
    conn: asyncpg.Connection, people, condition: dict[str, Any], expected: list[str]
) -> None:
    assert await names_by_number(conn, people, filters=[condition]) == expected


async def test_filters_are_anded_and_field_maps_read(conn: asyncpg.Connection, people) -> None:
    filters = [{"field": "部门", "op": "eq", "value": "研发"}, {"field": "薪资", "op": "gt", "value": 15000}]
    assert await names_by_number(conn, people, filters=filters) == ["王五"]
    assert await names_by_number(conn, people, filters={"部门": "销售"}) == ["李四", "孙七"]


async def test_bad_filters_are_refused(conn: asyncpg.Connection, people) -> None:
    for bad in (
        [{"field": "不存在", "op": "eq", "value": 1}],
        [{"field": "部门", "op": "like", "value": "x"}],
        [{"field": "工号", "op": "eq", "value": "abc"}],
        [{"field": "技能", "op": "gt", "value": "Go"}],
        [{"field": "部门", "op": "eq", "value": "{部门}"}],
    ):
        with pytest.raises(RowsError) as info:
            await rows_read.query(conn, people, filters=bad)
        assert info.value.need_param == "filters" and info.value.error_type == "recoverable"


async def test_sort_limit_offset(conn: asyncpg.Connection, people) -> None:
    result = await rows_read.query(conn, people, sort="-薪资", limit=2)
    assert [r["姓名"] for r in result["list"]] == ["王五", "赵六_%"]
    assert result["pageInfo"] == {"totalRows": 5, "page": 1, "pageSize": 2, "isLastPage": False}
    result = await rows_read.query(conn, people, sort="-薪资", limit=2, offset=4)
    assert [r["姓名"] for r in result["list"]] == ["孙七"]  # NULLs last
    assert result["pageInfo"] == {"totalRows": 5, "page": 3, "pageSize": 2, "isLastPage": True}
    result = await rows_read.query(conn, people, limit=2, offset=10)
    assert result["list"] == [] and result["pageInfo"]["totalRows"] == 5 and result["pageInfo"]["isLastPage"]
    assert (await rows_read.query(conn, people, limit=5000))["pageInfo"]["pageSize"] == 1000
    assert await names_by_number(conn, people, filters=None, limit=1) == ["张三"]
    result = await rows_read.query(conn, people, sort={"field": "姓名", "direction": "asc"}, fields=["姓名"])
    assert set(result["list"][0]) == {"id", "created_at", "姓名"}
    # sorted by a field that is not returned (carried along for the order only), full page: counted
    result = await rows_read.query(conn, people, sort="-薪资", limit=2, fields=["姓名"])
    assert result["list"] == [
        {k: v for k, v in r.items() if k in ("id", "created_at", "姓名")}
        for r in (await rows_read.query(conn, people, sort="-薪资", limit=2))["list"]
    ]
    assert [r["姓名"] for r in result["list"]] == ["王五", "赵六_%"] and result["pageInfo"]["totalRows"] == 5
    ascending = await rows_read.query(conn, people, sort="id", limit=3, offset=1)
    assert [r["id"] for r in ascending["list"]] == sorted(r["id"] for r in ascending["list"])
    assert ascending["pageInfo"] == {"totalRows": 5, "page": 1, "pageSize": 3, "isLastPage": False}
    for bad in ({"limit": 0}, {"offset": -1}, {"sort": "不存在"}, {"fields": ["不存在"]}):
        with pytest.raises(RowsError):
            await rows_read.query(conn, people, **bad)


async def test_query_empty_table(conn: asyncpg.Connection, table) -> None:
    result = await rows_read.query(conn, table)
    assert result == {"list": [], "pageInfo": {"totalRows": 0, "page": 1, "pageSize": 100, "isLastPage": True}}


async def test_aggregate_without_group_by(conn: asyncpg.Connection, people) -> None:
    result = await rows_read.aggregate(
        conn,
        people,
        metrics=[
            {"field": "薪资", "op": "sum", "alias": "总薪资"},
            {"field": "薪资", "op": "avg"},
            {"field": "薪资", "op": "max"},
            {"field": "入职日期", "op": "min"},
            {"op": "count"},
            {"field": "薪资", "op": "count", "alias": "有薪资"},
        ],
    )
    assert result["group_by"] == []
    assert [m["alias"] for m in result["metrics"]] == [
        "总薪资",
        "薪资_avg",
        "薪资_max",
        "入职日期_min",
        "count",
        "有薪资",
    ]
    (row,) = result["rows"]
    assert row == {
        "总薪资": 55000.5,
        "薪资_avg": 13750.125,
        "薪资_max": 20000,
        "入职日期_min": "2022-03-10",
        "count": 5,
        "有薪资": 4,
    }


async def test_aggregate_with_group_by(conn: asyncpg.Connection, people) -> None:
    result = await rows_read.aggregate(
        conn, people, metrics=[{"op": "count", "alias": "人数"}, {"field": "薪资", "op": "sum"}], group_by="部门"
    )
    assert result["group_by"] == ["部门"]
    assert {r["部门"]: (r["人数"], r["薪资_sum"]) for r in result["rows"]} == {
        "研发": (2, 32000.5),
        "销售": (2, 8000),
        "行政": (1, 15000),
    }
    assert len(result["rows"]) == 3
    sorted_result = await rows_read.aggregate(
        conn, people, metrics=[{"op": "count", "alias": "人数"}], group_by=["部门"], sort="-人数", limit=1
    )
    assert len(sorted_result["rows"]) == 1 and sorted_result["rows"][0]["人数"] == 2
    filtered = await rows_read.aggregate(
        conn, people, metrics={"op": "count"}, group_by="在职", filters=[{"field": "部门", "op": "ne", "value": "行政"}]
    )
    assert {r["在职"]: r["count"] for r in filtered["rows"]} == {True: 3, False: 1}
    assert (await rows_read.aggregate(conn, people, metrics={"op": "count"}, group_by="工号", limit=10**6))["rows"][0]


async def test_aggregate_refusals(conn: asyncpg.Connection, people) -> None:
    for bad in (
        {"metrics": [{"field": "姓名", "op": "sum"}]},
        {"metrics": [{"field": "在职", "op": "max"}]},
        {"metrics": [{"op": "median"}]},
        {"metrics": [{"op": "count", "alias": "部门"}], "group_by": "部门"},
        {"metrics": [{"op": "count"}], "group_by": "部门", "sort": "薪资"},
    ):
        with pytest.raises(RowsError):
            await rows_read.aggregate(conn, people, **bad)


async def test_page_boundaries_report_exact_totals(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=12)
    ctx = context(org)
    for limit, offset, total, last, size in [
        (12, 0, 12, True, 12),
        (11, 0, 12, False, 11),
        (5, 10, 12, True, 2),
        (5, 12, 12, True, 0),
        (13, 0, 12, True, 12),
    ]:
        page = await run(yard, ctx, "query", table_id=table_id, limit=limit, offset=offset)
        info = page["pageInfo"]
        assert (info["totalRows"], info["isLastPage"], len(page["list"])) == (total, last, size), (limit, offset, info)


async def test_query_rows_and_fields_parameter(yard: SkillYard, org: str, people_table: str) -> None:
    ctx = context(org)
    env = await run(yard, ctx, "query", table_id=people_table, limit=1)
    row = env["list"][0]
    assert set(row) == {"id", "created_at", "姓名", "部门", "薪资", "入职", "备注"}, row
    some = await run(yard, ctx, "query", table_id=people_table, fields=["姓名"], limit=1)
    assert some["ok"] and "姓名" in some["list"][0] and "薪资" not in some["list"][0], some
    bad = await run(yard, ctx, "query", table_id=people_table, fields=["不存在"])
    assert bad["ok"] is False


async def test_aggregate_sort_by_alias_and_limit(yard: SkillYard, org: str, people_table: str) -> None:
    env = await run(
        yard,
        context(org),
        "aggregate",
        table_id=people_table,
        metrics=[{"field": "薪资", "op": "sum", "alias": "总额"}],
        group_by="部门",
        sort="-总额",
        limit=2,
    )
    assert env["ok"], env
    assert [r["部门"] for r in env["rows"]] == ["财务", "销售"]  # 30000, 25000 (研发 23000 cut by limit)


async def test_metrics_on_unsuitable_fields_are_recoverable(yard: SkillYard, org: str, people_table: str) -> None:
    ctx = context(org)
    for metric in ({"field": "姓名", "op": "sum"}, {"field": "入职", "op": "avg"}, {"field": "部门", "op": "sum"}):
        env = await run(yard, ctx, "aggregate", table_id=people_table, metrics=[metric])
        assert env["ok"] is False and env["error_type"] == "recoverable" and not env.get("non_retriable"), env
    fine = await run(
        yard, ctx, "aggregate", table_id=people_table, metrics=[{"field": "入职", "op": "max", "alias": "最近"}]
    )
    assert fine["ok"] and str(fine["rows"][0]["最近"]).startswith("2025-06-01"), fine


@pytest.mark.spec("§7.4")
async def test_metric_alias_equal_to_a_field_name_sorts_by_the_metric(yard: SkillYard, org: str, staff: str) -> None:
    env = await run(
        yard,
        context(org),
        "aggregate",
        table_id=staff,
        metrics=[{"field": "薪资", "op": "sum", "alias": "薪资"}, {"op": "count", "alias": "姓名"}],
        group_by="部门",
        sort="-薪资",
    )
    assert env["ok"], env
    assert env["rows"] == [
        {"部门": "财务", "薪资": 30000, "姓名": 1},
        {"部门": "销售", "薪资": 25000, "姓名": 2},
        {"部门": "研发", "薪资": 23000, "姓名": 2},
    ], env


@pytest.mark.spec("§7.4")
async def test_metric_alias_colliding_with_group_by_is_refused_or_kept_apart(
    yard: SkillYard, org: str, staff: str
) -> None:
    env = await run(
        yard,
        context(org),
        "aggregate",
        table_id=staff,
        metrics=[{"op": "count", "alias": "部门"}],
        group_by="部门",
    )
    assert env["ok"] is False and env["error_type"] == "recoverable" and "部门" in env["error"], env


@pytest.mark.spec("§7.4")
async def test_aggregate_on_an_empty_table(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    flat = await run(
        yard,
        ctx,
        "aggregate",
        table_id=table_id,
        metrics=[{"op": "count"}, {"field": "金额", "op": "sum", "alias": "s"}],
    )
    assert flat["ok"] and flat["rows"] == [{"count": 0, "s": None}], flat
    grouped = await run(yard, ctx, "aggregate", table_id=table_id, metrics=[{"op": "count"}], group_by=["城市"])
    assert grouped["ok"] and grouped["rows"] == [] and grouped["group_by"] == ["城市"], grouped


@pytest.mark.spec("§7.4")
async def test_aggregate_counts_with_field_map_filters_and_notes(yard: SkillYard, org: str, staff: str) -> None:
    env = await run(
        yard,
        context(org),
        "aggregate",
        table_id=staff,
        metrics=[{"op": "count", "alias": "n"}],
        filters={"部门": "销售"},
    )
    assert env["ok"] and env["rows"] == [{"n": 2}] and env.get("action_note"), env
