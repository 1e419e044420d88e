"""The chain entry point (chain/call.py, §13): catalog (toolNames), arguments that are no JSON object, refusals that
run nothing and register no evidence."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.codes import ErrorCode
from skillyard.agent.store import AgentStore
from support.agent import keeper as keeper_kit
from support.agent.keeper import CONTRACT, FREE, KeeperAgent
from support.agent.notes import NotesAgent, send_once
from support.agent.probes import call, codes, needs_db, say

OUTPUT = {"value": "x", "sourceType": "USER", "sourceRef": "user"}


REFUSALS = [
    ("ARG_JSON_INVALID", call("findNotes", '{"q": '), "agent_runtime.40020"),
    ("ARG_REJECTED (schema required)", call("saveNote", {"mode": "ok"}), "agent_runtime.40032"),
    ("ARG_REJECTED (not an object)", call("findNotes", "[1, 2]"), "agent_runtime.40032"),
    ("ARG_REJECTED (builtin shape)", call("builtin_node_fail", {"reason": 3}), "agent_runtime.40032"),
    ("ARG_JSON_INVALID (builtin)", call("builtin_node_fail", "{nope"), "agent_runtime.40020"),
    ("CATALOG_DENIED", call("otherTool", {"q": "x"}), "agent_runtime.40027"),
    ("CATALOG_DENIED (unknown builtin)", call("builtin_nothing", {}), "agent_runtime.40027"),
    # noteId missing (CALL_TOOL findNotes); tag said by the user; budget given
    ("PARAM_PROVENANCE_CALL_TOOL", call("tagNote", {"tag": "紧急", "budget": 1}), "agent_runtime.40023"),
    # noteId missing (CALL_TOOL) and budget missing (FAIL): FAIL is the more urgent one
    ("PARAM_PROVENANCE_FAIL", call("tagNote", {"tag": "紧急"}), "agent_runtime.40022"),
    ("PARAM_PROVENANCE_ASK_USER", call("sendMemo", {"text": "made up"}), "agent_runtime.40024"),
    # a made-up note id (EVIDENCE only) beats everything
    ("PARAM_PROVENANCE_REJECTED", call("tagNote", {"noteId": "n-999", "tag": "x"}), "agent_runtime.40025"),
    ("DELEGATE_FORBIDDEN", call("builtin_node_delegate", {"skillKey": "notes.keeper"}), "agent_runtime.42237"),
    (
        "APPROVAL_NOT_GATED",
        call("builtin_node_approval", {"summary": "s", "toolName": "saveNote"}),
        "agent_runtime.42245",
    ),
    ("STATE_KEY_RESERVED", call("builtin_state_set", {"key": "status", "value": 1}), "agent_runtime.40028"),
    ("OUTPUT_PATH_INVALID", call("builtin_output_set", {"key": " ", **OUTPUT}), "agent_runtime.42243"),
    ("PLATFORM_FIELD_FORBIDDEN", call("builtin_output_set", {"key": "userId", **OUTPUT}), "agent_runtime.42236"),
    ("OUTPUT_WRITE_FORBIDDEN", call("builtin_output_set", {"key": "undeclared", **OUTPUT}), "agent_runtime.42244"),
    (
        "SOURCE_REJECT (MODEL)",
        call("builtin_output_set", {"key": "noteId", "value": "n-1", "sourceType": "MODEL", "sourceRef": "m"}),
        "agent_runtime.42223",
    ),
    (
        "SOURCE_REJECT (not allowed)",
        call("builtin_output_set", {"key": "noteId", "value": "n-1", "sourceType": "USER", "sourceRef": "u"}),
        "agent_runtime.42223",
    ),
    (
        "EVIDENCE_PATH_INVALID",
        call("builtin_output_set", {"key": "noteId", "value": "n-1", "sourceType": "EVIDENCE", "sourceRef": ""}),
        "agent_runtime.42235",
    ),
    (
        "EVIDENCE_PATH_INVALID (evidence_get)",
        call("builtin_evidence_get", {"evidenceId": "ev_x"}),
        "agent_runtime.42235",
    ),
    ("FOLLOW_UP_UNGROUNDED (no query)", call("builtin_node_follow_up", {"question": "哪个？"}), "agent_runtime.42248"),
    (
        "FOLLOW_UP_UNGROUNDED (platform arg)",
        call("builtin_node_follow_up", {"question": "你是谁？", "expectedFields": ["owner"]}),
        "agent_runtime.42248",
    ),
    ("FINISH_MISSING_OUTPUT", call("builtin_node_finish", {"output": "  "}), "agent_runtime.42250"),
]


@needs_db
@pytest.mark.parametrize(("case", "turn", "code"), REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_refusals_run_nothing_and_keep_the_node_open(
    notes_agent: NotesAgent, case: str, turn: dict[str, Any], code: str
):
    result = await send_once(notes_agent, "请给笔记打上紧急标签", turn, say("我需要更多信息"))
    assert [o.code for o in result.observations] == [code], result.as_dict()
    observation = result.observations[0]
    assert not observation.ok and observation.next_step
    assert notes_agent.calls() == [] and result.evidence == []  # nothing ran, nothing registered
    assert result.status == "RUNNING" and result.reply == "我需要更多信息"  # text without a tool call: open
    assert result.as_dict()["observations"][0]["code"] == code


@needs_db
async def test_before_phase_rejections_register_no_evidence(keeper_agent: KeeperAgent):
    result = await keeper_kit.send_once(
        keeper_agent,
        "保存季度总结",
        call("saveNote", {"title": "季度总结"}),  # APPROVAL_REQUIRED
        call("saveNote", {"title": "编造的"}),  # PARAM_PROVENANCE_ASK_USER
        call("saveNote", {"mode": "x"}),  # ARG_REJECTED (schema required)
        call("ghost", {}),  # CATALOG_DENIED
        say("stop"),
    )
    assert codes(result) == [
        "agent_runtime.42221",
        "agent_runtime.40024",
        "agent_runtime.40032",
        "agent_runtime.40027",
    ]
    assert result.evidence == [] and keeper_agent.calls() == [] and result.events == []
    async with SkillYard() as yard:
        assert await AgentStore(yard.database).load_evidence(str(result.task_id)) == []


@needs_db
async def test_a_configured_tool_outside_tool_names_is_catalog_denied(keeper_agent: KeeperAgent):
    contract = json.loads(json.dumps(CONTRACT))
    contract["tools"]["unboundTool"] = {"args": {"q": FREE}}
    keeper_agent.contract(contract)
    result = await keeper_kit.send_once(keeper_agent, "x", call("unboundTool", {"q": "a"}), say("stop"))
    assert codes(result) == ["agent_runtime.40027"] and result.evidence == []


async def test_tool_outside_tool_names_is_catalog_denied(build):
    h = await build()
    obs = await h.call("otherTool", {"q": "x"})
    assert not obs.ok and obs.code == ErrorCode.CATALOG_DENIED.value == "agent_runtime.40027"
    assert "saveNote" in obs.next_step and "findNotes" in obs.next_step
    builtin = await h.call("builtin_node_finish", {"output": "x"})
    assert builtin.code == ErrorCode.CATALOG_DENIED.value
    assert h.calls() == [] and h.ctx.evidence == []


async def test_arguments_that_are_not_json(build):
    h = await build()
    obs = await h.call("findNotes", '{"q": ')
    assert obs.code == "agent_runtime.40020" and obs.arguments == '{"q": '
    assert "JSON object" in obs.next_step
    assert h.calls() == [] and h.ctx.evidence == []


async def test_arguments_that_are_not_an_object(build):
    h = await build()
    obs = await h.call("findNotes", "[1, 2]")
    assert obs.code == ErrorCode.ARG_REJECTED.value
    assert h.calls() == [] and h.ctx.evidence == []


async def test_json_text_arguments_are_accepted(build):
    h = await build()
    obs = await h.call("findNotes", '{"q": "周报"}', call_id="c-1")
    assert obs.ok and obs.call_id == "c-1" and obs.evidence_id
    assert h.calls("findNotes")[0]["input"] == {"q": "周报"}
