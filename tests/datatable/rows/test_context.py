"""What the row actions share (rows/context.py): filter values converted like writes, row scope, JSON-ready records."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.rows import read as rows_read
from skillyard.builtin_skills.datatable.rows import write as rows_write
from skillyard.builtin_skills.datatable.rows.errors import RowsError
from skillyard.builtin_skills.datatable.rows.filters import Condition

from skillyard import SkillYard
from support.datatable import context, count, make_table, run, store_table
from support.datatable.rows import STAFF, names, names_by_number, tag_names


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["绿", "红"], {"b"}),
        (["红", "绿", "红"], {"b"}),
        ("红,绿", {"b"}),
        ("绿、红", {"b"}),
        ('["绿", "红"]', {"b"}),
        ("红", {"a"}),
        (["红"], {"a"}),
        (["蓝", "绿"], {"c"}),
        (["红", "蓝"], set()),
    ],
)
async def test_eq_and_ne_on_multi_select_compare_the_whole_set(
    yard: SkillYard, org: str, tags: str, value: Any, expected: set[str]
) -> None:
    eq = await tag_names(yard, org, tags, [{"field": "标签", "op": "eq", "value": value}])
    assert eq["ok"] and eq["names"] == expected, eq
    ne = await tag_names(yard, org, tags, [{"field": "标签", "op": "ne", "value": value}])
    assert ne["ok"] and ne["names"] == {"a", "b", "c", "d"} - expected, ne


@pytest.mark.parametrize("value", [["红", "黄"], "红,黄", ["黄"], [], ["红", ""], ["红", ["绿"]], ["红", 1]])
@pytest.mark.parametrize("op", ["eq", "ne"])
async def test_eq_and_ne_on_multi_select_refuse_what_a_write_refuses(
    yard: SkillYard, org: str, tags: str, conn: Any, op: str, value: Any
) -> None:
    env = await run(
        yard,
        context(org, chat_mode=False),
        "delete_by",
        table_id=tags,
        filters=[{"field": "标签", "op": op, "value": value}],
    )
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert await count(conn, org, "标签表") == 4


async def test_decimal_output_is_exact(conn: asyncpg.Connection, schema: str) -> None:
    table = await store_table(conn, schema, [{"title": "值", "uidt": "高精度数字"}, {"title": "钱", "uidt": "金额"}])
    record = await rows_write.insert(conn, table, {"值": "0.123456789012345678", "钱": "100.00"})
    assert record["值"] == "0.123456789012345678"  # not representable as a float: decimal text
    assert record["钱"] == 100


async def test_extra_conditions_restrict_every_action(conn: asyncpg.Connection, people) -> None:
    u1 = [Condition("负责人", "eq", "u1")]
    assert await names_by_number(conn, people, extra_conditions=u1) == ["张三", "李四"]
    assert await names_by_number(conn, people, filters={"部门": "研发"}, extra_conditions=u1) == ["张三"]
    agg = await rows_read.aggregate(conn, people, metrics={"op": "count"}, extra_conditions=u1)
    assert agg["rows"] == [{"count": 2}]
    assert await rows_read.count_matching(conn, people, {"部门": "研发"}, extra_conditions=u1) == 1
    all_ids = [
        r["id"] for r in await rows_read.fetch_rows(conn, people, filters=[{"field": "id", "op": "gt", "value": 0}])
    ]
    assert len(await rows_read.fetch_rows(conn, people, row_ids=all_ids, extra_conditions=u1)) == 2
    assert (await rows_write.update_by(conn, people, {"在职": True}, {"薪资": 1}, extra_conditions=u1)) == {
        "updated": 1
    }
    assert await rows_write.delete_rows(conn, people, row_ids=all_ids, extra_conditions=u1) == 2
    assert await rows_read.count_matching(conn, people, None) == 3
    with pytest.raises(RowsError) as info:
        await rows_read.query(conn, people, extra_conditions=[Condition("不存在", "eq", 1)])
    assert info.value.error_type == "config"


@pytest.mark.spec("§7.7")
@pytest.mark.spec("§3.5")
async def test_empty_filters_and_row_ids_are_refused(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org, chat_mode=False)
    for action, params in [
        ("delete_by", {"filters": []}),
        ("delete_by", {"filters": {}}),
        ("delete_by", {"filters": ""}),
        ("delete_by", {"filters": "[]"}),
        ("delete_by", {}),
        ("delete_batch", {"row_ids": []}),
        ("delete_batch", {}),
        ("update_by", {"filters": [], "data": {"城市": "北京"}}),
        ("update_by", {"filters": "[]", "data": {"城市": "北京"}}),
    ]:
        env = await run(yard, ctx, action, table_id=table_id, **params)
        assert env["ok"] is False and env["error_type"] == "recoverable", (action, params, env)
    assert await count(conn, org) == 3
    assert await count(conn, org, where="WHERE 城市 = '北京'") == 0


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    "bounds",
    [["8000", "20000"], ["８０００", "２０，０００"], [8000.0, "20000"]],
)
async def test_between_bounds_are_converted_like_writes(yard: SkillYard, org: str, staff: str, bounds: Any) -> None:
    """references/actions.md: filter values are converted like a write to the field's type; between is inclusive."""
    env = await names(yard, org, staff, [{"field": "薪资", "op": "between", "value": bounds}])
    assert env["ok"] and env["names"] == {"张三", "李四", "王五"}, env


@pytest.mark.spec("§7.4")
async def test_reversed_between_bounds_never_widen_the_result(yard: SkillYard, org: str, staff: str) -> None:
    """between is [low, high], both inclusive: reversed bounds select nothing (or are refused), never more rows."""
    for value, field in (([20000, 8000], "薪资"), (["20000", "8000"], "薪资"), (["2024-12-31", "2024-01-01"], "入职")):
        env = await names(yard, org, staff, [{"field": field, "op": "between", "value": value}])
        assert (env["ok"] and env["names"] == set()) or env["error_type"] == "recoverable", (value, env)


@pytest.mark.spec("§7.4")
async def test_reversed_between_bounds_of_ordered_types_are_refused(yard: SkillYard, org: str, staff: str) -> None:
    """Numbers given as text and dates compare after conversion, so reversed bounds are refused with the fix, as
    reversed numbers are; texts are left to the database collation (an empty result, never more rows)."""
    for value, field in ((["20,000", "8000"], "薪资"), (["2024-12-31", "2024-01-01"], "入职")):
        env = await names(yard, org, staff, [{"field": field, "op": "between", "value": value}])
        assert env["ok"] is False and env["error_type"] == "recoverable", (value, env)
        assert "lower bound first" in env["error"] and env["need_param"] == "filters", env
    same_day = await names(
        yard, org, staff, [{"field": "入职", "op": "between", "value": ["2024-01-01", "2024-01-01"]}]
    )
    assert same_day["ok"], same_day
    text = await names(yard, org, staff, [{"field": "姓名", "op": "between", "value": ["张三", "李四"]}])
    assert text["ok"], text


@pytest.mark.spec("§7.4")
async def test_in_with_a_huge_list_and_converted_values(yard: SkillYard, org: str, staff: str) -> None:
    huge = [*range(100000, 105000), "８０００", "15,000"]
    env = await names(yard, org, staff, [{"field": "薪资", "op": "in", "value": huge}])
    assert env["ok"] and env["names"] == {"张三", "李四"}, env
    ids = await names(yard, org, staff, [{"field": "id", "op": "in", "value": [str(i) for i in range(1, 3000)]}])
    assert ids["ok"] and len(ids["names"]) == 5, ids


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        ({"field": "入职", "op": "gte", "value": "2025-01-01"}, {"王五", "赵六"}),
        ({"field": "入职", "op": "lt", "value": "2024-01-01"}, {"钱七"}),
        ({"field": "入职", "op": "in", "value": ["2024-01-01", "2025-06-01"]}, {"张三", "赵六"}),
        ({"field": "created_at", "op": "gt", "value": "2000-01-01"}, {r["姓名"] for r in STAFF}),
        ({"field": "部门", "op": "in", "value": ["研发", " 财务 "]}, {"张三", "李四", "赵六"}),
        ({"field": "标签", "op": "eq", "value": ["绿", "红"]}, {"李四"}),
        ({"field": "标签", "op": "eq", "value": "红,绿"}, {"李四"}),
    ],
)
async def test_typed_comparisons(
    yard: SkillYard, org: str, staff: str, cond: dict[str, Any], expected: set[str]
) -> None:
    env = await names(yard, org, staff, [cond])
    assert env["ok"] and env["names"] == expected, env


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    "cond",
    [
        {"field": "薪资", "op": "gt", "value": "1.5万"},
        {"field": "薪资", "op": "eq", "value": "abc"},
        {"field": "入职", "op": "gt", "value": "2024/01/01"},
        {"field": "标签", "op": "gt", "value": "红"},
        {"field": "标签", "op": "contains", "value": "黄"},
    ],
)
async def test_filter_values_a_write_would_refuse_are_errors(
    yard: SkillYard, org: str, staff: str, conn: Any, cond: dict[str, Any]
) -> None:
    env = await run(yard, context(org, chat_mode=False), "delete_by", table_id=staff, filters=[cond])
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert await count(conn, org, "员工") == 5
