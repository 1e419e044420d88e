"""The SQL channel's per-organisation role (spec §7.6): ``SET LOCAL ROLE <schema>_sql`` for every statement.

A NOLOGIN role per organisation (created on first use by :func:`org_role`) holds privileges on its own schema only.
This is safe because the guard refuses SET/RESET statements and ``set_config``, so the statement cannot switch back.
The platform's database user needs CREATEROLE (or to be a superuser) for this; without it :func:`org_role` returns
None and the channel runs on the parser guard alone, which every result says (``isolation="guard-only"`` and a note).

Row-level security of own-scoped tables is enforced by their FORCEd policies, which apply to the org role as well.

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

import hashlib

import asyncpg

from ..store.names import MAX_NAME_BYTES, META_PREFIX, ROLE_LOCK_CLASS, SCHEMA_PREFIX, is_org_schema
from .errors import SqlChannelError

__all__ = ["org_role", "quote_ident", "role_name"]


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def role_name(schema: str) -> str:
    """``<schema>_sql``; when that exceeds PostgreSQL's 63 bytes, a shortened name with a hash of the schema."""
    name = f"{schema}_sql"
    if len(name.encode()) <= MAX_NAME_BYTES:
        return name
    digest = hashlib.sha256(schema.encode()).hexdigest()[:12]
    return f"{schema[:46]}_{digest}_sql"


#: One query that says whether the role is usable as it is: exists, the connected user may SET ROLE to it and
#: inherits it (PostgreSQL 16+ separates the two), it has USAGE+CREATE on the schema, DML on every table of the
#: schema it does not own, and nothing on the store's metadata tables.
_ROLE_STATE = """
SELECT r.oid IS NOT NULL AS exists,
       (SELECT rolsuper OR rolcreaterole FROM pg_catalog.pg_roles WHERE rolname = current_user) AS can_create,
       CASE WHEN r.oid IS NULL THEN false ELSE
         pg_catalog.pg_has_role(current_user, r.oid, $3) AND pg_catalog.pg_has_role(current_user, r.oid, 'USAGE')
         AND pg_catalog.has_schema_privilege(r.oid, n.oid, 'USAGE, CREATE')
         AND NOT EXISTS (
           SELECT 1 FROM pg_catalog.pg_class c
            WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND c.relowner <> r.oid
              AND (starts_with(c.relname, $4)
                   = pg_catalog.has_table_privilege(r.oid, c.oid, 'SELECT, INSERT, UPDATE, DELETE')))
       END AS ready
  FROM (SELECT $1::text AS rolname) want
  LEFT JOIN pg_catalog.pg_roles r ON r.rolname = want.rolname
  LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = $2
"""


async def org_role(conn: asyncpg.Connection, schema: str) -> str | None:
    """Ensure the NOLOGIN role ``<schema>_sql`` and its privileges; return its name, or None without CREATEROLE.

    The role gets USAGE and CREATE on ``schema``, SELECT/INSERT/UPDATE/DELETE on its tables and views (and, by
    default privileges, on those the platform user creates later), USAGE/SELECT on its sequences, and nothing on
    the skill's own tables (names starting with ``META_PREFIX``). The connected user is granted membership (SET and
    INHERIT), so it can switch to the role and keeps owner rights on what the role creates. Idempotent and cheap when
    all is in place (one catalog query); setup is serialised with an advisory lock. The schema must already exist.
    """
    _check_schema(schema)
    role = role_name(schema)
    set_option = "SET" if conn.get_server_version().major >= 16 else "MEMBER"
    state = await conn.fetchrow(_ROLE_STATE, role, schema, set_option, META_PREFIX)
    if state is None:  # pragma: no cover - the query always returns one row
        raise SqlChannelError("the role check returned nothing", error_type="config", code="role")
    if state["ready"]:
        return role
    if not state["can_create"] and not state["exists"]:
        return None
    # Without CREATEROLE but with an existing role (made by an administrator): try to finish its setup.
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_catalog.pg_advisory_xact_lock($1, hashtext($2))", ROLE_LOCK_CLASS, role)
            await _set_up_role(conn, schema, role)
    except asyncpg.InsufficientPrivilegeError:
        if not state["can_create"]:
            return None
        raise SqlChannelError(
            f"could not set up the SQL channel's role {role}: the platform's database user needs CREATEROLE and "
            f"must own schema {schema}",
            error_type="config",
            code="role",
            sqlstate="42501",
        ) from None
    except asyncpg.PostgresError as exc:
        raise SqlChannelError(
            f"could not set up the SQL channel's role {role}: {exc}",
            error_type="config",
            code="role",
            sqlstate=exc.sqlstate,
        ) from None
    return role


async def _set_up_role(conn: asyncpg.Connection, schema: str, role: str) -> None:
    r, s = quote_ident(role), quote_ident(schema)
    if await conn.fetchval("SELECT to_regnamespace($1) IS NULL", s):
        raise SqlChannelError(
            f"schema {schema} does not exist yet: create the organisation's schema first",
            error_type="config",
            code="schema_missing",
        )
    if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)", role):
        await conn.execute(f"CREATE ROLE {r} NOLOGIN NOINHERIT")
    if conn.get_server_version().major >= 16:
        await conn.execute(f"GRANT {r} TO CURRENT_USER WITH INHERIT TRUE, SET TRUE")
    else:  # pragma: no cover - the test server is PostgreSQL 16
        await conn.execute(f"GRANT {r} TO CURRENT_USER")
    await conn.execute(f"GRANT USAGE, CREATE ON SCHEMA {s} TO {r}")
    await conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {r}")
    await conn.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {s} TO {r}")
    await conn.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {s} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {r}")
    await conn.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {s} GRANT USAGE, SELECT ON SEQUENCES TO {r}")
    metadata = await conn.fetch(
        """SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND starts_with(c.relname, $2)
              AND c.relowner <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $3)""",
        schema,
        META_PREFIX,
        role,
    )
    for row in metadata:
        await conn.execute(f"REVOKE ALL ON TABLE {s}.{quote_ident(row['relname'])} FROM {r}")


def _check_schema(schema: str) -> None:
    if not is_org_schema(schema):
        raise SqlChannelError(
            f"schema must be an organisation schema ({SCHEMA_PREFIX}…), not {schema!r}",
            error_type="config",
            code="schema",
        )
