"""Second review round for issue 4 (the built-in datatable skill): black-box probes the first round
(test_datatable_conformance.py) did not make.

Every probe goes through the documented interfaces — ``SkillYard.run("datatable" | "nocodb", …)``, ``call_skill``,
``skillyard run datatable …`` / ``skillyard datatable grant|grants|revoke`` in real subprocesses and
``skillyard.builtin_skills.datatable.admin`` — against the real PostgreSQL of the test session. A probe that fails
shows a place where the skill does not do what issue 4, spec §7 / §3.5 or docs/datatable.md ask.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import pytest

from support.datatable_probes import FIELDS, context, count, grant, make_table, run, workspace, write_json, write_text
from skillyard import SkillYard

pytestmark = pytest.mark.usefixtures("home", "db_env")


async def titles(yard: SkillYard, org: str) -> list[str]:
    listed = await run(yard, context(org), "list_tables")
    return [t["title"] for t in listed["data"]]


async def columns(yard: SkillYard, org: str, table_id: str) -> dict[str, dict[str, Any]]:
    listed = await run(yard, context(org), "list_columns", table_id=table_id)
    return {c["title"]: c for c in listed["data"]}


# ====================================================================================================================
# Return shapes of every action (§7.3, references/actions.md, docs/datatable.md "Reply shapes")

COLUMN_KEYS = {"title", "uidt", "required", "unique", "options", "precision", "scale"}


async def test_list_tables_shape_and_creation_order(yard: SkillYard, org: str) -> None:
    ids = [await make_table(yard, org, title=t, fields=[{"title": "名称", "uidt": "文本"}]) for t in ("乙", "甲", "丙")]
    env = await run(yard, context(org), "list_tables")
    assert env["ok"] and env["count"] == 3, env
    assert [t["id"] for t in env["data"]] == ids and [t["title"] for t in env["data"]] == ["乙", "甲", "丙"]
    for table in env["data"]:
        assert set(table) == {"id", "title", "schema", "qualified"}, table
        assert table["schema"] == f"org_data_{org}" and table["title"] in table["qualified"]
        assert table["qualified"].startswith(f'"org_data_{org}".') or table["qualified"].startswith(f"org_data_{org}.")


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


async def test_row_write_and_delete_reply_shapes(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org, chat_mode=False)
    ins = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "甲", "金额": "1.5"})
    assert ins["ok"] and ins["id"] == ins["data"]["id"] and ins["data"]["金额"] == 1.5, ins
    batch = await run(yard, ctx, "insert_batch", table_id=table_id, records=[{"姓名": "乙"}, {"姓名": "丙"}])
    assert set(batch) >= {"inserted", "skipped", "failed", "errors", "verified_total", "ids"}, batch
    assert batch["errors"] == [] and len(batch["ids"]) == 2 and all(isinstance(i, int) for i in batch["ids"])
    up = await run(yard, ctx, "upsert", table_id=table_id, key_fields=["姓名"], records=[{"姓名": "乙", "金额": 2}])
    assert {k: up[k] for k in ("inserted", "updated", "failed", "errors", "verified_total")} == {
        "inserted": 0,
        "updated": 1,
        "failed": 0,
        "errors": [],
        "verified_total": 1,
    }, up
    upd = await run(yard, ctx, "update", table_id=table_id, row_id=ins["id"], data={"城市": "北京"})
    assert upd["ok"] and set(upd["data"]) == {"id", "created_at", "姓名", "工号", "城市", "金额"}, upd
    by = await run(
        yard,
        ctx,
        "update_by",
        table_id=table_id,
        filters=[{"field": "姓名", "op": "eq", "value": "丙"}],
        data={"金额": 3},
    )
    assert by["ok"] and by["updated"] == 1, by
    one = await run(yard, ctx, "delete", table_id=table_id, row_id=ins["id"])
    assert one["ok"] and one["data"] is True and one["deleted"] == 1, one
    missing = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=[batch["ids"][0], 999999])
    assert missing["ok"] and (missing["deleted"], missing["requested"]) == (1, 2) and missing["backup_file"], missing
    saved = json.loads(Path(missing["backup_file"]).read_text(encoding="utf-8"))
    assert [r["id"] for r in saved] == [batch["ids"][0]]
    none = await run(yard, ctx, "delete_by", table_id=table_id, filters=[{"field": "姓名", "op": "eq", "value": "无"}])
    assert none["ok"] and none["deleted"] == 0 and "backup_file" in none, none


async def test_structure_reply_shapes(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await run(yard, ctx, "create_table", table_name="客户", fields=FIELDS)
    assert made["ok"] and set(made) >= {"id", "title"} and not made.get("already_exists"), made
    uuid.UUID(made["id"])
    added = await run(
        yard,
        ctx,
        "add_field",
        table_id=made["id"],
        field={"title": "等级", "type": "single_select", "options": ["A", "B"]},
    )
    assert added["ok"], added
    listed = await columns(yard, org, made["id"])
    assert {k: added[k] for k in COLUMN_KEYS} == listed["等级"]
    changed = await run(
        yard, ctx, "update_field", table_id=made["id"], field_title="等级", patch={"options": ["A", "B", "C"]}
    )
    assert changed["ok"] and changed["options"] == ["A", "B", "C"] and changed["title"] == "等级", changed
    assert {k: changed[k] for k in COLUMN_KEYS} == (await columns(yard, org, made["id"]))["等级"]
    gone = await run(yard, ctx, "delete_field", table_id=made["id"], field_title="等级", 确认=True)
    assert gone["ok"] and gone["deleted"] is True and gone["field"] == "等级", gone
    dropped = await run(yard, ctx, "delete_table", table_id=made["id"], 确认=True)
    assert dropped["ok"] and dropped["data"] is True, dropped
    assert await titles(yard, org) == []


async def test_sql_reply_shapes(yard: SkillYard, org: str) -> None:
    ctx = context(org, chat_mode=False)
    made = await run(yard, ctx, "sql_execute", sql="CREATE TABLE 库存 (品名 text, 数量 integer)")
    assert made["ok"] and made["created"] == "库存" and made["table_id"] and made["fields"], made
    assert [f["title"] for f in made["fields"]] == ["品名", "数量"]
    ins = await run(yard, ctx, "sql_execute", sql="INSERT INTO 库存 (品名, 数量) VALUES ('a', 1), ('b', 2)")
    assert ins["ok"] and ins["affected"] == 2 and ins.get("rows", []) == [], ins
    index = await run(yard, ctx, "sql_execute", sql="CREATE INDEX 库存_品名 ON 库存 (品名)")
    assert index["ok"], index
    q = await run(yard, ctx, "sql_query", sql="SELECT 品名, 数量 FROM 库存 ORDER BY 品名")
    assert set(q) >= {"rows", "row_count", "sql", "truncated", "isolation", "notes"}, q
    assert q["rows"] == [{"品名": "a", "数量": 1}, {"品名": "b", "数量": 2}] and q["row_count"] == 2
    gone = await run(yard, ctx, "sql_execute", sql="DELETE FROM 库存 WHERE 品名 = 'a'")
    assert gone["ok"] and gone["affected"] == 1 and gone["backup_file"], gone
    assert [r["品名"] for r in json.loads(Path(gone["backup_file"]).read_text(encoding="utf-8"))] == ["a"]


# ====================================================================================================================
# §3.5: flat vs payload, parameter and action aliases, 确认, dry runs


async def test_flat_payload_and_json_text_payload_are_the_same_call(yard: SkillYard, org: str) -> None:
    await make_table(yard, org, rows=4)
    ctx = context(org)
    filters = [{"field": "金额", "op": "gte", "value": 2}]
    flat = await yard.run("datatable", {"action": "query", "table_name": "客户", "filters": filters}, context=ctx)
    nested = await run(yard, ctx, "query", table_name="客户", filters=filters)
    text = await yard.run(
        "datatable",
        {"action": "query", "payload": json.dumps({"table_name": "客户", "filters": filters}, ensure_ascii=False)},
        context=ctx,
    )
    assert flat["list"] == nested["list"] == text["list"] and len(flat["list"]) == 2
    assert "payload" in (text.get("action_note") or ""), text


async def test_payload_wins_over_a_different_flat_value_and_says_so(yard: SkillYard, org: str) -> None:
    await make_table(yard, org, rows=3)
    env = await yard.run(
        "datatable",
        {"action": "query", "limit": 1, "payload": {"table_name": "客户", "limit": 2}},
        context=context(org),
    )
    assert env["ok"] and len(env["list"]) == 2, env
    assert "limit" in env["action_note"], env


async def test_more_parameter_key_aliases_are_normalized_and_noted(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org, chat_mode=False)
    R = lambda data: yard.run("datatable", data, context=ctx)  # noqa: E731
    where = await R({"action": "query", "table": "客户", "where": [{"field": "姓名", "op": "eq", "value": "人1"}]})
    assert where["ok"] and [r["姓名"] for r in where["list"]] == ["人1"], where
    assert "where → filters" in where["action_note"] and "table → table_name" in where["action_note"]
    row_id = where["list"][0]["id"]
    upd = await R({"action": "update", "table_id": table_id, "id": row_id, "values": {"城市": "北京"}})
    assert upd["ok"] and upd["data"]["城市"] == "北京", upd
    assert "id → row_id" in upd["action_note"] and "values → data" in upd["action_note"]
    rows = await R({"action": "insert_batch", "table_id": table_id, "rows": [{"姓名": "x"}, {"姓名": "y"}]})
    assert rows["ok"] and rows["inserted"] == 2 and "rows → records" in rows["action_note"], rows
    sql = await R({"operation": "sql_query", "statement": "SELECT count(*) AS n FROM 客户"})
    assert sql["ok"] and sql["rows"] == [{"n": 5}], sql
    assert "operation → action" in sql["action_note"] and "statement → sql" in sql["action_note"]
    ids = await R({"action": "delete_batch", "table_id": table_id, "ids": [row_id]})
    assert ids["ok"] and ids["deleted"] == 1 and "ids → row_ids" in ids["action_note"], ids


@pytest.mark.parametrize(
    ("word", "canonical"),
    [
        ("删除表", "delete_table"),
        ("删除字段", "delete_field"),
        ("改字段", "update_field"),
        ("加字段", "add_field"),
        ("建表", "create_table"),
        ("批量新增", "insert_batch"),
        ("插入或更新", "upsert"),
        ("按条件删除", "delete_by"),
        ("批量删除", "delete_batch"),
        ("导入", "insert_from_file"),
        ("统计", "aggregate"),
        ("执行sql", "sql_execute"),
        ("Delete-Table", "delete_table"),
        ("listTables", "list_tables"),
    ],
)
async def test_chinese_and_spelled_action_aliases_map_to_the_canonical_action(
    yard: SkillYard, org: str, word: str, canonical: str
) -> None:
    await make_table(yard, org)
    env = await yard.run("datatable", {"action": word, "payload": {"table_name": "客户"}}, context=context(org))
    assert env.get("action") == canonical, env
    assert f"→ {canonical}" in (env.get("action_note") or ""), env
    assert await titles(yard, org) == ["客户"]  # a destructive alias without 确认 only previews


@pytest.mark.parametrize("word", ["list", "drop", "查看"])
async def test_ambiguous_action_words_are_refused_with_the_list(yard: SkillYard, org: str, word: str) -> None:
    await make_table(yard, org)
    env = await yard.run("datatable", {"action": word, "payload": {"table_name": "客户"}}, context=context(org))
    assert env["ok"] is False and env["need_param"] == "action" and "delete_table" in env["supported_actions"], env
    assert await titles(yard, org) == ["客户"]


@pytest.mark.parametrize("value", ["确认删除", "确认初始化", "maybe", "请确认"])
async def test_a_sentence_in_the_confirm_key_is_not_a_confirmation(yard: SkillYard, org: str, value: str) -> None:
    table_id = await make_table(yard, org, rows=2)
    env = await run(yard, context(org), "delete_table", table_id=table_id, 确认=value)
    assert env["ok"] and env["dry_run"] is True, env
    assert env.get("action_note"), env  # the unreadable value is reported
    assert await titles(yard, org) == ["客户"]


async def test_english_confirm_prefix_confirms_and_explicit_false_wins(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=2)
    ctx = context(org)
    kept = await yard.run(
        "datatable", {"action": "confirm_delete_table", "payload": {"table_id": table_id, "确认": False}}, context=ctx
    )
    assert kept["ok"] and kept["dry_run"] is True and "确认=false" in kept["action_note"], kept
    assert await titles(yard, org) == ["客户"]
    gone = await yard.run(
        "datatable", {"action": "confirm_delete_table", "payload": {"table_id": table_id}}, context=ctx
    )
    assert gone["ok"] and gone["data"] is True and "确认=true" in gone["action_note"], gone
    assert await titles(yard, org) == []


async def test_confirm_flag_or_prefix_never_replaces_the_delete_token(yard: SkillYard, org: str, conn: Any) -> None:
    """§7.7: more than 10 rows in chat mode need the confirm_token; 确认=true is the structure actions' dry run."""
    table_id = await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    filters = [{"field": "金额", "op": "gte", "value": 0}]
    flagged = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters, 确认=True)
    assert flagged["ok"] and flagged.get("needs_confirmation") is True and "deleted" not in flagged, flagged
    prefixed = await yard.run(
        "datatable",
        {"action": "确认按条件删除", "payload": {"table_id": table_id, "filters": filters}},
        context=ctx,
    )
    assert prefixed["ok"] and prefixed.get("needs_confirmation") is True, prefixed
    sql = await run(yard, ctx, "sql_execute", sql="DELETE FROM 客户 WHERE 金额 >= 0", confirmed=True)
    assert sql["ok"] and sql.get("needs_confirmation") is True, sql
    assert await count(conn, org) == 15


async def test_type_change_dry_run_through_type_key_and_confirmed_by_prefix(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=2)
    ctx = context(org)
    preview = await run(yard, ctx, "update_field", table_id=table_id, field_title="金额", patch={"type": "integer"})
    assert preview["ok"] and preview["dry_run"] is True, preview
    assert preview["received"]["patch"] == {"type": "integer"} and preview["received"]["field_title"] == "金额"
    assert "确认=true" in preview["message"] and isinstance(preview["for_user"], list) and preview["for_user"]
    assert not any("下一步" in str(x) for x in preview["for_user"])
    assert (await columns(yard, org, table_id))["金额"]["uidt"] == "数字"
    done = await yard.run(
        "datatable",
        {
            "action": "确认修改字段",
            "payload": {"table_id": table_id, "field_title": "金额", "patch": {"type": "integer"}},
        },
        context=ctx,
    )
    assert done["ok"] and done["uidt"] == "整数" and "dry_run" not in done, done


# ====================================================================================================================
# update_field type changes: what happens to existing values (§7.3, §7.5, §3.5 dry run)


@pytest.mark.parametrize(
    ("value", "new_type"),
    [
        ("tomorrow", "日期"),
        ("03/04/2026", "日期"),
        ("now", "日期时间"),
        ("NaN", "数字"),
        ("not-an-email", "邮箱"),
        ("example.com", "链接"),
    ],
)
async def test_type_change_does_not_silently_convert_values_writes_would_refuse(
    yard: SkillYard, org: str, conn: Any, value: str, new_type: str
) -> None:
    """§7.5: dates are ISO, numbers are digits (NaN is "not a number" on every write), e-mails and links are
    checked. docs: "A change the existing values cannot take is refused with the number of rows in the way." A
    confirmed type change must not turn 'tomorrow' into a date, read 03/04/2026 as March 4th, store NaN or keep an
    invalid e-mail in a 邮箱 field."""
    ctx = context(org)
    made = await run(yard, ctx, "create_table", table_name="杂项", fields=[{"title": "值", "uidt": "文本"}])
    assert (await run(yard, ctx, "insert", table_id=made["id"], data={"值": value}))["ok"]
    write = await run(yard, ctx, "add_field", table_id=made["id"], field={"title": "对照", "uidt": new_type})
    assert write["ok"]
    refused_on_write = await run(yard, ctx, "insert", table_id=made["id"], data={"对照": value})
    assert refused_on_write["ok"] is False, refused_on_write  # the write rules of the new type refuse the value
    env = await run(
        yard, ctx, "update_field", table_id=made["id"], field_title="值", patch={"uidt": new_type}, 确认=True
    )
    stored = await conn.fetchval(f'SELECT "值"::text FROM org_data_{org}."杂项" ORDER BY id LIMIT 1')
    assert env["ok"] is False and env["error_type"] == "recoverable", (
        f"{value!r} → {new_type}: the change was applied and the value is now {stored!r}"
    )
    assert (await columns(yard, org, made["id"]))["值"]["uidt"] == "文本" and stored == value


async def test_precision_change_that_rounds_values_only_previews_without_confirm(
    yard: SkillYard, org: str, conn: Any
) -> None:
    """Issue 4: "update_field that changes a type" previews without 确认=true. The skill itself previews
    {"uidt": "数字", "scale": 0} as a type change (numeric(18,2) → numeric(18,0)); the same change written as
    {"scale": 0} must not round the stored values without confirmation either."""
    table_id = await make_table(yard, org)
    ctx = context(org)
    assert (await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "a", "金额": "1.25"}))["ok"]
    with_uidt = await run(
        yard, ctx, "update_field", table_id=table_id, field_title="金额", patch={"uidt": "数字", "scale": 0}
    )
    assert with_uidt["ok"] and with_uidt.get("dry_run") is True, with_uidt
    bare = await run(yard, ctx, "update_field", table_id=table_id, field_title="金额", patch={"scale": 0})
    stored = await conn.fetchval(f'SELECT "金额"::text FROM org_data_{org}."客户"')
    assert bare["ok"] and bare.get("dry_run") is True, f"applied without 确认: 1.25 is now {stored}; {bare}"
    assert stored == "1.25"


async def test_type_change_converts_values_that_fit(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="转换",
        fields=[
            {"title": "日", "uidt": "文本"},
            {"title": "数", "uidt": "数字"},
            {"title": "签", "uidt": "文本"},
            {"title": "城", "uidt": "单选", "options": ["上海", "北京"]},
        ],
    )
    tid = made["id"]
    assert (
        await run(yard, ctx, "insert", table_id=tid, data={"日": "2026-03-01", "数": 12, "签": "红、绿", "城": "上海"})
    )["ok"]
    for title, patch in [
        ("日", {"uidt": "日期"}),
        ("数", {"uidt": "整数"}),
        ("签", {"uidt": "多选", "options": ["红", "绿", "蓝"]}),
        ("城", {"uidt": "多选"}),
    ]:
        env = await run(yard, ctx, "update_field", table_id=tid, field_title=title, patch=patch, 确认=True)
        assert env["ok"] and env["uidt"] == patch["uidt"], (title, env)
    row = (await run(yard, ctx, "query", table_id=tid))["list"][0]
    assert (row["日"], row["数"], row["签"], row["城"]) == ("2026-03-01", 12, ["红", "绿"], ["上海"]), row


async def test_failed_type_change_with_rename_changes_nothing(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org)
    env = await run(
        yard,
        ctx,
        "update_field",
        table_id=table_id,
        field_title="姓名",
        patch={"title": "名字", "uidt": "整数"},
        确认=True,
    )
    assert env["ok"] is False and env["error_type"] == "recoverable" and env["need_param"] == "patch", env
    assert "3" in env["error"]  # the number of rows in the way
    dupes = await run(
        yard, ctx, "update_field", table_id=table_id, field_title="城市", patch={"title": "地", "unique": True}
    )
    assert dupes["ok"] is False, dupes
    cols = await columns(yard, org, table_id)
    assert list(cols) == ["姓名", "工号", "城市", "金额"] and cols["城市"]["unique"] is False
    assert await count(conn, org, where="WHERE 城市 = '上海'") == 3


async def test_add_required_unique_field_to_a_table_with_rows(yard: SkillYard, org: str, conn: Any) -> None:
    """§7.5: required is checked on insert only — adding a required field keeps the old rows writable."""
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org)
    added = await run(
        yard,
        ctx,
        "add_field",
        table_id=table_id,
        field={"title": "编号", "uidt": "文本", "required": True, "unique": True},
    )
    assert added["ok"] and added["required"] is True and added["unique"] is True, added
    assert await count(conn, org, where="WHERE 编号 IS NULL") == 3
    old = await run(yard, ctx, "update", table_id=table_id, row_id=1, data={"城市": "北京"})
    assert old["ok"], old
    new = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "新"})
    assert new["ok"] is False and "编号" in new["error"], new
    ok = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "新", "编号": "N1"})
    dup = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "新2", "编号": "N1"})
    assert ok["ok"] and dup["ok"] is False and dup["error_type"] == "recoverable", (ok, dup)


async def test_a_view_over_a_table_never_makes_it_undeletable(yard: SkillYard, org: str, conn: Any) -> None:
    """§6.1: a recoverable error must carry a fix that works. With a view made on the SQL channel, delete_field and
    delete_table say "drop those views first"; DROP on the channel says "use the delete_table action"; delete_table
    does not know the view. Whatever the route (delete the view by name, or delete the table with its views after
    确认), the owner must be able to delete the table."""
    table_id = await make_table(yard, org, rows=2)
    ctx = context(org)
    assert (await run(yard, ctx, "sql_execute", sql="CREATE VIEW 客户视图 AS SELECT 姓名, 城市 FROM 客户"))["ok"]
    field = await run(yard, ctx, "delete_field", table_id=table_id, field_title="城市", 确认=True)
    assert field["ok"] is False and field["error_type"] == "recoverable", field  # nothing half-done
    assert "城市" in await columns(yard, org, table_id) and await count(conn, org) == 2
    assert "DROP VIEW" in field["error"], field  # the refusal names the way out
    blocked = await run(yard, ctx, "delete_table", table_id=table_id, 确认=True)
    assert blocked["ok"] is False and "DROP VIEW" in blocked["error"], blocked
    staff = await run(yard, context(org, team_role="member"), "sql_execute", sql="DROP VIEW 客户视图")
    assert staff["ok"] is False, staff  # a structure statement: owner/admin only
    cascade = await run(yard, ctx, "sql_execute", sql="DROP VIEW 客户视图 CASCADE")
    assert cascade["ok"] is False and cascade["error_code"] == "statement", cascade
    drop = await run(yard, ctx, "sql_execute", sql="DROP VIEW 客户视图")
    assert drop["ok"], drop
    base = await run(yard, ctx, "delete_table", table_id=table_id, 确认=True)
    assert base["ok"] and base["data"] is True, base
    assert "客户" not in await titles(yard, org)


async def test_renamed_or_retyped_owner_field_never_opens_other_rows(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=9)
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    boss, me = context(org, role_id="boss"), context(org, actor_emp_no="E1", chat_mode=False)
    renamed = await run(yard, boss, "update_field", table_id=table_id, field_title="工号", patch={"title": "员工号"})
    if renamed["ok"]:
        q = await run(yard, me, "query", table_id=table_id)
        assert q["ok"] is False or {r["员工号"] for r in q["list"]} == {"E1"}, q
        s = await run(yard, me, "sql_query", sql="SELECT * FROM 客户")
        assert s["ok"] is False, s
        assert (
            await run(yard, boss, "update_field", table_id=table_id, field_title="员工号", patch={"title": "工号"})
        )["ok"]
    retyped = await run(
        yard, boss, "update_field", table_id=table_id, field_title="工号", patch={"uidt": "长文本"}, 确认=True
    )
    q = await run(yard, me, "query", table_id=table_id)
    assert q["ok"] is False or {r["工号"] for r in q["list"]} == {"E1"}, (retyped, q)


# ====================================================================================================================
# insert_from_file edge cases (§7.3, §7.4, references/actions.md)


async def test_import_rows_that_are_not_objects_fail_alone(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    rel = write_json(yard, ctx, "import/mixed.json", [1, "x", None, [1], {"姓名": "ok"}, True])
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] and (env["inserted"], env["failed"], env["verified_total"]) == (1, 5, 1), env
    assert [e["row"] for e in env["errors"]] == [1, 2, 3, 4, 6]


async def test_import_json_lines_with_a_broken_line_keeps_the_others(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    rel = write_text(yard, ctx, "import/rows.jsonl", '{"姓名": "a"}\n{"姓名": \n\n{"姓名": "c"}\n')
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] and (env["inserted"], env["failed"]) == (2, 1) and env["errors"][0]["row"] == 2, env


@pytest.mark.parametrize(
    "text",
    ['[{"姓名": "a"}, {"姓名": }]', "", "not json", '{\n "姓名": "a"\n}', "[]", '{"rows": [{"姓名": "a"}]}'],
    ids=["broken-array", "empty", "text", "pretty-object", "empty-array", "wrapped"],
)
async def test_import_files_that_cannot_be_read_are_refused_and_write_nothing(
    yard: SkillYard, org: str, conn: Any, text: str
) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    rel = write_text(yard, ctx, "import/bad.json", text)
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] is False and env["need_param"] == "file" and env["error_type"] == "recoverable", env
    assert await count(conn, org) == 0


@pytest.mark.parametrize(
    "wrapper",
    [
        {"count": 2, "rows": [{"姓名": "a"}, {"姓名": "b"}]},
        {"records": [{"姓名": "a"}, {"姓名": "b"}], "total": 2, "page": 1},
    ],
    ids=["count-and-rows", "records-total-page"],
)
async def test_import_of_an_object_wrapping_the_rows_is_refused(
    yard: SkillYard, org: str, conn: Any, wrapper: dict[str, Any]
) -> None:
    """references/actions.md: the file is "a JSON array of objects or JSON Lines …; not an object wrapping the
    array such as {"records": […]}". A wrapper with a second key must be refused like the one-key wrapper, not
    read as one empty row and answered ok with inserted 0."""
    table_id = await make_table(yard, org)
    ctx = context(org)
    rel = write_json(yard, ctx, "import/wrapped.json", wrapper)
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] is False and env.get("need_param") == "file", env
    assert await count(conn, org) == 0


async def test_import_refuses_symlinks_out_and_directories(yard: SkillYard, org: str, tmp_path: Path) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps([{"姓名": "leak"}], ensure_ascii=False), encoding="utf-8")
    ws = workspace(yard, ctx)
    (ws / "import").mkdir(exist_ok=True)
    os.symlink(outside, ws / "import" / "link.json")
    (ws / "import" / "dir.json").mkdir()
    for rel in ("import/link.json", "import/dir.json", "./import/../import/link.json"):
        env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
        assert env["ok"] is False and env["need_param"] == "file", (rel, env)
    assert (await run(yard, ctx, "query", table_id=table_id))["pageInfo"]["totalRows"] == 0


async def test_errors_list_is_capped_at_20_but_failed_counts_all(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    rows = [{"姓名": f"n{i}", "金额": "1万"} for i in range(35)]
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=write_json(yard, ctx, "import/e.json", rows))
    assert env["ok"] and env["failed"] == 35 and len(env["errors"]) == 20, env
    assert [e["row"] for e in env["errors"]] == list(range(1, 21))
    batch = await run(yard, ctx, "insert_batch", table_id=table_id, records=rows)
    assert batch["ok"] and batch["failed"] == 35 and len(batch["errors"]) == 20, batch


async def test_import_defaults_fill_required_blanks_and_bad_defaults_are_refused(
    yard: SkillYard, org: str, conn: Any
) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    rows = [{"name": f"n{i}"} for i in range(3)] + [{"name": ""}, {"金额": 5}]
    rel = write_json(yard, ctx, "import/d.json", rows)
    env = await run(
        yard,
        ctx,
        "insert_from_file",
        table_id=table_id,
        file=rel,
        mapping={"姓名": "name"},
        defaults={"姓名": "无名", "城市": "深圳"},
    )
    assert env["ok"] and env["inserted"] == 5 and env["failed"] == 0, env
    assert await count(conn, org, where="WHERE 姓名 = '无名'") == 2
    assert await count(conn, org, where="WHERE 城市 = '深圳'") == 5
    for params in ({"defaults": {"金额": "3万"}}, {"defaults": {"城市": "广州"}}, {"mapping": {"不存在": "name"}}):
        bad = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel, **params)
        assert bad["ok"] is False and bad["need_param"] in ("defaults", "mapping"), (params, bad)
    assert await count(conn, org) == 5


async def test_flat_file_parameter_imports_the_same_file_as_payload(yard: SkillYard, org: str, conn: Any) -> None:
    """§7: "payload 中的参数也允许平铺在顶层，由入口自动归拢"; SKILL.md recommends a subdirectory such as import/.
    A flat call must import workspace/import/rows.json, not another file that happens to share its name."""
    table_id = await make_table(yard, org)
    ctx = context(org)
    write_json(yard, ctx, "rows.json", [{"姓名": "根目录的"}])
    rel = write_json(yard, ctx, "import/rows.json", [{"姓名": "导入的"} for _ in range(3)])
    nested = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert nested["ok"] and nested["inserted"] == 3, nested
    flat = await yard.run("datatable", {"action": "insert_from_file", "table_id": table_id, "file": rel}, context=ctx)
    got = [r["姓名"] for r in (await run(yard, ctx, "query", table_id=table_id, limit=10, sort="id"))["list"]][3:]
    assert flat["ok"] and flat["inserted"] == 3 and got == ["导入的"] * 3, (flat, got)


async def test_import_streams_the_file_instead_of_holding_it_whole(yard: SkillYard, org: str) -> None:
    """Issue 4: "insert_from_file streams the file and loads it with PostgreSQL COPY". Streaming keeps memory
    bounded by the chunk, not by the file: the peak of Python allocations during the import stays below the size
    of the file (here ≈ 9 MB; reading, decoding and parsing the whole file costs several times its size)."""
    table_id = await make_table(yard, org)
    ctx = context(org)
    rows = [
        {"姓名": f"客户名称{i:08d}" + "备注" * 20, "工号": f"E{i % 50}", "城市": "上海", "金额": i}
        for i in range(40000)
    ]
    rel = write_json(yard, ctx, "import/big.json", rows)
    del rows
    size = (workspace(yard, ctx) / rel).stat().st_size
    assert (await run(yard, ctx, "list_tables"))["ok"]  # warm up
    tracemalloc.start()
    try:
        env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert env["ok"] and env["inserted"] == 40000 and env["verified_total"] == 40000, env
    assert peak < size, f"peak Python memory {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB file"


async def test_a_stopped_import_leaves_nothing_behind(org: str, conn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """§7.8.2–3 and docs: "on any failure it rolls back first … so nothing is half written": the wall clock stops
    a long import in the middle; the table holds either every row or none."""
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", "1")
    async with SkillYard() as y:
        table_id = await make_table(y, org)
        ctx = context(org)
        rows = [{"姓名": f"n{i}", "工号": f"E{i % 50}", "城市": "上海", "金额": i} for i in range(100000)]
        rel = write_json(y, ctx, "import/huge.json", rows)
        env = await run(y, ctx, "insert_from_file", table_id=table_id, file=rel)
        stored = await count(conn, org)
        assert stored == (100000 if env["ok"] else 0), (env, stored)
        after = await run(y, ctx, "insert", table_id=table_id, data={"姓名": "之后"})
        assert after["ok"], after


# ====================================================================================================================
# Transactions: nothing half-written (§7.8, docs "Every action runs inside the session's transaction")


async def test_failures_mid_action_leave_nothing_and_the_session_usable(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=4)
    ctx = context(org, chat_mode=False)
    for fields in (
        [{"title": "a", "uidt": "文本"}, {"title": "b", "uidt": "bogus"}],
        [{"title": "a", "uidt": "文本", "unique": True}, {"title": "a", "uidt": "整数"}],
        [{"title": "a", "uidt": "文本"}, {"title": "中" * 22, "uidt": "文本"}],
    ):
        env = await run(yard, ctx, "create_table", table_name="半成品", fields=fields)
        assert env["ok"] is False, env
    assert "半成品" not in await titles(yard, org)
    assert not await conn.fetchval(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relname = '半成品'",
        f"org_data_{org}",
    )
    sql = await run(yard, ctx, "sql_execute", sql="UPDATE 客户 SET 金额 = 10 / (金额 - 2) WHERE 金额 >= 0")
    assert sql["ok"] is False and sql["error_type"] == "recoverable", sql
    assert sorted(r["金额"] for r in (await run(yard, ctx, "query", table_id=table_id))["list"]) == [0, 1, 2, 3]
    batch = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields="姓名",
        records=[{"姓名": "人0", "金额": 9}, {"姓名": "人1", "金额": "9万"}],
    )
    assert batch["ok"] and (batch["updated"], batch["failed"]) == (1, 1), batch
    assert await count(conn, org, where="WHERE 金额 = 9") == 1


async def test_upsert_with_repeated_keys_writes_one_row_per_key(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org)
    env = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields="姓名",
        records=[
            {"姓名": "人1", "城市": "北京"},
            {"姓名": "人1", "城市": "深圳"},
            {"姓名": "新", "城市": "北京"},
            {"姓名": "新", "城市": "深圳"},
        ],
    )
    assert env["ok"], env
    assert env["inserted"] + env["updated"] == env["verified_total"] == 2 and env["failed"] == 2, env
    assert await count(conn, org, where="WHERE 姓名 = '新'") == 1
    assert await count(conn, org, where="WHERE 姓名 = '人1'") == 1


# ====================================================================================================================
# Delete protection on the SQL channel and tokens (§7.7)


async def test_sql_delete_confirmation_token_and_backup(yard: SkillYard, org: str, conn: Any) -> None:
    await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    ten = await run(yard, ctx, "sql_execute", sql="DELETE FROM 客户 WHERE 金额 < 10")
    assert ten["ok"] and ten["affected"] == 10 and "confirm_token" not in ten and ten["backup_file"], ten
    assert len(json.loads(Path(ten["backup_file"]).read_text(encoding="utf-8"))) == 10
    await make_table(yard, org, title="订单", rows=15)
    sql = "DELETE FROM 订单 WHERE 金额 >= 0"
    asked = await run(yard, ctx, "sql_execute", sql=sql)
    assert asked["ok"] and asked["needs_confirmation"] and asked["affected"] == 15, asked
    other = await run(
        yard, ctx, "sql_execute", sql="DELETE FROM 订单 WHERE 金额 >= 1", confirm_token=asked["confirm_token"]
    )
    assert other["ok"] is False, other
    assert await count(conn, org, "订单") == 15
    done = await run(yard, ctx, "sql_execute", sql=sql, confirm_token=asked["confirm_token"])
    assert done["ok"] and done["affected"] == 15 and done["backup_file"], done
    assert len(json.loads(Path(done["backup_file"]).read_text(encoding="utf-8"))) == 15
    assert await count(conn, org, "订单") == 0


async def test_sql_delete_backup_holds_every_deleted_row(yard: SkillYard, org: str, conn: Any) -> None:
    """Issue 4: "Before every delete (delete_batch, delete_by, SQL DELETE), the rows are backed up". A DELETE whose
    WHERE calls a volatile function (random() is on the allow-list) is previewed by a separate SELECT that picks
    other rows than the DELETE removes: the backup must hold every row that was deleted (or such a DELETE is
    refused)."""
    await make_table(yard, org, rows=60)
    ctx = context(org, chat_mode=False)
    env = await run(yard, ctx, "sql_execute", sql="DELETE FROM 客户 WHERE random() < 0.5 AND 金额 >= 0 RETURNING id")
    if not env["ok"]:
        assert await count(conn, org) == 60, env
        return
    deleted = {r["id"] for r in env["rows"]}
    backed = (
        {r["id"] for r in json.loads(Path(env["backup_file"]).read_text(encoding="utf-8"))}
        if env.get("backup_file")
        else set()
    )
    assert deleted <= backed, f"{len(deleted - backed)} of {len(deleted)} deleted rows are not in the backup"


async def test_confirm_token_is_single_use_and_expires(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    filters = [{"field": "金额", "op": "gte", "value": 0}]
    token = (await run(yard, ctx, "delete_by", table_id=table_id, filters=filters))["confirm_token"]
    assert (await run(yard, ctx, "delete_by", table_id=table_id, filters=filters, confirm_token=token))["deleted"] == 15
    records = [{"姓名": f"新{i}", "金额": i} for i in range(15)]
    assert (await run(yard, ctx, "insert_batch", table_id=table_id, records=records))["inserted"] == 15
    again = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters, confirm_token=token)
    assert again["ok"] is False and again["need_param"] == "confirm_token", again
    fresh = (await run(yard, ctx, "delete_by", table_id=table_id, filters=filters))["confirm_token"]
    await conn.execute(
        f"UPDATE org_data_{org}._dt_confirm_tokens SET expires_at = now() - interval '1 second' WHERE token = $1", fresh
    )
    late = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters, confirm_token=fresh)
    assert late["ok"] is False and "deleted" not in late, late
    assert await count(conn, org) == 15
    forged = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters, confirm_token="dt_forged")
    assert forged["ok"] is False and await count(conn, org) == 15


async def test_backups_made_in_the_same_second_do_not_overwrite_each_other(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=6)
    ctx = context(org, chat_mode=False)
    files = []
    for name in ("人0", "人1", "人2"):
        env = await run(
            yard, ctx, "delete_by", table_id=table_id, filters=[{"field": "姓名", "op": "eq", "value": name}]
        )
        files.append(env["backup_file"])
    assert len(set(files)) == 3
    assert [json.loads(Path(f).read_text(encoding="utf-8"))[0]["姓名"] for f in files] == ["人0", "人1", "人2"]


# ====================================================================================================================
# SQL channel: less obvious routes out of the org or around own scope (§7.6, §7.2) — refused, second org unchanged

ROUTES = [
    ("sql_query", "TABLE 客户"),
    ("sql_query", "TABLE OTHER.客户"),
    ("sql_query", "SELECT * FROM ONLY 客户"),
    ("sql_query", "SELECT o.* FROM 订单 o, LATERAL (SELECT 姓名 FROM 客户 k WHERE k.姓名 = o.单号) x"),
    ("sql_query", "SELECT o.* FROM 订单 o, LATERAL (SELECT 姓名 FROM OTHER.客户) x"),
    ("sql_query", "SELECT (WITH 客户 AS (SELECT 1 AS a) SELECT a FROM 客户) AS z"),
    ("sql_query", "SELECT * FROM (WITH pg_class AS (SELECT 1 AS a) SELECT * FROM pg_class) s"),
    ("sql_query", "SELECT 单号 FROM 订单 UNION SELECT 姓名 FROM OTHER.客户"),
    ("sql_query", "SELECT ctid, xmin, 单号 FROM 订单"),
    ("sql_query", "SELECT query_to_xml('select * from OTHER.\"客户\"', true, true, '')"),
    ("sql_query", "SELECT table_to_xml('OTHER.客户', true, true, '')"),
    ("sql_query", "SELECT 'OTHER.客户'::regclass"),
    ("sql_query", "SELECT nextval('订单_id_seq')"),
    ("sql_query", "SELECT setval('订单_id_seq', 1)"),
    ("sql_query", "SELECT current_user"),
    ("sql_query", "SELECT * FROM json_each('{\"a\": 1}')"),
    ("sql_query", "SELECT * FROM generate_series(1, 3)"),
    ("sql_query", "SELECT xmlparse(document '<x/>')"),
    ("sql_query", 'SELECT count(*) FROM U&"pg\\005Fclass"'),
    ("sql_query", "SELECT pg_read_binary_file('/etc/hostname')"),
    ("sql_query", "SELECT pg_ls_dir('.')"),
    ("sql_query", "SELECT lo_get(1)"),
    ("sql_query", "SELECT pg_notify('c', 'x')"),
    ("sql_query", "SELECT pg_terminate_backend(1)"),
    ("sql_query", "SELECT 1 FROM 订单 FOR KEY SHARE"),
    ("sql_execute", "LISTEN ch"),
    ("sql_execute", "NOTIFY ch, 'x'"),
    ("sql_execute", "PREPARE p AS SELECT 1"),
    ("sql_execute", "EXECUTE p"),
    ("sql_execute", "DEALLOCATE ALL"),
    ("sql_execute", "DECLARE c CURSOR FOR SELECT 1"),
    ("sql_execute", "VACUUM 订单"),
    ("sql_execute", "CHECKPOINT"),
    ("sql_execute", "LOAD 'plpgsql'"),
    ("sql_execute", "COPY 订单 TO '/tmp/dt_copy_probe'"),
    ("sql_execute", "COPY (SELECT 1) TO PROGRAM 'id'"),
    ("sql_execute", "EXPLAIN ANALYZE DELETE FROM 订单 WHERE 单号 = 'a'"),
    ("sql_execute", "MERGE INTO 订单 o USING 订单 p ON o.id = p.id WHEN MATCHED THEN DELETE"),
    ("sql_execute", "TRUNCATE 订单"),
    ("sql_execute", "SET SESSION AUTHORIZATION postgres"),
    ("sql_execute", "CREATE TEMP TABLE t1 (a text)"),
    ("sql_execute", "CREATE TABLE t2 (LIKE OTHER.客户)"),
    ("sql_execute", "CREATE TABLE pg_temp.t3 (a text)"),
    ("sql_execute", "CREATE INDEX ON OTHER.客户 (姓名)"),
    ("sql_execute", "CREATE VIEW v1 AS SELECT * FROM OTHER.客户"),
    ("sql_execute", "CREATE SEQUENCE s1"),
    ("sql_execute", "CREATE RULE r AS ON INSERT TO 订单 DO INSTEAD NOTHING"),
    ("sql_execute", "CREATE POLICY p ON 订单 USING (true)"),
    ("sql_execute", "COMMENT ON TABLE 订单 IS 'x'"),
    ("sql_execute", "INSERT INTO 订单 (单号) SELECT 姓名 FROM OTHER.客户"),
    ("sql_execute", "INSERT INTO 订单 (单号) VALUES ('x') RETURNING (SELECT count(*) FROM OTHER.客户)"),
    ("sql_execute", "UPDATE 订单 SET 单号 = k.姓名 FROM 客户 k WHERE 订单.单号 = k.姓名"),
    ("sql_execute", "UPDATE 订单 SET 单号 = b.姓名 FROM OTHER.客户 b WHERE 订单.单号 = b.姓名"),
    ("sql_execute", "DELETE FROM 订单 USING 客户 k WHERE 订单.单号 = k.姓名"),
    ("sql_execute", "INSERT INTO 订单 (id, 单号) VALUES (999, 'x')"),
    ("sql_execute", "UPDATE 订单 SET created_at = '2000-01-01' WHERE 单号 = 'a'"),
    ("sql_execute", "INSERT INTO 订单 (单号) OVERRIDING SYSTEM VALUE VALUES ('o')"),
    ("sql_execute", "INSERT INTO 订单 (单号) VALUES ('w') ON CONFLICT (id) DO UPDATE SET id = 7"),
]


@pytest.mark.parametrize(("mode", "sql"), ROUTES, ids=[f"{m[4:]}:{s[:40]}" for m, s in ROUTES])
async def test_less_obvious_sql_routes_are_refused_and_change_nothing(
    yard: SkillYard, org: str, conn: Any, mode: str, sql: str
) -> None:
    other = "q" + uuid.uuid4().hex[:12]
    await make_table(yard, org, rows=6)
    await make_table(yard, other, rows=3)
    await make_table(yard, org, title="订单", fields=[{"title": "单号", "uidt": "文本"}])
    assert (await run(yard, context(org), "sql_execute", sql="INSERT INTO 订单 (单号) VALUES ('a'), ('人1')"))["ok"]
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    me = context(org, actor_emp_no="E1", chat_mode=False)
    before = await conn.fetch(f'SELECT id, "姓名", "金额" FROM org_data_{other}."客户" ORDER BY id')
    env = await run(yard, me, mode, sql=sql.replace("OTHER", f"org_data_{other}"))
    assert env["ok"] is False and env["error_type"] in ("recoverable", "config"), env
    assert await conn.fetch(f'SELECT id, "姓名", "金额" FROM org_data_{other}."客户" ORDER BY id') == before
    assert await count(conn, org) == 6
    assert await conn.fetchval(f'SELECT string_agg("单号", \',\' ORDER BY id) FROM org_data_{org}."订单"') == "a,人1"
    assert not Path("/tmp/dt_copy_probe").exists()


async def test_sql_execute_keeps_colons_and_casts_in_literals(yard: SkillYard, org: str) -> None:
    """§7.6.3 (fix the cause): ':word' inside a literal is no bind parameter, on sql_execute too."""
    ctx = context(org)
    assert (await run(yard, ctx, "sql_execute", sql="CREATE TABLE 配置 (键 text, 值 text, 时刻 time)"))["ok"]
    env = await run(
        yard,
        ctx,
        "sql_execute",
        sql="""INSERT INTO 配置 (键, 值, 时刻) VALUES ('a:b', '{"value":0.85,"k":"v:w"}', '12:30'::time),
               (E'x:y', $$ :z $$, CAST('08:00' AS time)) RETURNING 键, 值""",
    )
    assert env["ok"] and env["affected"] == 2, env
    assert [r["值"] for r in env["rows"]] == ['{"value":0.85,"k":"v:w"}', " :z "]
    upd = await run(yard, ctx, "sql_execute", sql="UPDATE 配置 SET 值 = 'p:q' WHERE 键 = 'a:b'")
    assert upd["ok"] and upd["affected"] == 1, upd


async def test_sql_created_timestamp_column_takes_iso_values(yard: SkillYard, org: str) -> None:
    """references/sql.md: "A table made with CREATE TABLE is registered like one made by create_table … the
    structured actions work on it", timestamp → 日期时间. Writing and filtering an ISO date-time through insert,
    update and query must work as on any 日期时间 field (insert_batch already does)."""
    ctx = context(org)
    made = await run(yard, ctx, "sql_execute", sql="CREATE TABLE 日志 (事件 text, 发生 timestamp)")
    assert made["ok"] and {f["title"]: f["uidt"] for f in made["fields"]}["发生"] == "日期时间", made
    batch = await run(
        yard,
        ctx,
        "insert_batch",
        table_name="日志",
        records=[{"事件": "a", "发生": "2026-01-01T10:00:00"}, {"事件": "b"}],
    )
    assert batch["ok"] and batch["inserted"] == 2, batch
    problems = {}
    ins = await run(yard, ctx, "insert", table_name="日志", data={"事件": "c", "发生": "2026-01-02T10:00:00"})
    if not ins["ok"]:
        problems["insert"] = ins["error"]
    upd = await run(
        yard, ctx, "update", table_name="日志", row_id=batch["ids"][1], data={"发生": "2026-02-01T08:00:00"}
    )
    if not upd["ok"]:
        problems["update"] = upd["error"]
    q = await run(yard, ctx, "query", table_name="日志", filters=[{"field": "发生", "op": "gt", "value": "2025-12-31"}])
    if not q["ok"]:
        problems["query"] = q["error"]
    assert not problems, problems


async def test_sql_columns_the_table_actions_cannot_handle_are_refused_or_made_usable(
    yard: SkillYard, org: str
) -> None:
    """references/sql.md: `interval` and `timetz` columns are refused with the type to use (the table actions could
    not read or write them as 文本); a `timestamp` column is created as `timestamptz`, so ISO values go in."""
    ctx = context(org)
    for column in ("时长 interval", "钟点 timetz"):
        refused = await run(yard, ctx, "sql_execute", sql=f"CREATE TABLE 计时 (事件 text, {column})")
        assert refused["ok"] is False and refused["error_code"] == "type", refused
        assert "use" in refused["error"], refused
    listed = await run(yard, ctx, "list_tables")
    assert "计时" not in [t["title"] for t in listed["data"]]
    made = await run(yard, ctx, "sql_execute", sql="CREATE TABLE 计时 (事件 text, 开始 timestamp)")
    assert made["ok"] and {f["title"]: f["uidt"] for f in made["fields"]}["开始"] == "日期时间", made
    written = await run(yard, ctx, "insert", table_name="计时", data={"事件": "a", "开始": "2026-01-02T03:04:05+08:00"})
    assert written["ok"], written
    found = await run(
        yard, ctx, "query", table_name="计时", filters=[{"field": "开始", "op": "gte", "value": "2026-01-01"}]
    )
    assert found["ok"] and len(found["list"]) == 1, found


# ====================================================================================================================
# call_skill interplay (§7 "统一入口的技能注册名 … nocodb", §9.1 context whitelist)

CALLER = """
async def execute(input, ctx):
    call = ctx["call_skill"]
    out = {}
    for name in ("datatable", "nocodb"):
        out[name + "_query"] = await call(name, {"action": "query", "payload": {"table_name": "客户"}})
        out[name + "_sql"] = await call(name, {"action": "sql_query", "sql": "SELECT count(*) AS n FROM 订单"})
    return {"ok": True, "results": out}
"""


async def test_call_skill_by_either_name_inherits_org_actor_and_allow_sql(
    org: str, make_skill: Any, skills_root: Path
) -> None:
    make_skill("dt_caller", files={"handler.py": CALLER})
    async with SkillYard(skills_dirs=[skills_root]) as y:
        await make_table(y, org, rows=9)
        await make_table(y, org, title="订单", fields=[{"title": "单号", "uidt": "文本"}])
        await grant(y, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
        env = await y.run("dt_caller", {}, context=context(org, actor_emp_no="E1", allow_sql=False))
    assert env["ok"], env
    for name in ("datatable", "nocodb"):
        q = env["results"][f"{name}_query"]
        assert q["ok"] and {r["工号"] for r in q["list"]} == {"E1"} and q["pageInfo"]["totalRows"] == 3, (name, q)
        s = env["results"][f"{name}_sql"]
        assert s["ok"] is False and s["error_type"] == "config", (name, s)  # allow_sql=False is inherited


# ====================================================================================================================
# Python admin API errors (docs/cli.md "From Python")


@pytest.mark.parametrize(
    ("kw", "param"),
    [
        ({"org": "", "table": "客户", "role": "r", "ops": "read"}, "org"),
        ({"table": "无", "role": "r", "ops": "read"}, "table_id"),
        ({"table": "客户", "role": " ", "ops": "read"}, "role"),
        ({"table": "客户", "role": "r", "ops": "explode"}, "ops"),
        ({"table": "客户", "role": "r", "ops": "read", "row_scope": "mine"}, "row_scope"),
        ({"table": "客户", "role": "r", "ops": "read", "row_scope": "own"}, "owner_field"),
        ({"table": "客户", "role": "r", "ops": "read", "row_scope": "own", "owner_field": "金额"}, "owner_field"),
    ],
)
async def test_python_admin_errors_name_the_parameter(
    yard: SkillYard, org: str, kw: dict[str, Any], param: str
) -> None:
    from skillyard.builtin_skills.datatable import admin
    from skillyard.builtin_skills.datatable.store_schema import StoreError

    await make_table(yard, org)
    try:
        await admin.grant(yard, **{"org": org, **kw})
    except Exception as exc:  # StoreError, or PermissionDenied for grant settings (docs/cli.md)
        assert isinstance(exc, StoreError) or type(exc).__name__ == "PermissionDenied", exc
        assert getattr(exc, "need_param", None) == param, (exc, getattr(exc, "need_param", None))
    else:
        pytest.fail(f"admin.grant accepted {kw}")
    assert await admin.list_grants(yard, org=org) == []


# ====================================================================================================================
# CLI in real subprocesses: `skillyard run datatable`, `skillyard datatable grant|grants|revoke`


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skillyard", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=180,
    )


def test_cli_run_datatable_exit_codes_json_and_no_tracebacks(org: str, tmp_path: Path) -> None:
    ctx = json.dumps({"org_id": org, "team_role": "owner"})
    made = cli(
        "run",
        "datatable",
        "--context",
        ctx,
        "--input",
        json.dumps({"action": "create_table", "payload": {"table_name": "客户", "fields": FIELDS}}, ensure_ascii=False),
    )
    assert made.returncode == 0, made.stderr
    lines = made.stdout.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["ok"] is True and json.loads(lines[0])["title"] == "客户"
    for payload in (
        {"action": "query", "payload": {"table_name": "无"}},
        {"action": "sql_query", "sql": "SELECT 1/0 AS x"},
        {"payload": {"table_name": "客户"}},
        {"action": "insert", "table_name": "客户", "data": {"金额": "3万"}},
    ):
        bad = cli("run", "nocodb", "--context", ctx, "--input", json.dumps(payload, ensure_ascii=False))
        assert bad.returncode == 1, (payload, bad.stdout, bad.stderr)
        envelope = json.loads(bad.stdout)
        assert envelope["ok"] is False and envelope["error"] and envelope["error_type"] == "recoverable", envelope
        assert "Traceback" not in bad.stderr + bad.stdout, bad.stderr
    ws = tmp_path / "ws"
    (ws / "import").mkdir(parents=True)
    (ws / "import" / "rows.json").write_text(
        json.dumps([{"姓名": f"c{i}"} for i in range(120)], ensure_ascii=False), encoding="utf-8"
    )
    imported = cli(
        "run",
        "datatable",
        "--workspace",
        str(ws),
        "--context",
        ctx,
        "--input",
        json.dumps({"action": "insert_from_file", "payload": {"table_name": "客户", "file": "import/rows.json"}}),
    )
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert json.loads(imported.stdout)["verified_total"] == 120
    usage = cli("run", "datatable", "--context", ctx, "--input", "[1]")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr, usage.stderr


def pg_value(database_url: str, sql: str, *args: Any) -> Any:
    import asyncio

    import asyncpg

    from support.datatable import asyncpg_dsn

    async def go() -> Any:
        connection = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            return await connection.fetchval(sql, *args)
        finally:
            await connection.close()

    return asyncio.run(go())


def sync_setup(org: str, fields: list[dict[str, Any]] | None = None, rows: int = 0, own: bool = False) -> None:
    import asyncio

    async def go() -> None:
        async with SkillYard() as y:
            await make_table(y, org, rows=rows, fields=fields)
            if own:
                await grant(y, org, "客户", "field", "read", row_scope="own", owner_field="工号")

    asyncio.run(go())


def test_cli_grant_texts_grants_table_and_revoke(org: str) -> None:
    sync_setup(org, rows=3)
    first = cli("datatable", "grant", "--org", org, "--table", "客户", "--role", "sales", "--ops", "read,insert")
    assert first.returncode == 0 and first.stdout.strip() == "granted sales on 客户: read, insert; all rows", first
    own = cli(
        "datatable",
        "grant",
        "--org",
        org,
        "--table",
        "客户",
        "--role",
        "field",
        "--ops",
        "read,update",
        "--row-scope",
        "own",
        "--owner-field",
        "工号",
    )
    assert own.stdout.strip() == "granted field on 客户: read, update; own rows (by 工号)", own
    empty = cli("datatable", "grant", "--org", org, "--table", "客户", "--role", "nobody", "--ops", "")
    assert empty.returncode == 0, empty
    table = cli("datatable", "grants", "--org", org).stdout.splitlines()
    assert table[0].split() == ["TABLE", "ROLE", "OPS", "ROW", "SCOPE", "OWNER", "FIELD"], table
    assert [line.split()[1] for line in table[1:]] == ["field", "nobody", "sales"], table
    assert "(none)" in table[2] and table[3].rstrip().endswith("-") and table[1].rstrip().endswith("工号"), table
    listed = json.loads(cli("datatable", "grants", "--org", org, "--json").stdout)
    assert {g["role"]: g["ops"] for g in listed}["nobody"] == []
    revoked = cli("datatable", "revoke", "--org", org, "--table", "客户", "--role", "field")
    assert revoked.returncode == 0 and revoked.stdout.strip() == "revoked the grant of field on 客户", revoked
    again = cli("datatable", "revoke", "--org", org, "--table", "客户", "--role", "field", "--json")
    assert json.loads(again.stdout) == {"revoked": False, "org": org, "table": "客户", "role": "field"}, again.stdout
    text_again = cli("datatable", "revoke", "--org", org, "--table", "客户", "--role", "field")
    assert text_again.stdout.strip() == "field had no grant on 客户; nothing changed", text_again


async def test_revoking_the_last_own_grant_removes_row_level_security(yard: SkillYard, org: str, conn: Any) -> None:
    from skillyard.builtin_skills.datatable import admin

    await make_table(yard, org, rows=3)
    await grant(yard, org, "客户", "a", "read", row_scope="own", owner_field="工号")
    await grant(yard, org, "客户", "b", "read", row_scope="own", owner_field="工号")
    flags = "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = $1::regclass"
    qualified = f'org_data_{org}."客户"'
    assert await admin.revoke(yard, org=org, table="客户", role="a") is True
    assert tuple(await conn.fetchrow(flags, qualified)) == (True, True)  # b is still own-scoped
    assert await admin.revoke(yard, org=org, table="客户", role="b") is True
    assert tuple(await conn.fetchrow(flags, qualified)) == (False, False)
    assert await conn.fetchval("SELECT count(*) FROM pg_policies WHERE schemaname = $1", f"org_data_{org}") == 0


def test_cli_refusals_exit_2_with_one_error_line_and_change_nothing(org: str, database_url: str) -> None:
    sync_setup(org, fields=[*FIELDS, {"title": "日", "uidt": "日期"}, {"title": "号", "uidt": "文本"}], own=True)
    fresh = "q" + uuid.uuid4().hex[:12]
    cases = [
        (
            "grant",
            "--org",
            org,
            "--table",
            "客户",
            "--role",
            "r",
            "--ops",
            "read",
            "--row-scope",
            "own",
            "--owner-field",
            "日",
        ),
        (
            "grant",
            "--org",
            org,
            "--table",
            "客户",
            "--role",
            "r",
            "--ops",
            "read",
            "--row-scope",
            "own",
            "--owner-field",
            "号",
        ),
        ("grant", "--org", org, "--table", "客户", "--role", "  ", "--ops", "read"),
        ("grant", "--org", fresh, "--table", "客户", "--role", "r", "--ops", "read"),
        ("revoke", "--org", org, "--table", "无", "--role", "field"),
    ]
    for args in cases:
        result = cli("datatable", *args)
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert result.returncode == 2 and len(errors) == 1, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
    unreachable = {"SKILLYARD_DATABASE_URL": "postgresql+asyncpg://x:y@127.0.0.1:1/z"}
    down = cli("datatable", "grants", "--org", org, env=unreachable)
    assert down.returncode == 2 and "Error:" in down.stderr and "Traceback" not in down.stderr, down.stderr
    unknown = cli("datatable", "grants", "--org", fresh)
    assert unknown.returncode == 0 and "open" in unknown.stdout, unknown
    listed = json.loads(cli("datatable", "grants", "--org", org, "--json").stdout)
    assert [(g["role"], g["owner_field"]) for g in listed] == [("field", "工号")]
    assert pg_value(database_url, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", f"org_data_{fresh}") == 0
