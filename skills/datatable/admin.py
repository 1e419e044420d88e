"""Administration of the datatable skill from Python: grants per table and role, and the SQL-channel role check.

The same calls back the CLI (``skillyard datatable grant | grants | revoke``, see :mod:`.plugin`)::

    async with SkillYard() as yard:
        await grant(yard, org="acme", table="客户", role="sales", ops="read", row_scope="own", owner_field="工号")
        print(await list_grants(yard, org="acme"))
        await revoke(yard, org="acme", table="客户", role="sales")

Each call opens one session of the platform's database (``yard.database.session()``), works on its asyncpg
connection and commits on success; on any error it rolls back, so a failed grant leaves nothing behind (not even
the organisation's schema it may have started to create). Bad input raises :class:`~.store.schema.StoreError` (a
:class:`~.permissions.errors.PermissionDenied` for grant settings) whose message says what was wrong and how to fix
it and whose ``need_param`` names the parameter: ``org``, ``table_id``, ``role``, ``ops``, ``row_scope`` or
``owner_field``.

``yard`` is a :class:`skillyard.SkillYard`; nothing here uses more of it than ``yard.database.session()``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from .permissions import grants as permissions_grants
from .store import owners
from .store.names import org_key
from .store.owners import resolve_schema
from .store.schema import StoreError, quote_ident, raw_connection

__all__ = ["CREATEROLE_WARNING", "grant", "list_grants", "revoke", "sql_role_check"]

T = TypeVar("T")

#: What ``skillyard doctor`` says when the database user cannot create the SQL channel's per-organisation roles.
CREATEROLE_WARNING = (
    "the SQL channel runs on the parser guard alone; grant CREATEROLE to the database user to add "
    "per-organisation roles"
)


def _org(org: Any) -> Any:
    """The organisation id; a blank one gets a message for administrators (not the skill's runtime one)."""
    if not org_key(org) and not (isinstance(org, str) and org.strip()):
        raise StoreError(
            f"org must be an organisation id (the org_id its conversations carry, e.g. acme), got {org!r}",
            need_param="org",
        )
    return org


async def _in_session(yard: Any, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
    """Run ``work(conn)`` on a new session's raw connection: commit on success, roll back on any error."""
    session = await yard.database.session()
    try:
        conn = await raw_connection(session)
        result = await work(conn)
    except BaseException:
        await session.rollback()
        raise
    else:
        await session.commit()
        return result
    finally:
        await session.close()


async def grant(
    yard: Any,
    *,
    org: Any,
    table: Any,
    role: Any,
    ops: Any,
    row_scope: str = "all",
    owner_field: str | None = None,
) -> dict[str, Any]:
    """Set (insert or replace) the grant of ``role`` on ``table`` (title or id) of organisation ``org``.

    ``ops``: action names and the shorthands ``read`` / ``write`` / ``all``, as a list or a comma-separated string
    (see :func:`.permissions.grants.parse_ops`). ``row_scope="own"`` needs ``owner_field``, an existing field of the
    table holding the owner's employee number. Returns the stored grant: ``{table_id, table, role, ops, row_scope,
    owner_field}`` with ``ops`` expanded and sorted.
    """
    _org(org)

    async def work(conn: asyncpg.Connection) -> dict[str, Any]:
        schema = await resolve_schema(conn, org)
        stored = await permissions_grants.grant(
            conn,
            schema,
            table_id_or_name=table,
            role=role,
            ops=ops,
            row_scope=row_scope,
            owner_field=owner_field,
        )
        return stored.as_dict()

    return await _in_session(yard, work)


async def list_grants(yard: Any, *, org: Any) -> list[dict[str, Any]]:
    """Every grant of organisation ``org``, ordered by table title and role (``[]`` when it has none)."""
    _org(org)

    async def work(conn: asyncpg.Connection) -> list[dict[str, Any]]:
        return [g.as_dict() for g in await permissions_grants.list_grants(conn, await resolve_schema(conn, org))]

    return await _in_session(yard, work)


async def revoke(yard: Any, *, org: Any, table: Any, role: Any) -> bool:
    """Remove the grant of ``role`` on ``table`` of organisation ``org``; True when there was one."""
    _org(org)

    async def work(conn: asyncpg.Connection) -> bool:
        schema = await resolve_schema(conn, org)
        return await permissions_grants.revoke(conn, schema, table_id_or_name=table, role=role)

    return await _in_session(yard, work)


async def assign_schema(yard: Any, *, org: Any, schema: str) -> dict[str, str]:
    """Record ``org`` as the owner of an ownerless schema made before the registry (see store/owners.py)."""
    _org(org)

    async def work(conn: asyncpg.Connection) -> dict[str, str]:
        await owners.assign_schema(conn, org, schema)
        return {"org": str(org), "schema": schema}

    return await _in_session(yard, work)


async def unowned_schema_check(conn: asyncpg.Connection) -> dict[str, Any]:
    """The doctor's check: organisation schemas no organisation owns (their tables are unreachable until assigned)."""
    unowned = await owners.unowned_schemas(conn)
    if not unowned:
        return {
            "name": "datatable.schema_owners",
            "status": "ok",
            "detail": "every organisation schema has an owner",
            "fix": None,
        }
    return {
        "name": "datatable.schema_owners",
        "status": "warn",
        "detail": f"{len(unowned)} schema(s) made before schemas had owners: {', '.join(unowned[:50])}",
        "fix": "skillyard datatable assign-schema --org ORG --schema SCHEMA for each (the organisation it belongs to)",
    }


def _role_sql(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else quote_ident(name)


async def sql_role_check(conn: asyncpg.Connection) -> dict[str, Any]:
    """The doctor check ``datatable.sql_roles``: may the connected user create the per-organisation SQL roles?

    ``ok`` with CREATEROLE or superuser, else ``warn`` (the SQL channel still works, guarded by the parser only).
    """
    row = await conn.fetchrow(
        "SELECT current_user AS who, rolcreaterole OR rolsuper AS can FROM pg_catalog.pg_roles "
        "WHERE rolname = current_user"
    )
    who = str(row["who"]) if row is not None else "current_user"
    if row is not None and row["can"]:
        return {
            "name": "datatable.sql_roles",
            "status": "ok",
            "detail": f"database user {who} can create the SQL channel's per-organisation roles",
            "fix": None,
        }
    return {
        "name": "datatable.sql_roles",
        "status": "warn",
        "detail": f"database user {who} has neither CREATEROLE nor superuser: {CREATEROLE_WARNING}",
        "fix": f"as a superuser: ALTER ROLE {_role_sql(who)} CREATEROLE; or connect as a user that has it",
    }
