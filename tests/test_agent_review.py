"""Review findings of the agent runtime: each test failed before its fix (real skills, real PostgreSQL, scripted
model; the helpers are the ones of tests/test_agent_scripted.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests import test_agent_builtins as builtin_tests
from tests.test_agent_scripted import CONTRACT, IDENTITY, Env, call, codes, say, send_once

from skillyard import SkillYard
from skillyard.agent.builtins import call_builtin
from skillyard.agent.codes import ErrorCode
from skillyard.agent.store import AgentStore

pytestmark = pytest.mark.usefixtures("home", "db_env")

# the NodeContext fixtures of tests/test_agent_builtins.py (a context without the runner)
yard = builtin_tests.yard
make_ctx = builtin_tests.make_ctx
add_evidence = builtin_tests.add_evidence


@pytest.fixture
def env(tmp_path: Any) -> Env:
    return Env(tmp_path)


def copy_contract() -> dict[str, Any]:
    contract: dict[str, Any] = json.loads(json.dumps(CONTRACT))
    return contract


async def test_confirm_after_a_restart_runs_a_write_with_objects_nested_in_lists(env: Env):
    # the approval summary of a leaf holding objects (a list of lists of objects) was JSON text in key order; JSONB
    # reorders object keys, so the CONFIRM saw a "changed" summary and asked again instead of running the write
    script = env.script(
        call("saveNote", {"title": "季度总结", "grid": [[{"zeta": 1, "alpha": 2}]]}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as sy:
        agent = await sy.agent(env.dir, model=script)
        asked = await agent.send(env.sid("grid"), "保存季度总结", identity=IDENTITY)
        assert asked.checkpoint is not None and asked.checkpoint["type"] == "APPROVAL"
    async with SkillYard() as sy:  # a new process: the checkpoint comes back from JSONB
        agent = await sy.agent(env.dir, model=script)
        done = await agent.resume(env.sid("grid"), "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    assert len(env.calls("saveNote")) == 1


async def test_a_follow_up_reply_verifies_an_uncertain_write_first(env: Env):
    # §14.3: an uncertain write is settled when its node reopens — also when a FOLLOW_UP answer reopens it
    script = env.script(
        call("saveNote", {"title": "季度总结", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_follow_up", {"question": "打什么标签？", "expectedFields": ["tag"]}),
        call("builtin_node_finish", {"output": "已保存"}),
        say("还没好"),
    )
    async with SkillYard() as sy:
        agent = await sy.agent(env.dir, model=script)
        await agent.send(env.sid("fuv"), "保存季度总结", identity=IDENTITY)
        asked = await agent.resume(env.sid("fuv"), "CONFIRM")
        assert codes(asked) == ["agent_runtime.40016", None]
        assert asked.checkpoint is not None and asked.checkpoint["type"] == "FOLLOW_UP"
        assert [e["status"] for e in asked.evidence] == ["UNKNOWN"]
        done = await agent.resume(env.sid("fuv"), "REPLY", "紧急")
    assert done.status == "DONE", done.as_dict()
    assert [o.tool for o in done.observations] == ["findNotes", "builtin_node_finish"]  # the verify, then finish
    assert len(env.calls("findNotes")) == 1 and len(env.calls("saveNote")) == 1


async def test_verify_resume_asks_about_the_next_uncertain_write(env: Env):
    contract = copy_contract()
    del contract["tools"]["saveNote"]["verify"]
    env.contract(contract)
    script = env.script(
        call("saveNote", {"title": "季度总结", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        say("稍等"),
        say("继续"),
    )
    async with SkillYard() as sy:
        agent = await sy.agent(env.dir, model=script)
        await agent.send(env.sid("v2"), "保存季度总结并发备忘：开会", identity=IDENTITY)
        await agent.resume(env.sid("v2"), "CONFIRM")
        pending = await agent.resume(env.sid("v2"), "CONFIRM")
        assert [e["status"] for e in pending.evidence] == ["UNKNOWN", "UNKNOWN"]
        first = await agent.send(env.sid("v2"), "好了吗？", identity=IDENTITY)
        assert first.checkpoint is not None and first.checkpoint["tool"] == "saveNote"
        second = await agent.resume(env.sid("v2"), "CONFIRM")
    assert second.status == "SUSPENDED", second.as_dict()
    assert second.checkpoint is not None and second.checkpoint["type"] == "VERIFY"
    assert second.checkpoint["tool"] == "sendMemo"


async def test_follow_up_is_grounded_by_any_tool_that_lets_the_user_give_the_argument(env: Env):
    # two tools share the path "title": the first one (listed first) takes it from the model only, the second
    # allows USER — the follow-up asking for "title" is grounded (it was refused: the first tool "won")
    contract = copy_contract()
    tools = contract["tools"]
    finder = tools.pop("findNotes")
    finder["args"]["title"] = {"sources": ["MODEL"], "required": False}
    contract["tools"] = {"findNotes": finder, **tools}
    env.contract(contract)
    result = await send_once(
        env, "保存笔记", call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]})
    )
    assert codes(result) == [None], result.as_dict()
    assert result.checkpoint is not None and result.checkpoint["expected_fields"] == ["title"]


async def test_progress_label_without_a_contract_label_is_the_default(env: Env):
    # §4 label: empty → the MCP tool title (a skill has none) → "正在处理"; the bare tool name was shown
    result = await send_once(env, "谁负责？", call("lookupOwner", {"q": "x"}), say("ada"))
    assert result.events == [{"type": "tool", "tool": "lookupOwner", "label": "正在处理"}]


async def test_an_evidence_output_must_equal_the_response_value_as_json(make_ctx: Any):
    # builtin_output_set EVIDENCE compared with Python's ==, so true matched 1 (and [true] matched [1])
    ctx = make_ctx()
    evidence = await add_evidence(ctx, response={"code": 200, "data": {"id": True, "ids": [True]}})
    for path, value in (("data.id", 1), ("data.ids", [1])):
        written = {"key": "articleId", "value": value, "sourceType": "EVIDENCE", "sourceRef": evidence.id}
        refusal = await call_builtin(ctx, "builtin_output_set", {**written, "sourcePath": path})
        assert refusal.code == ErrorCode.SOURCE_REJECT.value, refusal.content
    accepted = {"key": "articleId", "value": True, "sourceType": "EVIDENCE", "sourceRef": evidence.id}
    assert (await call_builtin(ctx, "builtin_output_set", {**accepted, "sourcePath": "data.id"})).ok


async def test_a_follow_up_answer_enters_the_history_with_its_question_and_fields(env: Env):
    # §12: "回答进入历史时带上问题与对应参数" — the model saw the bare answer only
    script = env.script(
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
        say("好的"),
    )
    async with SkillYard() as sy:
        agent = await sy.agent(env.dir, model=script)
        asked = await agent.send(env.sid("hist"), "保存一条笔记", identity=IDENTITY)
        assert asked.checkpoint is not None and asked.checkpoint["type"] == "FOLLOW_UP"
        await agent.resume(env.sid("hist"), "REPLY", "季度总结")
        assert asked.node_id is not None
        node = await AgentStore(sy.database).load_node(asked.node_id)
        session = await AgentStore(sy.database).load_session(env.sid("hist"))
    assert node is not None and session is not None
    answer = [m["content"] for m in node.messages if m["role"] == "user"][-1]
    assert answer.startswith("季度总结") and "标题是什么？" in answer and "title" in answer
    assert session.user_messages[-1] == "季度总结"  # USER provenance still matches the bare answer


def test_an_array_template_that_fills_nothing_leaves_the_arguments_alone(make_ctx: Any):
    # lines[].code from shared.items[].code: items without a code filled nothing, yet "lines": [] was added to
    # the arguments the skill receives
    from skillyard.agent.chain import arg_binding
    from skillyard.agent.chain.base import ChainCall

    contract = {"tools": {"queryArticle": {"args": {"lines[].code": {"from": "shared.items[].code"}}}}}
    ctx = make_ctx(contract)
    ctx.task.shared["items"] = [{"name": "no code"}]
    call = ChainCall(ctx, "queryArticle", {"q": "x"}, contract=ctx.tool_contract("queryArticle"))
    call.args = {"q": "x"}
    arg_binding.bind(call)
    assert call.args == {"q": "x"} and not call.bound
    ctx.task.shared["items"] = [{"code": "A"}, {"name": "no code"}, {"code": "C"}]
    arg_binding.bind(call)
    assert call.args == {"q": "x", "lines": [{"code": "A"}, {}, {"code": "C"}]}
    assert call.sources["lines.0.code"] == "SHARED" and "lines.1.code" not in call.sources
