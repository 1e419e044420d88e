"""The structure actions through the skill (actions/structure.py): reply shapes, dry runs without 确认=true,
owner/admin only."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from skillyard import SkillYard
from support.datatable import COLUMN_KEYS, FIELDS, columns, context, count, make_table, run, titles


async def test_structure_actions_and_dry_runs(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org, rows=2)
    added = await run(yard, ctx, "add_field", table_id=table_id, field={"title": "备注", "type": "long_text"})
    assert added["ok"] and added["uidt"] == "长文本"
    renamed = await run(yard, ctx, "update_field", table_id=table_id, field_title="备注", patch={"title": "说明"})
    assert renamed["title"] == "说明"

    preview = await run(yard, ctx, "update_field", table_id=table_id, field_title="工号", patch={"uidt": "整数"})
    assert preview["dry_run"] is True and "确认=true" in preview["message"]
    still = await run(yard, ctx, "list_columns", table_id=table_id)
    assert next(c for c in still["data"] if c["title"] == "工号")["uidt"] == "文本"

    preview = await run(yard, ctx, "delete_field", table_id=table_id, field_title="说明")
    assert preview["dry_run"] is True
    deleted = await run(yard, ctx, "delete_field", table_id=table_id, field_title="说明", confirm=True)
    assert deleted["deleted"] is True and "confirm → 确认" in deleted["action_note"]

    preview = await run(yard, ctx, "delete_table", table_id=table_id)
    assert preview["dry_run"] is True and "2 row(s)" in preview["message"]
    assert await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f'org_data_{org}."客户"')
    gone = await yard.run("datatable", {"action": "确认删除表", "payload": {"table_id": table_id}}, context=ctx)
    assert gone["ok"] and gone["data"] is True
    assert not await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f'org_data_{org}."客户"')


async def test_structure_needs_owner_or_admin(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    member = context(org, team_role="member")
    for action, params in [
        ("create_table", {"table_name": "新表", "fields": FIELDS}),
        ("add_field", {"table_id": table_id, "field": {"title": "x", "uidt": "文本"}}),
        ("delete_table", {"table_id": table_id, "确认": True}),
        ("sql_execute", {"sql": "CREATE TABLE 新表 (名称 text)"}),
    ]:
        env = await run(yard, member, action, **params)
        assert env["ok"] is False and env["error_type"] == "config" and "owner or admin" in env["error"], (action, env)
    assert (
        await run(
            yard, context(org, team_role="admin"), "add_field", table_id=table_id, field={"title": "x", "uidt": "文本"}
        )
    )["ok"]


@pytest.mark.spec("§7.7")
@pytest.mark.spec("§3.5")
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


@pytest.mark.spec("§7.7")
@pytest.mark.spec("§3.5")
@pytest.mark.parametrize("key", ["确认", "confirm", "approve", "确定", "confirmed"])
async def test_confirm_keys_execute_structure_deletes(yard: SkillYard, org: str, key: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    env = await run(yard, ctx, "delete_field", table_id=table_id, field_title="城市", **{key: True})
    assert env["ok"] and env["deleted"] is True and env["field"], env
    assert "dry_run" not in env
    gone = await yard.run("datatable", {"action": "确认删除表", "payload": {"table_id": table_id}}, context=ctx)
    assert gone["ok"] and gone["data"] is True


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


@pytest.mark.spec("§7.3")
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


@pytest.mark.spec("§3.5")
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


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.5")
@pytest.mark.spec("§3.5")
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
