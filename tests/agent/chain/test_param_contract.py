"""Stage 3 (chain/param_contract.py, §5.3, §5.5): missing values and their actions, enum, rejection of model values,
the priority of refusals."""

from __future__ import annotations

from typing import Any

import pytest

from skillyard.agent.codes import ErrorCode
from support.agent.chain import BASE_CONTRACT, FREE, with_tool
from support.agent.kit import ASK_USER, REJECTED, Kit
from support.agent.memo import MemoAgent, _priority, changed, last, run_builtin, send_once
from support.agent.probes import call, codes, needs_db, say

FAIL = "agent_runtime.40022"


@pytest.mark.parametrize(
    ("given", "code"),
    [
        ({"a": "made-up"}, "agent_runtime.40025"),  # REJECTED > FAIL > CALL_TOOL > ASK_USER
        ({"a": "n-1"}, "agent_runtime.40025"),  # no query yet: n-1 is no evidence
        ({}, "agent_runtime.40022"),  # a missing too (ASK_USER): FAIL wins
        ({"b": "x"}, "agent_runtime.40023"),
        ({"b": "x", "c": "y"}, "agent_runtime.40024"),
        ({"b": "x", "c": "y", "d": "z"}, "agent_runtime.40024"),  # a is missing: ASK_USER
    ],
    ids=["rejected", "rejected2", "fail", "call_tool", "ask_user", "ask_user_a"],
)
@needs_db
async def test_param_contract_priority(memo_agent: MemoAgent, given: dict[str, Any], code: str):
    memo_agent.contract(changed(_priority))
    turn = await run_builtin(memo_agent, "pickTool", given)
    assert last(turn).code == code, last(turn)
    assert memo_agent.calls() == [] and last(turn).next_step


@needs_db
async def test_param_contract_fail_carries_the_contract_message_and_call_tool_names_the_tool(memo_agent: MemoAgent):
    memo_agent.contract(changed(_priority))
    turn = await send_once(memo_agent, "x", call("pickTool", {"a": "n-1"}), call("pickTool", {"b": "x"}), say("stop"))
    assert turn.observations[0].code in ("agent_runtime.40025",)
    fail_turn = await send_once(memo_agent, "x", call("pickTool", {}), say("stop"), session="prio2")
    assert "没有乙就做不了" in f"{fail_turn.observations[0].content} {fail_turn.observations[0].next_step}"
    assert "findNotes" in str(turn.observations[1].next_step)


@needs_db
async def test_call_tool_without_a_tool_lets_the_missing_value_pass_through_the_runner(memo_agent: MemoAgent):
    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["pickTool"]["args"]["c"] = {"sources": ["MODEL"], "missing": {"action": "CALL_TOOL"}}

    memo_agent.contract(changed(mutate))
    turn = await run_builtin(memo_agent, "pickTool", {})
    assert last(turn).ok and len(memo_agent.calls("pickTool")) == 1


@needs_db
async def test_an_enum_value_outside_the_list_asks_the_user(memo_agent: MemoAgent):
    turn = await send_once(
        memo_agent, "红色", call("pickTool", {"color": "green"}), call("pickTool", {"color": "red"}), say("s")
    )
    assert codes(turn) == ["agent_runtime.40024", None]


@pytest.mark.spec("§5.3")
@needs_db
async def test_from_that_finds_nothing_rejects_the_model_value_without_model_in_sources(kit: Kit):
    """§5.3 step 3: with from, an unbound value came from the model; step 4: no USER in sources → rejected."""
    kit.with_args(org={"from": "platform.organName"})
    turn = await kit.send("x", call("probe", {"org": "ACME"}), say("stop"))
    assert codes(turn)[0] == REJECTED and kit.calls("probe") == []


@needs_db
async def test_from_that_finds_nothing_and_no_model_value_follows_the_missing_action(kit: Kit):
    kit.with_args(org={"from": "platform.organName", "missing": {"action": "FAIL", "message": "无机构名"}})
    turn = await kit.send("x", call("probe", {}), say("stop"))
    assert codes(turn)[0] == FAIL and kit.calls("probe") == []


@needs_db
async def test_an_optional_from_that_finds_nothing_passes_without_the_argument(kit: Kit):
    kit.with_args(org={"from": "platform.organName", "required": False})
    turn = await kit.send("x", call("probe", {}), say("stop"))
    assert turn.observations[0].ok and "org" not in kit.probed()


@needs_db
async def test_an_argument_not_listed_in_args_is_free(kit: Kit):
    kit.with_args(t={"sources": ["USER"], "required": False})
    turn = await kit.send("x", call("probe", {"anything": "编的"}), say("stop"))
    assert turn.observations[0].ok and kit.probed()["anything"] == "编的"


@needs_db
async def test_an_enum_value_that_is_listed_passes(kit: Kit):
    kit.with_args(color={"sources": ["MODEL"], "enum": ["red", "blue"]})
    turn = await kit.send("x", call("probe", {"color": "blue"}), call("probe", {"color": "green"}), say("stop"))
    assert codes(turn) == [None, ASK_USER]


@pytest.mark.spec("§5.3")
@needs_db
async def test_the_enum_check_applies_to_a_from_bound_value(kit: Kit):
    """§5.3 step 5 runs for every value that is not a const: a platform value outside the enum asks the user."""
    kit.with_args(org={"from": "platform.organId", "enum": ["1", "2"]})
    turn = await kit.send("x", call("probe", {}), say("stop"))
    assert codes(turn)[0] == ASK_USER and kit.calls("probe") == []


@pytest.mark.spec("§5.3")
@needs_db
async def test_an_optional_argument_without_sources_still_rejects_a_model_value(kit: Kit):
    """§5.3 note: listed, no from/const, empty sources → the model's value is always rejected; required=false only
    lets a *missing* value pass."""
    kit.with_args(t={"required": False})
    turn = await kit.send("x", call("probe", {"t": "编的"}), call("probe", {}), say("stop"))
    assert codes(turn) == [REJECTED, None]


@needs_db
async def test_a_null_value_is_a_missing_value(kit: Kit):
    kit.with_args(t={"sources": ["USER"], "missing": {"action": "FAIL", "message": "没有标题"}})
    turn = await kit.send("x", call("probe", {"t": None}), say("stop"))
    assert codes(turn)[0] == FAIL and kit.calls("probe") == []


@needs_db
@pytest.mark.parametrize(("message", "code"), [("税号 91310000X 开票", None), ("帮我开票", ASK_USER)])
async def test_a_nested_argument_is_checked_at_its_path(kit: Kit, message: str, code: str | None):
    kit.with_args(**{"orderInfo.taxNo": {"sources": ["USER"]}})
    turn = await kit.send(message, call("probe", {"orderInfo": {"taxNo": "91310000X", "n": 1}}), say("stop"))
    assert codes(turn)[0] == code, turn.observations[0]


@needs_db
async def test_a_missing_nested_argument_follows_the_missing_action(kit: Kit):
    kit.with_args(**{"orderInfo.taxNo": {"sources": ["USER"], "missing": {"action": "FAIL", "message": "缺税号"}}})
    turn = await kit.send("x", call("probe", {"orderInfo": {"n": 1}}), say("stop"))
    assert codes(turn)[0] == FAIL and kit.calls("probe") == []


@pytest.mark.parametrize(
    ("missing", "code", "step"),
    [
        ({"action": "FAIL", "message": "no title, no note"}, "agent_runtime.40022", "builtin_node_fail"),
        ({"action": "CALL_TOOL", "tool": "findNotes"}, "agent_runtime.40023", "call findNotes first"),
        ({"action": "ASK_USER"}, "agent_runtime.40024", "builtin_node_follow_up"),
    ],
)
async def test_missing_actions(build, missing, code, step):
    contract = with_tool(
        BASE_CONTRACT, "findNotes", args={"q": {"sources": ["MODEL"], "missing": missing}, "mode": FREE}
    )
    h = await build(contract)
    obs = await h.call("findNotes", {})
    assert obs.code == code and step in obs.next_step
    assert h.calls() == [] and h.ctx.evidence == []


async def test_call_tool_without_a_tool_lets_the_missing_value_pass(build):
    arg = {"sources": ["MODEL"], "missing": {"action": "CALL_TOOL"}}
    contract = with_tool(BASE_CONTRACT, "findNotes", args={"q": arg})
    h = await build(contract)
    assert (await h.call("findNotes", {})).ok
    assert len(h.calls()) == 1


async def test_optional_missing_passes(build):
    h = await build()
    assert (await h.call("findNotes", {})).ok


async def test_made_up_value_is_rejected_with_next_steps(build):
    contract = with_tool(BASE_CONTRACT, "findNotes", args={"q": {"sources": ["EVIDENCE"]}})
    h = await build(contract)
    obs = await h.call("findNotes", {"q": "invented"})
    assert obs.code == "agent_runtime.40025"
    assert "builtin_node_follow_up" in obs.next_step and "builtin_node_fail" in obs.next_step
    assert h.calls() == []


async def test_listed_arg_without_sources_always_rejects_the_model(build):
    contract = with_tool(BASE_CONTRACT, "findNotes", args={"q": {}})
    h = await build(contract)
    assert (await h.call("findNotes", {"q": "x"})).code == ErrorCode.PARAM_PROVENANCE_REJECTED.value


async def test_user_source_not_said_asks_the_user(build):
    h = await build(user_messages=["please save something"])
    obs = await h.call("saveNote", {"title": "季度总结"})
    assert obs.code == ErrorCode.PARAM_PROVENANCE_ASK_USER.value and '["title"]' in obs.next_step
    assert h.calls() == [] and h.ctx.evidence == []


async def test_priority_rejected_over_fail_over_call_tool_over_ask(build):
    args = {
        "a": {"sources": ["USER"]},  # missing → ASK_USER
        "b": {"sources": ["MODEL"], "missing": {"action": "CALL_TOOL", "tool": "saveNote"}},
        "c": {"sources": ["MODEL"], "missing": {"action": "FAIL"}},
        "q": {"sources": ["EVIDENCE"]},  # invented → immediate rejection
    }
    h = await build(with_tool(BASE_CONTRACT, "findNotes", args=args))
    assert (await h.call("findNotes", {"q": "made up"})).code == ErrorCode.PARAM_PROVENANCE_REJECTED.value
    assert (await h.call("findNotes", {})).code == ErrorCode.PARAM_PROVENANCE_FAIL.value
    assert (await h.call("findNotes", {"c": "x"})).code == ErrorCode.PARAM_PROVENANCE_CALL_TOOL.value
    assert (await h.call("findNotes", {"c": "x", "b": "y"})).code == ErrorCode.PARAM_PROVENANCE_ASK_USER.value
    assert h.calls() == []


async def test_enum_mismatch_asks_the_user(build):
    h = await build(with_tool(BASE_CONTRACT, "findNotes", args={"q": {"sources": ["MODEL"], "enum": ["a", "b"]}}))
    obs = await h.call("findNotes", {"q": "c"})
    assert obs.code == ErrorCode.PARAM_PROVENANCE_ASK_USER.value and '"a"' in obs.content
    assert (await h.call("findNotes", {"q": "b"})).ok
