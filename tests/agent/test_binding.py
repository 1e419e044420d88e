"""Pinned execution bindings (orchestration requirements P0): a task suspended at an APPROVAL resumes with the
manual, contract and tool schemas it started with, in a new process; a new task uses the files on disk; a pinned
tool that is gone or now rejects the call says so (TOOL_UNREACHABLE, TOOL_SCHEMA_CHANGED); an alias keeps a
renamed tool."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skillyard import SkillYard
from support.agent.crm import IDENTITY, ORDER, RESULTS, SCHEMAS, CrmAgent
from support.agent.memo import Recorder
from support.agent.probes import call, codes, finish, needs_db

pytestmark = needs_db

MESSAGE = "给 c-7 下单 widget"


@pytest.fixture
def crm(tmp_path: Path) -> CrmAgent:
    env = CrmAgent(tmp_path)
    env.contract("order", ORDER)
    return env


def order_script(crm: CrmAgent, *after: dict) -> str:
    return crm.script(
        call("createOrder", {"customerId": "c-7", "item": "widget"}),
        call("builtin_node_approval", {"summary": "下单", "toolName": "createOrder"}),
        *after,
    )


async def suspend(crm: CrmAgent, session: str, script: str):
    async with SkillYard() as yard:
        agent = await yard.agent(crm.dir, model=script)
        asked = await agent.send(crm.sid(session), MESSAGE, identity=IDENTITY, skill_key="crm.order")
    assert asked.status == "SUSPENDED" and asked.checkpoint["type"] == "APPROVAL", asked.as_dict()
    assert "商品：widget" in asked.checkpoint["question"]
    return asked


async def confirm(crm: CrmAgent, session: str, model=None):
    async with SkillYard() as yard:  # a new process: nothing but the database carries the task over
        from skillyard.agent import resume_session

        return await resume_session(yard, crm.sid(session), "CONFIRM", model=model)


async def test_a_task_resumes_with_its_pinned_contract_and_schema_and_a_new_task_uses_the_new_ones(crm: CrmAgent):
    script = order_script(crm, finish("ordered"))
    asked = await suspend(crm, "pin", script)
    # republished while the write waits: a new label, a new optional parameter, a new description
    changed = {**ORDER["tools"]["createOrder"], "label": "Placing the order"}
    changed["args"] = {**changed["args"], "item": {"sources": ["USER"], "label": "货品"}}
    crm.contract("order", {**ORDER, "tools": {"createOrder": changed}})
    schema = {
        **SCHEMAS["createOrder"],
        "properties": {**SCHEMAS["createOrder"]["properties"], "note": {"type": "string"}},
    }
    crm.tool("createOrder", RESULTS["createOrder"], schema)
    done = await confirm(crm, "pin")
    assert done.status == "DONE" and done.reply == "ordered", done.as_dict()
    assert done.binding == asked.binding
    assert [c["input"] for c in crm.calls("createOrder")] == [{"customerId": "c-7", "item": "widget"}]
    recorder = Recorder(order_script(crm))
    async with SkillYard() as yard:
        agent = await yard.agent(crm.dir, model=recorder)
        fresh = await agent.send(crm.sid("pin-new"), MESSAGE, identity=IDENTITY, skill_key="crm.order")
    assert fresh.binding["skills"]["crm.order"] != asked.binding["skills"]["crm.order"]
    assert "货品：widget" in fresh.checkpoint["question"]
    offered = next(t for t in recorder.seen[0][1] if t["function"]["name"] == "createOrder")
    assert "note" in offered["function"]["parameters"]["properties"]


async def test_a_schema_that_now_rejects_the_pinned_call_is_tool_schema_changed(crm: CrmAgent):
    await suspend(crm, "schema", order_script(crm, call("builtin_node_fail", {"reason": "the tool changed"})))
    schema = {
        **SCHEMAS["createOrder"],
        "properties": {**SCHEMAS["createOrder"]["properties"], "currency": {"type": "string"}},
        "required": ["item", "currency"],
    }
    crm.tool("createOrder", RESULTS["createOrder"], schema)
    turn = await confirm(crm, "schema")
    assert turn.observations[0].code == "agent_runtime.42262", turn.as_dict()
    message = str(turn.observations[0].content)
    assert "currency" in message and "now required" in message
    assert crm.calls("createOrder") == [] and turn.status == "FAILED"


async def test_a_pinned_tool_that_was_removed_is_unreachable_and_reported_once(crm: CrmAgent):
    script = order_script(
        crm, call("createOrder", {"customerId": "c-7", "item": "widget"}), call("builtin_node_fail", {"reason": "gone"})
    )
    await suspend(crm, "gone", script)
    shutil.rmtree(crm.dir / "skills" / "tools" / "createOrder")
    turn = await confirm(crm, "gone")
    assert codes(turn) == ["agent_runtime.40017", "agent_runtime.40017", None], turn.as_dict()
    assert turn.observations[0].next_step
    missing = [e for e in turn.events if e.get("type") == "tool_missing"]
    assert len(missing) == 1 and missing[0]["tool"] == "createOrder"
    assert crm.calls() == []


async def test_an_alias_keeps_a_renamed_tool_for_a_pending_approval(crm: CrmAgent):
    await suspend(crm, "alias", order_script(crm, finish("ordered")))
    shutil.rmtree(crm.dir / "skills" / "tools" / "createOrder")
    crm.tool("placeOrder", RESULTS["createOrder"], SCHEMAS["createOrder"], front="aliases: [createOrder]\n")
    done = await confirm(crm, "alias")
    assert done.status == "DONE", done.as_dict()
    assert [c["input"] for c in crm.calls("placeOrder")] == [{"customerId": "c-7", "item": "widget"}]
