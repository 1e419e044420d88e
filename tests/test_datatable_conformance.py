"""Review probes for issue 4 (the built-in datatable skill): black-box tests against the documented interfaces.

Every probe goes through ``SkillYard.run("datatable", …)`` (or the ``skillyard datatable`` commands / the admin API)
against the real PostgreSQL of the test session, and checks what issue 4, spec §7 / §3.5 and docs/datatable.md say.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from support.datatable_probes import (
    FIELDS,
    ONE_OF_EACH_TYPE,
    context,
    count,
    grant,
    make_table,
    run,
    unload,
    workspace,
    write_json,
)
from skillyard import SkillYard

pytestmark = pytest.mark.usefixtures("home", "db_env")

# ====================================================================================================================
# Storage model (§7.1)


async def test_schema_name_is_org_lowercased_without_non_alphanumerics(yard: SkillYard, conn: Any) -> None:
    raw = "Acme-" + uuid.uuid4().hex[:8].upper() + ".Ltd"
    env = await run(yard, context(raw), "create_table", table_name="客户", fields=FIELDS)
    assert env["ok"], env
    expected = "org_data_" + re.sub(r"[^a-z0-9]", "", raw.lower())
    assert await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", expected) == 1
    cols = await conn.fetch(
        "SELECT column_name, data_type, column_default FROM information_schema.columns "
        "WHERE table_schema = $1 AND table_name = '客户' ORDER BY ordinal_position",
        expected,
    )
    by_name = {c["column_name"]: c for c in cols}
    assert by_name["id"]["data_type"] == "bigint" and "nextval" in (by_name["id"]["column_default"] or "")
    assert "created_at" in by_name


@pytest.mark.parametrize("org_id", [None, "", "   ", "-_-", "中文"])
async def test_blank_org_for_every_kind_of_action_is_config_and_creates_nothing(
    yard: SkillYard, conn: Any, org_id: Any
) -> None:
    before = await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'org_data_%'")
    for action, params in [
        ("list_tables", {}),
        ("query", {"table_name": "客户"}),
        ("sql_query", {"sql": "SELECT 1 AS x"}),
        ("create_table", {"table_name": "客户", "fields": FIELDS}),
    ]:
        ctx = {"team_role": "owner", "session_id": "s-blank"}
        if org_id is not None:
            ctx["org_id"] = org_id
        env = await yard.run("datatable", {"action": action, "payload": params}, context=ctx)
        assert env["ok"] is False and env["error_type"] == "config" and env.get("non_retriable") is True, (action, env)
    assert await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'org_data_%'") == before
    assert not await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = 'org_data_'")


async def test_table_name_table_and_table_title_resolve_by_exact_title(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=2)
    ctx = context(org)
    for key in ("table_name", "table", "table_title"):
        env = await run(yard, ctx, "query", **{key: "客户"})
        assert env["ok"] and env["pageInfo"]["totalRows"] == 2, (key, env)
    listed = await run(yard, ctx, "list_tables")
    row = listed["data"][0]
    assert set(row) >= {"id", "title", "schema", "qualified"} and row["id"] == table_id
    assert uuid.UUID(row["id"]) and row["schema"] == f"org_data_{org}"
    # not a prefix / case-insensitive match
    near = await run(yard, ctx, "query", table_name="客")
    assert near["ok"] is False and near["need_param"] == "table_id" and "客户" in near["error"]


# ====================================================================================================================
# Identifiers (§7.1)


@pytest.mark.parametrize(
    "name",
    ["a" * 50, "_下划线", "客户2024", "Customer_List", "中" * 20],
)
async def test_valid_identifiers_are_accepted_as_table_and_field_names(yard: SkillYard, org: str, name: str) -> None:
    ctx = context(org)
    env = await run(yard, ctx, "create_table", table_name=name, fields=[{"title": name, "uidt": "文本"}])
    assert env["ok"], env
    written = await run(yard, ctx, "insert", table_id=env["id"], data={name: "v"})
    assert written["ok"] and written["data"][name] == "v", written
    again = await run(yard, ctx, "list_columns", table_name=name)
    assert [c["title"] for c in again["data"]] == [name]


async def test_chinese_identifiers_fit_postgresql_63_bytes(yard: SkillYard, org: str) -> None:
    """docs/datatable.md decision: titles are 1–50 characters and at most 63 bytes in UTF-8 (they are real
    PostgreSQL names): 21 Chinese characters work end to end, 22 are refused with the reason and no table is made."""
    ctx = context(org)
    name = "中" * 21
    env = await run(yard, ctx, "create_table", table_name=name, fields=[{"title": name, "uidt": "文本"}])
    assert env["ok"], env
    written = await run(yard, ctx, "insert", table_id=env["id"], data={name: "v"})
    assert written["ok"] and written["data"][name] == "v", written
    longer = "中" * 22
    refused = await run(yard, ctx, "create_table", table_name=longer, fields=[{"title": "名称", "uidt": "文本"}])
    assert not refused["ok"] and "63" in refused["error"] and refused["need_param"] == "table_name", refused
    listed = await run(yard, ctx, "list_tables")
    titles = [t["title"] for t in listed["data"]]
    assert name in titles and longer not in titles


@pytest.mark.parametrize(
    "name", ["a" * 51, "中" * 51, "1客户", "9abc", "容差%", "客户 表", "a-b", "", "客户.表", "a;b", "表（新）"]
)
async def test_invalid_identifiers_are_refused(yard: SkillYard, org: str, name: str) -> None:
    ctx = context(org)
    env = await run(yard, ctx, "create_table", table_name=name, fields=[{"title": "名称", "uidt": "文本"}])
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    made = await run(yard, ctx, "create_table", table_name="好表", fields=[{"title": "名称", "uidt": "文本"}])
    field = await run(yard, ctx, "add_field", table_id=made["id"], field={"title": name, "uidt": "文本"})
    assert field["ok"] is False and field["error_type"] == "recoverable", field


# ====================================================================================================================
# Logical types and field definitions (§7.1, §7.5)

ALL_TYPES = [
    ("文本", "文本", None),
    ("长文本", "长文本", None),
    ("整数", "整数", None),
    ("数字", "数字", (38, 2)),
    ("日期", "日期", None),
    ("日期时间", "日期时间", None),
    ("时间", "时间", None),
    ("勾选", "勾选", None),
    ("单选", "单选", None),
    ("多选", "多选", None),
    ("邮箱", "邮箱", None),
    ("电话", "电话", None),
    ("链接", "链接", None),
    ("JSON", "JSON", None),
    ("金额", "数字", (18, 2)),
    ("百分比", "数字", (12, 4)),
    ("高精度数字", "数字", (38, 18)),
    ("text", "文本", None),
    ("long_text", "长文本", None),
    ("integer", "整数", None),
    ("number", "数字", (38, 2)),
    ("date", "日期", None),
    ("datetime", "日期时间", None),
    ("time", "时间", None),
    ("checkbox", "勾选", None),
    ("single_select", "单选", None),
    ("multi_select", "多选", None),
    ("email", "邮箱", None),
    ("phone", "电话", None),
    ("url", "链接", None),
    ("json", "JSON", None),
    ("currency", "数字", (18, 2)),
    ("percent", "数字", (12, 4)),
    ("decimal", "数字", (38, 18)),
]


async def test_every_type_and_alias_in_create_table_with_type_key(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    fields = []
    for i, (name, _, _) in enumerate(ALL_TYPES):
        spec: dict[str, Any] = {"title": f"f{i}", ("type" if i % 2 else "uidt"): name}
        if name in ("单选", "多选", "single_select", "multi_select"):
            spec["options"] = ["甲", "乙"]
        fields.append(spec)
    made = await run(yard, ctx, "create_table", table_name="全类型", fields=fields)
    assert made["ok"] and set(made) >= {"id", "title"} and made["title"] == "全类型", made
    cols = await run(yard, ctx, "list_columns", table_id=made["id"])
    assert cols["ok"], cols
    for col, (name, uidt, preset) in zip(cols["data"], ALL_TYPES, strict=True):
        assert set(col) >= {"title", "uidt", "required", "options", "precision", "scale"}, col
        assert col["uidt"] == uidt, (name, col)
        if preset:
            assert (col["precision"], col["scale"]) == preset, (name, col)


async def test_list_columns_shape_round_trips_into_create_table_and_add_field(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    src = await make_table(yard, org)
    cols = (await run(yard, ctx, "list_columns", table_id=src))["data"]
    copy = await run(yard, ctx, "create_table", table_name="副本", fields=cols)
    assert copy["ok"], copy
    assert (await run(yard, ctx, "list_columns", table_id=copy["id"]))["data"] == cols
    added = await run(yard, ctx, "add_field", table_id=copy["id"], field={**cols[0], "title": "别名"})
    assert added["ok"] and added["title"] == "别名" and added["uidt"] == cols[0]["uidt"], added
    assert added["required"] is True


async def test_add_field_with_type_alias_returns_the_definition(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    added = await run(yard, ctx, "add_field", table_id=table_id, field={"title": "比例", "type": "percent"})
    assert added["ok"], added
    assert (added["title"], added["uidt"], added["precision"], added["scale"]) == ("比例", "数字", 12, 4)


async def test_system_columns_cannot_be_defined(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    for title in ("id", "created_at"):
        env = await run(yard, ctx, "create_table", table_name="系统", fields=[{"title": title, "uidt": "文本"}])
        assert env["ok"] is False and env["error_type"] == "recoverable", env


# ====================================================================================================================
# Write validation (§7.5)

VALUE_FIELDS = ONE_OF_EACH_TYPE


@pytest.fixture
async def values_table(yard: SkillYard, org: str) -> str:
    made = await run(yard, context(org), "create_table", table_name="值表", fields=VALUE_FIELDS)
    assert made["ok"], made
    return str(made["id"])


@pytest.mark.parametrize(
    ("field", "given", "stored"),
    [
        ("数量", "１２３", 123),
        ("数量", "1,234,567", 1234567),
        ("数量", "１，２３４", 1234),
        ("数量", -5, -5),
        ("价格", "１２.５", 12.5),
        ("价格", "12,345.67", 12345.67),
        ("金额", "１,２００.５", 1200.5),
        ("日期", "2026-03-01", "2026-03-01"),
        ("时间", "09:30", "09:30:00"),
        ("完成", True, True),
        ("城市", "上海", "上海"),
        ("标签", ["红", "蓝"], ["红", "蓝"]),
        ("邮箱", "a@example.com", "a@example.com"),
        ("主页", "https://example.com/x", "https://example.com/x"),
    ],
)
async def test_values_are_converted_on_write(
    yard: SkillYard, org: str, values_table: str, field: str, given: Any, stored: Any
) -> None:
    env = await run(yard, context(org), "insert", table_id=values_table, data={"名称": "n", field: given})
    assert env["ok"], env
    got = env["data"][field]
    if isinstance(stored, float):
        got = float(got)
    assert got == stored, env["data"]


@pytest.mark.parametrize(
    ("field", "given"),
    [
        ("数量", "3万"),
        ("数量", "2亿"),
        ("数量", "5千"),
        ("数量", "12k"),
        ("数量", "3M"),
        ("数量", "1bn"),
        ("价格", "3.5万"),
        ("价格", "1.2k"),
        ("价格", "2.5M"),
        ("价格", "1.5bn"),
        ("金额", "１２万"),
        ("数量", "1.5"),
        ("数量", 2.5),
        ("日期", "2026/03/01"),
        ("日期", "03/01/2026"),
        ("日期", "2026年3月1日"),
        ("城市", "广州"),
        ("标签", ["红", "黄"]),
        ("邮箱", "not-an-email"),
        ("主页", "example.com"),
        ("完成", "maybe"),
    ],
)
async def test_bad_values_are_refused_never_converted(
    yard: SkillYard, org: str, values_table: str, conn: Any, field: str, given: Any
) -> None:
    env = await run(yard, context(org), "insert", table_id=values_table, data={"名称": "n", field: given})
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert field in env["error"]
    assert await count(conn, org, "值表") == 0


async def test_magnitude_words_in_a_batch_fail_the_row_only(yard: SkillYard, org: str, values_table: str) -> None:
    batch = await run(
        yard,
        context(org),
        "insert_batch",
        table_id=values_table,
        records=[{"名称": "a", "价格": "10"}, {"名称": "b", "价格": "1.2万"}, {"名称": "c", "数量": "3k"}],
    )
    assert batch["ok"], batch
    assert (batch["inserted"], batch["failed"], batch["verified_total"]) == (1, 2, 1)
    assert [e["row"] for e in batch["errors"]] == [2, 3]
    assert all(e["error"] for e in batch["errors"])


async def test_unknown_fields_dropped_and_reported_on_every_write(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    one = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "甲", "外号": "x"})
    assert one["ok"] and one["dropped"] == ["外号"] and "外号" not in one["data"]
    batch = await run(yard, ctx, "insert_batch", table_id=table_id, records=[{"姓名": "乙", "外号": 1}, {"姓名": "丙"}])
    assert batch["ok"] and batch["inserted"] == 2 and batch["dropped"] == ["外号"], batch
    upd = await run(yard, ctx, "update", table_id=table_id, row_id=one["id"], data={"城市": "北京", "外号": "y"})
    assert upd["ok"] and upd["dropped"] == ["外号"], upd
    by = await run(
        yard,
        ctx,
        "update_by",
        table_id=table_id,
        filters=[{"field": "姓名", "op": "eq", "value": "乙"}],
        data={"城市": "北京", "外号": "z"},
    )
    assert by["ok"] and by["updated"] == 1 and by["dropped"] == ["外号"], by
    up = await run(yard, ctx, "upsert", table_id=table_id, key_fields="姓名", records=[{"姓名": "丁", "外号": 1}])
    assert up["ok"] and up["inserted"] == 1 and up["dropped"] == ["外号"], up


async def test_system_columns_in_data_are_not_written(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    env = await run(
        yard, ctx, "insert", table_id=table_id, data={"姓名": "甲", "id": 999999, "created_at": "2000-01-01"}
    )
    assert env["ok"], env
    assert env["data"]["id"] != 999999 and not str(env["data"]["created_at"]).startswith("2000")


async def test_empty_string_is_null_for_every_type(yard: SkillYard, org: str, values_table: str) -> None:
    data = {f["title"]: "" for f in VALUE_FIELDS}
    data["名称"] = "n"
    env = await run(yard, context(org), "insert", table_id=values_table, data=data)
    assert env["ok"], env
    assert all(env["data"][f["title"]] is None for f in VALUE_FIELDS[1:]), env["data"]


async def test_required_is_checked_on_insert_only(yard: SkillYard, org: str, values_table: str) -> None:
    ctx = context(org)
    missing = await run(yard, ctx, "insert", table_id=values_table, data={"数量": 1})
    assert missing["ok"] is False and "名称" in missing["error"], missing
    empty = await run(yard, ctx, "insert", table_id=values_table, data={"名称": "", "数量": 1})
    assert empty["ok"] is False and "名称" in empty["error"], empty
    batch = await run(yard, ctx, "insert_batch", table_id=values_table, records=[{"数量": 1}, {"名称": "x"}])
    assert (batch["inserted"], batch["failed"]) == (1, 1) and batch["errors"][0]["row"] == 1, batch
    row_id = batch["ids"][0] if "ids" in batch else None
    assert row_id is not None
    upd = await run(yard, ctx, "update", table_id=values_table, row_id=row_id, data={"数量": 2})
    assert upd["ok"], upd
    cleared = await run(yard, ctx, "update", table_id=values_table, row_id=row_id, data={"名称": ""})
    assert cleared["ok"] and cleared["data"]["名称"] is None, cleared


async def test_upsert_that_inserts_a_new_row_checks_required(yard: SkillYard, org: str, conn: Any) -> None:
    """§7.5 "required checked on insert only": an upsert record that becomes a new row is an insert."""
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="员工",
        fields=[{"title": "工号", "uidt": "文本"}, {"title": "姓名", "uidt": "文本", "required": True}],
    )
    env = await run(yard, ctx, "upsert", table_id=made["id"], key_fields=["工号"], records=[{"工号": "E9"}])
    assert env["ok"], env
    assert env["inserted"] == 0 and env["failed"] == 1, env
    assert await count(conn, org, "员工") == 0


# ====================================================================================================================
# Filters, sort, paging, metrics (§7.4)


@pytest.fixture
async def people(yard: SkillYard, org: str) -> str:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="员工",
        fields=[
            {"title": "姓名", "uidt": "文本"},
            {"title": "部门", "uidt": "单选", "options": ["研发", "销售", "财务"]},
            {"title": "薪资", "uidt": "整数"},
            {"title": "入职", "uidt": "日期"},
            {"title": "备注", "uidt": "文本"},
        ],
    )
    rows = [
        {"姓名": "张三", "部门": "研发", "薪资": 8000, "入职": "2024-01-01", "备注": "Alpha"},
        {"姓名": "李四", "部门": "研发", "薪资": 15000, "入职": "2024-06-01"},
        {"姓名": "王五", "部门": "销售", "薪资": 20000, "入职": "2025-01-01", "备注": "beta"},
        {"姓名": "赵六", "部门": "财务", "薪资": 30000, "入职": "2025-06-01"},
        {"姓名": "钱七", "部门": "销售", "薪资": 5000, "入职": "2023-03-01", "备注": "100%达成"},
    ]
    batch = await run(yard, ctx, "insert_batch", table_id=made["id"], records=rows)
    assert batch["inserted"] == 5, batch
    return str(made["id"])


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
    yard: SkillYard, org: str, people: str, cond: dict[str, Any], names: set[str]
) -> None:
    env = await run(yard, context(org), "query", table_id=people, filters=[cond])
    assert env["ok"], env
    assert {r["姓名"] for r in env["list"]} == names
    assert env["pageInfo"]["totalRows"] == len(names)


async def test_filters_are_anded(yard: SkillYard, org: str, people: str) -> None:
    env = await run(
        yard,
        context(org),
        "query",
        table_id=people,
        filters=[
            {"field": "部门", "op": "eq", "value": "研发"},
            {"field": "薪资", "op": "between", "value": [8000, 20000]},
        ],
    )
    assert {r["姓名"] for r in env["list"]} == {"张三", "李四"}


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
    yard: SkillYard, org: str, people: str, conn: Any, action: str, filters: Any
) -> None:
    params: dict[str, Any] = {"table_id": people, "filters": filters}
    if action == "aggregate":
        params["metrics"] = [{"op": "count", "alias": "n"}]
    if action == "update_by":
        params["data"] = {"备注": "改"}
    env = await run(yard, context(org, chat_mode=False), action, **params)
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert await count(conn, org, "员工") == 5
    assert await count(conn, org, "员工", "WHERE 备注 = '改'") == 0


async def test_field_map_filters_are_converted_and_noted(yard: SkillYard, org: str, people: str, conn: Any) -> None:
    ctx = context(org, chat_mode=False)
    env = await run(yard, ctx, "query", table_id=people, filters={"部门": "研发"})
    assert env["ok"] and {r["姓名"] for r in env["list"]} == {"张三", "李四"}
    assert "field map" in env["action_note"] or "部门" in env["action_note"], env
    two = await run(yard, ctx, "query", table_id=people, filters={"部门": "研发", "薪资": 8000})
    assert [r["姓名"] for r in two["list"]] == ["张三"] and two.get("action_note")
    upd = await run(yard, ctx, "update_by", table_id=people, filters={"部门": "销售"}, data={"备注": "x"})
    assert upd["ok"] and upd["updated"] == 2 and upd.get("action_note"), upd
    gone = await run(yard, ctx, "delete_by", table_id=people, filters={"姓名": "赵六"})
    assert gone["ok"] and gone["deleted"] == 1 and gone.get("action_note"), gone
    bad = await run(yard, ctx, "query", table_id=people, filters={"岗位": "x"})
    assert bad["ok"] is False and "岗位" in bad["error"]


async def test_sort_default_is_id_desc_and_minus_prefix(yard: SkillYard, org: str, people: str) -> None:
    ctx = context(org)
    default = await run(yard, ctx, "query", table_id=people)
    ids = [r["id"] for r in default["list"]]
    assert ids == sorted(ids, reverse=True)
    desc = await run(yard, ctx, "query", table_id=people, sort="-薪资")
    assert [r["薪资"] for r in desc["list"]] == [30000, 20000, 15000, 8000, 5000]
    asc = await run(yard, ctx, "query", table_id=people, sort="薪资", limit=2, offset=1)
    assert [r["薪资"] for r in asc["list"]] == [8000, 15000]
    info = asc["pageInfo"]
    assert set(info) >= {"totalRows", "page", "pageSize", "isLastPage"} and info["totalRows"] == 5
    bad = await run(yard, ctx, "query", table_id=people, sort="岗位")
    assert bad["ok"] is False
    two = await run(yard, ctx, "query", table_id=people, sort=["薪资", "姓名"])
    assert two["ok"] is False


async def test_metrics_with_alias_and_group_by_field_or_list(yard: SkillYard, org: str, people: str) -> None:
    ctx = context(org)
    metrics = [
        {"field": "薪资", "op": "sum", "alias": "总薪资"},
        {"field": "薪资", "op": "avg", "alias": "平均"},
        {"field": "薪资", "op": "max", "alias": "最高"},
        {"field": "薪资", "op": "min", "alias": "最低"},
        {"op": "count", "alias": "人数"},
    ]
    flat = await run(yard, ctx, "aggregate", table_id=people, metrics=metrics)
    assert flat["ok"] and set(flat) >= {"rows", "group_by", "metrics"}, flat
    (row,) = flat["rows"]
    assert float(row["总薪资"]) == 78000 and float(row["平均"]) == 15600
    assert float(row["最高"]) == 30000 and float(row["最低"]) == 5000 and row["人数"] == 5
    grouped = await run(yard, ctx, "aggregate", table_id=people, metrics=metrics[4:], group_by="部门")
    assert {r["部门"]: r["人数"] for r in grouped["rows"]} == {"研发": 2, "销售": 2, "财务": 1}
    assert grouped["group_by"] == ["部门"] or grouped["group_by"] == "部门"
    both = await run(yard, ctx, "aggregate", table_id=people, metrics=metrics[:1], group_by=["部门", "姓名"])
    assert len(both["rows"]) == 5 and all("部门" in r and "姓名" in r and "总薪资" in r for r in both["rows"])
    filtered = await run(
        yard,
        ctx,
        "aggregate",
        table_id=people,
        metrics=metrics[4:],
        filters=[{"field": "部门", "op": "eq", "value": "研发"}],
    )
    assert filtered["rows"][0]["人数"] == 2
    bad = await run(yard, ctx, "aggregate", table_id=people, metrics=[{"field": "薪资", "op": "median"}])
    assert bad["ok"] is False


async def _big_table(yard: SkillYard, org: str, rows: int) -> str:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="大表",
        fields=[{"title": "编号", "uidt": "整数"}, {"title": "组", "uidt": "整数"}],
    )
    rel = write_json(yard, ctx, "import/big.json", [{"编号": i, "组": i} for i in range(rows)])
    imported = await run(yard, ctx, "insert_from_file", table_id=made["id"], file=rel)
    assert imported["ok"] and imported["inserted"] == rows, imported
    return str(made["id"])


async def test_query_limit_default_100_cap_1000(yard: SkillYard, org: str) -> None:
    table_id = await _big_table(yard, org, 1100)
    ctx = context(org)
    default = await run(yard, ctx, "query", table_id=table_id)
    assert len(default["list"]) == 100 and default["pageInfo"]["totalRows"] == 1100
    capped = await run(yard, ctx, "query", table_id=table_id, limit=5000)
    capped = unload(capped)
    assert capped["ok"] and len(capped["list"]) == 1000


async def test_aggregate_limit_default_1000_cap_10000(yard: SkillYard, org: str) -> None:
    table_id = await _big_table(yard, org, 10050)
    ctx = context(org)
    metrics = [{"op": "count", "alias": "n"}]
    default = unload(await run(yard, ctx, "aggregate", table_id=table_id, metrics=metrics, group_by="组"))
    assert default["ok"] and len(default["rows"]) == 1000
    capped = unload(await run(yard, ctx, "aggregate", table_id=table_id, metrics=metrics, group_by="组", limit=50000))
    assert capped["ok"] and len(capped["rows"]) == 10000


# ====================================================================================================================
# verified_total, bulk limits, insert_from_file (§7.3, §7.4, §7.8.7)


async def test_verified_total_counts_this_operation_not_the_table(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org, rows=7)
    batch = await run(yard, ctx, "insert_batch", table_id=table_id, records=[{"姓名": "a"}, {"姓名": "b"}, {}])
    assert (batch["inserted"], batch["skipped"], batch["failed"], batch["verified_total"]) == (2, 1, 0, 2), batch
    assert set(batch) >= {"inserted", "skipped", "failed", "errors", "verified_total"}
    up = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields=["姓名"],
        records=[{"姓名": "a", "城市": "北京"}, {"姓名": "新"}],
    )
    assert (up["inserted"], up["updated"], up["failed"], up["verified_total"]) == (1, 1, 0, 2), up
    assert set(up) >= {"inserted", "updated", "failed", "errors", "verified_total"}
    rel = write_json(yard, ctx, "import/x.json", [{"姓名": f"f{i}"} for i in range(120)])
    imported = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert (imported["inserted"], imported["verified_total"]) == (120, 120), imported
    assert set(imported) >= {"inserted", "skipped", "failed", "errors", "verified_total"}


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


async def test_insert_with_array_is_a_batch_reported_in_action_note(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    env = await run(yard, ctx, "insert", table_id=table_id, data=[{"姓名": "a"}, {"姓名": "b", "金额": "1万"}])
    assert env["ok"] and env["inserted"] == 1 and env["failed"] == 1 and env["verified_total"] == 1, env
    assert "insert_batch" in env["action_note"]


async def test_insert_from_file_mapping_defaults_skip_and_errors(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="会员",
        fields=[
            {"title": "编号", "uidt": "文本", "unique": True},
            {"title": "姓名", "uidt": "文本", "required": True},
            {"title": "等级", "uidt": "单选", "options": ["金", "银"]},
            {"title": "积分", "uidt": "整数"},
        ],
    )
    table_id = made["id"]
    first = await run(yard, ctx, "insert", table_id=table_id, data={"编号": "M0", "姓名": "老会员"})
    assert first["ok"]
    rows = [{"no": f"M{i}", "name": f"会员{i}", "pts": i} for i in range(150)]
    rows[10]["pts"] = "3万"  # magnitude word → failed
    rows[20]["name"] = ""  # required → failed
    rows.append({"no": "M5", "name": "重复"})  # duplicate within the file → skipped with on_conflict=skip
    rel = write_json(yard, ctx, "import/members.json", rows)
    env = await run(
        yard,
        ctx,
        "insert_from_file",
        table_id=table_id,
        file=rel,
        mapping={"编号": "no", "姓名": "name", "积分": "pts"},
        defaults={"等级": "银"},
        on_conflict="skip",
    )
    assert env["ok"], env
    # M0 exists already and M5 repeats: 2 skipped; rows 11 and 21 fail; the rest go in
    assert (env["inserted"], env["skipped"], env["failed"]) == (150 - 1 - 2, 2, 2), env
    assert env["verified_total"] == env["inserted"]
    assert sorted(e["row"] for e in env["errors"]) == [11, 21] and all(e["error"] for e in env["errors"])
    assert await count(conn, org, "会员") == 1 + env["inserted"]
    assert await count(conn, org, "会员", "WHERE 等级 = '银'") == env["inserted"]
    assert (workspace(yard, ctx) / rel).exists(), "datatable does not delete the import file"


async def test_insert_from_file_errors_are_capped_but_counted(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    rel = write_json(yard, ctx, "import/bad.json", [{"姓名": f"x{i}", "金额": "5万"} for i in range(300)])
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] and env["failed"] == 300 and env["inserted"] == 0 and env["verified_total"] == 0, env
    assert 0 < len(env["errors"]) < 300


async def test_insert_from_file_refuses_files_outside_the_workspace(yard: SkillYard, org: str, tmp_path: Path) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps([{"姓名": "x"}]), encoding="utf-8")
    for path in (str(outside), "../outside.json", "../../outside.json"):
        env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=path)
        assert env["ok"] is False and env.get("need_param") == "file", env


async def test_create_table_existing_title_returns_it_with_already_exists(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await run(yard, ctx, "create_table", table_name="客户", fields=FIELDS)
    assert made["ok"] and made.get("already_exists") in (None, False) and set(made) >= {"id", "title"}
    again = await run(yard, ctx, "create_table", table_name="客户", fields=[{"title": "别的", "uidt": "整数"}])
    assert again["ok"] and again["already_exists"] is True and again["id"] == made["id"] and again["title"] == "客户"
    cols = await run(yard, ctx, "list_columns", table_id=made["id"])
    assert [c["title"] for c in cols["data"]] == [f["title"] for f in FIELDS]


# ====================================================================================================================
# Delete protection (§7.7) and dry runs (§3.5)


def backups(yard: SkillYard, ctx: dict[str, Any]) -> list[Path]:
    return sorted(workspace(yard, ctx).glob("del_backup_*.json"))


async def test_confirmation_threshold_is_more_than_ten(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=21)
    ctx = context(org, chat_mode=True)
    ten = await run(yard, ctx, "delete_by", table_id=table_id, filters=[{"field": "金额", "op": "lt", "value": 10}])
    assert ten["ok"] and ten["deleted"] == 10 and "confirm_token" not in ten, ten
    eleven = await run(yard, ctx, "delete_by", table_id=table_id, filters=[{"field": "金额", "op": "gte", "value": 10}])
    assert eleven["ok"] and eleven["needs_confirmation"] is True and eleven["affected"] == 11, eleven
    assert eleven["confirm_token"] and eleven["expires_in"] == 300
    assert await count(conn, org) == 11


async def test_confirm_token_is_bound_to_action_and_honoured_by_another_instance(
    yard: SkillYard, org: str, conn: Any
) -> None:
    table_id = await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    ids = [r["id"] for r in (await run(yard, ctx, "query", table_id=table_id))["list"]]
    asked = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids[:12])
    token = asked["confirm_token"]
    other_action = await run(
        yard,
        ctx,
        "delete_by",
        table_id=table_id,
        filters=[{"field": "金额", "op": "gte", "value": 0}],
        confirm_token=token,
    )
    assert other_action["ok"] is False, other_action
    other_ids = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids[1:13], confirm_token=token)
    assert other_ids["ok"] is False, other_ids
    assert await count(conn, org) == 15
    async with SkillYard() as second:
        done = await second.run(
            "datatable",
            {"action": "delete_batch", "payload": {"table_id": table_id, "row_ids": ids[:12], "confirm_token": token}},
            context=ctx,
        )
    assert done["ok"] and done["deleted"] == 12 and done["requested"] == 12 and done["backup_file"], done
    assert await count(conn, org) == 3


async def test_backups_are_named_and_hold_the_rows(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=5)
    ctx = context(org, chat_mode=True)
    ids = [r["id"] for r in (await run(yard, ctx, "query", table_id=table_id))["list"]]
    batch = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids[:2])
    path = Path(batch["backup_file"])
    assert path.parent.resolve() == workspace(yard, ctx).resolve()
    assert re.fullmatch(r"del_backup_客户_.+\.json", path.name), path.name
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert sorted(r["id"] for r in saved) == sorted(ids[:2]) and all("姓名" in r for r in saved)
    by = await run(yard, ctx, "delete_by", table_id=table_id, filters=[{"field": "姓名", "op": "eq", "value": "人0"}])
    assert by["ok"] and by["deleted"] == 1 and by["backup_file"], by
    assert [r["姓名"] for r in json.loads(Path(by["backup_file"]).read_text(encoding="utf-8"))] == ["人0"]
    single = await run(yard, ctx, "delete", table_id=table_id, row_id=ids[2])
    assert single["ok"] and single["data"] is True and "backup_file" not in single


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


async def test_destructive_structure_actions_only_preview_without_confirm(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org, rows=2)
    for action, params in [
        ("delete_table", {"table_id": table_id}),
        ("delete_field", {"table_id": table_id, "field_title": "城市"}),
        ("update_field", {"table_id": table_id, "field_title": "工号", "patch": {"uidt": "整数"}}),
        ("delete_table", {"table_id": table_id, "确认": False}),
        ("delete_table", {"table_id": table_id, "确认": "no"}),
    ]:
        for _ in range(2):  # a preview is never taken as confirmation
            env = await run(yard, ctx, action, **params)
            assert env["ok"] and env["dry_run"] is True, (action, env)
            assert "确认=true" in env["message"] and env["received"]["table_id"] == table_id, env
    cols = (await run(yard, ctx, "list_columns", table_id=table_id))["data"]
    assert [(c["title"], c["uidt"]) for c in cols][:3] == [("姓名", "文本"), ("工号", "文本"), ("城市", "单选")]
    assert await count(conn, org) == 2
    renamed = await run(yard, ctx, "update_field", table_id=table_id, field_title="工号", patch={"title": "员工号"})
    assert renamed["ok"] and "dry_run" not in renamed and renamed["title"] == "员工号", renamed


@pytest.mark.parametrize("key", ["确认", "confirm", "approve", "确定", "confirmed"])
async def test_confirm_keys_execute_structure_deletes(yard: SkillYard, org: str, key: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    env = await run(yard, ctx, "delete_field", table_id=table_id, field_title="城市", **{key: True})
    assert env["ok"] and env["deleted"] is True and env["field"], env
    assert "dry_run" not in env
    gone = await yard.run("datatable", {"action": "确认删除表", "payload": {"table_id": table_id}}, context=ctx)
    assert gone["ok"] and gone["data"] is True


# ====================================================================================================================
# Permissions (§7.2)


@pytest.mark.parametrize("team_role", ["member", None, "", "viewer"])
async def test_every_structure_action_needs_owner_or_admin(
    yard: SkillYard, org: str, conn: Any, team_role: Any
) -> None:
    table_id = await make_table(yard, org, rows=1)
    ctx = context(org, team_role=team_role)
    if team_role is None:
        ctx.pop("team_role")
    for action, params in [
        ("create_table", {"table_name": "新表", "fields": FIELDS}),
        ("add_field", {"table_id": table_id, "field": {"title": "x", "uidt": "文本"}}),
        ("update_field", {"table_id": table_id, "field_title": "工号", "patch": {"title": "员工号"}}),
        ("update_field", {"table_id": table_id, "field_title": "工号", "patch": {"uidt": "整数"}, "确认": True}),
        ("delete_field", {"table_id": table_id, "field_title": "城市", "确认": True}),
        ("delete_field", {"table_id": table_id, "field_title": "城市"}),
        ("delete_table", {"table_id": table_id, "确认": True}),
        ("sql_execute", {"sql": "CREATE TABLE 新表 (名称 text)"}),
        ("sql_execute", {"sql": "CREATE INDEX ON 客户 (姓名)"}),
        ("sql_execute", {"sql": "CREATE VIEW 视图 AS SELECT 姓名 FROM 客户"}),
    ]:
        env = await run(yard, ctx, action, **params)
        assert env["ok"] is False and env["error_type"] == "config", (action, env)
    cols = (await run(yard, context(org), "list_columns", table_id=table_id))["data"]
    assert [c["title"] for c in cols] == ["姓名", "工号", "城市", "金额"]
    listed = await run(yard, context(org), "list_tables")
    assert [t["title"] for t in listed["data"]] == ["客户"]


@pytest.fixture
async def own_table(yard: SkillYard, org: str) -> str:
    """客户 with 9 rows (工号 E0/E1/E2, three each); role staff limited to its own rows by 工号."""
    table_id = await make_table(yard, org, rows=9)
    stored = await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    assert stored["row_scope"] == "own" and stored["owner_field"] == "工号"
    return table_id


async def test_own_scope_every_read_and_count(yard: SkillYard, org: str, own_table: str) -> None:
    me = context(org, actor_emp_no="E1")
    q = await run(yard, me, "query", table_id=own_table)
    assert {r["工号"] for r in q["list"]} == {"E1"} and q["pageInfo"]["totalRows"] == 3
    agg = await run(
        yard,
        me,
        "aggregate",
        table_id=own_table,
        metrics=[{"op": "count", "alias": "n"}, {"field": "金额", "op": "sum", "alias": "s"}],
    )
    assert agg["rows"][0]["n"] == 3 and float(agg["rows"][0]["s"]) == 1 + 4 + 7
    grouped = await run(
        yard, me, "aggregate", table_id=own_table, metrics=[{"op": "count", "alias": "n"}], group_by="工号"
    )
    assert grouped["rows"] == [{"工号": "E1", "n": 3}]
    filtered = await run(yard, me, "query", table_id=own_table, filters=[{"field": "工号", "op": "eq", "value": "E2"}])
    assert filtered["list"] == [] and filtered["pageInfo"]["totalRows"] == 0


async def test_own_scope_writes_stay_inside_own_rows(yard: SkillYard, org: str, own_table: str, conn: Any) -> None:
    me = context(org, actor_emp_no="E1", chat_mode=False)
    by = await run(
        yard,
        me,
        "update_by",
        table_id=own_table,
        filters=[{"field": "城市", "op": "eq", "value": "上海"}],
        data={"城市": "北京"},
    )
    assert by["ok"] and by["updated"] == 3, by
    assert await count(conn, org, where="WHERE 城市 = '北京'") == 3
    owner_change = await run(
        yard,
        me,
        "update_by",
        table_id=own_table,
        filters=[{"field": "城市", "op": "eq", "value": "北京"}],
        data={"工号": "E2"},
    )
    assert owner_change["ok"] is False and "工号" in owner_change["error"]
    others = [
        r["id"]
        for r in (await run(yard, context(org, role_id="boss"), "query", table_id=own_table))["list"]
        if r["工号"] != "E1"
    ]
    upd = await run(yard, me, "update", table_id=own_table, row_id=others[0], data={"城市": "深圳"})
    assert upd["ok"] is False
    batch = await run(yard, me, "delete_batch", table_id=own_table, row_ids=others[:4])
    assert batch.get("deleted", 0) == 0, batch
    dby = await run(yard, me, "delete_by", table_id=own_table, filters=[{"field": "金额", "op": "gte", "value": 0}])
    assert dby["ok"] and dby["deleted"] == 3, dby
    assert await count(conn, org) == 6 and await count(conn, org, where="WHERE 工号 = 'E1'") == 0


async def test_own_scope_stamps_every_insert_path(yard: SkillYard, org: str, own_table: str, conn: Any) -> None:
    me = context(org, actor_emp_no="E7")
    one = await run(yard, me, "insert", table_id=own_table, data={"姓名": "a", "工号": "E2"})
    assert one["ok"] and one["data"]["工号"] == "E7", one
    batch = await run(
        yard, me, "insert_batch", table_id=own_table, records=[{"姓名": "b", "工号": "E2"}, {"姓名": "c"}]
    )
    assert batch["inserted"] == 2
    up = await run(yard, me, "upsert", table_id=own_table, key_fields=["姓名"], records=[{"姓名": "人0", "工号": "E0"}])
    assert up["ok"], up
    rel = write_json(yard, me, "import/own.json", [{"姓名": f"f{i}", "工号": "E0"} for i in range(3)])
    imp = await run(yard, me, "insert_from_file", table_id=own_table, file=rel)
    assert imp["inserted"] == 3
    assert await count(conn, org, where="WHERE 工号 = 'E7'") == 1 + 2 + 1 + 3
    # the row 人0 of E0 was not touched by E7's upsert
    assert await count(conn, org, where="WHERE 姓名 = '人0' AND 工号 = 'E0'") == 1


async def test_own_scope_employee_number_only_from_context(yard: SkillYard, org: str, own_table: str) -> None:
    fallback = await run(yard, context(org, emp_no="E2"), "query", table_id=own_table)
    assert fallback["ok"] and {r["工号"] for r in fallback["list"]} == {"E2"}
    both = await run(yard, context(org, emp_no="E2", actor_emp_no="E0"), "query", table_id=own_table)
    assert {r["工号"] for r in both["list"]} == {"E0"}
    for params in ({"actor_emp_no": "E1"}, {"emp_no": "E1"}):
        env = await run(yard, context(org), "query", table_id=own_table, **params)
        assert env["ok"] is False and env["error_type"] == "config", env
    for action, params in [
        ("insert", {"data": {"姓名": "x"}}),
        ("aggregate", {"metrics": [{"op": "count"}]}),
        ("delete_by", {"filters": [{"field": "金额", "op": "gte", "value": 0}]}),
        ("update_by", {"filters": [{"field": "金额", "op": "gte", "value": 0}], "data": {"城市": "北京"}}),
        ("upsert", {"key_fields": ["姓名"], "records": [{"姓名": "人1", "城市": "北京"}]}),
    ]:
        env = await run(yard, context(org, chat_mode=False), action, table_id=own_table, **params)
        assert env["ok"] is False and env["error_type"] == "config", (action, env)


async def test_grants_union_and_widest_scope(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=3)
    await grant(yard, org, "客户", "reader", "read")
    await grant(yard, org, "客户", "writer", ["insert"])
    await grant(yard, org, "客户", "mine", "read", row_scope="own", owner_field="工号")
    only_read = context(org, role_id="reader")
    assert (await run(yard, only_read, "query", table_id=table_id))["ok"]
    refused = await run(yard, only_read, "insert", table_id=table_id, data={"姓名": "x"})
    assert refused["ok"] is False and refused["error_type"] == "config"
    both = context(org, role_id="reader", roles=["writer"])
    assert (await run(yard, both, "insert", table_id=table_id, data={"姓名": "x"}))["ok"]
    widest = context(org, role_id="mine", roles=["reader"], actor_emp_no="E1")
    assert (await run(yard, widest, "query", table_id=table_id))["pageInfo"]["totalRows"] == 4
    narrow = context(org, role_id="mine", actor_emp_no="E1")
    assert (await run(yard, narrow, "query", table_id=table_id))["pageInfo"]["totalRows"] == 1


async def test_owner_field_must_exist(yard: SkillYard, org: str) -> None:
    from skillyard.builtin_skills.datatable.store_schema import StoreError

    await make_table(yard, org)
    with pytest.raises(StoreError):
        await grant(yard, org, "客户", "staff", "read", row_scope="own", owner_field="不存在")
    with pytest.raises(StoreError):
        await grant(yard, org, "客户", "staff", "read", row_scope="own")


# ====================================================================================================================
# SQL channel (§7.6) and own scope on it (§7.2, issue 4)


async def test_own_scoped_table_is_unreachable_on_the_sql_channel(
    yard: SkillYard, org: str, own_table: str, conn: Any
) -> None:
    await make_table(yard, org, title="订单", fields=[{"title": "单号", "uidt": "文本"}])
    me = context(org, actor_emp_no="E1", chat_mode=False)  # allow_sql not set: default True
    schema = f"org_data_{org}"
    for mode, sql in [
        ("sql_query", "SELECT * FROM 客户"),
        ("sql_query", 'SELECT count(*) FROM "客户"'),
        ("sql_query", f'SELECT * FROM {schema}."客户"'),
        ("sql_query", "SELECT * FROM 订单 WHERE 单号 IN (SELECT 姓名 FROM 客户)"),
        ("sql_query", "WITH c AS (SELECT * FROM 客户) SELECT * FROM c"),
        ("sql_query", "SELECT o.* FROM 订单 o JOIN 客户 k ON k.姓名 = o.单号"),
        ("sql_execute", "INSERT INTO 订单 (单号) SELECT 姓名 FROM 客户"),
        ("sql_execute", "UPDATE 客户 SET 城市 = '北京' WHERE 金额 > 0"),
        ("sql_execute", "DELETE FROM 客户 WHERE 金额 > 0"),
        ("sql_execute", "INSERT INTO 客户 (姓名, 工号) VALUES ('x', 'E2')"),
    ]:
        env = await run(yard, me, mode, sql=sql)
        assert env["ok"] is False and env["error_code"] == "forbidden_table", (sql, env)
    assert await count(conn, org) == 9 and await count(conn, org, "订单") == 0
    other = await run(yard, me, "sql_query", sql="SELECT count(*) AS n FROM 订单")
    assert other["ok"] and other["rows"] == [{"n": 0}]


@pytest.mark.parametrize("when", ["view-made-before-the-grant", "view-made-after-the-grant"])
async def test_view_over_own_scoped_table_does_not_leak_other_rows(
    yard: SkillYard, org: str, conn: Any, when: str
) -> None:
    """Issue 4: "make own-scoped tables unreachable through the SQL channel for roles that have own scope". A view
    an owner made over the table must not hand a restricted role everybody's rows (nor let it change them)."""
    table_id = await make_table(yard, org, rows=9)
    boss = context(org, role_id="boss")
    if when.endswith("before-the-grant"):
        made = await run(yard, boss, "sql_execute", sql="CREATE VIEW 客户视图 AS SELECT 姓名, 工号, 金额 FROM 客户")
        assert made["ok"], made
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    if when.endswith("after-the-grant"):
        made = await run(yard, boss, "sql_execute", sql="CREATE VIEW 客户视图 AS SELECT 姓名, 工号, 金额 FROM 客户")
        assert made["ok"], made
    me = context(org, actor_emp_no="E1", chat_mode=False)
    assert (await run(yard, me, "query", table_id=table_id))["pageInfo"]["totalRows"] == 3
    problems = []
    read = await run(yard, me, "sql_query", sql="SELECT 工号 FROM 客户视图")
    if read["ok"] and not {r["工号"] for r in read["rows"]} <= {"E1"}:
        problems.append(f"read others' rows through the view: {sorted({r['工号'] for r in read['rows']})}")
    write = await run(yard, me, "sql_execute", sql="UPDATE 客户视图 SET 姓名 = '改' WHERE 工号 = 'E2'")
    changed = await count(conn, org, where="WHERE 姓名 = '改'")
    if changed:
        problems.append(f"changed {changed} row(s) of E2 through the view: {write.get('affected')}")
    assert not problems, problems


async def test_views_over_a_grant_limited_table_are_refused_at_any_depth(yard: SkillYard, org: str, conn: Any) -> None:
    """A role limited by grants on a table (here: read only) cannot reach it on the SQL channel, nor through a view
    over it, nor through a view over that view; a permission refusal is config + non_retriable. A role the grants
    do not limit still reads the views."""
    await make_table(yard, org, rows=6)
    boss = context(org, role_id="boss")
    for sql in (
        "CREATE VIEW 客户视图 AS SELECT 姓名, 工号 FROM 客户",
        "CREATE VIEW 二层视图 AS SELECT 姓名 FROM 客户视图",
    ):
        made = await run(yard, boss, "sql_execute", sql=sql)
        assert made["ok"], made
    await grant(yard, org, "客户", "sales", "query")
    await grant(yard, org, "客户", "boss", "all")
    sales = context(org, role_id="sales", chat_mode=False)
    for mode, sql in [
        ("sql_query", "SELECT * FROM 客户"),
        ("sql_query", "SELECT * FROM 客户视图"),
        ("sql_query", "SELECT * FROM 二层视图"),
        ("sql_execute", "UPDATE 客户视图 SET 姓名 = '改' WHERE 工号 = 'E1'"),
    ]:
        env = await run(yard, sales, mode, sql=sql)
        assert env["ok"] is False and env["error_code"] == "forbidden_table", (sql, env)
        assert env["error_type"] == "config" and env["non_retriable"] is True, env
    assert await count(conn, org, where="WHERE 姓名 = '改'") == 0
    read = await run(yard, context(org, role_id="boss", chat_mode=False), "sql_query", sql="SELECT * FROM 二层视图")
    assert read["ok"] and read["row_count"] == 6, read


async def test_sql_query_shape_and_colons_in_literals(yard: SkillYard, org: str) -> None:
    await make_table(yard, org, rows=2)
    ctx = context(org)
    env = await run(
        yard, ctx, "sql_query", sql="""SELECT 姓名, '{"value":0.85}' AS j, 'a:b:c' AS t FROM 客户 ORDER BY 姓名"""
    )
    assert env["ok"], env
    assert set(env) >= {"rows", "row_count", "sql"} and env["row_count"] == 2
    assert env["rows"][0]["j"] == '{"value":0.85}' and env["rows"][0]["t"] == "a:b:c"
    assert f"org_data_{org}" in env["sql"]


async def test_sql_result_cap_flags_truncated(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    await _big_table(yard, org, 1100)
    env = unload(await run(yard, ctx, "sql_query", sql="SELECT 编号 FROM 大表"))
    assert env["ok"] and env["truncated"] is True and len(env["rows"]) == 1000
    small = await run(yard, ctx, "sql_query", sql="SELECT count(*) AS n FROM 大表")
    assert small["rows"] == [{"n": 1100}] and small["truncated"] is False


async def test_sql_execute_shapes(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    made = await run(yard, ctx, "sql_execute", sql="CREATE TABLE 库存 (品名 text, 数量 integer)")
    assert made["ok"] and made["table_id"] and made["created"], made
    assert "affected" in made
    ins = await run(
        yard, ctx, "sql_execute", sql="INSERT INTO 库存 (品名, 数量) VALUES ('a', 1), ('b', 2) RETURNING 品名"
    )
    assert ins["ok"] and ins["affected"] == 2 and sorted(r["品名"] for r in ins["rows"]) == ["a", "b"], ins
    upd = await run(yard, ctx, "sql_execute", sql="UPDATE 库存 SET 数量 = 数量 + 1 WHERE 品名 = 'a'")
    assert upd["ok"] and upd["affected"] == 1
    q = await run(yard, ctx, "query", table_name="库存", sort="品名")
    assert [(r["品名"], r["数量"]) for r in q["list"]] == [("a", 2), ("b", 2)]


@pytest.mark.parametrize(
    ("mode", "sql"),
    [
        ("sql_query", "SELECT * FROM public.skill_configs"),
        ("sql_query", "SELECT * FROM pg_catalog.pg_class"),
        ("sql_query", "SELECT * FROM information_schema.tables"),
        ("sql_query", "SELECT * FROM pg_tables"),
        ("sql_query", "SELECT * FROM pg_roles"),
        ("sql_query", "SELECT * FROM org_data_other.客户"),
        ("sql_query", "SELECT set_config('skillyard.all_rows', 'on', false)"),
        ("sql_query", "SELECT current_setting('skillyard.emp_no')"),
        ("sql_query", "SELECT pg_sleep(1)"),
        ("sql_query", "SELECT pg_read_file('/etc/passwd')"),
        ("sql_query", "SELECT lo_import('/etc/passwd')"),
        ("sql_query", "SELECT pg_advisory_lock(1)"),
        ("sql_query", "SELECT * FROM 客户 FOR UPDATE"),
        ("sql_query", "SELECT * INTO 新表 FROM 客户"),
        ("sql_query", "SELECT 1; SELECT 2"),
        ("sql_query", "INSERT INTO 客户 (姓名) VALUES ('x')"),
        ("sql_query", "WITH d AS (DELETE FROM 客户 WHERE 金额 > 0 RETURNING *) SELECT * FROM d"),
        ("sql_query", "SELECT '{}'::jsonb"),
        ("sql_execute", "BEGIN"),
        ("sql_execute", "COMMIT"),
        ("sql_execute", "SET search_path TO public"),
        ("sql_execute", "RESET ROLE"),
        ("sql_execute", "DO $$ BEGIN END $$"),
        ("sql_execute", "COPY 客户 FROM '/etc/passwd'"),
        ("sql_execute", "CREATE FUNCTION f() RETURNS int AS 'SELECT 1' LANGUAGE sql"),
        ("sql_execute", "CREATE ROLE x"),
        ("sql_execute", "CREATE EXTENSION dblink"),
        ("sql_execute", "CREATE SCHEMA x"),
        ("sql_execute", "CREATE TABLE t1 (id bigint, 名称 text)"),
        ("sql_execute", "CREATE TABLE t2 (created_at timestamptz, 名称 text)"),
        ("sql_execute", "CREATE TABLE t3 (名称 text PRIMARY KEY)"),
        ("sql_execute", "CREATE TABLE t4 (名称 text, PRIMARY KEY (名称))"),
        ("sql_execute", "CREATE TABLE t5 (数据 jsonb)"),
        ("sql_execute", "CREATE TABLE t6 (容差% numeric)"),
        ("sql_execute", 'CREATE TABLE t7 ("容差%" numeric)'),
        ("sql_execute", "CREATE TABLE t8 (数据 text DEFAULT '[]'::jsonb)"),
        ("sql_execute", "UPDATE 客户 SET 金额 = 0"),
        ("sql_execute", "DELETE FROM 客户"),
        ("sql_execute", "DROP TABLE 客户"),
        ("sql_execute", "TRUNCATE 客户"),
        ("sql_execute", "ALTER TABLE 客户 ADD COLUMN x text"),
        ("sql_execute", "GRANT ALL ON 客户 TO PUBLIC"),
        ("sql_execute", "LOCK TABLE 客户"),
        ("sql_execute", "UPDATE 客户 SET 金额 = 0 WHERE true; DROP TABLE 客户"),
        ("sql_execute", "SELECT 1"),
        ("sql_query", "SELECT * FROM _dt_tables"),
        ("sql_query", "SELECT dblink('host=x', 'select 1')"),
    ],
)
async def test_sql_refusals_are_recoverable_and_change_nothing(
    yard: SkillYard, org: str, conn: Any, mode: str, sql: str
) -> None:
    await make_table(yard, org, rows=2)
    env = await run(yard, context(org, chat_mode=False), mode, sql=sql)
    assert env["ok"] is False and env["error_type"] in ("recoverable", "config"), env
    assert env.get("need_param") == "sql" or env["error_type"] == "config", env
    assert await count(conn, org) == 2
    listed = await run(yard, context(org), "list_tables")
    assert [t["title"] for t in listed["data"]] == ["客户"]


async def test_sql_channel_allow_sql_false_switches_it_off(yard: SkillYard, org: str) -> None:
    await make_table(yard, org)
    for value in (False, "false"):
        env = await run(yard, context(org, allow_sql=value), "sql_query", sql="SELECT 1 AS x")
        assert env["ok"] is False and env["error_type"] == "config", env
    assert (await run(yard, context(org), "sql_query", sql="SELECT 1 AS x"))["rows"] == [{"x": 1}]


# ====================================================================================================================
# More read / write details


async def test_query_rows_and_fields_parameter(yard: SkillYard, org: str, people: str) -> None:
    ctx = context(org)
    env = await run(yard, ctx, "query", table_id=people, limit=1)
    row = env["list"][0]
    assert set(row) == {"id", "created_at", "姓名", "部门", "薪资", "入职", "备注"}, row
    some = await run(yard, ctx, "query", table_id=people, fields=["姓名"], limit=1)
    assert some["ok"] and "姓名" in some["list"][0] and "薪资" not in some["list"][0], some
    bad = await run(yard, ctx, "query", table_id=people, fields=["不存在"])
    assert bad["ok"] is False


async def test_filters_on_system_columns_and_typed_values(yard: SkillYard, org: str, people: str) -> None:
    ctx = context(org)
    ids = sorted(r["id"] for r in (await run(yard, ctx, "query", table_id=people))["list"])
    by_id = await run(yard, ctx, "query", table_id=people, filters=[{"field": "id", "op": "in", "value": ids[:2]}])
    assert sorted(r["id"] for r in by_id["list"]) == ids[:2]
    recent = await run(yard, ctx, "query", table_id=people, filters=[{"field": "created_at", "op": "not_null"}])
    assert recent["pageInfo"]["totalRows"] == 5
    date_gt = await run(
        yard, ctx, "query", table_id=people, filters=[{"field": "入职", "op": "gt", "value": "2024-06-01"}]
    )
    assert {r["姓名"] for r in date_gt["list"]} == {"王五", "赵六"}
    for value in ("abc", "1万", "2k"):
        bad = await run(yard, ctx, "query", table_id=people, filters=[{"field": "薪资", "op": "gt", "value": value}])
        assert bad["ok"] is False and bad["error_type"] == "recoverable", (value, bad)
    bad_date = await run(
        yard, ctx, "query", table_id=people, filters=[{"field": "入职", "op": "gt", "value": "2024/06/01"}]
    )
    assert bad_date["ok"] is False and bad_date["error_type"] == "recoverable"
    bad_option = await run(
        yard, ctx, "query", table_id=people, filters=[{"field": "部门", "op": "eq", "value": "行政"}]
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


async def test_aggregate_sort_by_alias_and_limit(yard: SkillYard, org: str, people: str) -> None:
    env = await run(
        yard,
        context(org),
        "aggregate",
        table_id=people,
        metrics=[{"field": "薪资", "op": "sum", "alias": "总额"}],
        group_by="部门",
        sort="-总额",
        limit=2,
    )
    assert env["ok"], env
    assert [r["部门"] for r in env["rows"]] == ["财务", "销售"]  # 30000, 25000 (研发 23000 cut by limit)


async def test_upsert_with_single_data_object_and_no_unique_constraint(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org, rows=3)
    up = await run(yard, ctx, "upsert", table_id=table_id, key_fields="姓名", data={"姓名": "人1", "城市": "深圳"})
    assert up["ok"] and (up["inserted"], up["updated"], up["verified_total"]) == (0, 1, 1), up
    new = await run(
        yard, ctx, "upsert", table_id=table_id, key_fields=["姓名", "工号"], data={"姓名": "人1", "工号": "E9"}
    )
    assert (new["inserted"], new["updated"]) == (1, 0), new
    assert await count(conn, org) == 4
    missing = await run(yard, ctx, "upsert", table_id=table_id, data={"姓名": "x"})
    assert missing["ok"] is False and missing["need_param"] == "key_fields"


async def test_database_errors_are_classified_and_recoverable(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await run(
        yard, ctx, "create_table", table_name="唯一", fields=[{"title": "编号", "uidt": "文本", "unique": True}]
    )
    assert (await run(yard, ctx, "insert", table_id=made["id"], data={"编号": "A"}))["ok"]
    dup = await run(yard, ctx, "insert", table_id=made["id"], data={"编号": "A"})
    assert dup["ok"] is False and dup["error_type"] == "recoverable" and not dup.get("non_retriable"), dup
    assert "编号" in dup["error"] or "A" in dup["error"]
    # the session is usable afterwards
    assert (await run(yard, ctx, "insert", table_id=made["id"], data={"编号": "B"}))["ok"]


async def test_statement_timeout_is_transient_not_blacklisted(yard: SkillYard, org: str) -> None:
    await _big_table(yard, org, 2000)
    ctx = context(org, skill_configs={"sql_timeout": 0.05})
    env = await run(yard, ctx, "sql_query", sql="SELECT count(*) FROM 大表 a, 大表 b, 大表 c")
    assert env["ok"] is False and env["error_type"] == "transient" and not env.get("non_retriable"), env


async def test_nocodb_alias_runs_every_kind_of_action(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await yard.run(
        "nocodb", {"action": "create_table", "payload": {"table_name": "客户", "fields": FIELDS}}, context=ctx
    )
    assert made["ok"], made
    ins = await yard.run("nocodb", {"action": "insert", "table_name": "客户", "data": {"姓名": "甲"}}, context=ctx)
    assert ins["ok"] and ins["data"]["姓名"] == "甲", ins
    q = await yard.run("nocodb", {"action": "sql_query", "payload": {"sql": "SELECT 姓名 FROM 客户"}}, context=ctx)
    assert q["rows"] == [{"姓名": "甲"}]


@pytest.mark.parametrize(
    ("action", "canonical"),
    [("QUERY", "query"), ("insert-batch", "insert_batch"), ("list tables", "list_tables"), ("查询", "query")],
)
async def test_action_aliases_are_reported(yard: SkillYard, org: str, action: str, canonical: str) -> None:
    await make_table(yard, org)
    env = await yard.run(
        "datatable",
        {"action": action, "payload": {"table_name": "客户", "records": [{"姓名": "a"}, {"姓名": "b"}]}},
        context=context(org),
    )
    assert env["ok"] and env["action"] == canonical, env
    assert f"→ {canonical}" in env["action_note"]


async def test_param_key_aliases_are_reported(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org)
    env = await run(
        yard, ctx, "query", table_id=table_id, filter=[{"field": "金额", "op": "gte", "value": 1}], order_by="金额"
    )
    assert env["ok"] and [r["金额"] for r in env["list"]] == [1, 2], env
    assert "filter → filters" in env["action_note"] and "order_by → sort" in env["action_note"]
    rec = await run(yard, ctx, "insert", table_id=table_id, record={"姓名": "r"})
    assert rec["ok"] and "record → data" in rec["action_note"], rec
    for key in ("row", "values"):
        env = await run(yard, ctx, "insert", table_id=table_id, **{key: {"姓名": key}})
        assert env["ok"] and f"{key} → data" in env["action_note"], env


async def test_no_action_is_need_param_with_the_list(yard: SkillYard, org: str) -> None:
    for data in ({}, {"payload": {"table_name": "客户", "data": {"姓名": "x"}}}, {"data": {"姓名": "x"}}):
        env = await yard.run("datatable", data, context=context(org))
        assert env["ok"] is False and env["need_param"] == "action", env
        assert {"query", "insert", "delete_by", "sql_query"} <= set(env["supported_actions"])


# ====================================================================================================================
# Admin: `skillyard datatable grant / grants / revoke` and the Python API


def _cli() -> Any:
    from skillyard.cli import cli
    from skillyard.plugins import load_plugins, pm

    load_plugins()
    if "datatable" not in cli.commands:
        pm.hook.register_commands(cli=cli)
    assert "datatable" in cli.commands
    return cli


def _invoke(*args: str) -> Any:
    from click.testing import CliRunner

    return CliRunner().invoke(_cli(), ["datatable", *args])


def _sync(coro_fn: Any) -> Any:
    import asyncio

    async def go() -> Any:
        async with SkillYard() as y:
            return await coro_fn(y)

    return asyncio.run(go())


def test_cli_grant_is_enforced_by_the_skill_and_revoke_reopens(org: str) -> None:
    def setup(y: SkillYard) -> Any:
        return make_table(y, org, rows=6)

    table_id = _sync(setup)
    granted = _invoke(
        *("grant", "--org", org, "--table", "客户", "--role", "sales", "--ops", "query，aggregate"),
        *("--row-scope", "own", "--owner-field", "工号", "--json"),
    )
    assert granted.exit_code == 0, granted.output
    stored = json.loads(granted.output)
    assert stored["ops"] == ["aggregate", "query"] and stored["row_scope"] == "own" and stored["table_id"] == table_id
    listed = _invoke("grants", "--org", org, "--json")
    assert listed.exit_code == 0 and [g["role"] for g in json.loads(listed.output)] == ["sales"], listed.output
    text = _invoke("grants", "--org", org)
    assert text.exit_code == 0 and "sales" in text.output and "工号" in text.output

    async def as_sales(y: SkillYard) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        ctx = context(org, role_id="sales", actor_emp_no="E1")
        return (
            await run(y, ctx, "query", table_id=table_id),
            await run(y, ctx, "insert", table_id=table_id, data={"姓名": "x"}),
            await run(y, ctx, "sql_query", sql="SELECT * FROM 客户"),
        )

    q, ins, sql = _sync(as_sales)
    assert q["ok"] and q["pageInfo"]["totalRows"] == 2, q
    assert ins["ok"] is False and ins["error_type"] == "config", ins
    assert sql["ok"] is False and sql["error_code"] == "forbidden_table", sql

    revoked = _invoke("revoke", "--org", org, "--table", "客户", "--role", "sales", "--json")
    assert revoked.exit_code == 0 and json.loads(revoked.output)["revoked"] is True, revoked.output
    q, ins, sql = _sync(as_sales)
    assert q["pageInfo"]["totalRows"] == 6 and ins["ok"] and sql["ok"], (q, ins, sql)
    again = _invoke("revoke", "--org", org, "--table", "客户", "--role", "sales", "--json")
    assert again.exit_code == 0 and json.loads(again.output)["revoked"] is False


@pytest.mark.parametrize(
    "args",
    [
        ("--table", "不存在", "--role", "r", "--ops", "query"),
        ("--table", "客户", "--role", "r", "--ops", "query", "--row-scope", "own"),
        ("--table", "客户", "--role", "r", "--ops", "query", "--row-scope", "own", "--owner-field", "无"),
        ("--table", "客户", "--role", "r", "--ops", "create_table"),
        ("--table", "客户", "--role", "r", "--ops", "sql_query"),
        ("--table", "客户", "--role", "r", "--ops", "explode"),
    ],
)
def test_cli_bad_grants_exit_2(org: str, args: tuple[str, ...]) -> None:
    _sync(lambda y: make_table(y, org))
    result = _invoke("grant", "--org", org, *args)
    assert result.exit_code == 2, (args, result.output)
    listed = _invoke("grants", "--org", org, "--json")
    assert json.loads(listed.output) == []


async def test_python_admin_api(yard: SkillYard, org: str) -> None:
    from skillyard.builtin_skills.datatable import admin

    await make_table(yard, org)
    stored = await admin.grant(yard, org=org, table="客户", role="r", ops="read,insert")
    assert set(stored) >= {"table_id", "table", "role", "ops", "row_scope", "owner_field"}
    assert stored["ops"] == sorted(["list_columns", "query", "aggregate", "insert"])
    assert [g["role"] for g in await admin.list_grants(yard, org=org)] == ["r"]
    assert await admin.revoke(yard, org=org, table="客户", role="r") is True
    assert await admin.list_grants(yard, org=org) == []


# ====================================================================================================================
# Odds and ends


async def test_own_scope_confirmation_counts_only_own_rows(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=30)  # 工号 E0 / E1 / E2, ten rows each
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    me = context(org, actor_emp_no="E1", chat_mode=True)
    env = await run(yard, me, "delete_by", table_id=table_id, filters=[{"field": "金额", "op": "gte", "value": 0}])
    assert env["ok"] and env.get("deleted") == 10 and "confirm_token" not in env, env
    assert await count(conn, org) == 20


async def test_own_scope_is_backed_by_forced_row_level_security(yard: SkillYard, org: str, conn: Any) -> None:
    await make_table(yard, org, rows=3)
    await grant(yard, org, "客户", "staff", "read", row_scope="own", owner_field="工号")
    row = await conn.fetchrow(
        "SELECT c.relrowsecurity, c.relforcerowsecurity FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relname = '客户'",
        f"org_data_{org}",
    )
    assert row["relrowsecurity"] and row["relforcerowsecurity"]
    assert await conn.fetchval("SELECT count(*) FROM pg_policies WHERE schemaname = $1", f"org_data_{org}") >= 1


async def test_structure_errors_are_recoverable(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    for action, params in [
        ("add_field", {"field": {"title": "姓名", "uidt": "文本"}}),
        ("add_field", {"field": {"title": "x", "uidt": "货币单位"}}),
        ("add_field", {"field": {"title": "x", "uidt": "单选"}}),
        ("update_field", {"field_title": "不存在", "patch": {"title": "y"}}),
        ("update_field", {"field_title": "姓名", "patch": {"title": "工号"}}),
        ("delete_field", {"field_title": "不存在", "确认": True}),
    ]:
        env = await run(yard, ctx, action, table_id=table_id, **params)
        assert env["ok"] is False and env["error_type"] == "recoverable", (action, env)


async def test_insert_from_file_json_lines_and_absolute_path_inside_workspace(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    target = workspace(yard, ctx) / "import" / "rows.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        "\n".join(json.dumps({"姓名": f"j{i}"}, ensure_ascii=False) for i in range(105)), encoding="utf-8"
    )
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=str(target))
    assert env["ok"] and env["inserted"] == 105 and env["verified_total"] == 105, env


async def test_update_returns_full_record_and_insert_has_system_columns(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    ins = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "甲", "金额": "12.345"})
    assert ins["ok"] and set(ins["data"]) == {"id", "created_at", "姓名", "工号", "城市", "金额"}, ins
    assert float(ins["data"]["金额"]) == 12.35
    upd = await run(yard, ctx, "update", table_id=table_id, row_id=ins["id"], data={"城市": "上海"})
    assert (
        upd["ok"] and upd["data"]["姓名"] == "甲" and upd["data"]["城市"] == "上海" and upd["data"]["id"] == ins["id"]
    )


async def test_metrics_on_unsuitable_fields_are_recoverable(yard: SkillYard, org: str, people: str) -> None:
    ctx = context(org)
    for metric in ({"field": "姓名", "op": "sum"}, {"field": "入职", "op": "avg"}, {"field": "部门", "op": "sum"}):
        env = await run(yard, ctx, "aggregate", table_id=people, metrics=[metric])
        assert env["ok"] is False and env["error_type"] == "recoverable" and not env.get("non_retriable"), env
    fine = await run(yard, ctx, "aggregate", table_id=people, metrics=[{"field": "入职", "op": "max", "alias": "最近"}])
    assert fine["ok"] and str(fine["rows"][0]["最近"]).startswith("2025-06-01"), fine


async def test_deleted_owner_field_fails_closed(yard: SkillYard, org: str, own_table: str) -> None:
    """Deleting the owner field is either refused, or the own-scoped role is refused afterwards (never opened)."""
    gone = await run(
        yard, context(org, role_id="boss"), "delete_field", table_id=own_table, field_title="工号", 确认=True
    )
    env = await run(yard, context(org, actor_emp_no="E1"), "query", table_id=own_table)
    if gone["ok"]:
        assert env["ok"] is False and env["error_type"] == "config", env
    else:
        assert gone["error_type"] == "recoverable" and env["pageInfo"]["totalRows"] == 3, (gone, env)
    boss = await run(yard, context(org, role_id="boss"), "query", table_id=own_table)
    assert boss["ok"] and boss["pageInfo"]["totalRows"] == 9


async def test_delete_table_then_recreate_same_title(yard: SkillYard, org: str, own_table: str) -> None:
    ctx = context(org)
    gone = await run(yard, ctx, "delete_table", table_id=own_table, 确认=True)
    assert gone["ok"] and gone["data"] is True, gone
    again = await run(yard, ctx, "create_table", table_name="客户", fields=FIELDS)
    assert again["ok"] and again["id"] != own_table and not again.get("already_exists"), again
    mine = await run(
        yard, context(org, actor_emp_no="E1"), "insert", table_id=again["id"], data={"姓名": "x", "工号": "E5"}
    )
    assert mine["ok"] and mine["data"]["工号"] == "E5", mine  # the old grant went with the old table


async def test_sql_byte_cap_and_trailing_semicolon(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    await _big_table(yard, org, 400)
    big = unload(await run(yard, ctx, "sql_query", sql="SELECT 编号, repeat('x', 10000) AS pad FROM 大表"))
    assert big["ok"] and big["truncated"] is True and 0 < len(big["rows"]) < 400, {
        k: v for k, v in big.items() if k != "rows"
    }
    assert sum(len(json.dumps(r, ensure_ascii=False)) for r in big["rows"]) <= 2 * 1024 * 1024 + 20000
    one = await run(yard, ctx, "sql_query", sql="SELECT count(*) AS n FROM 大表;")
    assert one["ok"] and one["rows"] == [{"n": 400}], one


async def test_sql_refusal_for_own_scope_is_a_permission_refusal(yard: SkillYard, org: str, own_table: str) -> None:
    """references/permissions.md: "A refusal by permissions has error_type: config"; §6.1: authorization problems
    are non_retriable."""
    env = await run(yard, context(org, actor_emp_no="E1"), "sql_query", sql="SELECT * FROM 客户")
    assert env["ok"] is False and env["error_code"] == "forbidden_table"
    assert env["error_type"] == "config", env
