"""The agent session's turn lock, as the service holds it: the runtime's own lock (agent/store.py, one PostgreSQL
advisory lock per session, so across processes), taken before the turn's progress is recorded so that a second
message while a turn runs is answered 409 — from whichever process gets it — and no two processes ever run one node.
The runtime's lock is re-entrant within a task, so the turn the service runs inside it does not wait for itself."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from ..agent.store import AgentStore, SessionBusy
from ..storage.database import Database
from .errors import ApiError

RETRY_AFTER_S = 2

__all__ = ["RETRY_AFTER_S", "SessionBusy", "TurnLocks"]


class TurnLocks:
    def __init__(self, database: Database) -> None:
        self.store = AgentStore(database)

    def hold(self, session_id: str, *, wait_s: float = 0.0) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold the session's lock for the block; :class:`SessionBusy` when it stays taken for ``wait_s``."""
        return self.store.lock(session_id, wait=wait_s if wait_s > 0 else False)

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
