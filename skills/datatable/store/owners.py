"""Which organisation owns which schema: the registry every action, the SQL channel and the admin commands read.

The bare rule of §7.1 (``org_data_`` + the id's letters and digits) merged tenants: ``华为1`` and ``腾讯1`` both became
``org_data_1``, ``ACME`` and ``a-c-m-e`` landed in acme's schema. Now each raw organisation id is recorded with the
one schema it owns (:func:`~.names.schema_name` picks it), and no other id is ever given that schema. A schema made
before the registry, without an owner, is claimed only by the id equal to its name's key (``acme`` for
``org_data_acme``); another id that the old rule mapped there is refused until an administrator assigns the schema
(``skillyard datatable assign-schema``). See docs/decisions.md.

Ownership never changes once recorded, so each process keeps what it has resolved.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from .names import (
    DIGEST_LENGTHS,
    OWNERS_TABLE,
    REGISTRY_SCHEMA,
    SCHEMA_LOCK_CLASS,
    is_org_schema,
    legacy_schema_name,
    org_key,
    schema_name,
)
from .schema import StoreError, quote_ident, raw_connection

__all__ = ["assign_schema", "resolve_schema", "schema_of_session", "unowned_schemas"]

_OWNERS = f"{quote_ident(REGISTRY_SCHEMA)}.{quote_ident(OWNERS_TABLE)}"
_resolved: dict[str, str] = {}  # raw organisation id -> its schema, in this process


def _org_text(org_id: Any) -> str:
    """The organisation id as its text; an id with no letter, digit or other character is refused."""
    text = org_id if isinstance(org_id, str) else ("" if org_id is None else str(org_id))
    if not text.strip():
        raise StoreError(
            f"no organisation id (got {org_id!r}); the datatable skill needs runtime_context org_id to pick the "
            "organisation's schema — run it from an organisation's conversation or configure org_id",
            error_type="config",
            non_retriable=True,
            need_param="org",
        )
    return text


async def ensure_registry(conn: asyncpg.Connection) -> None:
    """Create the registry when missing (idempotent, safe under concurrency)."""
    if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", _OWNERS):
        return
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", SCHEMA_LOCK_CLASS, REGISTRY_SCHEMA)
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(REGISTRY_SCHEMA)}")
        await conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {_OWNERS} (
                schema_name text PRIMARY KEY,
                org_id text NOT NULL UNIQUE,
                claimed_at timestamptz NOT NULL DEFAULT now()
            )"""
        )


async def _owner_of(conn: asyncpg.Connection, schema: str) -> str | None:
    owner: str | None = await conn.fetchval(f"SELECT org_id FROM {_OWNERS} WHERE schema_name = $1", schema)
    return owner


async def _exists(conn: asyncpg.Connection, schema: str) -> bool:
    return bool(await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", quote_ident(schema)))


async def resolve_schema(conn: asyncpg.Connection, org_id: Any) -> str:
    """The schema ``org_id`` owns, recorded on its first use; a StoreError with the fix when an ownerless schema
    from before the registry may hold its tables."""
    raw = _org_text(org_id)
    known = _resolved.get(raw)
    if known is not None:
        return known
    await ensure_registry(conn)
    owned: str | None = await conn.fetchval(f"SELECT schema_name FROM {_OWNERS} WHERE org_id = $1", raw)
    if owned is None:
        owned = await _claim(conn, raw)
    _resolved[raw] = owned
    return owned


async def schema_of_session(session: Any, org_id: Any) -> str:
    """:func:`resolve_schema` on the platform's session; a first claim is committed at once, so an action that
    fails and rolls back afterwards does not take the organisation's ownership record with it."""
    raw = _org_text(org_id)
    known = _resolved.get(raw)
    if known is not None:
        return known
    try:
        schema = await resolve_schema(await raw_connection(session), raw)
    except BaseException:
        await session.rollback()
        raise
    await session.commit()
    return schema


async def _claim(conn: asyncpg.Connection, raw: str) -> str:
    legacy = legacy_schema_name(raw)
    if legacy is not None and legacy != schema_name(raw) and await _unowned(conn, legacy):
        raise StoreError(
            f"the schema {legacy} was made before schemas had owners, and the organisation id {raw!r} used to map "
            f"there; an administrator says whose it is: skillyard datatable assign-schema --org ORG --schema {legacy} "
            f"(with --org {raw!r} if it holds this organisation's tables, or with the id it belongs to, e.g. "
            f"--org {org_key(raw)!r})",
            error_type="config",
            non_retriable=True,
        )
    for digest in DIGEST_LENGTHS:  # a longer hash only after a collision of the shorter one
        name = schema_name(raw, digest)
        await conn.execute(
            f"INSERT INTO {_OWNERS} (schema_name, org_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", name, raw
        )
        if await _owner_of(conn, name) == raw:
            return name
        mine: str | None = await conn.fetchval(f"SELECT schema_name FROM {_OWNERS} WHERE org_id = $1", raw)
        if mine is not None:  # another process claimed for this id meanwhile
            return mine
    raise StoreError(f"no free schema name for the organisation id {raw!r}; report this", error_type="config")


async def _unowned(conn: asyncpg.Connection, schema: str) -> bool:
    return await _exists(conn, schema) and await _owner_of(conn, schema) is None


async def assign_schema(conn: asyncpg.Connection, org_id: Any, schema: str) -> None:
    """Record ``org_id`` as the owner of the existing, ownerless ``schema`` (an administrator's decision)."""
    raw = _org_text(org_id)
    if not is_org_schema(schema):
        raise StoreError(f"{schema!r} is not an organisation schema name (org_data_…)", need_param="schema")
    await ensure_registry(conn)
    if not await _exists(conn, schema):
        raise StoreError(f"there is no schema {schema}; check the name with skillyard doctor", need_param="schema")
    owner = await _owner_of(conn, schema)
    if owner is not None:
        raise StoreError(
            f"{schema} already belongs to the organisation {owner!r}; nothing changed", need_param="schema"
        )
    owned = await conn.fetchval(f"SELECT schema_name FROM {_OWNERS} WHERE org_id = $1", raw)
    if owned is not None:
        raise StoreError(
            f"the organisation {raw!r} already owns {owned}; an organisation owns one schema", need_param="org"
        )
    await conn.execute(f"INSERT INTO {_OWNERS} (schema_name, org_id) VALUES ($1, $2)", schema, raw)
    _resolved.pop(raw, None)


async def unowned_schemas(conn: asyncpg.Connection) -> list[str]:
    """Organisation schemas with no owner recorded (made before the registry), for ``skillyard doctor``."""
    await ensure_registry(conn)
    rows = await conn.fetch(
        f"""SELECT n.nspname FROM pg_catalog.pg_namespace n
             WHERE starts_with(n.nspname, 'org_data_')
               AND NOT EXISTS (SELECT 1 FROM {_OWNERS} o WHERE o.schema_name = n.nspname)
             ORDER BY 1"""
    )
    return [r["nspname"] for r in rows if is_org_schema(r["nspname"])]
