"""The datatable skill's filters and upsert keys beyond test_datatable_filters.py: unresolved references whatever
the name in the braces (spec §7.4), eq / ne on 多选 fields converted like a write, and upsert keys compared on the
converted values with SQLSTATE 21000 classified as recoverable (§7.8.4)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from support.datatable_probes import context, count, run
from support.datatable import load_datatable_module
from skillyard import SkillYard

pytestmark = pytest.mark.usefixtures("home", "db_env")

filters = load_datatable_module("filters")
rows_errors = load_datatable_module("rows_errors")
FilterError = filters.FilterError
parse_filters = filters.parse_filters

KNOWN = ["备注", "标签", "薪资"]

# ====================================================================================================================
# §7.4 unresolved references (pure)

PLACEHOLDERS = ["{部门}", "{{ dept }}", "{ dept }", "{{部门}}", "{step.output}", "{a-b}", "前{_x}后", "{ 名称_2 }"]
NOT_PLACEHOLDERS = ['{"a": 1}', "{}", "{ }", "{1,2}", "{1}", "{a,b}", '{"k": [1, 2]}', '{\n  "a": 1\n}', "a{", "{2x}"]


def _shapes(value: Any) -> dict[str, Any]:
    return {
        "array": [{"field": "备注", "op": "eq", "value": value}],
        "field-map": {"备注": value},
        "in": [{"field": "备注", "op": "in", "value": ["x", value]}],
        "between": [{"field": "备注", "op": "between", "value": ["a", value]}],
        "single-object": {"field": "备注", "op": "ne", "value": value},
    }


@pytest.mark.parametrize("shape", list(_shapes("")))
@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_placeholders_with_any_name_are_refused_in_every_shape(value: str, shape: str) -> None:
    with pytest.raises(FilterError, match="unresolved reference"):
        parse_filters(_shapes(value)[shape], KNOWN)


@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_placeholders_are_refused_in_a_json_text_of_filters(value: str) -> None:
    import json

    with pytest.raises(FilterError, match="unresolved reference"):
        parse_filters(json.dumps([{"field": "备注", "op": "eq", "value": value}], ensure_ascii=False), KNOWN)


@pytest.mark.parametrize("shape", ["array", "in", "between"])
@pytest.mark.parametrize("value", NOT_PLACEHOLDERS)
def test_json_text_empty_braces_and_array_literals_are_values(value: str, shape: str) -> None:
    conditions, _ = parse_filters(_shapes(value)[shape], KNOWN)
    (condition,) = conditions
    assert condition.value == value or value in condition.value, conditions


# ====================================================================================================================
# §7.4 unresolved references (through the skill)


@pytest.fixture
async def tags(yard: SkillYard, org: str) -> str:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="标签表",
        fields=[
            {"title": "名称", "uidt": "文本"},
            {"title": "标签", "uidt": "多选", "options": ["红", "绿", "蓝"]},
            {"title": "城市", "uidt": "单选", "options": ["上海", "北京"]},
            {"title": "附加", "uidt": "JSON"},
        ],
    )
    assert made["ok"], made
    records = [
        {"名称": "a", "标签": ["红"], "城市": "上海", "附加": {"a": 1}},
        {"名称": "b", "标签": ["红", "绿"], "附加": [1, 2]},
        {"名称": "c", "标签": ["绿", "蓝"], "城市": "北京"},
        {"名称": "d"},
    ]
    batch = await run(yard, ctx, "insert_batch", table_id=made["id"], records=records)
    assert batch["inserted"] == 4, batch
    return str(made["id"])


async def _names(yard: SkillYard, org: str, table_id: str, filters: Any) -> dict[str, Any]:
    env = await run(yard, context(org), "query", table_id=table_id, filters=filters)
    if env["ok"]:
        env["names"] = {r["名称"] for r in env["list"]}
    return env


@pytest.mark.parametrize("value", ["{部门}", "{{ dept }}", "{ dept }"])
async def test_delete_by_with_a_placeholder_deletes_nothing(
    yard: SkillYard, org: str, tags: str, conn: Any, value: str
) -> None:
    env = await run(
        yard,
        context(org, chat_mode=False),
        "delete_by",
        table_id=tags,
        filters=[{"field": "名称", "op": "in", "value": ["a", value]}],
    )
    assert env["ok"] is False and env["error_type"] == "recoverable" and "unresolved" in env["error"], env
    assert await count(conn, org, "标签表") == 4


@pytest.mark.parametrize("params", [{"sort": "{{ sort }}"}, {"sort": "-{排序}"}], ids=["double-braces", "non-ascii"])
async def test_sort_with_a_placeholder_is_refused(yard: SkillYard, org: str, tags: str, params: dict[str, Any]) -> None:
    env = await run(yard, context(org), "query", table_id=tags, **params)
    assert env["ok"] is False and env["error_type"] == "recoverable" and "unresolved" in env["error"], env


async def test_group_by_with_a_placeholder_is_refused(yard: SkillYard, org: str, tags: str) -> None:
    env = await run(yard, context(org), "aggregate", table_id=tags, metrics=[{"op": "count"}], group_by="{ 分组 }")
    assert env["ok"] is False and env["error_type"] == "recoverable" and "unresolved" in env["error"], env


async def test_json_text_and_array_literals_are_filter_values(yard: SkillYard, org: str, tags: str) -> None:
    """A JSON field's value is JSON text; braces that hold no name are a value, never a refused reference."""
    by_json = await _names(yard, org, tags, [{"field": "附加", "op": "eq", "value": '{"a": 1}'}])
    assert by_json["ok"] and by_json["names"] == {"a"}, by_json
    literal = await _names(yard, org, tags, [{"field": "名称", "op": "in", "value": ["{1,2}", "{}"]}])
    assert literal["ok"] and literal["names"] == set(), literal


# ====================================================================================================================
# eq / ne on 多选: converted like a write, the whole set compared


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
    eq = await _names(yard, org, tags, [{"field": "标签", "op": "eq", "value": value}])
    assert eq["ok"] and eq["names"] == expected, eq
    ne = await _names(yard, org, tags, [{"field": "标签", "op": "ne", "value": value}])
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


async def test_lists_stay_refused_for_eq_on_other_fields_and_for_order_ops(
    yard: SkillYard, org: str, tags: str
) -> None:
    single = await _names(yard, org, tags, [{"field": "城市", "op": "eq", "value": ["上海", "北京"]}])
    assert single["ok"] is False and "use in" in single["error"], single
    ordered = await _names(yard, org, tags, [{"field": "标签", "op": "gt", "value": ["红"]}])
    assert ordered["ok"] is False and ordered["error_type"] == "recoverable", ordered
    one = await _names(yard, org, tags, [{"field": "城市", "op": "eq", "value": "上海"}])
    assert one["ok"] and one["names"] == {"a"}, one


def test_parse_filters_takes_a_list_for_eq_only_on_array_fields() -> None:
    conditions, _ = parse_filters([{"field": "标签", "op": "eq", "value": ["绿", "红"]}], KNOWN, array_fields={"标签"})
    assert conditions == [filters.Condition("标签", "eq", ["绿", "红"])]
    with pytest.raises(FilterError, match="use in"):
        parse_filters([{"field": "标签", "op": "eq", "value": ["绿", "红"]}], KNOWN)
    with pytest.raises(FilterError, match="use in"):
        parse_filters([{"field": "备注", "op": "ne", "value": ["x"]}], KNOWN, array_fields={"标签"})


# ====================================================================================================================
# upsert: keys compared on the converted values; 21000 is recoverable


async def _keyed_table(yard: SkillYard, org: str) -> str:
    made = await run(
        yard,
        context(org),
        "create_table",
        table_name="键表",
        fields=[
            {"title": "时刻", "uidt": "日期时间"},
            {"title": "价格", "uidt": "数字"},
            {"title": "标签", "uidt": "多选", "options": ["红", "绿"]},
            {"title": "备注", "uidt": "文本"},
        ],
    )
    assert made["ok"], made
    return str(made["id"])


@pytest.mark.parametrize(
    ("key", "first", "second"),
    [
        ("时刻", "2024-01-01T10:00:00+08:00", "2024-01-01T02:00:00Z"),
        ("时刻", "2024-01-01 02:00", "2024-01-01T02:00:00+00:00"),
        ("价格", "1.5", "1.50"),
        ("价格", 2, "2.001"),
        ("标签", ["绿", "红"], "红,绿"),
    ],
)
async def test_upsert_collapses_keys_equal_after_conversion(
    yard: SkillYard, org: str, conn: Any, key: str, first: Any, second: Any
) -> None:
    """The later record wins and the earlier one is reported, as for a key written twice the same way; the same
    call again updates that one row instead of failing."""
    table_id = await _keyed_table(yard, org)
    ctx = context(org)
    records = [{key: first, "备注": "x"}, {key: second, "备注": "y"}]
    env = await run(yard, ctx, "upsert", table_id=table_id, key_fields=key, records=records)
    assert env["ok"] and (env["inserted"], env["updated"], env["failed"]) == (1, 0, 1), env
    assert env["errors"][0]["row"] == 1 and "same key as row 2" in env["errors"][0]["error"], env
    again = await run(yard, ctx, "upsert", table_id=table_id, key_fields=key, records=records)
    assert again["ok"] and (again["inserted"], again["updated"], again["failed"]) == (0, 1, 1), again
    assert again["verified_total"] == 1, again
    assert await count(conn, org, "键表") == 1 and await count(conn, org, "键表", "WHERE 备注 = 'y'") == 1


async def test_upsert_keeps_distinct_keys_apart(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await _keyed_table(yard, org)
    records = [
        {"时刻": "2024-01-01T10:00:00+08:00", "备注": "x"},
        {"时刻": "2024-01-01T10:00:00Z", "备注": "y"},
    ]
    env = await run(yard, context(org), "upsert", table_id=table_id, key_fields="时刻", records=records)
    assert env["ok"] and (env["inserted"], env["failed"]) == (2, 0), env
    assert await count(conn, org, "键表") == 2


async def test_cardinality_violation_is_recoverable(conn: Any) -> None:
    """§7.8.4: classified by SQLSTATE — 21000 (a MERGE target row matched twice) is the caller's input to fix."""
    await conn.execute("CREATE TEMP TABLE twice (k int, v text)")
    await conn.execute("INSERT INTO twice VALUES (1, 'a')")
    with pytest.raises(asyncpg.PostgresError) as info:
        await conn.execute(
            "MERGE INTO twice AS t USING (VALUES (1, 'b'), (1, 'c')) AS s(k, v) ON t.k = s.k "
            "WHEN MATCHED THEN UPDATE SET v = s.v"
        )
    assert info.value.sqlstate == "21000"
    error = rows_errors.classify(info.value)
    assert error.error_type == "recoverable" and error.sqlstate == "21000", error
    assert "send each key once" in str(error) and error.need_param == "records", error
