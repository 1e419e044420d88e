"""Asynchronous writes (``asyncTask``, chain/async_task.py): a task id never proves success; the write is done when
the poll tool's result meets doneWhen — polled right after the write, by the model, or when the node reopens."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillyard import SkillYard
from support.agent.probes import call, codes, finish, needs_db, say
from support.agent.receipts import BYPASS, IDENTITY, DocOpsAgent, stored_evidence

PENDING_VERIFY = "agent_runtime.40030"
BUSINESS = "agent_runtime.40004"
OPEN_EVIDENCE = "agent_runtime.42251"
IMPORT = {"title": "年报"}
ASK = "请导入文档《年报》"
ACCEPTED = {"success": True, "taskId": "t-9"}
DONE = {"state": "done", "document": {"url": "https://docs/年报", "name": "年报"}}


@pytest.fixture
def ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DocOpsAgent:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", BYPASS)
    return DocOpsAgent(tmp_path)


@needs_db
async def test_the_write_is_done_when_the_first_poll_says_so(ops: DocOpsAgent):
    ops.answers(importDoc=[ACCEPTED], getTask=[DONE])
    script = ops.script(call("importDoc", IMPORT), finish("已导入"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(ops.sid("first"), ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, done, "importDoc")
        [poll] = await stored_evidence(yard, done, "getTask")
    assert done.status == "DONE", done.as_dict()
    assert [r["input"] for r in ops.calls("getTask")] == [{"taskId": "t-9"}]
    assert record.status == "SUCCESS" and record.async_task is not None
    assert record.async_task["done"] is True and record.async_task["by"] == poll.id
    assert {"type": "tool", "tool": "getTask", "label": "正在查询任务"} in done.events


@needs_db
async def test_a_running_task_is_open_until_the_models_own_poll_proves_it(ops: DocOpsAgent):
    """The write answers with a task id, the first poll says running: the write is open (no replay, no finish);
    the model's poll with the same id says done, which settles it, and the runtime does not poll again."""
    ops.answers(importDoc=[ACCEPTED], getTask=[{"state": "running"}, DONE])
    script = ops.script(
        call("importDoc", IMPORT),
        call("importDoc", IMPORT),  # a replay while it runs
        finish("已导入"),  # too early
        call("getTask", {"taskId": "t-9"}),
        finish("已导入"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(ops.sid("model"), ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, done, "importDoc")
    assert codes(done) == [PENDING_VERIFY, PENDING_VERIFY, OPEN_EVIDENCE, None, None], done.as_dict()
    assert "getTask" in done.observations[0].next_step and "t-9" in done.observations[1].next_step
    assert "settles the write" in done.observations[3].next_step
    assert len(ops.calls("importDoc")) == 1 and len(ops.calls("getTask")) == 2
    assert record.status == "SUCCESS" and done.status == "DONE"


@needs_db
async def test_a_task_still_running_at_the_end_of_the_turn_is_polled_when_the_node_reopens(ops: DocOpsAgent):
    ops.answers(importDoc=[ACCEPTED], getTask=[{"state": "queued"}, DONE])
    script = ops.script(call("importDoc", IMPORT), say("导入中"), finish("已导入"))
    sid = ops.sid("reopen")
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        first = await agent.send(sid, ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, first, "importDoc")
    assert record.status == "UNKNOWN" and record.async_task is not None and record.async_task["id"] == "t-9"
    async with SkillYard() as yard:  # a new process
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(sid, "导入好了吗", identity=IDENTITY)
        [record] = await stored_evidence(yard, done, "importDoc")
    assert len(ops.calls("getTask")) == 2 and len(ops.calls("importDoc")) == 1
    assert record.status == "SUCCESS" and done.status == "DONE", done.as_dict()


@needs_db
async def test_attempts_poll_again_within_the_call(ops: DocOpsAgent):
    spec = {
        "idPath": "taskId",
        "pollTool": "getTask",
        "doneWhen": {"path": "state", "op": "EQ", "value": "done"},
        "attempts": 3,
        "intervalSeconds": 0,
    }
    ops.changed("importDoc", asyncTask=spec)
    ops.answers(importDoc=[ACCEPTED], getTask=[{"state": "running"}, {"state": "running"}, DONE])
    script = ops.script(call("importDoc", IMPORT), finish("已导入"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(ops.sid("attempts"), ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, done, "importDoc")
    assert len(ops.calls("getTask")) == 3 and done.status == "DONE"
    assert record.async_task is not None and len(record.async_task["polls"]) == 3


@needs_db
async def test_a_failed_task_is_a_business_failure(ops: DocOpsAgent):
    ops.answers(importDoc=[ACCEPTED], getTask=[{"state": "failed", "reason": "格式不支持"}])
    script = ops.script(call("importDoc", IMPORT), say("导入失败"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("failed"), ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, turn, "importDoc")
    assert codes(turn) == [BUSINESS] and record.business_ok is False and record.write_status == "failed"


@needs_db
async def test_no_task_id_means_the_write_cannot_be_proved(ops: DocOpsAgent):
    """A write that answers success without a task id is uncertain (here: asked about at VERIFY on reopen)."""
    ops.changed("importDoc", receipt=None)
    ops.answers(importDoc=[{"success": True, "message": "accepted"}])
    script = ops.script(call("importDoc", IMPORT), say("结果不确定"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("noid"), ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, turn, "importDoc")
    assert codes(turn) == [PENDING_VERIFY] and record.status == "UNKNOWN" and "no task id" in record.error_message
    assert ops.calls("getTask") == []


@needs_db
async def test_a_read_back_the_model_already_made_is_not_asked_for_again(ops: DocOpsAgent):
    """An uncertain saveDoc, then the model's own checkDoc with the verify arguments finds it: when the node
    reopens (a new process) the write is settled from that read-back, without another verify call."""
    ops.answers(saveDoc=[{"ok": False, "error": "slow", "exception_type": "TimeoutError"}], checkDoc=[{"found": True}])
    script = ops.script(
        call("saveDoc", {"title": "季度总结"}),
        call("checkDoc", {"title": "季度总结"}),
        say("看起来已经保存了"),
        finish("已保存"),
    )
    sid = ops.sid("readback")
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        await agent.send(sid, "请保存文档《季度总结》", identity=IDENTITY)
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(sid, "好了吗", identity=IDENTITY)
        [record] = await stored_evidence(yard, done, "saveDoc")
    assert len(ops.calls("checkDoc")) == 1, ops.calls()
    assert record.status == "SUCCESS" and done.status == "DONE", done.as_dict()
