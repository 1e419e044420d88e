"""FOLLOW_UP and VERIFY checkpoints through the runner: answers, restarts, REJECT / CANCEL, uncertain writes without
a verify tool asked about one after the other (§14.3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.runner import AgentError
from skillyard.agent.store import AgentStore
from support.agent import docs as docs_kit
from support.agent import exec as exec_kit
from support.agent import runtime as runtime_kit
from support.agent.docs import APPROVAL_REQUIRED, DocsAgent, approve, statuses
from support.agent.exec import TIMEOUT, ExecAgent, add, executions, kind_params, obs
from support.agent.notes import CONTRACT, IDENTITY, NotesAgent, copy_contract, open_node
from support.agent.probes import call, codes, finish, needs_db, say
from support.agent.runtime import calls, make_agent, script, tool

pytestmark = needs_db

SUSPEND_AT = {
    "FOLLOW_UP": [call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]})],
    "APPROVAL": [
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
    ],
    "VERIFY": [
        call("saveNote", {"title": "季度总结", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        say("稍等"),
    ],
}


async def test_timed_out_write_is_pending_and_blocks_finish_then_verify_confirm(notes_agent: NotesAgent):
    script = notes_agent.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        call("builtin_node_finish", {"output": "已发"}),
        say("稍后再看"),
        call("builtin_node_finish", {"output": "已发出"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(notes_agent.sid("v"), "发一条备忘：开会", identity=IDENTITY)
        after = await agent.resume(notes_agent.sid("v"), "CONFIRM")
        assert codes(after) == ["agent_runtime.40016", "agent_runtime.40030", "agent_runtime.42251"]
        assert after.status == "RUNNING" and [e["status"] for e in after.evidence] == ["UNKNOWN"]
        assert len(notes_agent.calls("sendMemo")) == 1
    async with SkillYard() as yard:  # reopened by a new process: no verify tool, so the user is asked
        agent = await yard.agent(notes_agent.dir, model=script)
        asked = await agent.send(notes_agent.sid("v"), "好了吗？", identity=IDENTITY)
        assert asked.status == "SUSPENDED" and asked.checkpoint is not None
        assert asked.checkpoint["type"] == "VERIFY" and asked.checkpoint["tool"] == "sendMemo"
        done = await agent.resume(notes_agent.sid("v"), "CONFIRM")
    assert done.status == "DONE" and done.reply == "已发出"
    assert [(e["status"], e["business_ok"]) for e in done.evidence] == [("SUCCESS", True)]
    assert len(notes_agent.calls("sendMemo")) == 1


async def test_verify_reject_fails_the_write_and_the_node_continues(notes_agent: NotesAgent):
    script = notes_agent.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        say("稍后再看"),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),  # FAILED: an identical write may be called again
        say("需要重新确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(notes_agent.sid("vr"), "发一条备忘：开会", identity=IDENTITY)
        await agent.resume(notes_agent.sid("vr"), "CONFIRM")
        asked = await agent.send(notes_agent.sid("vr"), "好了吗？", identity=IDENTITY)
        assert asked.checkpoint is not None and asked.checkpoint["type"] == "VERIFY"
        rejected = await agent.resume(notes_agent.sid("vr"), "REJECT")
    assert rejected.status == "RUNNING" and rejected.reply == "需要重新确认"
    assert codes(rejected) == ["agent_runtime.42221"]
    assert [(e["status"], e["business_ok"]) for e in rejected.evidence] == [("FAILED", False)]
    assert len(notes_agent.calls("sendMemo")) == 1


async def test_a_message_at_verify_does_not_settle_the_write(notes_agent: NotesAgent):
    script = notes_agent.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        say("稍后再看"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(notes_agent.sid("vm"), "发一条备忘：开会", identity=IDENTITY)
        await agent.resume(notes_agent.sid("vm"), "CONFIRM")
        asked = await agent.send(notes_agent.sid("vm"), "好了吗？", identity=IDENTITY)
        assert asked.checkpoint is not None and asked.checkpoint["type"] == "VERIFY"
        chat = await agent.send(notes_agent.sid("vm"), "我也不知道", identity=IDENTITY)
    assert chat.status == "SUSPENDED" and chat.checkpoint is not None and chat.checkpoint["type"] == "VERIFY"
    assert [e["status"] for e in chat.evidence] == ["UNKNOWN"]  # neither confirmed nor rejected
    assert len(notes_agent.calls("sendMemo")) == 1


async def test_follow_up_survives_a_restart_and_a_message_answers_it(notes_agent: NotesAgent):
    script = notes_agent.script(
        call("findNotes", {"q": "总结"}),
        call("builtin_node_follow_up", {"question": "存哪一篇？", "expectedFields": ["title"]}),
        call("builtin_session_info"),
        call("builtin_node_fail", {"reason": "用户改主意了"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        asked = await agent.send(notes_agent.sid("fr"), "存一篇总结", identity=IDENTITY)
        node_id = asked.node_id
    assert asked.status == "SUSPENDED" and asked.checkpoint is not None
    async with SkillYard() as yard:  # new SkillYard, same database: the message is the REPLY
        agent = await yard.agent(notes_agent.dir, model=script)
        answered = await agent.send(notes_agent.sid("fr"), "算了", identity=IDENTITY)
    assert answered.node_id == node_id
    info = answered.observations[0]
    assert info.ok and info.content["nodeId"] == node_id and info.content["nodeStatus"] == "RUNNING"
    assert answered.status == "FAILED" and answered.reply == "用户改主意了"
    assert len(notes_agent.calls("findNotes")) == 1


@pytest.mark.parametrize("action", ["REJECT", "CANCEL"])
async def test_reject_or_cancel_at_follow_up_cancels_the_task(notes_agent: NotesAgent, action: str):
    script = notes_agent.script(
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(notes_agent.sid("fc"), "存个笔记", identity=IDENTITY)
        cancelled = await agent.resume(notes_agent.sid("fc"), action)
        assert cancelled.status == "CANCELLED" and cancelled.reply == "已取消。"
        assert await open_node(yard, notes_agent.sid("fc")) is None
        with pytest.raises(AgentError, match="no open node"):
            await agent.resume(notes_agent.sid("fc"), "REPLY", "x")


@pytest.mark.parametrize("checkpoint", list(SUSPEND_AT))
async def test_cancel_at_every_checkpoint(notes_agent: NotesAgent, checkpoint: str):
    if checkpoint == "VERIFY":  # without a verify tool the reopened node asks the user
        contract = json.loads(json.dumps(CONTRACT))
        del contract["tools"]["saveNote"]["verify"]
        notes_agent.contract(contract)
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=notes_agent.script(*SUSPEND_AT[checkpoint]))
        turn = await agent.send(notes_agent.sid("cx"), "保存季度总结", identity=IDENTITY)
        if checkpoint == "VERIFY":
            await agent.resume(notes_agent.sid("cx"), "CONFIRM")
            turn = await agent.send(notes_agent.sid("cx"), "好了吗", identity=IDENTITY)
        ran = len(notes_agent.calls())
        assert turn.checkpoint is not None and turn.checkpoint["type"] == checkpoint
        cancelled = await agent.resume(notes_agent.sid("cx"), "CANCEL")
        assert cancelled.status == "CANCELLED" and cancelled.checkpoint is None
        assert len(notes_agent.calls()) == ran  # cancelling runs nothing
        assert await open_node(yard, notes_agent.sid("cx")) is None


@pytest.mark.spec("§14.3")
async def test_without_a_verify_tool_the_user_is_asked_at_a_verify_checkpoint_across_a_restart(docs_agent: DocsAgent):
    """§14.3: no verify configured → the node suspends at a VERIFY checkpoint when it reopens, before the model runs
    again. The checkpoint survives a restart; CONFIRM (it took effect) → evidence SUCCESS, the node continues and
    the identical write returns the earlier result without a new approval or execution."""
    sid = docs_agent.sid("vq")
    script = docs_agent.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        approve("sendMemo", "发备忘"),
        say("发送超时了"),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        finish("已发送"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, "发备忘：开会", identity=docs_kit.IDENTITY)
        after = await agent.resume(sid, "CONFIRM")
    assert statuses(after, "sendMemo") == ["UNKNOWN"]
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        asked = await agent.send(sid, "发出去了吗", identity=docs_kit.IDENTITY)
    assert asked.status == "SUSPENDED" and asked.checkpoint and asked.checkpoint["type"] == "VERIFY", asked.as_dict()
    assert asked.checkpoint["tool"] == "sendMemo" and asked.observations == []
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        done = await agent.resume(sid, "CONFIRM")
    assert statuses(done, "sendMemo") == ["SUCCESS"], done.as_dict()
    assert done.observations and done.observations[0].ok and done.observations[0].code is None
    assert done.status == "DONE" and len(docs_agent.calls("sendMemo")) == 1


@pytest.mark.spec("§14.3")
async def test_the_verify_question_tells_the_user_which_write_it_is_about(docs_agent: DocsAgent):
    """§14.3: without verify the user confirms whether the write took effect (docs: a VERIFY answer "then asks about
    the next uncertain write"). With two uncertain memos (开会, 放假) the two questions must say which memo each is
    about, or the user's CONFIRM / REJECT could settle the wrong write."""
    sid = docs_agent.sid("vwhich")
    script = docs_agent.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        approve("sendMemo"),
        call("sendMemo", {"text": "放假", "mode": "timeout"}),
        approve("sendMemo"),
        say("都超时了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, "发两条备忘：开会；放假", identity=docs_kit.IDENTITY)
        await agent.resume(sid, "CONFIRM")
        first = await agent.resume(sid, "CONFIRM")  # runs 放假, then asks about the older 开会
        assert first.checkpoint and first.checkpoint["type"] == "VERIFY", first.as_dict()
        second = await agent.resume(sid, "CONFIRM")
        assert second.checkpoint and second.checkpoint["type"] == "VERIFY", second.as_dict()
    questions = (first.checkpoint["question"], second.checkpoint["question"])
    assert "开会" in questions[0] and "放假" in questions[1], questions


async def test_reject_at_a_verify_checkpoint_marks_the_write_failed_and_the_node_continues(docs_agent: DocsAgent):
    """Issue: "VERIFY checkpoint resume: … REJECT = it did not (FAILED); either way the node continues" (unlike REJECT
    at APPROVAL, the task is not cancelled). The identical write may then be called again, through a new approval."""
    sid = docs_agent.sid("vrej")
    script = docs_agent.script(
        call("sendMemo", {"text": "开会", "mode": "lost"}),
        approve("sendMemo", "发备忘"),
        say("超时了"),
        call("sendMemo", {"text": "开会"}),
        approve("sendMemo", "重发"),
        finish("已发送"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, "发备忘：开会", identity=docs_kit.IDENTITY)
        await agent.resume(sid, "CONFIRM")
        asked = await agent.send(sid, "发出去了吗", identity=docs_kit.IDENTITY)
        assert asked.checkpoint and asked.checkpoint["type"] == "VERIFY"
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        rejected = await agent.resume(sid, "REJECT")
        assert rejected.status == "SUSPENDED" and rejected.checkpoint, rejected.as_dict()
        assert rejected.checkpoint["type"] == "APPROVAL" and statuses(rejected, "sendMemo") == ["FAILED"]
        assert docs_kit.codes(rejected) == [APPROVAL_REQUIRED, None]
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE" and len(docs_agent.calls("sendMemo")) == 2, done.as_dict()


async def test_a_reply_at_a_verify_checkpoint_keeps_it_and_cancel_cancels_the_task(docs_agent: DocsAgent):
    """Docs (VERIFY row): REPLY / send → "nothing changes: the node stays suspended at the same checkpoint" (the model
    is not asked); CANCEL → the task is cancelled, nothing runs."""
    sid = docs_agent.sid("vreply")
    script = docs_agent.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}), approve("sendMemo"), say("超时了")
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, "发备忘：开会", identity=docs_kit.IDENTITY)
        await agent.resume(sid, "CONFIRM")
        asked = await agent.send(sid, "发出去了吗", identity=docs_kit.IDENTITY)
        still = await agent.send(sid, "我不知道", identity=docs_kit.IDENTITY)
        assert still.status == "SUSPENDED" and still.checkpoint == asked.checkpoint, still.as_dict()
        assert statuses(still, "sendMemo") == ["UNKNOWN"]
        cancelled = await agent.resume(sid, "CANCEL")
    assert cancelled.status == "CANCELLED" and len(docs_agent.calls("sendMemo")) == 1


@pytest.mark.spec("§14.3")
async def test_two_uncertain_writes_without_verify_are_asked_about_one_after_the_other(docs_agent: DocsAgent):
    """Docs (Restarts): "a CONFIRM runs the approved write first, then settles the older uncertain writes, and leaves
    the write that has just run … for the next reopening"; a VERIFY answer "then asks about the next uncertain
    write"; only when none is left does the model run again (§14.3)."""
    sid = docs_agent.sid("vtwo")
    script = docs_agent.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        approve("sendMemo"),
        call("delDoc", {"title": "周报", "mode": "timeout"}),
        approve("delDoc"),
        finish("都处理了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, "发备忘：开会，删掉《周报》", identity=docs_kit.IDENTITY)
        await agent.resume(sid, "CONFIRM")
        second = await agent.resume(sid, "CONFIRM")
    assert {e["tool"]: e["status"] for e in second.evidence} == {"sendMemo": "UNKNOWN", "delDoc": "UNKNOWN"}
    assert second.checkpoint and second.checkpoint["type"] == "VERIFY", second.as_dict()
    assert second.checkpoint["tool"] == "sendMemo"
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        next_q = await agent.resume(sid, "CONFIRM")
        assert next_q.checkpoint and next_q.checkpoint["type"] == "VERIFY", next_q.as_dict()
        assert next_q.checkpoint["tool"] == "delDoc" and statuses(next_q, "sendMemo") == ["SUCCESS"]
        done = await agent.resume(sid, "REJECT")
    assert done.status == "DONE", done.as_dict()
    assert {e["tool"]: e["status"] for e in done.evidence} == {"sendMemo": "SUCCESS", "delDoc": "FAILED"}
    assert len(docs_agent.calls()) == 2


@pytest.mark.spec("§14.3")
@pytest.mark.parametrize("kind", kind_params(["cli", "http"]))
async def test_unknown_write_without_verify_asks_at_a_verify_checkpoint(exec_agent: ExecAgent, server, kind: str):
    """§14.3: no verify → a VERIFY checkpoint when the node reopens; CONFIRM = it took effect (SUCCESS) and the node
    continues to finish; the write ran once."""
    srv, base = server
    kw: dict[str, Any] = {"wall": 1} if kind == "http" else {}
    tool = add(exec_agent, kind, f"{kind}Save", base, **kw)
    exec_agent.write(tool)
    sid = exec_agent.sid("vc")
    script = [call(tool, {"mode": "timeout", "title": "季度总结"}), exec_kit.say("超时了"), finish("已保存")]
    first = await exec_agent.send(*script, sid=sid)
    assert [o.code for o in obs(first, tool)] == [TIMEOUT]
    second = await exec_agent.send(*script, sid=sid, message="保存好了吗？")
    assert second.status == "SUSPENDED" and second.checkpoint and second.checkpoint["type"] == "VERIFY", second
    question = second.checkpoint["question"]  # docs: names the write (its label), lists its arguments
    assert f"不确定「正在保存{tool}」是否已经生效" in question and "title：季度总结" in question, question
    assert "所有者" not in question, question  # platform-injected arguments are hidden, as in an approval
    exec_agent.build()
    async with SkillYard() as yard:
        agent = await yard.agent(exec_agent.dir, model=exec_agent.script(*script))
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    assert [e["status"] for e in done.evidence if e["tool"] == tool] == ["SUCCESS"]
    assert executions(exec_agent, srv, kind, tool) == 1


@pytest.mark.spec("§14.2")
async def test_verify_reject_makes_the_write_failed_and_a_new_identical_call_runs_once(exec_agent: ExecAgent):
    """Issue: VERIFY REJECT = it did not take effect (FAILED), the node continues; §14.2 a FAILED write may be called
    again: the model's identical call runs the skill a second time (once)."""
    tool = add(exec_agent, "sh", "shSave")
    exec_agent.write(tool)
    sid = exec_agent.sid("vr")
    script = [
        call(tool, {"mode": "timeout", "title": "季度总结"}),
        exec_kit.say("超时了"),
        call(tool, {"mode": "ok", "title": "季度总结"}),
        finish("已保存"),
    ]
    await exec_agent.send(*script, sid=sid)
    second = await exec_agent.send(*script, sid=sid, message="保存好了吗？")
    assert second.checkpoint and second.checkpoint["type"] == "VERIFY"
    exec_agent.build()
    async with SkillYard() as yard:
        agent = await yard.agent(exec_agent.dir, model=exec_agent.script(*script))
        done = await agent.resume(sid, "REJECT")
    assert done.status == "DONE", done.as_dict()
    assert [e["status"] for e in done.evidence if e["tool"] == tool] == ["FAILED", "SUCCESS"]
    assert len(exec_agent.calls(tool)) == 2


async def test_uncertain_write_without_verify_asks_the_user(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log, verify=False)
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="slow two"),
        tool("builtin_node_approval", summary="保存", toolName="saveNote"),
        {"text": "等一下"},
        tool("builtin_node_finish", output="已保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        await agent.send("s-verify", "保存 slow two", identity=runtime_kit.IDENTITY)
        await agent.resume("s-verify", "CONFIRM")
        asked = await agent.send("s-verify", "怎么样了", identity=runtime_kit.IDENTITY)
        assert asked.status == "SUSPENDED" and asked.checkpoint is not None
        assert asked.checkpoint["type"] == "VERIFY"
        done = await agent.resume("s-verify", "CONFIRM")
    assert done.status == "DONE" and len(calls(log)) == 1


async def test_verify_resume_asks_about_the_next_uncertain_write(notes_agent: NotesAgent):
    contract = copy_contract()
    del contract["tools"]["saveNote"]["verify"]
    notes_agent.contract(contract)
    script = notes_agent.script(
        call("saveNote", {"title": "季度总结", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        say("稍等"),
        say("继续"),
    )
    async with SkillYard() as sy:
        agent = await sy.agent(notes_agent.dir, model=script)
        await agent.send(notes_agent.sid("v2"), "保存季度总结并发备忘：开会", identity=IDENTITY)
        await agent.resume(notes_agent.sid("v2"), "CONFIRM")
        pending = await agent.resume(notes_agent.sid("v2"), "CONFIRM")
        assert [e["status"] for e in pending.evidence] == ["UNKNOWN", "UNKNOWN"]
        first = await agent.send(notes_agent.sid("v2"), "好了吗？", identity=IDENTITY)
        assert first.checkpoint is not None and first.checkpoint["tool"] == "saveNote"
        second = await agent.resume(notes_agent.sid("v2"), "CONFIRM")
    assert second.status == "SUSPENDED", second.as_dict()
    assert second.checkpoint is not None and second.checkpoint["type"] == "VERIFY"
    assert second.checkpoint["tool"] == "sendMemo"


@pytest.mark.spec("§12")
async def test_a_follow_up_answer_enters_the_history_with_its_question_and_fields(notes_agent: NotesAgent):
    # §12: "回答进入历史时带上问题与对应参数" — the model saw the bare answer only
    script = notes_agent.script(
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
        say("好的"),
    )
    async with SkillYard() as sy:
        agent = await sy.agent(notes_agent.dir, model=script)
        asked = await agent.send(notes_agent.sid("hist"), "保存一条笔记", identity=IDENTITY)
        assert asked.checkpoint is not None and asked.checkpoint["type"] == "FOLLOW_UP"
        await agent.resume(notes_agent.sid("hist"), "REPLY", "季度总结")
        assert asked.node_id is not None
        node = await AgentStore(sy.database).load_node(asked.node_id)
        session = await AgentStore(sy.database).load_session(notes_agent.sid("hist"))
    assert node is not None and session is not None
    answer = [m["content"] for m in node.messages if m["role"] == "user"][-1]
    assert answer.startswith("季度总结") and "标题是什么？" in answer and "title" in answer
    assert session.user_messages[-1] == "季度总结"  # USER provenance still matches the bare answer
