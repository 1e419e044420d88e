"""Planning a task (contract spec §3, §10.1): which contract skills run, toward which goals, in which order.

* a caller-named skill (``send(skill_key=…)``) is a one-node graph without a model call (``EXPLICIT``);
* a single candidate in ``mode: REACT`` is a one-node graph without a model call (``SINGLE_REACT``);
* otherwise one planning call offers the model exactly one tool, ``builtin_plan``
  (``{nodes: [{id, skillKey, goal, target?, dependsOn?}]}``), with a prompt listing the candidates. The plan is
  validated before it is used; an invalid plan is answered once with every problem, and a second invalid plan, or
  a reply without a plan, falls back to a one-node graph of the first candidate (``FALLBACK``, with the reason).

A node's ``target`` must be a WRITE tool of its skill that is in the skill's ``toolNames``; otherwise it is dropped
(§10.1 row 1) and the contract's ``target`` applies. Planned goals come from the model: they never count as
something the user said (USER provenance reads the user's own messages only).
"""

from __future__ import annotations

import graphlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .loader import ContractSkill
from .models import ChatModel, ModelReply
from .profile import AgentProfile
from .prompt import profile_sections, section
from .state import PlanSource

PLAN_TOOL = "builtin_plan"
#: Nodes one plan may hold: a plan is a handful of business steps, never a loop unrolled.
MAX_PLAN_NODES = 20
#: Characters of a planned goal, and of a node id: model text that is stored and shown in every later prompt.
MAX_GOAL_CHARS = 2000
MAX_ID_CHARS = 64


@dataclass(frozen=True)
class PlannedNode:
    """One node of a validated plan; ``depends_on`` holds plan ids."""

    plan_id: str | None
    skill_key: str
    goal: str
    target: str | None = None
    depends_on: tuple[str, ...] = ()


@dataclass
class Plan:
    nodes: list[PlannedNode]
    source: PlanSource
    notes: list[str] = field(default_factory=list)  # why the plan fell back, which targets were dropped


def write_target(skill: ContractSkill, name: str | None) -> str | None:
    """``name`` when it is a WRITE tool of the skill's contract and in its ``toolNames`` (§10.1), else None."""
    tool = skill.contract.tools.get(name) if name else None
    return name if tool is not None and tool.is_write and name in skill.tool_names else None


def plan_tool(candidates: Mapping[str, ContractSkill]) -> dict[str, Any]:
    """The OpenAI function definition of ``builtin_plan``, its ``skillKey`` limited to the candidates."""
    node = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "a short id unique in the plan, e.g. n1"},
            "skillKey": {"type": "string", "enum": list(candidates)},
            "goal": {"type": "string", "description": "what this node must achieve, in one sentence"},
            "target": {"type": "string", "description": "optional: the write tool that completes the node"},
            "dependsOn": {"type": "array", "items": {"type": "string"}, "description": "ids that must finish first"},
        },
        "required": ["id", "skillKey", "goal"],
    }
    return {
        "type": "function",
        "function": {
            "name": PLAN_TOOL,
            "description": "Plan the task as nodes of the candidate skills; one node per write operation.",
            "parameters": {
                "type": "object",
                "properties": {"nodes": {"type": "array", "items": node, "minItems": 1}},
                "required": ["nodes"],
            },
        },
    }


def planning_prompt(profile: AgentProfile, candidates: Mapping[str, ContractSkill]) -> str:
    """§1.2: the agent's five descriptions and each candidate's ``semantic_desc`` (else its name) and write tools."""
    lines = []
    for key, skill in candidates.items():
        writes = [name for name in skill.contract.write_tools if name in skill.tool_names]
        lines.append(
            f"- {key}: {skill.description or skill.name}"
            + (f" (write tools: {', '.join(writes)})" if writes else " (read only)")
        )
    parts = [
        f"You are {profile.agent_name} ({profile.agent_code}). Plan how to handle the user's message.",
        *profile_sections(profile),
        section("Candidate skills", "\n".join(lines)),
        f"Call {PLAN_TOOL} once with the nodes to run: each node names one candidate skillKey and its goal; use "
        "dependsOn when a node needs another's results; give a node's target only when it must complete one of "
        "that skill's write tools. Plan only what the message asks for.",
    ]
    return "\n".join(p for p in parts if p)


def validate_plan(
    arguments: Any, candidates: Mapping[str, ContractSkill], message: str
) -> tuple[list[PlannedNode], list[str], list[str]]:
    """``(nodes in run order, problems, notes)`` of a ``builtin_plan`` call; nodes is empty when there are problems."""
    problems: list[str] = []
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            return [], [f'the arguments are not valid JSON ({exc}); send {{"nodes": [...]}}'], []
    raw_nodes = arguments.get("nodes") if isinstance(arguments, dict) else None
    if not isinstance(raw_nodes, list) or not raw_nodes:
        return [], ["'nodes' must be a non-empty list of {id, skillKey, goal, target?, dependsOn?}"], []
    if len(raw_nodes) > MAX_PLAN_NODES:
        return [], [f"a plan holds at most {MAX_PLAN_NODES} nodes, not {len(raw_nodes)}; merge steps"], []
    known = ", ".join(candidates)
    ids: list[str] = []
    for raw in raw_nodes:
        plan_id = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(plan_id, str) and plan_id.strip():
            ids.append(plan_id.strip())
    parsed: list[PlannedNode] = []
    notes: list[str] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_nodes):
        where = f"nodes[{index}]"
        if not isinstance(raw, dict):
            problems.append(f"{where} must be an object {{id, skillKey, goal}}, not {type(raw).__name__}")
            continue
        plan_id = raw.get("id")
        if not isinstance(plan_id, str) or not plan_id.strip():
            problems.append(f"{where}.id must be a non-empty string such as 'n{index + 1}'")
            continue
        plan_id = plan_id.strip()
        if len(plan_id) > MAX_ID_CHARS:
            problems.append(f"{where}.id is longer than {MAX_ID_CHARS} characters; use a short id such as 'n1'")
            continue
        if plan_id in seen:
            problems.append(f"{where}.id {plan_id!r} is used twice; give every node its own id")
            continue
        seen.add(plan_id)
        key = raw.get("skillKey")
        if not isinstance(key, str) or key not in candidates:
            problems.append(f"{where}.skillKey {key!r} is not a candidate skill (candidates: {known})")
            continue
        goal = raw.get("goal")
        if goal is not None and not isinstance(goal, str):
            problems.append(f"{where}.goal must be a string")
            continue
        if goal is not None and len(goal) > MAX_GOAL_CHARS:
            problems.append(f"{where}.goal is longer than {MAX_GOAL_CHARS} characters; say the goal in a sentence")
            continue
        depends = raw.get("dependsOn", [])
        if depends is None:
            depends = []
        if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
            problems.append(f"{where}.dependsOn must be a list of node ids such as ['n1']")
            continue
        depends = list(dict.fromkeys(d.strip() for d in depends))
        if plan_id in depends:
            problems.append(f"{where} ({plan_id}) depends on itself; remove {plan_id!r} from its dependsOn")
            continue
        unknown = [d for d in depends if d not in ids]
        if unknown:
            problems.append(
                f"{where}.dependsOn names no node of the plan: {', '.join(unknown)} (ids: {', '.join(ids)})"
            )
            continue
        target = raw.get("target")
        if target is not None and not isinstance(target, str):
            problems.append(f"{where}.target must be a tool name (a string)")
            continue
        kept = write_target(candidates[key], target) if target else None
        if target and kept is None:
            notes.append(f"{plan_id}: target {target!r} is not a write tool of {key} in its toolNames; dropped (§10.1)")
        parsed.append(PlannedNode(plan_id, key, (goal or "").strip() or message, kept, tuple(depends)))
    if problems:
        return [], problems, []
    try:
        graphlib.TopologicalSorter({n.plan_id: n.depends_on for n in parsed}).prepare()
    except graphlib.CycleError as exc:
        cycle = " → ".join(str(p) for p in exc.args[1])
        return [], [f"the dependencies form a cycle ({cycle}); a node cannot wait for itself"], []
    return _in_run_order(parsed), [], notes


def _in_run_order(nodes: list[PlannedNode]) -> list[PlannedNode]:
    """Every node after the nodes it depends on, otherwise in the plan's own order (the graph has no cycle)."""
    placed: set[str | None] = set()
    ordered: list[PlannedNode] = []
    waiting = list(nodes)
    while waiting:
        node = next(n for n in waiting if all(d in placed for d in n.depends_on))
        waiting.remove(node)
        ordered.append(node)
        placed.add(node.plan_id)
    return ordered


def _fallback(candidates: Mapping[str, ContractSkill], message: str, reason: str) -> Plan:
    first = next(iter(candidates))
    return Plan([PlannedNode(None, first, message)], PlanSource.FALLBACK, [f"fallback to {first}: {reason}"])


def _answers(reply: ModelReply, problems: list[str], candidates: Mapping[str, ContractSkill]) -> list[dict[str, Any]]:
    """The tool messages answering every call of an invalid planning reply (each call id needs its answer)."""
    answers = []
    for call in reply.tool_calls:
        if call.name == PLAN_TOOL:
            body: dict[str, Any] = {
                "ok": False,
                "problems": problems,
                "next_step": f"call {PLAN_TOOL} again with a corrected plan; skillKey is one of "
                + ", ".join(candidates),
            }
        else:
            body = {"ok": False, "error": f"{call.name!r} is not offered while planning; call {PLAN_TOOL}"}
        answers.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(body, ensure_ascii=False)})
    return answers


async def plan_task(
    model: ChatModel,
    profile: AgentProfile,
    candidates: Mapping[str, ContractSkill],
    message: str,
    state: dict[str, Any],
) -> Plan:
    """Ask the model for a plan (one call, and one more after an invalid plan); see the module docstring."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": planning_prompt(profile, candidates)},
        {"role": "user", "content": message},
    ]
    tools = [plan_tool(candidates)]
    problems: list[str] = []
    for _attempt in range(2):
        reply = await model.complete(messages, tools, state)
        call = next((c for c in reply.tool_calls if c.name == PLAN_TOOL), None)
        if call is None:
            return _fallback(candidates, message, f"the model did not call {PLAN_TOOL}")
        nodes, problems, notes = validate_plan(call.arguments, candidates, message)
        if not problems:
            return Plan(nodes, PlanSource.MODEL, notes)
        messages += [reply.to_message(), *_answers(reply, problems, candidates)]
    return _fallback(candidates, message, "the plan was invalid twice: " + "; ".join(problems))
