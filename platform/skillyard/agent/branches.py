"""Branches and joins of the task graph (orchestration P2): what happens to a pending node once its upstream nodes
are final — it runs, it is SKIPPED with the reason, or it is not run (CANCELLED) — and the decisions that record it.

Each edge into a node ends in one outcome once its upstream node is final:

* ``DONE`` — the upstream node is DONE (an empty result counts), or SKIPPED by §7 (its shared outputs existed), and
  the edge's condition, if any, holds;
* ``NOT_TAKEN`` — the condition does not hold, or the upstream node was skipped by a branch decision, or it FAILED
  and its ``onFailure`` node ran DONE (the failure was handled: that path is not taken);
* ``BLOCKED`` — the upstream node FAILED (its failure not handled) or was CANCELLED: part 2's rule, the node is not
  run (CANCELLED, "not run: upstream node …").

A ``join: ALL`` node (the default) is not run when an edge is BLOCKED and SKIPPED as soon as one of its conditions
does not hold; otherwise it runs when its upstream nodes that were not skipped are all DONE, and is SKIPPED when
every upstream node was skipped. A ``join: ANY`` node runs when any edge is DONE, is not run when none is and one is
BLOCKED, else SKIPPED. An ``onFailure`` node runs only when the node naming it FAILED, and is SKIPPED ("no failure")
once that node ended otherwise. A provider node (§7) whose consumers were all skipped by a decision is SKIPPED ("not
needed"). A node with none of this (a plain ``dependsOn``, no skipped branch upstream) is left to part 2's rule.

Every run-or-skip ruling of such a node is a :class:`~.state.Decision` appended to the task the moment it is made;
scheduling reads a stored decision back and never evaluates that node again, so a resume after a restart follows the
stored path even if the data it was decided on changed since.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .conditions import describe, evaluate_condition
from .state import FINAL_NODE_STATUSES, Decision, Evidence, Join, NodeKind, NodeState, NodeStatus, TaskState


class Outcome(Enum):
    """How an edge into a pending node ended (see the module docstring); ``OPEN`` while its upstream is not final."""

    OPEN = "OPEN"
    DONE = "DONE"
    NOT_TAKEN = "NOT_TAKEN"
    BLOCKED = "BLOCKED"


class FailureState(Enum):
    """A FAILED node's failure: handled (its onFailure chain ran DONE), still open, or unhandled."""

    RECOVERED = "RECOVERED"
    OPEN = "OPEN"
    FAILED = "FAILED"


@dataclass(frozen=True)
class Ruling:
    """What happens to a pending node: ``status`` None means it runs (it stays PENDING until it starts)."""

    status: NodeStatus | None
    reason: str
    decision: bool = True  # a branch decision to record (False: part 2's not-run rule, or a stored decision)


def label(node: NodeState) -> str:
    """``n1 (shop.stock)``: the node's plan id (else its id) and skill."""
    return f"{node.plan_id or node.id} ({node.skill_key})"


def failure_state(node: NodeState, graph: Mapping[str, NodeState]) -> FailureState:
    """Whether the failure of a FAILED ``node`` was handled: its onFailure node ran DONE, or FAILED with its own
    failure handled in turn (the plan is acyclic; ``seen`` guards a stored graph anyway)."""
    current, seen = node, set()
    while current.status is NodeStatus.FAILED and current.on_failure is not None and current.id not in seen:
        seen.add(current.id)
        handler = graph.get(current.on_failure)
        if handler is None:
            break
        if handler.status is NodeStatus.DONE:
            return FailureState.RECOVERED
        if handler.status not in FINAL_NODE_STATUSES:
            return FailureState.OPEN
        current = handler
    return FailureState.FAILED


def recovered(node: NodeState, graph: Mapping[str, NodeState]) -> bool:
    """A FAILED node whose failure its onFailure node handled: it does not fail the task."""
    return (
        node.on_failure is not None
        and node.status is NodeStatus.FAILED
        and failure_state(node, graph) is FailureState.RECOVERED
    )


class Branches:
    """The rulings of one scheduling pass over a task (its decisions and onFailure edges read once)."""

    def __init__(self, task: TaskState, graph: Mapping[str, NodeState], evidence: Sequence[Evidence]) -> None:
        self.task = task
        self.graph = graph
        self.evidence = evidence
        self.decided = {d.node: d for d in task.decisions}
        self.sources = {n.on_failure: n.id for n in graph.values() if n.on_failure is not None}

    def record(self, node: NodeState, ruling: Ruling) -> None:
        """Store the decision about ``node`` as a task fact (it is saved with the task)."""
        decision = Decision(node.id, ruling.status is None, ruling.reason)
        self.task.decisions.append(decision)
        self.decided[node.id] = decision

    def not_taken(self, node_id: str) -> bool:
        """Whether a decision skipped the node (a branch not taken, unlike a §7 skip of a provider)."""
        decision = self.decided.get(node_id)
        return decision is not None and not decision.taken

    def rule(self, node: NodeState) -> Ruling | None:
        """The ruling on a pending node, or None: it waits, or part 2's rule (or a stored decision) lets it run."""
        stored = self.decided.get(node.id)
        if stored is not None:  # decided once: never evaluated again
            return None if stored.taken else Ruling(NodeStatus.SKIPPED, stored.reason, decision=False)
        source = self.sources.get(node.id)
        branching = bool(node.when) or node.join is Join.ANY or source is not None
        if node.kind is NodeKind.PROVIDER and self.decided and not branching:
            consumers = [n for n in self.graph.values() if node.id in n.depends_on]
            if consumers and all(self.not_taken(n.id) for n in consumers):
                return Ruling(NodeStatus.SKIPPED, "not needed: every node it provides for was skipped")
        reasons: list[str] = []
        if source is not None:
            failing = self.graph[source]
            if failing.status not in FINAL_NODE_STATUSES:
                return None
            if failing.status is not NodeStatus.FAILED:
                return Ruling(NodeStatus.SKIPPED, f"no failure: {label(failing)} {failing.status.value}")
            reasons.append(f"{label(failing)} FAILED (this is its onFailure node)")
        edges = [(self.graph[d], *self.edge(self.graph[d], node.when.get(d))) for d in node.depends_on]
        if node.join is Join.ANY:
            return self._any(edges)
        for upstream, outcome, _why in edges:
            if outcome is Outcome.BLOCKED:
                return _not_run(upstream)
        for upstream, outcome, why in edges:
            if outcome is Outcome.NOT_TAKEN and upstream.id in node.when:
                return Ruling(NodeStatus.SKIPPED, f"condition not met: {why}")
        if any(outcome is Outcome.OPEN for _, outcome, _ in edges):
            return None
        skipped = [why for _, outcome, why in edges if outcome is Outcome.NOT_TAKEN]
        if not branching and not skipped:
            return None  # a plain node: part 2's rule runs it
        if edges and len(skipped) == len(edges):
            return Ruling(NodeStatus.SKIPPED, "every upstream node was skipped: " + "; ".join(skipped))
        reasons += [why for _, outcome, why in edges if outcome is Outcome.DONE]
        return Ruling(None, "runs: " + "; ".join(reasons + skipped))

    def _any(self, edges: list[tuple[NodeState, Outcome, str]]) -> Ruling | None:
        if any(outcome is Outcome.OPEN for _, outcome, _ in edges):
            return None
        done = [why for _, outcome, why in edges if outcome is Outcome.DONE]
        if done:
            return Ruling(None, "runs (join ANY): " + "; ".join(done))
        blocked = next((upstream for upstream, outcome, _ in edges if outcome is Outcome.BLOCKED), None)
        if blocked is not None:
            return _not_run(blocked)
        return Ruling(NodeStatus.SKIPPED, "no upstream node DONE (join ANY): " + "; ".join(w for _, _, w in edges))

    def edge(self, upstream: NodeState, condition: Mapping[str, Any] | None) -> tuple[Outcome, str]:
        """The outcome of the edge from ``upstream`` (with its condition, if any) and why."""
        status = upstream.status
        if status not in FINAL_NODE_STATUSES:
            return Outcome.OPEN, ""
        if status is NodeStatus.FAILED:
            state = failure_state(upstream, self.graph)
            if state is FailureState.OPEN:
                return Outcome.OPEN, ""
            if state is FailureState.RECOVERED:
                return Outcome.NOT_TAKEN, f"{label(upstream)} FAILED and its onFailure node ran"
            return Outcome.BLOCKED, ""
        if status is NodeStatus.CANCELLED:
            return Outcome.BLOCKED, ""
        if status is NodeStatus.SKIPPED and self.not_taken(upstream.id):
            return Outcome.NOT_TAKEN, f"{label(upstream)} was skipped"
        if condition is None:
            return Outcome.DONE, f"{label(upstream)} {status.value}"
        if status is not NodeStatus.DONE:
            return Outcome.NOT_TAKEN, f"{label(upstream)} {describe(condition)}: not evaluated, it was {status.value}"
        holds, seen = evaluate_condition(condition, upstream, self.evidence)
        verdict = "true" if holds else "false"
        return (
            Outcome.DONE if holds else Outcome.NOT_TAKEN
        ), f"{label(upstream)} {describe(condition)}: {verdict} ({seen})"


def _not_run(upstream: NodeState) -> Ruling:
    """Part 2's rule, word for word: a node whose upstream FAILED or was CANCELLED is not run."""
    reason = f"not run: upstream node {upstream.id} ({upstream.skill_key}) {upstream.status}"
    return Ruling(NodeStatus.CANCELLED, reason, decision=False)
