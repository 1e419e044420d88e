"""The database a SkillYard uses: opened lazily, migrated on first open, shared by every run of the process."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from ..errors import StorageError
from .embedded import embedded_exists, start_embedded
from .migrate import upgrade

EXISTS_RECHECK = 5.0


def to_async_url(url: str) -> str:
    """Accept ``postgresql://`` / ``postgres://`` URLs and use the asyncpg driver."""
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    raise StorageError(
        f"SKILLYARD_DATABASE_URL must be a PostgreSQL URL (postgresql://user:pass@host/db), got {url.split(':')[0]}://…"
    )


class Database:
    """Engine and session factory, created on first use; migrations run once when first opened."""

    def __init__(self, url: str | None, pgdata: Path, embedded_memory: int | None = None) -> None:
        self._url = url
        self._pgdata = pgdata
        self._embedded_memory = embedded_memory
        self._engine: AsyncEngine | None = None
        self._sessions: async_sessionmaker[AsyncSession] | None = None
        self._lock = asyncio.Lock()
        self._exists = False
        self._exists_checked_until = 0.0

    @property
    def is_open(self) -> bool:
        return self._engine is not None

    @property
    def exists(self) -> bool:
        """A database is configured or the embedded one was initialised, so stored rows may exist.

        Checked on every run, so a negative answer is remembered for a few seconds instead of a stat per run.
        """
        if self._url is not None or self._engine is not None:
            return True
        now = time.monotonic()
        if now >= self._exists_checked_until:
            self._exists = embedded_exists(self._pgdata)
            self._exists_checked_until = now + (3600.0 if self._exists else EXISTS_RECHECK)
        return self._exists

    async def engine(self) -> AsyncEngine:
        """The engine, starting the embedded server and running migrations on first call."""
        if self._engine is not None:
            return self._engine
        async with self._lock:
            if self._engine is None:
                url = self._url or str(await asyncio.to_thread(start_embedded, self._pgdata, self._embedded_memory))
                engine = create_async_engine(to_async_url(url), pool_pre_ping=False)
                try:
                    await upgrade(engine)
                except OSError as exc:
                    await engine.dispose()
                    raise StorageError(
                        f"cannot reach PostgreSQL ({exc}); check SKILLYARD_DATABASE_URL or unset it to use "
                        "the embedded server"
                    ) from exc
                self._sessions = async_sessionmaker(engine, expire_on_commit=False)
                self._engine = engine
        return self._engine

    async def url(self) -> str:
        """The URL of the database in use, password included (the embedded server starts if it must)."""
        engine = await self.engine()
        return engine.url.render_as_string(hide_password=False)

    async def session_factory(self) -> async_sessionmaker[AsyncSession]:
        await self.engine()
        assert self._sessions is not None
        return self._sessions

    async def session(self) -> AsyncSession:
        """A new session (the caller closes it)."""
        return (await self.session_factory())()

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None
            self._sessions = None
