"""The access decision of the datatable skill (spec §7.2): may this actor run this action, and on which rows?

Rules (:func:`check_access`, from the grant rows of grants.py):

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

Row scope ``own`` (the grant's ``owner_field``, see grants.py):

* :func:`own_scope` gives the ``extra_conditions`` (``owner_field = actor``) for query / aggregate / update_by /
  delete_by / count and the id-addressed update / delete / delete_batch, and the ``stamp`` for insert / insert_batch
  / insert_from_file / upsert; :func:`protected_fields` names the owner field for ``protected`` of update /
  update_by. The employee number is ``actor_emp_no`` of the runtime context, else ``emp_no`` — never anything from
  the action's input. No employee number: refused (fail closed).
* Renaming the owner field leaves the grant naming the old title: :func:`check_access` then refuses (fail closed)
  until an admin grants again with the new name.
* The row-level security policies behind the injected filters and the actor settings are in rls.py;
  :func:`table_access` sets those settings in the same query as it reads the grants.

Refusals of :func:`check_access` are returned as ``Access(allowed=False, reason=…)`` rather than raised; the row
scope helpers raise :class:`~.errors.PermissionDenied`.

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from ..actions.table import ACTIONS, action_names
from ..fields.types import FieldDef
from ..rows.filters import Condition
from ..store.names import FIELDS_TABLE, GRANTS_TABLE, META_TABLES, TABLES_TABLE, TOKENS_TABLE
from ..store.schema import TableInfo, as_uuid, load_fields, qualified_name
from .errors import PermissionDenied
from .grants import GRANTABLE_ACTIONS, has_grants_table, qualified_grants
from .rls import ALL_ROWS_SETTING, EMP_NO_INT_SETTING, EMP_NO_SETTING, actor_settings

__all__ = [
    "SQL_ACTIONS",
    "STRUCTURE_ACTIONS",
    "STRUCTURE_ROLES",
    "Access",
    "actor_emp_no",
    "check_access",
    "own_scope",
    "own_scoped_tables",
    "protected_fields",
    "sql_forbidden_tables",
    "table_access",
]

STRUCTURE_ACTIONS: frozenset[str] = action_names(kind="structure")
SQL_ACTIONS: frozenset[str] = action_names(kind="sql")
#: team_role values that may change structure.
STRUCTURE_ROLES: frozenset[str] = frozenset({"owner", "admin"})
_GRANT_HINT = "an admin can change it with `skillyard datatable grant` (or revoke the grant)"

assert STRUCTURE_ACTIONS | SQL_ACTIONS | GRANTABLE_ACTIONS | {"list_tables"} == set(ACTIONS), "classify every action"
assert not (STRUCTURE_ACTIONS & SQL_ACTIONS or STRUCTURE_ACTIONS & GRANTABLE_ACTIONS or SQL_ACTIONS & GRANTABLE_ACTIONS)


@dataclass(frozen=True)
class Access:
    allowed: bool
    row_scope: str = "all"
    owner_field: str | None = None
    reason: str | None = None


_OPEN = Access(True)


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
    if not await has_grants_table(conn, schema):
        return _OPEN
    rows = await conn.fetch(
        f"SELECT role, ops, row_scope, owner_field FROM {qualified_grants(schema)} WHERE table_id = $1",
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
    grants_probe: list[bool] | None = None,
    fetchrow: Callable[..., Awaitable[Mapping[str, Any] | None]] | None = None,
) -> tuple[TableInfo, Access, tuple[str, str, str] | None] | None:
    """store/schema.py's ``resolve_table`` + :func:`check_access` (+ the table's fields) of a row action in one query.

    For a grantable action on a table named by UUID or title in a schema whose metadata tables exist (the caller
    knows, e.g. from store/schema.py's ``raw_connection_probing``; ``has_grants`` likewise says whether the grants
    table exists). Returns None whenever the table is not found (or the case is not one of those): the caller then takes
    the step-by-step path, which explains what is wrong. Otherwise ``(table with its fields, access, preset)``: the
    same access :func:`check_access` gives from the same rows. Inside a transaction the query also sets the row-level
    security settings :func:`set_actor` would set for that access (computed from the same grant rows in SQL), and
    ``preset`` says which settings it set (as :func:`~.rls.actor_settings` gives them); the caller
    compares them with what it wants and calls :func:`set_actor` when they differ, so the Python decision stays the
    authority. Outside a transaction nothing is set and ``preset`` is None.

    ``fetchrow`` runs the query instead of ``conn.fetchrow`` (the statement that begins the session's transaction,
    see actions/call.py; the settings are then set inside it). Given ``grants_probe`` (a list, with ``has_grants``
    False), the query also tells whether the grants table exists and appends that to the list whenever the query ran;
    the caller must run it again with ``has_grants=True`` when it does.
    """
    if action not in GRANTABLE_ACTIONS:
        return None
    wanted = table_id if table_id not in (None, "") else table_name
    if wanted in (None, ""):
        return None
    key: Any = as_uuid(wanted)
    if key is not None:
        match = "t.id = $1"
    elif isinstance(wanted, str):
        key, match = wanted.strip(), "t.title = $1"
    else:
        return None
    mine = _roles(roles)
    preset = fetchrow is not None or conn.is_in_transaction()
    grants = qualified_grants(schema)
    selects = [
        "t.id",
        "t.title",
        f"""ARRAY(SELECT ROW(f.title, f.uidt, f.required, f."unique", f.options, f."precision", f.scale)
                  FROM {qualified_name(schema, FIELDS_TABLE)} f WHERE f.table_id = t.id
                  ORDER BY f.position, f.title) AS fields""",
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
        params += actor_settings(emp_no, all_rows=False)[:2]
        n = len(params)
        selects += [
            f"set_config('{EMP_NO_SETTING}', CASE WHEN {own} THEN ${n - 1}::text ELSE '' END, true) AS emp_no",
            f"set_config('{EMP_NO_INT_SETTING}', CASE WHEN {own} THEN ${n}::text ELSE '' END, true) AS emp_no_int",
            f"set_config('{ALL_ROWS_SETTING}', CASE WHEN {own} THEN 'off' ELSE 'on' END, true) AS all_rows",
        ]
    elif has_grants:
        lateral = ""  # nothing to set: the lateral decision is not needed
    if grants_probe is not None and not has_grants:
        params.append(qualified_grants(schema))
        selects.append(f"to_regclass(${len(params)}) IS NOT NULL AS grants_exist")
    sql = f"SELECT {', '.join(selects)} FROM {qualified_name(schema, TABLES_TABLE)} t{lateral} WHERE {match}"
    row = await (conn.fetchrow if fetchrow is None else fetchrow)(sql, *params)
    if grants_probe is not None and not has_grants:
        if row is None:  # the table was not found; what the grants table does is for the step-by-step path
            return None
        grants_probe.append(bool(row["grants_exist"]))
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
    return table, access, ((row["emp_no"], row["emp_no_int"], row["all_rows"]) if preset else None)


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
    if not await has_grants_table(conn, schema):
        return {}
    rows = await conn.fetch(
        f"""SELECT t.title, g.role, g.ops, g.row_scope, g.owner_field
            FROM {qualified_grants(schema)} g JOIN {qualified_name(schema, TABLES_TABLE)} t ON t.id = g.table_id"""
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


#: The given relations of a schema and every view or materialized view built on them, directly or through other
#: views (a view's rewrite rule depends on each relation its query reads).
_WITH_DEPENDENT_VIEWS = """
WITH RECURSIVE found(oid) AS (
    SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relname = ANY($2::text[])
    UNION
    SELECT r.ev_class FROM found
      JOIN pg_depend d ON d.refobjid = found.oid AND d.refclassid = 'pg_class'::regclass
                      AND d.classid = 'pg_rewrite'::regclass
      JOIN pg_rewrite r ON r.oid = d.objid
     WHERE r.ev_class <> found.oid
)
SELECT c.relname FROM found JOIN pg_class c ON c.oid = found.oid
  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1"""


async def sql_forbidden_tables(conn: asyncpg.Connection, schema: str, roles: Sequence[str]) -> frozenset[str]:
    """:func:`own_scoped_tables` plus the tables on which the actor is refused any row action (the SQL channel can
    do every one of them), every view built on those (a view reads its tables with its owner's rights, so a view
    over a limited table would open it again), plus the skill's own tables (metadata, grants, confirm tokens)."""
    decisions = await _table_decisions(conn, schema, roles)
    limited = {title for title, by_action in decisions.items() if any(d != _ALL for d in by_action.values())}
    if limited:
        limited.update(row["relname"] for row in await conn.fetch(_WITH_DEPENDENT_VIEWS, schema, sorted(limited)))
    return frozenset({*limited, *META_TABLES, GRANTS_TABLE, TOKENS_TABLE})
