"""Alembic migrations for the platform tables, run programmatically when the database is first opened."""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def _upgrade(connection: Connection) -> None:
    command.upgrade(alembic_config(connection), "head")


_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
_migrated: set[str] = set()


async def upgrade(engine: AsyncEngine) -> None:
    """Bring the ``skillyard`` schema to the newest revision, once per database per process.

    Alembic's ``context`` is process-global, so runs in one process are serialised by a lock; across processes
    the migration environment takes a PostgreSQL advisory lock.
    """
    key = engine.url.render_as_string(hide_password=False)
    lock = _locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
    async with lock:
        if key in _migrated:
            return
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade)
        _migrated.add(key)
