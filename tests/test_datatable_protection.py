"""Delete protection of the datatable skill (spec §7.7): confirm tokens in PostgreSQL and backups before deletes."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import asyncpg
import pytest

from support.datatable import asyncpg_dsn, load_datatable_module

store_schema = load_datatable_module("store_schema")
protection = load_datatable_module("protection")
StoreError = store_schema.StoreError

PARAMS = {"table_id": "员工", "filters": [{"field": "部门", "op": "eq", "value": "研发"}]}


@pytest.fixture
def schema() -> str:
    return store_schema.schema_for("Prot-" + uuid.uuid4().hex[:12])


# --------------------------------------------------------------------------------------------------------------------
# needs_confirmation / fingerprint


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


# --------------------------------------------------------------------------------------------------------------------
# Tokens


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


# --------------------------------------------------------------------------------------------------------------------
# Backups


ROWS = [
    {"id": 1, "created_at": "2026-01-01T00:00:00+00:00", "姓名": "张三", "技能": ["SQL"]},
    {"id": 2, "created_at": "2026-01-01T00:00:00+00:00", "姓名": "李四", "技能": None},
]


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
