"""skill_md skills as isolated sub-agents: a SKILL.md with no code is run by the node runner itself.

When a node's business tool resolves to a skill_md skill, the chain does not call ``yard.run`` (which has no code to
run) but starts a sub-agent on the same model:

* its manual is the SKILL.md body (the prompt shows the first 8,000 characters with a truncation notice, and the
  ``read_skill_file`` builtin reads the rest);
* its tools are the skills named in the frontmatter's ``allowed-tools`` (or ``tools``): a list, or names separated
  by commas or spaces; names that are no skill are left out;
* it has no contract: its tools follow the default rules (read-only, no business check, no argument contract, §1.3);
* it is isolated: its own session, task and node, kept in memory only, with the caller's identity. The model
  state is shared with the caller's session, so a scripted model continues its script across the boundary;
* its goal is the call's ``task`` / ``goal`` / ``instruction`` argument, else the arguments as JSON.

The result is an envelope like any skill's: ``{ok: true, result: <finish output>, outputs}`` when the sub-agent
finished; a failure (with the reason) when it failed, stopped, or needed the user (it cannot ask: it suspends at a
checkpoint only in its caller's stead).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..catalog.skill import Skill
from .contract import Contract
from .loader import ContractSkill, LoadedAgent
from .profile import AgentProfile
from .state import NodeStatus, SessionState
from .store import MemoryAgentStore, new_id

if TYPE_CHECKING:
    from .context import NodeContext
    from .turn import TurnResult

_GOAL_KEYS = ("task", "goal", "instruction", "query", "prompt")


def allowed_tools(skill: Skill) -> tuple[str, ...]:
    """The tool names a skill_md skill declares (``allowed-tools`` or ``tools``)."""
    meta = skill.manifest.meta
    raw = meta.get("allowed-tools", meta.get("allowed_tools", meta.get("tools")))
    if isinstance(raw, str):
        names = [n for n in re.split(r"[,\s]+", raw) if n]
    elif isinstance(raw, list):
        names = [str(n).strip() for n in raw if str(n).strip()]
    else:
        names = []
    return tuple(dict.fromkeys(names))


def _goal(args: dict[str, Any]) -> str:
    for key in _GOAL_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return json.dumps(args, ensure_ascii=False, default=str)


class IsolatedRunner(Protocol):
    """What runs the sub-agent's turn: an ``Agent`` of the node runner, made by the caller."""

    async def run_isolated(self, session: SessionState, goal: str, skill_key: str) -> TurnResult: ...


async def run_skill_md(
    ctx: NodeContext,
    skill: Skill,
    args: dict[str, Any],
    make_agent: Callable[[LoadedAgent, MemoryAgentStore], IsolatedRunner],
) -> dict[str, Any]:
    """Run ``skill`` (a skill_md skill) as an isolated sub-agent on the caller's model; a skill envelope.
    ``make_agent`` builds the runner for the sub-agent's folder and store (the node runner passes its own kind)."""
    tools = tuple(name for name in allowed_tools(skill) if ctx.yard.resolve(name) is not None)
    contract_skill = ContractSkill(
        skill_key=skill.name,
        name=skill.name,
        description=skill.description,
        manual=skill.manifest.body.strip(),
        tool_names=tools,
        contract=Contract(),
        skill=skill,
        source={},  # no contract: the default rules of §1.3 (what a task pins)
    )
    profile = AgentProfile(agent_code=f"skill_md.{skill.name}", agent_name=skill.name, path=skill.dir)
    loaded = LoadedAgent(profile=profile, dir=skill.dir, skills={skill.name: contract_skill})
    store = MemoryAgentStore()
    agent = make_agent(loaded, store)
    session = SessionState(
        id=new_id("sub"),
        agent_code=profile.agent_code,
        identity=dict(ctx.session.identity),
        model_state=ctx.session.model_state,  # shared on purpose: one conversation with one model
    )
    turn = await agent.run_isolated(session, _goal(args), skill.name)
    outputs = {key: value.value for key, value in store.nodes[str(turn.node_id)].outputs.items()}
    if turn.status == NodeStatus.DONE.value:
        return {"ok": True, "result": turn.reply, "outputs": outputs, "sub_agent": skill.name}
    if turn.checkpoint is not None:
        why = f"the sub-agent {skill.name!r} needs the user: {turn.checkpoint['question']}"
    elif turn.status == NodeStatus.RUNNING.value:
        why = f"the sub-agent {skill.name!r} stopped without finishing: {turn.reply or 'no answer'}"
    else:
        why = f"the sub-agent {skill.name!r} failed: {turn.reply or turn.status}"
    return {"ok": False, "error": why, "sub_agent": skill.name, "status": turn.status}
