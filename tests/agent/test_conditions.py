"""Conditions and branch rulings without a database (conditions.py, branches.py, graph.settle / next_node /
verdict / view): each op on outputs and evidence (an empty result, paths, the newest succeeded record of the
upstream node only), the join rules and their edge cases, onFailure chains, stored decisions read back instead of
evaluated, and the graph view's additions. The end-to-end paths with restarts are in test_branches.py."""

from __future__ import annotations

from typing import Any

import pytest

from skillyard.agent import graph
from skillyard.agent.branches import recovered
from skillyard.agent.conditions import evaluate_condition
from skillyard.agent.state import (
    Decision,
    Evidence,
    EvidenceStatus,
    Join,
    NodeKind,
    NodeState,
    NodeStatus,
    OutputValue,
    TaskState,
    from_json,
    to_json,
)

DONE, PENDING, FAILED, SKIPPED = NodeStatus.DONE, NodeStatus.PENDING, NodeStatus.FAILED, NodeStatus.SKIPPED


def make(node_id: str, status: NodeStatus = PENDING, depends: list[str] | None = None, **extra: Any) -> NodeState:
    return NodeState(node_id, "t1", f"shop.{node_id}", "goal", status=status, plan_id=node_id, depends_on=depends or [],
                     **extra)  # fmt: skip


def record(node_id: str, seq: int, extracts: dict[str, Any], counts: dict[str, int], ok: bool = True) -> Evidence:
    evidence = Evidence(f"ev{seq}", "t1", node_id, "checkStock", {}, False, EvidenceStatus.SUCCESS)
    evidence.business_ok, evidence.extracts, evidence.counts, evidence.seq = ok, extracts, counts, seq
    return evidence


def holds(condition: dict[str, Any], node: NodeState, evidence: list[Evidence] | None = None) -> bool:
    return evaluate_condition(condition, node, evidence or [])[0]


# -- conditions --------------------------------------------------------------------------------------------------


def test_output_conditions_read_the_written_value():
    node = make("n1", DONE, outputs={"available": OutputValue(0, "EVIDENCE"), "sku": OutputValue("A", "EVIDENCE")})
    assert holds({"output": "available", "op": "EQ", "value": "0"}, node)  # §6.1: numbers compare as numbers
    assert not holds({"output": "available", "op": "NE", "value": 0}, node)
    assert not holds({"output": "available", "op": "TRUTHY"}, node)
    assert holds({"output": "available", "op": "EXISTS"}, node) and holds({"output": "sku", "op": "NOT_EMPTY"}, node)
    assert holds({"output": "sku", "op": "EQ", "value": "A"}, node)
    missing = {"output": "other", "op": "EXISTS"}
    assert not holds(missing, node) and holds({**missing, "op": "EMPTY"}, node)
    assert holds({"output": "other", "op": "NE", "value": 1}, node)  # as §6.1 NE: a missing value is not equal


def test_an_empty_result_is_empty_by_its_count():
    node = make("n1", DONE)
    empty = [record("n1", 1, {"stock": {"lots": []}}, {"lots": 0, "stock": 1})]  # data.lots not in the response
    assert holds({"evidence": "lots", "op": "EMPTY"}, node, empty)
    assert not holds({"evidence": "lots", "op": "NOT_EMPTY"}, node, empty)
    assert not holds({"evidence": "lots", "op": "EXISTS"}, node, empty)
    assert evaluate_condition({"evidence": "lots", "op": "EMPTY"}, node, empty)[1] == "0 items"
    listed = [record("n1", 1, {"lots": []}, {"lots": 0})]  # an empty list found: EXISTS, and EMPTY by its count
    assert holds({"evidence": "lots", "op": "EXISTS"}, node, listed) and holds(
        {"evidence": "lots", "op": "EMPTY"}, node, listed
    )


def test_evidence_paths_read_inside_the_extract():
    node = make("n1", DONE)
    evidence = [record("n1", 1, {"stock": {"total": 5, "lots": [{"lot": "L1"}, {"lot": "L2"}]}}, {"stock": 1})]
    assert holds({"evidence": "stock.total", "op": "EQ", "value": "5"}, node, evidence)
    assert holds({"evidence": "stock.lots.1.lot", "op": "EQ", "value": "L2"}, node, evidence)
    assert holds({"evidence": "stock.missing", "op": "EMPTY"}, node, evidence)
    assert not holds({"evidence": "stock.missing", "op": "EXISTS"}, node, evidence)
    assert evaluate_condition({"evidence": "stock.total", "op": "TRUTHY"}, node, evidence) == (True, "5")
    lots = [record("n1", 1, {"lots": [{"lot": "L1"}, {"lot": "L2"}]}, {"lots": 2})]
    assert holds({"evidence": "lots[].lot", "op": "EQ", "value": ["L1", "L2"]}, node, lots)


def test_evidence_is_the_newest_succeeded_record_of_that_node():
    node = make("n1", DONE)
    evidence = [
        record("n1", 1, {"lots": [1]}, {"lots": 1}),
        record("n1", 2, {"lots": []}, {"lots": 0}),  # newer: it decides
        record("n1", 3, {"lots": [1, 2]}, {"lots": 2}, ok=False),  # a business failure: not verified
        record("n9", 4, {"lots": [1, 2, 3]}, {"lots": 3}),  # another node's
    ]
    assert holds({"evidence": "lots", "op": "EMPTY"}, node, evidence)
    assert not holds({"evidence": "lots", "op": "EMPTY"}, node, evidence[:1])
    assert not holds({"evidence": "lots", "op": "EXISTS"}, node, evidence[3:])  # nothing of n1: not found


# -- rulings -----------------------------------------------------------------------------------------------------


def task_of(*nodes: NodeState, decisions: list[Decision] | None = None) -> tuple[TaskState, dict[str, NodeState]]:
    task = TaskState("t1", "s1", node_ids=[n.id for n in nodes], decisions=list(decisions or []))
    return task, {n.id: n for n in nodes}


LOTS = [record("n1", 1, {"lots": [{"lot": "L1"}]}, {"lots": 1})]


def test_conditions_decide_once_and_a_stored_decision_is_never_evaluated_again():
    check = make("n1", DONE)
    order = make("n2", depends=["n1"], when={"n1": {"evidence": "lots", "op": "NOT_EMPTY"}})
    restock = make("n3", depends=["n1"], when={"n1": {"evidence": "lots", "op": "EMPTY"}})
    summary = make("n4", depends=["n2", "n3"], join=Join.ANY)
    task, nodes = task_of(check, order, restock, summary)
    assert graph.next_node(task, nodes) is None  # conditional nodes wait for their decision
    assert graph.settle(task, nodes, LOTS) == [restock]
    assert [(d.node, d.taken) for d in task.decisions] == [("n2", True), ("n3", False)]
    assert graph.next_node(task, nodes) is order and summary.status is PENDING
    restock.status = PENDING  # as if its status had not been saved; the stored decision still holds
    assert graph.settle(task, nodes, []) == [restock] and restock.status is SKIPPED and len(task.decisions) == 2
    order.status = DONE
    graph.settle(task, nodes, [])
    assert task.decisions[-1].node == "n4" and task.decisions[-1].taken
    assert task.decisions[-1].reason == "runs (join ANY): n2 (shop.n2) DONE"
    assert graph.next_node(task, nodes) is summary


@pytest.mark.parametrize("join", [Join.ALL, Join.ANY])
def test_a_node_whose_upstream_nodes_were_all_skipped_is_skipped(join):
    first = make("n1", SKIPPED)
    second = make("n2", SKIPPED)
    after = make("n3", depends=["n1", "n2"], join=join)
    decisions = [Decision("n1", False, "condition not met"), Decision("n2", False, "condition not met")]
    task, nodes = task_of(first, second, after, decisions=decisions)
    graph.settle(task, nodes, [])
    assert after.status is SKIPPED and task.decisions[-1] == Decision("n3", False, after.skipped_reason or "",
                                                                       task.decisions[-1].decided_at)  # fmt: skip
    expected = "every upstream node was skipped" if join is Join.ALL else "no upstream node DONE (join ANY)"
    assert after.skipped_reason is not None and after.skipped_reason.startswith(expected)


def test_a_provider_skipped_by_section_7_still_passes_a_plain_node():
    provider = make("p", SKIPPED, kind=NodeKind.PROVIDER, skipped_reason="its shared outputs already exist: x")
    after = make("n1", depends=["p"])
    task, nodes = task_of(provider, after)
    assert graph.settle(task, nodes, []) == [] and task.decisions == [] and graph.next_node(task, nodes) is after


def test_under_all_a_false_condition_skips_before_the_other_upstream_nodes_end():
    check = make("n1", DONE)
    other = make("n0")
    order = make("n2", depends=["n1", "n0"], when={"n1": {"evidence": "lots", "op": "EMPTY"}})
    task, nodes = task_of(check, other, order)
    graph.settle(task, nodes, LOTS)
    assert order.status is SKIPPED and order.skipped_reason == (
        "condition not met: n1 (shop.n1) evidence lots EMPTY: false (1 item)"
    )


def test_an_on_failure_node_waits_for_its_source_then_runs_or_is_skipped():
    source = make("n1", NodeStatus.RUNNING, on_failure="n2")
    handler = make("n2")
    after = make("n3", depends=["n1"])
    task, nodes = task_of(source, handler, after)
    graph.settle(task, nodes, [])
    assert graph.next_node(task, nodes) is None and task.decisions == []
    source.status = FAILED
    graph.settle(task, nodes, [])
    assert after.status is PENDING  # its upstream's failure may still be handled
    assert task.decisions[-1].node == "n2" and graph.next_node(task, nodes) is handler
    handler.status = DONE
    graph.settle(task, nodes, [])
    assert after.status is SKIPPED and after.skipped_reason == (
        "every upstream node was skipped: n1 (shop.n1) FAILED and its onFailure node ran"
    )
    assert recovered(source, nodes) and graph.verdict(task, nodes) is DONE


@pytest.mark.parametrize(
    ("status", "reason"),
    [(DONE, "no failure: n1 (shop.n1) DONE"), (NodeStatus.CANCELLED, "no failure: n1 (shop.n1) CANCELLED")],
)
def test_an_on_failure_node_without_a_failure_is_skipped(status, reason):
    source = make("n1", status, on_failure="n2")
    handler = make("n2")
    task, nodes = task_of(source, handler)
    graph.settle(task, nodes, [])
    assert handler.status is SKIPPED and handler.skipped_reason == reason
    # a user's cancel still cancels the task: the skipped handler does not turn it into a failure
    assert graph.verdict(task, nodes) is (DONE if status is DONE else NodeStatus.CANCELLED)


@pytest.mark.parametrize(
    ("last", "after_status", "verdict"),
    [(DONE, SKIPPED, DONE), (FAILED, NodeStatus.CANCELLED, FAILED), (PENDING, PENDING, FAILED)],
)
def test_a_failed_on_failure_node_fails_the_task_unless_its_own_on_failure_ran(last, after_status, verdict):
    source = make("n1", FAILED, on_failure="n2")
    handler = make("n2", FAILED, on_failure="n3")
    after = make("n4", depends=["n1"])
    task, nodes = task_of(source, handler, make("n3", last), after)
    graph.settle(task, nodes, [])
    assert after.status is after_status  # PENDING: n1's failure may still be handled by n2's onFailure node
    assert recovered(source, nodes) is recovered(handler, nodes) is (last is DONE)
    assert graph.verdict(task, nodes) is verdict


def test_join_any_runs_with_one_upstream_done_even_if_another_failed():
    failed = make("n1", FAILED)
    done = make("n2", DONE)
    after = make("n3", depends=["n1", "n2"], join=Join.ANY)
    task, nodes = task_of(failed, done, after)
    graph.settle(task, nodes, [])
    assert after.status is PENDING and graph.next_node(task, nodes) is after
    assert graph.verdict(task, nodes) is FAILED  # the unhandled failure still fails the task


def test_a_plain_graph_makes_no_decision_and_keeps_part_2():
    failed = make("n1", FAILED)
    after = make("n2", depends=["n1"])
    free = make("n3")
    task, nodes = task_of(failed, after, free)
    assert graph.settle(task, nodes, []) == []
    assert after.status is NodeStatus.CANCELLED and after.skipped_reason == "not run: upstream node n1 (shop.n1) FAILED"
    assert task.decisions == [] and graph.next_node(task, nodes) is free


# -- state and view ----------------------------------------------------------------------------------------------


def test_the_new_fields_round_trip_and_old_rows_load_with_their_defaults():
    task = TaskState("t1", "s1", decisions=[Decision("n2", False, "condition not met", 12.5)])
    node = make("n2", depends=["n1"], when={"n1": {"output": "x", "op": "EQ", "value": 1}}, on_failure="n3",
                join=Join.ANY)  # fmt: skip
    assert from_json(TaskState, to_json(task)) == task and from_json(NodeState, to_json(node)) == node
    assert to_json(task)["decisions"] == [
        {"node": "n2", "taken": False, "reason": "condition not met", "decided_at": 12.5}
    ]
    old_task = {k: v for k, v in to_json(TaskState("t1", "s1")).items() if k != "decisions"}
    old_node = {k: v for k, v in to_json(make("n1")).items() if k not in ("when", "on_failure", "join")}
    assert from_json(TaskState, old_task).decisions == []
    loaded = from_json(NodeState, old_node)
    assert (loaded.when, loaded.on_failure, loaded.join) == ({}, None, Join.ALL)


def test_the_view_adds_the_branch_fields_and_keeps_plain_edges():
    check = make("n1", DONE, on_failure="n5")
    order = make("n2", depends=["n1", "n0"], when={"n1": {"evidence": "lots", "op": "NOT_EMPTY"}}, join=Join.ANY)
    task, nodes = task_of(make("n0", DONE), check, order, make("n5"), decisions=[Decision("n2", True, "runs", 1.0)])
    shown = graph.view(task, nodes)
    assert shown["edges"] == [
        {"from": "n1", "to": "n2", "type": "CONDITIONAL", "when": {"evidence": "lots", "op": "NOT_EMPTY"}},
        {"from": "n0", "to": "n2", "type": "NORMAL"},
        {"from": "n1", "to": "n5", "type": "FAILURE"},
    ]
    by_id = {n["id"]: n for n in shown["nodes"]}
    assert (by_id["n2"]["when"], by_id["n2"]["join"], by_id["n1"]["on_failure"]) == (order.when, "ANY", "n5")
    assert (by_id["n0"]["when"], by_id["n0"]["join"], by_id["n0"]["on_failure"]) == ({}, "ALL", None)
    assert shown["decisions"] == [{"node": "n2", "taken": True, "reason": "runs", "decided_at": 1.0}]
    assert graph.upstream_ids(nodes["n5"], nodes) == ["n1"]  # an onFailure node sees the failed node's evidence
