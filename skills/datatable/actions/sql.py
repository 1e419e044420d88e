"""SQL channel actions of the datatable skill (spec §7.6): sql_query and sql_execute.

The actor's forbidden tables (:func:`permissions_access.sql_forbidden_tables`) go to the guard; what the parser
cannot tell from names alone is checked in the catalog (sequences are not readable, writes go to tables, never
through a view); a DELETE is previewed first (count for the confirmation, rows for the backup) and then deletes
only rows the preview read; a CREATE TABLE is registered in the store.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..permissions import access as permissions_access
from ..permissions import rls as permissions_rls
from ..sql.channel import run_sql
from ..sql.errors import SqlChannelError
from ..sql.guard import CheckedSql, check_sql
from ..sql.refusal import FORBIDDEN_TABLE, SqlRefused
from ..store import schema as store_schema
from ..structure import tables as structure_tables
from .call import Call, check, require
from .delete import confirmation, write_backup

__all__ = ["DEFAULT_SQL_TIMEOUT", "sql_execute", "sql_query"]

#: Rows a SQL DELETE preview reads for its count and backup; past this the count is "unknown" (→ confirmation).
SQL_PREVIEW_ROWS = 100_000
SQL_PREVIEW_BYTES = 200_000_000
#: SQL statement timeout in seconds unless the skill config ``sql_timeout`` says otherwise.
DEFAULT_SQL_TIMEOUT = 5.0


#: The range the skill config ``sql_timeout`` may set (seconds).
SQL_TIMEOUT_RANGE = (0.1, 300.0)


def _sql_timeout(call: Call) -> float:
    value = call.config("sql_timeout")
    try:
        seconds = float(value) if value not in (None, "") else DEFAULT_SQL_TIMEOUT
    except (TypeError, ValueError):
        seconds = math.nan
    least, most = SQL_TIMEOUT_RANGE
    if not least <= seconds <= most:  # NaN and infinity fail too (inf made every call raise OverflowError)
        raise store_schema.StoreError(
            f"the skill config sql_timeout must be a number of seconds from {least:g} to {most:g}, not {value!r}; "
            "fix it with `skillyard config set datatable sql_timeout=5`",
            error_type="config",
            non_retriable=True,
        )
    return seconds


async def _run(call: Call, sql: str, mode: str, forbidden: frozenset[str], **caps: Any) -> dict[str, Any]:
    result = await run_sql(
        call.conn, sql, schema=call.schema, mode=mode, forbidden_tables=forbidden, timeout=_sql_timeout(call), **caps
    )
    return result.as_dict()


async def _sql_setup(call: Call, mode: str) -> tuple[str, frozenset[str], Any]:
    """Access check, the forbidden tables of this actor, and the guard's verdict (refusals raised as they are)."""
    await check(call, call.action)
    sql = require(call, "sql", "one SQL statement")
    await store_schema.ensure_schema(call.conn, call.schema)
    forbidden = await permissions_access.sql_forbidden_tables(call.conn, call.schema, call.roles)
    try:
        checked = check_sql(sql, schema=call.schema, mode=mode, forbidden_tables=forbidden)
    except SqlRefused as exc:
        if exc.code == FORBIDDEN_TABLE:  # a permission refusal (§7.2): no other statement on that table will do
            raise SqlChannelError(exc.reason, error_type="config", code=exc.code, non_retriable=True) from None
        raise SqlChannelError(exc.reason, error_type="recoverable", code=exc.code) from None
    except (TypeError, ValueError) as exc:
        raise store_schema.StoreError(f"sql: {exc}", need_param="sql") from None
    await _check_relations(call, checked)
    # Tables left on this channel are open to every row action of this actor, so row-level security shows all
    # rows — unless the actor is limited to own rows somewhere: then every own policy shows only the actor's rows
    # (defence in depth behind the refusal of those tables and their views, §7.2).
    if await permissions_access.own_scoped_tables(call.conn, call.schema, call.roles):
        await permissions_rls.set_actor(call.conn, permissions_access.actor_emp_no(call.ctx), all_rows=False)
    else:
        await permissions_rls.set_actor(call.conn, None, all_rows=True)
    return sql, forbidden, checked


async def _check_relations(call: Call, checked: CheckedSql) -> None:
    """What the names alone do not tell the guard: a sequence counts every insert of its table (other people's
    rows of an own-scoped table too), and a view can rename ``id``/``created_at`` so a write through it escapes
    the system-column rule — so sequences are not readable and writes go to tables only."""
    kinds: dict[str, str] = dict(
        await call.conn.fetch(
            "SELECT c.relname, c.relkind::text FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = ANY($2)",
            call.schema,
            sorted(checked.tables),
        )
    )
    sequences = sorted(name for name, kind in kinds.items() if kind == "S")
    if sequences:
        raise SqlChannelError(
            f"{', '.join(sequences)} is a sequence (it numbers a table's rows), not a table: sequences cannot be "
            "read on the SQL channel; count rows with SELECT count(*) FROM the table",
            error_type="recoverable",
            code="sequence",
        )
    if checked.target is not None and kinds.get(checked.target) in ("v", "m"):
        raise SqlChannelError(
            f"{checked.target} is a view: the SQL channel writes to tables only; INSERT, UPDATE or DELETE the table "
            "the view reads",
            error_type="recoverable",
            code="view_write",
        )


async def sql_query(call: Call) -> dict[str, Any]:
    sql, forbidden, _ = await _sql_setup(call, "query")
    return await _run(call, sql, "query", forbidden)


async def sql_execute(call: Call) -> dict[str, Any]:
    sql, forbidden, checked = await _sql_setup(call, "execute")
    if checked.kind.startswith(("create_", "drop_")):
        await check(call, "create_table")  # CREATE TABLE/INDEX/VIEW and DROP VIEW change structure: owner/admin
    backup_file: str | None = None
    delete_ids: list[int] | None = None
    if checked.kind == "delete" and checked.preview is not None:
        matched: list[dict[str, Any]] | None
        try:
            preview = await _run(
                call, checked.preview, "query", forbidden, max_rows=SQL_PREVIEW_ROWS, max_bytes=SQL_PREVIEW_BYTES
            )
            matched = None if preview["truncated"] else _distinct(preview["rows"])
        except SqlChannelError as exc:
            call.notes.append(f"the row count before the delete could not be read ({exc.message}): treated as unknown")
            matched = None
        pending = await confirmation(call, None if matched is None else len(matched))
        if pending is not None:
            return pending
        if matched is not None:
            backup_file = write_backup(call, checked.target or "sql", matched)
            ids: list[Any] = [row.get("id") for row in matched]
            if all(type(i) is int for i in ids):  # every table here has the platform's id column
                delete_ids = ids  # the delete removes nothing the backup lacks
    reply = await _run(call, sql, "execute", forbidden, delete_ids=delete_ids)
    if checked.kind == "delete":
        reply["backup_file"] = backup_file
    if checked.kind == "create_table" and reply.get("created"):
        registered = await structure_tables.register_sql_table(call.conn, call.schema, reply["created"])
        reply["table_id"] = registered["id"]
        reply["fields"] = registered["fields"]
    return reply


def _distinct(found: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of a DELETE preview once each (a row joined to several USING rows comes back more than once)."""
    seen: set[Any] = set()
    unique: list[dict[str, Any]] = []
    for row in found:
        key = row.get("id", id(row))
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique
