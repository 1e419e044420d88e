"""Row-level security of the datatable skill (spec §7.2): the ``own`` policy of a table and the actor settings.

* PostgreSQL row-level security backs the injected filters of row scope ``own`` (permissions_access.py): every table
  with an ``own`` grant gets ``ENABLE`` and ``FORCE ROW LEVEL SECURITY`` and the policy ``_dt_own`` ``FOR ALL USING
  (...) WITH CHECK (...)`` with the condition ``current_setting('skillyard.all_rows', true) = 'on' OR owner::text =
  NULLIF(current_setting('skillyard.emp_no', true), '')`` (:func:`sync_policy`, called by the grant functions of
  permissions_grants.py). :func:`set_actor` sets both settings with ``SET LOCAL`` semantics for the current
  transaction. No setting (or an empty one) matches no row. The handler calls ``set_actor(conn, emp_no,
  all_rows=(access.row_scope == "all"))`` before each action on a table; for the SQL channel ``all_rows`` must be
  False when :func:`~.permissions_access.own_scoped_tables` is not empty (then even a view over an own-scoped table
  made earlier by someone else only shows the actor's rows); structure actions (owner/admin) use ``all_rows=True``.
* What FORCE covers: without it the table's *owner* bypasses its policies; with it the owner is filtered too. It
  does not cover superusers or roles with BYPASSRLS — PostgreSQL always lets them through. When the platform
  connects as a superuser, the injected filters are the only guard on the structured actions; the SQL channel runs
  under the org role (no superuser, no BYPASSRLS), where the policy always applies. Policies do not affect
  constraint checks (a UNIQUE owner-independent value still collides with rows of other owners) or DDL.
* Revoking the last ``own`` grant of a table drops the policy and turns row-level security off again. Renaming the
  owner field keeps the policy working (PostgreSQL tracks the column).

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

import asyncpg

from .permissions_errors import PermissionDenied
from .store_schema import TableInfo, quote_ident

__all__ = ["ALL_ROWS_SETTING", "EMP_NO_SETTING", "POLICY_NAME", "set_actor", "sync_policy"]

POLICY_NAME = "_dt_own"
EMP_NO_SETTING = "skillyard.emp_no"
ALL_ROWS_SETTING = "skillyard.all_rows"


async def sync_policy(conn: asyncpg.Connection, table: TableInfo, owner_field: str | None) -> None:
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
