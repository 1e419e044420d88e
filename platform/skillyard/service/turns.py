"""Progress events of agent turns, kept in PostgreSQL while a turn runs so that an SSE stream served by any process
follows a turn run by any other.

A turn writes ``started``, one ``tool`` event each time a business tool starts (the contract's label, as
``TurnResult.events`` has them) and ``finished`` (status, reply, checkpoint). The tool events come from the
``extra_context`` hook (:mod:`.progress`): every tool call of an agent is a ``yard.run`` in the turn's task, and a
context variable names the turn being recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime as dt
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, insert, select

from ..storage.tables import service_turn_events

if TYPE_CHECKING:
    from ..storage.database import Database
    from .bus import Bus

#: Events are deleted this long after they were written (a stream reads them while the turn runs).
KEEP = dt.timedelta(hours=1)
TOOL_LABEL_FALLBACK = "正在处理"


@dataclass
class TurnRecorder:
    """The turn being recorded in this task: its session, id and the labels of the agent's tools."""

    events: TurnEvents
    session_id: str
    turn_id: str
    labels: Mapping[str, str] = field(default_factory=dict)
    finished: bool = False

    async def finish(self, status: str, reply: str | None, checkpoint: Any = None) -> None:
        """The turn's last event (once)."""
        if not self.finished:
            self.finished = True
            event = {"type": "finished", "status": status, "reply": reply, "checkpoint": checkpoint}
            await self.events.add(self.session_id, self.turn_id, "finished", event)

    async def tool_started(self, tool: str) -> None:
        label = self.labels.get(tool) or TOOL_LABEL_FALLBACK
        await self.events.add(self.session_id, self.turn_id, "tool", {"type": "tool", "tool": tool, "label": label})


CURRENT: contextvars.ContextVar[TurnRecorder | None] = contextvars.ContextVar("skillyard_turn", default=None)


def tool_labels(agent: Any) -> dict[str, str]:
    """Each business tool's progress label from the agent's contracts (the first contract naming it wins)."""
    labels: dict[str, str] = {}
    for skill in agent.loaded.skills.values():
        for name, tool in skill.contract.tools.items():
            if tool.label and name not in labels:
                labels[name] = tool.label
    return labels


class TurnEvents:
    def __init__(self, database: Database, bus: Bus) -> None:
        self.database = database
        self.bus = bus

    async def add(self, session_id: str, turn_id: str, kind: str, event: dict[str, Any]) -> int:
        sessions = await self.database.session_factory()
        async with sessions() as session, session.begin():
            new_id = await session.scalar(
                insert(service_turn_events)
                .values(session_id=session_id, turn_id=turn_id, kind=kind, event=event)
                .returning(service_turn_events.c.id)
            )
        await self.bus.publish("turn", session=session_id)
        return int(new_id or 0)

    @contextlib.asynccontextmanager
    async def recording(self, session_id: str, labels: Mapping[str, str]) -> AsyncIterator[TurnRecorder]:
        """Record a turn: ``started`` now, tool events while the block runs; the caller writes ``finished``."""
        recorder = TurnRecorder(self, session_id, uuid.uuid4().hex, labels)
        await self.add(session_id, recorder.turn_id, "started", {"type": "started"})
        token = CURRENT.set(recorder)
        try:
            yield recorder
        except BaseException as exc:
            with contextlib.suppress(Exception):
                reply = f"the turn failed ({exc.__class__.__name__})"
                await asyncio.shield(recorder.finish("ERROR", reply))
            raise
        finally:
            CURRENT.reset(token)

    async def after(self, session_id: str, after_id: int, limit: int = 200) -> list[dict[str, Any]]:
        sessions = await self.database.session_factory()
        async with sessions() as session:
            rows = (
                await session.execute(
                    select(service_turn_events)
                    .where(service_turn_events.c.session_id == session_id, service_turn_events.c.id > after_id)
                    .order_by(service_turn_events.c.id)
                    .limit(limit)
                )
            ).all()
        return [{"id": r.id, "turn_id": r.turn_id, "kind": r.kind, "event": r.event} for r in rows]

    async def start_of_open_turn(self, session_id: str) -> int:
        """The id just before the newest turn of the session when it has not finished, else the newest id: a
        stream starts there (a running turn from its start, else the next turn)."""
        sessions = await self.database.session_factory()
        async with sessions() as session:
            last = (
                await session.execute(
                    select(service_turn_events.c.id, service_turn_events.c.turn_id, service_turn_events.c.kind)
                    .where(service_turn_events.c.session_id == session_id)
                    .order_by(service_turn_events.c.id.desc())
                    .limit(1)
                )
            ).first()
            if last is None:
                return 0
            if last.kind == "finished":
                return int(last.id)
            first = await session.scalar(
                select(func.min(service_turn_events.c.id)).where(service_turn_events.c.turn_id == last.turn_id)
            )
        return int(first or 1) - 1

    async def prune(self) -> None:
        sessions = await self.database.session_factory()
        async with sessions() as session, session.begin():
            cutoff = dt.datetime.now(dt.UTC) - KEEP
            await session.execute(delete(service_turn_events).where(service_turn_events.c.created_at < cutoff))
