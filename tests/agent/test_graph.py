"""The task graph (agent part 2): planning with builtin_plan, dependencies and evidence flowing downstream, provider
nodes inserted and skipped, delegation and its refusals, prior entities across tasks, a failed upstream node."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.agent.store import AgentStore
from support.agent.crm import CONTRACTS, IDENTITY, CrmAgent, node, plan
from support.agent.memo import EvModel
from support.agent.probes import call, codes, finish, needs_db, say

pytestmark = needs_db


@pytest.fixture
def crm(tmp_path: Path) -> CrmAgent:
    return CrmAgent(tmp_path)


def kinds(turn) -> list[tuple[str, str, str]]:
    return [(n["skill_key"], n["kind"], n["status"]) for n in turn.graph["nodes"]]


async def send(crm: CrmAgent, session: str, message: str, model, **kw):
    async with SkillYard() as yard:
        agent = await yard.agent(crm.dir, model=model)
        return await agent.send(crm.sid(session), message, identity=IDENTITY, **kw)


async def test_a_two_node_plan_runs_in_order_and_evidence_flows_downstream(crm: CrmAgent):
    script = crm.script(
        plan(node("n2", "crm.report", "list Acme's orders", ["n1"]), node("n1", "crm.customer", "find Acme")),
        call("findCustomer", {"q": "Acme"}),
        finish("Acme is c-7"),
        call("listOrders", {}),
        finish("Acme has one order"),
    )
    turn = await send(crm, "two", "Acme 的订单", script)
    assert turn.status == "DONE" and turn.reply == "Acme has one order", turn.as_dict()
    graph = turn.graph
    assert graph["plan_source"] == "MODEL"
    first, second = graph["nodes"]  # run order: n1 before n2, whatever the plan's order
    assert (first["plan_id"], first["skill_key"], second["plan_id"]) == ("n1", "crm.customer", "n2")
    assert second["depends_on"] == [first["id"]] and second["goal"] == "list Acme's orders"
    assert graph["edges"] == [{"from": first["id"], "to": second["id"], "type": "NORMAL"}]
    assert [c["input"] for c in crm.calls("listOrders")] == [{"customerId": "c-7"}]  # evidence of the upstream node
    listed = next(o for o in turn.observations if o.tool == "listOrders")
    assert listed.sources == {"customerId": "EVIDENCE"}
    assert set(turn.binding["skills"]) == {"crm.customer", "crm.report"} and turn.binding["pinned_at"]


async def test_an_invalid_plan_is_answered_once_then_the_corrected_plan_runs(crm: CrmAgent):
    model = EvModel(
        crm.script(
            plan(node("n1", "crm.nope"), node("n1", "crm.report", depends=["n9"])),
            plan(node("n1", "crm.customer")),
            call("findCustomer", {"q": "Acme"}),
            finish("found"),
        )
    )
    turn = await send(crm, "retry", "找 Acme", model)
    assert turn.status == "DONE" and turn.graph["plan_source"] == "MODEL"
    answer = model.seen[1][0][-1]
    assert answer["role"] == "tool" and "crm.nope" in answer["content"] and "used twice" in answer["content"]
    assert [t["function"]["name"] for t in model.seen[0][1]] == ["builtin_plan"]


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        (plan(node("a", "crm.report", depends=["a"])), plan(node("a", "crm.x")), "invalid twice"),
        (say("no plan from me"), None, "did not call builtin_plan"),
        (
            plan(node("a", "crm.x")),
            plan(node("a", "crm.report", depends=["b"]), node("b", "crm.customer", depends=["a"])),
            "form a cycle",
        ),
    ],
)
async def test_a_model_that_does_not_plan_validly_falls_back_to_the_first_skill(crm: CrmAgent, first, second, why):
    turns = [first] + ([second] if second is not None else []) + [call("findCustomer", {}), finish("ok")]
    turn = await send(crm, "fallback", "随便", crm.script(*turns))
    graph = turn.graph
    assert graph["plan_source"] == "FALLBACK" and kinds(turn) == [("crm.customer", "FALLBACK", "DONE")]
    assert why in " ".join(graph["plan_notes"]), graph["plan_notes"]


async def test_explicit_skill_and_a_dropped_target(crm: CrmAgent):
    explicit = await send(
        crm, "explicit", "找", crm.script(call("findCustomer", {}), finish("ok")), skill_key="crm.customer"
    )
    assert explicit.graph["plan_source"] == "EXPLICIT" and kinds(explicit) == [("crm.customer", "PLANNED", "DONE")]
    dropped = await send(
        crm,
        "target",
        "报表",
        crm.script(plan(node("n1", "crm.report", target="listOrders")), call("listOrders", {}), finish("ok")),
    )
    assert dropped.graph["nodes"][0]["target"] is None
    assert any("dropped" in n for n in dropped.graph["plan_notes"])


async def test_a_provider_node_runs_first_and_is_skipped_once_its_shared_output_exists(crm: CrmAgent):
    model = EvModel(
        crm.script(
            plan(node("n1", "crm.order", "order a widget for Acme")),
            call("findCustomer", {"q": "Acme"}),
            call(
                "builtin_output_set",
                {
                    "key": "customerId",
                    "value": "c-7",
                    "sourceType": "EVIDENCE",
                    "sourceRef": "$EV",
                    "sourcePath": "data.id",
                },
            ),
            finish("Acme is c-7"),
            call("createOrder", {"item": "widget"}),
            call("builtin_node_approval", {"summary": "下单", "toolName": "createOrder"}),
            finish("ordered"),
            # the second task: the provider is inserted again and skipped, session.customerId already exists
            plan(node("n1", "crm.order", "order a bolt")),
            call("createOrder", {"item": "bolt"}),
            call("builtin_node_approval", {"summary": "下单", "toolName": "createOrder"}),
            finish("ordered again"),
        )
    )
    asked = await send(crm, "prov", "给 Acme 下单 widget", model)
    assert asked.status == "SUSPENDED" and asked.checkpoint["type"] == "APPROVAL", asked.as_dict()
    provider, order = asked.graph["nodes"]
    assert (provider["skill_key"], provider["kind"], provider["status"]) == ("crm.customer", "PROVIDER", "DONE")
    assert order["depends_on"] == [provider["id"]] and order["kind"] == "PLANNED" and order["target"] == "createOrder"
    async with SkillYard() as yard:  # a restart between suspend and resume
        agent = await yard.agent(crm.dir, model=model)
        done = await agent.resume(crm.sid("prov"), "CONFIRM")
        assert done.status == "DONE" and done.reply == "ordered"
        node_state = await AgentStore(yard.database).load_node(order["id"])
        assert node_state is not None and node_state.inputs == {"customer": "c-7"}  # the provider's output
        again = await agent.send(crm.sid("prov"), "再下单 bolt", identity=IDENTITY)
    assert kinds(again)[0] == ("crm.customer", "PROVIDER", "SKIPPED"), again.as_dict()
    assert "customerId" in again.graph["nodes"][0]["skipped_reason"]
    assert [c["input"] for c in crm.calls("createOrder")] == [{"customerId": "c-7", "item": "widget"}]
    assert len(crm.calls("findCustomer")) == 1


async def test_a_provider_that_is_not_a_skill_of_the_agent_fails_planning(crm: CrmAgent):
    contract = {**CONTRACTS["order"], "inputs": {"customer": {"provider": "crm.elsewhere"}}}
    crm.contract("order", contract)
    turn = await send(crm, "noprov", "下单", crm.script(plan(node("n1", "crm.order"))))
    assert turn.status == "FAILED" and "PROVIDER_UNAVAILABLE" in turn.reply and "agent_runtime.42212" in turn.reply
    assert turn.graph["nodes"] == [] and crm.calls() == []


async def test_a_failed_upstream_node_stops_its_dependents_and_fails_the_task(crm: CrmAgent):
    script = crm.script(
        plan(node("n1", "crm.customer"), node("n2", "crm.report", depends=["n1"])),
        call("builtin_node_fail", {"reason": "no such customer"}),
    )
    turn = await send(crm, "upfail", "报表", script)
    assert turn.status == "FAILED"
    assert kinds(turn) == [("crm.customer", "PLANNED", "FAILED"), ("crm.report", "PLANNED", "CANCELLED")]
    assert "not run" in turn.graph["nodes"][1]["skipped_reason"] and "no such customer" in turn.reply
    assert crm.calls("listOrders") == []


async def test_delegation_runs_the_delegated_node_first_and_its_evidence_counts(crm: CrmAgent):
    script = crm.script(
        plan(node("n1", "crm.report"), node("n2", "crm.customer")),  # two planned nodes: a graph, not one skill
        call("builtin_node_delegate", {"skillKey": "crm.customer", "objective": "find Acme"}),
        call("findCustomer", {"q": "Acme"}),
        finish("Acme is c-7"),
        call("listOrders", {}),
        finish("one order"),
        call("findCustomer", {"q": "again"}),
        finish("done too"),
    )
    turn = await send(crm, "deleg", "Acme 的订单", script)
    assert turn.status == "DONE", turn.as_dict()
    nodes = {n["kind"]: n for n in turn.graph["nodes"] if n["kind"] == "DELEGATED"}
    delegated = nodes["DELEGATED"]
    report = next(n for n in turn.graph["nodes"] if n["skill_key"] == "crm.report")
    assert delegated["parent_id"] == report["id"] and delegated["goal"] == "find Acme"
    assert {"from": delegated["id"], "to": report["id"], "type": "DELEGATE"} in turn.graph["edges"]
    order = [n["id"] for n in turn.graph["nodes"]]
    assert order.index(delegated["id"]) < order.index(report["id"])
    assert [c["input"] for c in crm.calls("listOrders")] == [{"customerId": "c-7"}]  # the delegated node's evidence


async def test_delegation_refusals_and_a_failed_delegate_that_does_not_fail_the_task(crm: CrmAgent):
    report = CONTRACTS["report"]["tools"]["listOrders"]
    crm.contract(
        "report",
        {
            "tools": {
                "listOrders": {**report, "args": {"customerId": {**report["args"]["customerId"], "required": False}}}
            }
        },
    )
    script = crm.script(
        plan(node("n1", "crm.report"), node("n2", "crm.customer", depends=["n1"])),
        call("builtin_node_delegate", {"skillKey": "crm.ghost", "objective": "x"}),
        call("builtin_node_delegate", {"skillKey": "crm.order", "objective": "x"}),
        call("builtin_node_delegate", {"skillKey": "crm.report", "objective": "x"}),
        call("builtin_node_delegate", {"skillKey": "crm.customer", "objective": "find Acme"}),
        call("builtin_node_fail", {"reason": "the CRM is down"}),  # the delegated node fails
        call("builtin_node_delegate", {"skillKey": "crm.customer", "objective": "find Acme"}),
        call("listOrders", {}),
        finish("no customer, all orders"),
        call("findCustomer", {}),
        finish("n2 done"),
    )
    turn = await send(crm, "refuse", "报表", script)
    refusals = [o.code for o in turn.observations if o.tool == "builtin_node_delegate"]
    assert refusals == [
        "agent_runtime.40411",  # SKILL_NOT_FOUND
        "agent_runtime.42237",  # DELEGATE_FORBIDDEN: not delegatable
        "agent_runtime.42237",  # DELEGATE_FORBIDDEN: its own skill
        None,
        "agent_runtime.42239",  # DELEGATE_REPEATED
    ]
    assert turn.status == "DONE", turn.as_dict()
    delegated = next(n for n in turn.graph["nodes"] if n["kind"] == "DELEGATED")
    assert delegated["status"] == "FAILED"
    async with SkillYard() as yard:
        report = await AgentStore(yard.database).load_node(delegated["parent_id"])
    assert report is not None and any("the CRM is down" in str(m.get("content")) for m in report.messages)


async def test_delegation_is_not_offered_beyond_the_depth_limit(crm: CrmAgent, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SKILLYARD_AGENT_DELEGATE_MAX_DEPTH", "0")
    model = EvModel(
        crm.script(
            plan(node("n1", "crm.report"), node("n2", "crm.customer")),
            call("builtin_node_delegate", {"skillKey": "crm.customer", "objective": "x"}),
            say("ok"),
        )
    )
    turn = await send(crm, "depth", "报表", model)
    assert codes(turn) == ["agent_runtime.42237"] and "depth" in str(turn.observations[0].content)
    assert "builtin_node_delegate" not in [t["function"]["name"] for t in model.seen[1][1]]


async def test_prior_entities_flow_from_one_task_to_the_next(crm: CrmAgent):
    report = {
        "tools": {
            "listOrders": {
                "args": {"customerId": {"from": "prior.customer.id"}},
                "success": CONTRACTS["report"]["tools"]["listOrders"]["success"],
            }
        }
    }
    crm.contract("report", report)
    script = crm.script(
        call("findCustomer", {"q": "Acme"}),
        finish("Acme is c-7"),
        call("listOrders", {}),
        finish("listed"),
    )
    first = await send(crm, "prior", "找 Acme", script, skill_key="crm.customer")
    second = await send(crm, "prior", "它的订单", script, skill_key="crm.report")
    assert first.status == second.status == "DONE" and first.task_id != second.task_id
    assert [c["input"] for c in crm.calls("listOrders")] == [{"customerId": "c-7"}]
    assert second.observations[0].sources == {"customerId": "PRIOR_TASK"}


async def test_a_downstream_node_sees_its_upstream_results_and_never_the_plan_as_user_text(crm: CrmAgent):
    model = EvModel(
        crm.script(
            plan(node("n1", "crm.customer", "find Acme"), node("n2", "crm.report", "list widget orders", ["n1"])),
            call("findCustomer", {"q": "Acme"}),
            finish("Acme is c-7"),
            call("listOrders", {}),
            finish("listed"),
        )
    )
    turn = await send(crm, "upstream", "Acme 的订单", model)
    assert turn.status == "DONE"
    second_node_first_call = model.seen[3][0]
    system = second_node_first_call[0]["content"]
    assert "## Upstream results" in system and "crm.customer (DONE): Acme is c-7" in system
    assert "## Goal\nlist widget orders" in system
    users = [m["content"] for m in second_node_first_call if m["role"] == "user"]
    assert users == ["Acme 的订单"]  # the task's message; the planned goal is not said by the user
    async with SkillYard() as yard:
        session = await AgentStore(yard.database).load_session(crm.sid("upstream"))
    assert session is not None and session.user_messages == ["Acme 的订单"]


async def test_a_delegated_node_suspends_and_its_delegator_continues_after_a_restart(crm: CrmAgent):
    script = crm.script(
        plan(node("n1", "crm.report", "list Acme's orders")),
        call("builtin_node_delegate", {"skillKey": "crm.customer", "objective": "find the customer"}),
        call("findCustomer", {"mode": "business"}),  # a business failure grounds a clarifying question
        call("builtin_node_follow_up", {"question": "哪个客户？"}),
        call("findCustomer", {"q": "Acme"}),
        finish("Acme is c-7"),
        call("listOrders", {}),
        finish("one order"),
    )
    asked = await send(crm, "dsusp", "订单", script)
    assert asked.status == "SUSPENDED" and asked.checkpoint["type"] == "FOLLOW_UP", asked.as_dict()
    waiting = {n["kind"]: n["status"] for n in asked.graph["nodes"]}
    assert waiting == {"DELEGATED": "SUSPENDED", "PLANNED": "WAITING"}
    async with SkillYard() as yard:  # a new process answers the delegated node's question
        from skillyard.agent import resume_session

        done = await resume_session(yard, crm.sid("dsusp"), "REPLY", "Acme")
    assert done.status == "DONE" and done.reply == "one order", done.as_dict()
    assert [c["input"] for c in crm.calls("listOrders")] == [{"customerId": "c-7"}]
