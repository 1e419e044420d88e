"""Delete protection (actions/protection.py, spec §7.7): the confirmation threshold, confirm tokens (bound, single
use, expiring, any process) and the backups written before a delete."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.actions import protection
from skillyard.builtin_skills.datatable.store.schema import StoreError

from skillyard import SkillYard
from support.datatable import asyncpg_dsn, context, count, make_table, run, session_workspace

PARAMS = {"table_id": "员工", "filters": [{"field": "部门", "op": "eq", "value": "研发"}]}


ROWS = [
    {"id": 1, "created_at": "2026-01-01T00:00:00+00:00", "姓名": "张三", "技能": ["SQL"]},
    {"id": 2, "created_at": "2026-01-01T00:00:00+00:00", "姓名": "李四", "技能": None},
]


@pytest.mark.parametrize(
    ("chat_mode", "affected", "expected"),
    [
        (True, None, True),
        (True, 11, True),
        (True, 10, False),
        (True, 0, False),
        (True, 1000, True),
        (False, None, False),
        (False, 1000, False),
    ],
)
def test_needs_confirmation(chat_mode: bool, affected: int | None, expected: bool) -> None:
    assert protection.needs_confirmation(chat_mode, affected) is expected


def test_constants() -> None:
    assert protection.CONFIRM_THRESHOLD == 10
    assert protection.TOKEN_TTL == 300


def test_fingerprint_ignores_token_and_confirm_keys_and_key_order() -> None:
    base = protection.fingerprint("delete_by", PARAMS)
    reordered = {"filters": PARAMS["filters"], "table_id": "员工"}
    assert protection.fingerprint("delete_by", reordered) == base
    assert protection.fingerprint("delete_by", {**PARAMS, "confirm_token": "x", "确认": True}) == base
    assert re.fullmatch(r"[0-9a-f]{64}", base)


def test_fingerprint_changes_with_action_and_values() -> None:
    base = protection.fingerprint("delete_by", PARAMS)
    assert protection.fingerprint("delete_batch", PARAMS) != base
    other = {"table_id": "员工", "filters": [{"field": "部门", "op": "eq", "value": "销售"}]}
    assert protection.fingerprint("delete_by", other) != base
    assert protection.fingerprint("delete_batch", {"row_ids": [1, 2]}) != protection.fingerprint(
        "delete_batch", {"row_ids": [2, 1]}
    )


async def test_issue_returns_envelope_and_stores_token(conn: asyncpg.Connection, schema: str) -> None:
    reply = await protection.issue_token(conn, schema, "delete_by", PARAMS, 42)
    assert reply["ok"] is True and reply["needs_confirmation"] is True
    assert reply["affected"] == 42 and reply["expires_in"] == 300
    assert isinstance(reply["confirm_token"], str) and len(reply["confirm_token"]) >= 20
    assert reply["for_user"] and all(isinstance(s, str) for s in reply["for_user"])
    assert "42" in reply["message"]
    row = await conn.fetchrow(
        "SELECT action, fingerprint, affected, expires_at - clock_timestamp() AS left "
        f'FROM "{schema}"._dt_confirm_tokens WHERE token = $1',
        reply["confirm_token"],
    )
    assert row["action"] == "delete_by" and row["affected"] == 42
    assert row["fingerprint"] == protection.fingerprint("delete_by", PARAMS)
    assert 290 < row["left"].total_seconds() <= 300


async def test_issue_unknown_affected_is_null(conn: asyncpg.Connection, schema: str) -> None:
    reply = await protection.issue_token(conn, schema, "sql_execute", {"sql": "DELETE FROM t WHERE x"}, None)
    assert reply["affected"] is None
    assert "unknown" in reply["message"]


async def test_ensure_tokens_table_is_idempotent(conn: asyncpg.Connection, schema: str) -> None:
    await protection.ensure_tokens_table(conn, schema)
    await protection.ensure_tokens_table(conn, schema)
    async with conn.transaction():
        await protection.ensure_tokens_table(conn, schema)
    assert await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f'"{schema}"._dt_confirm_tokens')


async def test_redeem_with_same_parameters_is_single_use(conn: asyncpg.Connection, schema: str) -> None:
    token = (await protection.issue_token(conn, schema, "delete_by", PARAMS, 20))["confirm_token"]
    await protection.redeem_token(conn, schema, token, "delete_by", {**PARAMS, "confirm_token": token, "确认": True})
    with pytest.raises(StoreError, match="unknown or was already used") as info:
        await protection.redeem_token(conn, schema, token, "delete_by", PARAMS)
    assert info.value.error_type == "recoverable" and info.value.need_param == "confirm_token"


async def test_redeem_with_different_parameters_refused_and_token_kept(conn: asyncpg.Connection, schema: str) -> None:
    token = (await protection.issue_token(conn, schema, "delete_by", PARAMS, 20))["confirm_token"]
    other = {"table_id": "员工", "filters": [{"field": "部门", "op": "eq", "value": "销售"}]}
    with pytest.raises(StoreError, match="different parameters"):
        await protection.redeem_token(conn, schema, token, "delete_by", other)
    with pytest.raises(StoreError, match="issued for delete_by, not delete_batch"):
        await protection.redeem_token(conn, schema, token, "delete_batch", PARAMS)
    await protection.redeem_token(conn, schema, token, "delete_by", PARAMS)  # still valid for the original call


async def test_redeem_expired_token(conn: asyncpg.Connection, schema: str) -> None:
    token = (await protection.issue_token(conn, schema, "delete_by", PARAMS, 20))["confirm_token"]
    await conn.execute(
        f"UPDATE \"{schema}\"._dt_confirm_tokens SET expires_at = now() - interval '1 second' WHERE token = $1", token
    )
    with pytest.raises(StoreError, match="expired"):
        await protection.redeem_token(conn, schema, token, "delete_by", PARAMS)
    count = await conn.fetchval(f'SELECT count(*) FROM "{schema}"._dt_confirm_tokens WHERE token = $1', token)
    assert count == 0


async def test_redeem_unknown_and_empty_token(conn: asyncpg.Connection, schema: str) -> None:
    with pytest.raises(StoreError, match="unknown"):
        await protection.redeem_token(conn, schema, "dt_nope", "delete_by", PARAMS)
    for bad in ("", "  ", None, 5):
        with pytest.raises(StoreError, match="empty"):
            await protection.redeem_token(conn, schema, bad, "delete_by", PARAMS)


async def test_another_connection_honours_token(database_url: str, conn: asyncpg.Connection, schema: str) -> None:
    token = (await protection.issue_token(conn, schema, "delete_batch", {"row_ids": list(range(1, 30))}, 29))[
        "confirm_token"
    ]
    other = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        await protection.redeem_token(other, schema, token, "delete_batch", {"row_ids": list(range(1, 30))})
    finally:
        await other.close()
    with pytest.raises(StoreError, match="already used"):
        await protection.redeem_token(conn, schema, token, "delete_batch", {"row_ids": list(range(1, 30))})


async def test_redeem_rolled_back_with_the_delete_keeps_token(conn: asyncpg.Connection, schema: str) -> None:
    token = (await protection.issue_token(conn, schema, "delete_by", PARAMS, 20))["confirm_token"]
    with pytest.raises(RuntimeError):
        async with conn.transaction():
            await protection.redeem_token(conn, schema, token, "delete_by", PARAMS)
            raise RuntimeError("the delete failed")
    await protection.redeem_token(conn, schema, token, "delete_by", PARAMS)


async def test_issue_purges_expired_tokens(conn: asyncpg.Connection, schema: str) -> None:
    old = (await protection.issue_token(conn, schema, "delete_by", PARAMS, 20))["confirm_token"]
    await conn.execute(f"UPDATE \"{schema}\"._dt_confirm_tokens SET expires_at = now() - interval '1 hour'")
    await protection.issue_token(conn, schema, "delete_by", PARAMS, 20)
    assert await conn.fetchval(f'SELECT count(*) FROM "{schema}"._dt_confirm_tokens WHERE token = $1', old) == 0


def test_backup_name_content_and_location(tmp_path: Path) -> None:
    written = protection.backup_rows(tmp_path, "员工", ROWS)
    assert written is not None and written.parent == tmp_path
    assert re.fullmatch(r"del_backup_员工_\d{8}-\d{6}\.json", written.name)
    assert json.loads(written.read_text(encoding="utf-8")) == ROWS
    again = protection.backup_rows(tmp_path, "员工", ROWS[:1])  # same second: never overwrites
    assert again is not None and again != written
    assert json.loads(written.read_text(encoding="utf-8")) == ROWS


def test_backup_of_no_rows_writes_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert protection.backup_rows(workspace, "员工", []) is None
    assert list(workspace.iterdir()) == []


def test_backup_sanitises_table_name(tmp_path: Path) -> None:
    written = protection.backup_rows(tmp_path, "../a b", ROWS)
    assert written is not None and written.parent == tmp_path
    assert written.name.startswith("del_backup_a_b_")


def test_failing_backup_returns_none_and_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", encoding="utf-8")
    assert protection.backup_rows(blocker, "员工", ROWS) is None
    assert any("backup" in r.getMessage() for r in caplog.records)


def test_unserialisable_values_are_written_as_text(tmp_path: Path) -> None:
    from decimal import Decimal

    written = protection.backup_rows(tmp_path, "t", [{"id": 1, "n": Decimal("1.50"), "s": {"a"}}])
    assert written is not None
    assert json.loads(written.read_text(encoding="utf-8")) == [{"id": 1, "n": "1.50", "s": ["a"]}]


@pytest.mark.spec("§7.7")
@pytest.mark.spec("§3.5")
async def test_confirmation_threshold_is_more_than_ten(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=21)
    ctx = context(org, chat_mode=True)
    ten = await run(yard, ctx, "delete_by", table_id=table_id, filters=[{"field": "金额", "op": "lt", "value": 10}])
    assert ten["ok"] and ten["deleted"] == 10 and "confirm_token" not in ten, ten
    eleven = await run(yard, ctx, "delete_by", table_id=table_id, filters=[{"field": "金额", "op": "gte", "value": 10}])
    assert eleven["ok"] and eleven["needs_confirmation"] is True and eleven["affected"] == 11, eleven
    assert eleven["confirm_token"] and eleven["expires_in"] == 300
    assert await count(conn, org) == 11


@pytest.mark.spec("§7.7")
@pytest.mark.spec("§3.5")
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


@pytest.mark.spec("§7.7")
@pytest.mark.spec("§3.5")
async def test_backups_are_named_and_hold_the_rows(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=5)
    ctx = context(org, chat_mode=True)
    ids = [r["id"] for r in (await run(yard, ctx, "query", table_id=table_id))["list"]]
    batch = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids[:2])
    path = Path(batch["backup_file"])
    assert path.parent.resolve() == session_workspace(yard, ctx).resolve()
    assert re.fullmatch(r"del_backup_客户_.+\.json", path.name), path.name
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert sorted(r["id"] for r in saved) == sorted(ids[:2]) and all("姓名" in r for r in saved)
    by = await run(yard, ctx, "delete_by", table_id=table_id, filters=[{"field": "姓名", "op": "eq", "value": "人0"}])
    assert by["ok"] and by["deleted"] == 1 and by["backup_file"], by
    assert [r["姓名"] for r in json.loads(Path(by["backup_file"]).read_text(encoding="utf-8"))] == ["人0"]
    single = await run(yard, ctx, "delete", table_id=table_id, row_id=ids[2])
    assert single["ok"] and single["data"] is True and "backup_file" not in single


@pytest.mark.spec("§7.7")
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


@pytest.mark.spec("§7.7")
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


@pytest.mark.spec("§7.7")
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


@pytest.mark.spec("§7.7")
@pytest.mark.spec("§3.5")
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


@pytest.mark.spec("§7.7")
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


@pytest.mark.spec("§7.7")
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


async def test_a_flat_confirm_token_deletes_instead_of_asking_again(yard: SkillYard, org: str, conn: Any) -> None:
    """Hardening issue 3: a flat confirm_token was stripped as a credential, so chat mode asked for ever."""
    table_id = await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    flat = {"action": "delete_by", "table_id": table_id, "filters": [{"field": "金额", "op": "gte", "value": 0}]}
    asked = await yard.run("datatable", flat, context=ctx)
    assert asked["needs_confirmation"] is True, asked
    done = await yard.run("datatable", {**flat, "confirm_token": asked["confirm_token"]}, context=ctx)
    assert done["ok"] and done["deleted"] == 15, done
    again = await yard.run("datatable", {**flat, "confirm_token": asked["confirm_token"]}, context=ctx)
    assert "needs_confirmation" not in again or again.get("deleted") == 0, again  # used once: says why, never loops
    assert await count(conn, org) == 0
