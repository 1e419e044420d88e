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

from . import permissions_access, permissions_rls, store_schema
from .dispatch import Request
from .filters import Condition
from .permissions_errors import PermissionDenied
from .permissions_grants import GRANTS_TABLE

__all__ = ["Call", "Scope", "check", "open_call", "require", "table_scope"]


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


async def open_call(session: Any, schema: str, request: Request, ctx: Mapping[str, Any]) -> Call:
    """The Call of one action on the connection under ``session``; the statement that starts the session's
    transaction also tells whether the schema's metadata and grants tables exist (used by :func:`table_scope`)."""
    conn, (has_meta, has_grants) = await store_schema.raw_connection_probing(
        session,
        (
            f"{store_schema.quote_ident(schema)}.{store_schema.quote_ident('_dt_fields')}",
            f"{store_schema.quote_ident(schema)}.{store_schema.quote_ident(GRANTS_TABLE)}",
        ),
    )
    return Call(conn, schema, request, ctx, has_meta=has_meta, has_grants=has_grants)


async def table_scope(call: Call) -> Scope:
    """Resolve the table, check access and set the row-level-security actor for this transaction.

    When the metadata is known to exist, table, fields, grants and the actor settings come from one query
    (:func:`permissions_access.table_access`); otherwise (and whenever that finds no table) step by step.
    """
    emp_no = permissions_access.actor_emp_no(call.ctx)
    found = None
    if call.has_meta:
        found = await permissions_access.table_access(
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
        access = await check(call, call.action, table)
        preset = None
    else:
        table, access, preset = found
        if not access.allowed:
            raise PermissionDenied(access.reason or f"{call.action} is not allowed")
    conditions, stamp = permissions_access.own_scope(access, call.ctx)
    own = access.row_scope == "own"
    actor = emp_no if own else None
    if preset != ("" if actor is None else str(actor).strip(), "off" if own else "on"):
        await permissions_rls.set_actor(call.conn, actor, all_rows=not own)
    return Scope(table, conditions, stamp, permissions_access.protected_fields(access))
