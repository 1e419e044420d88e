"""Row-level security of the datatable skill (spec §7.2): the ``own`` policy of a table and the actor settings.

* PostgreSQL row-level security backs the injected filters of row scope ``own`` (access.py): every table with an
  ``own`` grant gets ``ENABLE`` and ``FORCE ROW LEVEL SECURITY`` and the policy ``OWN_POLICY`` (store/names.py)
  ``FOR ALL USING (...) WITH CHECK (...)`` with the condition ``current_setting('skillyard.all_rows', true) = 'on'
  OR owner::text = NULLIF(current_setting('skillyard.emp_no', true), '')`` (:func:`sync_policy`, called by the grant
  functions of grants.py). An 整数 owner field compares as a number instead, ``owner =
  NULLIF(current_setting('skillyard.emp_no_int', true), '')::bigint``: the structured actions stamp and filter the
  employee number converted as a write converts it (``"007"`` is stored as 7), so the policy must match that value,
  not the text as given. :func:`set_actor` sets the three settings (:func:`actor_settings`) with ``SET LOCAL``
  semantics for the current transaction. No setting (or an empty one) matches no row. The handler calls
  ``set_actor(conn, emp_no, all_rows=(access.row_scope == "all"))`` before each action on a table; for the SQL channel
  ``all_rows`` must be False when :func:`~.access.own_scoped_tables` is not empty (then even a view over
  an own-scoped table made earlier by someone else only shows the actor's rows); structure actions (owner/admin) use
  ``all_rows=True``.
* What FORCE covers: without it the table's *owner* bypasses its policies; with it the owner is filtered too. It
  does not cover superusers or roles with BYPASSRLS — PostgreSQL always lets them through. When the platform
  connects as a superuser, the injected filters are the only guard on the structured actions; the SQL channel runs
  under the org role (no superuser, no BYPASSRLS), where the policy always applies. Policies do not affect
  constraint checks (a UNIQUE owner-independent value still collides with rows of other owners) or DDL.
* Revoking the last ``own`` grant of a table drops the policy and turns row-level security off again. Renaming the
  owner field keeps the policy working (PostgreSQL tracks the column). A policy made before the 整数 form existed
  compares the text as given; granting again (any own grant of the table) rewrites it.

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

import asyncpg

from ..fields.errors import FieldError
from ..fields.numbers import to_int
from ..store.names import OWN_POLICY
from ..store.schema import TableInfo, quote_ident
from .errors import PermissionDenied

__all__ = [
    "ALL_ROWS_SETTING",
    "EMP_NO_INT_SETTING",
    "EMP_NO_SETTING",
    "actor_settings",
    "policy_column",
    "set_actor",
    "sync_policy",
]

EMP_NO_SETTING = "skillyard.emp_no"
EMP_NO_INT_SETTING = "skillyard.emp_no_int"
ALL_ROWS_SETTING = "skillyard.all_rows"


def actor_settings(emp_no: str | None, *, all_rows: bool) -> tuple[str, str, str]:
    """The values of (``skillyard.emp_no``, ``skillyard.emp_no_int``, ``skillyard.all_rows``) for an actor: the
    employee number stripped, the same as the number an 整数 field stores for it (the write path's own converter;
    empty when it is not a whole number), and ``on`` / ``off``."""
    text = "" if emp_no is None else str(emp_no).strip()
    try:
        number = str(to_int(text)) if text else ""
    except FieldError:
        number = ""
    return text, number, "on" if all_rows else "off"


async def policy_column(conn: asyncpg.Connection, table: TableInfo) -> str | None:
    """The column the table's row-level security policy compares with the actor, or None without a policy."""
    value = await conn.fetchval(
        """SELECT a.attname FROM pg_policy p
           JOIN pg_depend d ON d.classid = 'pg_policy'::regclass AND d.objid = p.oid
                           AND d.refclassid = 'pg_class'::regclass AND d.refobjsubid > 0
           JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
           WHERE p.polrelid = $1::regclass AND p.polname = $2 LIMIT 1""",
        table.qualified,
        OWN_POLICY,
    )
    return None if value is None else str(value)


def _owner_condition(owner_field: str, owner_uidt: str | None) -> str:
    column = quote_ident(owner_field)
    if owner_uidt == "整数":
        return f"{column} = NULLIF(current_setting('{EMP_NO_INT_SETTING}', true), '')::bigint"
    return f"{column}::text = NULLIF(current_setting('{EMP_NO_SETTING}', true), '')"


async def sync_policy(
    conn: asyncpg.Connection, table: TableInfo, owner_field: str | None, owner_uidt: str | None = None
) -> None:
    """Install (owner_field given, with its type ``owner_uidt``) or remove (None) the table's row-level security
    policy."""
    await conn.execute(f"DROP POLICY IF EXISTS {quote_ident(OWN_POLICY)} ON {table.qualified}")
    if owner_field is None:
        await conn.execute(f"ALTER TABLE {table.qualified} NO FORCE ROW LEVEL SECURITY")
        await conn.execute(f"ALTER TABLE {table.qualified} DISABLE ROW LEVEL SECURITY")
        return
    condition = f"(current_setting('{ALL_ROWS_SETTING}', true) = 'on' OR {_owner_condition(owner_field, owner_uidt)})"
    await conn.execute(
        f"CREATE POLICY {quote_ident(OWN_POLICY)} ON {table.qualified} AS PERMISSIVE FOR ALL "
        f"USING {condition} WITH CHECK {condition}"
    )
    await conn.execute(f"ALTER TABLE {table.qualified} ENABLE ROW LEVEL SECURITY")
    await conn.execute(f"ALTER TABLE {table.qualified} FORCE ROW LEVEL SECURITY")


async def set_actor(conn: asyncpg.Connection, emp_no: str | None, *, all_rows: bool = False) -> None:
    """Set the settings the row-level security policy reads, for the current transaction only (SET LOCAL).

    ``emp_no`` None (or empty) leaves the actor unset: own-scoped tables then show no row unless ``all_rows``.
    Must run inside a transaction; outside one it would not last past the statement, so it is refused.
    """
    if not conn.is_in_transaction():
        raise PermissionDenied("set_actor must run inside a transaction (it uses SET LOCAL semantics)")
    text, number, rows = actor_settings(emp_no, all_rows=all_rows)
    await conn.execute(
        "SELECT set_config($1, $2, true), set_config($3, $4, true), set_config($5, $6, true)",
        EMP_NO_SETTING,
        text,
        EMP_NO_INT_SETTING,
        number,
        ALL_ROWS_SETTING,
        rows,
    )
