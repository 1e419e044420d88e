"""Filters (rows/filters.py, spec §7.4): the filters parameter → conditions → SQL, the shapes tolerated and reported,
what is refused (never silently dropped), in Python and through the skill."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from skillyard.builtin_skills.datatable.rows import filters
from skillyard.builtin_skills.datatable.rows.filters import Condition, FilterError, compile_conditions, parse_filters

from skillyard import SkillYard
from support.datatable import context, count, run
from support.datatable.rows import KNOWN, STAFF, names, tag_names


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def parsed(raw: Any) -> list[Any]:
    conditions, notes = parse_filters(raw, KNOWN)
    assert notes == [], notes
    return conditions


def bad(raw: Any, *fragments: str) -> str:
    with pytest.raises(FilterError) as info:
        parse_filters(raw, KNOWN)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


KNOWN_TAGGED = ["备注", "标签", "薪资"]


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


def test_ops() -> None:
    assert (
        frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "contains", "in", "between", "is_null", "not_null"})
        == filters.OPS
    )


@pytest.mark.parametrize("empty", [None, "", [], {}, "[]", "null"])
def test_no_filters(empty: Any) -> None:
    conditions, _ = parse_filters(empty, KNOWN)
    assert conditions == []


def test_the_spec_example() -> None:
    assert parsed(
        [{"field": "部门", "op": "eq", "value": "研发"}, {"field": "薪资", "op": "between", "value": [8000, 20000]}]
    ) == [Condition("部门", "eq", "研发"), Condition("薪资", "between", [8000, 20000])]


@pytest.mark.parametrize(
    ("op", "value"),
    [
        ("eq", "研发"),
        ("eq", 5),
        ("eq", True),
        ("eq", Decimal("1.5")),
        ("eq", date(2024, 5, 1)),
        ("ne", "研发"),
        ("gt", 5),
        ("gte", 5.5),
        ("lt", "2024-05-01"),
        ("lte", 0),
        ("contains", "研"),
        ("contains", 12),
        ("contains", ["a", "b"]),
        ("in", ["研发", "销售"]),
        ("in", [1]),
        ("between", [1, 2]),
        ("between", ["2024-01-01", "2024-12-31"]),
    ],
)
def test_every_op_keeps_its_raw_value(op: str, value: Any) -> None:
    assert parsed([{"field": "薪资", "op": op, "value": value}]) == [Condition("薪资", op, value)]


def test_in_and_between_values_become_lists() -> None:
    assert parsed([{"field": "薪资", "op": "in", "value": (1, 2)}]) == [Condition("薪资", "in", [1, 2])]
    assert parsed([{"field": "薪资", "op": "between", "value": (1, 2)}]) == [Condition("薪资", "between", [1, 2])]


@pytest.mark.parametrize("op", ["is_null", "not_null"])
@pytest.mark.parametrize("item", [{}, {"value": None}, {"value": ""}, {"value": True}])
def test_null_ops_take_no_value(op: str, item: dict[str, Any]) -> None:
    assert parsed([{"field": "部门", "op": op, **item}]) == [Condition("部门", op, None)]


@pytest.mark.parametrize("op", ["is_null", "not_null"])
def test_null_ops_refuse_a_value(op: str) -> None:
    bad([{"field": "部门", "op": op, "value": False}], "takes no value", "omit value")
    bad([{"field": "部门", "op": op, "value": "研发"}], "takes no value")


def test_ops_are_case_insensitive_and_stripped() -> None:
    assert parsed([{"field": "薪资", "op": " GTE ", "value": 1}]) == [Condition("薪资", "gte", 1)]


def test_field_is_stripped_and_system_columns_are_allowed() -> None:
    assert parsed([{"field": " 部门 ", "op": "eq", "value": "x"}]) == [Condition("部门", "eq", "x")]
    assert parsed([{"field": "id", "op": "in", "value": [1, 2]}, {"field": "created_at", "op": "gte", "value": "2024"}])


def test_a_field_named_field_is_a_field() -> None:
    assert parsed([{"field": "field", "op": "eq", "value": "x"}]) == [Condition("field", "eq", "x")]


def test_field_map_is_read_as_eq_conditions_and_reported() -> None:
    conditions, notes = parse_filters({"部门": "研发", "薪资": 8000}, KNOWN)
    assert conditions == [Condition("部门", "eq", "研发"), Condition("薪资", "eq", 8000)]
    assert len(notes) == 1
    assert notes[0].startswith('filters given as a field map {"部门": "研发", "薪资": 8000}; read as')
    assert "部门 eq AND 薪资 eq" in notes[0]


def test_field_map_list_and_null_values() -> None:
    conditions, notes = parse_filters({"部门": ["研发", "销售"], "备注": None, "姓名": ""}, KNOWN)
    assert conditions == [
        Condition("部门", "in", ["研发", "销售"]),
        Condition("备注", "is_null", None),
        Condition("姓名", "is_null", None),
    ]
    assert notes


def test_field_map_with_a_field_named_field() -> None:
    conditions, notes = parse_filters({"field": "x"}, KNOWN)
    assert conditions == [Condition("field", "eq", "x")] and "field map" in notes[0]


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        ({"地区": "华东"}, ("unknown field '地区'",)),
        ({"部门": {"op": "eq"}}, ("cannot read",)),
        ({"部门": []}, ("at least one value",)),
        ({"部门": "{部门名}x", "薪资": "{dept}"}, ("unresolved reference '{部门名}x'",)),
        ({"部门": "研发", "薪资": "{dept}"}, ("unresolved reference '{dept}'",)),
        ({"or": [{"field": "部门"}]}, ("AND only", "sql_query")),
        ({"$or": []}, ("AND only",)),
    ],
)
def test_bad_field_maps(raw: Any, fragments: tuple[str, ...]) -> None:
    bad(raw, *fragments)


def test_single_condition_object() -> None:
    conditions, notes = parse_filters({"field": "部门", "op": "eq", "value": "研发"}, ["部门"])
    assert conditions == [Condition("部门", "eq", "研发")]
    assert notes == ["filters given as a single condition object; read as a one-item array"]


def test_json_text() -> None:
    conditions, notes = parse_filters('[{"field": "部门", "op": "eq", "value": "研发"}]', KNOWN)
    assert conditions == [Condition("部门", "eq", "研发")]
    assert notes == ["filters given as a JSON text; parsed"]
    conditions, notes = parse_filters('{"部门": "研发"}', KNOWN)
    assert conditions == [Condition("部门", "eq", "研发")] and len(notes) == 2


@pytest.mark.parametrize(
    ("symbol", "op"),
    [
        ("=", "eq"),
        ("==", "eq"),
        ("!=", "ne"),
        ("<>", "ne"),
        (">", "gt"),
        (">=", "gte"),
        ("<", "lt"),
        ("<=", "lte"),
        ("IS NULL", "is_null"),
        ("isnull", "is_null"),
        ("is not null", "not_null"),
        ("notnull", "not_null"),
        ("is_not_null", "not_null"),
    ],
)
def test_symbolic_ops_are_read_and_reported(symbol: str, op: str) -> None:
    item: dict[str, Any] = {"field": "薪资", "op": symbol}
    if op not in ("is_null", "not_null"):
        item["value"] = 5
    conditions, notes = parse_filters([item], KNOWN)
    assert conditions == [Condition("薪资", op, None if "null" in op else 5)]
    assert notes == [f"filters[0] op {symbol!r} read as {op}"]


@pytest.mark.parametrize("op", [None, ""])
def test_missing_op_is_eq_and_reported(op: Any) -> None:
    item = {"field": "部门", "value": "研发"} if op is None else {"field": "部门", "op": op, "value": "研发"}
    conditions, notes = parse_filters([item], KNOWN)
    assert conditions == [Condition("部门", "eq", "研发")]
    assert notes == ["filters[0] (部门) has no op; read as eq"]


@pytest.mark.parametrize(("op", "new"), [("eq", "is_null"), ("ne", "not_null")])
@pytest.mark.parametrize("value", [None, "", "  "])
def test_eq_null_is_is_null(op: str, new: str, value: Any) -> None:
    conditions, notes = parse_filters([{"field": "部门", "op": op, "value": value}], KNOWN)
    assert conditions == [Condition("部门", new, None)]
    assert "read as " + new in notes[0]


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        ("部门=研发", ("must be an array",)),
        ("", ()),  # (no filters: not an error; kept here to show the contrast with the items below)
        (5, ("must be an array",)),
        (True, ("must be an array",)),
        (["部门=研发"], ("filters[0] is", "not a {field, op, value} object")),
        ([""], ("filters[0] is", "not a {field, op, value} object")),
        ([None], ("filters[0] is null",)),
        ([{"field": "部门", "op": "eq", "value": "x"}, "junk"], ("filters[1] is",)),
        ([["部门", "eq", "研发"]], ("not a {field, op, value} object",)),
        ([{}], ("has no field",)),
        ([{"op": "eq", "value": 1}], ("has no field",)),
        ([{"field": "", "op": "eq", "value": 1}], ("must be a field name",)),
        ([{"field": 3, "op": "eq", "value": 1}], ("must be a field name",)),
        ([{"field": "地区", "op": "eq", "value": "华东"}], ("unknown field '地区'", "部门", "id, created_at")),
        ([{"field": "部门", "op": "like", "value": "x"}], ("unknown op 'like'", "contains")),
        ([{"field": "部门", "op": "or", "value": "x"}], ("unknown op",)),
        ([{"field": "部门", "op": 1, "value": "x"}], ("op must be one of",)),
        ([{"field": "部门", "op": "eq", "value": "x", "logic": "or"}], ("unknown key(s) logic", "sql_query")),
        ([{"field": "部门", "operator": "eq", "value": "x"}], ("unknown key(s) operator",)),
        ([{"field": "部门", "op": "eq"}], ("eq needs a value",)),
        ([{"field": "部门", "op": "eq", "value": ["a", "b"]}], ("use in for a list",)),
        ([{"field": "薪资", "op": "gt", "value": [1, 2]}], ("use between for a range",)),
        ([{"field": "部门", "op": "eq", "value": {"a": 1}}], ("takes one value",)),
        ([{"field": "薪资", "op": "gt", "value": None}], ("gt needs a value",)),
        ([{"field": "薪资", "op": "gte", "value": ""}], ("gte needs a value to compare with",)),
        ([{"field": "薪资", "op": "lt", "value": True}], ("lt needs a value to compare with",)),
        ([{"field": "部门", "op": "in", "value": "研发,销售"}], ("in needs an array",)),
        ([{"field": "部门", "op": "in", "value": []}], ("at least one value",)),
        ([{"field": "部门", "op": "in", "value": ["a", None]}], ("use is_null",)),
        ([{"field": "部门", "op": "in", "value": ["a", ["b"]]}], ("plain values",)),
        ([{"field": "部门", "op": "in"}], ("in needs a value",)),
        ([{"field": "薪资", "op": "between", "value": 5}], ("two-item array",)),
        ([{"field": "薪资", "op": "between", "value": [5]}], ("two-item array",)),
        ([{"field": "薪资", "op": "between", "value": [1, 2, 3]}], ("two-item array",)),
        ([{"field": "薪资", "op": "between", "value": [1, None]}], ("two values",)),
        ([{"field": "薪资", "op": "between", "value": [1, ""]}], ("empty bound",)),
        ([{"field": "薪资", "op": "between", "value": [True, 5]}], ("two values",)),
        ([{"field": "薪资", "op": "between", "value": [20000, 8000]}], ("lower bound first",)),
        ([{"field": "姓名", "op": "contains", "value": ""}], ("non-empty text",)),
        ([{"field": "姓名", "op": "contains", "value": None}], ("non-empty text",)),
        ([{"field": "姓名", "op": "contains", "value": True}], ("non-empty text",)),
        ([{"field": "姓名", "op": "contains", "value": {"a": 1}}], ("non-empty text",)),
        ([{"field": "标签", "op": "contains", "value": []}], ("non-empty array of option texts",)),
        ([{"field": "标签", "op": "contains", "value": ["a", 1]}], ("non-empty array of option texts",)),
    ],
)
def test_refused_filters(raw: Any, fragments: tuple[str, ...]) -> None:
    if raw == "":
        assert parse_filters(raw, KNOWN) == ([], [])
        return
    bad(raw, *fragments)


@pytest.mark.parametrize(
    "value",
    [
        '{"a": 1}',
        "{}",
        "{1,2}",
        "a{",
        "{1}",
        "steps.x",
        "$step",
    ],
)
def test_braces_that_are_not_references_pass(value: str) -> None:
    assert parsed([{"field": "备注", "op": "eq", "value": value}]) == [Condition("备注", "eq", value)]


@pytest.mark.parametrize(
    "raw",
    [
        [{"field": "部门", "op": "eq", "value": "{dept}"}],
        [{"field": "部门", "op": "eq", "value": "部门是{dept_name}的"}],
        [{"field": "部门", "op": "eq", "value": "{_x}"}],
        [{"field": "部门", "op": "eq", "value": "$steps.query.list"}],
        [{"field": "部门", "op": "eq", "value": "x $steps.a.b"}],
        [{"field": "部门", "op": "in", "value": ["研发", "{dept}"]}],
        [{"field": "薪资", "op": "between", "value": [1, "$steps.max"]}],
        [{"field": "{field}", "op": "eq", "value": 1}],
        [{"field": "部门", "op": "eq", "value": "{user.dept}"}],
        '[{"field": "部门", "op": "eq", "value": "{dept}"}]',
        "$steps.filters",
        {"部门": "{dept}"},
        [{"field": "部门", "op": "is_null", "value": "{dept}"}],
    ],
)
def test_unresolved_references_are_refused(raw: Any) -> None:
    bad(raw, "unresolved reference", "pass the actual value")


def test_compile_nothing() -> None:
    assert compile_conditions([], quote) == ("", [])


@pytest.mark.parametrize(
    ("condition", "sql", "params"),
    [
        (Condition("部门", "eq", "研发"), '"部门" = $1', ["研发"]),
        (Condition("部门", "ne", "研发"), '"部门" IS DISTINCT FROM $1', ["研发"]),
        (Condition("薪资", "gt", 5), '"薪资" > $1', [5]),
        (Condition("薪资", "gte", 5), '"薪资" >= $1', [5]),
        (Condition("薪资", "lt", 5), '"薪资" < $1', [5]),
        (Condition("薪资", "lte", 5), '"薪资" <= $1', [5]),
        (Condition("姓名", "contains", "张"), 'CAST("姓名" AS text) ILIKE $1', ["%张%"]),
        (Condition("薪资", "contains", 12), 'CAST("薪资" AS text) ILIKE $1', ["%12%"]),
        (Condition("部门", "in", ["研发", "销售"]), '"部门" = ANY($1)', [["研发", "销售"]]),
        (Condition("薪资", "between", [1, 9]), '"薪资" BETWEEN $1 AND $2', [1, 9]),
        (Condition("部门", "is_null", None), '"部门" IS NULL', []),
        (Condition("部门", "not_null", None), '"部门" IS NOT NULL', []),
    ],
)
def test_compile_each_op(condition: Any, sql: str, params: list[Any]) -> None:
    assert compile_conditions([condition], quote) == (sql, params)


def test_compile_contains_escapes_like_wildcards() -> None:
    _, params = compile_conditions([Condition("备注", "contains", "50%_a\\b")], quote)
    assert params == ["%50\\%\\_a\\\\b%"]


def test_compile_joins_with_and_and_numbers_parameters_from_start() -> None:
    conditions = [
        Condition("部门", "eq", "研发"),
        Condition("备注", "is_null", None),
        Condition("薪资", "between", [1, 9]),
        Condition("姓名", "in", ["a"]),
        Condition("入职日期", "gte", date(2024, 1, 1)),
    ]
    sql, params = compile_conditions(conditions, quote, start=3)
    assert sql == (
        '"部门" = $3 AND "备注" IS NULL AND "薪资" BETWEEN $4 AND $5 AND "姓名" = ANY($6) AND "入职日期" >= $7'
    )
    assert params == ["研发", 1, 9, ["a"], date(2024, 1, 1)]


def test_compile_uses_the_quote_function() -> None:
    sql, _ = compile_conditions([Condition('we"ird', "eq", 1)], quote)
    assert sql == '"we""ird" = $1'


def test_compile_array_fields() -> None:
    conditions = [
        Condition("标签", "contains", "a"),
        Condition("标签", "contains", ["a", "b"]),
        Condition("标签", "in", ["a", "b"]),
        Condition("标签", "in", [["a"], ["b", "c"]]),  # values the caller converted one by one with the 多选 type
        Condition("标签", "eq", ["a", "b"]),
        Condition("标签", "ne", ["a"]),
        Condition("标签", "is_null", None),
        Condition("标签", "not_null", None),
    ]
    sql, params = compile_conditions(conditions, quote, array_fields={"标签"})
    assert sql.split(" AND ") == [
        '"标签" @> $1',
        '"标签" @> $2',
        '"标签" && $3',
        '"标签" && $4',
        '"标签" = $5',
        '"标签" IS DISTINCT FROM $6',
        '"标签" IS NULL',
        '"标签" IS NOT NULL',
    ]
    assert params == [["a"], ["a", "b"], ["a", "b"], ["a", "b", "c"], ["a", "b"], ["a"]]


@pytest.mark.parametrize("op", ["gt", "gte", "lt", "lte", "between"])
def test_compile_refuses_order_ops_on_array_fields(op: str) -> None:
    with pytest.raises(FilterError, match="多选"):
        compile_conditions([Condition("标签", op, [1, 2] if op == "between" else "a")], quote, array_fields=["标签"])


def test_compile_refuses_list_contains_on_a_plain_field() -> None:
    with pytest.raises(FilterError, match="not 多选"):
        compile_conditions([Condition("姓名", "contains", ["a"])], quote)


def test_compile_refuses_unknown_ops() -> None:
    with pytest.raises(FilterError, match="unknown op"):
        compile_conditions([Condition("姓名", "like", "a")], quote)


def test_parse_then_compile() -> None:
    conditions, _ = parse_filters({"部门": "研发"}, KNOWN)
    assert compile_conditions(conditions, quote) == ('"部门" = $1', ["研发"])


def test_long_field_lists_are_shortened_in_errors() -> None:
    known = [f"字段{i}" for i in range(60)]
    with pytest.raises(FilterError, match=r"\(60 in all\)"):
        parse_filters([{"field": "x", "op": "eq", "value": 1}], known)


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize("shape", list(_shapes("")))
@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_placeholders_with_any_name_are_refused_in_every_shape(value: str, shape: str) -> None:
    with pytest.raises(FilterError, match="unresolved reference"):
        parse_filters(_shapes(value)[shape], KNOWN_TAGGED)


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_placeholders_are_refused_in_a_json_text_of_filters(value: str) -> None:

    with pytest.raises(FilterError, match="unresolved reference"):
        parse_filters(json.dumps([{"field": "备注", "op": "eq", "value": value}], ensure_ascii=False), KNOWN_TAGGED)


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize("shape", ["array", "in", "between"])
@pytest.mark.parametrize("value", NOT_PLACEHOLDERS)
def test_json_text_empty_braces_and_array_literals_are_values(value: str, shape: str) -> None:
    conditions, _ = parse_filters(_shapes(value)[shape], KNOWN_TAGGED)
    (condition,) = conditions
    assert condition.value == value or value in condition.value, conditions


@pytest.mark.spec("§7.4")
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


@pytest.mark.spec("§7.4")
async def test_json_text_and_array_literals_are_filter_values(yard: SkillYard, org: str, tags: str) -> None:
    """A JSON field's value is JSON text; braces that hold no name are a value, never a refused reference."""
    by_json = await tag_names(yard, org, tags, [{"field": "附加", "op": "eq", "value": '{"a": 1}'}])
    assert by_json["ok"] and by_json["names"] == {"a"}, by_json
    literal = await tag_names(yard, org, tags, [{"field": "名称", "op": "in", "value": ["{1,2}", "{}"]}])
    assert literal["ok"] and literal["names"] == set(), literal


async def test_lists_stay_refused_for_eq_on_other_fields_and_for_order_ops(
    yard: SkillYard, org: str, tags: str
) -> None:
    single = await tag_names(yard, org, tags, [{"field": "城市", "op": "eq", "value": ["上海", "北京"]}])
    assert single["ok"] is False and "use in" in single["error"], single
    ordered = await tag_names(yard, org, tags, [{"field": "标签", "op": "gt", "value": ["红"]}])
    assert ordered["ok"] is False and ordered["error_type"] == "recoverable", ordered
    one = await tag_names(yard, org, tags, [{"field": "城市", "op": "eq", "value": "上海"}])
    assert one["ok"] and one["names"] == {"a"}, one


def test_parse_filters_takes_a_list_for_eq_only_on_array_fields() -> None:
    conditions, _ = parse_filters(
        [{"field": "标签", "op": "eq", "value": ["绿", "红"]}], KNOWN_TAGGED, array_fields={"标签"}
    )
    assert conditions == [filters.Condition("标签", "eq", ["绿", "红"])]
    with pytest.raises(FilterError, match="use in"):
        parse_filters([{"field": "标签", "op": "eq", "value": ["绿", "红"]}], KNOWN_TAGGED)
    with pytest.raises(FilterError, match="use in"):
        parse_filters([{"field": "备注", "op": "ne", "value": ["x"]}], KNOWN_TAGGED, array_fields={"标签"})


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    ("cond", "names"),
    [
        ({"field": "部门", "op": "eq", "value": "研发"}, {"张三", "李四"}),
        ({"field": "部门", "op": "ne", "value": "研发"}, {"王五", "赵六", "钱七"}),
        ({"field": "薪资", "op": "gt", "value": 15000}, {"王五", "赵六"}),
        ({"field": "薪资", "op": "gte", "value": 15000}, {"李四", "王五", "赵六"}),
        ({"field": "薪资", "op": "lt", "value": 8000}, {"钱七"}),
        ({"field": "薪资", "op": "lte", "value": 8000}, {"张三", "钱七"}),
        ({"field": "备注", "op": "contains", "value": "alp"}, {"张三"}),
        ({"field": "备注", "op": "contains", "value": "%"}, {"钱七"}),
        ({"field": "部门", "op": "in", "value": ["销售", "财务"]}, {"王五", "赵六", "钱七"}),
        ({"field": "薪资", "op": "between", "value": [8000, 20000]}, {"张三", "李四", "王五"}),
        ({"field": "入职", "op": "between", "value": ["2024-01-01", "2024-12-31"]}, {"张三", "李四"}),
        ({"field": "备注", "op": "is_null"}, {"李四", "赵六"}),
        ({"field": "备注", "op": "not_null"}, {"张三", "王五", "钱七"}),
        ({"field": "薪资", "op": "gt", "value": "１５,０００"}, {"王五", "赵六"}),
    ],
)
async def test_every_filter_op_end_to_end(
    yard: SkillYard, org: str, people_table: str, cond: dict[str, Any], names: set[str]
) -> None:
    env = await run(yard, context(org), "query", table_id=people_table, filters=[cond])
    assert env["ok"], env
    assert {r["姓名"] for r in env["list"]} == names
    assert env["pageInfo"]["totalRows"] == len(names)


@pytest.mark.spec("§7.4")
async def test_filters_are_anded(yard: SkillYard, org: str, people_table: str) -> None:
    env = await run(
        yard,
        context(org),
        "query",
        table_id=people_table,
        filters=[
            {"field": "部门", "op": "eq", "value": "研发"},
            {"field": "薪资", "op": "between", "value": [8000, 20000]},
        ],
    )
    assert {r["姓名"] for r in env["list"]} == {"张三", "李四"}


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize("action", ["query", "aggregate", "update_by", "delete_by"])
@pytest.mark.parametrize(
    "filters",
    [
        [{"field": "不存在", "op": "eq", "value": 1}],
        [{"field": "部门", "op": "eq", "value": "{dept}"}],
        [{"field": "部门", "op": "eq", "value": "$steps.s1.output"}],
        [{"field": "部门", "op": "in", "value": ["研发", "{dept}"]}],
        ["部门=研发"],
        [""],
        [123],
        [{"field": "部门", "op": "like", "value": "研"}],
        [{"field": "部门", "op": "eq", "value": "研发"}, "garbage"],
        [{"field": "薪资", "op": "between", "value": [1]}],
        [{"field": "部门", "op": "in", "value": "研发"}],
        "部门 = 研发",
        {"or": [{"field": "部门", "op": "eq", "value": "研发"}]},
    ],
    ids=[
        "unknown-field",
        "placeholder",
        "steps-ref",
        "placeholder-in-list",
        "text-item",
        "empty-item",
        "number-item",
        "unknown-op",
        "mixed-garbage",
        "between-one",
        "in-not-list",
        "plain-text",
        "or-map",
    ],
)
async def test_unreadable_filters_are_errors_never_full_table(
    yard: SkillYard, org: str, people_table: str, conn: Any, action: str, filters: Any
) -> None:
    params: dict[str, Any] = {"table_id": people_table, "filters": filters}
    if action == "aggregate":
        params["metrics"] = [{"op": "count", "alias": "n"}]
    if action == "update_by":
        params["data"] = {"备注": "改"}
    env = await run(yard, context(org, chat_mode=False), action, **params)
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert await count(conn, org, "员工") == 5
    assert await count(conn, org, "员工", "WHERE 备注 = '改'") == 0


@pytest.mark.spec("§7.4")
async def test_field_map_filters_are_converted_and_noted(
    yard: SkillYard, org: str, people_table: str, conn: Any
) -> None:
    ctx = context(org, chat_mode=False)
    env = await run(yard, ctx, "query", table_id=people_table, filters={"部门": "研发"})
    assert env["ok"] and {r["姓名"] for r in env["list"]} == {"张三", "李四"}
    assert "field map" in env["action_note"] or "部门" in env["action_note"], env
    two = await run(yard, ctx, "query", table_id=people_table, filters={"部门": "研发", "薪资": 8000})
    assert [r["姓名"] for r in two["list"]] == ["张三"] and two.get("action_note")
    upd = await run(yard, ctx, "update_by", table_id=people_table, filters={"部门": "销售"}, data={"备注": "x"})
    assert upd["ok"] and upd["updated"] == 2 and upd.get("action_note"), upd
    gone = await run(yard, ctx, "delete_by", table_id=people_table, filters={"姓名": "赵六"})
    assert gone["ok"] and gone["deleted"] == 1 and gone.get("action_note"), gone
    bad = await run(yard, ctx, "query", table_id=people_table, filters={"岗位": "x"})
    assert bad["ok"] is False and "岗位" in bad["error"]


async def test_filters_on_system_columns_and_typed_values(yard: SkillYard, org: str, people_table: str) -> None:
    ctx = context(org)
    ids = sorted(r["id"] for r in (await run(yard, ctx, "query", table_id=people_table))["list"])
    by_id = await run(
        yard, ctx, "query", table_id=people_table, filters=[{"field": "id", "op": "in", "value": ids[:2]}]
    )
    assert sorted(r["id"] for r in by_id["list"]) == ids[:2]
    recent = await run(yard, ctx, "query", table_id=people_table, filters=[{"field": "created_at", "op": "not_null"}])
    assert recent["pageInfo"]["totalRows"] == 5
    date_gt = await run(
        yard, ctx, "query", table_id=people_table, filters=[{"field": "入职", "op": "gt", "value": "2024-06-01"}]
    )
    assert {r["姓名"] for r in date_gt["list"]} == {"王五", "赵六"}
    for value in ("abc", "1万", "2k"):
        bad = await run(
            yard, ctx, "query", table_id=people_table, filters=[{"field": "薪资", "op": "gt", "value": value}]
        )
        assert bad["ok"] is False and bad["error_type"] == "recoverable", (value, bad)
    bad_date = await run(
        yard, ctx, "query", table_id=people_table, filters=[{"field": "入职", "op": "gt", "value": "2024/06/01"}]
    )
    assert bad_date["ok"] is False and bad_date["error_type"] == "recoverable"
    bad_option = await run(
        yard, ctx, "query", table_id=people_table, filters=[{"field": "部门", "op": "eq", "value": "行政"}]
    )
    assert bad_option["ok"] is False or bad_option["list"] == []


async def test_multi_select_and_checkbox_filters(yard: SkillYard, org: str, values_table: str) -> None:
    ctx = context(org)
    batch = await run(
        yard,
        ctx,
        "insert_batch",
        table_id=values_table,
        records=[
            {"名称": "a", "标签": ["红", "绿"], "完成": "是"},
            {"名称": "b", "标签": "绿、蓝", "完成": False},
            {"名称": "c", "标签": ["蓝"]},
        ],
    )
    assert batch["inserted"] == 3, batch
    has = await run(
        yard, ctx, "query", table_id=values_table, filters=[{"field": "标签", "op": "contains", "value": "绿"}]
    )
    assert {r["名称"] for r in has["list"]} == {"a", "b"}
    done = await run(yard, ctx, "query", table_id=values_table, filters=[{"field": "完成", "op": "eq", "value": True}])
    assert [r["名称"] for r in done["list"]] == ["a"]


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize("field", ["备注", "标签", "部门"])
async def test_ne_is_the_complement_of_eq_including_empty_values(
    yard: SkillYard, org: str, staff: str, field: str
) -> None:
    """ne must not silently lose rows whose value is empty (NULL): eq and ne of one value split the table."""
    value = {"备注": "beta", "标签": "红", "部门": "研发"}[field]
    eq = await names(yard, org, staff, [{"field": field, "op": "eq", "value": value}])
    ne = await names(yard, org, staff, [{"field": field, "op": "ne", "value": value}])
    assert eq["ok"] and ne["ok"], (eq, ne)
    assert eq["names"] | ne["names"] == {r["姓名"] for r in STAFF} and not eq["names"] & ne["names"], (eq, ne)


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    "value",
    [[None, 20000], [8000, None], [8000], [8000, ""], [8000, 20000, 30000], {"low": 1, "high": 2}, "8000-20000"],
    ids=["no-low", "no-high", "one", "blank-high", "three", "object", "text"],
)
@pytest.mark.parametrize("action", ["query", "update_by", "delete_by"])
async def test_between_with_partial_bounds_is_an_error_never_a_wider_result(
    yard: SkillYard, org: str, staff: str, conn: Any, value: Any, action: str
) -> None:
    """§7.4: between（两元素数组）; items that cannot be read are an error, never a silently wider result."""
    params: dict[str, Any] = {"table_id": staff, "filters": [{"field": "薪资", "op": "between", "value": value}]}
    if action == "update_by":
        params["data"] = {"备注": "改"}
    env = await run(yard, context(org, chat_mode=False), action, **params)
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert await count(conn, org, "员工") == 5 and await count(conn, org, "员工", "WHERE 备注 = '改'") == 0


@pytest.mark.spec("§7.4")
async def test_in_with_empty_list_never_matches_everything(yard: SkillYard, org: str, staff: str, conn: Any) -> None:
    for action in ("query", "delete_by"):
        env = await run(
            yard,
            context(org, chat_mode=False),
            action,
            table_id=staff,
            filters=[{"field": "部门", "op": "in", "value": []}],
        )
        assert env["ok"] is False or env.get("list") == [] or env.get("deleted") == 0, env
    assert await count(conn, org, "员工") == 5


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    "value", [["研发", None], ["研发", {"x": 1}], ["行政"], [["研发"]]], ids=["null", "object", "unknown", "nested"]
)
async def test_in_with_unreadable_items_is_an_error(
    yard: SkillYard, org: str, staff: str, conn: Any, value: Any
) -> None:
    env = await run(
        yard,
        context(org, chat_mode=False),
        "delete_by",
        table_id=staff,
        filters=[{"field": "部门", "op": "in", "value": value}],
    )
    assert env["ok"] is False or env.get("deleted") == 0, env
    assert await count(conn, org, "员工") == 5


@pytest.mark.spec("§7.4")
async def test_contains_on_numbers_and_multi_select(yard: SkillYard, org: str, staff: str) -> None:
    """references/actions.md: contains = text contained (case-insensitive); for 多选 an option or an array of options
    the row has all of."""
    on_number = await names(yard, org, staff, [{"field": "薪资", "op": "contains", "value": 500}])
    assert on_number["ok"] and on_number["names"] == {"李四", "钱七"}, on_number
    case = await names(yard, org, staff, [{"field": "备注", "op": "contains", "value": "BET"}])
    assert case["ok"] and case["names"] == {"王五"}, case
    one = await names(yard, org, staff, [{"field": "标签", "op": "contains", "value": "绿"}])
    assert one["ok"] and one["names"] == {"李四", "钱七"}, one
    all_of = await names(yard, org, staff, [{"field": "标签", "op": "contains", "value": ["绿", "蓝"]}])
    assert all_of["ok"] and all_of["names"] == {"钱七"}, all_of
    underscore = await names(yard, org, staff, [{"field": "备注", "op": "contains", "value": "_"}])
    assert underscore["ok"] and underscore["names"] == set(), underscore


@pytest.mark.spec("§7.4")
async def test_is_null_on_a_required_field_and_with_a_value(yard: SkillYard, org: str, staff: str) -> None:
    env = await names(yard, org, staff, [{"field": "姓名", "op": "is_null"}])
    assert env["ok"] and env["names"] == set(), env
    on_multi = await names(yard, org, staff, [{"field": "标签", "op": "is_null"}])
    assert on_multi["ok"] and on_multi["names"] == {"王五"}, on_multi
    not_null = await names(yard, org, staff, [{"field": "入职", "op": "not_null"}])
    assert not_null["ok"] and len(not_null["names"]) == 5, not_null


@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    "value",
    ["{部门}", "{{ dept }}", "{ dept }", "前缀{dept_name}后缀", "$steps.s1.output.dept", "${dept}"],
)
@pytest.mark.parametrize("shape", ["array", "field-map", "in", "between"])
async def test_unresolved_references_are_refused_in_every_filter_shape(
    yard: SkillYard, org: str, staff: str, conn: Any, value: str, shape: str
) -> None:
    """§7.4: 值里残留未解析的引用变量（{xxx} / $steps.）时拒绝执行 — whatever the name inside the braces."""
    filters: Any = {
        "array": [{"field": "备注", "op": "eq", "value": value}],
        "field-map": {"备注": value},
        "in": [{"field": "备注", "op": "in", "value": ["x", value]}],
        "between": [{"field": "备注", "op": "between", "value": ["a", value]}],
    }[shape]
    env = await run(
        yard, context(org, chat_mode=False), "update_by", table_id=staff, filters=filters, data={"备注": "改"}
    )
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert await count(conn, org, "员工", "WHERE 备注 = '改'") == 0
