"""The response contract (chain/response.py, §6.1–§6.2): success specs and ops, business failures and their codes,
empty and blank responses."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from skillyard.agent.codes import ErrorCode
from skillyard.agent.state import EvidenceStatus
from support.agent import exec as exec_kit
from support.agent import keeper as keeper_kit
from support.agent.chain import BASE_CONTRACT, with_tool
from support.agent.exec import (
    BUSINESS,
    OK200,
    ExecAgent,
    add,
    assert_coded,
    executions,
    follow_up,
    kind_params,
    obs,
    statuses,
)
from support.agent.keeper import KeeperAgent
from support.agent.notes import NotesAgent, send_once
from support.agent.probes import call, codes, finish, needs_db, say


def content(o: Any) -> str:
    return o.content if isinstance(o.content, str) else json.dumps(o.content, ensure_ascii=False)


async def evidence_record(env: ExecAgent, sid: str, first: list[dict[str, Any]], evidence_id: str) -> dict[str, Any]:
    """builtin_evidence_get of `evidence_id`, asked in a second turn of the same session (the script continues)."""
    turn = await env.send(*first, call("builtin_evidence_get", {"evidenceId": evidence_id}), exec_kit.say(), sid=sid)
    [o] = obs(turn, "builtin_evidence_get")
    assert o.ok, o
    return o.content if isinstance(o.content, dict) else json.loads(o.content)


@needs_db
async def test_business_failures_carry_the_contract_code_or_tool_business_failed(notes_agent: NotesAgent):
    result = await send_once(
        notes_agent,
        "找笔记",
        call("findNotes", {"mode": "business"}),
        call("lookupOwner", {"mode": "business"}),
        say("都失败了"),
    )
    assert codes(result) == ["E42", "agent_runtime.40004"]  # findNotes has error.code; lookupOwner has none
    assert "duplicate title" in str(result.observations[0].content)
    assert len(notes_agent.calls()) == 2
    assert [(e["status"], e["business_ok"]) for e in result.evidence] == [("SUCCESS", False), ("SUCCESS", False)]
    assert result.status == "RUNNING"


@needs_db
async def test_an_unconfigured_business_tool_runs_with_the_default_rules(keeper_agent: KeeperAgent):
    result = await keeper_kit.send_once(
        keeper_agent, "x", call("plainTool", {"q": "anything", "extra": 1}), say("stop")
    )
    assert codes(result) == [None] and result.observations[0].ok
    assert [(e["status"], e["business_ok"]) for e in result.evidence] == [("SUCCESS", True)]
    assert keeper_agent.calls("plainTool")[0]["key"] is None  # read-only: no idempotency key, no approval


@pytest.mark.spec("§6.1", "§4", "§10.2")
@needs_db
@pytest.mark.parametrize("kind", kind_params())
async def test_read_success_is_ok_evidence_success_and_runs_once(exec_agent: ExecAgent, server, kind: str):
    """§6.1 no success spec: a call that does not fail is a success; evidence SUCCESS, businessOk true; the §4 label
    is a progress event; the node may finish on it (§10.2 step 5); exactly one real execution."""
    srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool)
    turn = await exec_agent.send(call(tool, {"mode": "ok", "title": "季度总结"}), finish("查到了"))
    [o] = obs(turn, tool)
    assert o.ok and o.code is None, o
    assert "r1" in content(o) and "季度总结" in content(o)
    assert statuses(turn, tool) == [("SUCCESS", True)]
    assert {"type": "tool", "tool": tool, "label": f"正在查询{tool}"} in turn.events, turn.events
    assert turn.status == "DONE", turn.as_dict()
    assert executions(exec_agent, srv, kind, tool) == 1


@needs_db
@pytest.mark.parametrize("kind", kind_params(["py", "node", "http"]))
async def test_read_business_failure_envelope(exec_agent: ExecAgent, server, kind: str):
    """Issue: a failure envelope (ok false, no exception, no timeout) is a business failure: evidence SUCCESS,
    businessOk false, TOOL_BUSINESS_FAILED (no error.code configured) and a next step; no retry."""
    srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool)
    turn = await exec_agent.send(call(tool, {"mode": "business"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == BUSINESS, o
    assert o.next_step
    assert statuses(turn, tool) == [("SUCCESS", False)]
    assert executions(exec_agent, srv, kind, tool) == 1
    assert_coded(turn)


@pytest.mark.spec("§6.2", "§14.2")
@needs_db
@pytest.mark.parametrize("kind", kind_params(["cli", "http"]))
async def test_write_business_failure_uses_error_code_and_may_be_called_again(exec_agent: ExecAgent, server, kind: str):
    """§6.2: the business code comes from `error.code` (E42); the issue: business failure for writes alike (evidence
    SUCCESS, businessOk false); §14.2: a business-failed write is no obstacle to calling it again — it runs again
    (never automatically: exactly one execution per model call)."""
    srv, base = server
    tool = add(exec_agent, kind, f"{kind}Save", base)
    exec_agent.write(tool)
    args = {"mode": "business", "title": "季度总结"}
    turn = await exec_agent.send(call(tool, args), call(tool, args), exec_kit.say())
    assert [o.code for o in obs(turn, tool)] == ["E42", "E42"], turn.observations
    assert statuses(turn, tool) == [("SUCCESS", False), ("SUCCESS", False)]
    assert executions(exec_agent, srv, kind, tool) == 2
    assert_coded(turn)


@pytest.mark.spec("§6.1")
@needs_db
@pytest.mark.parametrize("kind", kind_params(["http"]))
async def test_empty_read_with_a_success_spec_that_holds_is_business_ok(exec_agent: ExecAgent, server, kind: str):
    """§6.1: `success` code == 200 holds on {code: 200, data: {records: []}} → business success although the
    extract is empty; evidence_get reports empty=true."""
    _srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool, success=OK200)
    sid = exec_agent.sid()
    first = [call(tool, {"mode": "empty"}), exec_kit.say()]
    turn = await exec_agent.send(*first, sid=sid)
    [o] = obs(turn, tool)
    assert o.ok and o.code is None, o
    assert statuses(turn, tool) == [("SUCCESS", True)]
    record = await evidence_record(exec_agent, sid, first, o.evidence_id)
    assert record.get("empty") is True and record.get("businessOk") is True, record


@pytest.mark.spec("§6.1")
@needs_db
@pytest.mark.parametrize("kind", kind_params(["sh"]))
async def test_empty_list_fails_a_truthy_success_spec(exec_agent: ExecAgent, server, kind: str):
    """§6.1 TRUTHY: an empty container is not truthy → business failure (SUCCESS, businessOk false)."""
    _srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool, success={"path": "data.records", "op": "TRUTHY"})
    turn = await exec_agent.send(call(tool, {"mode": "empty"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == BUSINESS, o
    assert statuses(turn, tool) == [("SUCCESS", False)]


@pytest.mark.spec("§6.1")
@needs_db
@pytest.mark.parametrize("kind", kind_params(["http"]))
async def test_blank_response_with_a_success_spec_is_a_business_failure(exec_agent: ExecAgent, server, kind: str):
    """§6.1 "配置了 success 而响应为空 → 业务失败": a skill answering `{}` with success EXISTS on `code`."""
    _srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool, success={"path": "code", "op": "EXISTS"}, extracts=None)
    turn = await exec_agent.send(call(tool, {"mode": "blank"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == BUSINESS, o
    assert statuses(turn, tool) == [("SUCCESS", False)]


@pytest.mark.spec("§6.1", "§6.3")
@needs_db
@pytest.mark.parametrize("kind", kind_params(["py"]))
async def test_blank_response_without_success_or_extracts_is_an_empty_success(exec_agent: ExecAgent, server, kind: str):
    """§6.1 no success → success; §6.3 "没有 extracts 时按响应结构判断是否为空": `{}` is empty (evidence_get
    empty=true), and the empty result grounds a question without expectedFields."""
    _srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool, extracts=None)
    sid = exec_agent.sid()
    first = [call(tool, {"mode": "blank"}), exec_kit.say()]
    turn = await exec_agent.send(*first, sid=sid)
    [o] = obs(turn, tool)
    assert o.ok and statuses(turn, tool) == [("SUCCESS", True)], o
    record = await evidence_record(exec_agent, sid, first, o.evidence_id)
    assert record.get("empty") is True, record


@pytest.mark.spec("§6.1")
@needs_db
async def test_http_text_response_is_a_success_without_success_spec(exec_agent: ExecAgent, server):
    """http-skills.md: a non-JSON response becomes {"output": "<body text>", "status": 200}; no success spec →
    success (§6.1)."""
    _srv, base = server
    tool = add(exec_agent, "http", "httpText", base)
    exec_agent.read(tool, extracts=None)
    turn = await exec_agent.send(call(tool, {"mode": "text"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert o.ok and "plain words" in content(o), o
    assert statuses(turn, tool) == [("SUCCESS", True)]


@needs_db
async def test_a_failure_envelope_with_a_holding_success_spec_is_still_a_business_failure(exec_agent: ExecAgent):
    """Issue / docs: a failure envelope (`ok: "false"` counts, authoring.md) is a business failure even when the
    configured success (code == 200) would hold."""
    tool = add(exec_agent, "py", "pySave")
    exec_agent.write(tool)
    turn = await exec_agent.send(call(tool, {"mode": "okfalse_200", "title": "季度总结"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code in (BUSINESS, "200"), o
    assert statuses(turn, tool) == [("SUCCESS", False)]


@needs_db
async def test_a_business_rule_failure_with_need_param_is_a_business_failure(exec_agent: ExecAgent):
    """Issue: a skill's failure envelope without exception or timeout is a business failure (SUCCESS, businessOk
    false, TOOL_BUSINESS_FAILED); only "a schema rejection of the input" is a params error. authoring.md tells skills
    to answer their own business-rule failures as `need_param` + `error_type: recoverable` (the admin-fill example):
    a skill's own answer is not the platform's schema rejection. It also grounds a bare question (docs)."""
    tool = add(exec_agent, "py", "pyFind")
    exec_agent.read(tool)
    turn = await exec_agent.send(call(tool, {"mode": "self_need_param"}), follow_up("哪个仓库？"), exec_kit.say())
    [o] = obs(turn, tool)
    assert len(exec_agent.calls(tool)) == 1
    assert (o.code, statuses(turn, tool)) == (BUSINESS, [("SUCCESS", False)]), o
    assert turn.checkpoint and turn.checkpoint["type"] == "FOLLOW_UP", turn.as_dict()


async def test_write_business_failure_uses_error_code_and_can_be_called_again(build):
    h = await build(user_messages=["保存 季度总结"])
    obs = await h.call("saveNote", {"title": "季度总结", "mode": "business"}, approved=True)
    assert not obs.ok and obs.code == "E42" and "duplicate title" in obs.content
    [record] = h.ctx.evidence
    assert record.status is EvidenceStatus.SUCCESS and record.business_ok is False
    assert (record.error_code, record.error_message) == ("E42", "duplicate title")
    again = await h.call("saveNote", {"title": "季度总结", "mode": "business"}, approved=True)
    assert again.code == "E42" and len(h.calls("saveNote")) == 2


@pytest.mark.spec("§6.2")
async def test_business_failure_code_inside_a_structured_error(build):
    """§6.2: error.code is a path into the response; a skill's failure envelope with a structured error
    ({code, message}) keeps it through the platform's normalization, so the contract finds the code."""
    contract = copy.deepcopy(BASE_CONTRACT)
    contract["tools"]["saveNote"]["error"] = {"code": "error.code", "message": "error.message"}
    h = await build(contract=contract, user_messages=["保存 季度总结"])
    obs = await h.call("saveNote", {"title": "季度总结", "mode": "structured"}, approved=True)
    assert not obs.ok and obs.code == "E77" and "库存不足" in obs.content, obs
    [record] = h.ctx.evidence
    assert (record.error_code, record.error_message, record.business_ok) == ("E77", "库存不足", False)


async def test_read_business_failure_without_error_spec(build):
    h = await build()
    obs = await h.call("findNotes", {"mode": "business"})
    assert obs.code == ErrorCode.TOOL_BUSINESS_FAILED.value == "agent_runtime.40004"
    [record] = h.ctx.evidence
    assert record.status is EvidenceStatus.SUCCESS and record.business_ok is False and not record.succeeded


async def test_eq_compares_numbers_numerically(build):
    h = await build(user_messages=["保存 季度总结"])
    obs = await h.call("saveNote", {"title": "季度总结", "mode": "code_text"}, approved=True)
    assert obs.ok and h.ctx.evidence[0].business_ok


async def test_configured_success_with_an_empty_response_is_a_business_failure(build):
    h = await build()
    obs = await h.call("findNotes", {"mode": "empty"})
    assert obs.code == ErrorCode.TOOL_BUSINESS_FAILED.value
    assert h.ctx.evidence[0].business_ok is False


async def test_empty_result_is_a_success_with_counts(build):
    h = await build()
    obs = await h.call("findNotes", {"mode": "none_found"})
    assert obs.ok
    record = h.ctx.evidence[0]
    assert record.empty and record.succeeded and record.counts == {"notes": 0}
    full = await h.call("findNotes", {})
    assert full.ok and h.ctx.evidence[1].counts == {"notes": 2} and not h.ctx.evidence[1].empty


@pytest.mark.parametrize(
    ("success", "matched"),
    [
        ({"path": "code", "op": "NE", "value": 500}, True),
        ({"path": "code", "op": "IN", "value": ["200", 201]}, True),
        ({"path": "code", "op": "NOT_IN", "value": [200]}, False),
        ({"path": "data.records", "op": "TRUTHY"}, True),
        ({"path": "data.nothing", "op": "EXISTS"}, False),
        ({"path": "data", "op": "EXISTS"}, True),
    ],
)
async def test_success_ops(build, success, matched):
    h = await build(with_tool(BASE_CONTRACT, "findNotes", success=success))
    obs = await h.call("findNotes", {})
    assert obs.ok is matched
