"""Permissions of the datatable skill (spec §7.2): table-level grants, row scope ``own`` and operation-level rules.

Grants are set by administrators (the CLI ``skillyard datatable grant …`` and the Python API call :func:`grant`,
:func:`revoke`, :func:`list_grants`), never by a model: nothing in the skill's action vocabulary reaches them. They
live in the metadata table ``_dt_grants`` of the org schema (one row per table and role); the ``_dt_`` prefix keeps
the SQL channel's role away from it (pass :data:`GRANTS_TABLE` with ``store_schema.META_TABLES`` as the guard's
``forbidden_tables``, too).

Rules (:func:`check_access`):

* **Grants are exceptions, not a whitelist.** A table without any grant row is open to everyone: every action, row
  scope ``all``.
* **An unconfigured role opens the table.** When a table has grants, a role of the actor that has no row for that
  table gets everything on it (spec: 「若某表存在未配置的角色，该表按全开处理」, implemented literally). An actor with
  no roles at all counts as one unconfigured role, so the table is open to them as well. Restricting a table
  therefore means configuring *every* role that may reach it.
* **Union, widest scope.** Over the actor's roles, the allowed actions are the union of the rows' ``ops``; among the
  roles that allow the action, row scope ``all`` beats ``own``.
* **Structure actions** (create_table, add_field, update_field, delete_field, delete_table) need ``team_role`` owner
  or admin, whatever the grants say; grants do not mention them.
* **SQL actions** (sql_query, sql_execute) need ``allow_sql`` (True unless the line says otherwise); grants do not
  mention them either. A role with ``own`` scope on a table may not reference that table on the SQL channel at all:
  :func:`own_scoped_tables` lists those names; :func:`sql_forbidden_tables` adds the tables on which the actor is
  refused some row action and the metadata tables — the full ``forbidden_tables`` for the guard.
* ``list_tables`` is always allowed (it shows names only).

``ops`` in a grant are action names from :data:`dispatch.ACTIONS` that act on a table's rows (:data:`READ_ACTIONS`
and :data:`WRITE_ACTIONS`), plus the shorthands ``read``, ``write`` and ``all`` (read + write). They are stored
expanded, so an action added to the skill later is *not* granted by an old ``all`` (fail closed). An empty ``ops``
is a valid grant: the role can do nothing on that table.

Row scope ``own`` (``owner_field`` required, must exist, of type 文本 / 长文本 / 整数 / 单选 / 邮箱 / 电话):

* :func:`own_scope` gives the ``extra_conditions`` (``owner_field = actor``) for query / aggregate / update_by /
  delete_by / count and the id-addressed update / delete / delete_batch, and the ``stamp`` for insert / insert_batch
  / insert_from_file / upsert; :func:`protected_fields` names the owner field for ``protected`` of update /
  update_by. The employee number is ``actor_emp_no`` of the runtime context, else ``emp_no`` — never anything from
  the action's input. No employee number: refused (fail closed).
* PostgreSQL row-level security backs the injected filters: every table with an ``own`` grant gets ``ENABLE`` and
  ``FORCE ROW LEVEL SECURITY`` and the policy ``_dt_own`` ``FOR ALL USING (...) WITH CHECK (...)`` with the
  condition ``current_setting('skillyard.all_rows', true) = 'on' OR owner::text = NULLIF(current_setting(
  'skillyard.emp_no', true), '')``. :func:`set_actor` sets both settings with ``SET LOCAL`` semantics for the
  current transaction. No setting (or an empty one) matches no row. The handler calls ``set_actor(conn, emp_no,
  all_rows=(access.row_scope == "all"))`` before each action on a table; for the SQL channel ``all_rows`` must be
  False when :func:`own_scoped_tables` is not empty (then even a view over an own-scoped table made earlier by
  someone else only shows the actor's rows); structure actions (owner/admin) use ``all_rows=True``.
* What FORCE covers: without it the table's *owner* bypasses its policies; with it the owner is filtered too. It
  does not cover superusers or roles with BYPASSRLS — PostgreSQL always lets them through. When the platform
  connects as a superuser, the injected filters are the only guard on the structured actions; the SQL channel runs
  under the org role (no superuser, no BYPASSRLS), where the policy always applies. Policies do not affect
  constraint checks (a UNIQUE owner-independent value still collides with rows of other owners) or DDL.
* Revoking the last ``own`` grant of a table drops the policy and turns row-level security off again. Renaming the
  owner field keeps the policy working (PostgreSQL tracks the column) but leaves the grant naming the old title:
  :func:`check_access` then refuses (fail closed) until an admin grants again with the new name.

Errors are :class:`PermissionDenied` (a :class:`~.store_schema.StoreError`): ``error_type="config"`` and
non-retriable for setup problems the model cannot fix; the message says who can (an admin, with ``skillyard datatable
grant``).
Refusals of :func:`check_access` are returned as ``Access(allowed=False, reason=…)`` rather than raised.

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from .action_aliases import ACTIONS
from .field_types import FieldDef
from .filters import Condition
from .protection import TOKENS_TABLE
from .sql_channel import role_name
from .store_schema import META_TABLES, StoreError, TableInfo, ensure_schema, load_fields, quote_ident, resolve_table

__all__ = [
    "ALL_ROWS_SETTING",
    "EMP_NO_SETTING",
    "GRANTABLE_ACTIONS",
    "GRANTS_TABLE",
    "OWNER_FIELD_TYPES",
    "POLICY_NAME",
    "READ_ACTIONS",
    "SHORTHANDS",
    "SQL_ACTIONS",
    "STRUCTURE_ACTIONS",
    "STRUCTURE_ROLES",
    "WRITE_ACTIONS",
    "Access",
    "Grant",
    "PermissionDenied",
    "actor_emp_no",
    "check_access",
    "ensure_grants_table",
    "grant",
    "list_grants",
    "own_scope",
    "own_scoped_tables",
    "parse_ops",
    "protected_fields",
    "revoke",
    "set_actor",
    "sql_forbidden_tables",
    "table_access",
]

STRUCTURE_ACTIONS: frozenset[str] = frozenset(
    {"create_table", "add_field", "update_field", "delete_field", "delete_table"}
)
SQL_ACTIONS: frozenset[str] = frozenset({"sql_query", "sql_execute"})
READ_ACTIONS: frozenset[str] = frozenset({"list_columns", "query", "aggregate"})
WRITE_ACTIONS: frozenset[str] = frozenset(
    {
        "insert",
        "insert_batch",
        "insert_from_file",
        "upsert",
        "update",
        "update_by",
        "delete",
        "delete_batch",
        "delete_by",
    }
)
#: Actions a grant can name: the ones acting on one table's rows.
GRANTABLE_ACTIONS: frozenset[str] = READ_ACTIONS | WRITE_ACTIONS
SHORTHANDS: dict[str, frozenset[str]] = {"read": READ_ACTIONS, "write": WRITE_ACTIONS, "all": GRANTABLE_ACTIONS}
#: team_role values that may change structure.
STRUCTURE_ROLES: frozenset[str] = frozenset({"owner", "admin"})
#: Field types an owner field may have (compared through their text form with the employee number).
OWNER_FIELD_TYPES: frozenset[str] = frozenset({"文本", "长文本", "整数", "单选", "邮箱", "电话"})
GRANTS_TABLE = "_dt_grants"
POLICY_NAME = "_dt_own"
EMP_NO_SETTING = "skillyard.emp_no"
ALL_ROWS_SETTING = "skillyard.all_rows"
_SCOPES = frozenset({"all", "own"})
_SCHEMA_RE = re.compile(r"org_data_[a-z0-9]+")
_LOCK_CLASS = 0x6474  # the store's advisory lock class ("dt"); the second key is hashtext(schema)
_GRANT_HINT = "an admin can change it with `skillyard datatable grant` (or revoke the grant)"

assert STRUCTURE_ACTIONS | SQL_ACTIONS | GRANTABLE_ACTIONS | {"list_tables"} == set(ACTIONS), "classify every action"
assert not (STRUCTURE_ACTIONS & SQL_ACTIONS or STRUCTURE_ACTIONS & GRANTABLE_ACTIONS or SQL_ACTIONS & GRANTABLE_ACTIONS)


class PermissionDenied(StoreError):
    """A permission setting is wrong or missing, or an action was refused by one; an admin fixes it."""

    def __init__(self, message: str, *, error_type: str = "config", non_retriable: bool = True, **kw: Any) -> None:
        super().__init__(message, error_type=error_type, non_retriable=non_retriable, **kw)


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


@dataclass(frozen=True)
class Access:
    allowed: bool
    row_scope: str = "all"
    owner_field: str | None = None
    reason: str | None = None


_OPEN = Access(True)


# --------------------------------------------------------------------------------------------------------------------
# Storage


def _grants(schema: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(GRANTS_TABLE)}"


async def _has_grants_table(conn: asyncpg.Connection, schema: str) -> bool:
    return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", _grants(schema)))


async def ensure_grants_table(conn: asyncpg.Connection, schema: str) -> None:
    """Create ``_dt_grants`` (and the schema's store metadata) when missing; idempotent.

    The SQL channel's org role, when it exists, loses every privilege on the new table (its default privileges
    would otherwise give it DML on it).
    """
    await ensure_schema(conn, schema)
    if await _has_grants_table(conn, schema):
        return
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", _LOCK_CLASS, schema)
        await conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {_grants(schema)} (
                table_id uuid NOT NULL REFERENCES {quote_ident(schema)}."_dt_tables" (id) ON DELETE CASCADE,
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
            await conn.execute(f"REVOKE ALL ON TABLE {_grants(schema)} FROM {quote_ident(role)}")


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


async def _sync_policy(conn: asyncpg.Connection, table: TableInfo, owner_field: str | None) -> None:
    """Install (owner_field given) or remove (None) the table's row-level security policy."""
    await conn.execute(f"DROP POLICY IF EXISTS {quote_ident(POLICY_NAME)} ON {table.qualified}")
    if owner_field is None:
        await conn.execute(f"ALTER TABLE {table.qualified} NO FORCE ROW LEVEL SECURITY")
        await conn.execute(f"ALTER TABLE {table.qualified} DISABLE ROW LEVEL SECURITY")
        return
    condition = (
        f"(current_setting('{ALL_ROWS_SETTING}', true) = 'on' OR "
        f"{quote_ident(owner_field)}::text = NULLIF(current_setting('{EMP_NO_SETTING}', true), ''))"
    )
    await conn.execute(
        f"CREATE POLICY {quote_ident(POLICY_NAME)} ON {table.qualified} AS PERMISSIVE FOR ALL "
        f"USING {condition} WITH CHECK {condition}"
    )
    await conn.execute(f"ALTER TABLE {table.qualified} ENABLE ROW LEVEL SECURITY")
    await conn.execute(f"ALTER TABLE {table.qualified} FORCE ROW LEVEL SECURITY")


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
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", _LOCK_CLASS, schema)
        if owner_field is not None:
            others = await conn.fetch(
                f"""SELECT role, owner_field FROM {_grants(schema)}
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
            f"""INSERT INTO {_grants(schema)} (table_id, role, ops, row_scope, owner_field)
                VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (table_id, role) DO UPDATE SET ops = EXCLUDED.ops, row_scope = EXCLUDED.row_scope,
                    owner_field = EXCLUDED.owner_field, updated_at = now()""",
            uuid.UUID(table.id),
            role,
            sorted(expanded),
            row_scope,
            owner_field,
        )
        await _sync_policy(conn, table, await _table_owner_field(conn, schema, table.id))
    return Grant(table.id, table.title, role, expanded, row_scope, owner_field)


async def _table_owner_field(conn: asyncpg.Connection, schema: str, table_id: str) -> str | None:
    value = await conn.fetchval(
        f"SELECT min(owner_field) FROM {_grants(schema)} WHERE table_id = $1 AND row_scope = 'own'",
        uuid.UUID(table_id),
    )
    return None if value is None else str(value)


async def revoke(conn: asyncpg.Connection, schema: str, *, table_id_or_name: Any, role: Any) -> bool:
    """Remove the grant of ``role`` on a table; True when there was one. The last own grant takes the policy along."""
    role = _check_role(role)
    table = await resolve_table(conn, schema, table_id_or_name)
    if not await _has_grants_table(conn, schema):
        return False
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", _LOCK_CLASS, schema)
        status = await conn.execute(
            f"DELETE FROM {_grants(schema)} WHERE table_id = $1 AND role = $2", uuid.UUID(table.id), role
        )
        removed = bool(str(status).split()[-1] != "0")
        if removed:
            await _sync_policy(conn, table, await _table_owner_field(conn, schema, table.id))
    return removed


async def list_grants(conn: asyncpg.Connection, schema: str) -> list[Grant]:
    """Every grant of the schema, ordered by table title and role (nothing is created)."""
    if not _SCHEMA_RE.fullmatch(schema) or not await _has_grants_table(conn, schema):
        return []
    rows = await conn.fetch(
        f"""SELECT g.table_id, t.title, g.role, g.ops, g.row_scope, g.owner_field
            FROM {_grants(schema)} g JOIN {quote_ident(schema)}."_dt_tables" t ON t.id = g.table_id
            ORDER BY t.title, g.role"""
    )
    return [_grant_of(r) for r in rows]


# --------------------------------------------------------------------------------------------------------------------
# Checking


def _roles(roles: Sequence[str] | str | None) -> list[str]:
    if roles is None:
        return []
    if isinstance(roles, str):
        roles = [roles]
    return sorted({r.strip() for r in roles if isinstance(r, str) and r.strip()})


_ALL = ("all", None)


def _decide(by_role: Mapping[str, Any], mine: Sequence[str], action: str) -> tuple[str, str | None] | None:
    """For a table that has grants: ``("all", None)``, ``("own", owner field)`` or None (refused)."""
    if not mine or any(role not in by_role for role in mine):
        return _ALL  # an unconfigured role opens the table (spec §7.2)
    allowing = [by_role[role] for role in mine if action in by_role[role]["ops"]]
    if not allowing:
        return None
    if any(r["row_scope"] == "all" for r in allowing):
        return _ALL
    return ("own", min(r["owner_field"] for r in allowing))


async def check_access(
    conn: asyncpg.Connection,
    schema: str,
    *,
    table: TableInfo | None,
    action: str,
    roles: Sequence[str],
    team_role: str | None,
    allow_sql: bool = True,
) -> Access:
    """May an actor with ``roles`` / ``team_role`` run ``action`` (on ``table``)? With which row scope?"""
    if action not in ACTIONS:
        return Access(False, reason=f"unknown action {action!r}")
    if action in STRUCTURE_ACTIONS:
        if (team_role or "").strip().lower() in STRUCTURE_ROLES:
            return _OPEN
        return Access(
            False,
            reason=f"{action} changes a table's structure and needs team_role owner or admin (yours: "
            f"{team_role or 'none'}); ask an owner or admin of the team to do it",
        )
    if action in SQL_ACTIONS:
        if allow_sql is True:
            return _OPEN
        return Access(
            False,
            reason=f"{action} is switched off for this line (allow_sql is false); use the structured actions "
            "(query, aggregate, insert, update, …) or ask an admin to allow SQL",
        )
    if table is None or action == "list_tables":
        return _OPEN
    if not await _has_grants_table(conn, schema):
        return _OPEN
    rows = await conn.fetch(
        f"SELECT role, ops, row_scope, owner_field FROM {_grants(schema)} WHERE table_id = $1",
        uuid.UUID(table.id),
    )
    decided = _grant_access(table, action, roles, rows)
    if isinstance(decided, Access):
        return decided
    return _own_access(table, decided, {f.title for f in await load_fields(conn, schema, table.id)})


def _grant_access(
    table: TableInfo, action: str, roles: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> Access | str:
    """The access to a table given its grant rows, or (scope own) the owner field :func:`_own_access` checks."""
    if not rows:
        return _OPEN
    mine = _roles(roles)
    decision = _decide({r["role"]: r for r in rows}, mine, action)
    if decision is None:
        return Access(
            False,
            reason=f"your role(s) {', '.join(mine)} may not {action} on table {table.title!r}; {_GRANT_HINT}",
        )
    if decision == _ALL:
        return _OPEN
    return str(decision[1])


def _own_access(table: TableInfo, owner_field: str, names: Collection[str]) -> Access:
    if owner_field not in names:
        return Access(
            False,
            row_scope="own",
            owner_field=owner_field,
            reason=f"table {table.title!r} is limited to each person's own rows by field {owner_field!r}, which no "
            f"longer exists; refused until {_GRANT_HINT} with an existing owner field",
        )
    return Access(True, row_scope="own", owner_field=owner_field)


def _as_uuid(value: Any) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        return None


async def table_access(
    conn: asyncpg.Connection,
    schema: str,
    *,
    table_id: Any,
    table_name: Any,
    action: str,
    roles: Sequence[str],
    emp_no: str | None,
    has_grants: bool,
) -> tuple[TableInfo, Access, tuple[str, str] | None] | None:
    """:func:`store_schema.resolve_table` + :func:`check_access` (+ the table's fields) of a row action in one query.

    For a grantable action on a table named by UUID or title in a schema whose metadata tables exist (the caller
    knows, e.g. from :func:`store_schema.raw_connection_probing`; ``has_grants`` likewise says whether ``_dt_grants``
    exists). Returns None whenever the table is not found (or the case is not one of those): the caller then takes
    the step-by-step path, which explains what is wrong. Otherwise ``(table with its fields, access, preset)``: the
    same access :func:`check_access` gives from the same rows. Inside a transaction the query also sets the row-level
    security settings :func:`set_actor` would set for that access (computed from the same grant rows in SQL), and
    ``preset`` says which ``(emp_no, all_rows)`` it set; the caller compares them with what it wants and calls
    :func:`set_actor` when they differ, so the Python decision stays the authority. Outside a transaction nothing is
    set and ``preset`` is None.
    """
    if action not in GRANTABLE_ACTIONS:
        return None
    wanted = table_id if table_id not in (None, "") else table_name
    if wanted in (None, ""):
        return None
    key: Any = _as_uuid(wanted)
    if key is not None:
        match = "t.id = $1"
    elif isinstance(wanted, str):
        key, match = wanted.strip(), "t.title = $1"
    else:
        return None
    mine = _roles(roles)
    preset = conn.is_in_transaction()
    meta = quote_ident(schema)
    grants = _grants(schema)
    selects = [
        "t.id",
        "t.title",
        f"""ARRAY(SELECT ROW(f.title, f.uidt, f.required, f."unique", f.options, f."precision", f.scale)
                  FROM {meta}."_dt_fields" f WHERE f.table_id = t.id ORDER BY f.position, f.title) AS fields""",
    ]
    lateral = ""
    if has_grants:
        selects.append(
            f"ARRAY(SELECT ROW(g.role, g.ops, g.row_scope, g.owner_field) FROM {grants} g "
            "WHERE g.table_id = t.id) AS grants"
        )
        # row scope own (see _decide): every role of the actor configured, one of them allowing the action, none of
        # those with scope all
        lateral = f""" CROSS JOIN LATERAL (SELECT cardinality($2::text[]) > 0
            AND (SELECT count(*) FROM {grants} g WHERE g.table_id = t.id AND g.role = ANY($2::text[]))
                = cardinality($2::text[])
            AND EXISTS (SELECT 1 FROM {grants} g WHERE g.table_id = t.id AND g.role = ANY($2::text[])
                        AND $3::text = ANY(g.ops))
            AND NOT EXISTS (SELECT 1 FROM {grants} g WHERE g.table_id = t.id AND g.role = ANY($2::text[])
                            AND $3::text = ANY(g.ops) AND g.row_scope = 'all') AS own) o"""
        own = "o.own"
    else:
        own = "false"
    params: list[Any] = [key]
    if preset:
        if has_grants:
            params += [mine, action]
        params.append("" if emp_no is None else str(emp_no).strip())
        n = len(params)
        selects += [
            f"set_config('{EMP_NO_SETTING}', CASE WHEN {own} THEN ${n}::text ELSE '' END, true) AS emp_no",
            f"set_config('{ALL_ROWS_SETTING}', CASE WHEN {own} THEN 'off' ELSE 'on' END, true) AS all_rows",
        ]
    elif has_grants:
        lateral = ""  # nothing to set: the lateral decision is not needed
    row = await conn.fetchrow(f'SELECT {", ".join(selects)} FROM {meta}."_dt_tables" t{lateral} WHERE {match}', *params)
    if row is None:
        return None
    fields = tuple(
        FieldDef(
            title=f[0], uidt=f[1], required=f[2], unique=f[3], options=tuple(f[4] or ()), precision=f[5], scale=f[6]
        )
        for f in row["fields"]
    )
    table = TableInfo(str(row["id"]), row["title"], schema, fields)
    grant_rows = [
        {"role": g[0], "ops": g[1], "row_scope": g[2], "owner_field": g[3]}
        for g in (row["grants"] if has_grants else ())
    ]
    decided = _grant_access(table, action, roles, grant_rows)
    access = decided if isinstance(decided, Access) else _own_access(table, decided, {f.title for f in fields})
    return table, access, ((row["emp_no"], row["all_rows"]) if preset else None)


def actor_emp_no(ctx: Mapping[str, Any] | None) -> str | None:
    """The acting person's employee number from the runtime context: ``actor_emp_no``, else ``emp_no``."""
    if not ctx:
        return None
    for key in ("actor_emp_no", "emp_no"):
        value = ctx.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return str(value)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def own_scope(access: Access, ctx: Mapping[str, Any] | None) -> tuple[list[Condition], dict[str, Any]]:
    """``(extra_conditions, stamp)`` for the row functions: empty for scope ``all``; for ``own`` the owner condition
    and the owner value. Raises :class:`PermissionDenied` when the employee number is missing (fail closed)."""
    if not access.allowed:
        raise PermissionDenied(access.reason or "access denied")
    if access.row_scope != "own":
        return [], {}
    if not access.owner_field:
        raise PermissionDenied(f"row scope 'own' without an owner field; {_GRANT_HINT}")
    emp_no = actor_emp_no(ctx)
    if emp_no is None:
        raise PermissionDenied(
            "this table is limited to each person's own rows, but the runtime context has no employee number "
            "(actor_emp_no or emp_no); refused. The platform must pass the acting person's employee number"
        )
    return [Condition(access.owner_field, "eq", emp_no)], {access.owner_field: emp_no}


def protected_fields(access: Access) -> frozenset[str]:
    """Fields update / update_by must not change under this access (the owner field of scope ``own``)."""
    return frozenset({access.owner_field}) if access.row_scope == "own" and access.owner_field else frozenset()


async def _table_decisions(
    conn: asyncpg.Connection, schema: str, roles: Sequence[str]
) -> dict[str, dict[str, tuple[str, str | None] | None]]:
    """``{table title: {grantable action: decision}}`` for the tables that have grants (see :func:`_decide`)."""
    mine = _roles(roles)
    if not await _has_grants_table(conn, schema):
        return {}
    rows = await conn.fetch(
        f"""SELECT t.title, g.role, g.ops, g.row_scope, g.owner_field
            FROM {_grants(schema)} g JOIN {quote_ident(schema)}."_dt_tables" t ON t.id = g.table_id"""
    )
    tables: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in rows:
        tables.setdefault(row["title"], {})[row["role"]] = row
    return {
        title: {action: _decide(by_role, mine, action) for action in GRANTABLE_ACTIONS}
        for title, by_role in tables.items()
    }


async def own_scoped_tables(conn: asyncpg.Connection, schema: str, roles: Sequence[str]) -> frozenset[str]:
    """Titles of the tables on which the actor's effective row scope is ``own`` for at least one action.

    The SQL channel must refuse them (pass them in ``forbidden_tables``): on it, a person limited to own rows could
    otherwise read or change everyone's rows. An unconfigured role or an ``all`` grant for that action opens it.
    """
    decisions = await _table_decisions(conn, schema, roles)
    return frozenset(
        title
        for title, by_action in decisions.items()
        if any(d is not None and d[0] == "own" for d in by_action.values())
    )


async def sql_forbidden_tables(conn: asyncpg.Connection, schema: str, roles: Sequence[str]) -> frozenset[str]:
    """:func:`own_scoped_tables` plus the tables on which the actor is refused any row action (the SQL channel can
    do every one of them), plus the skill's own tables (``_dt_*``: metadata, :data:`GRANTS_TABLE`, confirm tokens)."""
    decisions = await _table_decisions(conn, schema, roles)
    limited = {title for title, by_action in decisions.items() if any(d != _ALL for d in by_action.values())}
    return frozenset({*limited, *META_TABLES, GRANTS_TABLE, TOKENS_TABLE})


async def set_actor(conn: asyncpg.Connection, emp_no: str | None, *, all_rows: bool = False) -> None:
    """Set the settings the row-level security policy reads, for the current transaction only (SET LOCAL).

    ``emp_no`` None (or empty) leaves the actor unset: own-scoped tables then show no row unless ``all_rows``.
    Must run inside a transaction; outside one it would not last past the statement, so it is refused.
    """
    if not conn.is_in_transaction():
        raise PermissionDenied("set_actor must run inside a transaction (it uses SET LOCAL semantics)")
    value = "" if emp_no is None else str(emp_no).strip()
    await conn.execute(
        "SELECT set_config($1, $2, true), set_config($3, $4, true)",
        EMP_NO_SETTING,
        value,
        ALL_ROWS_SETTING,
        "on" if all_rows else "off",
    )
