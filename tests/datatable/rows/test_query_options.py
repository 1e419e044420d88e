"""Sort, paging, metrics and grouping (rows/query_options.py, spec §7.4), in Python and through the skill."""

from __future__ import annotations

from typing import Any

import pytest
from skillyard.builtin_skills.datatable.rows import query_options
from skillyard.builtin_skills.datatable.rows.filters import FilterError
from skillyard.builtin_skills.datatable.rows.query_options import Metric

from skillyard import SkillYard
from support.datatable import big_table, context, run, unload
from support.datatable.rows import KNOWN


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, ("id", True)),
        ("", ("id", True)),
        ([], ("id", True)),
        ("薪资", ("薪资", False)),
        ("-薪资", ("薪资", True)),
        ("+薪资", ("薪资", False)),
        (" - 薪资 ", ("薪资", True)),
        ("薪资 desc", ("薪资", True)),
        ("薪资 ASC", ("薪资", False)),
        (["-薪资"], ("薪资", True)),
        ({"field": "薪资", "direction": "desc"}, ("薪资", True)),
        ({"field": "薪资", "order": "ASC"}, ("薪资", False)),
        ({"field": "薪资", "desc": True}, ("薪资", True)),
        ({"field": "薪资"}, ("薪资", False)),
        ("id", ("id", False)),
        ("-created_at", ("created_at", True)),
    ],
)
def test_sort(raw: Any, expected: tuple[str, bool]) -> None:
    assert query_options.parse_sort(raw, KNOWN) == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("地区", "unknown field '地区'"),
        ("-地区", "unknown field '地区'"),
        ("-", "must be a field name"),
        ("薪资,部门", "single field"),
        (["薪资", "部门"], "single field"),
        ({"field": "薪资", "direction": "down"}, "asc or desc"),
        ({"column": "薪资"}, "optional"),
        (5, "field name"),
        ("{sort_field}", "unresolved reference"),
        ("-$steps.a", "unresolved reference"),
    ],
)
def test_bad_sort(raw: Any, fragment: str) -> None:
    with pytest.raises(FilterError) as info:
        query_options.parse_sort(raw, KNOWN)
    assert fragment in str(info.value)


def test_caps() -> None:
    assert (query_options.QUERY_DEFAULT, query_options.QUERY_CAP) == (100, 1000)
    assert (query_options.AGGREGATE_DEFAULT, query_options.AGGREGATE_CAP) == (1000, 10000)


@pytest.mark.parametrize(
    ("raw", "default", "cap", "expected"),
    [
        (None, 100, 1000, 100),
        ("", 100, 1000, 100),
        (50, 100, 1000, 50),
        ("50", 100, 1000, 50),
        (" 50 ", 100, 1000, 50),
        (50.0, 100, 1000, 50),
        (1, 100, 1000, 1),
        (1000, 100, 1000, 1000),
        (1001, 100, 1000, 1000),
        (10**9, 100, 1000, 1000),
        (None, 1000, 10000, 1000),
        (20000, 1000, 10000, 10000),
        (5000, 1000, 10000, 5000),
    ],
)
def test_clamp_limit(raw: Any, default: int, cap: int, expected: int) -> None:
    assert query_options.clamp_limit(raw, default=default, cap=cap) == expected


@pytest.mark.parametrize("raw", [0, -1, "-5", "abc", 1.5, True, "1e3", [10], "１０"])
def test_bad_limit(raw: Any) -> None:
    with pytest.raises(FilterError, match="limit"):
        query_options.clamp_limit(raw, default=100, cap=1000)


@pytest.mark.parametrize(("raw", "expected"), [(None, 0), ("", 0), (0, 0), (20, 20), ("20", 20), (10**6, 10**6)])
def test_offset(raw: Any, expected: int) -> None:
    assert query_options.parse_offset(raw) == expected


@pytest.mark.parametrize("raw", [-1, "-1", "x", 2.5, False, "--5"])
def test_bad_offset(raw: Any) -> None:
    with pytest.raises(FilterError, match="offset"):
        query_options.parse_offset(raw)


def test_metrics() -> None:
    raw = [
        {"field": "薪资", "op": "sum", "alias": "总薪资"},
        {"field": "薪资", "op": "AVG"},
        {"field": "薪资", "op": "max"},
        {"field": "入职日期", "op": "min", "alias": " 最早 "},
        {"op": "count"},
        {"field": "部门", "op": "count", "alias": "有部门"},
        {"field": "*", "op": "count", "alias": "全部"},
    ]
    assert query_options.parse_metrics(raw, KNOWN) == [
        Metric("sum", "薪资", "总薪资"),
        Metric("avg", "薪资", "薪资_avg"),
        Metric("max", "薪资", "薪资_max"),
        Metric("min", "入职日期", "最早"),
        Metric("count", None, "count"),
        Metric("count", "部门", "有部门"),
        Metric("count", None, "全部"),
    ]


def test_metric_ops() -> None:
    assert frozenset({"sum", "avg", "max", "min", "count"}) == query_options.METRIC_OPS


def test_a_single_metric_object_and_json_text() -> None:
    assert query_options.parse_metrics({"op": "count"}, KNOWN) == [Metric("count", None, "count")]
    assert query_options.parse_metrics('[{"field": "薪资", "op": "sum"}]', KNOWN) == [Metric("sum", "薪资", "薪资_sum")]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (None, "non-empty array"),
        ([], "non-empty array"),
        ("sum(薪资)", "must be an array"),
        (5, "non-empty array"),
        (["sum"], "not an object"),
        ([{"field": "薪资", "op": "median"}], "op must be one of"),
        ([{"field": "薪资"}], "op must be one of"),
        ([{"op": "sum"}], "sum needs a field"),
        ([{"field": "*", "op": "avg"}], "unknown field '*'"),
        ([{"field": "地区", "op": "count"}], "unknown field '地区'"),
        ([{"field": "薪资", "op": "sum", "as": "x"}], "unknown key(s) as"),
        ([{"field": "薪资", "op": "sum", "alias": 5}], "alias must be a text"),
        ([{"field": "薪资", "op": "sum", "alias": 'a"b'}], "without quotes"),
        ([{"field": "薪资", "op": "sum", "alias": "x" * 51}], "at most 50"),
        ([{"field": "薪资", "op": "sum"}, {"field": "薪资", "op": "sum"}], "used twice"),
        ([{"op": "count"}, {"op": "count"}], "used twice"),
        ([{"field": "{f}", "op": "sum"}], "unresolved reference"),
        ([{"field": "薪资", "op": "sum", "alias": "$steps.a"}], "unresolved reference"),
    ],
)
def test_bad_metrics(raw: Any, fragment: str) -> None:
    with pytest.raises(FilterError) as info:
        query_options.parse_metrics(raw, KNOWN)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, []),
        ("", []),
        ([], []),
        ("部门", ["部门"]),
        (" 部门 ", ["部门"]),
        ("部门,姓名", ["部门", "姓名"]),
        ("部门，姓名", ["部门", "姓名"]),
        (["部门", "姓名"], ["部门", "姓名"]),
        (("部门",), ["部门"]),
        (["部门", "部门"], ["部门"]),
        ("created_at", ["created_at"]),
    ],
)
def test_group_by(raw: Any, expected: list[str]) -> None:
    assert query_options.parse_group_by(raw, KNOWN) == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("地区", "unknown field '地区'"),
        (["部门", "地区"], "group_by[1]: unknown field '地区'"),
        ("部门,", "must be a field name"),
        ([None], "must be a field name"),
        ({"field": "部门"}, "field name or an array"),
        (5, "field name or an array"),
        ("{group}", "unresolved reference"),
    ],
)
def test_bad_group_by(raw: Any, fragment: str) -> None:
    with pytest.raises(FilterError) as info:
        query_options.parse_group_by(raw, KNOWN)
    assert fragment in str(info.value)


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize("params", [{"sort": "{{ sort }}"}, {"sort": "-{排序}"}], ids=["double-braces", "non-ascii"])
async def test_sort_with_a_placeholder_is_refused(yard: SkillYard, org: str, tags: str, params: dict[str, Any]) -> None:
    env = await run(yard, context(org), "query", table_id=tags, **params)
    assert env["ok"] is False and env["error_type"] == "recoverable" and "unresolved" in env["error"], env


@pytest.mark.spec("§7.4")
async def test_group_by_with_a_placeholder_is_refused(yard: SkillYard, org: str, tags: str) -> None:
    env = await run(yard, context(org), "aggregate", table_id=tags, metrics=[{"op": "count"}], group_by="{ 分组 }")
    assert env["ok"] is False and env["error_type"] == "recoverable" and "unresolved" in env["error"], env


@pytest.mark.spec("§7.4")
async def test_sort_default_is_id_desc_and_minus_prefix(yard: SkillYard, org: str, people_table: str) -> None:
    ctx = context(org)
    default = await run(yard, ctx, "query", table_id=people_table)
    ids = [r["id"] for r in default["list"]]
    assert ids == sorted(ids, reverse=True)
    desc = await run(yard, ctx, "query", table_id=people_table, sort="-薪资")
    assert [r["薪资"] for r in desc["list"]] == [30000, 20000, 15000, 8000, 5000]
    asc = await run(yard, ctx, "query", table_id=people_table, sort="薪资", limit=2, offset=1)
    assert [r["薪资"] for r in asc["list"]] == [8000, 15000]
    info = asc["pageInfo"]
    assert set(info) >= {"totalRows", "page", "pageSize", "isLastPage"} and info["totalRows"] == 5
    bad = await run(yard, ctx, "query", table_id=people_table, sort="岗位")
    assert bad["ok"] is False
    two = await run(yard, ctx, "query", table_id=people_table, sort=["薪资", "姓名"])
    assert two["ok"] is False


@pytest.mark.spec("§7.4")
async def test_metrics_with_alias_and_group_by_field_or_list(yard: SkillYard, org: str, people_table: str) -> None:
    ctx = context(org)
    metrics = [
        {"field": "薪资", "op": "sum", "alias": "总薪资"},
        {"field": "薪资", "op": "avg", "alias": "平均"},
        {"field": "薪资", "op": "max", "alias": "最高"},
        {"field": "薪资", "op": "min", "alias": "最低"},
        {"op": "count", "alias": "人数"},
    ]
    flat = await run(yard, ctx, "aggregate", table_id=people_table, metrics=metrics)
    assert flat["ok"] and set(flat) >= {"rows", "group_by", "metrics"}, flat
    (row,) = flat["rows"]
    assert float(row["总薪资"]) == 78000 and float(row["平均"]) == 15600
    assert float(row["最高"]) == 30000 and float(row["最低"]) == 5000 and row["人数"] == 5
    grouped = await run(yard, ctx, "aggregate", table_id=people_table, metrics=metrics[4:], group_by="部门")
    assert {r["部门"]: r["人数"] for r in grouped["rows"]} == {"研发": 2, "销售": 2, "财务": 1}
    assert grouped["group_by"] == ["部门"] or grouped["group_by"] == "部门"
    both = await run(yard, ctx, "aggregate", table_id=people_table, metrics=metrics[:1], group_by=["部门", "姓名"])
    assert len(both["rows"]) == 5 and all("部门" in r and "姓名" in r and "总薪资" in r for r in both["rows"])
    filtered = await run(
        yard,
        ctx,
        "aggregate",
        table_id=people_table,
        metrics=metrics[4:],
        filters=[{"field": "部门", "op": "eq", "value": "研发"}],
    )
    assert filtered["rows"][0]["人数"] == 2
    bad = await run(yard, ctx, "aggregate", table_id=people_table, metrics=[{"field": "薪资", "op": "median"}])
    assert bad["ok"] is False


@pytest.mark.spec("§7.4")
async def test_query_limit_default_100_cap_1000(yard: SkillYard, org: str) -> None:
    table_id = await big_table(yard, org, 1100)
    ctx = context(org)
    default = await run(yard, ctx, "query", table_id=table_id)
    assert len(default["list"]) == 100 and default["pageInfo"]["totalRows"] == 1100
    capped = await run(yard, ctx, "query", table_id=table_id, limit=5000)
    capped = unload(capped)
    assert capped["ok"] and len(capped["list"]) == 1000


@pytest.mark.spec("§7.4")
async def test_aggregate_limit_default_1000_cap_10000(yard: SkillYard, org: str) -> None:
    table_id = await big_table(yard, org, 10050)
    ctx = context(org)
    metrics = [{"op": "count", "alias": "n"}]
    default = unload(await run(yard, ctx, "aggregate", table_id=table_id, metrics=metrics, group_by="组"))
    assert default["ok"] and len(default["rows"]) == 1000
    capped = unload(await run(yard, ctx, "aggregate", table_id=table_id, metrics=metrics, group_by="组", limit=50000))
    assert capped["ok"] and len(capped["rows"]) == 10000


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    ("sort", "first"),
    [
        ("-薪资", "赵六"),
        ("+薪资", "钱七"),
        ("薪资 desc", "赵六"),
        ("-入职", "赵六"),
        ("created_at", "张三"),
        ("-id", "钱七"),
    ],
)
async def test_sort_forms(yard: SkillYard, org: str, staff: str, sort: str, first: str) -> None:
    env = await run(yard, context(org), "query", table_id=staff, sort=sort)
    assert env["ok"] and env["list"][0]["姓名"] == first, env


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize("sort", ["-不存在", "薪资,姓名", "{sort_field}", "--薪资", 5])
async def test_bad_sort_is_an_error(yard: SkillYard, org: str, staff: str, sort: Any) -> None:
    env = await run(yard, context(org), "query", table_id=staff, sort=sort)
    assert env["ok"] is False and env["error_type"] == "recoverable", env


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    "params",
    [{"limit": -1}, {"limit": 0}, {"limit": "abc"}, {"limit": 2.5}, {"offset": -1}, {"offset": "x"}, {"limit": True}],
)
async def test_bad_limit_or_offset_is_a_recoverable_error(
    yard: SkillYard, org: str, staff: str, params: dict[str, Any]
) -> None:
    env = await run(yard, context(org), "query", table_id=staff, **params)
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    if "limit" not in params:  # aggregate takes limit, not offset (references/actions.md)
        return
    agg = await run(
        yard, context(org), "aggregate", table_id=staff, metrics=[{"op": "count"}], group_by="部门", **params
    )
    assert agg["ok"] is False and agg["error_type"] == "recoverable", agg


@pytest.mark.spec("§7.4")
async def test_limit_as_text_and_offset_past_the_end(yard: SkillYard, org: str, staff: str) -> None:
    ctx = context(org)
    two = await run(yard, ctx, "query", table_id=staff, limit="2", sort="薪资")
    assert two["ok"] and [r["姓名"] for r in two["list"]] == ["钱七", "张三"], two
    past = await run(yard, ctx, "query", table_id=staff, limit=2, offset=50)
    assert past["ok"] and past["list"] == [], past
    assert past["pageInfo"]["totalRows"] == 5 and past["pageInfo"]["isLastPage"] is True, past


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    "params",
    [
        {"metrics": [{"op": "count"}], "group_by": ["部门", "不存在"]},
        {"metrics": [{"op": "count"}], "group_by": "{group}"},
        {"metrics": [{"field": "不存在", "op": "max"}]},
        {"metrics": [{"op": "count"}, {"op": "count"}]},
        {"metrics": []},
        {"metrics": [{"op": "count"}], "filters": [{"field": "不存在", "op": "eq", "value": 1}]},
    ],
)
async def test_aggregate_unreadable_parameters_are_errors(
    yard: SkillYard, org: str, staff: str, params: dict[str, Any]
) -> None:
    env = await run(yard, context(org), "aggregate", table_id=staff, **params)
    assert env["ok"] is False and env["error_type"] == "recoverable", env
