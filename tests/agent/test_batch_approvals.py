"""Batch approvals (builtin_node_approval with callIds; CONFIRM, CONFIRM --only, REJECT) and approvals with edits
(CONFIRM --edit: USER-sourced values, const / from / platform-bound arguments refused), across restarts."""

from __future__ import annotations

import json

import pytest

from skillyard import SkillYard
from skillyard.agent.runner import AgentError, resume_session
from skillyard.agent.store import AgentStore
from support.agent.notes import IDENTITY, NotesAgent, copy_contract
from support.agent.probes import call, calls, codes, finish, needs_db, say, skillyard_cli

pytestmark = needs_db

TWO_SAVES = calls(("saveNote", {"title": "季度总结"}), ("saveNote", {"title": "周报"}))
BATCH = call(
    "builtin_node_approval", {"summary": "保存两篇", "toolName": "saveNote", "callIds": ["call_1_1", "call_1_2"]}
)
ONE = call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"})
MESSAGE = "保存季度总结和周报"


async def suspend(env: NotesAgent, name: str, *turns: dict) -> str:
    sid = env.sid(name)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        turn = await agent.send(sid, MESSAGE, identity=IDENTITY)
    assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "APPROVAL", turn.as_dict()
    return sid


async def test_a_batch_confirmed_in_part_runs_the_listed_write_only(notes_agent: NotesAgent):
    sid = notes_agent.sid("part")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=notes_agent.script(TWO_SAVES, BATCH, finish("存了周报")))
        asked = await agent.send(sid, MESSAGE, identity=IDENTITY)
    assert codes(asked)[:2] == ["agent_runtime.42221", "agent_runtime.42221"]
    assert asked.checkpoint is not None and asked.checkpoint["type"] == "APPROVAL"
    assert [c["call_id"] for c in asked.checkpoint["calls"]] == ["call_1_1", "call_1_2"]
    assert "标题：季度总结" in asked.checkpoint["calls"][0]["summary"]
    assert "标题：周报" in asked.checkpoint["calls"][1]["summary"]
    assert "[call_1_2]" in asked.checkpoint["question"]
    async with SkillYard() as yard:  # another process confirms one of the two
        done = await resume_session(yard, sid, "CONFIRM", only=["call_1_2"], approver={"user_id": "boss"})
    assert done.status == "DONE", done.as_dict()
    assert [c["input"]["title"] for c in notes_agent.calls("saveNote")] == ["周报"]
    record = done.approvals[0]
    assert record["action"] == "CONFIRM" and record["approver"] == {"user_id": "boss"}
    assert [(c["call_id"], c["ran"]) for c in record["calls"]] == [("call_1_1", False), ("call_1_2", True)]
    async with SkillYard() as yard:
        node = await AgentStore(yard.database).load_node(done.node_id or "")
    assert node is not None and node.approvals == [record] and node.pending_writes == []


async def test_a_confirmed_batch_runs_every_write_in_order_each_with_its_own_key(notes_agent: NotesAgent):
    sid = await suspend(notes_agent, "all", TWO_SAVES, BATCH, finish("都存了"))
    async with SkillYard() as yard:
        done = await resume_session(yard, sid, "CONFIRM")
    assert done.status == "DONE"
    saved = notes_agent.calls("saveNote")
    assert [c["input"]["title"] for c in saved] == ["季度总结", "周报"]
    assert saved[0]["key"] and saved[1]["key"] and saved[0]["key"] != saved[1]["key"]
    assert done.approvals[0]["approver"] == IDENTITY  # the session's identity when no approver is given


async def test_a_rejected_batch_runs_nothing(notes_agent: NotesAgent):
    sid = await suspend(notes_agent, "rej", TWO_SAVES, BATCH)
    async with SkillYard() as yard:
        rejected = await resume_session(yard, sid, "REJECT")
    assert rejected.status == "CANCELLED" and notes_agent.calls() == []
    assert [c["ran"] for c in rejected.approvals[0]["calls"]] == [False, False]
    assert rejected.approvals[0]["action"] == "REJECT"


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"summary": "s", "toolName": "saveNote", "callIds": ["call_1_1", "call_9_9"]}, "agent_runtime.42261"),
        ({"summary": "s", "toolName": "saveNote", "callIds": []}, "agent_runtime.42261"),
        ({"summary": "s", "toolName": "sendMemo", "callIds": ["call_1_1"]}, "agent_runtime.42246"),
    ],
)
async def test_a_batch_naming_calls_that_are_not_pending_is_refused(notes_agent: NotesAgent, arguments, code):
    script = notes_agent.script(TWO_SAVES, call("builtin_node_approval", arguments), say("?"))
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        turn = await agent.send(notes_agent.sid("unknown"), MESSAGE, identity=IDENTITY)
    assert codes(turn)[2] == code and turn.status == "RUNNING"
    assert "call_1_1 (saveNote)" in (turn.observations[2].next_step or "")


async def test_only_naming_an_unlisted_call_keeps_the_approval(notes_agent: NotesAgent):
    sid = await suspend(notes_agent, "only", TWO_SAVES, BATCH)
    async with SkillYard() as yard:
        refused = await resume_session(yard, sid, "CONFIRM", only=["call_7_7"])
    assert refused.status == "SUSPENDED" and refused.refusal
    assert refused.refusal["name"] == "APPROVAL_BATCH_UNKNOWN_CALL"
    assert refused.checkpoint and len(refused.checkpoint["calls"]) == 2 and notes_agent.calls() == []


async def test_an_edited_approval_runs_the_edited_call_as_the_users_value(notes_agent: NotesAgent):
    sid = await suspend(notes_agent, "edit", call("saveNote", {"title": "季度总结"}), ONE, finish("已保存"))
    async with SkillYard() as yard:
        done = await resume_session(yard, sid, "CONFIRM", edit={"title": "年度总结"})
    assert done.status == "DONE", done.as_dict()
    assert [c["input"]["title"] for c in notes_agent.calls("saveNote")] == ["年度总结"]
    confirmed = done.observations[0]
    assert confirmed.ok and confirmed.sources["title"] == "USER" and confirmed.sources["owner"] == "PLATFORM"
    assert done.approvals[0]["calls"][0]["edit"] == {"title": "年度总结"}


@pytest.mark.parametrize(
    ("edit", "code", "needle"),
    [
        ({"owner": "someone-else"}, "agent_runtime.42260", "platform.userId"),
        ({"category": "私人"}, "agent_runtime.42260", "session.category"),
        ({"nope": 1}, "agent_runtime.40032", "not an argument"),
    ],
)
async def test_an_edit_of_a_bound_or_unknown_argument_is_refused(notes_agent: NotesAgent, edit, code, needle):
    sid = await suspend(notes_agent, "forbid", call("saveNote", {"title": "季度总结"}), ONE)
    async with SkillYard() as yard:
        refused = await resume_session(yard, sid, "CONFIRM", edit=edit)
    assert refused.status == "SUSPENDED" and refused.refusal is not None
    assert refused.refusal["code"] == code and needle in refused.refusal["message"]
    assert refused.checkpoint and refused.checkpoint["type"] == "APPROVAL" and notes_agent.calls() == []


async def test_an_edit_is_refused_by_provenance_and_accepted_from_evidence(notes_agent: NotesAgent):
    contract = copy_contract()
    contract["tools"]["saveNote"]["args"]["title"] = {"sources": ["EVIDENCE"], "label": "标题"}
    notes_agent.contract(contract)
    sid = await suspend(
        notes_agent, "prov", call("findNotes", {"q": "x"}), call("saveNote", {"title": "季度总结"}), ONE, finish("好")
    )
    async with SkillYard() as yard:
        refused = await resume_session(yard, sid, "CONFIRM", edit={"title": "随便写的"})
        assert refused.refusal and refused.refusal["code"] == "agent_runtime.40025"
        assert notes_agent.calls("saveNote") == []
        done = await resume_session(yard, sid, "CONFIRM", edit={"title": "周报"})  # a value of the query
    assert done.status == "DONE" and [c["input"]["title"] for c in notes_agent.calls("saveNote")] == ["周报"]
    assert done.observations[0].sources["title"] == "EVIDENCE"


async def test_a_batch_edit_is_keyed_by_call_id(notes_agent: NotesAgent):
    sid = await suspend(notes_agent, "bedit", TWO_SAVES, BATCH, finish("好"))
    async with SkillYard() as yard:
        wrong = await resume_session(yard, sid, "CONFIRM", edit={"title": "x"})
        assert wrong.refusal and wrong.refusal["name"] == "APPROVAL_BATCH_UNKNOWN_CALL"
        done = await resume_session(yard, sid, "CONFIRM", edit={"call_1_1": {"title": "月报"}})
    assert [c["input"]["title"] for c in notes_agent.calls("saveNote")] == ["月报", "周报"]
    assert done.approvals[0]["calls"][0]["edit"] == {"title": "月报"} and "edit" not in done.approvals[0]["calls"][1]


@pytest.mark.parametrize(
    ("action", "kwargs", "needle"),
    [
        ("REPLY", {"edit": {"title": "x"}}, "approved with CONFIRM"),
        ("CONFIRM", {"edit": []}, "non-empty JSON object"),
        ("REJECT", {"only": ["call_1_1"]}, "does not go with REJECT"),
        ("CONFIRM", {"only": ""}, "names no call id"),
    ],
)
async def test_malformed_answers_are_refused_before_loading(notes_agent: NotesAgent, action, kwargs, needle):
    sid = await suspend(notes_agent, "malformed", TWO_SAVES, BATCH)
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=notes_agent.script())
        with pytest.raises(AgentError, match=needle):
            await agent.resume(sid, action, **kwargs)


async def test_edit_at_a_follow_up_is_refused(notes_agent: NotesAgent):
    script = notes_agent.script(call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]}))
    sid = notes_agent.sid("fu")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(sid, "保存一篇", identity=IDENTITY)
        with pytest.raises(AgentError, match="answer an APPROVAL"):
            await agent.resume(sid, "CONFIRM", edit={"title": "x"})


async def test_the_cli_confirms_part_of_a_batch_with_an_edit(notes_agent: NotesAgent):
    sid = await suspend(notes_agent, "cli", TWO_SAVES, BATCH, say("好的，先不保存"))
    shown = skillyard_cli("agent", "resume", "--session", sid, "--action", "REPLY", "--text", "等等")
    assert shown.returncode == 0 and "先不保存" in shown.stdout  # a reply drops the pending writes (part 1)
    sid = await suspend(notes_agent, "cli2", TWO_SAVES, BATCH, finish("好"))
    bad = skillyard_cli("agent", "resume", "--session", sid, "--action", "CONFIRM", "--edit", "{not json")
    assert bad.returncode == 2 and "--edit" in bad.stderr
    edit = json.dumps({"call_1_2": {"title": "月报"}})
    done = skillyard_cli("agent", "resume", "--session", sid, "--action", "CONFIRM", "--only", "call_1_2",
                         "--edit", edit, "--approver", '{"user_id": "boss"}', "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    turn = json.loads(done.stdout)
    assert turn["status"] == "DONE" and turn["approvals"][0]["approver"] == {"user_id": "boss"}
    assert [c["input"]["title"] for c in notes_agent.calls("saveNote")] == ["月报"]
