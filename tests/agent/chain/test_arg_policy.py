"""Stage 1 of the tool-call chain (chain/arg_policy.py, §13): the arguments are an object carrying every
schema-required argument; from / const arguments are exempt."""

from __future__ import annotations

import json

import pytest

from skillyard.agent.codes import ErrorCode
from support.agent import exec as exec_kit
from support.agent.exec import ExecAgent, add, default_schema, notes_skill, obs
from support.agent.memo import ARG_REJECTED, MemoAgent, send_once
from support.agent.probes import call, codes, needs_db, say

ARG_REJECTED_EXEC = "agent_runtime.40032"


@pytest.mark.spec("§13")
@needs_db
async def test_from_and_const_arguments_are_exempt_from_the_schema_required_check(memo_agent: MemoAgent):
    """§13 stage 1: saveNote's schema requires title and owner; owner is bound from platform.userId, pickTool's
    required kind is a const: neither call is ARG_REJECTED for the argument the model left out."""
    turn = await send_once(
        memo_agent,
        "保存季度总结",
        call("saveNote", {"title": "季度总结"}),
        call("pickTool", {"kind": "model-made"}),
        call("saveNote", {"owner": "42"}),  # title is required by the schema and not bound: ARG_REJECTED
        say("stop"),
    )
    assert codes(turn) == ["agent_runtime.42221", None, ARG_REJECTED]
    assert turn.observations[0].sources["owner"] == "PLATFORM"
    assert turn.observations[1].sources["kind"] == "CONTRACT"
    assert memo_agent.calls("pickTool")[0]["input"]["kind"] == "fixed"  # const overrides the model


@needs_db
async def test_business_tool_arguments_that_are_not_an_object(memo_agent: MemoAgent):
    turn = await send_once(memo_agent, "x", call("findNotes", "[1, 2]"), call("findNotes", '"text"'), say("stop"))
    assert codes(turn) == [ARG_REJECTED, ARG_REJECTED] and memo_agent.calls() == []


@pytest.mark.spec("§13")
@needs_db
async def test_a_missing_schema_required_argument_is_refused_before_the_call(exec_agent: ExecAgent, server):
    """§13 step 1: the tool's schema `required` is checked by the arg policy: ARG_REJECTED, no evidence, no run —
    the same for a subprocess and an HTTP tool."""
    srv, base = server
    schema = default_schema() | {"required": ["title"]}
    add(exec_agent, "sh", "shFind", schema=schema)
    add(exec_agent, "http", "httpFind", base, schema=schema)
    exec_agent.read("shFind")
    exec_agent.read("httpFind")
    turn = await exec_agent.send(call("shFind", {"mode": "ok"}), call("httpFind", {"mode": "ok"}), exec_kit.say())
    assert [o.code for o in turn.observations[:2]] == [ARG_REJECTED_EXEC, ARG_REJECTED_EXEC], turn.observations
    assert turn.evidence == []
    assert exec_agent.calls() == [] and srv.hits == []


@pytest.mark.spec("§13")
@needs_db
async def test_subcommand_required_field_is_checked_by_the_arg_policy(exec_agent: ExecAgent):
    """§13 step 1 against the subcommand's own schema (`add` requires `text`): ARG_REJECTED, nothing runs."""
    notes_skill(exec_agent)
    turn = await exec_agent.send(call("notes__add", {"mode": "ok"}), exec_kit.say())
    assert [o.code for o in obs(turn, "notes__add")] == [ARG_REJECTED_EXEC]
    assert turn.evidence == [] and exec_agent.calls() == []


async def test_schema_required_missing_is_rejected_but_from_args_are_exempt(build):
    h = await build()
    obs = await h.call("saveNote", json.dumps({"secret": "x"}))
    assert obs.code == ErrorCode.ARG_REJECTED.value
    assert "title" in obs.content and "owner" not in obs.content  # owner comes from platform.userId
    assert "saveNote" in obs.next_step
    assert h.calls() == [] and h.ctx.evidence == []


@needs_db
async def test_arguments_nested_too_deeply_or_not_unicode_are_refused_before_the_call(memo_agent: MemoAgent):
    """Hardening issue 17: a model's 100,000-deep argument made the chain raise RecursionError."""
    deep = '{"query": ' + "[" * 100_000 + "]" * 100_000 + "}"
    medium = '{"query": ' + "[" * 100 + "]" * 100 + "}"
    broken = '{"query": "\\ud800"}'
    turn = await send_once(
        memo_agent, "x", call("findNotes", deep), call("findNotes", medium), call("findNotes", broken), say("stop")
    )
    assert codes(turn) == [ARG_REJECTED, ARG_REJECTED, ARG_REJECTED] and memo_agent.calls() == []
    assert "nested more than 64 levels" in turn.observations[0].content
    assert "surrogate pair" in turn.observations[2].content
