"""The task graph: the nodes of a plan with their provider nodes (§7), the order nodes run in, what lies upstream of
a node (§9 evidence), and the graph as a turn's JSON shows it.

Nodes run one at a time (orchestration requirements P2: parallel branches need their own design first). A NORMAL
edge needs its upstream node DONE or SKIPPED; a node whose upstream FAILED or was CANCELLED never runs, and the task
fails with the reason. A delegated node (§15) runs before the node that delegated it, which waits; its failure is
a note to that node, never the task's failure. CONDITIONAL and FAILURE edges and ``join`` (orchestration P2) are
ruled by branches.py: :func:`settle` applies its rulings and stores its decisions before :func:`next_node` picks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SkillyardError
from .branches import Branches, recovered
from .expressions import ExpressionError, Prefix, parse_expression
from .loader import ContractSkill
from .paths import get_path
from .planner import Plan, write_target
from .state import (
    EdgeType,
    Evidence,
    Join,
    NodeKind,
    NodeState,
    NodeStatus,
    PlanSource,
    SessionState,
    TaskState,
    to_json,
)
from .store import new_id

#: Nodes one task may hold (planned, providers and delegations together): every loop of the graph is bounded.
MAX_TASK_NODES = 50
#: An upstream node in one of these statuses lets its NORMAL dependents run.
PASSED = frozenset({NodeStatus.DONE, NodeStatus.SKIPPED})
#: An upstream node in one of these statuses stops its NORMAL dependents.
STOPPED = frozenset({NodeStatus.FAILED, NodeStatus.CANCELLED})


class PlanningFailed(SkillyardError):
    """The plan cannot run (``PROVIDER_UNAVAILABLE``): the message names the input, the skill and the fix."""


def _provided(spec_from: str | None, task: TaskState, session: SessionState) -> bool:
    """Whether a ``shared.``/``session.`` input already has the value a provider would give (§7: then no
    provider node is inserted)."""
    if not spec_from:
        return False
    try:
        expr = parse_expression(spec_from)
    except ExpressionError:
        return False
    if expr.prefix is Prefix.SHARED:
        return get_path(task.shared, expr.path)[0]
    if expr.prefix is Prefix.SESSION:
        return get_path(session.values, expr.path)[0]
    return False


class _Builder:
    """Turns a plan into node states in run order, inserting provider nodes before the nodes they provide for."""

    def __init__(self, skills: Mapping[str, ContractSkill], task: TaskState, session: SessionState, agent: str):
        self.skills = skills
        self.task = task
        self.session = session
        self.agent = agent
        self.nodes: list[NodeState] = []
        self.providers: dict[str, NodeState] = {}  # provider skill key → its node (one per task)

    def node(self, key: str, goal: str, kind: NodeKind, target: str | None, plan_id: str | None = None) -> NodeState:
        if len(self.nodes) >= MAX_TASK_NODES:
            raise PlanningFailed(f"the plan needs more than {MAX_TASK_NODES} nodes; split the request")
        skill = self.skills[key]
        target = target or write_target(skill, skill.contract.target)
        return NodeState(id=new_id("node"), task_id=self.task.id, skill_key=key, goal=goal, kind=kind,
                         plan_id=plan_id, target=target, status=NodeStatus.PENDING)  # fmt: skip

    def provide_for(self, node: NodeState, chain: tuple[str, ...]) -> None:
        """Insert (once per provider skill) the provider nodes of ``node``'s inputs, each before ``node``."""
        skill = self.skills[node.skill_key]
        for name, spec in skill.contract.inputs.items():
            provider = spec.provider
            if provider is None or provider == node.skill_key or provider in chain:
                continue  # never itself, never around a loop of providers
            if provider not in self.skills:
                raise PlanningFailed(
                    f"PROVIDER_UNAVAILABLE (agent_runtime.42212): input {name!r} of skill {node.skill_key!r} is "
                    f"provided by {provider!r}, which is not a skill of agent {self.agent!r}; add it to the "
                    "agent's skills or remove inputs.provider"
                )
            if _provided(spec.from_expr, self.task, self.session):
                self.task.plan_notes.append(f"{node.skill_key}: input {name!r} already has a value; no provider node")
                continue
            found = self.providers.get(provider)
            if found is None:
                described = self.skills[provider].description or self.skills[provider].name
                found = self.node(provider, described, NodeKind.PROVIDER, None)
                self.providers[provider] = found
                self.provide_for(found, (*chain, node.skill_key))
                self.nodes.append(found)
            if found.id not in node.depends_on:
                node.depends_on.append(found.id)

    def build(self, plan: Plan) -> list[NodeState]:
        kind = NodeKind.FALLBACK if plan.source is PlanSource.FALLBACK else NodeKind.PLANNED
        by_plan_id: dict[str, NodeState] = {}
        for planned in plan.nodes:
            node = self.node(planned.skill_key, planned.goal, kind, planned.target, planned.plan_id)
            node.depends_on = [by_plan_id[d].id for d in planned.depends_on]
            node.when = {by_plan_id[d].id: dict(condition) for d, condition in planned.when.items()}
            node.join = planned.join
            self.provide_for(node, ())
            self.nodes.append(node)
            if planned.plan_id is not None:
                by_plan_id[planned.plan_id] = node
        for planned in plan.nodes:  # an onFailure node comes after the node naming it: set once all exist
            if planned.on_failure is not None and planned.plan_id is not None:
                by_plan_id[planned.plan_id].on_failure = by_plan_id[planned.on_failure].id
        return self.nodes


def build_graph(
    plan: Plan, skills: Mapping[str, ContractSkill], task: TaskState, session: SessionState, agent_code: str
) -> list[NodeState]:
    """The task's nodes in run order (providers inserted); raises :class:`PlanningFailed`."""
    return _Builder(skills, task, session, agent_code).build(plan)


# -- running the graph --------------------------------------------------------------------------------------


def upstream_ids(node: NodeState, graph: Mapping[str, NodeState]) -> list[str]:
    """Every node upstream of ``node`` along dependency, delegation and FAILURE edges, nearest first (§9)."""
    order: list[str] = []
    seen = {node.id}
    frontier = [node]
    while frontier:
        following: list[NodeState] = []
        for current in frontier:
            children = [n.id for n in graph.values() if n.parent_id == current.id]
            failing = [n.id for n in graph.values() if n.on_failure == current.id]
            for upstream in [*reversed(children), *failing, *current.depends_on]:
                if upstream not in seen and upstream in graph:
                    seen.add(upstream)
                    order.append(upstream)
                    following.append(graph[upstream])
        frontier = following
    return order


def settle(task: TaskState, graph: Mapping[str, NodeState], evidence: Sequence[Evidence]) -> list[NodeState]:
    """Rule on every pending node that can be ruled on (branches.py), until nothing changes: a node whose upstream
    FAILED or was CANCELLED is not run (CANCELLED, with the reason), a branch decision is stored in
    ``task.decisions`` and a node it skips is SKIPPED. ``evidence`` is the task's (conditions read it). Returns the
    nodes a decision skipped (the caller saves them)."""
    if not _branching(task, graph):
        block_stopped(task, graph)  # a graph without branches: part 2's rule is all there is to apply
        return []
    branches = Branches(task, graph, evidence)
    skipped: list[NodeState] = []
    changed = True
    while changed:
        changed = False
        for node_id in task.node_ids:
            node = graph[node_id]
            if node.status is not NodeStatus.PENDING:
                continue
            ruling = branches.rule(node)
            if ruling is None:
                continue
            if ruling.decision:
                branches.record(node, ruling)
            if ruling.status is None:
                continue  # it runs: next_node picks it in run order
            node.status, node.skipped_reason = ruling.status, ruling.reason
            if ruling.status is NodeStatus.SKIPPED:
                skipped.append(node)
            changed = True
    return skipped


#: ``Join.ANY`` as a plain name: on Python 3.11 an enum class attribute costs about a function call, and every
#: scheduling pass reads it once per node.
_ANY = Join.ANY


def _branching(task: TaskState, graph: Mapping[str, NodeState]) -> bool:
    """Whether branch rules apply at all: a decision was made, or a node has a condition, onFailure or join ANY."""
    if task.decisions:
        return True
    return any(node.when or node.on_failure is not None or node.join is _ANY for node in graph.values())


def block_stopped(task: TaskState, graph: Mapping[str, NodeState]) -> list[NodeState]:
    """Mark every pending node whose upstream FAILED or was CANCELLED as not run (CANCELLED, with the reason): what
    :func:`settle` does for a graph without branches (part 2)."""
    blocked: list[NodeState] = []
    changed = True
    while changed:
        changed = False
        for node_id in task.node_ids:
            node = graph[node_id]
            if node.status is not NodeStatus.PENDING:
                continue
            stopped = next((graph[d] for d in node.depends_on if graph[d].status in STOPPED), None)
            if stopped is not None:
                node.status = NodeStatus.CANCELLED
                node.skipped_reason = f"not run: upstream node {stopped.id} ({stopped.skill_key}) {stopped.status}"
                blocked.append(node)
                changed = True
    return blocked


def next_node(task: TaskState, graph: Mapping[str, NodeState]) -> NodeState | None:
    """The node to run now: the first pending node (in run order) that a decision lets run, or, for a node without
    branches, whose NORMAL upstream nodes all passed (call :func:`settle` first)."""
    if not _branching(task, graph):
        return _next_plain(task, graph)
    decided = {d.node: d.taken for d in task.decisions}
    targets = {n.on_failure for n in graph.values() if n.on_failure is not None}
    for node_id in task.node_ids:
        node = graph[node_id]
        if node.status is not NodeStatus.PENDING:
            continue
        taken = decided.get(node_id)
        if taken is not None:
            if taken:
                return node
            continue
        if node.when or node.join is _ANY or node_id in targets:
            continue  # it runs on a decision only
        if all(graph[d].status in PASSED and decided.get(d) is not False for d in node.depends_on):
            return node
    return None


def _next_plain(task: TaskState, graph: Mapping[str, NodeState]) -> NodeState | None:
    """:func:`next_node` of a graph without branches (part 2): the first pending node whose upstream nodes passed."""
    for node_id in task.node_ids:
        node = graph[node_id]
        if node.status is NodeStatus.PENDING and all(graph[d].status in PASSED for d in node.depends_on):
            return node
    return None


def verdict(task: TaskState, graph: Mapping[str, NodeState]) -> NodeStatus:
    """The status of a task none of whose nodes can run any more: DONE when every node is DONE or SKIPPED, or
    FAILED with its failure handled by its onFailure node (delegated nodes aside: their failure is a note to the
    delegating node), CANCELLED when the user cancelled its only unfinished node, else FAILED."""
    counted = [graph[i] for i in task.node_ids if graph[i].kind is not NodeKind.DELEGATED]
    stopped = [n for n in counted if n.status not in PASSED and not recovered(n, graph)]
    if not stopped:
        return NodeStatus.DONE
    if all(n.status is NodeStatus.CANCELLED and n.skipped_reason is None for n in stopped):
        return NodeStatus.CANCELLED
    return NodeStatus.FAILED


def view(task: TaskState, graph: Mapping[str, NodeState]) -> dict[str, Any]:
    """The ``graph`` of a turn's JSON (docs/agents.md)."""
    nodes = [graph[i] for i in task.node_ids if i in graph]
    edges = [_edge(d, n) for n in nodes for d in n.depends_on]
    edges += [{"from": n.id, "to": n.parent_id, "type": EdgeType.DELEGATE.value} for n in nodes if n.parent_id]
    edges += [{"from": n.id, "to": n.on_failure, "type": EdgeType.FAILURE.value} for n in nodes if n.on_failure]
    return {
        "task_id": task.id,
        "nodes": [
            {
                "id": n.id,
                "plan_id": n.plan_id,
                "skill_key": n.skill_key,
                "goal": n.goal,
                "target": n.target,
                "status": n.status.value,
                "kind": n.kind.value,
                "depends_on": list(n.depends_on),
                "parent_id": n.parent_id,
                "skipped_reason": n.skipped_reason,
                "when": to_json(n.when),
                "on_failure": n.on_failure,
                "join": n.join.value,
            }
            for n in nodes
        ],
        "edges": edges,
        "plan_source": task.plan_source.value,
        "plan_notes": list(task.plan_notes),
        "decisions": to_json(task.decisions),
    }


def _edge(upstream: str, node: NodeState) -> dict[str, Any]:
    """A dependsOn edge of the view: NORMAL, or CONDITIONAL with its condition."""
    condition = node.when.get(upstream)
    if condition is None:
        return {"from": upstream, "to": node.id, "type": EdgeType.NORMAL.value}
    return {"from": upstream, "to": node.id, "type": EdgeType.CONDITIONAL.value, "when": to_json(condition)}
