"""The datatable skill's filters, sort, paging, metrics and grouping (spec §7.4)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from support.datatable import load_datatable_module

filters = load_datatable_module("filters")
query_options = load_datatable_module("query_options")
Condition = filters.Condition
FilterError = filters.FilterError
Metric = query_options.Metric
parse_filters = filters.parse_filters
compile_conditions = filters.compile_conditions

KNOWN = ["部门", "薪资", "姓名", "入职日期", "标签", "field", "备注"]


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


# --------------------------------------------------------------------------------------------------------------------
# parse_filters: the canonical shape


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


# --------------------------------------------------------------------------------------------------------------------
# tolerated shapes, each reported


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


# --------------------------------------------------------------------------------------------------------------------
# refused: never silently dropped


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


# --------------------------------------------------------------------------------------------------------------------
# compile_conditions


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


# --------------------------------------------------------------------------------------------------------------------
# sort


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


# --------------------------------------------------------------------------------------------------------------------
# limit / offset


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


# --------------------------------------------------------------------------------------------------------------------
# metrics / group_by


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


def test_long_field_lists_are_shortened_in_errors() -> None:
    known = [f"字段{i}" for i in range(60)]
    with pytest.raises(FilterError, match=r"\(60 in all\)"):
        parse_filters([{"field": "x", "op": "eq", "value": 1}], known)
