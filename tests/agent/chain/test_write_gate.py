"""The write gate (chain/write_gate.py, §14.1–§14.2): approval, identical writes and the idempotency key, writes in
flight or uncertain, confirm:false bypass."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.chain import idempotency_key
from skillyard.agent.codes import ErrorCode
from skillyard.agent.settings import AgentSettings
from skillyard.agent.state import Evidence, EvidenceStatus
from support.agent import docs as docs_kit
from support.agent import exec as exec_kit
from support.agent import keeper as keeper_kit
from support.agent.chain import BASE_CONTRACT, with_tool
from support.agent.docs import (
    APPROVAL_REQUIRED,
    ASK_SAVE,
    OPEN_EVIDENCE,
    PENDING_VERIFY,
    SAVE,
    TIMEOUT,
    DocsAgent,
    _send,
    approve,
    assert_coded,
    statuses,
)
from support.agent.exec import FREE, IO_ERROR, ExecAgent, add, executions, kind_params, obs
from support.agent.keeper import CONTRACT, KeeperAgent
from support.agent.memo import MemoAgent, changed, last, run_builtin, send_once
from support.agent.notes import IDENTITY, NotesAgent
from support.agent.probes import call, calls, codes, finish, needs_db, say

NOT_GATED = "agent_runtime.42245"


MISMATCH = "agent_runtime.42246"


@needs_db
async def test_identical_successful_write_returns_the_earlier_result_without_approval(notes_agent: NotesAgent):
    script = notes_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        first = await agent.send(notes_agent.sid("dup"), "保存季度总结", identity=IDENTITY)
        assert first.checkpoint is not None and first.checkpoint["type"] == "APPROVAL"
        done = await agent.resume(notes_agent.sid("dup"), "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    confirmed, again, finished = done.observations
    assert confirmed.ok and again.ok and finished.ok
    assert again.evidence_id == confirmed.evidence_id and again.code is None
    assert again.content == confirmed.content
    assert len(notes_agent.calls("saveNote")) == 1


@needs_db
async def test_write_failure_envelope_is_a_business_failure_and_may_be_approved_again(keeper_agent: KeeperAgent):
    script = keeper_agent.script(
        call("sendMemo", {"text": "开会", "mode": "successfalse"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        call("sendMemo", {"text": "开会", "mode": "successfalse"}),
        say("失败了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        await agent.send(keeper_agent.sid("bf"), "发一条备忘：开会", identity=keeper_kit.IDENTITY)
        after = await agent.resume(keeper_agent.sid("bf"), "CONFIRM")
    assert codes(after) == ["agent_runtime.40004", "agent_runtime.42221"]  # no WRITE_PENDING_VERIFY, no reuse
    assert [(e["status"], e["business_ok"]) for e in after.evidence] == [("SUCCESS", False)]
    assert len(keeper_agent.calls("sendMemo")) == 1


@pytest.mark.spec("§14.2")
@needs_db
async def test_identical_idempotency_key_returns_the_earlier_result_even_with_other_arguments(
    keeper_agent: KeeperAgent,
):
    """§14.2: "the same write" is tool + idempotency key (title), not the whole argument object."""
    script = keeper_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("saveNote", {"title": "季度总结", "pin": "other", "mode": "business"}),
        say("好了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        await agent.send(keeper_agent.sid("ik"), "保存季度总结", identity=keeper_kit.IDENTITY)
        done = await agent.resume(keeper_agent.sid("ik"), "CONFIRM")
    first, again = done.observations
    assert first.ok and again.ok and again.code is None and again.evidence_id == first.evidence_id
    assert len(keeper_agent.calls("saveNote")) == 1 and done.checkpoint is None


@needs_db
async def test_idempotency_key_without_configured_paths_uses_all_arguments(keeper_agent: KeeperAgent):
    keeper_agent.contract(
        json.loads(json.dumps(CONTRACT).replace('"idempotencyKey": ["title"]', '"idempotencyKey": ["nothere"]'))
    )
    script = keeper_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("saveNote", {"title": "季度总结", "pin": "other"}),
        say("再确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        await agent.send(keeper_agent.sid("ik2"), "保存季度总结", identity=keeper_kit.IDENTITY)
        done = await agent.resume(keeper_agent.sid("ik2"), "CONFIRM")
    assert codes(done) == [None, "agent_runtime.42221"]  # a different write: approval again
    assert len(keeper_agent.calls("saveNote")) == 1


@pytest.mark.spec("§14.2")
@needs_db
async def test_the_idempotency_key_reaches_the_skill_and_is_stable_across_tasks(keeper_agent: KeeperAgent):
    script = keeper_agent.script(
        call("stampNote", {"title": "季度总结"}),
        call("builtin_node_finish", {"output": "ok"}),
        call("stampNote", {"title": "季度总结", "mode": "ok"}),
        call("builtin_node_finish", {"output": "ok"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        first = await agent.send(keeper_agent.sid("key"), "盖章", identity=keeper_kit.IDENTITY)
        second = await agent.send(keeper_agent.sid("key"), "再盖章", identity=keeper_kit.IDENTITY)
    assert first.status == "DONE" and second.status == "DONE"
    rows = keeper_agent.calls("stampNote")
    assert len(rows) == 2  # a new task: the identical write runs again (§14.2 is per task)
    assert rows[0]["key"] and rows[0]["key"] != rows[1]["key"]  # all arguments differ (no idempotencyKey)


@needs_db
async def test_identical_write_in_a_new_task_needs_a_new_approval(keeper_agent: KeeperAgent):
    script = keeper_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
        call("saveNote", {"title": "季度总结"}),
        say("需要确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        await agent.send(keeper_agent.sid("nt"), "保存季度总结", identity=keeper_kit.IDENTITY)
        done = await agent.resume(keeper_agent.sid("nt"), "CONFIRM")
        assert done.status == "DONE"
        again = await agent.send(keeper_agent.sid("nt"), "再保存季度总结", identity=keeper_kit.IDENTITY)
    assert again.task_id != done.task_id and codes(again) == ["agent_runtime.42221"]


@pytest.mark.parametrize(
    ("bypass", "confirm", "asks"),
    [("quickWrite", False, False), ("", False, True), ("quickWrite", True, True)],
    ids=["both", "not-listed", "confirm-true"],
)
@needs_db
async def test_approval_bypass_needs_confirm_false_and_the_setting(
    memo_agent: MemoAgent, monkeypatch: pytest.MonkeyPatch, bypass: str, confirm: bool, asks: bool
):
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", bypass or "otherTool")
    memo_agent.contract(changed(lambda c: c["tools"]["quickWrite"].update(confirm=confirm)))
    turn = await run_builtin(memo_agent, "quickWrite", {"q": "x"})
    assert last(turn).code == ("agent_runtime.42221" if asks else None)
    assert len(memo_agent.calls("quickWrite")) == (0 if asks else 1)


@needs_db
async def test_the_next_step_of_write_pending_verify_can_be_followed(memo_agent: MemoAgent):
    """Issue: every observation carries a next step. The advice must be one the runtime accepts: when
    WRITE_PENDING_VERIFY tells the model to ask the user with builtin_node_follow_up whether the write took effect,
    that follow-up must not be refused as FOLLOW_UP_UNGROUNDED."""
    memo_agent.contract(changed(lambda c: c["tools"]["quickWrite"].pop("label")))
    turn = await send_once(
        memo_agent,
        "写一下",
        call("quickWrite", {"q": "x", "mode": "timeout"}),
        call("quickWrite", {"q": "x", "mode": "timeout"}),
        call("builtin_node_follow_up", {"question": "刚才的写入生效了吗？"}),
        say("stop"),
    )
    timed_out, pending, asked = turn.observations
    assert timed_out.code == "agent_runtime.40016" and pending.code == "agent_runtime.40030"
    advised = "builtin_node_follow_up" in str(pending.next_step)
    assert not (advised and asked.code == "agent_runtime.42248"), (pending.next_step, asked.content)


@pytest.mark.spec("§14.1", "§13")
@needs_db
async def test_two_different_writes_in_one_reply_are_both_stopped_at_the_gate(docs_agent: DocsAgent):
    """§14.1 step 1: every write call meets the write gate. Two writes in one model reply: both answer
    APPROVAL_REQUIRED with a next step, nothing is executed, no evidence is registered (§13 before-phase)."""
    turn = await _send(
        docs_agent,
        "保存《季度总结》并发备忘：开会",
        calls(("saveDoc", SAVE), ("sendMemo", {"text": "开会"})),
        say("需要确认"),
        session="two",
    )
    assert docs_kit.codes(turn) == [APPROVAL_REQUIRED, APPROVAL_REQUIRED], turn.as_dict()
    assert docs_agent.calls() == [] and turn.evidence == []
    assert_coded(turn)


@pytest.mark.spec("§14.4", "§14.2", "§10.2")
@needs_db
async def test_a_timed_out_write_is_unknown_and_the_identical_retry_is_pending_verify_without_approval(
    docs_agent: DocsAgent,
):
    """§14.4: a write that times out is UNKNOWN (TOOL_TIMEOUT). §14.2: the identical write while uncertain is
    refused (WRITE_PENDING_VERIFY) — not sent to approval, not executed. §10.2 step 2: finish is refused
    (FINISH_OPEN_EVIDENCE). Issue: writes are never retried automatically."""
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        call("saveDoc", SAVE),
        finish("已保存"),
        say("还不确定"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(docs_agent.sid("unk"), ASK_SAVE, identity=docs_kit.IDENTITY)
        after = await agent.resume(docs_agent.sid("unk"), "CONFIRM")
    assert docs_kit.codes(after) == [TIMEOUT, PENDING_VERIFY, OPEN_EVIDENCE], after.as_dict()
    assert statuses(after, "saveDoc") == ["UNKNOWN"] and after.status == "RUNNING"
    assert len(docs_agent.calls("saveDoc")) == 1 and docs_agent.calls("checkDoc") == []
    assert after.checkpoint is None
    assert_coded(after)


@pytest.mark.spec("§14.2")
@needs_db
async def test_an_uncertain_write_does_not_block_a_different_write(docs_agent: DocsAgent):
    """§14.2 is per "tool + idempotency key": an uncertain saveDoc《季度总结》 refuses only its identical write; the
    same tool with another title is a different write and goes to approval as usual."""
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        call("saveDoc", {"title": "季度总结"}),
        call("saveDoc", {"title": "周报"}),
        say("周报要确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(docs_agent.sid("diff"), "保存《季度总结》和《周报》", identity=docs_kit.IDENTITY)
        after = await agent.resume(docs_agent.sid("diff"), "CONFIRM")
    assert docs_kit.codes(after) == [TIMEOUT, PENDING_VERIFY, APPROVAL_REQUIRED], after.as_dict()


@pytest.mark.spec("§14.2")
@needs_db
async def test_an_uncertain_write_of_a_cancelled_task_does_not_block_the_next_task(docs_agent: DocsAgent):
    """§14.2 is "同一任务内": the uncertain write belongs to a task that was cancelled; in the session's next task the
    identical write is a new write (approval), not WRITE_PENDING_VERIFY of another task's evidence."""
    sid = docs_agent.sid("newtask")
    script = docs_agent.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        approve("sendMemo"),
        say("超时了"),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        say("要确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        first = await agent.send(sid, "发备忘：开会", identity=docs_kit.IDENTITY)
        await agent.resume(sid, "CONFIRM")
        asked = await agent.send(sid, "发了吗", identity=docs_kit.IDENTITY)
        assert asked.checkpoint and asked.checkpoint["type"] == "VERIFY"
        assert (await agent.resume(sid, "CANCEL")).status == "CANCELLED"
        later = await agent.send(sid, "重新发备忘：开会", identity=docs_kit.IDENTITY)
    assert later.task_id != first.task_id and docs_kit.codes(later) == [APPROVAL_REQUIRED], later.as_dict()


@needs_db
async def test_identical_write_after_success_is_reused_across_a_restart_without_approval_or_execution(
    docs_agent: DocsAgent,
):
    """Issue (write gate order): an identical write (same tool + idempotency key) whose evidence is a business success
    returns the earlier result without a new approval and without calling the tool — also in a new process."""
    sid = docs_agent.sid("reuse")
    script = docs_agent.script(
        call("saveDoc", SAVE), approve("saveDoc"), say("已保存"), call("saveDoc", SAVE), say("同上")
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
        first = await agent.resume(sid, "CONFIRM")
    assert docs_kit.codes(first) == [None] and len(docs_agent.calls("saveDoc")) == 1
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        again = await agent.send(sid, "再保存一次《季度总结》", identity=docs_kit.IDENTITY)
    reused = again.observations[0]
    assert reused.ok and reused.code is None and again.status == "RUNNING", again.as_dict()
    assert reused.evidence_id == first.observations[0].evidence_id
    assert reused.content == first.observations[0].content
    assert len(docs_agent.calls("saveDoc")) == 1 and len(docs_agent.committed("saveDoc")) == 1


@needs_db
async def test_a_different_idempotency_key_after_success_needs_a_new_approval_across_a_restart(docs_agent: DocsAgent):
    sid = docs_agent.sid("newkey")
    script = docs_agent.script(
        call("saveDoc", SAVE), approve("saveDoc"), say("已保存"), call("saveDoc", {"title": "周报"}), say("要确认")
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, "保存《季度总结》，然后保存《周报》", identity=docs_kit.IDENTITY)
        await agent.resume(sid, "CONFIRM")
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        turn = await agent.send(sid, "还有周报", identity=docs_kit.IDENTITY)
    assert docs_kit.codes(turn)[0] == APPROVAL_REQUIRED and len(docs_agent.calls("saveDoc")) == 1, turn.as_dict()


@pytest.mark.spec("§14.2")
@needs_db
@pytest.mark.parametrize(
    ("key_paths", "arguments", "hashed"),
    [
        (["title"], {"title": "季度总结"}, "季度总结"),
        (["title", "mode"], {"title": "季度总结", "mode": "fast"}, "fast季度总结"),  # lexicographic path order
        (["title", "folder"], {"title": "季度总结"}, "季度总结"),  # a missing path is skipped
    ],
    ids=["one-path", "sorted-paths", "missing-skipped"],
)
async def test_the_idempotency_key_is_the_sha256_of_the_key_values_in_path_order(
    docs_agent: DocsAgent, key_paths: list[str], arguments: dict[str, Any], hashed: str
):
    """§14.2: "按路径字典序取参数值拼接后取 SHA-256；值缺失的路径跳过"; issue: passed as
    runtime_context["idempotency_key"] (docs: the hex digest)."""
    docs_agent.contract(docs_kit.changed(lambda c: c["tools"]["saveDoc"].update(idempotencyKey=key_paths)))
    script = docs_agent.script(call("saveDoc", arguments), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(docs_agent.sid("hash"), ASK_SAVE, identity=docs_kit.IDENTITY)
        done = await agent.resume(docs_agent.sid("hash"), "CONFIRM")
    assert done.status == "DONE"
    assert docs_agent.calls("saveDoc")[0]["key"] == hashlib.sha256(hashed.encode()).hexdigest()


@pytest.mark.spec("§14.2")
@needs_db
async def test_a_write_with_a_business_failure_under_the_same_key_is_not_reused_after_a_restart(docs_agent: DocsAgent):
    """§14.2 "失败 / 业务失败 → 正常调用": after a business failure the identical write goes through the gate again
    (a new approval) and a new real execution — in a new process too."""
    sid = docs_agent.sid("bizfail")
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "mode": "business"}),
        approve("saveDoc"),
        say("失败了"),
        call("saveDoc", SAVE),
        approve("saveDoc", "再试"),
        finish("已保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=docs_kit.IDENTITY)
        failed = await agent.resume(sid, "CONFIRM")
    assert [(e["status"], e["business_ok"]) for e in failed.evidence] == [("SUCCESS", False)]
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        again = await agent.send(sid, "再试一次", identity=docs_kit.IDENTITY)
        assert docs_kit.codes(again) == [APPROVAL_REQUIRED, None] and again.status == "SUSPENDED"
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE" and len(docs_agent.calls("saveDoc")) == 2


@pytest.mark.spec("§17")
@needs_db
async def test_every_refusal_in_a_write_flow_carries_a_spec_code_and_a_next_step(docs_agent: DocsAgent):
    """Issue: "Every observation the model sees carries the spec's error code (§17) and a next step" — the write
    gate, the approval builtins, uncertain writes and the finish gate alike."""
    script = docs_agent.script(
        approve("saveDoc"),  # nothing gated yet → APPROVAL_NOT_GATED
        call("saveDoc", SAVE),  # APPROVAL_REQUIRED
        approve("sendMemo"),  # APPROVAL_TOOL_MISMATCH
        approve("saveDoc"),
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),  # not reached: CONFIRM runs the gated write
        say("x"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        first = await agent.send(docs_agent.sid("codes"), ASK_SAVE, identity=docs_kit.IDENTITY)
    assert docs_kit.codes(first) == [NOT_GATED, APPROVAL_REQUIRED, MISMATCH, None], first.as_dict()
    mismatch = first.observations[2]
    assert "saveDoc" in str(mismatch.content) + str(mismatch.next_step)
    assert_coded(first)
    uncertain = await _send(
        docs_agent,
        "刷新一下，再删掉《季度总结》",
        call("bumpDoc", {"q": "a", "mode": "timeout"}),
        call("bumpDoc", {"q": "a", "mode": "timeout"}),
        finish("好了"),
        call("delDoc", {"title": "季度总结"}),
        say("x"),
        session="codes2",
    )
    assert docs_kit.codes(uncertain) == [TIMEOUT, PENDING_VERIFY, OPEN_EVIDENCE, APPROVAL_REQUIRED], uncertain.as_dict()
    assert_coded(uncertain)


@pytest.mark.spec("§14.2")
@needs_db
async def test_key_without_idempotency_key_paths_is_tool_name_plus_digest(exec_agent: ExecAgent):
    """§14.2 / docs: without `idempotencyKey` the key is `<tool>:` + the SHA-256 of the canonical JSON of all
    arguments; two different argument sets give two keys, the same set the same key."""
    tool = add(exec_agent, "cli", "cliSave")
    exec_agent.write(tool, idempotencyKey=None)
    turn = await exec_agent.send(
        call(tool, {"mode": "ok", "title": "甲"}), call(tool, {"mode": "ok", "title": "乙"}), finish("好")
    )
    assert turn.status == "DONE", turn.as_dict()
    keys = [r["ctx"].get("idempotency_key") for r in exec_agent.calls(tool)]
    assert len(keys) == 2 and keys[0] != keys[1], keys
    for key in keys:
        assert isinstance(key, str) and key.startswith("cliSave:") and len(key.split(":", 1)[1]) == 64, key


@pytest.mark.spec("§14.2")
@needs_db
@pytest.mark.parametrize("kind", kind_params(["http"]))
async def test_an_identical_successful_write_returns_the_earlier_result_without_running(
    exec_agent: ExecAgent, server, kind: str
):
    """Issue (write gate order) / §14.2: an identical write (same tool + key) whose evidence is a business success
    returns the earlier result without calling the tool: one execution for two model calls."""
    srv, base = server
    tool = add(exec_agent, kind, f"{kind}Save", base)
    exec_agent.write(tool)
    args = {"mode": "ok", "title": "季度总结"}
    turn = await exec_agent.send(call(tool, args), call(tool, args), finish("已保存"))
    assert [o.ok for o in obs(turn, tool)] == [True, True], turn.observations
    assert turn.status == "DONE"
    assert executions(exec_agent, srv, kind, tool) == 1


@pytest.mark.spec("§14.2")
@needs_db
async def test_idempotency_key_joins_values_in_path_order_skipping_missing_ones(exec_agent: ExecAgent):
    """docs §14.2: `["spaceId", "title"]` with 7 and "周报" hashes "7周报" — paths in lexicographic order, a
    non-text value as canonical JSON, missing paths skipped. Here ["zone", "title", "count"] with count 7,
    title 周报 and no zone → sha256("7周报"), seen by a CLI skill in SKILL_CONTEXT."""
    tool = add(exec_agent, "cli", "cliSave")
    exec_agent.write(tool, idempotencyKey=["zone", "title", "count"], args={"mode": FREE, "title": FREE, "count": FREE})
    turn = await exec_agent.send(call(tool, {"mode": "ok", "title": "周报", "count": 7}), finish("好"))
    assert turn.status == "DONE", turn.as_dict()
    [row] = exec_agent.calls(tool)
    assert row["ctx"].get("idempotency_key") == hashlib.sha256("7周报".encode()).hexdigest(), row["ctx"]


@pytest.mark.spec("§14.2")
@needs_db
async def test_identical_write_is_judged_by_tool_and_key_not_by_other_arguments(exec_agent: ExecAgent):
    """§14.2: "工具名 + 幂等键" decides identity: after a business success keyed by title, a call with the same
    title and another `mode` returns the earlier result without running the shell skill."""
    tool = add(exec_agent, "sh", "shSave")
    exec_agent.write(tool)
    turn = await exec_agent.send(
        call(tool, {"mode": "ok", "title": "季度总结"}),
        call(tool, {"mode": "business", "title": "季度总结"}),
        exec_kit.say(),
    )
    assert [o.ok for o in obs(turn, tool)] == [True, True], turn.observations
    assert len(exec_agent.calls(tool)) == 1


@pytest.mark.spec("§14.3")
@needs_db
@pytest.mark.parametrize("mode,code", [("perm", IO_ERROR)])
async def test_an_uncertain_write_is_not_run_again_by_a_later_message(exec_agent: ExecAgent, mode: str, code: str):
    """Writes are never retried: an UNKNOWN write (IO / unknown error) without a verify tool is asked about at a
    VERIFY checkpoint when the node reopens (§14.3) — the skill does not run again; one execution in all."""
    tool = add(exec_agent, "py", "pySave")
    exec_agent.write(tool)
    sid = exec_agent.sid("again")
    script = [call(tool, {"mode": mode, "title": "季度总结"}), exec_kit.say("出错了"), finish("好")]
    first = await exec_agent.send(*script, sid=sid)
    assert [o.code for o in obs(first, tool)] == [code]
    second = await exec_agent.send(*script, sid=sid, message="怎么样了？")
    assert second.status == "SUSPENDED" and second.checkpoint and second.checkpoint["type"] == "VERIFY", second
    assert len(exec_agent.calls(tool)) == 1


async def test_write_needs_approval_and_is_gated_with_a_summary(build):
    h = await build(user_messages=["保存 季度总结"])
    obs = await h.call("saveNote", {"title": "季度总结", "secret": "hunter2"})
    assert obs.code == ErrorCode.APPROVAL_REQUIRED.value == "agent_runtime.42221"
    assert "builtin_node_approval" in obs.next_step and "saveNote" in obs.next_step
    gated = h.ctx.node.gated
    assert gated is not None and gated.tool == "saveNote"
    assert gated.args == {"title": "季度总结", "secret": "hunter2", "owner": "u-7"}
    assert gated.sources["owner"] == "PLATFORM" and gated.sources["title"] == "USER"
    assert gated.summary == "标题：季度总结\n口令：***"
    assert gated.idempotency_key == idempotency_key("saveNote", h.ctx.tool_contract("saveNote"), gated.args)
    assert h.ctx.node.target == "saveNote" and h.ctx.node.target_claimed
    assert h.calls() == [] and h.ctx.evidence == []


async def test_first_write_claims_the_target_even_when_refused(build):
    h = await build()
    obs = await h.call("saveNote", {})
    assert obs.code == ErrorCode.ARG_REJECTED.value
    assert h.ctx.node.target == "saveNote" and h.ctx.node.target_claimed


@pytest.mark.spec("§6.3")
async def test_confirmed_write_runs_once_started_first_with_key_and_identity(build):
    h = await build(user_messages=["保存 季度总结"])
    gate = await h.call("saveNote", {"title": "季度总结"})
    assert gate.code == ErrorCode.APPROVAL_REQUIRED.value
    obs = await h.call("saveNote", {"title": "季度总结"}, approved=True)
    assert obs.ok and obs.content["data"]["id"] == "n-1"
    [run] = h.calls("saveNote")
    assert run["key"] == h.ctx.node.gated.idempotency_key and run["user"] == "u-7" and run["session"] == "sess-1"
    assert run["input"]["owner"] == "u-7"
    record = h.ctx.evidence[0]
    assert h.ctx.store.history == [(record.id, "STARTED"), (record.id, "SUCCESS")]
    assert record.write and record.business_ok and record.idempotency_key == run["key"]
    # §6.3: a write's entity merges its arguments under the result
    [entity] = h.ctx.session.entities
    assert (entity.type, entity.id, entity.name) == ("note", "n-1", "季度总结")
    assert entity.attrs["owner"] == "u-7" and entity.task_id == "task-1"
    # the identical write again: the earlier result, no approval, no call
    again = await h.call("saveNote", {"title": "季度总结"})
    assert again.ok and again.evidence_id == record.id and again.content == record.response
    assert len(h.calls("saveNote")) == 1 and len(h.ctx.evidence) == 1


async def test_bypass_needs_confirm_false_and_the_setting(build):
    bypass = AgentSettings(write_confirm_bypass_tools=frozenset({"saveNote"}))
    messages = ["保存 季度总结"]
    h = await build(with_tool(BASE_CONTRACT, "saveNote", confirm=False), settings=bypass, user_messages=messages)
    assert (await h.call("saveNote", {"title": "季度总结"})).ok
    h2 = await build(with_tool(BASE_CONTRACT, "saveNote", confirm=False), user_messages=messages)
    assert (await h2.call("saveNote", {"title": "季度总结"})).code == ErrorCode.APPROVAL_REQUIRED.value
    h3 = await build(settings=bypass, user_messages=messages)  # confirm defaults to true for WRITE
    assert (await h3.call("saveNote", {"title": "季度总结"})).code == ErrorCode.APPROVAL_REQUIRED.value
    assert len(h.calls()) == 1 and h2.calls() == [] and h3.calls() == []


async def test_write_in_flight_is_refused(build):
    h = await build(user_messages=["保存 季度总结"])
    args = {"title": "季度总结", "owner": "u-7"}
    key = idempotency_key("saveNote", h.ctx.tool_contract("saveNote"), args)
    started = Evidence("ev-x", "task-1", "node-0", "saveNote", args, True, EvidenceStatus.STARTED, key)
    await h.ctx.record(started)
    obs = await h.call("saveNote", {"title": "季度总结"}, approved=True)
    assert obs.code == ErrorCode.WRITE_IN_FLIGHT.value == "agent_runtime.40031"
    assert h.calls() == [] and len(h.ctx.evidence) == 1


async def test_commit_then_timeout_is_unknown_then_pending_verify(build):
    h = await build(user_messages=["保存 季度总结"])
    args = {"title": "季度总结", "mode": "timeout"}
    obs = await h.call("saveNote", args, approved=True)
    assert obs.code == ErrorCode.TOOL_TIMEOUT.value == "agent_runtime.40016"
    assert "do not call saveNote again" in obs.next_step
    [record] = h.ctx.evidence
    assert record.status is EvidenceStatus.UNKNOWN and record.error_code == obs.code
    assert len(h.calls("saveNote")) == 1  # it ran (and committed) before the wall clock stopped it
    again = await h.call("saveNote", args, approved=True)
    assert again.code == ErrorCode.WRITE_PENDING_VERIFY.value == "agent_runtime.40030"
    assert "findNotes" in again.next_step
    assert len(h.calls("saveNote")) == 1 and len(h.ctx.evidence) == 1


@pytest.mark.spec("§14.2")
def test_idempotency_key_follows_the_spec_formula():
    """§14.2: SHA-256 of the key paths' values concatenated in lexicographic path order, missing ones skipped; a
    non-text value as canonical JSON; nothing listed (or all missing): tool name + a digest of all arguments."""
    from skillyard.agent.contract import ToolContract

    contract = ToolContract(name="createArticle", idempotency_key=("title", "spaceId", "meta.tag"))
    args = {"title": "周报", "spaceId": 7, "meta": {"tag": None}, "body": "…"}
    expected = hashlib.sha256("7周报".encode()).hexdigest()  # spaceId < title; meta.tag has no value
    assert idempotency_key("createArticle", contract, args) == expected
    flags = {"title": "周报", "spaceId": {"b": True, "a": 1}}
    assert (
        idempotency_key("createArticle", contract, flags) == hashlib.sha256('{"a":1,"b":true}周报'.encode()).hexdigest()
    )
    fallback = idempotency_key("createArticle", contract, {"body": "x"})
    assert fallback == "createArticle:" + hashlib.sha256(b'{"body":"x"}').hexdigest()
