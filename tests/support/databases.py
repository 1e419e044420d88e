"""``empty_database``: a brand-new database of its own for a test that must see every row of the platform's tables
(key rotation re-encrypts every stored secret; the session's shared database holds other tests' rows, some under
keys of their own)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest


@pytest.fixture
async def empty_database(db_env: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """A new, empty database on the session's PostgreSQL server; SKILLYARD_DATABASE_URL points at it (dropped after)."""
    import asyncpg
    from sqlalchemy.engine import make_url

    from support.datatable import asyncpg_dsn

    name = "empty_" + uuid.uuid4().hex[:12]
    admin = await asyncpg.connect(asyncpg_dsn(db_env))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = make_url(db_env).set(database=name).render_as_string(hide_password=False)
        monkeypatch.setenv("SKILLYARD_DATABASE_URL", url)
        yield url
    finally:
        with contextlib.suppress(Exception):
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def secret_rows(database_url: str) -> dict[tuple[str, str, str], str]:
    """The stored ciphertext of every secret config, by (role_id, skill, key), read with SQL."""
    import asyncpg

    from support.datatable import asyncpg_dsn

    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        rows = await conn.fetch("SELECT role_id, skill, key, value FROM skillyard.skill_configs WHERE secret")
    finally:
        await conn.close()
    return {(r["role_id"], r["skill"], r["key"]): r["value"] for r in rows}
