"""PostgreSQL persistence of the agent runtime's state (tables of migration 0003).

Each row holds one state object as JSONB (state.py's ``to_json`` / ``from_json``). Sessions, tasks and nodes are
saved at the end of every turn and whenever a node suspends; evidence is saved the moment it changes (the
:class:`~.context.EvidenceStore` protocol), so a write registered ``STARTED`` survives a crash mid-call and is
verified when its node reopens (§14.3). A restart between suspend and resume therefore loses nothing: a new
SkillYard on the same database loads the same session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterable
from contextvars import ContextVar
from typing import Any

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.expression import bindparam

from ..errors import SkillyardError
from ..storage.database import Database
from ..storage.text import storable
from .state import Evidence, NodeState, SessionState, TaskState, from_json, to_json

_UPSERT = {
    "session": text(
        """INSERT INTO skillyard.agent_sessions (id, agent_code, state, updated_at)
           VALUES (:id, :agent_code, :state, now())
           ON CONFLICT (id) DO UPDATE SET agent_code = EXCLUDED.agent_code, state = EXCLUDED.state,
                                          updated_at = now()"""
    ).bindparams(bindparam("state", type_=JSONB)),
    "task": text(
        """INSERT INTO skillyard.agent_tasks (id, session_id, status, state, updated_at)
           VALUES (:id, :session_id, :status, :state, now())
           ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state, updated_at = now()"""
    ).bindparams(bindparam("state", type_=JSONB)),
    "node": text(
        """INSERT INTO skillyard.agent_nodes (id, task_id, status, state, updated_at)
           VALUES (:id, :task_id, :status, :state, now())
           ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state, updated_at = now()"""
    ).bindparams(bindparam("state", type_=JSONB)),
    "evidence": text(
        """INSERT INTO skillyard.agent_evidence (id, task_id, node_id, tool, status, idempotency_key, state,
                                                updated_at)
           VALUES (:id, :task_id, :node_id, :tool, :status, :idempotency_key, :state, now())
           ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state, updated_at = now()"""
    ).bindparams(bindparam("state", type_=JSONB)),
}


Row = tuple[str, dict[str, Any]]


def _session_row(state: SessionState) -> Row:
    return "session", {"id": state.id, "agent_code": state.agent_code, "state": to_json(state)}


def _task_row(task: TaskState) -> Row:
    return "task", {"id": task.id, "session_id": task.session_id, "status": task.status.value, "state": to_json(task)}


def _node_row(node: NodeState) -> Row:
    return "node", {"id": node.id, "task_id": node.task_id, "status": node.status.value, "state": to_json(node)}


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


#: How long a turn waits for another turn of its session (another process, an event's resume) to end.
LOCK_WAIT_S = 600.0
#: The session locks the current task holds: (session id, task id). A task started inside a turn (a worker) has
#: another id, so it never borrows its creator's lock.
_HELD: ContextVar[frozenset[tuple[str, int]]] = ContextVar("skillyard_agent_session_locks", default=frozenset())


class SessionBusy(SkillyardError):
    """Another turn of the session is running (in this process or another); the message says to retry."""


def lock_key(session_id: str) -> str:
    """The text whose ``hashtextextended(…, 0)`` is the session's advisory lock key."""
    return json.dumps(["agent-session", session_id])


class AgentStore:
    """Load and save sessions, tasks, nodes and evidence; also the :class:`EvidenceStore` of a NodeContext."""

    #: Its state outlives the process: a node on it may wait for an external event.
    persistent = True

    def __init__(self, database: Database) -> None:
        self.database = database

    async def _write(self, *writes: Row) -> None:
        """Upsert rows in one transaction: a turn's node, task and session are saved together or not at all."""
        async with await self.database.session() as session:
            for statement, params in writes:
                await session.execute(_UPSERT[statement], {**params, "state": storable(params["state"])})
            await session.commit()

    async def _state(self, table: str, key: str, value: str) -> list[Any]:
        async with await self.database.session() as session:
            result = await session.execute(
                text(f"SELECT state FROM skillyard.{table} WHERE {key} = :value ORDER BY updated_at"),
                {"value": value},
            )
            return [row[0] for row in result]

    @contextlib.asynccontextmanager
    async def lock(self, session_id: str, *, wait: bool | float = True) -> AsyncIterator[None]:
        """Hold the session's lock (a PostgreSQL advisory lock, so across processes) for one turn: turns of one
        session never run at once. ``wait``: True waits up to :data:`LOCK_WAIT_S`, a number up to that many
        seconds, False not at all; then :class:`SessionBusy`. Re-entrant within one task: a caller that holds the
        lock around a turn (the HTTP service, to answer 409 before it records anything) runs ``send`` inside it."""
        mine = (session_id, id(asyncio.current_task()))
        held = _HELD.get()
        if mine in held:
            yield
            return
        seconds = LOCK_WAIT_S if wait is True else float(wait)
        engine = await self.database.engine()
        async with engine.connect() as conn:
            key = {"key": lock_key(session_id)}
            if seconds > 0:
                await conn.execute(text(f"SET lock_timeout = '{max(1, int(seconds * 1000))}ms'"))
                try:
                    await conn.execute(text("SELECT pg_advisory_lock(hashtextextended(:key, 0))"), key)
                except DBAPIError as exc:  # lock_timeout: asyncpg's LockNotAvailableError, wrapped
                    raise SessionBusy(
                        f"session {session_id!r} has had a turn running for over {seconds:g} s; try again later"
                    ) from exc
            else:
                taken = await conn.scalar(text("SELECT pg_try_advisory_lock(hashtextextended(:key, 0))"), key)
                if not taken:
                    raise SessionBusy(f"session {session_id!r} has a turn running; retry when it has ended")
            token = _HELD.set(held | {mine})
            try:
                yield
            finally:
                _HELD.reset(token)
                await conn.execute(text("SELECT pg_advisory_unlock(hashtextextended(:key, 0))"), key)
                await conn.commit()

    # -- sessions, tasks, nodes ------------------------------------------------------------------------------

    async def load_session(self, session_id: str) -> SessionState | None:
        rows = await self._state("agent_sessions", "id", session_id)
        return from_json(SessionState, rows[0]) if rows else None

    async def save_session(self, state: SessionState) -> None:
        await self._write(_session_row(state))

    async def load_task(self, task_id: str) -> TaskState | None:
        rows = await self._state("agent_tasks", "id", task_id)
        return from_json(TaskState, rows[0]) if rows else None

    async def save_task(self, task: TaskState) -> None:
        await self._write(_task_row(task))

    async def load_node(self, node_id: str) -> NodeState | None:
        rows = await self._state("agent_nodes", "id", node_id)
        return from_json(NodeState, rows[0]) if rows else None

    async def save_node(self, node: NodeState) -> None:
        await self._write(_node_row(node))

    async def load_nodes(self, task_id: str) -> list[NodeState]:
        """Every node of a task (the task's ``node_ids`` give their order)."""
        return [from_json(NodeState, row) for row in await self._state("agent_nodes", "task_id", task_id)]

    async def save_turn(self, node: NodeState, task: TaskState, session: SessionState) -> None:
        """A turn's state in one transaction (a crash never leaves the node ahead of its session)."""
        await self.save_graph([node], task, session)

    async def save_graph(self, nodes: Iterable[NodeState], task: TaskState, session: SessionState) -> None:
        """The nodes a turn touched, their task and session, in one transaction."""
        await self._write(*(_node_row(n) for n in nodes), _task_row(task), _session_row(session))

    # -- evidence (the EvidenceStore protocol) --------------------------------------------------------------

    def new_evidence_id(self) -> str:
        return new_id("ev")

    async def save_evidence(self, evidence: Evidence) -> None:
        await self._write(
            (
                "evidence",
                {
                    "id": evidence.id,
                    "task_id": evidence.task_id,
                    "node_id": evidence.node_id,
                    "tool": evidence.tool,
                    "status": evidence.status.value,
                    "idempotency_key": evidence.idempotency_key,
                    "state": to_json(evidence),
                },
            )
        )

    async def load_evidence(self, task_id: str) -> list[Evidence]:
        """The task's evidence, oldest first."""
        found = [from_json(Evidence, row) for row in await self._state("agent_evidence", "task_id", task_id)]
        return sorted(found, key=lambda e: e.seq)


class MemoryAgentStore:
    """The AgentStore interface kept in memory: isolated sub-agents (skill_md skills) leave nothing behind."""

    @contextlib.asynccontextmanager
    async def lock(self, session_id: str, *, wait: bool | float = True) -> AsyncIterator[None]:
        """Nothing to lock: an isolated sub-agent's session is used by one turn only."""
        yield

    def __init__(self) -> None:
        self.sessions: dict[str, SessionState] = {}
        self.tasks: dict[str, TaskState] = {}
        self.nodes: dict[str, NodeState] = {}
        self.evidence: dict[str, Evidence] = {}

    async def load_session(self, session_id: str) -> SessionState | None:
        return self.sessions.get(session_id)

    async def save_session(self, state: SessionState) -> None:
        self.sessions[state.id] = state

    async def load_task(self, task_id: str) -> TaskState | None:
        return self.tasks.get(task_id)

    async def save_task(self, task: TaskState) -> None:
        self.tasks[task.id] = task

    async def load_node(self, node_id: str) -> NodeState | None:
        return self.nodes.get(node_id)

    async def save_node(self, node: NodeState) -> None:
        self.nodes[node.id] = node

    async def load_nodes(self, task_id: str) -> list[NodeState]:
        return [n for n in self.nodes.values() if n.task_id == task_id]

    async def save_turn(self, node: NodeState, task: TaskState, session: SessionState) -> None:
        await self.save_graph([node], task, session)

    async def save_graph(self, nodes: Iterable[NodeState], task: TaskState, session: SessionState) -> None:
        for node in nodes:
            self.nodes[node.id] = node
        self.tasks[task.id], self.sessions[session.id] = task, session

    def new_evidence_id(self) -> str:
        return new_id("ev")

    async def save_evidence(self, evidence: Evidence) -> None:
        self.evidence[evidence.id] = evidence

    async def load_evidence(self, task_id: str) -> list[Evidence]:
        return sorted((e for e in self.evidence.values() if e.task_id == task_id), key=lambda e: e.seq)
