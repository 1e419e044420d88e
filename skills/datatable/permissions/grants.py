"""Grants of the datatable skill (spec §7.2): their storage and the administrators' API.

Grants are set by administrators (the CLI ``skillyard datatable grant …`` and the Python API call :func:`grant`,
:func:`revoke`, :func:`list_grants`), never by a model: nothing in the skill's action vocabulary reaches them. They
live in the metadata table ``GRANTS_TABLE`` (store/names.py) of the org schema (one row per table and role),
whose prefix keeps the SQL channel's role away from it (the access decision also passes it to the guard as a
forbidden table). What a grant allows is decided in access.py.

``ops`` in a grant are the actions of the action table (actions/table.py) that act on a table's rows
(:data:`READ_ACTIONS` and :data:`WRITE_ACTIONS`), plus the shorthands ``read``, ``write`` and ``all`` (read + write).
They are stored expanded, so an action added to the skill later is *not* granted by an old ``all`` (fail closed).
An empty ``ops`` is a valid grant: the role can do nothing on that table.

Row scope ``own`` needs ``owner_field``: it must exist and be of type 文本 / 长文本 / 整数 / 单选 / 邮箱 / 电话, the
same for every own grant of the table. Every grant and revoke brings the table's row-level security policy in line
(:func:`~.rls.sync_policy`): the last ``own`` grant revoked takes the policy along.

Errors are :class:`~.errors.PermissionDenied`; a wrong argument is ``error_type="recoverable"`` with
``need_param`` naming it.

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from ..actions.table import action_names
from ..sql.role import role_name
from ..store.names import FIELDS_TABLE, GRANTS_TABLE, TABLES_TABLE, is_org_schema
from ..store.schema import (
    TableInfo,
    ensure_schema,
    load_fields,
    lock_schema,
    qualified_name,
    quote_ident,
    resolve_table,
)
from .errors import PermissionDenied
from .rls import sync_policy

__all__ = [
    "GRANTABLE_ACTIONS",
    "OWNER_FIELD_TYPES",
    "READ_ACTIONS",
    "SHORTHANDS",
    "WRITE_ACTIONS",
    "Grant",
    "ensure_grants_table",
    "grant",
    "has_grants_table",
    "list_grants",
    "parse_ops",
    "qualified_grants",
    "revoke",
]

#: The actions a grant can name: the ones acting on one table's rows, reading or writing them.
READ_ACTIONS: frozenset[str] = action_names(kind="read", table_scoped=True)
WRITE_ACTIONS: frozenset[str] = action_names(kind="write", table_scoped=True)
GRANTABLE_ACTIONS: frozenset[str] = action_names(table_scoped=True)
SHORTHANDS: dict[str, frozenset[str]] = {"read": READ_ACTIONS, "write": WRITE_ACTIONS, "all": GRANTABLE_ACTIONS}
#: Field types an owner field may have (compared through their text form with the employee number).
OWNER_FIELD_TYPES: frozenset[str] = frozenset({"文本", "长文本", "整数", "单选", "邮箱", "电话"})
_SCOPES = frozenset({"all", "own"})


@dataclass(frozen=True)
class Grant:
    table_id: str
    table: str
    role: str
    ops: frozenset[str]
    row_scope: str
    owner_field: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "table_id": self.table_id,
            "table": self.table,
            "role": self.role,
            "ops": sorted(self.ops),
            "row_scope": self.row_scope,
            "owner_field": self.owner_field,
        }


def qualified_grants(schema: str) -> str:
    """The grants table of ``schema``, quoted and qualified."""
    return qualified_name(schema, GRANTS_TABLE)


async def has_grants_table(conn: asyncpg.Connection, schema: str) -> bool:
    return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", qualified_grants(schema)))


async def ensure_grants_table(conn: asyncpg.Connection, schema: str) -> None:
    """Create the grants table (and the schema's store metadata) when missing; idempotent.

    The SQL channel's org role, when it exists, loses every privilege on the new table (its default privileges
    would otherwise give it DML on it).
    """
    await ensure_schema(conn, schema)
    if await has_grants_table(conn, schema):
        return
    async with conn.transaction():
        await lock_schema(conn, schema)
        await conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {qualified_grants(schema)} (
                table_id uuid NOT NULL REFERENCES {qualified_name(schema, TABLES_TABLE)} (id) ON DELETE CASCADE,
                role text NOT NULL,
                ops text[] NOT NULL,
                row_scope text NOT NULL CHECK (row_scope IN ('all', 'own')),
                owner_field text,
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (table_id, role),
                CHECK ((row_scope = 'own') = (owner_field IS NOT NULL))
            )"""
        )
        role = role_name(schema)
        if await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)", role):
            await conn.execute(f"REVOKE ALL ON TABLE {qualified_grants(schema)} FROM {quote_ident(role)}")


def parse_ops(ops: Any) -> frozenset[str]:
    """Action names and shorthands (``read``, ``write``, ``all``) → the expanded set of grantable actions."""
    if isinstance(ops, str):
        ops = [part for part in ops.replace("，", ",").split(",")]
    if not isinstance(ops, Iterable) or isinstance(ops, bytes | Mapping):
        raise PermissionDenied(
            "ops must be a list of action names or read / write / all, e.g. ['read'] or ['query', 'insert']",
            error_type="recoverable",
            need_param="ops",
        )
    result: set[str] = set()
    bad: list[str] = []
    for item in ops:
        key = item.strip().lower() if isinstance(item, str) else item
        if key == "":
            continue
        if key in SHORTHANDS:
            result |= SHORTHANDS[key]
        elif key in GRANTABLE_ACTIONS:
            result.add(key)
        else:
            bad.append(repr(item))
    if bad:
        raise PermissionDenied(
            f"unknown or ungrantable op(s) {', '.join(bad)}; use read, write, all or row actions "
            f"({', '.join(sorted(GRANTABLE_ACTIONS))}). Structure actions follow team_role owner/admin and SQL "
            "actions follow allow_sql; grants do not cover them",
            error_type="recoverable",
            need_param="ops",
        )
    return frozenset(result)


def _check_role(role: Any) -> str:
    if not isinstance(role, str) or not role.strip():
        raise PermissionDenied("role must be a non-empty role name", error_type="recoverable", need_param="role")
    return role.strip()


def _grant_of(row: Mapping[str, Any]) -> Grant:
    return Grant(
        table_id=str(row["table_id"]),
        table=row["title"],
        role=row["role"],
        ops=frozenset(row["ops"]),
        row_scope=row["row_scope"],
        owner_field=row["owner_field"],
    )


async def grant(
    conn: asyncpg.Connection,
    schema: str,
    *,
    table_id_or_name: Any,
    role: Any,
    ops: Any,
    row_scope: str = "all",
    owner_field: str | None = None,
) -> Grant:
    """Set (insert or replace) the grant of ``role`` on a table and bring its row-level security in line.

    ``row_scope="own"`` needs ``owner_field``: an existing field of an owner-capable type, the same for every own
    grant of the table (the policy has one owner field; change it by granting every own role again, or revoke
    them first).
    """
    role = _check_role(role)
    expanded = parse_ops(ops)
    if row_scope not in _SCOPES:
        raise PermissionDenied(
            f"row_scope must be 'all' or 'own', got {row_scope!r}", error_type="recoverable", need_param="row_scope"
        )
    table = await resolve_table(conn, schema, table_id_or_name)  # first: a grant on no table creates nothing
    await ensure_grants_table(conn, schema)
    if row_scope == "all":
        owner_field = None
    else:
        fields = {f.title: f for f in await load_fields(conn, schema, table.id)}
        wanted = owner_field.strip() if isinstance(owner_field, str) else owner_field
        if not wanted:
            raise PermissionDenied(
                f"row_scope 'own' needs owner_field: the field of table {table.title!r} holding the owner's "
                f"employee number (fields: {', '.join(fields) or '(none)'})",
                error_type="recoverable",
                need_param="owner_field",
            )
        if wanted not in fields:
            raise PermissionDenied(
                f"table {table.title!r} has no field {wanted!r} to use as owner field; fields are: "
                f"{', '.join(fields) or '(none)'} (add the field first)",
                error_type="recoverable",
                need_param="owner_field",
            )
        if fields[wanted].uidt not in OWNER_FIELD_TYPES:
            raise PermissionDenied(
                f"field {wanted!r} is of type {fields[wanted].uidt}; an owner field holds an employee number and must "
                f"be one of {', '.join(sorted(OWNER_FIELD_TYPES))}",
                error_type="recoverable",
                need_param="owner_field",
            )
        owner_field = wanted
    async with conn.transaction():
        await lock_schema(conn, schema)
        if owner_field is not None:
            others = await conn.fetch(
                f"""SELECT role, owner_field FROM {qualified_grants(schema)}
                    WHERE table_id = $1 AND row_scope = 'own' AND role <> $2 AND owner_field <> $3""",
                uuid.UUID(table.id),
                role,
                owner_field,
            )
            if others:
                listed = ", ".join(f"{r['role']} ({r['owner_field']})" for r in others)
                raise PermissionDenied(
                    f"table {table.title!r} already uses another owner field for own-scoped role(s) {listed}; a table "
                    "has one owner field — revoke those grants or grant them again with the same owner_field",
                    error_type="recoverable",
                    need_param="owner_field",
                )
        await conn.execute(
            f"""INSERT INTO {qualified_grants(schema)} (table_id, role, ops, row_scope, owner_field)
                VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (table_id, role) DO UPDATE SET ops = EXCLUDED.ops, row_scope = EXCLUDED.row_scope,
                    owner_field = EXCLUDED.owner_field, updated_at = now()""",
            uuid.UUID(table.id),
            role,
            sorted(expanded),
            row_scope,
            owner_field,
        )
        await _sync_policy(conn, schema, table)
    return Grant(table.id, table.title, role, expanded, row_scope, owner_field)


async def _sync_policy(conn: asyncpg.Connection, schema: str, table: TableInfo) -> None:
    """The table's row-level security policy as its own grants ask for it: on the owner field of its ``own`` grants
    (compared by that field's type), or none without one."""
    row = await conn.fetchrow(
        f"""SELECT g.owner_field, f.uidt FROM {qualified_grants(schema)} g
            LEFT JOIN {qualified_name(schema, FIELDS_TABLE)} f ON f.table_id = g.table_id AND f.title = g.owner_field
            WHERE g.table_id = $1 AND g.row_scope = 'own' ORDER BY g.owner_field LIMIT 1""",
        uuid.UUID(table.id),
    )
    if row is None:
        await sync_policy(conn, table, None)
    else:
        await sync_policy(conn, table, str(row["owner_field"]), row["uidt"])


async def revoke(conn: asyncpg.Connection, schema: str, *, table_id_or_name: Any, role: Any) -> bool:
    """Remove the grant of ``role`` on a table; True when there was one. The last own grant takes the policy along."""
    role = _check_role(role)
    table = await resolve_table(conn, schema, table_id_or_name)
    if not await has_grants_table(conn, schema):
        return False
    async with conn.transaction():
        await lock_schema(conn, schema)
        status = await conn.execute(
            f"DELETE FROM {qualified_grants(schema)} WHERE table_id = $1 AND role = $2", uuid.UUID(table.id), role
        )
        removed = bool(str(status).split()[-1] != "0")
        if removed:
            await _sync_policy(conn, schema, table)
    return removed


async def list_grants(conn: asyncpg.Connection, schema: str) -> list[Grant]:
    """Every grant of the schema, ordered by table title and role (nothing is created)."""
    if not is_org_schema(schema) or not await has_grants_table(conn, schema):
        return []
    rows = await conn.fetch(
        f"""SELECT g.table_id, t.title, g.role, g.ops, g.row_scope, g.owner_field
            FROM {qualified_grants(schema)} g JOIN {qualified_name(schema, TABLES_TABLE)} t ON t.id = g.table_id
            ORDER BY t.title, g.role"""
    )
    return [_grant_of(r) for r in rows]
