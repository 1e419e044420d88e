"""Planning a task (contract spec §3, §10.1): which contract skills run, toward which goals, in which order.

* a caller-named skill (``send(skill_key=…)``) is a one-node graph without a model call (``EXPLICIT``);
* a single candidate in ``mode: REACT`` is a one-node graph without a model call (``SINGLE_REACT``);
* otherwise one planning call offers the model exactly one tool, ``builtin_plan``
  (``{nodes: [{id, skillKey, goal, target?, dependsOn?, onFailure?, join?}]}``), with a prompt listing the
  candidates. The plan is validated before it is used; an invalid plan is answered once with every problem, and a
  second invalid plan, or a reply without a plan, falls back to a one-node graph of the first candidate
  (``FALLBACK``, with the reason).

Branches and joins (orchestration P2): a ``dependsOn`` entry may be ``{node, when}``, ``when`` a condition on a
verified output or evidence of that node (conditions.py: it may name only an output the upstream skill's contract
declares or an extract key of its tools); ``onFailure`` names the node that runs when this one fails (a node with no
``dependsOn`` of its own, the target of no other node); ``join`` is ``ALL`` (default) or ``ANY``.

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

from .conditions import EDGE_SCHEMA, OPS, check_depends_on, condition_keys
from .loader import ContractSkill
from .models import ChatModel, ModelReply
from .profile import AgentProfile
from .prompt import profile_sections, section
from .state import Join, PlanSource

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
    #: Upstream plan id → the condition of that CONDITIONAL edge (as conditions.check_condition stores it).
    when: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    on_failure: str | None = None  # the plan id of the node that runs when this one fails
    join: Join = Join.ALL


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
            "dependsOn": {
                "type": "array",
                "items": {"anyOf": [{"type": "string"}, EDGE_SCHEMA]},
                "description": "ids that must finish first; {node, when} runs this node only if the condition holds",
            },
            "onFailure": {
                "type": "string",
                "description": "optional: the id of the node that runs if this one fails (that node has no dependsOn)",
            },
            "join": {
                "type": "string",
                "enum": [j.value for j in Join],
                "description": "ALL (default): each upstream node that was not skipped must be DONE; ANY: one suffices",
            },
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
        keys = condition_keys(skill)
        lines.append(
            f"- {key}: {skill.description or skill.name}"
            + (f" (write tools: {', '.join(writes)})" if writes else " (read only)")
            + (f" [conditions may read {keys}]" if keys else "")
        )
    parts = [
        f"You are {profile.agent_name} ({profile.agent_code}). Plan how to handle the user's message.",
        *profile_sections(profile),
        section("Candidate skills", "\n".join(lines)),
        f"Call {PLAN_TOOL} once with the nodes to run: each node names one candidate skillKey and its goal; use "
        "dependsOn when a node needs another's results; give a node's target only when it must complete one of "
        "that skill's write tools. To branch on a result, a dependsOn entry may be "
        "{node, when: {output | evidence, op, value?}} (ops: " + OPS + "; value for EQ / NE): the node runs only "
        "if the condition holds on that node's result; onFailure names a node (without dependsOn) that runs if this "
        "one fails; join ANY lets a node run when any one of its upstream nodes is DONE. Plan only what the message "
        "asks for.",
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
    skill_of: dict[str, ContractSkill] = {}  # plan id → its candidate skill: what a condition on it may read
    for raw in raw_nodes:
        plan_id = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(plan_id, str) and plan_id.strip():
            ids.append(plan_id.strip())
            key = raw.get("skillKey")
            if isinstance(key, str) and key in candidates:
                skill_of.setdefault(plan_id.strip(), candidates[key])
    parsed: list[PlannedNode] = []
    index_of: dict[str, int] = {}
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
        depends, when, trouble = check_depends_on(raw.get("dependsOn"), where, plan_id, ids, skill_of)
        if trouble:
            problems += trouble
            continue
        target = raw.get("target")
        if target is not None and not isinstance(target, str):
            problems.append(f"{where}.target must be a tool name (a string)")
            continue
        join, trouble = _join(raw.get("join"), where, depends)
        on_failure = raw.get("onFailure")
        if on_failure is not None and (not isinstance(on_failure, str) or not on_failure.strip()):
            trouble.append(f"{where}.onFailure must be the id of another node of the plan, such as 'n3'")
        if trouble:
            problems += trouble
            continue
        kept = write_target(candidates[key], target) if target else None
        if target and kept is None:
            notes.append(f"{plan_id}: target {target!r} is not a write tool of {key} in its toolNames; dropped (§10.1)")
        failure = on_failure.strip() if on_failure is not None else None
        goal = (goal or "").strip() or message
        parsed.append(PlannedNode(plan_id, key, goal, kept, depends, when, failure, join))
        index_of[plan_id] = index
    sources, trouble = _failure_edges(parsed, index_of, ids)
    problems += trouble
    if problems:
        return [], problems, []
    try:
        graphlib.TopologicalSorter(_predecessors(parsed, sources)).prepare()
    except graphlib.CycleError as exc:
        cycle = " → ".join(str(p) for p in exc.args[1])
        also = "; an onFailure node comes after the node that names it" if sources else ""
        return [], [f"the dependencies form a cycle ({cycle}); a node cannot wait for itself{also}"], []
    return _in_run_order(parsed, sources), [], notes


def _join(join: Any, where: str, depends: tuple[str, ...]) -> tuple[Join, list[str]]:
    if join is None:
        return Join.ALL, []
    if not isinstance(join, str) or join not in Join.__members__:
        return Join.ALL, [f"{where}.join {join!r} must be ALL or ANY"]
    if join == Join.ANY and not depends:
        return Join.ALL, [f"{where}.join ANY needs dependsOn: it lets one of several upstream nodes DONE suffice"]
    return Join(join), []


def _failure_edges(
    nodes: list[PlannedNode], index_of: Mapping[str, int], ids: list[str]
) -> tuple[dict[str, str], list[str]]:
    """``(onFailure target → the node naming it, problems)``: a target is another node of the plan, the target of
    no other node, with no ``dependsOn`` of its own (the FAILURE edge is its only incoming edge)."""
    by_id = {n.plan_id: n for n in nodes}
    sources: dict[str, str] = {}
    problems: list[str] = []
    for node in nodes:
        target = node.on_failure
        if target is None or node.plan_id is None:
            continue
        where = f"nodes[{index_of[node.plan_id]}].onFailure"
        if target == node.plan_id:
            problems.append(f"{where} names the node itself; name the node that runs when {target} fails")
        elif target not in ids:
            problems.append(f"{where} {target!r} names no node of the plan (ids: {', '.join(ids)})")
        elif target in sources:
            problems.append(
                f"{where} {target!r} is already the onFailure node of {sources[target]}; give each node its own"
            )
        elif target in by_id and by_id[target].depends_on:
            listed = ", ".join(by_id[target].depends_on)
            problems.append(
                f"{where} {target!r}: {target} has dependsOn ({listed}); an onFailure node runs only when "
                f"{node.plan_id} fails, so it may have no other incoming edges — remove its dependsOn"
            )
        else:
            sources[target] = node.plan_id
    return sources, problems


def _predecessors(nodes: list[PlannedNode], sources: Mapping[str, str]) -> dict[str | None, tuple[str, ...]]:
    """What each node waits for: its dependsOn, and for an onFailure node the node that names it."""
    waits: dict[str | None, tuple[str, ...]] = {}
    for node in nodes:
        source = sources.get(node.plan_id or "")
        waits[node.plan_id] = node.depends_on if source is None else (*node.depends_on, source)
    return waits


def _in_run_order(nodes: list[PlannedNode], sources: Mapping[str, str]) -> list[PlannedNode]:
    """Every node after the nodes it waits for, otherwise in the plan's own order (the graph has no cycle)."""
    waits = _predecessors(nodes, sources)
    placed: set[str | None] = set()
    ordered: list[PlannedNode] = []
    waiting = list(nodes)
    while waiting:
        node = next(n for n in waiting if all(d in placed for d in waits[n.plan_id]))
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
