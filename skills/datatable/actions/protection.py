"""Delete protection of the datatable skill (spec §7.7): confirmation tokens and backups before deletes.

* :func:`needs_confirmation` — in chat mode, a delete touching more than :data:`CONFIRM_THRESHOLD` rows (or an unknown
  number) must be confirmed first.
* :func:`issue_token` / :func:`redeem_token` — the confirmation itself. A token is bound to the action and the exact
  parameters (:func:`fingerprint`, which leaves out the ``confirm_token`` / ``确认`` keys), lives
  :data:`TOKEN_TTL` seconds and is used once. Tokens are rows of the org schema's tokens table, so any process
  of the deployment can honour a token another one issued.
* :func:`backup_rows` — the matched rows written to ``del_backup_<table>_<YYYYmmdd-HHMMSS>.json`` at the workspace
  root through ``skillyard.safe_write`` before the delete (deliberately at the root: the platform collects it as an
  artifact so the user sees what was deleted). A failing backup is logged and never blocks the delete.

Decisions:

* Token rows are written on the caller's connection, inside its transaction when one is open: the token becomes
  visible to other processes when the caller commits (the handler commits its session at the end of every action),
  and a redeem whose delete then fails rolls back with it, so the token is not lost.
* Expiry uses the database clock (``clock_timestamp()``), not the local one, so processes on different hosts agree.
* A redeem with different parameters or another action is refused and leaves the token in place (the user may still
  confirm the original call); an expired token is removed when it is found. Expired tokens of the schema are purged
  whenever a new one is issued.
* The backup file is a plain JSON array of the full records (id and created_at included): it can be re-imported
  as-is with insert_from_file (the system columns are ignored there as unknown fields).
* The backup timestamp is UTC. With no rows to back up, no file is written and None is returned.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
from collections.abc import Mapping
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg

from skillyard import safe_write

from ..store.names import TOKENS_TABLE
from ..store.schema import StoreError, ensure_schema, lock_schema, qualified_name

__all__ = [
    "CONFIRM_THRESHOLD",
    "IGNORED_KEYS",
    "TOKEN_TTL",
    "backup_rows",
    "ensure_tokens_table",
    "fingerprint",
    "issue_token",
    "needs_confirmation",
    "redeem_token",
]

log = logging.getLogger(__name__)

#: A chat-mode delete of more rows than this (or an unknown number) needs a confirm_token.
CONFIRM_THRESHOLD = 10
#: Seconds a confirm_token stays valid.
TOKEN_TTL = 300
#: Parameter keys left out of the fingerprint: the token itself and the confirmation flag.
IGNORED_KEYS: frozenset[str] = frozenset({"confirm_token", "确认"})
_FOR_USER = (
    "确认删除：回复「确认」后按相同参数并带上 confirm_token 重新执行（5 分钟内有效）",
    "取消：不做任何改动",
    "缩小范围：修改筛选条件后重新执行",
)
_UNSAFE_NAME = re.compile(r"[^\w\-]+")


# --------------------------------------------------------------------------------------------------------------------
# Confirmation


def needs_confirmation(chat_mode: bool, affected: int | None) -> bool:
    """True in chat mode when ``affected`` is unknown (None) or more than :data:`CONFIRM_THRESHOLD`."""
    if not chat_mode:
        return False
    return affected is None or affected > CONFIRM_THRESHOLD


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def fingerprint(action: str, params: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON (sorted keys, no whitespace) of the action and the parameters without the
    ``confirm_token`` / ``确认`` keys (top level)."""
    kept = {str(k): v for k, v in params.items() if k not in IGNORED_KEYS}
    text = json.dumps(
        {"action": action, "params": kept},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=_json_default,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _tokens(schema: str) -> str:
    return qualified_name(schema, TOKENS_TABLE)


async def ensure_tokens_table(conn: asyncpg.Connection, schema: str) -> None:
    """Create the org schema (with its metadata) and the token table when missing; idempotent and concurrency-safe."""
    await ensure_schema(conn, schema)
    if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", _tokens(schema)):
        return
    async with conn.transaction():
        await lock_schema(conn, schema)
        await conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {_tokens(schema)} (
                token text PRIMARY KEY,
                action text NOT NULL,
                fingerprint text NOT NULL,
                affected bigint,
                created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                expires_at timestamptz NOT NULL
            )"""
        )


async def issue_token(
    conn: asyncpg.Connection, schema: str, action: str, params: Mapping[str, Any], affected: int | None
) -> dict[str, Any]:
    """Store a new token for ``action`` with exactly ``params`` and return the confirmation envelope."""
    await ensure_tokens_table(conn, schema)
    token = "dt_" + secrets.token_urlsafe(18)
    async with conn.transaction():
        await conn.execute(f"DELETE FROM {_tokens(schema)} WHERE expires_at < clock_timestamp()")
        await conn.execute(
            f"""INSERT INTO {_tokens(schema)} (token, action, fingerprint, affected, expires_at)
                VALUES ($1, $2, $3, $4, clock_timestamp() + make_interval(secs => $5))""",
            token,
            action,
            fingerprint(action, params),
            affected,
            float(TOKEN_TTL),
        )
    count = f"{affected} rows" if affected is not None else "an unknown number of rows"
    count_zh = f"{affected} 行" if affected is not None else "行数未知"
    return {
        "ok": True,
        "needs_confirmation": True,
        "action": action,
        "confirm_token": token,
        "affected": affected,
        "expires_in": TOKEN_TTL,
        "message": (
            f"Nothing was deleted: {action} would delete {count}, which needs the user's confirmation. Only if the "
            f"user confirms, call {action} again with the same parameters plus confirm_token (valid "
            f"{TOKEN_TTL // 60} minutes, single use)."
        ),
        "user_message": f"尚未删除：{action} 将删除 {count_zh}，需要确认。确认后按原参数带 confirm_token 重新执行。",
        "for_user": list(_FOR_USER),
    }


def _refuse(message: str) -> StoreError:
    return StoreError(message, need_param="confirm_token")


async def redeem_token(
    conn: asyncpg.Connection, schema: str, token: Any, action: str, params: Mapping[str, Any]
) -> None:
    """Use ``token`` up for ``action`` with ``params``; StoreError (recoverable, need_param confirm_token) saying why
    when it is unknown / already used, expired, issued for another action or for different parameters."""
    if not isinstance(token, str) or not token.strip():
        raise _refuse("confirm_token is empty; call again without it to get a new one")
    token = token.strip()
    await ensure_tokens_table(conn, schema)
    wanted = fingerprint(action, params)
    async with conn.transaction():
        used = await conn.fetchval(
            f"""DELETE FROM {_tokens(schema)}
                WHERE token = $1 AND fingerprint = $2 AND expires_at > clock_timestamp() RETURNING token""",
            token,
            wanted,
        )
        if used is not None:
            return
        row = await conn.fetchrow(
            f"SELECT action, fingerprint, expires_at <= clock_timestamp() AS expired FROM {_tokens(schema)} "
            "WHERE token = $1",
            token,
        )
        if row is not None and row["expired"]:
            await conn.execute(f"DELETE FROM {_tokens(schema)} WHERE token = $1", token)
    if row is None:
        raise _refuse(
            "confirm_token is unknown or was already used (each token works once); call again without it to get a "
            "new one"
        )
    if row["expired"]:
        raise _refuse(
            f"confirm_token has expired (tokens are valid {TOKEN_TTL // 60} minutes); call again without it to get "
            "a new one and confirm again"
        )
    if row["action"] != action:
        raise _refuse(
            f"confirm_token was issued for {row['action']}, not {action}; call {action} without it to get its own"
        )
    raise _refuse(
        "confirm_token was issued for different parameters; repeat the confirmed call with exactly the same "
        "parameters, or call without the token to confirm the new ones"
    )


# --------------------------------------------------------------------------------------------------------------------
# Backup


def backup_rows(workspace: Path, table_title: str, rows: list[dict[str, Any]]) -> Path | None:
    """Write ``rows`` to ``del_backup_<table>_<YYYYmmdd-HHMMSS>.json`` (UTC) at the workspace root and return the
    path written (``-1``, ``-2``… are appended when the name exists); None when there is nothing to back up or the
    backup failed (logged; the delete goes on)."""
    if not rows:
        return None
    try:
        name = _UNSAFE_NAME.sub("_", str(table_title)).strip("_") or "table"
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        data = json.dumps(rows, ensure_ascii=False, indent=1, default=_json_default)
        return safe_write(Path(workspace), f"del_backup_{name}_{stamp}.json", data)
    except Exception:  # never blocks the delete (§7.7)
        log.warning("datatable: backup of %d row(s) of %r before delete failed", len(rows), table_title, exc_info=True)
        return None
