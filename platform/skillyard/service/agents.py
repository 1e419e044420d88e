"""The agents a service answers with, by code: folders (``--agent``, ``--agents-dir``, ``[service] agents_dir``)
and agents stored in the database. A turn runs under the session's advisory lock, recorded as progress events;
every answer to a checkpoint records who gave it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select

from ..errors import SkillyardError
from ..storage.tables import service_approvals
from .auth import Principal
from .errors import ApiError, bad_request, not_found
from .turns import tool_labels

if TYPE_CHECKING:
    from ..agent.runner import Agent
    from ..agent.turn import TurnResult
    from ..yard import SkillYard
    from .locks import TurnLocks
    from .sessions import SessionOwners
    from .turns import TurnEvents

ACTIONS = ("REPLY", "CONFIRM", "REJECT", "CANCEL", "CHOOSE")


def _folders(agent_dirs: Sequence[Path], agents_dir: Path | None) -> list[Path]:
    found = list(agent_dirs)
    if agents_dir is not None and agents_dir.is_dir():
        found += sorted(p for p in agents_dir.iterdir() if (p / "AGENT.md").is_file())
    return found


class Agents:
    def __init__(
        self,
        yard: SkillYard,
        owners: SessionOwners,
        locks: TurnLocks,
        events: TurnEvents,
        *,
        agent_dirs: Sequence[Path] = (),
        agents_dir: Path | None = None,
        model: str | None = None,
    ) -> None:
        self.yard = yard
        self.owners = owners
        self.locks = locks
        self.events = events
        self.model = model
        self._dirs = _folders(agent_dirs, agents_dir)
        self._by_code: dict[str, Path] | None = None
        self._loaded: dict[str, Agent] = {}
        self._lock = asyncio.Lock()

    def codes(self) -> dict[str, Path]:
        """The folder agents by code (AGENT.md read once)."""
        if self._by_code is None:
            from ..agent.profile import AgentProfileError, read_agent_profile

            found: dict[str, Path] = {}
            for folder in self._dirs:
                try:
                    found.setdefault(read_agent_profile(folder).agent_code, folder.resolve())
                except AgentProfileError:
                    continue
            self._by_code = found
        return self._by_code

    async def get(self, code: str) -> Agent:
        """The agent ``code``: a folder agent, else one stored in the database; 404 when neither has it."""
        agent = self._loaded.get(code)
        if agent is not None:
            return agent
        async with self._lock:
            agent = self._loaded.get(code)
            if agent is None:
                agent = await self._load(code)
                self._loaded[code] = agent
        return agent

    async def _load(self, code: str) -> Agent:
        from ..agent.runner import AgentError

        folder = self.codes().get(code)
        try:
            if folder is not None:
                return await self.yard.agent(folder, model=self.model)
            if self.yard.database.exists:
                return await self.yard.agent_from_db(code, model=self.model)
        except AgentError as exc:
            if folder is not None:
                raise ApiError(
                    503, "agent_unavailable", str(exc), "fix the agent folder or the model setting"
                ) from None
        known = ", ".join(sorted(self.codes())) or "none"
        raise not_found(f"no agent {code!r} (folder agents: {known}; none stored under that code)", "use a listed code")

    def locate(self, spec: str) -> str:
        """Where a binding's agent ``spec`` is for this process: its folder (a path, or the folder of a code among
        ``--agent`` / ``--agents-dir``), else the spec itself (the code of an agent stored in the database)."""
        path = Path(spec).expanduser()
        if (path / "AGENT.md").is_file():
            return str(path.resolve())
        folder = self.codes().get(spec)
        return str(folder) if folder is not None else spec

    async def by_spec(self, spec: str) -> Agent:
        """A binding's agent: a folder path, or the code of a folder or stored agent."""
        path = Path(spec).expanduser()
        if (path / "AGENT.md").is_file():
            from ..agent.profile import read_agent_profile

            code = read_agent_profile(path).agent_code
            self.codes().setdefault(code, path.resolve())
            return await self.get(code)
        return await self.get(spec)

    # turns -------------------------------------------------------------------------------------------------
    async def turn(
        self,
        code: str,
        session_id: str,
        principal: Principal,
        go: Callable[[Agent], Awaitable[TurnResult]],
        *,
        wait_s: float | None = None,
    ) -> TurnResult:
        """Run one send / resume of ``code`` in ``session_id`` for ``principal``: the session claimed, its lock
        held (409 when busy, or waited for ``wait_s``), progress recorded."""
        from ..agent.runner import AgentError

        agent = await self.get(code)
        await self.owners.claim(session_id, principal)
        lock = self.locks.turn(session_id) if wait_s is None else self.locks.hold(session_id, wait_s=wait_s)
        async with lock, self.events.recording(session_id, tool_labels(agent)) as recorder:
            try:
                result = await go(agent)
            except AgentError as exc:
                await recorder.finish("REFUSED", str(exc))
                raise bad_request(str(exc), "answer what the session is waiting for (GET …/sessions/{id})") from None
            await recorder.finish(result.status, result.reply, result.checkpoint)
        return result

    async def send(
        self, code: str, session_id: str, principal: Principal, message: str, context: dict[str, Any], **kw: Any
    ) -> TurnResult:
        identity = {**principal.context, **context}
        return await self.turn(code, session_id, principal, lambda a: a.send(session_id, message, identity), **kw)

    async def resume(
        self,
        code: str,
        session_id: str,
        principal: Principal,
        action: str,
        text: str | None = None,
        edit: dict[str, Any] | None = None,
        only: list[str] | None = None,
        **kw: Any,
    ) -> TurnResult:
        action = action.upper()
        if action not in ACTIONS:
            raise bad_request(f"action {action!r} is not a resume action", f"use one of {', '.join(ACTIONS)}")
        checkpoint = await self.checkpoint(session_id)

        async def go(agent: Agent) -> TurnResult:
            result = await agent.resume(session_id, action, text, edit=edit, only=only, approver=principal.approver())
            await self._record(session_id, agent, checkpoint, action, principal)
            return result

        return await self.turn(code, session_id, principal, go, **kw)

    async def checkpoint(self, session_id: str) -> dict[str, Any] | None:
        """The open checkpoint of a session (type, tool, question), or None."""
        view = await self.session_view(session_id)
        return view["checkpoint"] if view is not None else None

    async def _record(
        self, session_id: str, agent: Agent, checkpoint: dict[str, Any] | None, action: str, principal: Principal
    ) -> None:
        sessions = await self.yard.database.session_factory()
        async with sessions() as session, session.begin():
            await session.execute(
                insert(service_approvals).values(
                    session_id=session_id,
                    agent_code=agent.profile.agent_code,
                    checkpoint=(checkpoint or {}).get("type") or "",
                    action=action,
                    tool=(checkpoint or {}).get("tool"),
                    approver=principal.approver(),
                )
            )

    async def approvals(self, session_id: str) -> list[dict[str, Any]]:
        sessions = await self.yard.database.session_factory()
        async with sessions() as session:
            rows = (
                await session.execute(
                    select(service_approvals)
                    .where(service_approvals.c.session_id == session_id)
                    .order_by(service_approvals.c.id)
                )
            ).all()
        return [
            {
                "checkpoint": r.checkpoint,
                "action": r.action,
                "tool": r.tool,
                "approver": r.approver,
                "at": r.created_at.isoformat(),
            }
            for r in rows
        ]

    async def session_view(self, session_id: str) -> dict[str, Any] | None:
        """A stored session: its agent, the open task's graph and checkpoint, and the conversation so far."""
        from ..agent import graph as task_graph
        from ..agent.store import AgentStore

        store = AgentStore(self.yard.database)
        try:
            state = await store.load_session(session_id)
        except SkillyardError:
            return None
        if state is None:
            return None
        view: dict[str, Any] = {
            "session_id": session_id,
            "agent_code": state.agent_code,
            "task_id": state.task_id,
            "node_id": state.node_id,
            "graph": None,
            "checkpoint": None,
            "history": [],
        }
        if state.task_id:
            task = await store.load_task(state.task_id)
            nodes = {n.id: n for n in await store.load_nodes(state.task_id)}
            if task is not None:
                view["graph"] = task_graph.view(task, nodes)
            node = nodes.get(state.node_id or "")
            if node is not None and node.checkpoint is not None:
                cp = node.checkpoint
                view["checkpoint"] = {
                    "type": str(cp.type),
                    "question": cp.question,
                    "expected_fields": cp.expected_fields,
                    "suggestions": cp.suggestions,
                    "tool": cp.tool,
                    **({"candidates": cp.candidates} if getattr(cp, "candidates", None) else {}),
                }
            for node_id in task.node_ids if task is not None else []:
                for message in nodes[node_id].messages if node_id in nodes else []:
                    content = message.get("content")
                    if message.get("role") in ("user", "assistant") and isinstance(content, str) and content:
                        view["history"].append({"node_id": node_id, "role": message["role"], "content": content})
        view["user_messages"] = list(state.user_messages)
        view["approvals"] = await self.approvals(session_id)
        return view
