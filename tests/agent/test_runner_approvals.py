"""APPROVAL checkpoints through the runner (§14.1): CONFIRM runs the gated write once, REJECT / CANCEL / a reply,
CONFIRM after the bound arguments or the summary changed, expired approvals (reconfirm_after)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.runner import AgentError, resume_session
from skillyard.agent.store import AgentStore
from support.agent import docs as docs_kit
from support.agent import keeper as keeper_kit
from support.agent import memo as memo_kit
from support.agent import runtime as runtime_kit
from support.agent.docs import APPROVAL_REQUIRED, ASK_SAVE, SAVE, DocsAgent, approve, assert_coded, store_of
from support.agent.folder import age_checkpoint
from support.agent.keeper import KeeperAgent
from support.agent.memo import MemoAgent, Recorder, changed
from support.agent.notes import CONTRACT, IDENTITY, NotesAgent, send_once
from support.agent.probes import call, calls, codes, finish, needs_db, say
from support.agent.runtime import make_agent, script, tool

pytestmark = needs_db


async def set_session_value(session_id: str, key: str, value: Any) -> None:
    async with SkillYard() as yard:
        store = await store_of(yard)
        session = await store.load_session(session_id)
        assert session is not None
        session.values[key] = value
        await store.save_session(session)


async def test_approval_required_mismatch_and_finish_need_target(notes_agent: NotesAgent):
    result = await send_once(
        notes_agent,
        "保存季度总结",
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "好了"}),
        say("等确认"),
    )
    assert codes(result) == ["agent_runtime.42221", "agent_runtime.42246", "agent_runtime.42254"]
    assert "saveNote" in str(result.observations[1].content)  # the mismatch names the gated tool
    assert result.observations[0].sources["title"] == "USER"
    assert result.observations[0].sources["owner"] == "PLATFORM"
    assert notes_agent.calls() == [] and result.status == "RUNNING"


async def test_confirm_after_a_bound_value_changed_asks_again_and_runs_nothing(notes_agent: NotesAgent):
    script = notes_agent.script(
        # task 1: publish session.category (share SESSION)
        call("builtin_output_set", {"key": "category", "value": "工作", "sourceType": "USER", "sourceRef": "msg"}),
        call("builtin_node_finish", {"output": "分类已记住"}),
        # task 2: the write binds category from session.category
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        first = await agent.send(notes_agent.sid("ch"), "以后分类用工作", identity=IDENTITY)
        assert first.status == "DONE"
        gated = await agent.send(notes_agent.sid("ch"), "保存季度总结", identity=IDENTITY)
        assert gated.checkpoint is not None and "分类：工作" in gated.checkpoint["question"]
        assert gated.observations[0].sources["category"] == "SESSION"
        # the session value changes while the approval waits (another process of the same session)
        store = AgentStore(yard.database)
        session = await store.load_session(notes_agent.sid("ch"))
        assert session is not None and session.values == {"category": "工作"}
        session.values["category"] = "生活"
        await store.save_session(session)
    async with SkillYard() as yard:
        again = await resume_session(yard, notes_agent.sid("ch"), "CONFIRM")
        assert again.status == "SUSPENDED" and again.checkpoint is not None
        assert again.checkpoint["type"] == "APPROVAL" and "变化" in again.checkpoint["question"]
        assert "分类：生活" in again.checkpoint["question"]
        assert notes_agent.calls() == []  # the changed write did not run
        done = await resume_session(yard, notes_agent.sid("ch"), "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    assert [c["input"]["category"] for c in notes_agent.calls("saveNote")] == ["生活"]


async def test_an_expired_approval_needs_a_fresh_confirmation(notes_agent: NotesAgent, monkeypatch: pytest.MonkeyPatch):
    script = notes_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    monkeypatch.setenv("SKILLYARD_AGENT_RECONFIRM_AFTER", "0s")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(notes_agent.sid("exp"), "保存季度总结", identity=IDENTITY)
        expired = await agent.resume(notes_agent.sid("exp"), "CONFIRM")
    assert expired.status == "SUSPENDED" and expired.checkpoint is not None
    assert expired.checkpoint["type"] == "APPROVAL" and "有效期" in expired.checkpoint["question"]
    assert "标题：季度总结" in expired.checkpoint["question"]
    assert notes_agent.calls() == []
    monkeypatch.delenv("SKILLYARD_AGENT_RECONFIRM_AFTER")
    async with SkillYard() as yard:  # the fresh approval is within the default 24h
        done = await resume_session(yard, notes_agent.sid("exp"), "CONFIRM")
    assert done.status == "DONE" and len(notes_agent.calls("saveNote")) == 1


async def test_a_republished_contract_does_not_reach_a_task_gated_under_the_old_one(notes_agent: NotesAgent):
    """Orchestration P0: the agent is republished while a write waits (saveNote is no longer a WRITE tool); the open
    task keeps its pinned contract (the write still needs approval), a new task runs with the new one. (A gated tool
    that is not a write of the node's contract, WRITE_CONTRACT_INCOMPLETE, is tested on a node context.)"""
    script = notes_agent.script(
        call("saveNote", {"title": "季度总结"}),
        say("稍等"),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("saveNote", {"title": "新任务"}),
        call("builtin_node_finish", {"output": "存好了"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        gated = await agent.send(notes_agent.sid("wci"), "保存季度总结", identity=IDENTITY)
    assert codes(gated) == ["agent_runtime.42221"] and gated.status == "RUNNING"
    read_only = json.loads(json.dumps(CONTRACT))
    save = read_only["tools"]["saveNote"]
    del save["sideEffect"], save["verify"]
    notes_agent.contract(read_only)  # the agent was republished: saveNote is no longer a WRITE tool
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        asked = await agent.send(notes_agent.sid("wci"), "继续", identity=IDENTITY)
        assert codes(asked) == [None] and asked.status == "SUSPENDED" and asked.checkpoint["type"] == "APPROVAL"
        assert notes_agent.calls() == []
        await agent.resume(notes_agent.sid("wci"), "CANCEL")
        fresh = await agent.send(notes_agent.sid("wci"), "再存一条：新任务", identity=IDENTITY)
    assert fresh.binding["skills"]["notes.keeper"] != gated.binding["skills"]["notes.keeper"]
    assert codes(fresh) == [None, None] and fresh.status == "DONE"  # the new contract: a read, no approval
    assert [c["input"]["title"] for c in notes_agent.calls("saveNote")] == ["新任务"]


@pytest.mark.parametrize(("hours", "runs"), [(25, False), (23, True)])
async def test_the_default_reconfirm_after_is_24_hours(keeper_agent: KeeperAgent, hours: int, runs: bool):
    script = keeper_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        await agent.send(keeper_agent.sid(f"re{hours}"), "保存季度总结", identity=keeper_kit.IDENTITY)
    async with SkillYard() as yard:
        await age_checkpoint(keeper_agent.sid(f"re{hours}"), hours * 3600, yard=yard)
    async with SkillYard() as yard:  # a new process confirms
        agent = await yard.agent(keeper_agent.dir, model=script)
        turn = await agent.resume(keeper_agent.sid(f"re{hours}"), "CONFIRM")
    if runs:
        assert turn.status == "DONE" and len(keeper_agent.calls("saveNote")) == 1
    else:
        assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "APPROVAL"
        assert keeper_agent.calls() == []


async def test_a_reply_at_approval_drops_the_gated_write_so_approval_is_not_offered_again(memo_agent: MemoAgent):
    model = Recorder(
        memo_agent.script(
            call("saveNote", {"title": "季度总结"}),
            call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
            call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
            say("好的，不保存"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        await agent.send(memo_agent.sid("drop"), "保存季度总结", identity=memo_kit.IDENTITY)
        turn = await agent.resume(memo_agent.sid("drop"), "REPLY", "先别保存")
    assert codes(turn) == ["agent_runtime.42245"] and memo_agent.calls() == []
    assert "builtin_node_approval" not in model.offered(2)


async def test_a_gated_write_and_the_users_words_survive_a_restart(memo_agent: MemoAgent):
    """The write gate's pending write (node.gated) and the user's earlier message (USER provenance) are kept: a
    new process can ask for approval and run the write the user asked for two turns earlier."""
    script = memo_agent.script(
        call("saveNote", {"title": "季度总结"}),
        say("要保存《季度总结》吗？"),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        first = await agent.send(memo_agent.sid("gate"), "保存季度总结", identity=memo_kit.IDENTITY)
        assert first.status == "RUNNING" and codes(first) == ["agent_runtime.42221"]
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        second = await agent.send(memo_agent.sid("gate"), "好的", identity=memo_kit.IDENTITY)
        assert second.status == "SUSPENDED" and second.checkpoint and second.checkpoint["tool"] == "saveNote"
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        done = await agent.resume(memo_agent.sid("gate"), "CONFIRM")
    assert done.status == "DONE" and memo_agent.calls("saveNote")[0]["input"]["title"] == "季度总结"
    assert memo_agent.calls("saveNote")[0]["input"]["owner"] == "42"


@pytest.mark.spec("§14.1")
async def test_confirm_after_the_contract_changed_on_disk_runs_the_pinned_approval(memo_agent: MemoAgent):
    """Orchestration P0: a new process loads a contract whose argument label changed while the write waited for
    approval; the task's pinned contract is used, so the summary the user approved is still the summary and CONFIRM
    runs the write once."""
    script = memo_agent.script(
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "发了"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        first = await agent.send(memo_agent.sid("relabel"), "发备忘：开会", identity=memo_kit.IDENTITY)
        assert first.checkpoint and "内容：开会" in first.checkpoint["question"]
    memo_agent.contract(changed(lambda c: c["tools"]["sendMemo"]["args"]["text"].update(label="正文")))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        done = await agent.resume(memo_agent.sid("relabel"), "CONFIRM")
    assert done.status == "DONE" and len(memo_agent.calls("sendMemo")) == 1
    assert done.binding == first.binding


async def test_cancel_at_approval_says_which_write_was_not_done(memo_agent: MemoAgent):
    script = memo_agent.script(
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        await agent.send(memo_agent.sid("cancel"), "发一条备忘：开会", identity=memo_kit.IDENTITY)
        turn = await agent.resume(memo_agent.sid("cancel"), "cancel")
    assert turn.status == "CANCELLED" and memo_agent.calls() == []
    assert "sendMemo" in str(turn.reply) or "正在发送备忘" in str(turn.reply) or "发备忘" in str(turn.reply)


@pytest.mark.spec("§14.1")
async def test_confirm_runs_the_approved_write_once_with_bound_arguments_and_its_idempotency_key(docs_agent: DocsAgent):
    """§14.1 steps 1–3: APPROVAL_REQUIRED → approval → CONFIRM executes the write once with the arguments the gate
    bound (owner from platform.userId, not the model's value). Issue: the idempotency key reaches the skill as
    runtime_context["idempotency_key"]; docs: the hex SHA-256 of the key paths' values (here only `title`)."""
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "owner": "999"}), approve("saveDoc"), finish("已保存")
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        first = await agent.send(docs_agent.sid("ok"), ASK_SAVE, identity=docs_kit.IDENTITY)
    assert first.status == "SUSPENDED" and first.checkpoint and first.checkpoint["type"] == "APPROVAL"
    assert docs_kit.codes(first)[0] == APPROVAL_REQUIRED and docs_agent.calls() == []
    async with SkillYard() as yard:  # a new process confirms
        agent = await yard.agent(docs_agent.dir, model=script)
        done = await agent.resume(docs_agent.sid("ok"), "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    rows = docs_agent.calls("saveDoc")
    assert len(rows) == 1 and rows[0]["input"]["owner"] == "42" and rows[0]["input"]["title"] == "季度总结"
    assert rows[0]["key"] == hashlib.sha256("季度总结".encode()).hexdigest()
    assert_coded(first, done)


async def test_confirm_after_a_session_value_changed_runs_nothing_and_asks_again(docs_agent: DocsAgent):
    """Issue: "CONFIRM after the bound arguments or their summary changed: the write is not executed and a new
    APPROVAL checkpoint is raised (fail closed)"; docs name exactly this example (a `from: session.x` value
    changed). The new checkpoint shows the new value, and its CONFIRM runs the write with it."""
    sid = docs_agent.sid("sess")
    script = docs_agent.script(say("好的"), call("saveDoc", SAVE), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, "你好", identity=docs_kit.IDENTITY)
    await set_session_value(sid, "folder", "工作")
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        gated = await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
    assert gated.checkpoint and "目录：工作" in gated.checkpoint["question"], gated.checkpoint
    await set_session_value(sid, "folder", "私人")
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        again = await agent.resume(sid, "CONFIRM")
        assert docs_agent.calls() == [], "the write ran although its arguments changed after the approval"
        assert again.status == "SUSPENDED" and again.checkpoint and again.checkpoint["type"] == "APPROVAL"
        assert "目录：私人" in again.checkpoint["question"], again.checkpoint
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    assert [r["input"].get("folder") for r in docs_agent.calls("saveDoc")] == ["私人"]


@pytest.mark.spec("§14.1")
async def test_a_const_changed_on_disk_during_approval_keeps_the_approved_value(docs_agent: DocsAgent):
    """§14.1 step 3 with orchestration P0: a new process loads a contract whose `const` changed between the approval
    and the CONFIRM; the task runs its pinned contract, so the write executes with the approved 类型：草稿, never with
    a value the user did not see."""
    sid = docs_agent.sid("const")
    docs_agent.contract(
        docs_kit.changed(lambda c: c["tools"]["saveDoc"]["args"].update(kind={"const": "草稿", "label": "类型"}))
    )
    script = docs_agent.script(call("saveDoc", SAVE), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        first = await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
    assert first.checkpoint and "类型：草稿" in first.checkpoint["question"]
    docs_agent.contract(
        docs_kit.changed(lambda c: c["tools"]["saveDoc"]["args"].update(kind={"const": "正式", "label": "类型"}))
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.resume(sid, "CONFIRM")
    assert [c["input"]["kind"] for c in docs_agent.calls("saveDoc")] == ["草稿"]


@pytest.mark.spec("§5.2")
async def test_confirm_after_a_masked_sensitive_value_changed_asks_again(docs_agent: DocsAgent):
    """Issue: CONFIRM after "the bound arguments *or* their summary changed" → nothing runs, a new APPROVAL. A
    sensitive argument is masked (`***`, §5.2), so its summary line stays the same while the bound value changes:
    the bound arguments decide, the user never approved the new secret."""
    sid = docs_agent.sid("secret")
    docs_agent.contract(
        docs_kit.changed(
            lambda c: c["tools"]["saveDoc"]["args"].update(
                kind={"from": "session.secret", "required": False, "sensitive": True, "label": "口令"}
            )
        )
    )
    script = docs_agent.script(say("好的"), call("saveDoc", SAVE), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, "你好", identity=docs_kit.IDENTITY)
    await set_session_value(sid, "secret", "old-secret")
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        gated = await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
    assert gated.checkpoint and "口令：***" in gated.checkpoint["question"], gated.checkpoint
    assert "old-secret" not in gated.checkpoint["question"]
    await set_session_value(sid, "secret", "new-secret")
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        again = await agent.resume(sid, "CONFIRM")
    assert docs_agent.calls() == [], (
        f"executed {docs_agent.calls()} although the bound secret changed after the approval"
    )
    assert again.status == "SUSPENDED" and again.checkpoint and again.checkpoint["type"] == "APPROVAL"


@pytest.mark.spec("§11")
async def test_confirm_after_a_platform_injected_value_changed_asks_again(docs_agent: DocsAgent):
    """§11: platform-injected arguments are not shown in the approval text, but they are bound arguments: when the
    caller identity behind `owner` (from platform.userId) changed between approval and CONFIRM, the bound arguments
    changed → fail closed (a new APPROVAL, nothing runs)."""
    sid = docs_agent.sid("plat")
    script = docs_agent.script(call("saveDoc", SAVE), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        gated = await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
    assert gated.checkpoint and "42" not in gated.checkpoint["question"]
    async with SkillYard() as yard:
        store = await store_of(yard)
        session = await store.load_session(sid)
        assert session is not None and session.identity.get("user_id") == "42"
        session.identity["user_id"] = "77"
        await store.save_session(session)
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        again = await agent.resume(sid, "CONFIRM")
    ran = [r["input"].get("owner") for r in docs_agent.calls("saveDoc")]
    assert ran == [], f"executed with owner {ran} after the identity changed"
    assert again.status == "SUSPENDED" and again.checkpoint and again.checkpoint["type"] == "APPROVAL"


@pytest.mark.spec("§14.1")
async def test_an_expired_approval_asks_again_and_the_fresh_approval_runs_once(docs_agent: DocsAgent):
    """§14.1 step 4 / issue: approvals older than `reconfirm_after` (default 24 h) need a fresh confirmation. The
    fresh APPROVAL is a new approval: its CONFIRM (right away, in yet another process) runs the write once."""
    sid = docs_agent.sid("expire")
    script = docs_agent.script(call("saveDoc", SAVE), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
    await age_checkpoint(sid, 25 * 3600, gated=True)
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        again = await agent.resume(sid, "CONFIRM")
    assert again.status == "SUSPENDED" and again.checkpoint and again.checkpoint["type"] == "APPROVAL"
    assert "标题：季度总结" in again.checkpoint["question"] and docs_agent.calls() == []
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE" and len(docs_agent.calls("saveDoc")) == 1, done.as_dict()


@pytest.mark.spec("§14.1")
async def test_reject_at_approval_after_a_restart_cancels_the_task_and_names_the_write(docs_agent: DocsAgent):
    """§14.1 step 3': REJECT → the write is not executed, node and task are cancelled, and the reply says which
    operation was not done. The next message starts a new task, where the identical write needs a new approval."""
    sid = docs_agent.sid("reject")
    script = docs_agent.script(
        call("saveDoc", SAVE), approve("saveDoc", "保存文档"), call("saveDoc", SAVE), say("要确认")
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        first = await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        rejected = await agent.resume(sid, "REJECT")
        assert rejected.status == "CANCELLED" and docs_agent.calls() == []
        reply = str(rejected.reply)
        assert any(word in reply for word in ("saveDoc", "正在保存文档", "季度总结")), reply
        with pytest.raises(AgentError):
            await agent.resume(sid, "CONFIRM")  # nothing is waiting for a confirmation any more
        later = await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
    assert later.task_id != first.task_id and docs_kit.codes(later) == [APPROVAL_REQUIRED]
    assert docs_agent.calls() == []


@pytest.mark.spec("§14.1")
async def test_a_second_confirm_after_the_write_ran_is_refused_and_runs_nothing(docs_agent: DocsAgent):
    """§14.1: one approval executes the write once. Once the node has moved on (the model answered with text) there
    is no checkpoint: a second CONFIRM — in a new process — raises AgentError and executes nothing."""
    sid = docs_agent.sid("twice")
    script = docs_agent.script(call("saveDoc", SAVE), approve("saveDoc"), say("已保存，还需要什么？"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
        after = await agent.resume(sid, "CONFIRM")
    assert after.status == "RUNNING" and len(docs_agent.calls("saveDoc")) == 1
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        with pytest.raises(AgentError):
            await agent.resume(sid, "CONFIRM")
    assert len(docs_agent.calls("saveDoc")) == 1


@pytest.mark.spec("§14.1", "§14.2")
async def test_an_approved_write_does_not_approve_a_different_write(docs_agent: DocsAgent):
    """§14.1/§14.2: an approval is for "that" write call. After it ran, another write tool (delDoc) and the same tool
    with another idempotency key (saveDoc with another title) each need their own approval; nothing else runs."""
    script = docs_agent.script(
        call("saveDoc", SAVE),
        approve("saveDoc"),
        call("delDoc", {"title": "季度总结"}),
        call("saveDoc", {"title": "周报"}),
        say("都要确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(
            docs_agent.sid("other"), "保存《季度总结》和《周报》，再删掉季度总结", identity=docs_kit.IDENTITY
        )
        after = await agent.resume(docs_agent.sid("other"), "CONFIRM")
    assert docs_kit.codes(after) == [None, APPROVAL_REQUIRED, APPROVAL_REQUIRED], after.as_dict()
    assert [r["tool"] for r in docs_agent.calls()] == ["saveDoc"]
    assert_coded(after)


async def test_two_gated_writes_in_one_reply_confirm_runs_only_the_approved_one(docs_agent: DocsAgent):
    """Fail closed (issue): with two writes stopped in one reply, an approval names one tool; its CONFIRM executes
    exactly that write. The other write still needs its own approval — it must never ride along."""
    script = docs_agent.script(
        calls(("saveDoc", SAVE), ("sendMemo", {"text": "开会"})),
        approve("sendMemo", "发备忘"),
        call("saveDoc", SAVE),
        say("保存还要确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        first = await agent.send(docs_agent.sid("two2"), "保存《季度总结》并发备忘：开会", identity=docs_kit.IDENTITY)
        assert first.status == "SUSPENDED" and first.checkpoint, first.as_dict()
        assert first.checkpoint["tool"] == "sendMemo" and "内容：开会" in first.checkpoint["question"]
        after = await agent.resume(docs_agent.sid("two2"), "CONFIRM")
    assert [r["tool"] for r in docs_agent.calls()] == ["sendMemo"], docs_agent.calls()
    assert docs_kit.codes(after) == [None, APPROVAL_REQUIRED], after.as_dict()


@pytest.mark.spec("§12")
async def test_the_approval_names_the_write_the_gate_holds_when_an_earlier_one_was_gated(docs_agent: DocsAgent):
    """§12 builtin_node_approval: approval is for "the write stopped by the write gate"; a mismatch names the actual
    gated tool (APPROVAL_TOOL_MISMATCH). After saveDoc then sendMemo were stopped in separate replies, the model
    approves one of them: the checkpoint's tool and summary must describe the very write that CONFIRM then runs."""
    script = docs_agent.script(
        call("saveDoc", SAVE),
        call("sendMemo", {"text": "开会"}),
        approve("saveDoc", "保存"),
        approve("sendMemo", "发备忘"),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        turn = await agent.send(docs_agent.sid("held"), "保存《季度总结》并发备忘：开会", identity=docs_kit.IDENTITY)
        assert turn.status == "SUSPENDED" and turn.checkpoint, turn.as_dict()
        held = turn.checkpoint["tool"]
        line = {"saveDoc": "标题：季度总结", "sendMemo": "内容：开会"}[held]
        assert line in turn.checkpoint["question"], turn.checkpoint
        await agent.resume(docs_agent.sid("held"), "CONFIRM")
    assert [r["tool"] for r in docs_agent.calls()] == [held], (held, docs_agent.calls())
    assert_coded(turn)


async def test_a_reply_at_approval_drops_the_write_and_a_later_identical_call_needs_a_new_approval(
    docs_agent: DocsAgent,
):
    """Docs (APPROVAL + REPLY): the gated write is dropped, the text joins the conversation. A later identical call
    of the write is gated again; a stale approval never executes it. After a restart, too."""
    sid = docs_agent.sid("reply")
    script = docs_agent.script(call("saveDoc", SAVE), approve("saveDoc"), call("saveDoc", SAVE), say("要确认"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        turn = await agent.send(sid, "等一下，先别保存", identity=docs_kit.IDENTITY)
    assert turn.status == "RUNNING" and docs_kit.codes(turn) == [APPROVAL_REQUIRED], turn.as_dict()
    assert docs_agent.calls() == []


async def test_approval_survives_a_restart_and_the_write_runs_once(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="季度总结"),
        tool("builtin_node_approval", summary="保存笔记", toolName="saveNote"),
        tool("builtin_node_finish", output="已保存《季度总结》"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        turn = await agent.send("s-approve", "请保存一条标题为季度总结的笔记", identity=runtime_kit.IDENTITY)
    assert turn.status == "SUSPENDED" and turn.checkpoint is not None
    assert turn.checkpoint["type"] == "APPROVAL" and "标题：季度总结" in turn.checkpoint["question"]
    assert "42" not in turn.checkpoint["question"]  # the platform-injected owner is not shown
    assert turn.observations[0].code == "agent_runtime.42221"
    assert runtime_kit.calls(log) == []

    async with SkillYard() as yard:  # a new process on the same database
        resumed = await resume_session(yard, "s-approve", "CONFIRM")
    assert resumed.status == "DONE", resumed.as_dict()
    assert resumed.reply == "已保存《季度总结》"
    assert [c["title"] for c in runtime_kit.calls(log)] == ["季度总结"]
    assert runtime_kit.calls(log)[0]["key"]  # the idempotency key reached the skill
    assert resumed.events[0]["label"] == "Saving the note"


async def test_reject_cancels_and_names_the_write(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="季度总结"),
        tool("builtin_node_approval", summary="保存笔记", toolName="saveNote"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        await agent.send("s-reject", "保存季度总结", identity=runtime_kit.IDENTITY)
        rejected = await agent.resume("s-reject", "REJECT")
    assert rejected.status == "CANCELLED" and "saveNote" in (rejected.reply or "")
    assert runtime_kit.calls(log) == []
    async with SkillYard() as yard:
        with pytest.raises(AgentError, match="no open node"):
            await resume_session(yard, "s-reject", "CONFIRM")


async def test_confirm_after_a_restart_runs_a_write_with_objects_nested_in_lists(notes_agent: NotesAgent):
    # the approval summary of a leaf holding objects (a list of lists of objects) was JSON text in key order; JSONB
    # reorders object keys, so the CONFIRM saw a "changed" summary and asked again instead of running the write
    script = notes_agent.script(
        call("saveNote", {"title": "季度总结", "grid": [[{"zeta": 1, "alpha": 2}]]}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as sy:
        agent = await sy.agent(notes_agent.dir, model=script)
        asked = await agent.send(notes_agent.sid("grid"), "保存季度总结", identity=IDENTITY)
        assert asked.checkpoint is not None and asked.checkpoint["type"] == "APPROVAL"
    async with SkillYard() as sy:  # a new process: the checkpoint comes back from JSONB
        agent = await sy.agent(notes_agent.dir, model=script)
        done = await agent.resume(notes_agent.sid("grid"), "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    assert len(notes_agent.calls("saveNote")) == 1
