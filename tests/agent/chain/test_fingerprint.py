"""The repeated-call fuse (chain/fingerprint.py, §13.4): the fourth identical successful call trips; what counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.agent.codes import ErrorCode
from skillyard.agent.settings import AgentSettings
from skillyard.agent.state import NodeStatus
from support.agent import docs as docs_kit
from support.agent import exec as exec_kit
from support.agent import keeper as keeper_kit
from support.agent.docs import (
    APPROVAL_REQUIRED,
    ASK_SAVE,
    IDENTITY,
    SAVE,
    DocsAgent,
    _send,
    approve,
    assert_coded,
    store_of,
)
from support.agent.exec import ExecAgent, add, executions, kind_params, obs
from support.agent.keeper import KeeperAgent
from support.agent.kit import Kit
from support.agent.notes import NotesAgent, send_once
from support.agent.probes import call, codes, needs_db, say

FINGERPRINT_TRIP = "agent_runtime.40026"


@needs_db
async def test_fourth_identical_successful_call_trips_the_fingerprint(notes_agent: NotesAgent):
    same = call("findNotes", {"q": "周报"})
    result = await send_once(notes_agent, "找周报", same, same, same, same, say("never asked"))
    assert codes(result) == [None, None, None, "agent_runtime.40026"]
    assert len(notes_agent.calls("findNotes")) == 3
    assert result.status == "FAILED" and "3 times" in (result.reply or "")


@needs_db
async def test_fingerprint_limit_from_settings_and_reset_by_a_different_call(keeper_agent: KeeperAgent, home: Path):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 2\n", encoding="utf-8")
    a, b = call("findNotes", {"q": "a"}), call("findNotes", {"q": "b"})
    result = await keeper_kit.send_once(keeper_agent, "找", a, a, b, a, a, a, say("never"))
    assert codes(result) == [None, None, None, None, None, "agent_runtime.40026"]
    assert len(keeper_agent.calls("findNotes")) == 5 and result.status == "FAILED"
    assert len(result.evidence) == 5  # the tripped call registered no evidence


@needs_db
async def test_identical_business_failures_do_not_count_toward_the_fingerprint(keeper_agent: KeeperAgent):
    same = call("lookupOwner", {"mode": "business"})
    result = await keeper_kit.send_once(keeper_agent, "找", same, same, same, same, same, say("都失败了"))
    assert codes(result) == ["agent_runtime.40004"] * 5 and len(keeper_agent.calls("lookupOwner")) == 5
    assert result.status == "RUNNING"


@needs_db
async def test_a_gated_write_called_again_and_again_never_runs_and_never_trips_the_fuse(docs_agent: DocsAgent):
    """Issue: the fingerprint counts consecutive *successful* calls; APPROVAL_REQUIRED is a before-phase refusal,
    not a successful call. So five identical gated calls are five APPROVAL_REQUIREDs, nothing runs, no trip."""
    same = call("saveDoc", SAVE)
    turn = await _send(docs_agent, ASK_SAVE, same, same, same, same, same, say("要确认"), session="fuse")
    assert docs_kit.codes(turn) == [APPROVAL_REQUIRED] * 5 and turn.status == "RUNNING", turn.as_dict()
    assert docs_agent.calls() == []


@pytest.mark.spec("§13", "§14.2")
@needs_db
async def test_identical_bypass_writes_run_once_and_the_fourth_identical_call_trips(docs_agent: DocsAgent):
    """Issue: "with the default limit 3, calls 1–3 run and the 4th identical call trips FINGERPRINT_TRIP and fails
    the node"; §13: the fingerprint check (4) comes before the write gate (5). A write without approval (confirm
    false + bypass) runs once; calls 2–3 return the earlier result (§14.2); call 4 trips."""
    same = call("bumpDoc", {"q": "x"})
    turn = await _send(docs_agent, "刷新", *[same] * 8, say("never"), session="bump")
    assert docs_kit.codes(turn) == [None, None, None, FINGERPRINT_TRIP], (docs_kit.codes(turn), turn.status)
    assert turn.status == "FAILED" and len(docs_agent.calls("bumpDoc")) == 1
    assert_coded(turn)


@pytest.mark.spec("§13")
@needs_db
async def test_a_confirmed_write_then_identical_calls_trip_the_fuse_on_the_fourth(docs_agent: DocsAgent):
    """Docs: CONFIRM "skips approval and the fingerprint check, nothing else" — the confirmed run is a successful call
    that is counted (§13 stage 8). Identical calls after it return the earlier result; the 4th identical call in a
    row trips FINGERPRINT_TRIP and the write never runs twice."""
    same = call("saveDoc", SAVE)
    script = docs_agent.script(same, approve("saveDoc"), same, same, same, say("never"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(docs_agent.sid("cfuse"), ASK_SAVE, identity=IDENTITY)
        after = await agent.resume(docs_agent.sid("cfuse"), "CONFIRM")
    assert docs_kit.codes(after) == [None, None, None, FINGERPRINT_TRIP], after.as_dict()
    assert after.status == "FAILED" and len(docs_agent.calls("saveDoc")) == 1


@needs_db
async def test_a_reused_write_result_is_a_different_call_that_resets_the_fuse(docs_agent: DocsAgent):
    """Issue: "the count is of consecutive successful calls with the same tool and the same arguments; a different
    call resets it". findDocs《a》 three times, then a different call (the identical bumpDoc, answered with its
    earlier result), then findDocs《a》 again: the run of identical reads was interrupted, so it must not trip."""
    bump, find = call("bumpDoc", {"q": "x"}), call("findDocs", {"q": "a"})
    turn = await _send(docs_agent, "刷新并查找", bump, find, find, find, bump, find, say("done"), session="reset")
    assert docs_kit.codes(turn) == [None] * 6 and turn.status == "RUNNING", turn.as_dict()
    assert len(docs_agent.calls("findDocs")) == 4 and len(docs_agent.calls("bumpDoc")) == 1


@pytest.mark.spec("§14.1")
@needs_db
async def test_confirm_skips_the_fingerprint_check(docs_agent: DocsAgent, monkeypatch: pytest.MonkeyPatch):
    """§14.1 step 3: CONFIRM executes the write "仍经过完整处理链，跳过审批和熔断" (docs: approved=True skips
    approval and the fingerprint check). Session 1 records the fingerprint a successful sendMemo《开会》 leaves
    (fingerprint_limit 1); session 2 gates the identical call and, while it waits for approval, its node is put
    at the fuse's limit for exactly that call. The CONFIRM must still execute the write, not trip."""
    monkeypatch.setenv("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "1")
    sid = docs_agent.sid("skipfuse")
    memo = {"text": "开会"}
    script = docs_agent.script(call("sendMemo", memo), approve("sendMemo"), say("发好了"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, "发备忘：开会", identity=IDENTITY)
        await agent.resume(sid, "CONFIRM")
    async with SkillYard() as yard:  # read the fingerprint the successful call left
        store = await store_of(yard)
        session = await store.load_session(sid)
        assert session is not None and session.node_id
        node = await store.load_node(session.node_id)
        assert node is not None and node.fingerprint and node.fingerprint_count == 1
        fingerprint = node.fingerprint
    other = docs_agent.sid("skipfuse2")
    script2 = docs_agent.script(call("sendMemo", memo), approve("sendMemo"), say("又发了"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script2)
        gated = await agent.send(other, "发备忘：开会", identity=IDENTITY)
        assert gated.checkpoint and gated.checkpoint["type"] == "APPROVAL"
        store = await store_of(yard)
        session = await store.load_session(other)
        assert session is not None and session.node_id and session.task_id
        node = await store.load_node(session.node_id)
        task = await store.load_task(session.task_id)
        assert node is not None and task is not None
        node.fingerprint, node.fingerprint_count = fingerprint, 5  # the fuse is at its limit for this very call
        await store.save_turn(node, task, session)
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script2)
        confirmed = await agent.resume(other, "CONFIRM")
    assert docs_kit.codes(confirmed)[0] is None and confirmed.status == "RUNNING", confirmed.as_dict()
    assert len(docs_agent.calls("sendMemo")) == 2


@needs_db
async def test_builtins_are_outside_the_fingerprint_fuse(kit: Kit):
    same = call("builtin_env_hash", {"input": "abc"})
    note = call("builtin_state_set", {"key": "draft", "value": 1})
    turn = await kit.send("x", same, same, same, same, same, note, note, note, note, say("stop"))
    assert codes(turn) == [None] * 9 and turn.status == "RUNNING"


@needs_db
@pytest.mark.parametrize("kind", kind_params(["http"]))
async def test_fingerprint_trips_the_fourth_identical_success_of_a_subprocess_or_http_tool(
    exec_agent: ExecAgent, server, kind: str
):
    """Issue: with the default limit 3, identical successful calls 1–3 run and the 4th trips FINGERPRINT_TRIP and
    fails the node: three executions."""
    srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool)
    args = {"mode": "ok"}
    turn = await exec_agent.send(*[call(tool, args)] * 4, exec_kit.say())
    assert [o.code for o in obs(turn, tool)] == [None, None, None, "agent_runtime.40026"]
    assert turn.status == "FAILED"
    assert executions(exec_agent, srv, kind, tool) == 3


async def test_fourth_identical_successful_call_trips_and_fails_the_node(build):
    h = await build()
    for _ in range(3):
        assert (await h.call("findNotes", {"q": "a"})).ok
    obs = await h.call("findNotes", {"q": "a"})
    assert obs.code == ErrorCode.FINGERPRINT_TRIP.value == "agent_runtime.40026"
    assert h.ctx.node.status is NodeStatus.FAILED and "same arguments" in (h.ctx.node.reply or "")
    assert len(h.calls()) == 3 and len(h.ctx.evidence) == 3


async def test_a_different_call_resets_the_fingerprint(build):
    h = await build(settings=AgentSettings(fingerprint_limit=2))
    for args in ({"q": "a"}, {"q": "a"}, {"q": "b"}, {"q": "a"}, {"q": "a"}):
        assert (await h.call("findNotes", args)).ok
    assert (await h.call("findNotes", {"q": "a"})).code == ErrorCode.FINGERPRINT_TRIP.value
    assert len(h.calls()) == 5
