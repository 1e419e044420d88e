"""Structured choices (orchestration P1): builtin_node_follow_up with candidates suspends at CHOICE; CHOOSE accepts
only a listed id, which becomes the USER value of the expected field — across restarts, in later calls of the node
and (through a shared output) in later tasks."""

from __future__ import annotations

import json

import pytest

from skillyard import SkillYard
from skillyard.agent.runner import AgentError, resume_session
from support.agent.notes import IDENTITY, NotesAgent, copy_contract
from support.agent.probes import call, codes, finish, needs_db, say, skillyard_cli

pytestmark = needs_db

FIND = call("findNotes", {"q": "笔记"})
CANDIDATES = [{"id": "季度总结", "label": "季度总结 (n-1)"}, {"id": "周报", "label": "周报 (n-2)"}]
ASK = call(
    "builtin_node_follow_up",
    {"question": "保存哪一篇？", "expectedFields": ["title"], "candidates": CANDIDATES},
)


async def test_a_choice_survives_restarts_refuses_an_unlisted_id_and_fills_the_field_as_user(notes_agent: NotesAgent):
    script = notes_agent.script(
        FIND,
        ASK,
        call("saveNote", {"title": "周报"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        finish("已保存周报"),
    )
    sid = notes_agent.sid("choice")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        asked = await agent.send(sid, "把一篇笔记存一份", identity=IDENTITY)
    assert asked.status == "SUSPENDED" and asked.checkpoint is not None
    assert asked.checkpoint["type"] == "CHOICE" and asked.checkpoint["expected_fields"] == ["title"]
    assert asked.checkpoint["candidates"] == CANDIDATES and asked.checkpoint["question"] == "保存哪一篇？"
    async with SkillYard() as yard:  # another process answers with an id that was not offered
        refused = await resume_session(yard, sid, "CHOOSE", "月报")
    assert refused.status == "SUSPENDED" and refused.checkpoint == asked.checkpoint
    assert refused.refusal is not None and refused.refusal["code"] == "agent_runtime.42258"
    assert refused.refusal["name"] == "CHOICE_INVALID" and "季度总结, 周报" in refused.refusal["message"]
    assert notes_agent.calls("saveNote") == []
    async with SkillYard() as yard:
        chosen = await resume_session(yard, sid, "CHOOSE", "周报")
    assert chosen.status == "SUSPENDED" and chosen.checkpoint and chosen.checkpoint["type"] == "APPROVAL"
    assert chosen.observations[0].sources["title"] == "USER"  # the chosen id is the user's value
    async with SkillYard() as yard:
        done = await resume_session(yard, sid, "CONFIRM")
    assert done.status == "DONE" and [c["input"]["title"] for c in notes_agent.calls("saveNote")] == ["周报"]


async def test_a_chosen_field_counts_as_user_for_the_chosen_id_only(notes_agent: NotesAgent):
    """The model cannot pass another value off as the user's choice (季度总结 was offered, but not chosen)."""
    script = notes_agent.script(FIND, ASK, call("saveNote", {"title": "季度总结"}), say("?"))
    sid = notes_agent.sid("pin")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(sid, "把一篇笔记存一份", identity=IDENTITY)
        turn = await agent.resume(sid, "CHOOSE", "周报")
    assert codes(turn) == ["agent_runtime.42221"]  # gated, so the provenance check passed …
    assert turn.observations[0].sources["title"] == "EVIDENCE"  # … as a value of the query, not as the user's


async def test_a_choice_shared_as_an_output_reaches_the_next_task(notes_agent: NotesAgent):
    script = notes_agent.script(
        FIND,
        ASK,
        call("builtin_output_set", {"key": "category", "value": "周报", "sourceType": "USER", "sourceRef": "choice"}),
        finish("记住了"),
        call("saveNote", {"title": "季度总结"}),
        say("要保存吗？"),
    )
    sid = notes_agent.sid("share")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(sid, "选一个分类", identity=IDENTITY)
        done = await agent.resume(sid, "CHOOSE", "周报")
        assert done.status == "DONE"
        later = await agent.send(sid, "保存季度总结", identity=IDENTITY)
    assert later.observations[0].sources["category"] == "SESSION"
    assert "分类：周报" in str(later.observations[0].content)


async def test_a_reply_at_a_choice_is_free_text_as_before(notes_agent: NotesAgent):
    script = notes_agent.script(FIND, ASK, say("好的，我再找找"))
    sid = notes_agent.sid("reply")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(sid, "把一篇笔记存一份", identity=IDENTITY)
        turn = await agent.resume(sid, "REPLY", "都不是，是月报")
    assert turn.status == "RUNNING" and turn.refusal is None and turn.reply == "好的，我再找找"


@pytest.mark.parametrize(
    ("arguments", "code", "needle"),
    [
        (
            {"question": "哪篇？", "expectedFields": ["title"], "candidates": [{"id": "月报", "label": "月报"}]},
            "agent_runtime.42248",
            "月报",
        ),
        (
            {"question": "哪篇？", "expectedFields": ["title", "mode"], "candidates": CANDIDATES},
            "agent_runtime.40032",
            "exactly one argument",
        ),
        ({"question": "哪篇？", "expectedFields": ["title"], "candidates": []}, "agent_runtime.40032", "non-empty"),
        (
            {"question": "哪篇？", "expectedFields": ["title"], "candidates": [CANDIDATES[0], CANDIDATES[0]]},
            "agent_runtime.40032",
            "twice",
        ),
        (
            {"question": "哪篇？", "expectedFields": ["title"], "candidates": [{"id": "", "label": "x"}]},
            "agent_runtime.40032",
            "non-empty string",
        ),
    ],
)
async def test_invented_or_malformed_candidates_are_refused(notes_agent: NotesAgent, arguments, code, needle):
    script = notes_agent.script(FIND, call("builtin_node_follow_up", arguments), say("?"))
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        turn = await agent.send(notes_agent.sid("bad"), "存一篇", identity=IDENTITY)
    assert codes(turn)[1] == code and needle in str(turn.observations[1].content)
    assert turn.status == "RUNNING" and turn.checkpoint is None


async def test_candidates_before_any_query_are_ungrounded(notes_agent: NotesAgent):
    script = notes_agent.script(ASK, say("?"))
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        turn = await agent.send(notes_agent.sid("early"), "存一篇", identity=IDENTITY)
    assert codes(turn) == ["agent_runtime.42248"]


async def test_choose_at_another_checkpoint_is_refused_with_the_actions_that_fit(notes_agent: NotesAgent):
    script = notes_agent.script(call("saveNote", {"title": "季度总结"}), call("builtin_node_approval", {
        "summary": "保存", "toolName": "saveNote"}))  # fmt: skip
    sid = notes_agent.sid("wrong")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(sid, "保存季度总结", identity=IDENTITY)
        with pytest.raises(AgentError, match=r"CHOOSE answers a CHOICE checkpoint.*CONFIRM, REJECT"):
            await agent.resume(sid, "CHOOSE", "x")
        with pytest.raises(AgentError, match="unknown resume action 'PICK'"):
            await agent.resume(sid, "PICK", "x")


async def test_the_cli_chooses_and_prints_the_candidates(notes_agent: NotesAgent):
    contract = copy_contract()
    notes_agent.contract(contract)
    script = notes_agent.script(FIND, ASK, say("好"))
    sid = notes_agent.sid("cli")
    ran = skillyard_cli("agent", "run", str(notes_agent.dir), "--session", sid, "--message", "存一篇",
                        "--model", script, "--context", json.dumps(IDENTITY))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "checkpoint: CHOICE (expects title)" in ran.stdout and "周报: 周报 (n-2)" in ran.stdout
    wrong = skillyard_cli("agent", "resume", "--session", sid, "--action", "CHOOSE", "--text", "x", "--json")
    assert wrong.returncode == 1
    assert json.loads(wrong.stdout)["refusal"]["name"] == "CHOICE_INVALID"
    right = skillyard_cli("agent", "resume", "--session", sid, "--action", "choose", "--text", "周报", "--json")
    assert right.returncode == 0, right.stderr
    assert json.loads(right.stdout)["status"] == "RUNNING"
