"""The state builtins (builtins/state_tools.py): notes and reserved keys, evidence_get, session_info."""

from __future__ import annotations

from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.builtins import call_builtin
from skillyard.agent.codes import ErrorCode
from skillyard.agent.store import AgentStore
from support.agent import kit as kit_kit
from support.agent.context import add_evidence, refused
from support.agent.kit import (
    EVIDENCE_PATH_INVALID,
    FINISH_OUTPUT_MISSING,
    Kit,
    base_contract,
    finish,
    lookup,
    two_sessions,
)
from support.agent.memo import IDENTITY, EvModel, MemoAgent, last, run_builtin, send_once
from support.agent.probes import call, codes, needs_db, say

STATE_RESERVED = "agent_runtime.40028"


FINISH_NEED_BUSINESS = "agent_runtime.42255"


@pytest.mark.parametrize(
    "key", ["_x", "$x", "status", "STATUS", "Target", "userId", "passportId", "session", "evidence", "call", "gated"]
)
@needs_db
async def test_state_set_reserved_keys(memo_agent: MemoAgent, key: str):
    turn = await run_builtin(memo_agent, "builtin_state_set", {"key": key, "value": 1})
    assert last(turn).code == "agent_runtime.40028" and last(turn).next_step


@needs_db
async def test_state_set_a_free_key_is_kept_with_the_node_across_a_restart(memo_agent: MemoAgent):
    turn = await send_once(
        memo_agent,
        "x",
        call("builtin_state_set", {"key": "draft", "value": {"a": [1, 2]}}),
        say("记下了"),
        session="note",
    )
    assert turn.observations[0].ok
    async with SkillYard() as yard:
        node = await AgentStore(yard.database).load_node(str(turn.node_id))
    assert node is not None and node.scratch == {"draft": {"a": [1, 2]}}


@needs_db
async def test_evidence_get_and_session_info(memo_agent: MemoAgent):
    model = EvModel(
        memo_agent.script(
            call("findNotes", {"q": "a"}),
            call("builtin_evidence_get", {"evidenceId": ""}),
            call("builtin_evidence_get", {"evidenceId": "ev-unknown"}),
            call("builtin_session_info"),
            call("builtin_evidence_get", {"evidenceId": "$EV"}),
            call("builtin_node_finish", {"output": "找到了"}),
            call("builtin_evidence_get", {"evidenceId": "$EV"}),  # in the next task
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        first = await agent.send(memo_agent.sid("evget"), "找", identity=IDENTITY)
        later = await agent.send(memo_agent.sid("evget"), "再看看", identity=IDENTITY)
    found, empty, unknown, info, raw, _done = first.observations
    assert empty.code == "agent_runtime.42235" and unknown.code == "agent_runtime.42235"
    assert found.evidence_id and found.evidence_id in str(unknown.next_step)  # lists the visible ids
    assert info.ok and info.content == {
        "sessionId": memo_agent.sid("evget"),
        "taskId": first.task_id,
        "nodeId": first.node_id,
        "nodeStatus": "RUNNING",
    }
    content = raw.content
    assert content["evidenceId"] == found.evidence_id and content["tool"] == "findNotes"
    assert content["status"] == "SUCCESS" and content["businessOk"] is True and content["empty"] is False
    assert content["response"]["data"]["records"][1] == {"id": "n-2", "title": "周报"}
    assert later.observations[0].code == "agent_runtime.42235"  # a new task cannot read the finished one's


@needs_db
@pytest.mark.parametrize(
    ("mode", "status", "business_ok", "empty"),
    [("business", "SUCCESS", False, None), ("empty", "SUCCESS", True, True), ("io", "FAILED", None, None)],
)
async def test_evidence_get_reports_status_business_ok_and_empty(
    kit: Kit, mode: str, status: str, business_ok: Any, empty: Any
):
    turn = await kit.send(
        "x",
        lookup(mode=mode),
        call("builtin_evidence_get", {"evidenceId": "ev-nope"}),  # the refusal lists the visible ids
        call("builtin_evidence_get", {"evidenceId": "$EV"}),
        say("s"),
    )
    assert turn.observations[1].code == EVIDENCE_PATH_INVALID
    obs = turn.observations[2]
    assert obs.ok, obs
    content = obs.content
    assert content["tool"] == "lookup" and content["status"] == status
    if business_ok is not None:
        assert content["businessOk"] is business_ok
    if empty is not None:
        assert content["empty"] is empty
    if mode == "business":
        assert content["response"]["code"] == "E1"


@needs_db
async def test_session_info_after_a_resume_and_in_the_next_task(kit: Kit):
    model = kit.model(
        lookup(mode="empty"),
        call("builtin_node_follow_up", {"question": "换个词？"}),
        call("builtin_session_info"),
        lookup(),
        finish(),
        call("builtin_session_info"),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(kit.dir, model=model)
        asked = await agent.send(kit.sid("info"), "找", identity=kit_kit.IDENTITY)
        assert asked.status == "SUSPENDED", asked.as_dict()
        resumed = await agent.resume(kit.sid("info"), "REPLY", "用季度")
        later = await agent.send(kit.sid("info"), "再来", identity=kit_kit.IDENTITY)
    info = resumed.observations[0].content
    assert info == {
        "sessionId": kit.sid("info"),
        "taskId": asked.task_id,
        "nodeId": asked.node_id,
        "nodeStatus": "RUNNING",
    }
    assert resumed.status == "DONE"
    nxt = later.observations[0].content
    assert nxt["sessionId"] == kit.sid("info") and nxt["taskId"] != asked.task_id and nxt["nodeId"] != asked.node_id


@needs_db
@pytest.mark.parametrize(
    "key",
    [
        "outputs",
        "prior",
        "checkpoint",
        "user_fields",
        "fingerprint",
        "deptPath",
        "adminCompany",
        "Inputs",
        "_",
    ],
)
async def test_state_set_refuses_more_reserved_keys(kit: Kit, key: str):
    turn = await kit.send("x", call("builtin_state_set", {"key": key, "value": 1}), say("stop"))
    obs = turn.observations[0]
    assert obs.code == STATE_RESERVED and obs.next_step, obs


@needs_db
@pytest.mark.parametrize("key", ["statusNote", "draft_2", "草稿", "nodes"])
async def test_state_set_accepts_free_keys_and_overwrites(kit: Kit, key: str):
    turn = await kit.send(
        "x",
        call("builtin_state_set", {"key": key, "value": 1}),
        call("builtin_state_set", {"key": key, "value": {"v": 2}}),
        say("stop"),
    )
    assert codes(turn) == [None, None], turn.observations
    async with SkillYard() as yard:
        node = await AgentStore(yard.database).load_node(str(turn.node_id))
    assert node is not None and node.scratch == {key: {"v": 2}}


@needs_db
async def test_state_set_is_no_business_call_and_no_output(kit: Kit):
    kit.with_args(outputs={"draft": {"required": True}})
    turn = await kit.send("x", call("builtin_state_set", {"key": "draft", "value": "v"}), finish(), say("stop"))
    assert codes(turn) == [None, FINISH_OUTPUT_MISSING]
    kit.contract(base_contract())
    turn = await kit.send(
        "x", call("builtin_state_set", {"key": "draft", "value": "v"}), finish(), say("stop"), session="nb"
    )
    assert codes(turn) == [None, FINISH_NEED_BUSINESS]


@needs_db
async def test_evidence_get_does_not_read_another_sessions_evidence(kit: Kit):
    a, b = await two_sessions(
        kit, [lookup(), say("找到了")], [call("builtin_evidence_get", {"evidenceId": "$EV"}), say("s")]
    )
    assert a.status == "RUNNING" and a.observations[0].evidence_id
    assert codes(b) == [EVIDENCE_PATH_INVALID]


# state, evidence, session --------------------------------------------------------------------------------------
async def test_state_set_and_reserved_keys(ctx):
    assert (await call_builtin(ctx, "builtin_state_set", {"key": "draft", "value": {"t": 1}})).ok
    assert ctx.node.scratch == {"draft": {"t": 1}}
    for key in ("_x", "$y", "status", "Target", "platform", "evidence", "userId", "checkpoint"):
        refused(await call_builtin(ctx, "builtin_state_set", {"key": key, "value": 1}), ErrorCode.STATE_KEY_RESERVED)
    refused(await call_builtin(ctx, "builtin_state_set", {"key": "", "value": 1}), ErrorCode.ARG_REJECTED)
    assert ctx.node.scratch == {"draft": {"t": 1}}


async def test_evidence_get(ctx):
    evidence = await add_evidence(ctx)
    obs = await call_builtin(ctx, "builtin_evidence_get", {"evidenceId": evidence.id})
    assert obs.ok and obs.content["response"] == evidence.response and obs.content["tool"] == "queryArticle"
    refused(await call_builtin(ctx, "builtin_evidence_get", {"evidenceId": " "}), ErrorCode.EVIDENCE_PATH_INVALID)
    hidden = await add_evidence(ctx, node_id="n0")
    text = refused(
        await call_builtin(ctx, "builtin_evidence_get", {"evidenceId": hidden.id}), ErrorCode.EVIDENCE_PATH_INVALID
    )
    assert evidence.id in text


async def test_session_info(ctx):
    obs = await call_builtin(ctx, "builtin_session_info", {})
    assert obs.content == {"sessionId": "s1", "taskId": "t1", "nodeId": "n1", "nodeStatus": "RUNNING"}
