"""One PostgreSQL advisory lock per agent session while a turn runs: a second message meanwhile is answered 409
(from whichever process gets it), so no two processes ever run one node. The lock is held on a connection of its
own for the turn; a process that dies drops its connection and so its locks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sqlalchemy import text

from ..storage.database import Database
from .errors import ApiError

#: The first key of the two-key advisory lock (the second is the session's hash): the service's own lock class.
LOCK_CLASS = 0x5E57E  # "serve"
_TRY = text("SELECT pg_try_advisory_lock(:c, hashtext(:s))")
_UNLOCK = text("SELECT pg_advisory_unlock(:c, hashtext(:s))")
RETRY_AFTER_S = 2
WAIT_POLL_S = 0.5


class SessionBusy(Exception):
    """A turn of this session runs (here or in another process)."""


class TurnLocks:
    def __init__(self, database: Database) -> None:
        self.database = database

    @contextlib.asynccontextmanager
    async def hold(self, session_id: str, *, wait_s: float = 0.0) -> AsyncIterator[None]:
        """Hold the session's lock for the block; :class:`SessionBusy` when it stays taken for ``wait_s``."""
        engine = await self.database.engine()
        async with engine.connect() as conn:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait_s
            while not (await conn.execute(_TRY, {"c": LOCK_CLASS, "s": session_id})).scalar_one():
                await conn.rollback()
                if loop.time() >= deadline:
                    raise SessionBusy(session_id)
                await asyncio.sleep(WAIT_POLL_S)
            await conn.commit()  # a session-level lock: it outlives the transaction that took it
            try:
                yield
            finally:
                with contextlib.suppress(Exception):  # a broken connection released it already
                    await conn.execute(_UNLOCK, {"c": LOCK_CLASS, "s": session_id})
                    await conn.commit()

    @contextlib.asynccontextmanager
    async def turn(self, session_id: str) -> AsyncIterator[None]:
        """The lock for a request's turn: 409 with Retry-After when another turn of the session runs."""
        try:
            async with self.hold(session_id):
                yield
        except SessionBusy:
            raise ApiError(
                409,
                "busy",
                f"a turn of session {session_id!r} is running",
                f"wait for it to end (GET …/sessions/{session_id}/stream follows it), then send again",
                {"Retry-After": str(RETRY_AFTER_S)},
            ) from None
