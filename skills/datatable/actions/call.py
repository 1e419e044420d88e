"""The plumbing every datatable action shares: the :class:`Call` of one action and the :class:`Scope` of its table.

Order of checks for every table action: resolve the table, check the actor's access (grants, §7.2), derive the row
scope (``own`` → owner condition, stamp and protected owner field; no employee number → refused), then set the
row-level-security settings for the transaction (:func:`permissions_rls.set_actor`) so the FORCEd policies agree
with the injected filters. When the org's metadata exists, the table, its fields, its grants and those settings come
from one query (:func:`permissions_access.table_access`, checked against the same decision in Python;
:func:`table_scope`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from ..permissions import access as permissions_access
from ..permissions import rls as permissions_rls
from ..permissions.errors import PermissionDenied
from ..request.dispatch import Request
from ..rows.errors import RedoAction
from ..rows.filters import Condition
from ..store import schema as store_schema
from ..store.names import FIELDS_TABLE, GRANTS_TABLE
from .table import action_names

__all__ = ["Call", "Scope", "check", "forget_schema", "open_call", "require", "table_scope"]


#: Per process: the schemas whose metadata tables were seen to exist, each with whether the grants table was too.
#: Only what was seen is remembered, never an absence: a schema not listed is probed, a grants table not known is
#: checked for in the first statement itself (:func:`permissions_access.table_access`). A remembered schema whose
#: metadata vanished fails that first statement (42P01): the handler rolls back, forgets it and redoes the action
#: the slow way (:class:`RedoAction`).
_KNOWN_META: dict[str, bool] = {}

#: Actions whose first statement is :func:`table_scope`'s (so the metadata probe can be folded into it).
_SCOPE_FIRST: frozenset[str] = action_names(scope_first=True)


def forget_schema(schema: str) -> None:
    _KNOWN_META.pop(schema, None)


@dataclass
class Call:
    """One action call: the connection inside the session's transaction, the org schema and the request."""

    raw: asyncpg.Connection
    schema: str
    request: Request
    ctx: Mapping[str, Any]
    notes: list[str] = field(default_factory=list)
    #: Whether the schema's metadata tables and grants table existed when the transaction started (None: unknown).
    has_meta: bool | None = None
    has_grants: bool | None = None
    #: The session's connection while its transaction has not begun yet (the fast path of :func:`open_call`): the
    #: first statement must go through it (SQLAlchemy sends BEGIN with it); None once the transaction is open.
    pending: Any = None
    #: The second, careful attempt of an action (:class:`RedoAction`): probe the metadata and give the
    #: set-based writes their savepoint and per-row fallback up front, exactly as a standalone row function does.
    careful: bool = False

    @property
    def conn(self) -> asyncpg.Connection:
        """The asyncpg connection, inside the session's transaction (never before it began: that would autocommit)."""
        if self.pending is not None:
            raise RuntimeError("datatable: statement before the session's transaction began")
        return self.raw

    @property
    def optimistic(self) -> bool:
        """Whether set-based writes may run without their own savepoint (a row-level error then redoes the action)."""
        return not self.careful

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


def require(call: Call, key: str, hint: str) -> Any:
    value = call.params.get(key)
    if value is None or value == "" or value == [] or value == {}:
        raise store_schema.StoreError(f"{call.action} needs {key}: {hint}", need_param=key)
    return value


async def check(call: Call, action: str, table: store_schema.TableInfo | None = None) -> permissions_access.Access:
    access = await permissions_access.check_access(
        call.conn,
        call.schema,
        table=table,
        action=action,
        roles=call.roles,
        team_role=call.team_role,
        allow_sql=call.allow_sql,
    )
    if not access.allowed:
        raise PermissionDenied(access.reason or f"{action} is not allowed")
    return access


async def open_call(
    session: Any, schema: str, request: Request, ctx: Mapping[str, Any], *, careful: bool = False
) -> Call:
    """The Call of one action on the connection under ``session``; the statement that starts the session's
    transaction also tells whether the schema's metadata and grants tables exist (used by :func:`table_scope`).

    Fast path (not ``careful``, an action that starts with :func:`table_scope`, a schema whose metadata this process
    has seen): no statement yet; :func:`table_scope`'s query is the one that begins the transaction."""
    if not careful and request.action in _SCOPE_FIRST and schema in _KNOWN_META:
        connection = await session.connection()
        raw = (await connection.get_raw_connection()).driver_connection
        return Call(
            raw, schema, request, ctx, has_meta=True, has_grants=_KNOWN_META[schema] or None, pending=connection
        )
    conn, (has_meta, has_grants) = await _probe(await session.connection(), schema)
    return Call(conn, schema, request, ctx, has_meta=has_meta, has_grants=has_grants, careful=careful)


async def _probe(connection: Any, schema: str) -> tuple[asyncpg.Connection, tuple[bool, ...]]:
    conn, found = await store_schema.connection_probing(
        connection,
        (
            store_schema.qualified_name(schema, FIELDS_TABLE),
            store_schema.qualified_name(schema, GRANTS_TABLE),
        ),
    )
    if found[0]:
        _KNOWN_META[schema] = bool(found[1])
    return conn, found


async def _begin(call: Call) -> None:
    """Begin the session's transaction the slow way (the probe) when the fast path's first statement did not run."""
    if call.pending is not None:
        connection, call.pending = call.pending, None
        _, (call.has_meta, call.has_grants) = await _probe(connection, call.schema)


async def table_scope(call: Call) -> Scope:
    """Resolve the table, check access and set the row-level-security actor for this transaction.

    When the metadata is known to exist, table, fields, grants and the actor settings come from one query
    (:func:`permissions_access.table_access`); otherwise (and whenever that finds no table) step by step.
    """
    emp_no = permissions_access.actor_emp_no(call.ctx)
    found = None
    if call.has_meta:
        args: dict[str, Any] = {
            "table_id": call.params.get("table_id"),
            "table_name": call.params.get("table_name"),
            "action": call.action,
            "roles": call.roles,
            "emp_no": emp_no,
        }
        if call.pending is not None:
            found = await _first_table_access(call, args)
        else:
            found = await permissions_access.table_access(
                call.conn, call.schema, has_grants=bool(call.has_grants), **args
            )
    await _begin(call)  # no-op unless the fast path ran no statement (then the slow way, which also probes)
    if found is None:
        table = await store_schema.resolve_table(
            call.conn, call.schema, call.params.get("table_id"), call.params.get("table_name")
        )
        access = await check(call, call.action, table)
        preset = None
    else:
        table, access, preset = found
        if not access.allowed:
            raise PermissionDenied(access.reason or f"{call.action} is not allowed")
    conditions, stamp = permissions_access.own_scope(access, call.ctx)
    own = access.row_scope == "own"
    actor = emp_no if own else None
    if preset != permissions_rls.actor_settings(actor, all_rows=not own):
        await permissions_rls.set_actor(call.conn, actor, all_rows=not own)
    return Scope(table, conditions, stamp, permissions_access.protected_fields(access))


async def _first_table_access(
    call: Call, args: dict[str, Any]
) -> tuple[store_schema.TableInfo, permissions_access.Access, tuple[str, str, str] | None] | None:
    """:func:`permissions_access.table_access` as the statement that begins the session's transaction (fast path).

    The grants table is checked for in the same statement when this process has not seen it; when it turns out to
    exist, the query is run again with the grants (the decision never skips a grants table that exists).
    """
    connection = call.pending

    async def first_fetchrow(sql: str, *params: Any) -> Any:
        call.pending = None  # from here on the transaction has begun (or failed: the handler rolls back)
        try:
            result = await connection.exec_driver_sql(sql, tuple(params))
            row = result.first()
        except Exception as exc:
            error = _asyncpg_error(exc)
            if error is None:
                raise
            if isinstance(error, asyncpg.UndefinedTableError):  # 42P01: the metadata remembered is gone
                forget_schema(call.schema)
                raise RedoAction("the organisation's metadata tables vanished") from None
            raise error from None
        return None if row is None else row._mapping

    grants_known = bool(call.has_grants)
    seen: list[bool] | None = None if grants_known else []
    found = await permissions_access.table_access(
        call.raw, call.schema, has_grants=grants_known, grants_probe=seen, fetchrow=first_fetchrow, **args
    )
    if seen:  # the grants table was not known to this process: the statement told whether it exists
        call.has_grants = seen[0]
        if seen[0]:
            _KNOWN_META[call.schema] = True
            found = await permissions_access.table_access(call.raw, call.schema, has_grants=True, **args)
    return found


def _asyncpg_error(exc: BaseException) -> asyncpg.PostgresError | None:
    """The asyncpg error under a SQLAlchemy (DBAPI adapter) exception, or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, asyncpg.PostgresError):
            return current
        seen.add(id(current))
        current = getattr(current, "orig", None) or current.__cause__
    return None
