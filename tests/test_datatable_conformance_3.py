"""Third review round for issue 4 (the built-in datatable skill): black-box probes of the structured actions where
the first two rounds (test_datatable_conformance.py, test_datatable_conformance_2.py) were thin.

Every probe goes through ``SkillYard.run("datatable" | "nocodb", …)`` or the admin API against the real PostgreSQL
of the test session, and states what issue 4, spec §7 / §3.5, docs/datatable.md, SKILL.md or references/ require.
The SQL channel (sql_query / sql_execute) is not probed here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.datatable_probes import ONE_OF_EACH_TYPE, context, count, grant, make_table, run, write_json
from skillyard import SkillYard

pytestmark = pytest.mark.usefixtures("home", "db_env")

# ====================================================================================================================
# fixtures

KINDS = ONE_OF_EACH_TYPE


@pytest.fixture
async def kinds(yard: SkillYard, org: str) -> str:
    made = await run(yard, context(org), "create_table", table_name="类型表", fields=KINDS)
    assert made["ok"], made
    return str(made["id"])


STAFF = [
    {"姓名": "张三", "部门": "研发", "薪资": 8000, "入职": "2024-01-01", "备注": "Alpha", "标签": ["红"]},
    {"姓名": "李四", "部门": "研发", "薪资": 15000, "入职": "2024-06-01", "标签": ["红", "绿"]},
    {"姓名": "王五", "部门": "销售", "薪资": 20000, "入职": "2025-01-01", "备注": "beta"},
    {"姓名": "赵六", "部门": "财务", "薪资": 30000, "入职": "2025-06-01", "标签": ["蓝"]},
    {"姓名": "钱七", "部门": "销售", "薪资": 5000, "入职": "2023-03-01", "备注": "100%达成", "标签": ["绿", "蓝"]},
]


@pytest.fixture
async def staff(yard: SkillYard, org: str) -> str:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="员工",
        fields=[
            {"title": "姓名", "uidt": "文本", "required": True},
            {"title": "部门", "uidt": "单选", "options": ["研发", "销售", "财务"]},
            {"title": "薪资", "uidt": "整数"},
            {"title": "入职", "uidt": "日期"},
            {"title": "备注", "uidt": "文本"},
            {"title": "标签", "uidt": "多选", "options": ["红", "绿", "蓝"]},
        ],
    )
    assert made["ok"], made
    batch = await run(yard, ctx, "insert_batch", table_id=made["id"], records=STAFF)
    assert batch["inserted"] == 5, batch
    return str(made["id"])


async def names(yard: SkillYard, org: str, table_id: str, filters: Any, **extra: Any) -> dict[str, Any]:
    env = await run(yard, context(org), "query", table_id=table_id, filters=filters, **extra)
    if env["ok"]:
        env["names"] = {r["姓名"] for r in env["list"]}
    return env


# ====================================================================================================================
# §7.5 write values at the edges


@pytest.mark.parametrize(
    ("field", "given", "stored"),
    [
        ("数量", "－１２", -12),
        ("数量", "＋５", 5),
        ("数量", "−7", -7),
        ("数量", " 42 ", 42),
        ("数量", "1,234,567", 1234567),
        ("数量", 1e3, 1000),
        ("价格", "．５", 0.5),
        ("价格", "-0.25", -0.25),
        ("价格", 1.5e3, 1500),
        ("金额", "１，２３４．５６", 1234.56),
        ("金额", "－１，０００", -1000),
    ],
)
async def test_full_width_signs_digits_and_separators_are_converted(
    yard: SkillYard, org: str, kinds: str, field: str, given: Any, stored: Any
) -> None:
    """§7.5: 数字全角转半角、允许千分位逗号 — full-width digits, signs and points are read as half-width."""
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", field: given})
    assert env["ok"], env
    assert float(env["data"][field]) == stored, env["data"]


@pytest.mark.parametrize(
    ("field", "given"),
    [
        ("数量", "12,34"),
        ("数量", "1,2345"),
        ("数量", "1,,234"),
        ("数量", ",123"),
        ("数量", "1,234,56"),
        ("价格", "1.234,56"),
        ("数量", "万5"),
        ("数量", "5 万"),
        ("数量", "３千"),
        ("价格", "2.5亿"),
        ("价格", "12K"),
        ("价格", "3 M"),
        ("价格", "4bn"),
        ("价格", "1e3"),
        ("价格", "1E5"),
        ("价格", "1e309"),
        ("价格", "NaN"),
        ("价格", "Infinity"),
        ("价格", "-inf"),
        ("价格", float("nan")),
        ("价格", float("inf")),
        ("价格", True),
        ("价格", "12%"),
        ("数量", "0x1F"),
        ("数量", "1_000"),
        ("数量", "1.5"),
        ("数量", "1.0000001"),
        ("数量", 1e309),
    ],
)
async def test_numbers_with_misplaced_separators_words_or_exponents_are_refused(
    yard: SkillYard, org: str, kinds: str, conn: Any, field: str, given: Any
) -> None:
    """§7.5: thousands separators only as separators; 含数量级词（万/亿/千/k/M/bn）一律拒绝，不静默换算; integers reject
    decimals. Nothing is written and the error names the field."""
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", field: given})
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert field in env["error"], env
    assert await count(conn, org, "类型表") == 0


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("是", True),
        ("否", False),
        ("yes", True),
        ("no", False),
        ("1", True),
        ("0", False),
        ("true", True),
        ("false", False),
        ("TRUE", True),
        (1, True),
        (0, False),
        (" 是 ", True),
    ],
)
async def test_checkbox_accepts_yes_no_words(yard: SkillYard, org: str, kinds: str, given: Any, stored: bool) -> None:
    """SKILL.md: 勾选 takes true/false; the skill's own refusal text promises "also 是/否, yes/no, 1/0"."""
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", "完成": given})
    assert env["ok"] and env["data"]["完成"] is stored, env


@pytest.mark.parametrize("given", ["2", 2, "真的", "maybe", [True], {"v": True}])
async def test_checkbox_refuses_other_values(yard: SkillYard, org: str, kinds: str, given: Any) -> None:
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", "完成": given})
    assert env["ok"] is False and env["error_type"] == "recoverable" and "完成" in env["error"], env


@pytest.mark.parametrize(
    ("field", "given"),
    [
        ("日期", "2024/1/5"),
        ("日期", "2024-02-30"),
        ("日期", "2023-02-29"),
        ("日期", "2024-1-5"),
        ("日期", "20240105"),
        ("日期", "2024-13-01"),
        ("日期", "5 Jan 2024"),
        ("日期", "2024-01-05T10:30:00"),
        ("时刻", "2024/01/05 10:30"),
        ("时刻", "2024-01-05T25:00"),
        ("时刻", "2024-02-30T10:00"),
        ("时刻", "yesterday"),
        ("时间", "24:00"),
        ("时间", "09:60"),
        ("时间", "9.30"),
        ("时间", "0930"),
        ("时间", "09:30 PM"),
        ("时间", "25:00:00"),
        ("时间", 930),
    ],
)
async def test_dates_and_times_that_are_not_iso_are_refused(
    yard: SkillYard, org: str, kinds: str, conn: Any, field: str, given: Any
) -> None:
    """§7.5 日期用 ISO; SKILL.md: dates 2026-03-01, date-times ISO 8601. Impossible calendar days and a 日期 with a
    time of day are not silently changed."""
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", field: given})
    assert env["ok"] is False and env["error_type"] == "recoverable" and field in env["error"], env
    assert await count(conn, org, "类型表") == 0


async def test_dates_times_and_instants_round_trip(yard: SkillYard, org: str, kinds: str) -> None:
    ctx = context(org)
    env = await run(
        yard,
        ctx,
        "insert",
        table_id=kinds,
        data={"名称": "n", "日期": "2024-02-29", "时刻": "2024-01-05T10:30:00+08:00", "时间": "9:05"},
    )
    assert env["ok"], env
    assert env["data"]["日期"] == "2024-02-29" and env["data"]["时间"] == "09:05:00"
    from datetime import datetime

    assert datetime.fromisoformat(env["data"]["时刻"]) == datetime.fromisoformat("2024-01-05T02:30:00+00:00")
    found = await run(
        yard,
        ctx,
        "query",
        table_id=kinds,
        filters=[{"field": "时刻", "op": "eq", "value": "2024-01-05T02:30:00Z"}],
    )
    assert found["ok"] and len(found["list"]) == 1, found


@pytest.mark.parametrize(
    ("given", "stored"),
    [("红,蓝", ["红", "蓝"]), ("蓝、红", ["红", "蓝"]), (["蓝", "红", "蓝"], ["红", "蓝"]), ("绿", ["绿"])],
)
async def test_multi_select_given_as_text_or_list(
    yard: SkillYard, org: str, kinds: str, given: Any, stored: list[str]
) -> None:
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", "标签": given})
    assert env["ok"] and env["data"]["标签"] == stored, env


@pytest.mark.parametrize("given", ["红,黄", ["黄"], "紫", ["红", "Red"]])
async def test_multi_select_with_unknown_options_is_refused(yard: SkillYard, org: str, kinds: str, given: Any) -> None:
    """§7.5: 单选/多选值必须在已配选项内."""
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", "标签": given})
    assert env["ok"] is False and env["error_type"] == "recoverable" and "标签" in env["error"], env


@pytest.mark.parametrize(
    ("field", "given"),
    [
        ("邮箱", "a@b"),
        ("邮箱", "a@@b.cn"),
        ("邮箱", "a b@c.cn"),
        ("邮箱", "@b.cn"),
        ("邮箱", "a@"),
        ("邮箱", "a@b..cn"),
        ("电话", "abc"),
        ("电话", "12"),
        ("电话", "138-abcd-0000"),
        ("电话", "++86 138"),
        ("主页", "ftp://x.cn"),
        ("主页", "www.x.cn"),
        ("主页", "http://"),
        ("主页", "https:// x.cn"),
        ("主页", "javascript:alert(1)"),
    ],
)
async def test_contact_values_are_validated(yard: SkillYard, org: str, kinds: str, field: str, given: str) -> None:
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", field: given})
    assert env["ok"] is False and env["error_type"] == "recoverable" and field in env["error"], env


async def test_json_field_keeps_nested_values(yard: SkillYard, org: str, kinds: str) -> None:
    ctx = context(org)
    nested = {"a": {"b": [1, {"c": None}, "文字"]}, "d": 1.5, "e": True}
    for value in (nested, [1, [2, 3], {"x": "y"}], 12.5):
        env = await run(yard, ctx, "insert", table_id=kinds, data={"名称": "j", "附加": value})
        assert env["ok"] and env["data"]["附加"] == value, env
        got = await run(yard, ctx, "query", table_id=kinds, filters=[{"field": "id", "op": "eq", "value": env["id"]}])
        assert got["list"][0]["附加"] == value, got
    text = await run(yard, ctx, "insert", table_id=kinds, data={"名称": "t", "附加": '{"k": [1, 2]}'})
    assert text["ok"] and text["data"]["附加"] == {"k": [1, 2]}, text
    bad = await run(yard, ctx, "insert", table_id=kinds, data={"名称": "x", "附加": {"v": float("nan")}})
    assert bad["ok"] is False and bad["error_type"] == "recoverable" and "附加" in bad["error"], bad


async def test_empty_and_blank_strings_clear_values_on_update_by_and_upsert(
    yard: SkillYard, org: str, kinds: str
) -> None:
    """§7.5 空串归一为 NULL, required checked on insert only (docs: an upsert that updates may leave a required field
    empty)."""
    ctx = context(org, chat_mode=False)
    ins = await run(yard, ctx, "insert", table_id=kinds, data={"名称": "n", "数量": 3, "城市": "上海", "电话": "123"})
    assert ins["ok"], ins
    by = await run(
        yard,
        ctx,
        "update_by",
        table_id=kinds,
        filters=[{"field": "名称", "op": "eq", "value": "n"}],
        data={"数量": "", "城市": "   ", "名称": ""},
    )
    assert by["ok"] and by["updated"] == 1, by
    row = (await run(yard, ctx, "query", table_id=kinds))["list"][0]
    assert (row["数量"], row["城市"], row["名称"]) == (None, None, None), row
    up = await run(yard, ctx, "upsert", table_id=kinds, key_fields=["电话"], records=[{"电话": "123", "名称": ""}])
    assert up["ok"] and (up["updated"], up["failed"]) == (1, 0), up


async def test_insert_from_file_reports_unknown_fields(yard: SkillYard, org: str) -> None:
    """issue 4 / §7.5: unknown fields dropped and reported — on every insert path, insert_from_file included."""
    table_id = await make_table(yard, org)
    ctx = context(org)
    rel = write_json(yard, ctx, "import/u.json", [{"姓名": f"n{i}", "外号": "x"} for i in range(3)])
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] and env["inserted"] == 3 and env.get("dropped") == ["外号"], env


# ====================================================================================================================
# §7.4 filters: every op against every kind of value


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


@pytest.mark.parametrize(
    "bounds",
    [["8000", "20000"], ["８０００", "２０，０００"], [8000.0, "20000"]],
)
async def test_between_bounds_are_converted_like_writes(yard: SkillYard, org: str, staff: str, bounds: Any) -> None:
    """references/actions.md: filter values are converted like a write to the field's type; between is inclusive."""
    env = await names(yard, org, staff, [{"field": "薪资", "op": "between", "value": bounds}])
    assert env["ok"] and env["names"] == {"张三", "李四", "王五"}, env


async def test_reversed_between_bounds_never_widen_the_result(yard: SkillYard, org: str, staff: str) -> None:
    """between is [low, high], both inclusive: reversed bounds select nothing (or are refused), never more rows."""
    for value, field in (([20000, 8000], "薪资"), (["20000", "8000"], "薪资"), (["2024-12-31", "2024-01-01"], "入职")):
        env = await names(yard, org, staff, [{"field": field, "op": "between", "value": value}])
        assert (env["ok"] and env["names"] == set()) or env["error_type"] == "recoverable", (value, env)


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


async def test_in_with_a_huge_list_and_converted_values(yard: SkillYard, org: str, staff: str) -> None:
    huge = [*range(100000, 105000), "８０００", "15,000"]
    env = await names(yard, org, staff, [{"field": "薪资", "op": "in", "value": huge}])
    assert env["ok"] and env["names"] == {"张三", "李四"}, env
    ids = await names(yard, org, staff, [{"field": "id", "op": "in", "value": [str(i) for i in range(1, 3000)]}])
    assert ids["ok"] and len(ids["names"]) == 5, ids


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


async def test_is_null_on_a_required_field_and_with_a_value(yard: SkillYard, org: str, staff: str) -> None:
    env = await names(yard, org, staff, [{"field": "姓名", "op": "is_null"}])
    assert env["ok"] and env["names"] == set(), env
    on_multi = await names(yard, org, staff, [{"field": "标签", "op": "is_null"}])
    assert on_multi["ok"] and on_multi["names"] == {"王五"}, on_multi
    not_null = await names(yard, org, staff, [{"field": "入职", "op": "not_null"}])
    assert not_null["ok"] and len(not_null["names"]) == 5, not_null


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


# ====================================================================================================================
# §7.4 sort, limit, offset


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


@pytest.mark.parametrize("sort", ["-不存在", "薪资,姓名", "{sort_field}", "--薪资", 5])
async def test_bad_sort_is_an_error(yard: SkillYard, org: str, staff: str, sort: Any) -> None:
    env = await run(yard, context(org), "query", table_id=staff, sort=sort)
    assert env["ok"] is False and env["error_type"] == "recoverable", env


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


async def test_limit_as_text_and_offset_past_the_end(yard: SkillYard, org: str, staff: str) -> None:
    ctx = context(org)
    two = await run(yard, ctx, "query", table_id=staff, limit="2", sort="薪资")
    assert two["ok"] and [r["姓名"] for r in two["list"]] == ["钱七", "张三"], two
    past = await run(yard, ctx, "query", table_id=staff, limit=2, offset=50)
    assert past["ok"] and past["list"] == [], past
    assert past["pageInfo"]["totalRows"] == 5 and past["pageInfo"]["isLastPage"] is True, past


# ====================================================================================================================
# §7.4 aggregate


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


# ====================================================================================================================
# upsert, insert_batch, on_conflict


async def test_upsert_collapses_keys_that_are_equal_after_conversion(yard: SkillYard, org: str, conn: Any) -> None:
    """actions.md: "A record whose key values match an existing row updates it; otherwise it is inserted." Two
    records of one batch whose keys are the same value once converted (1,001 and 1001; one instant written with two
    offsets) write one row per key, as the same key written twice does."""
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="打卡",
        fields=[
            {"title": "编号", "uidt": "整数"},
            {"title": "时刻", "uidt": "日期时间"},
            {"title": "备注", "uidt": "文本"},
        ],
    )
    table_id = made["id"]
    by_number = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields="编号",
        records=[{"编号": "1,001", "备注": "a"}, {"编号": 1001, "备注": "b"}],
    )
    assert by_number["ok"], by_number
    assert await count(conn, org, "打卡", "WHERE 编号 = 1001") == 1
    instants = [
        {"时刻": "2024-01-01T10:00:00+08:00", "备注": "x"},
        {"时刻": "2024-01-01T02:00:00Z", "备注": "y"},
    ]
    first = await run(yard, ctx, "upsert", table_id=table_id, key_fields="时刻", records=instants)
    after_first = await count(conn, org, "打卡", "WHERE 时刻 = '2024-01-01T02:00:00Z'")
    again = await run(yard, ctx, "upsert", table_id=table_id, key_fields="时刻", records=instants)
    after_again = await count(conn, org, "打卡", "WHERE 时刻 = '2024-01-01T02:00:00Z'")
    assert first["ok"] and again["ok"] and after_first == after_again == 1, (first, after_first, again, after_again)


async def test_upsert_with_several_key_fields_and_missing_keys(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org, rows=3)  # 人0/E0, 人1/E1, 人2/E2
    env = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields=["姓名", "工号"],
        records=[
            {"姓名": "人1", "工号": "E1", "城市": "北京"},  # matches both keys → update
            {"姓名": "人1", "工号": "E2", "城市": "深圳"},  # matches one key only → insert
            {"姓名": "人9", "城市": "深圳"},  # a key field missing → fails alone
            {"姓名": "人8", "工号": "", "城市": "深圳"},  # a key field empty → fails alone
        ],
    )
    assert env["ok"], env
    assert (env["inserted"], env["updated"], env["failed"]) == (1, 1, 2), env
    assert sorted(e["row"] for e in env["errors"]) == [3, 4], env
    assert env["verified_total"] == 2, env
    assert await count(conn, org) == 4
    bad = await run(yard, ctx, "upsert", table_id=table_id, key_fields=["不存在"], records=[{"姓名": "x"}])
    assert bad["ok"] is False and bad["need_param"] == "key_fields", bad


async def test_on_conflict_skip_inside_one_batch_and_without_a_unique_field(
    yard: SkillYard, org: str, conn: Any
) -> None:
    """§7.4 on_conflict=skip 要求表上已有唯一约束; references/actions.md: rows whose unique values exist count as
    skipped."""
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="会员",
        fields=[{"title": "编号", "uidt": "文本", "unique": True}, {"title": "姓名", "uidt": "文本"}],
    )
    records = [{"编号": "A", "姓名": "1"}, {"编号": "A", "姓名": "2"}, {"编号": "B", "姓名": "3"}]
    skip = await run(yard, ctx, "insert_batch", table_id=made["id"], records=records, on_conflict="skip")
    assert skip["ok"] and (skip["inserted"], skip["skipped"], skip["failed"]) == (2, 1, 0), skip
    assert skip["verified_total"] == 2
    plain = await run(yard, ctx, "insert_batch", table_id=made["id"], records=[{"编号": "C"}, {"编号": "C"}])
    assert plain["ok"] and (plain["inserted"], plain["failed"]) == (1, 1) and plain["errors"][0]["row"] == 2, plain
    bad = await run(yard, ctx, "insert_batch", table_id=made["id"], records=records, on_conflict="update")
    assert bad["ok"] is False and bad["need_param"] == "on_conflict", bad
    plain_table = await make_table(yard, org)
    no_unique = await run(yard, ctx, "insert_batch", table_id=plain_table, records=[{"姓名": "x"}], on_conflict="skip")
    assert no_unique["ok"] is False and no_unique["need_param"] == "on_conflict", no_unique
    rel = write_json(yard, ctx, "import/n.json", [{"姓名": "x"}])
    from_file = await run(yard, ctx, "insert_from_file", table_id=plain_table, file=rel, on_conflict="skip")
    assert from_file["ok"] is False and from_file["need_param"] == "on_conflict", from_file
    assert await count(conn, org) == 0


async def test_insert_from_file_unique_duplicates_by_row_number(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="会员",
        fields=[{"title": "编号", "uidt": "文本", "unique": True}, {"title": "积分", "uidt": "整数"}],
    )
    rows = [{"编号": f"M{i}", "积分": i} for i in range(120)]
    rows[50]["编号"] = "M3"  # repeats row 4
    rows[70]["积分"] = "7万"
    rel = write_json(yard, ctx, "import/m.json", rows)
    env = await run(yard, ctx, "insert_from_file", table_id=made["id"], file=rel)
    assert env["ok"] and (env["inserted"], env["failed"]) == (118, 2), env
    assert sorted(e["row"] for e in env["errors"]) == [51, 71], env
    assert env["verified_total"] == 118 and await count(conn, org, "会员") == 118


# ====================================================================================================================
# §7.7 confirm tokens and backups


async def test_confirm_token_of_one_org_does_not_work_in_another(yard: SkillYard, org: str, conn: Any) -> None:
    other = org + "b"
    await make_table(yard, org, rows=15)
    await make_table(yard, other, rows=15)
    filters = [{"field": "金额", "op": "gte", "value": 0}]
    asked = await run(yard, context(org, chat_mode=True), "delete_by", table_name="客户", filters=filters)
    assert asked["needs_confirmation"], asked
    stolen = await run(
        yard,
        context(other, chat_mode=True),
        "delete_by",
        table_name="客户",
        filters=filters,
        confirm_token=asked["confirm_token"],
    )
    assert stolen["ok"] is False and stolen.get("need_param") == "confirm_token", stolen
    assert await count(conn, other) == 15 and await count(conn, org) == 15


async def test_confirm_token_honoured_for_the_same_call_written_with_aliases_and_flat(
    yard: SkillYard, org: str, conn: Any
) -> None:
    """§3.5: parameter aliases are normalized before dispatch; the confirmed call is the same call."""
    table_id = await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    filters = [{"field": "金额", "op": "gte", "value": 0}]
    asked = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters)
    done = await yard.run(
        "datatable",
        {"action": "delete-by", "table_id": table_id, "filter": filters, "token": asked["confirm_token"]},
        context=ctx,
    )
    assert done["ok"] and done["deleted"] == 15, done
    assert await count(conn, org) == 0


async def test_confirm_token_with_an_extra_parameter_is_refused(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    ids = [r["id"] for r in (await run(yard, ctx, "query", table_id=table_id))["list"]]
    asked = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids[:12])
    token = asked["confirm_token"]
    for changed in (
        {"row_ids": list(reversed(ids[:12]))},
        {"row_ids": ids[:12], "filters": [{"field": "金额", "op": "gte", "value": 0}]},
        {"row_ids": ids[:11]},
    ):
        env = await run(yard, ctx, "delete_batch", table_id=table_id, confirm_token=token, **changed)
        assert env["ok"] is False and env.get("need_param") == "confirm_token", (changed, env)
    assert await count(conn, org) == 15
    done = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids[:12], confirm_token=token)
    assert done["ok"] and done["deleted"] == 12, done


async def test_backups_hold_json_ready_values_equal_to_query(yard: SkillYard, org: str, kinds: str) -> None:
    """§7.7: 所有删除在执行前把命中行整份落盘 — the backup holds the full rows as query shows them."""
    ctx = context(org, chat_mode=False)
    data = {
        "名称": "n",
        "数量": 3,
        "价格": "12.5",
        "日期": "2024-05-01",
        "时刻": "2024-05-01T10:00:00Z",
        "时间": "09:30",
        "完成": True,
        "标签": ["红", "蓝"],
        "附加": {"a": [1, 2]},
    }
    ins = await run(yard, ctx, "insert", table_id=kinds, data=data)
    assert ins["ok"], ins
    before = (await run(yard, ctx, "query", table_id=kinds))["list"]
    env = await run(yard, ctx, "delete_by", table_id=kinds, filters=[{"field": "名称", "op": "eq", "value": "n"}])
    assert env["ok"] and env["deleted"] == 1 and env["backup_file"], env
    saved = json.loads(Path(env["backup_file"]).read_text(encoding="utf-8"))
    assert saved == before, (saved, before)


async def test_own_scope_delete_batch_backs_up_and_deletes_only_own_rows(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=9)  # 工号 E0/E1/E2
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    boss = context(org, role_id="boss", chat_mode=False)
    every = (await run(yard, boss, "query", table_id=table_id))["list"]
    me = context(org, actor_emp_no="E1", chat_mode=False)
    env = await run(yard, me, "delete_batch", table_id=table_id, row_ids=[r["id"] for r in every])
    assert env["ok"] and env["deleted"] == 3, env
    saved = json.loads(Path(env["backup_file"]).read_text(encoding="utf-8"))
    assert {r["工号"] for r in saved} == {"E1"} and len(saved) == 3, saved
    assert await count(conn, org) == 6 and await count(conn, org, where="WHERE 工号 = 'E1'") == 0


# ====================================================================================================================
# §7.2 row scope own on the remaining structured actions; grants


@pytest.fixture
async def own_table(yard: SkillYard, org: str) -> str:
    table_id = await make_table(yard, org, rows=9)
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    return table_id


async def test_own_scope_single_delete_and_update_of_owner_field(
    yard: SkillYard, org: str, own_table: str, conn: Any
) -> None:
    boss = context(org, role_id="boss")
    rows = (await run(yard, boss, "query", table_id=own_table))["list"]
    mine = next(r["id"] for r in rows if r["工号"] == "E1")
    theirs = next(r["id"] for r in rows if r["工号"] == "E2")
    me = context(org, actor_emp_no="E1")
    gone = await run(yard, me, "delete", table_id=own_table, row_id=theirs)
    assert gone["ok"] is False and gone["error_type"] == "recoverable", gone
    assert await count(conn, org, where=f"WHERE id = {theirs}") == 1
    steal = await run(yard, me, "update", table_id=own_table, row_id=mine, data={"工号": "E2"})
    assert steal["ok"] is False and "工号" in steal["error"], steal
    assert await count(conn, org, where=f"WHERE id = {mine} AND 工号 = 'E1'") == 1
    cols = await run(yard, me, "list_columns", table_id=own_table)
    assert cols["ok"] and [c["title"] for c in cols["data"]] == ["姓名", "工号", "城市", "金额"], cols
    mine_gone = await run(yard, me, "delete", table_id=own_table, row_id=mine)
    assert mine_gone["ok"] and mine_gone["data"] is True, mine_gone


async def test_own_scope_import_defaults_and_mapping_cannot_set_another_owner(
    yard: SkillYard, org: str, own_table: str, conn: Any
) -> None:
    me = context(org, actor_emp_no="E5")
    rel = write_json(yard, me, "import/own.json", [{"n": f"x{i}", "who": "E0"} for i in range(4)])
    env = await run(
        yard,
        me,
        "insert_from_file",
        table_id=own_table,
        file=rel,
        mapping={"姓名": "n", "工号": "who"},
        defaults={"工号": "E2"},
    )
    assert env["ok"] and env["inserted"] == 4, env
    assert await count(conn, org, where="WHERE 工号 = 'E5'") == 4


async def test_own_scope_upsert_cannot_change_owner_of_own_row(
    yard: SkillYard, org: str, own_table: str, conn: Any
) -> None:
    me = context(org, actor_emp_no="E1")
    env = await run(yard, me, "upsert", table_id=own_table, key_fields="姓名", records=[{"姓名": "人1", "工号": "E0"}])
    assert env["ok"] or env["error_type"] == "recoverable", env
    assert await count(conn, org, where="WHERE 姓名 = '人1' AND 工号 = 'E1'") == 1
    assert await count(conn, org, where="WHERE 工号 = 'E0'") == 3


async def test_own_scope_with_an_integer_owner_field(yard: SkillYard, org: str, conn: Any) -> None:
    """permissions.md: on an own-scoped table you see, count, change and delete only rows whose owner field holds
    your employee number, and every row you insert gets it (here the owner field is an 整数)."""
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="工单",
        fields=[{"title": "标题", "uidt": "文本"}, {"title": "员工号", "uidt": "整数"}],
    )
    records = [{"标题": f"t{i}", "员工号": 1000 + i % 2} for i in range(6)]
    assert (await run(yard, ctx, "insert_batch", table_id=made["id"], records=records))["inserted"] == 6
    await grant(yard, org, "工单", "staff", "all", row_scope="own", owner_field="员工号")
    me = context(org, actor_emp_no=1001, chat_mode=False)
    q = await run(yard, me, "query", table_id=made["id"])
    assert q["ok"] and {r["员工号"] for r in q["list"]} == {1001} and q["pageInfo"]["totalRows"] == 3, q
    ins = await run(yard, me, "insert", table_id=made["id"], data={"标题": "new", "员工号": 1000})
    assert ins["ok"] and ins["data"]["员工号"] == 1001, ins
    gone = await run(yard, me, "delete_by", table_id=made["id"], filters=[{"field": "标题", "op": "not_null"}])
    assert gone["ok"] and gone["deleted"] == 4, gone
    assert await count(conn, org, "工单") == 3 and await count(conn, org, "工单", "WHERE 员工号 = 1001") == 0


async def test_grants_limit_each_action_separately(yard: SkillYard, org: str) -> None:
    """§7.2 / references/permissions.md: on a table with grants, a granted role may only run the actions it was
    granted; structure actions stay owner/admin whatever the grants say."""
    table_id = await make_table(yard, org, rows=3)
    stored = await grant(yard, org, "客户", "clerk", ["query"])
    assert stored["ops"] == ["query"], stored
    clerk = context(org, role_id="clerk", team_role="member", chat_mode=False)
    assert (await run(yard, clerk, "query", table_id=table_id))["ok"]
    for action, params in [
        ("aggregate", {"metrics": [{"op": "count"}]}),
        ("insert", {"data": {"姓名": "x"}}),
        ("insert_batch", {"records": [{"姓名": "x"}, {"姓名": "y"}]}),
        ("upsert", {"key_fields": ["姓名"], "records": [{"姓名": "人1"}]}),
        ("update_by", {"filters": [{"field": "姓名", "op": "eq", "value": "人1"}], "data": {"城市": "北京"}}),
        ("delete_by", {"filters": [{"field": "姓名", "op": "eq", "value": "人1"}]}),
        ("delete", {"row_id": 1}),
    ]:
        env = await run(yard, clerk, action, table_id=table_id, **params)
        assert env["ok"] is False and env["error_type"] == "config", (action, env)
    full = await grant(yard, org, "客户", "writer", "all")
    assert "delete_by" in full["ops"]
    writer = context(org, role_id="writer", team_role="member")
    structure = await run(yard, writer, "add_field", table_id=table_id, field={"title": "x", "uidt": "文本"})
    assert structure["ok"] is False and structure["error_type"] == "config", structure


async def test_python_admin_grant_by_table_id_and_list(yard: SkillYard, org: str) -> None:
    from skillyard.builtin_skills.datatable import admin

    table_id = await make_table(yard, org)
    stored = await admin.grant(yard, org=org, table=table_id, role="r", ops="write")
    assert stored["table_id"] == table_id and stored["table"] == "客户", stored
    listed = await admin.list_grants(yard, org=org)
    assert listed == [stored], listed


# ====================================================================================================================
# §3.5 alias normalization


@pytest.mark.parametrize("word", ["LIST-COLUMNS", "listColumns", "list columns", "List_Columns", "describe"])
async def test_action_spellings_reach_list_columns(yard: SkillYard, org: str, word: str) -> None:
    await make_table(yard, org)
    env = await yard.run("datatable", {"action": word, "payload": {"table_name": "客户"}}, context=context(org))
    assert env["ok"] and env["action"] == "list_columns" and "→ list_columns" in env["action_note"], env


@pytest.mark.parametrize("word", ["Update-By", "UPDATE_BY", "updateBy", "update by", "按条件更新"])
async def test_action_spellings_reach_update_by(yard: SkillYard, org: str, conn: Any, word: str) -> None:
    await make_table(yard, org, rows=2)
    env = await yard.run(
        "datatable",
        {"action": word, "table_name": "客户", "filter": {"姓名": "人1"}, "values": {"城市": "北京"}},
        context=context(org),
    )
    assert env["ok"] and env["action"] == "update_by" and env["updated"] == 1, env
    note = env["action_note"]
    assert "→ update_by" in note and "filter → filters" in note and "values → data" in note, note
    assert await count(conn, org, where="WHERE 城市 = '北京'") == 1


@pytest.mark.parametrize("word", ["确认", " 确认 ", "confirm", "确认确认"])
async def test_a_bare_confirm_is_no_action(yard: SkillYard, org: str, word: str) -> None:
    table_id = await make_table(yard, org)
    env = await yard.run("datatable", {"action": word, "payload": {"table_id": table_id}}, context=context(org))
    assert env["ok"] is False and env["need_param"] == "action" and "delete_table" in env["supported_actions"], env
    listed = await run(yard, context(org), "list_tables")
    assert [t["title"] for t in listed["data"]] == ["客户"]


@pytest.mark.parametrize(
    ("value", "confirmed"),
    [
        ("true", True),
        ("是", True),
        ("yes", True),
        (1, True),
        ("false", False),
        ("否", False),
        (0, False),
        (None, False),
    ],
)
async def test_confirm_values(yard: SkillYard, org: str, value: Any, confirmed: bool) -> None:
    """§3.5.4: 确认=true only from the caller; an explicit no (or nothing) only previews."""
    table_id = await make_table(yard, org)
    env = await run(yard, context(org), "delete_field", table_id=table_id, field_title="城市", 确认=value)
    assert env["ok"], env
    if confirmed:
        assert env.get("deleted") is True and "dry_run" not in env, env
    else:
        assert env["dry_run"] is True, env
    cols = [c["title"] for c in (await run(yard, context(org), "list_columns", table_id=table_id))["data"]]
    assert ("城市" in cols) is not confirmed


async def test_dry_run_echoes_the_normalized_parameters(yard: SkillYard, org: str) -> None:
    """§3.5.5: 预演返回必须回显收到的参数，并写明「缺 确认=true 所以只预演」; §3.5.1–2 notes for every alias."""
    await make_table(yard, org)
    ctx = context(org)
    env = await yard.run("datatable", {"action": "drop_table", "payload": {"table": "客户"}}, context=ctx)
    assert env["ok"] and env["dry_run"] is True and env["action"] == "delete_table", env
    assert env["received"].get("table_name") == "客户", env
    assert "确认=true" in env["message"], env
    assert "drop_table → delete_table" in env["action_note"] and "table → table_name" in env["action_note"], env
    assert isinstance(env["for_user"], list) and env["for_user"], env
    listed = await run(yard, ctx, "list_tables")
    assert [t["title"] for t in listed["data"]] == ["客户"]


async def test_confirm_is_never_read_from_data_or_other_keys(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    for extra in (
        {"data": {"确认": True}},
        {"patch": {"确认": True}},
        {"ok": True},
        {"user_said": "确认"},
        {"message": "确认删除"},
    ):
        env = await run(yard, ctx, "delete_table", table_id=table_id, **extra)
        assert env["ok"] and env["dry_run"] is True, (extra, env)
    listed = await run(yard, ctx, "list_tables")
    assert [t["title"] for t in listed["data"]] == ["客户"]


async def test_nocodb_alias_applies_the_same_normalization(yard: SkillYard, org: str, conn: Any) -> None:
    await make_table(yard, org, rows=3)
    ctx = context(org)
    env = await yard.run("nocodb", {"action": "Delete-Table", "payload": {"table": "客户"}}, context=ctx)
    assert env["ok"] and env["dry_run"] is True and "Delete-Table → delete_table" in env["action_note"], env
    q = await yard.run("nocodb", {"action": "查询", "table": "客户", "order_by": "-金额", "limit": 1}, context=ctx)
    assert q["ok"] and q["list"][0]["金额"] == 2 and "order_by → sort" in q["action_note"], q
    assert await count(conn, org) == 3


async def test_list_columns_shape_equals_field_definition_shape_for_every_type(
    yard: SkillYard, org: str, kinds: str
) -> None:
    """issue 4: a field definition is {title, uidt, required?, unique?, options?, precision?, scale?} — the same shape
    list_columns returns. Copying a table's columns into create_table gives the same columns back."""
    ctx = context(org)
    cols = (await run(yard, ctx, "list_columns", table_id=kinds))["data"]
    assert all(set(c) == {"title", "uidt", "required", "unique", "options", "precision", "scale"} for c in cols)
    copy = await run(yard, ctx, "create_table", table_name="类型副本", fields=cols)
    assert copy["ok"], copy
    assert (await run(yard, ctx, "list_columns", table_id=copy["id"]))["data"] == cols
    for col in cols:
        added = await run(yard, ctx, "add_field", table_id=copy["id"], field={**col, "title": col["title"] + "2"})
        assert added["ok"], added
        assert {k: added[k] for k in col if k != "title"} == {k: v for k, v in col.items() if k != "title"}, added


async def test_fields_alias_columns_and_type_key_in_create_table(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    env = await yard.run(
        "datatable",
        {
            "action": "create_table",
            "table_name": "订单",
            "columns": [{"title": "单号", "type": "text", "required": True}, {"title": "金额", "type": "currency"}],
        },
        context=ctx,
    )
    assert env["ok"] and "columns → fields" in env["action_note"], env
    cols = (await run(yard, ctx, "list_columns", table_id=env["id"]))["data"]
    assert [(c["title"], c["uidt"], c["required"]) for c in cols] == [("单号", "文本", True), ("金额", "数字", False)]
    assert (cols[1]["precision"], cols[1]["scale"]) == (18, 2)
