"""The run log: one row per real run, written behind the response in batches (never on the run's path)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from typing import TYPE_CHECKING, Any

from .database import Database
from .tables import runs

if TYPE_CHECKING:
    from ..invoke.run import Run

log = logging.getLogger("skillyard.runlog")
BATCH = 200
FLUSH_AFTER = 1.0


class RunLog:
    """Buffers run records; a background task flushes them when a batch fills or a second passes.

    Records are kept only where stored data lives: a configured database or an embedded one that already
    exists. A run never opens the database just to be logged. Inputs and configs are never recorded.
    """

    def __init__(self, database: Database) -> None:
        self._db = database
        self._buffer: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0

    def add(self, run: Run, envelope: dict[str, Any]) -> None:
        if not self._db.exists:
            return
        self._buffer.append(
            {
                "skill": run.skill.name,
                "role_id": str(run.context.get("role_id") or ""),
                "session_id": str(run.context.get("session_id") or ""),
                "ok": bool(envelope.get("ok")),
                "error_type": envelope.get("error_type") if not envelope.get("ok") else None,
                "exception_type": envelope.get("exception_type"),
                "timed_out": bool(envelope.get("timed_out")),
                "duration_ms": (time.time() - run.started) * 1000.0,
                "started_at": dt.datetime.fromtimestamp(run.started, tz=dt.UTC),
            }
        )
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        deadline = time.monotonic() + FLUSH_AFTER
        while len(self._buffer) < BATCH and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await self.flush()

    async def flush(self) -> None:
        """Write every buffered record now."""
        while self._buffer:
            batch, self._buffer = self._buffer[:BATCH], self._buffer[BATCH:]
            try:
                sessions = await self._db.session_factory()
                async with sessions() as session, session.begin():
                    await session.execute(runs.insert(), batch)
            except Exception as exc:  # the log must never break runs
                self.dropped += len(batch)
                log.warning("could not write %d run records: %s", len(batch), exc)

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.flush()
