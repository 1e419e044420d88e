"""PostgreSQL ``LISTEN/NOTIFY`` between serve processes: a config changed (ConfigStore announces it), the catalog was
rescanned, a turn emitted progress events. Each process listens on one connection of its own; what it hears drops
its cached reads or wakes its event streams. A notification is only a hint: the state itself is in the tables."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..configs.store import CHANGED_CHANNEL
from ..credentials import masked_logger

if TYPE_CHECKING:
    from ..yard import SkillYard

log = masked_logger("skillyard.service")
CHANNEL = "skillyard_service"
RECONNECT_S = 2.0


def asyncpg_dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


class Bus:
    """This process's listening connection and what it does with each notification."""

    def __init__(self, yard: SkillYard) -> None:
        self.yard = yard
        self.origin = f"{os.getpid()}-{id(self):x}"
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._turn_waiters: dict[str, set[asyncio.Event]] = {}
        self.on_catalog: Callable[[], None] = yard.rescan

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), 10)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _listen(self) -> None:
        import asyncpg

        while True:
            try:
                conn = await asyncpg.connect(asyncpg_dsn(await self.yard.database.url()))
            except Exception as exc:  # the database may restart; try again
                log.warning("cannot listen for notifications (%s); retrying", exc.__class__.__name__)
                await asyncio.sleep(RECONNECT_S)
                continue
            try:
                await conn.add_listener(CHANNEL, self._heard)
                await conn.add_listener(CHANGED_CHANNEL, self._heard)
                self._ready.set()
                while not conn.is_closed():
                    await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    await conn.close()
            # reconnected after a loss: anything may have changed meanwhile
            self.yard.configs.invalidate()

    def _heard(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            return
        if channel == CHANGED_CHANNEL:
            self.yard.configs.invalidate(message.get("role_id"), message.get("skill"))
            return
        kind = message.get("kind")
        if kind == "catalog" and message.get("origin") != self.origin:
            try:
                self.on_catalog()
            except Exception:
                log.exception("rescan after another process's rescan failed")
        elif kind == "turn":
            for waiter in self._turn_waiters.get(str(message.get("session")), set()):
                waiter.set()

    async def publish(self, kind: str, **fields: Any) -> None:
        """Tell every serve process (this one too)."""
        from sqlalchemy import text

        payload = json.dumps({"kind": kind, "origin": self.origin, **fields})
        sessions = await self.yard.database.session_factory()
        async with sessions() as session, session.begin():
            await session.execute(text("SELECT pg_notify(:c, :p)"), {"c": CHANNEL, "p": payload})

    @contextlib.contextmanager
    def turn_waiter(self, session_id: str) -> Any:
        """An event set whenever a turn of ``session_id`` announces progress (in any process)."""
        event = asyncio.Event()
        self._turn_waiters.setdefault(session_id, set()).add(event)
        try:
            yield event
        finally:
            waiters = self._turn_waiters.get(session_id, set())
            waiters.discard(event)
            if not waiters:
                self._turn_waiters.pop(session_id, None)
