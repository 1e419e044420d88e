"""Branches and joins in the task graph (orchestration P2), end to end on the scripted model and PostgreSQL: the
plan "check stock; if any, create the order, else notify restock; then a summary" takes each branch on different
data, with a restart (a new SkillYard on the same database) between every suspend and its resume; decisions are
stored task facts that a restart never re-decides, even when the data they read changed; onFailure nodes, join ANY,
skips that propagate, provider nodes no longer needed, and plans refused for conditions they may not state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.store import AgentStore
from support.agent.crm import IDENTITY as CRM_IDENTITY
from support.agent.crm import CrmAgent, node, plan
from support.agent.memo import EvModel
from support.agent.probes import call, finish, needs_db
from support.agent.shop import IDENTITY, ShopAgent, when

pytestmark = needs_db

HAS_LOTS = when("n1", evidence="lots", op="NOT_EMPTY")
NO_LOTS = when("n1", evidence="lots", op="EMPTY")


@pytest.fixture
def shop(tmp_path: Path) -> ShopAgent:
    return ShopAgent(tmp_path)


def stock_plan(*more: dict[str, Any], **order: Any) -> dict[str, Any]:
    """The plan of the issue: n1 checks, n2 orders if there are lots, n3 asks for a restock if there are none, n4
    sums up after either (join ANY); ``order`` adds fields to n2 (``onFailure``), ``more`` adds nodes."""
    return plan(
        node("n1", "shop.stock", "check the stock"),
        {**node("n2", "shop.order", "order it", [HAS_LOTS]), **order},
        node("n3", "shop.restock", "ask for a restock", [NO_LOTS]),
        {**node("n4", "shop.summary", "sum up", ["n2", "n3"]), "join": "ANY"},
        *more,
    )


def approve(tool: str, sku: str, **extra: Any) -> list[dict[str, Any]]:
    """The write ``tool`` refused for approval, then the approval asked for (the node suspends)."""
    return [call(tool, {"sku": sku, **extra}), call("builtin_node_approval", {"summary": "确认", "toolName": tool})]


def by_plan(turn) -> dict[str, dict[str, Any]]:
    return {n["plan_id"]: n for n in turn.graph["nodes"] if n["plan_id"]}


def statuses(turn) -> dict[str, str]:
    return {key: n["status"] for key, n in by_plan(turn).items()}


def decided(turn) -> dict[str, bool]:
    """plan id → taken, for every decision of the task."""
    ids = {n["id"]: n["plan_id"] or n["id"] for n in turn.graph["nodes"]}
    return {ids[d["node"]]: d["taken"] for d in turn.graph["decisions"]}


async def restart_and(shop: ShopAgent, model: Any, session: str, action: str, text: str | None = None):
    """A new process (a new SkillYard on the same database) resumes the session."""
    async with SkillYard() as yard:
        agent = await yard.agent(shop.dir, model=model)
        return await agent.resume(shop.sid(session), action, text)


async def send(shop: ShopAgent, session: str, message: str, model: Any):
    async with SkillYard() as yard:
        agent = await yard.agent(shop.dir, model=model)
        return await agent.send(shop.sid(session), message, identity=IDENTITY)


async def stored(task_id: str):
    async with SkillYard() as yard:
        store = AgentStore(yard.database)
        task = await store.load_task(task_id)
        nodes = {n.plan_id or n.id: n for n in await store.load_nodes(task_id)}
        return task, nodes, store


async def test_in_stock_the_order_branch_runs_across_a_restart_and_the_summary_joins(shop: ShopAgent):
    model = shop.script(
        stock_plan(node("n5", "shop.alert", "tell sales"), onFailure="n5"),
        call("checkStock", {"sku": "A"}),
        finish("A has 2 lots"),
        *approve("createOrder", "A"),
        finish("ordered A"),
        finish("A was ordered"),
    )
    asked = await send(shop, "stock", "订购 A", model)
    assert asked.status == "SUSPENDED" and asked.checkpoint["type"] == "APPROVAL", asked.as_dict()
    assert statuses(asked) == {"n1": "DONE", "n2": "SUSPENDED", "n3": "SKIPPED", "n4": "PENDING", "n5": "PENDING"}
    assert decided(asked) == {"n2": True, "n3": False}
    nodes = by_plan(asked)
    assert nodes["n3"]["skipped_reason"] == "condition not met: n1 (shop.stock) evidence lots EMPTY: false (2 items)"
    assert nodes["n2"]["when"] == {nodes["n1"]["id"]: {"evidence": "lots", "op": "NOT_EMPTY"}}
    assert nodes["n2"]["on_failure"] == nodes["n5"]["id"] and nodes["n4"]["join"] == "ANY"
    assert nodes["n1"]["when"] == {} and nodes["n1"]["on_failure"] is None and nodes["n1"]["join"] == "ALL"
    edges = asked.graph["edges"]
    conditional = {"from": nodes["n1"]["id"], "to": nodes["n2"]["id"], "type": "CONDITIONAL"}
    assert {**conditional, "when": {"evidence": "lots", "op": "NOT_EMPTY"}} in edges
    assert {"from": nodes["n2"]["id"], "to": nodes["n4"]["id"], "type": "NORMAL"} in edges
    assert {"from": nodes["n2"]["id"], "to": nodes["n5"]["id"], "type": "FAILURE"} in edges
    task, saved, _ = await stored(asked.task_id)  # the decisions and the skip are facts in the database
    assert task is not None and [(d.node, d.taken) for d in task.decisions] == [
        (nodes["n2"]["id"], True),
        (nodes["n3"]["id"], False),
    ]
    assert saved["n3"].status.value == "SKIPPED" and saved["n3"].skipped_reason == nodes["n3"]["skipped_reason"]
    before = [d.decided_at for d in task.decisions]

    done = await restart_and(shop, model, "stock", "CONFIRM")
    assert done.status == "DONE" and done.reply == "A was ordered", done.as_dict()
    assert statuses(done) == {"n1": "DONE", "n2": "DONE", "n3": "SKIPPED", "n4": "DONE", "n5": "SKIPPED"}
    assert by_plan(done)["n5"]["skipped_reason"] == "no failure: n2 (shop.order) DONE"
    assert decided(done) == {"n2": True, "n3": False, "n5": False, "n4": True}
    assert [d["decided_at"] for d in done.graph["decisions"][:2]] == before  # not decided again
    assert [c["tool"] for c in shop.calls()] == ["checkStock", "createOrder"]


async def test_a_plain_plan_keeps_part_2_and_its_pending_node_survives_a_restart(shop: ShopAgent):
    """No branch fields: NORMAL edges, no decisions; the node still PENDING while its upstream is suspended was
    saved with the first turn, so a new process runs it after the resume."""
    model = shop.script(
        plan(node("n1", "shop.order", "order A"), node("n2", "shop.summary", "sum up", ["n1"])),
        *approve("createOrder", "A"),
        finish("ordered A"),
        finish("A was ordered"),
    )
    asked = await send(shop, "plain", "订购 A", model)
    assert asked.status == "SUSPENDED" and statuses(asked) == {"n1": "SUSPENDED", "n2": "PENDING"}
    assert asked.graph["decisions"] == [] and [e["type"] for e in asked.graph["edges"]] == ["NORMAL"]
    done = await restart_and(shop, model, "plain", "CONFIRM")
    assert done.status == "DONE" and done.reply == "A was ordered", done.as_dict()
    assert statuses(done) == {"n1": "DONE", "n2": "DONE"} and done.graph["decisions"] == []


async def test_out_of_stock_the_restock_branch_runs_on_output_conditions_across_a_restart(shop: ShopAgent):
    """Other data, the other branch: conditions on n1's verified output ``available`` (EQ / NE 0); the summary
    joins with ALL, so the skipped order node is left out and the restock node DONE is enough."""
    model = EvModel(
        shop.script(
            plan(
                node("n1", "shop.stock", "check the stock"),
                node("n2", "shop.order", "order it", [when("n1", output="available", op="NE", value=0)]),
                node("n3", "shop.restock", "ask for a restock", [when("n1", output="available", op="EQ", value="0")]),
                node("n4", "shop.summary", "sum up", ["n2", "n3"]),
            ),
            call("checkStock", {"sku": "B"}),
            call(
                "builtin_output_set",
                {
                    "key": "available",
                    "value": 0,
                    "sourceType": "EVIDENCE",
                    "sourceRef": "$EV",
                    "sourcePath": "data.total",
                },
            ),
            finish("B is out of stock"),
            *approve("notifyRestock", "B"),
            finish("restock asked"),
            finish("B is out of stock; a restock was asked for"),
        )
    )
    asked = await send(shop, "nostock", "订购 B", model)
    assert asked.status == "SUSPENDED" and asked.checkpoint["tool"] == "notifyRestock", asked.as_dict()
    assert statuses(asked) == {"n1": "DONE", "n2": "SKIPPED", "n3": "SUSPENDED", "n4": "PENDING"}
    assert (
        by_plan(asked)["n2"]["skipped_reason"] == "condition not met: n1 (shop.stock) output available NE 0: false (0)"
    )
    done = await restart_and(shop, model, "nostock", "CONFIRM")
    assert done.status == "DONE" and done.reply == "B is out of stock; a restock was asked for", done.as_dict()
    assert statuses(done) == {"n1": "DONE", "n2": "SKIPPED", "n3": "DONE", "n4": "DONE"}
    assert decided(done) == {"n2": False, "n3": True, "n4": True}
    assert [c["tool"] for c in shop.calls()] == ["checkStock", "notifyRestock"]


async def test_a_stored_decision_is_followed_after_a_restart_even_when_its_data_changed(shop: ShopAgent):
    """n1 decides n2 (taken) and n3 (skipped) before n6 suspends; in the database the stock evidence is then made
    empty and n3 set back to PENDING. The resume in a new process follows the stored decisions: n2 runs, n3 is
    skipped with its stored reason, and no decision is made again."""
    model = shop.script(
        plan(
            node("n1", "shop.stock", "check the stock"),
            node("n6", "shop.alert", "tell sales the stock was checked", ["n1"]),
            node("n2", "shop.order", "order it", [HAS_LOTS]),
            node("n3", "shop.restock", "ask for a restock", [NO_LOTS]),
            {**node("n4", "shop.summary", "sum up", ["n2", "n3"]), "join": "ANY"},
        ),
        call("checkStock", {"sku": "A"}),
        finish("A has 2 lots"),
        call("builtin_node_follow_up", {"question": "哪个商品？", "expectedFields": ["sku"]}),
        call("alertSales", {"sku": "A"}),
        finish("sales told"),
        *approve("createOrder", "A"),
        finish("ordered A"),
        finish("A was ordered"),
    )
    asked = await send(shop, "changed", "订购 A", model)
    assert asked.status == "SUSPENDED" and asked.checkpoint["type"] == "FOLLOW_UP", asked.as_dict()
    assert statuses(asked) == {"n1": "DONE", "n6": "SUSPENDED", "n2": "PENDING", "n3": "SKIPPED", "n4": "PENDING"}
    task, nodes, store = await stored(asked.task_id)
    assert task is not None
    before = [(d.node, d.taken, d.reason, d.decided_at) for d in task.decisions]
    assert [(d[0], d[1]) for d in before] == [(nodes["n2"].id, True), (nodes["n3"].id, False)]
    async with SkillYard() as yard:  # the data the decisions were made on changes behind the runtime's back
        store = AgentStore(yard.database)
        for record in await store.load_evidence(asked.task_id):
            record.extracts["lots"], record.counts["lots"] = [], 0
            await store.save_evidence(record)
        n3 = await store.load_node(nodes["n3"].id)
        assert n3 is not None
        n3.status, n3.skipped_reason = n3.status.PENDING, None
        await store.save_node(n3)
    ordered = await restart_and(shop, model, "changed", "REPLY", "A")
    assert ordered.status == "SUSPENDED" and ordered.checkpoint["tool"] == "createOrder", ordered.as_dict()
    assert by_plan(ordered)["n3"]["skipped_reason"] == before[1][2]
    done = await restart_and(shop, model, "changed", "CONFIRM")
    assert done.status == "DONE" and done.reply == "A was ordered", done.as_dict()
    task, _, _ = await stored(done.task_id)
    assert task is not None
    after = [(d.node, d.taken, d.reason, d.decided_at) for d in task.decisions]
    assert after[:2] == before and [(d[0], d[1]) for d in after[2:]] == [(nodes["n4"].id, True)]
    assert [c["tool"] for c in shop.calls()] == ["checkStock", "alertSales", "createOrder"]


async def test_a_failed_node_runs_its_on_failure_node_after_a_restart_and_the_task_does_not_fail(shop: ShopAgent):
    """The approved order fails on the business level after a restart; n2 fails, its onFailure node n5 runs
    instead of the task failing, and the summary (join ANY over n2, n3 and n5) follows it."""
    model = shop.script(
        plan(
            node("n1", "shop.stock", "check the stock"),
            {**node("n2", "shop.order", "order it", [HAS_LOTS]), "onFailure": "n5"},
            node("n3", "shop.restock", "ask for a restock", [NO_LOTS]),
            node("n5", "shop.alert", "tell sales the order failed"),
            {**node("n4", "shop.summary", "sum up", ["n2", "n3", "n5"]), "join": "ANY"},
        ),
        call("checkStock", {"sku": "A"}),
        finish("A has 2 lots"),
        *approve("createOrder", "A", mode="business"),
        call("builtin_node_fail", {"reason": "the warehouse is locked"}),
        call("alertSales", {"sku": "A"}),
        finish("sales told"),
        finish("the order failed; sales were told"),
    )
    asked = await send(shop, "fails", "订购 A", model)
    assert asked.status == "SUSPENDED" and statuses(asked)["n5"] == "PENDING", asked.as_dict()
    done = await restart_and(shop, model, "fails", "CONFIRM")
    assert done.status == "DONE" and done.reply == "the order failed; sales were told", done.as_dict()
    assert statuses(done) == {"n1": "DONE", "n2": "FAILED", "n3": "SKIPPED", "n5": "DONE", "n4": "DONE"}
    assert decided(done) == {"n2": True, "n3": False, "n5": True, "n4": True}
    reasons = {d["node"]: d["reason"] for d in done.graph["decisions"]}
    assert "n2 (shop.order) FAILED" in reasons[by_plan(done)["n5"]["id"]]
    assert [c["tool"] for c in shop.calls()] == ["checkStock", "createOrder", "alertSales"]


async def test_a_failed_node_without_on_failure_fails_the_task_as_before(shop: ShopAgent):
    model = shop.script(
        stock_plan(),
        call("checkStock", {"sku": "A"}),
        finish("A has 2 lots"),
        call("builtin_node_fail", {"reason": "the warehouse is locked"}),
    )
    turn = await send(shop, "nofallback", "订购 A", model)
    assert turn.status == "FAILED", turn.as_dict()
    assert statuses(turn) == {"n1": "DONE", "n2": "FAILED", "n3": "SKIPPED", "n4": "CANCELLED"}
    summary = by_plan(turn)["n4"]
    assert summary["skipped_reason"] == f"not run: upstream node {by_plan(turn)['n2']['id']} (shop.order) FAILED"
    assert turn.reply.startswith("the warehouse is locked") and "not run because" in turn.reply
    assert decided(turn) == {"n2": True, "n3": False}  # not running n4 is part 2's rule, not a branch decision


async def test_a_skipped_branch_skips_its_dependents_and_the_provider_it_no_longer_needs(tmp_path: Path):
    """crm.order has a provider node (crm.customer, §7): when the order's condition does not hold, the order is
    SKIPPED at once, its provider is no longer needed, and the report that depends on the order alone is SKIPPED."""
    crm = CrmAgent(tmp_path)
    model = crm.script(
        plan(
            node("n1", "crm.customer", "find Acme"),
            node("n2", "crm.order", "order for a new customer", [when("n1", evidence="customer", op="EMPTY")]),
            node("n3", "crm.report", "report the order", ["n2"]),
        ),
        call("findCustomer", {"q": "Acme"}),
        finish("Acme is c-7"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(crm.dir, model=model)
        turn = await agent.send(crm.sid("prop"), "给新客户下单", identity=CRM_IDENTITY)
    assert turn.status == "DONE" and turn.reply == "Acme is c-7", turn.as_dict()
    kinds = [(n["plan_id"], n["kind"], n["status"]) for n in turn.graph["nodes"]]
    assert kinds == [
        ("n1", "PLANNED", "DONE"),
        (None, "PROVIDER", "SKIPPED"),
        ("n2", "PLANNED", "SKIPPED"),
        ("n3", "PLANNED", "SKIPPED"),
    ]
    reasons = [n["skipped_reason"] for n in turn.graph["nodes"][1:]]
    assert reasons == [
        "not needed: every node it provides for was skipped",
        "condition not met: n1 (crm.customer) evidence customer EMPTY: false (1 item)",
        "every upstream node was skipped: n2 (crm.order) was skipped",
    ]
    assert [d["taken"] for d in turn.graph["decisions"]] == [False, False, False]
    assert [c["tool"] for c in crm.calls()] == ["findCustomer"]


async def test_a_condition_the_upstream_skill_does_not_declare_is_refused_then_the_corrected_plan_runs(
    shop: ShopAgent,
):
    bad = plan(
        node("n1", "shop.stock", "check"),
        node("n2", "shop.order", "order", [when("n1", output="inStock", op="TRUTHY")]),
    )
    good = plan(node("n1", "shop.stock", "check"), node("n2", "shop.order", "order", [HAS_LOTS]))
    model = EvModel(shop.script(bad, good, call("checkStock", {"sku": "B"}), finish("none")))
    turn = await send(shop, "refused", "订购 B", model)
    answer = model.seen[1][0][-1]["content"]
    assert (
        "nodes[1].dependsOn[0].when.output 'inStock' is not an output of skill shop.stock (outputs: available)"
    ) in answer
    assert turn.status == "DONE" and turn.graph["plan_source"] == "MODEL", turn.as_dict()
    assert statuses(turn) == {"n1": "DONE", "n2": "SKIPPED"}


async def test_a_plan_invalid_twice_for_its_branch_fields_falls_back(shop: ShopAgent):
    target_with_upstream = plan(
        {**node("n1", "shop.order", "order"), "onFailure": "n2"},
        node("n2", "shop.alert", "alert", ["n1"]),
    )
    unknown_op = plan(
        node("n1", "shop.stock"), node("n2", "shop.order", depends=[when("n1", evidence="lots", op="GT")])
    )
    model = shop.script(target_with_upstream, unknown_op, call("checkStock", {"sku": "A"}), finish("checked"))
    turn = await send(shop, "fallback", "订购", model)
    assert turn.graph["plan_source"] == "FALLBACK", turn.as_dict()
    notes = " ".join(turn.graph["plan_notes"])
    assert "nodes[1].dependsOn[0].when.op 'GT' is not a condition op" in notes
    assert [(n["skill_key"], n["status"]) for n in turn.graph["nodes"]] == [("shop.stock", "DONE")]
