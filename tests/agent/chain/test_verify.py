"""Settling an uncertain write with its verify tool (chain/verify.py, §14.3, §6.4), when the node reopens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.chain import verify_write
from skillyard.agent.state import EvidenceStatus
from skillyard.agent.turn import TurnResult
from support.agent import docs as docs_kit
from support.agent import exec as exec_kit
from support.agent import notes as notes_kit
from support.agent import runtime as runtime_kit
from support.agent.docs import (
    APPROVAL_REQUIRED,
    ASK_SAVE,
    OPEN_EVIDENCE,
    PENDING_VERIFY,
    SAVE,
    TIMEOUT,
    DocsAgent,
    approve,
    assert_coded,
    changed,
    statuses,
)
from support.agent.exec import OK200, ExecAgent, add, obs
from support.agent.keeper import IDENTITY, KeeperAgent
from support.agent.notes import NotesAgent
from support.agent.probes import call, codes, finish, needs_db, say
from support.agent.runtime import calls, make_agent, script, tool

IO_ERROR = "agent_runtime.40018"


NEED_TARGET = "agent_runtime.42254"


def of(turn: TurnResult, tool: str) -> list[Any]:
    """The observations of one tool (an automatic verify call is an observation of its own)."""
    return [o for o in turn.observations if o.tool == tool]


@needs_db
async def test_the_verify_call_on_reopen_emits_its_label(keeper_agent: KeeperAgent):
    script = keeper_agent.script(
        call("saveNote", {"title": "季度总结", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        say("稍等"),
        say("好了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        await agent.send(keeper_agent.sid("ev"), "保存季度总结", identity=IDENTITY)
        after = await agent.resume(keeper_agent.sid("ev"), "CONFIRM")
        assert after.events == [{"type": "tool", "tool": "saveNote", "label": "正在保存笔记"}]
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        reopened = await agent.send(keeper_agent.sid("ev"), "好了吗", identity=IDENTITY)
    assert [e["status"] for e in reopened.evidence if e["tool"] == "saveNote"] == ["SUCCESS"]
    assert {"type": "tool", "tool": "findNotes", "label": "正在查找笔记"} in reopened.events, reopened.events


@pytest.mark.spec("§14.3")
@needs_db
async def test_an_older_uncertain_write_is_verified_when_a_confirm_reopens_the_node(keeper_agent: KeeperAgent):
    """§14.3: an uncertain write is settled when its node reopens; a CONFIRM of another write after a restart is a
    reopening too (docs: only a write that has *just* become uncertain is left for the next reopening)."""
    script = keeper_agent.script(
        call("saveNote", {"title": "季度总结", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        # after CONFIRM: saveNote times out (UNKNOWN); the model goes on with the memo
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        # after the second CONFIRM (new process): the memo ran; the old write should have been checked first
        call("builtin_node_finish", {"output": "都好了"}),
        say("还有没确认的写操作"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        await agent.send(keeper_agent.sid("older"), "保存季度总结，再发备忘：开会", identity=IDENTITY)
        second = await agent.resume(keeper_agent.sid("older"), "CONFIRM")
        assert second.checkpoint is not None and second.checkpoint["tool"] == "sendMemo"
        assert [e["status"] for e in second.evidence] == ["UNKNOWN"]
    async with SkillYard() as yard:  # a new process confirms the memo
        agent = await yard.agent(keeper_agent.dir, model=script)
        done = await agent.resume(keeper_agent.sid("older"), "CONFIRM")
    assert len(keeper_agent.calls("findNotes")) == 1, done.as_dict()  # the verify call of the older uncertain write
    assert {e["tool"]: e["status"] for e in done.evidence if e["tool"] != "findNotes"} == {
        "saveNote": "SUCCESS",
        "sendMemo": "SUCCESS",
    }
    assert done.status == "DONE"


@pytest.mark.spec("§14.3", "§6.4", "§14.2")
@needs_db
async def test_verify_says_done_after_a_restart_so_the_write_succeeded_and_its_result_is_reused(docs_agent: DocsAgent):
    """§14.3: when the node reopens (a new process), the configured verify tool runs with `call.title`; §6.4: the
    verify tool's success → the write counts as SUCCESS. §14.2: the identical write then returns the earlier
    result without approval and without a call; the target is complete, so finish passes."""
    sid = docs_agent.sid("vdone")
    docs_agent.contract(changed(lambda c: c.update(target="saveDoc")))
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        say("保存超时了，稍后核实"),
        call("saveDoc", SAVE),
        finish("已保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
        after = await agent.resume(sid, "CONFIRM")
    assert statuses(after, "saveDoc") == ["UNKNOWN"] and len(docs_agent.committed("saveDoc")) == 1
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        done = await agent.send(sid, "保存好了吗？", identity=docs_kit.IDENTITY)
    assert [r["input"].get("title") for r in docs_agent.calls("checkDoc")] == ["季度总结"]
    assert statuses(done, "saveDoc") == ["SUCCESS"], done.as_dict()
    [reused] = of(done, "saveDoc")
    assert reused.ok and reused.code is None, reused
    assert len(docs_agent.calls("saveDoc")) == 1 and len(docs_agent.committed("saveDoc")) == 1
    assert done.status == "DONE", done.as_dict()


@pytest.mark.spec("§6.4", "§14.2")
@needs_db
async def test_verify_says_not_done_after_a_restart_so_the_write_may_run_again_with_a_new_approval(
    docs_agent: DocsAgent,
):
    """§6.4: the verify tool's business failure → the write counts as FAILED. §14.2: a failed write may be called
    again normally, i.e. through the write gate (a new approval); CONFIRM executes it a second time."""
    sid = docs_agent.sid("vnot")
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "mode": "lost"}),
        approve("saveDoc"),
        say("保存超时了"),
        call("saveDoc", SAVE),
        approve("saveDoc", "重新保存"),
        finish("已保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
        after = await agent.resume(sid, "CONFIRM")
    assert docs_kit.codes(after)[0] == TIMEOUT and docs_agent.committed() == []
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        again = await agent.send(sid, "没保存上吗？", identity=docs_kit.IDENTITY)
        assert len(docs_agent.calls("checkDoc")) == 1
        assert statuses(again, "saveDoc") == ["FAILED"], again.as_dict()
        assert docs_kit.codes(again) == [APPROVAL_REQUIRED, None] and again.status == "SUSPENDED"
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    assert len(docs_agent.calls("saveDoc")) == 2 and len(docs_agent.committed("saveDoc")) == 1
    assert_coded(after, again, done)


@pytest.mark.spec("§10.2", "§6.4")
@needs_db
async def test_a_write_verified_as_not_done_does_not_complete_the_target(docs_agent: DocsAgent):
    """§10.2 step 4 + §6.4: a write the verify tool found not done is FAILED, so the target is not complete and
    finish answers FINISH_NEED_TARGET (after the open-evidence gate is cleared)."""
    sid = docs_agent.sid("vtarget")
    docs_agent.contract(changed(lambda c: c.update(target="saveDoc")))
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "mode": "lost"}),
        approve("saveDoc"),
        say("超时了"),
        finish("已保存"),
        say("还没保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
        await agent.resume(sid, "CONFIRM")
        turn = await agent.send(sid, "好了吗", identity=docs_kit.IDENTITY)
    assert statuses(turn, "saveDoc") == ["FAILED"] and docs_kit.codes(turn) == [NEED_TARGET], turn.as_dict()
    assert_coded(turn)


@pytest.mark.spec("§14.3")
@needs_db
async def test_a_failed_verify_call_leaves_the_write_unknown_and_the_next_reopening_verifies_again(
    docs_agent: DocsAgent,
):
    """Docs (chain.verify_write): "a failed verify call leaves it UNKNOWN"; §14.3: until there is a conclusion the
    same write cannot be called again and the node cannot finish. The next reopening verifies again."""
    sid = docs_agent.sid("vfail")
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        say("超时了"),
        call("saveDoc", SAVE),
        finish("已保存"),
        say("还在核实"),
        finish("已保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
        await agent.resume(sid, "CONFIRM")
    docs_agent.fault.write_text("down", encoding="utf-8")
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        stuck = await agent.send(sid, "好了吗", identity=docs_kit.IDENTITY)
    assert len(docs_agent.calls("checkDoc")) == 1 and statuses(stuck, "saveDoc") == ["UNKNOWN"], stuck.as_dict()
    assert docs_kit.codes(stuck) == [PENDING_VERIFY, OPEN_EVIDENCE] and len(docs_agent.calls("saveDoc")) == 1
    docs_agent.fault.unlink()
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        done = await agent.send(sid, "现在呢", identity=docs_kit.IDENTITY)
    assert len(docs_agent.calls("checkDoc")) == 2 and statuses(done, "saveDoc") == ["SUCCESS"], done.as_dict()
    assert done.status == "DONE"
    assert_coded(stuck, done)


@pytest.mark.spec("§14.4", "§14.3")
@needs_db
async def test_an_io_error_write_is_unknown_and_verified_when_a_follow_up_answer_reopens_the_node(
    docs_agent: DocsAgent,
):
    """§14.4: an IO error on a write is UNKNOWN. Docs/§14.3: a FOLLOW_UP answer reopens the node, so the uncertain
    write is verified before the model runs again (here: not committed → FAILED)."""
    sid = docs_agent.sid("fu")
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "mode": "io"}),
        approve("saveDoc"),
        call("builtin_node_follow_up", {"question": "备忘内容是什么？", "expectedFields": ["text"]}),
        say("知道了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
        asked = await agent.resume(sid, "CONFIRM")
    assert docs_kit.codes(asked)[0] == IO_ERROR and statuses(asked, "saveDoc") == ["UNKNOWN"]
    assert asked.checkpoint and asked.checkpoint["type"] == "FOLLOW_UP"
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        answered = await agent.resume(sid, "REPLY", text="开会")
    assert len(docs_agent.calls("checkDoc")) == 1 and statuses(answered, "saveDoc") == ["FAILED"], answered.as_dict()


@pytest.mark.spec("§14.3")
@needs_db
async def test_a_reply_at_an_approval_reopens_the_node_and_verifies_the_older_uncertain_write(docs_agent: DocsAgent):
    """Docs (Restarts) / §14.3: on a resume — "a FOLLOW_UP answer, an APPROVAL reply, a VERIFY answer" — every
    UNKNOWN write is checked with its verify tool before the model runs again; here in a new process."""
    sid = docs_agent.sid("areply")
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        call("sendMemo", {"text": "开会"}),
        approve("sendMemo"),
        say("好的，不发了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, "保存《季度总结》，再发备忘：开会", identity=docs_kit.IDENTITY)
        gated = await agent.resume(sid, "CONFIRM")
    assert statuses(gated, "saveDoc") == ["UNKNOWN"] and gated.checkpoint and gated.checkpoint["tool"] == "sendMemo"
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        turn = await agent.send(sid, "备忘先不发", identity=docs_kit.IDENTITY)
    assert len(docs_agent.calls("checkDoc")) == 1 and statuses(turn, "saveDoc") == ["SUCCESS"], turn.as_dict()
    assert docs_agent.calls("sendMemo") == [] and turn.status == "RUNNING"


@pytest.mark.spec("§14.3", "§6.4")
@needs_db
@pytest.mark.parametrize(
    "verify_mode,status", [("ok", "SUCCESS"), ("business", "FAILED"), ("io", "UNKNOWN")], ids=["found", "absent", "err"]
)
async def test_unknown_write_is_verified_by_its_verify_tool_when_the_node_reopens(
    exec_agent: ExecAgent, verify_mode: str, status: str
):
    """§14.3 / §6.4: the node reopens on the next message → the verify tool runs once (its success → the write
    SUCCESS, its business failure → FAILED, a failed verify call leaves it UNKNOWN); the write itself never runs
    again. Write: a shell skill timing out; verify: an in-process read whose `success` is code == 200."""
    write = add(exec_agent, "sh", "shSave")
    check = add(exec_agent, "py", "pyCheck")
    exec_agent.write(write, verify=check, verify_mode=verify_mode)
    exec_agent.read(check, success=OK200)
    sid = exec_agent.sid("ver")
    script = [call(write, {"mode": "timeout", "title": "季度总结"}), exec_kit.say("超时了"), exec_kit.say("再看看")]
    first = await exec_agent.send(*script, sid=sid)
    assert [o.code for o in obs(first, write)] == [exec_kit.TIMEOUT]
    second = await exec_agent.send(*script, sid=sid, message="保存好了吗？")
    evidence = {e["id"]: e["status"] for e in second.evidence if e["tool"] == write}
    assert list(evidence.values()) == [status], second.evidence
    assert len(exec_agent.calls(write)) == 1
    checks = exec_agent.calls(check)
    assert len(checks) == 1 and checks[0]["input"].get("title") == "季度总结", checks
    # docs: the automatic verify call emits its label as a progress event like any tool call
    assert {"type": "tool", "tool": check, "label": f"正在查询{check}"} in second.events, second.events


@needs_db
async def test_unknown_http_write_is_verified_by_an_http_read(exec_agent: ExecAgent, server):
    """The same across HTTP: an HTTP write timing out, an HTTP verify tool (GET) whose success is `found` TRUTHY;
    the server says found → the write is SUCCESS; one write request, one verify request."""
    srv, base = server
    srv.found = True
    add(exec_agent, "http", "httpSave", base, timeout=0.5)
    add(exec_agent, "http", "httpCheck", base, method="GET", url=base + "/httpCheck/check")
    exec_agent.write("httpSave", verify="httpCheck")
    exec_agent.read("httpCheck", success={"path": "found", "op": "TRUTHY"}, extracts=None)
    sid = exec_agent.sid("hv")
    script = [call("httpSave", {"mode": "slow", "title": "季度总结"}), exec_kit.say("超时了"), finish("已保存")]
    first = await exec_agent.send(*script, sid=sid)
    assert [o.code for o in obs(first, "httpSave")] == [exec_kit.TIMEOUT]
    second = await exec_agent.send(*script, sid=sid, message="保存好了吗？")
    assert [e["status"] for e in second.evidence if e["tool"] == "httpSave"] == ["SUCCESS"], second.evidence
    assert second.status == "DONE", second.as_dict()
    assert len(srv.of("httpSave")) == 1 and len(srv.of("httpCheck")) == 1


async def test_verify_write_settles_an_unknown_write(build):
    h = await build(user_messages=["保存 季度总结"])
    await h.call("saveNote", {"title": "季度总结", "mode": "timeout"}, approved=True)
    [record] = h.ctx.evidence
    obs = await verify_write(h.ctx, record)
    assert obs.ok and obs.content["took_effect"] is True
    assert record.status is EvidenceStatus.SUCCESS and record.business_ok
    assert h.calls("findNotes")[0]["input"] == {"q": "季度总结"}


@needs_db
async def test_timed_out_write_is_verified_when_the_node_reopens(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="slow note"),
        tool("builtin_node_approval", summary="保存", toolName="saveNote"),
        tool("builtin_node_finish", output="done?"),
        {"text": "稍后再看"},
        tool("builtin_node_finish", output="已确认保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        await agent.send("s-slow", "保存 slow note", identity=runtime_kit.IDENTITY)
        after = await agent.resume("s-slow", "CONFIRM")
    assert after.observations[0].code == "agent_runtime.40016"
    assert after.observations[1].code == "agent_runtime.42251"  # finish refused: the write is UNKNOWN
    assert after.status == "RUNNING" and len(calls(log)) == 1
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        reopened = await agent.send("s-slow", "好了吗？", identity=runtime_kit.IDENTITY)
    assert reopened.observations[0].tool == "findNote" and reopened.observations[0].ok
    assert reopened.status == "DONE" and len(calls(log)) == 1  # verified, never retried


@pytest.mark.spec("§14.3")
@needs_db
async def test_a_follow_up_reply_verifies_an_uncertain_write_first(notes_agent: NotesAgent):
    # §14.3: an uncertain write is settled when its node reopens — also when a FOLLOW_UP answer reopens it
    script = notes_agent.script(
        call("saveNote", {"title": "季度总结", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_follow_up", {"question": "打什么标签？", "expectedFields": ["tag"]}),
        call("builtin_node_finish", {"output": "已保存"}),
        say("还没好"),
    )
    async with SkillYard() as sy:
        agent = await sy.agent(notes_agent.dir, model=script)
        await agent.send(notes_agent.sid("fuv"), "保存季度总结", identity=notes_kit.IDENTITY)
        asked = await agent.resume(notes_agent.sid("fuv"), "CONFIRM")
        assert codes(asked) == ["agent_runtime.40016", None]
        assert asked.checkpoint is not None and asked.checkpoint["type"] == "FOLLOW_UP"
        assert [e["status"] for e in asked.evidence] == ["UNKNOWN"]
        done = await agent.resume(notes_agent.sid("fuv"), "REPLY", "紧急")
    assert done.status == "DONE", done.as_dict()
    assert [o.tool for o in done.observations] == ["findNotes", "builtin_node_finish"]  # the verify, then finish
    assert len(notes_agent.calls("findNotes")) == 1 and len(notes_agent.calls("saveNote")) == 1
