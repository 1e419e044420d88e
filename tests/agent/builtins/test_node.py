"""The node-control builtins (builtins/node.py): follow-up and its grounding, approval, finish, fail."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.builtins import call_builtin
from skillyard.agent.codes import ErrorCode
from skillyard.agent.context import NodeContext
from skillyard.agent.runner import resume_session
from skillyard.agent.state import CheckpointType, EvidenceStatus, GatedWrite, NodeStatus, Observation
from support.agent import exec as exec_kit
from support.agent import memo as memo_kit
from support.agent.context import add_evidence, refused
from support.agent.exec import ExecAgent, add, follow_up, kind_params, obs
from support.agent.memo import MemoAgent, last, run_builtin
from support.agent.notes import IDENTITY, NotesAgent, copy_contract, send_once
from support.agent.probes import call, codes, needs_db, say

UNGROUNDED = "agent_runtime.42248"


# follow-up -----------------------------------------------------------------------------------------------------
async def follow_up_context(
    ctx: NodeContext, fields: list[str] | None = None, question: str = "Which title?"
) -> Observation:
    args: dict[str, Any] = {"question": question, "suggestions": ["A", "B"]}
    if fields is not None:
        args["expectedFields"] = fields
    return await call_builtin(ctx, "builtin_node_follow_up", json.dumps(args))


# approval ------------------------------------------------------------------------------------------------------
def gate(ctx: NodeContext, tool: str = "createArticle") -> GatedWrite:
    ctx.node.gated = GatedWrite(tool, {"title": "Hello", "channel": "web"}, {"title": "USER"}, "标题：Hello", "k1")
    return ctx.node.gated


@needs_db
async def test_business_failure_grounds_a_clarifying_question(notes_agent: NotesAgent):
    result = await send_once(
        notes_agent,
        "找笔记",
        call("lookupOwner", {"mode": "business"}),
        call("builtin_node_follow_up", {"question": "要找哪位的笔记？"}),
    )
    assert codes(result) == ["agent_runtime.40004", None]
    assert result.status == "SUSPENDED" and result.checkpoint is not None
    assert result.checkpoint["type"] == "FOLLOW_UP"


@needs_db
async def test_reply_makes_expected_fields_user_and_the_same_question_is_answered(notes_agent: NotesAgent):
    script = notes_agent.script(
        call("saveNote", {"title": "第三季度总结"}),
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
        call("builtin_node_follow_up", {"question": " 标题是什么？\n", "expectedFields": ["title"]}),
        call("saveNote", {"title": "第三季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        asked = await agent.send(notes_agent.sid("fu"), "帮我存个笔记", identity=IDENTITY)
    assert codes(asked) == ["agent_runtime.40024", None]
    assert asked.status == "SUSPENDED" and asked.checkpoint is not None
    assert asked.checkpoint["type"] == "FOLLOW_UP" and asked.checkpoint["expected_fields"] == ["title"]
    async with SkillYard() as yard:  # a new process answers the follow-up
        answered = await resume_session(yard, notes_agent.sid("fu"), "REPLY", "就用第三季度那个")
    assert codes(answered) == ["agent_runtime.42247", "agent_runtime.42221", None]
    assert answered.observations[1].sources["title"] == "USER"  # not in the text: the answered expectedField
    assert answered.checkpoint is not None and answered.checkpoint["type"] == "APPROVAL"
    async with SkillYard() as yard:
        done = await resume_session(yard, notes_agent.sid("fu"), "CONFIRM")
    assert done.status == "DONE"
    assert [c["input"]["title"] for c in notes_agent.calls("saveNote")] == ["第三季度总结"]


@needs_db
async def test_approval_mismatch_names_the_gated_tool(memo_agent: MemoAgent):
    turn = await run_builtin(
        memo_agent,
        "builtin_node_approval",
        {"summary": "发", "toolName": "sendMemo"},
        call("saveNote", {"title": "季度总结"}),
    )
    obs = last(turn)
    assert obs.code == "agent_runtime.42246" and "saveNote" in f"{obs.content} {obs.next_step}"


@needs_db
async def test_fail_ends_the_node_and_the_next_message_starts_a_new_task(memo_agent: MemoAgent):
    script = memo_agent.script(call("builtin_node_fail", {"reason": "做不到"}), say("新任务"))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        failed = await agent.send(memo_agent.sid("fail"), "x", identity=memo_kit.IDENTITY)
        later = await agent.send(memo_agent.sid("fail"), "再来", identity=memo_kit.IDENTITY)
    assert failed.status == "FAILED" and failed.reply == "做不到"
    assert later.task_id != failed.task_id and later.status == "RUNNING"


@pytest.mark.parametrize(
    ("fields", "before", "grounded"),
    [
        (["title"], [], True),  # sources contain USER
        (["text"], [], True),
        (["owner"], [], False),  # from platform: nothing to ask
        (["kind"], [], False),  # const
        (["nothing"], [], False),  # no such argument
        (["color"], [], True),  # has an enum
        ([], [], False),  # a clarifying question needs an empty or failed query first
        ([], [call("findNotes", {"q": "a"})], False),  # a non-empty result does not ground it
        ([], [call("findNotes", {"q": "a", "mode": "empty"})], True),
        ([], [call("findNotes", {"q": "a", "mode": "io"})], False),  # a technical failure does not
    ],
    ids=["user", "user2", "platform", "const", "unknown", "enum", "none", "nonempty", "empty", "io"],
)
@needs_db
async def test_follow_up_grounding(
    memo_agent: MemoAgent, fields: list[str], before: list[dict[str, Any]], grounded: bool
):
    arguments: dict[str, Any] = {"question": "哪一篇？"}
    if fields:
        arguments["expectedFields"] = fields
    turn = await run_builtin(memo_agent, "builtin_node_follow_up", arguments, *before)
    if grounded:
        assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "FOLLOW_UP", turn
        assert turn.checkpoint["expected_fields"] == fields
    else:
        assert last(turn).code == "agent_runtime.42248" and turn.status == "RUNNING" and last(turn).next_step


@needs_db
async def test_follow_up_answered_again_is_refused_but_another_field_set_is_not(memo_agent: MemoAgent):
    ask = {"question": "标题是什么？", "expectedFields": ["title"]}
    script = memo_agent.script(
        call("builtin_node_follow_up", ask),
        call("builtin_node_follow_up", {"question": "  标题是什么？ ", "expectedFields": ["title"]}),
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title", "text"]}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        first = await agent.send(memo_agent.sid("again"), "存个笔记", identity=memo_kit.IDENTITY)
        assert first.checkpoint is not None and first.checkpoint["suggestions"] == []
        second = await agent.resume(memo_agent.sid("again"), "REPLY", "季度总结")
    assert codes(second) == ["agent_runtime.42247", None]
    assert second.status == "SUSPENDED" and second.checkpoint["expected_fields"] == ["title", "text"]


@needs_db
async def test_follow_up_suggestions_reach_the_checkpoint(memo_agent: MemoAgent):
    turn = await run_builtin(
        memo_agent,
        "builtin_node_follow_up",
        {"question": "哪一篇？", "expectedFields": ["title"], "suggestions": ["季度总结", "周报"]},
        call("findNotes", {"q": "a"}),
    )
    assert turn.checkpoint is not None and turn.checkpoint["suggestions"] == ["季度总结", "周报"]


@needs_db
@pytest.mark.parametrize("kind", kind_params(["sh"]))
async def test_non_empty_success_does_not_ground_a_bare_question(exec_agent: ExecAgent, server, kind: str):
    """The counterpart: after a non-empty success a question without expectedFields is FOLLOW_UP_UNGROUNDED."""
    _srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool)
    turn = await exec_agent.send(call(tool, {"mode": "ok"}), follow_up(), exec_kit.say())
    assert [o.code for o in obs(turn, "builtin_node_follow_up")] == [UNGROUNDED]
    assert turn.status == "RUNNING"


async def test_follow_up_suspends_with_a_checkpoint(ctx):
    obs = await follow_up_context(ctx, ["title"])
    assert obs.ok and ctx.node.status is NodeStatus.SUSPENDED
    checkpoint = ctx.node.checkpoint
    assert checkpoint is not None and checkpoint.type is CheckpointType.FOLLOW_UP
    assert (checkpoint.question, checkpoint.expected_fields, checkpoint.suggestions) == (
        "Which title?",
        ["title"],
        ["A", "B"],
    )


@pytest.mark.parametrize("field", ["title", "orderInfo.taxNo", "taxNo", "note", "category", "keyword"])
async def test_follow_up_fields_that_allow_user(ctx, field):
    assert (await follow_up_context(ctx, [field])).ok, field


@pytest.mark.parametrize("field", ["channel", "author", "memo", "spaceId", "secret", "nonsense"])
async def test_follow_up_fields_that_do_not_allow_user_are_ungrounded(ctx, field):
    text = refused(await follow_up_context(ctx, ["title", field]), ErrorCode.FOLLOW_UP_UNGROUNDED)
    assert field in text and "askable arguments: " in text and "title" in text
    assert ctx.node.status is NodeStatus.RUNNING and ctx.node.checkpoint is None


async def test_follow_up_evidence_field_needs_a_non_empty_query_of_this_node(ctx):
    assert "after a non-empty query" in refused(await follow_up_context(ctx, ["tags"]), ErrorCode.FOLLOW_UP_UNGROUNDED)
    await add_evidence(ctx, empty=True)
    await add_evidence(ctx, node_id="other")  # another node's results do not count
    await add_evidence(ctx, business_ok=False)
    refused(await follow_up_context(ctx, ["tags"]), ErrorCode.FOLLOW_UP_UNGROUNDED)
    await add_evidence(ctx)
    assert (await follow_up_context(ctx, ["tags"])).ok


@pytest.mark.parametrize(
    ("latest", "grounded"),
    [
        ({"empty": True}, True),
        ({"business_ok": False}, True),
        ({}, False),
        ({"status": EvidenceStatus.FAILED, "business_ok": None}, False),
    ],
)
async def test_follow_up_without_fields_needs_an_empty_or_failed_latest_call(ctx, latest, grounded):
    refused(await follow_up_context(ctx), ErrorCode.FOLLOW_UP_UNGROUNDED)  # no business call yet
    await add_evidence(ctx, empty=not grounded)  # an earlier call does not matter
    await add_evidence(ctx, **latest)
    obs = await follow_up_context(ctx, [])
    if grounded:
        assert obs.ok and ctx.node.checkpoint is not None and ctx.node.checkpoint.expected_fields == []
    else:
        assert "not empty or failed" in refused(obs, ErrorCode.FOLLOW_UP_UNGROUNDED)


async def test_follow_up_answered_in_this_turn_is_refused(ctx):
    ctx.node.answered = [{"question": "Which  title?", "expected_fields": ["title"]}]
    text = refused(await follow_up_context(ctx, ["title"], question=" Which title? "), ErrorCode.FOLLOW_UP_ANSWERED)
    assert "do not ask again" in text
    assert (await follow_up_context(ctx, ["title", "note"])).ok  # other fields: a new question


async def test_follow_up_needs_a_question(ctx):
    refused(await call_builtin(ctx, "builtin_node_follow_up", {"question": "  "}), ErrorCode.ARG_REJECTED)


async def test_approval_not_gated(ctx):
    obs = await call_builtin(ctx, "builtin_node_approval", {"summary": "Create it", "toolName": "createArticle"})
    refused(obs, ErrorCode.APPROVAL_NOT_GATED)
    assert ctx.node.checkpoint is None


async def test_approval_tool_mismatch_names_the_gated_tool(ctx):
    gate(ctx)
    obs = await call_builtin(ctx, "builtin_node_approval", {"summary": "Create it", "toolName": "queryArticle"})
    assert "'createArticle'" in refused(obs, ErrorCode.APPROVAL_TOOL_MISMATCH)
    assert ctx.node.status is NodeStatus.RUNNING


async def test_approval_suspends_with_the_gated_write(ctx):
    gated = gate(ctx)
    obs = await call_builtin(
        ctx, "builtin_node_approval", {"summary": "Create the article", "toolName": "createArticle"}
    )
    assert obs.ok and ctx.node.status is NodeStatus.SUSPENDED
    checkpoint = ctx.node.checkpoint
    assert checkpoint is not None and checkpoint.type is CheckpointType.APPROVAL
    assert checkpoint.question == "Create the article\n标题：Hello"
    assert (checkpoint.tool, checkpoint.args, checkpoint.summary) == ("createArticle", gated.args, "标题：Hello")
    assert ctx.node.gated is gated  # kept for the resume (idempotency key, sources)


async def test_approval_of_a_tool_that_is_not_a_contract_write(ctx):
    gate(ctx, "queryArticle")
    obs = await call_builtin(ctx, "builtin_node_approval", {"summary": "s", "toolName": "queryArticle"})
    refused(obs, ErrorCode.WRITE_CONTRACT_INCOMPLETE)


async def test_fail(ctx):
    refused(await call_builtin(ctx, "builtin_node_fail", {"reason": ""}), ErrorCode.ARG_REJECTED)
    obs = await call_builtin(ctx, "builtin_node_fail", {"reason": "The space is archived."})
    assert obs.ok and ctx.node.status is NodeStatus.FAILED and ctx.node.reply == "The space is archived."


@needs_db
async def test_follow_up_is_grounded_by_any_tool_that_lets_the_user_give_the_argument(notes_agent: NotesAgent):
    # two tools share the path "title": the first one (listed first) takes it from the model only, the second
    # allows USER — the follow-up asking for "title" is grounded (it was refused: the first tool "won")
    contract = copy_contract()
    tools = contract["tools"]
    finder = tools.pop("findNotes")
    finder["args"]["title"] = {"sources": ["MODEL"], "required": False}
    contract["tools"] = {"findNotes": finder, **tools}
    notes_agent.contract(contract)
    result = await send_once(
        notes_agent, "保存笔记", call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]})
    )
    assert codes(result) == [None], result.as_dict()
    assert result.checkpoint is not None and result.checkpoint["expected_fields"] == ["title"]
