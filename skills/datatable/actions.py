"""The datatable actions (spec §7.3): each takes a :class:`Call` and returns the body of its success envelope.

This module only wires the pieces together — permissions (permissions.py), row actions (rows_read.py, rows_write.py,
rows_upsert.py), structure (store_schema.py, store_tables.py, store_fields.py), the file import (importer.py), the SQL
channel (sql_channel.py) and delete protection (protection.py).
The handler (handler.py) owns the transaction: it commits after an action returns and rolls back when it raises.

Return shapes (documented in references/actions.md): an action whose §7.3 result is an object has that object's
keys at the top level of the envelope (``inserted``, ``list``/``pageInfo``, ``rows``/``row_count``/``sql``…);
an action whose result is a list, a record or ``true`` carries it in ``data`` (§6.1's ``{"success": true, "data":
…}``), next to a few convenience keys (``tables``/``columns`` counts, the record's ``id``).

Order of checks for every table action: resolve the table, check the actor's access (grants, §7.2), derive the row
scope (``own`` → owner condition, stamp and protected owner field; no employee number → refused), then set the
row-level-security settings for the transaction (:func:`permissions.set_actor`) so the FORCEd policies agree with
the injected filters. When the org's metadata exists, the table, its fields, its grants and those settings come
from one query (:func:`permissions.table_access`, checked against the same decision in Python; :func:`_scope`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from . import (
    importer,
    permissions,
    protection,
    rows_read,
    rows_upsert,
    rows_write,
    store_fields,
    store_schema,
    store_tables,
)
from .action_aliases import ACTIONS
from .dispatch import Request, dry_run, needs_confirmation
from .filters import Condition
from .sql_channel import SqlChannelError, run_sql
from .sql_guard import check_sql
from .sql_refusal import SqlRefused

__all__ = ["ACTION_FUNCTIONS", "Call", "open_call"]

#: Rows a SQL DELETE preview reads for its count and backup; past this the count is "unknown" (→ confirmation).
SQL_PREVIEW_ROWS = 100_000
SQL_PREVIEW_BYTES = 200_000_000
#: SQL statement timeout in seconds unless the skill config ``sql_timeout`` says otherwise.
DEFAULT_SQL_TIMEOUT = 5.0


@dataclass
class Call:
    """One action call: the connection inside the session's transaction, the org schema and the request."""

    conn: asyncpg.Connection
    schema: str
    request: Request
    ctx: Mapping[str, Any]
    notes: list[str] = field(default_factory=list)
    #: Whether the schema's metadata tables and ``_dt_grants`` existed when the transaction started (None: unknown).
    has_meta: bool | None = None
    has_grants: bool | None = None

    @property
    def action(self) -> str:
        return self.request.action

    @property
    def params(self) -> dict[str, Any]:
        return self.request.params

    @property
    def roles(self) -> list[str]:
        """The actor's roles: ``role_id`` plus any ``roles`` list the platform passes (grants are per role)."""
        found: list[str] = []
        extra = self.ctx.get("roles")
        for value in [self.ctx.get("role_id"), *(extra if isinstance(extra, list | tuple) else [])]:
            if isinstance(value, str) and value.strip() and value.strip() not in found:
                found.append(value.strip())
        return found

    @property
    def team_role(self) -> str | None:
        value = self.ctx.get("team_role")
        return value if isinstance(value, str) else None

    @property
    def allow_sql(self) -> bool:
        """§4.3: default True; only an explicit False (or "false") switches the SQL channel off."""
        value = self.ctx.get("allow_sql")
        return not (value is False or (isinstance(value, str) and value.strip().lower() in ("false", "0", "no")))

    @property
    def chat_mode(self) -> bool:
        return bool(self.ctx.get("chat_mode"))

    @property
    def workspace(self) -> Path:
        return Path(str(self.ctx.get("workspace_dir") or "."))

    def config(self, key: str) -> Any:
        """A skill config value (``skill_configs``), or None."""
        configs = self.ctx.get("skill_configs")
        return configs.get(key) if isinstance(configs, Mapping) else None


@dataclass(frozen=True)
class Scope:
    """What the actor may do on one table: the row conditions, the insert stamp and the fields it may not change."""

    table: store_schema.TableInfo
    conditions: list[Condition]
    stamp: dict[str, Any]
    protected: frozenset[str]


def _require(call: Call, key: str, hint: str) -> Any:
    value = call.params.get(key)
    if value is None or value == "" or value == [] or value == {}:
        raise store_schema.StoreError(f"{call.action} needs {key}: {hint}", need_param=key)
    return value


async def _check(call: Call, action: str, table: store_schema.TableInfo | None = None) -> permissions.Access:
    access = await permissions.check_access(
        call.conn,
        call.schema,
        table=table,
        action=action,
        roles=call.roles,
        team_role=call.team_role,
        allow_sql=call.allow_sql,
    )
    if not access.allowed:
        raise permissions.PermissionDenied(access.reason or f"{action} is not allowed")
    return access


async def open_call(session: Any, schema: str, request: Request, ctx: Mapping[str, Any]) -> Call:
    """The Call of one action on the connection under ``session``; the statement that starts the session's
    transaction also tells whether the schema's metadata and grants tables exist (used by :func:`_scope`)."""
    conn, (has_meta, has_grants) = await store_schema.raw_connection_probing(
        session,
        (
            f"{store_schema.quote_ident(schema)}.{store_schema.quote_ident('_dt_fields')}",
            f"{store_schema.quote_ident(schema)}.{store_schema.quote_ident(permissions.GRANTS_TABLE)}",
        ),
    )
    return Call(conn, schema, request, ctx, has_meta=has_meta, has_grants=has_grants)


async def _scope(call: Call) -> Scope:
    """Resolve the table, check access and set the row-level-security actor for this transaction.

    When the metadata is known to exist, table, fields, grants and the actor settings come from one query
    (:func:`permissions.table_access`); otherwise (and whenever that finds no table) step by step.
    """
    emp_no = permissions.actor_emp_no(call.ctx)
    found = None
    if call.has_meta:
        found = await permissions.table_access(
            call.conn,
            call.schema,
            table_id=call.params.get("table_id"),
            table_name=call.params.get("table_name"),
            action=call.action,
            roles=call.roles,
            emp_no=emp_no,
            has_grants=bool(call.has_grants),
        )
    if found is None:
        table = await store_schema.resolve_table(
            call.conn, call.schema, call.params.get("table_id"), call.params.get("table_name")
        )
        access = await _check(call, call.action, table)
        preset = None
    else:
        table, access, preset = found
        if not access.allowed:
            raise permissions.PermissionDenied(access.reason or f"{call.action} is not allowed")
    conditions, stamp = permissions.own_scope(access, call.ctx)
    own = access.row_scope == "own"
    actor = emp_no if own else None
    if preset != ("" if actor is None else str(actor).strip(), "off" if own else "on"):
        await permissions.set_actor(call.conn, actor, all_rows=not own)
    return Scope(table, conditions, stamp, permissions.protected_fields(access))


# --------------------------------------------------------------------------------------------------------------------
# Reading


async def list_tables(call: Call) -> dict[str, Any]:
    await _check(call, "list_tables")
    tables = await store_schema.list_tables(call.conn, call.schema)
    return {"data": tables, "count": len(tables)}


async def list_columns(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    columns = await store_schema.list_columns(call.conn, call.schema, scope.table.id)
    return {"data": columns, "table": scope.table.as_dict(), "count": len(columns)}


async def query(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    p = call.params
    return await rows_read.query(
        call.conn,
        scope.table,
        filters=p.get("filters"),
        sort=p.get("sort"),
        limit=p.get("limit"),
        offset=p.get("offset"),
        fields=p.get("fields"),
        extra_conditions=scope.conditions,
        notes=call.notes,
    )


async def aggregate(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    p = call.params
    return await rows_read.aggregate(
        call.conn,
        scope.table,
        metrics=_require(call, "metrics", 'e.g. [{"field": "金额", "op": "sum", "alias": "总额"}]'),
        group_by=p.get("group_by"),
        filters=p.get("filters"),
        sort=p.get("sort"),
        limit=p.get("limit"),
        extra_conditions=scope.conditions,
        notes=call.notes,
    )


# --------------------------------------------------------------------------------------------------------------------
# Writing


def _record_reply(record: rows_write.Record) -> dict[str, Any]:
    reply: dict[str, Any] = {"data": dict(record), "id": record.get("id")}
    if record.dropped:
        reply["dropped"] = record.dropped
    return reply


async def insert(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    data = _require(call, "data", 'one record as an object, e.g. {"姓名": "张三"} (2–100 records: insert_batch)')
    result = await rows_write.insert(call.conn, scope.table, data, stamp=scope.stamp)
    if isinstance(result, rows_write.Record):
        return _record_reply(result)
    call.notes.append("data was an array: inserted as insert_batch")
    return result


async def insert_batch(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    records = _require(
        call, "records", "an array of 1–100 objects (more than 100: write a JSON file, insert_from_file)"
    )
    return await rows_write.insert_batch(call.conn, scope.table, records, stamp=scope.stamp)


async def insert_from_file(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    p = call.params
    return await importer.insert_from_file(
        call.conn,
        scope.table,
        _require(call, "file", "the path of a JSON file (array of objects or JSON Lines) in the workspace"),
        workspace=call.workspace,
        mapping=p.get("mapping"),
        defaults=p.get("defaults"),
        on_conflict=p.get("on_conflict"),
        stamp=scope.stamp,
    )


async def upsert(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    p = call.params
    records = p.get("records")
    if records in (None, "", []):
        data = _require(call, "data", "the records to insert or update (records: array, or data: one object)")
        records = data if isinstance(data, list) else [data]
    return await rows_upsert.upsert(
        call.conn,
        scope.table,
        _require(call, "key_fields", 'the fields that identify a record, e.g. ["工号"]'),
        records,
        stamp=scope.stamp,
        extra_conditions=scope.conditions,
    )


async def update(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    record = await rows_write.update(
        call.conn,
        scope.table,
        _require(call, "row_id", "the id of the row to change (from query)"),
        _require(call, "data", 'the fields to change, e.g. {"状态": "完成"}'),
        extra_conditions=scope.conditions,
        protected=scope.protected,
    )
    return _record_reply(record)


async def update_by(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    return await rows_write.update_by(
        call.conn,
        scope.table,
        _require(call, "filters", 'which rows, e.g. [{"field": "部门", "op": "eq", "value": "研发"}]'),
        _require(call, "data", 'the fields to change, e.g. {"状态": "完成"}'),
        extra_conditions=scope.conditions,
        protected=scope.protected,
        notes=call.notes,
    )


# --------------------------------------------------------------------------------------------------------------------
# Deleting (§7.7)


async def _confirmation(call: Call, affected: int | None) -> dict[str, Any] | None:
    """None when the delete may go ahead; else the confirm_token reply (nothing deleted).

    A given confirm_token is redeemed (bound to the action and the exact parameters, single use); without one, a
    chat-mode delete of more than 10 rows (or an unknown number) gets a new token.
    """
    token = call.params.get("confirm_token")
    if token is not None and token != "":
        await protection.redeem_token(call.conn, call.schema, token, call.action, call.params)
        return None
    if not protection.needs_confirmation(call.chat_mode, affected):
        return None
    return await protection.issue_token(call.conn, call.schema, call.action, call.params, affected)


def _backup(call: Call, title: str, backup: list[dict[str, Any]]) -> str | None:
    path = protection.backup_rows(call.workspace, title, backup)
    return None if path is None else str(path)


async def delete(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    row_id = _require(call, "row_id", "the id of the row to delete (several: delete_batch with row_ids)")
    if isinstance(row_id, list):
        raise store_schema.StoreError(
            "row_id is one id; to delete several rows use delete_batch with row_ids", need_param="row_id"
        )
    deleted = await rows_write.delete_rows(call.conn, scope.table, row_ids=[row_id], extra_conditions=scope.conditions)
    if not deleted:
        raise store_schema.StoreError(
            f"no row with id {row_id!r} in table {scope.table.title!r}"
            + (" among your own rows" if scope.conditions else "")
            + "; query the table for the right id",
            need_param="row_id",
        )
    return {"data": True, "deleted": deleted}


async def delete_batch(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    row_ids = _require(call, "row_ids", "the ids of the rows to delete, e.g. [3, 7]")
    requested = len(set(map(str, row_ids))) if isinstance(row_ids, list) else 1
    pending = await _confirmation(call, requested)
    if pending is not None:
        return pending
    backup = await rows_read.fetch_rows(call.conn, scope.table, row_ids=row_ids, extra_conditions=scope.conditions)
    backup_file = _backup(call, scope.table.title, backup)
    deleted = await rows_write.delete_rows(call.conn, scope.table, row_ids=row_ids, extra_conditions=scope.conditions)
    return {"deleted": deleted, "requested": requested, "backup_file": backup_file}


async def delete_by(call: Call) -> dict[str, Any]:
    scope = await _scope(call)
    filters = _require(call, "filters", 'which rows, e.g. [{"field": "状态", "op": "eq", "value": "作废"}]')
    matched = await rows_read.count_matching(call.conn, scope.table, filters, scope.conditions, notes=call.notes)
    pending = await _confirmation(call, matched)
    if pending is not None:
        return pending
    backup = await rows_read.fetch_rows(call.conn, scope.table, filters=filters, extra_conditions=scope.conditions)
    backup_file = _backup(call, scope.table.title, backup)
    deleted = await rows_write.delete_rows(call.conn, scope.table, filters=filters, extra_conditions=scope.conditions)
    return {"deleted": deleted, "backup_file": backup_file}


# --------------------------------------------------------------------------------------------------------------------
# SQL channel (§7.6)


def _sql_timeout(call: Call) -> float:
    value = call.config("sql_timeout")
    try:
        seconds = float(value) if value not in (None, "") else DEFAULT_SQL_TIMEOUT
    except (TypeError, ValueError):
        raise store_schema.StoreError(
            f"the skill config sql_timeout must be a number of seconds, not {value!r}; fix it with "
            "`skillyard config set datatable sql_timeout 5`",
            error_type="config",
            non_retriable=True,
        ) from None
    return seconds if seconds > 0 else DEFAULT_SQL_TIMEOUT


async def _run(call: Call, sql: str, mode: str, forbidden: frozenset[str], **caps: Any) -> dict[str, Any]:
    result = await run_sql(
        call.conn, sql, schema=call.schema, mode=mode, forbidden_tables=forbidden, timeout=_sql_timeout(call), **caps
    )
    return result.as_dict()


async def _sql_setup(call: Call, mode: str) -> tuple[str, frozenset[str], Any]:
    """Access check, the forbidden tables of this actor, and the guard's verdict (refusals raised as they are)."""
    await _check(call, call.action)
    sql = _require(call, "sql", "one SQL statement")
    await store_schema.ensure_schema(call.conn, call.schema)
    forbidden = await permissions.sql_forbidden_tables(call.conn, call.schema, call.roles)
    try:
        checked = check_sql(sql, schema=call.schema, mode=mode, forbidden_tables=forbidden)
    except SqlRefused as exc:
        raise SqlChannelError(exc.reason, error_type="recoverable", code=exc.code) from None
    except (TypeError, ValueError) as exc:
        raise store_schema.StoreError(f"sql: {exc}", need_param="sql") from None
    # Tables left on this channel are open to every row action of this actor: policies must show all rows.
    await permissions.set_actor(call.conn, None, all_rows=True)
    return sql, forbidden, checked


async def sql_query(call: Call) -> dict[str, Any]:
    sql, forbidden, _ = await _sql_setup(call, "query")
    return await _run(call, sql, "query", forbidden)


async def sql_execute(call: Call) -> dict[str, Any]:
    sql, forbidden, checked = await _sql_setup(call, "execute")
    if checked.kind.startswith("create_"):
        await _check(call, "create_table")  # CREATE TABLE/INDEX/VIEW change structure: owner/admin (§7.2)
    backup_file: str | None = None
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
        pending = await _confirmation(call, None if matched is None else len(matched))
        if pending is not None:
            return pending
        if matched is not None:
            backup_file = _backup(call, checked.target or "sql", matched)
    reply = await _run(call, sql, "execute", forbidden)
    if checked.kind == "delete":
        reply["backup_file"] = backup_file
    if checked.kind == "create_table" and reply.get("created"):
        registered = await store_tables.register_sql_table(call.conn, call.schema, reply["created"])
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


# --------------------------------------------------------------------------------------------------------------------
# Structure (owner/admin; destructive ones preview without 确认=true)


async def create_table(call: Call) -> dict[str, Any]:
    await _check(call, "create_table")
    title = _require(call, "table_name", "the new table's title, e.g. 客户")
    fields = _require(call, "fields", 'the field list, e.g. [{"title": "姓名", "uidt": "文本"}]')
    return await store_tables.create_table(call.conn, call.schema, title, fields)


async def _structure_table(call: Call) -> store_schema.TableInfo:
    table = await store_schema.resolve_table(
        call.conn, call.schema, call.params.get("table_id"), call.params.get("table_name")
    )
    await _check(call, call.action, table)
    return table


async def add_field(call: Call) -> dict[str, Any]:
    table = await _structure_table(call)
    definition = _require(call, "field", 'the field definition, e.g. {"title": "电话", "uidt": "电话"}')
    return await store_fields.add_field(call.conn, call.schema, table.id, definition)


async def update_field(call: Call) -> dict[str, Any]:
    table = await _structure_table(call)
    title = _require(call, "field_title", "the field to change")
    patch = _require(call, "patch", 'the changes, e.g. {"title": "新名"} or {"uidt": "整数"}')
    type_change = await store_fields.changes_type(call.conn, call.schema, table.id, title, patch)
    if needs_confirmation(call.request, type_change=type_change):
        return dry_run(call.request, f"change the type of field {title!r} of table {table.title!r} ({patch})")
    return await store_fields.update_field(call.conn, call.schema, table.id, title, patch)


async def delete_field(call: Call) -> dict[str, Any]:
    table = await _structure_table(call)
    title = _require(call, "field_title", "the field to delete")
    if needs_confirmation(call.request):
        return dry_run(call.request, f"delete field {title!r} and its data from table {table.title!r}")
    return await store_fields.delete_field(call.conn, call.schema, table.id, title)


async def delete_table(call: Call) -> dict[str, Any]:
    table = await _structure_table(call)
    if needs_confirmation(call.request):
        count = await call.conn.fetchval(f"SELECT count(*) FROM {table.qualified}")
        return dry_run(call.request, f"delete table {table.title!r} with its {count} row(s)")
    await store_tables.delete_table(call.conn, call.schema, table.id)
    return {"data": True, "deleted": table.as_dict()}


ACTION_FUNCTIONS: dict[str, Callable[[Call], Awaitable[dict[str, Any]]]] = {
    "list_tables": list_tables,
    "list_columns": list_columns,
    "query": query,
    "aggregate": aggregate,
    "insert": insert,
    "insert_batch": insert_batch,
    "insert_from_file": insert_from_file,
    "upsert": upsert,
    "update": update,
    "update_by": update_by,
    "delete": delete,
    "delete_batch": delete_batch,
    "delete_by": delete_by,
    "sql_query": sql_query,
    "sql_execute": sql_execute,
    "create_table": create_table,
    "add_field": add_field,
    "update_field": update_field,
    "delete_field": delete_field,
    "delete_table": delete_table,
}
assert set(ACTION_FUNCTIONS) == set(ACTIONS), "one function per canonical action"
