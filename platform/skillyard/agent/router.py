"""Routing a conversation to one of several agents (contract spec §1.2): ``skillyard agent run --agents-dir DIR``.

A new session is routed once: a single loaded agent is chosen without a model call; otherwise one model call offers
exactly one tool, ``builtin_route`` (``{agentCode}``), with each agent's ``mission_desc`` (else ``identity_desc``).
An unknown code is answered once with the valid codes; a second unknown code, or a reply without a route, goes to
the first agent (folder order) with the reason recorded. The session then stays with its agent: later messages
and resumes go straight to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .loader import LoadedAgent, load_agent
from .profile import AGENT_FILE, AgentProfileError
from .runner import Agent, AgentError, _checked_session_id, check_message
from .settings import AgentSettings
from .state import SessionState
from .turn import TurnResult

if TYPE_CHECKING:
    from ..yard import SkillYard

ROUTE_TOOL = "builtin_route"


async def load_agents(
    yard: SkillYard, agents_dir: Path, settings: AgentSettings
) -> tuple[dict[str, LoadedAgent], list[str]]:
    """Every usable agent folder under ``agents_dir`` by agent code, and why the others were left out. Two folders
    with one agent code are an error (a router could not tell them apart)."""
    if not agents_dir.is_dir():
        raise AgentError(f"{agents_dir} is not a folder; --agents-dir names a folder of agent folders")
    loaded: dict[str, LoadedAgent] = {}
    problems: list[str] = []
    for folder in sorted(p for p in agents_dir.iterdir() if p.is_dir() and (p / AGENT_FILE).is_file()):
        try:
            agent = await load_agent(yard, folder, settings)
        except AgentProfileError as exc:
            problems.append(str(exc))
            continue
        code = agent.profile.agent_code
        if code in loaded:
            raise AgentError(
                f"agent code {code!r} is used by both {loaded[code].dir} and {folder}; give each agent folder its "
                "own agent_code"
            )
        if not agent.profile.active or not agent.skills:
            why = f"status {agent.profile.status}" if not agent.profile.active else "no usable skill"
            problems.append(f"{folder}: agent {code!r} is left out ({why})")
            continue
        loaded[code] = agent
    if not loaded:
        found = "; ".join(problems) or f"no folder with an {AGENT_FILE}"
        raise AgentError(f"no usable agent in {agents_dir}: {found}")
    return loaded, problems


def route_tool(codes: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": ROUTE_TOOL,
            "description": "Choose the agent whose responsibilities cover the user's message.",
            "parameters": {
                "type": "object",
                "properties": {"agentCode": {"type": "string", "enum": codes}},
                "required": ["agentCode"],
            },
        },
    }


class AgentRouter:
    """Several agents behind one ``send`` / ``resume`` (see the module docstring)."""

    def __init__(self, yard: SkillYard, agents: dict[str, Agent], problems: list[str]) -> None:
        self.yard = yard
        self.agents = agents
        self.problems = problems  # agent folders left out, and why
        first = next(iter(agents.values()))
        self.store = first.store
        self.model = first.model

    def _prompt(self) -> str:
        lines = [f"- {code}: {a.profile.routing_text or a.profile.agent_name}" for code, a in self.agents.items()]
        return (
            "Choose the agent for the user's message by its responsibilities, and call "
            f"{ROUTE_TOOL} with its agentCode.\n## Agents\n" + "\n".join(lines)
        )

    async def _route(self, message: str, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        codes = list(self.agents)
        if len(codes) == 1:
            return codes[0], {"agent_code": codes[0], "source": "SINGLE", "reason": "the only loaded agent"}
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self._prompt()},
            {"role": "user", "content": message},
        ]
        tools = [route_tool(codes)]
        reason = f"the model did not call {ROUTE_TOOL}"
        for _attempt in range(2):
            reply = await self.model.complete(messages, tools, state)
            call = next((c for c in reply.tool_calls if c.name == ROUTE_TOOL), None)
            if call is None:
                break
            code = _agent_code(call.arguments)
            if code in self.agents:
                return code, {"agent_code": code, "source": "MODEL", "reason": None}
            reason = f"the model chose {code!r}, which is not a loaded agent"
            answer = {"ok": False, "error": reason, "next_step": f"call {ROUTE_TOOL} with one of: {', '.join(codes)}"}
            messages += [reply.to_message()]
            messages += [
                {
                    "role": "tool",
                    "tool_call_id": c.id,
                    "content": json.dumps(answer if c is call else {"ok": False, "error": "not offered"}),
                }
                for c in reply.tool_calls
            ]
        return codes[0], {"agent_code": codes[0], "source": "FALLBACK", "reason": reason}

    async def _agent(self, session: SessionState) -> Agent:
        agent = self.agents.get(session.agent_code)
        if agent is None:
            raise AgentError(
                f"session {session.id!r} belongs to agent {session.agent_code!r}, which this agents folder does not "
                f"hold ({', '.join(self.agents)}); use another session id"
            )
        return agent

    async def send(
        self, session_id: str, message: str, identity: Mapping[str, Any] | None = None, skill_key: str | None = None
    ) -> TurnResult:
        """Route a new session (once), then send the message to its agent."""
        check_message(message, identity)
        session = await self.store.load_session(_checked_session_id(session_id))
        if session is not None:
            return await (await self._agent(session)).send(session_id, message, identity, skill_key)
        state: dict[str, Any] = {}
        code, routing = await self._route(message, state)
        self.agents[code].check_skill(skill_key)  # refused before the session is stored
        session = SessionState(id=session_id, agent_code=code, model_state=state, routing=routing)
        await self.store.save_session(session)
        result = await self.agents[code].send(session_id, message, identity, skill_key)
        result.routing = routing
        return result

    async def resume(self, session_id: str, action: str, text: str | None = None, **answer: Any) -> TurnResult:
        """Resume with the agent the session was routed to (``answer``: ``edit``, ``only``, ``approver``,
        ``wait``, as :meth:`Agent.resume` takes them)."""
        session = await self.store.load_session(_checked_session_id(session_id))
        if session is None:
            raise AgentError(f"no agent session {session_id!r}; start it with send / agent run")
        return await (await self._agent(session)).resume(session_id, action, text, **answer)


def _agent_code(arguments: str) -> str:
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        return arguments[:100]
    code = parsed.get("agentCode") if isinstance(parsed, dict) else None
    return code.strip()[:100] if isinstance(code, str) else repr(code)[:100]
