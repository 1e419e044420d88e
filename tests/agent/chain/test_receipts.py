"""Write statuses of a declared receipt (doc-runtime-contracts "写操作状态", chain/receipt.py, chain/doc_settle.py):
every status end to end, with a scripted model and a new SkillYard on the same database between suspend and resume."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.agent.chain import receipt as receipts
from skillyard.agent.contract import ReceiptKind
from support.agent.docs import assert_coded
from support.agent.probes import call, codes, finish, needs_db, say
from support.agent.receipts import BYPASS, IDENTITY, DocOpsAgent, receipt, stored_evidence

PENDING_VERIFY = "agent_runtime.40030"
BUSINESS = "agent_runtime.40004"
PARTIAL = "agent_runtime.42256"
NEED_TARGET = "agent_runtime.42254"
APPROVAL = "agent_runtime.42221"
SAVE = {"title": "季度总结"}
ASK = "请保存文档《季度总结》"


@pytest.fixture
def ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DocOpsAgent:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", BYPASS)
    return DocOpsAgent(tmp_path)


@needs_db
async def test_success_settles_the_write_and_the_node_finishes_after_an_approval_across_a_restart(
    ops: DocOpsAgent,
):
    ops.changed("saveDoc", confirm=None)  # approval needed: the node suspends before the write
    ops.answers(saveDoc=[receipt("success", data={"id": "d-1"})])
    script = ops.script(
        call("saveDoc", SAVE),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveDoc"}),
        finish("已保存"),
    )
    sid = ops.sid("ok")
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        asked = await agent.send(sid, ASK, identity=IDENTITY)
    assert asked.checkpoint is not None and asked.checkpoint["type"] == "APPROVAL"
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.resume(sid, "CONFIRM")
        [record] = await stored_evidence(yard, done, "saveDoc")
    assert done.status == "DONE", done.as_dict()
    assert (record.status, record.business_ok, record.receipt, record.write_status) == (
        "SUCCESS",
        True,
        "doc.operation.v1",
        "success",
    )
    assert record.extracts == {"saved": {"id": "d-1"}}


@needs_db
@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"complete": False}, "complete: false"),
        ({"verification": [{"field": "title", "matched": False}]}, "did not match"),
    ],
)
async def test_a_success_that_is_not_complete_or_not_read_back_is_uncertain_and_verified(
    ops: DocOpsAgent, fields: dict, why: str
):
    """ "success" needs every read-back to match: otherwise it is settled as an uncertain write (verify tool)."""
    ops.answers(saveDoc=[receipt("success", **fields)], checkDoc=[{"found": True}])
    script = ops.script(call("saveDoc", SAVE), say("稍后核实"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        first = await agent.send(ops.sid("nc"), ASK, identity=IDENTITY)
    assert codes(first) == [PENDING_VERIFY] and why in first.observations[0].content
    async with SkillYard() as yard:  # a new process: the node reopens and verifies first
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(ops.sid("nc"), "好了吗", identity=IDENTITY)
        [record] = await stored_evidence(yard, done, "saveDoc")
    assert len(ops.calls("saveDoc")) == 1 and len(ops.calls("checkDoc")) == 1
    assert record.status == "SUCCESS" and done.status == "DONE", done.as_dict()


@needs_db
async def test_partial_success_is_never_replayed_and_the_target_cannot_finish(ops: DocOpsAgent):
    """partial_success: the steps and compensation are stored; after a restart (APPROVAL suspended, confirmed in a
    new process) a replay is refused, and so is finishing, both naming the steps and the compensation."""
    ops.changed("saveDoc", confirm=None)  # approval needed: the node suspends before the write
    steps = [{"step": "create", "ok": True}, {"step": "share", "ok": False}]
    ops.answers(saveDoc=[receipt("partial_success", steps=steps, compensation="delete doc d-1")])
    script = ops.script(
        call("saveDoc", SAVE),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveDoc"}),
        call("saveDoc", SAVE),  # a replay
        finish("已保存"),
        call("builtin_node_fail", {"reason": "只完成了一部分：已创建，未共享；补偿：删除 d-1"}),
    )
    sid = ops.sid("partial")
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        asked = await agent.send(sid, ASK, identity=IDENTITY)
    assert asked.checkpoint is not None and asked.checkpoint["type"] == "APPROVAL"
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        after = await agent.resume(sid, "CONFIRM")
        [record] = await stored_evidence(yard, after, "saveDoc")
    assert codes(after) == [BUSINESS, PARTIAL, PARTIAL, None], after.as_dict()
    replay, refusal = after.observations[1], after.observations[2]
    assert "share" in replay.content and "delete doc d-1" in replay.content
    assert "delete doc d-1" in refusal.content and "builtin_node_fail" in refusal.next_step
    assert len(ops.calls("saveDoc")) == 1  # never replayed
    assert record.write_status == "partial_success" and record.partial == {
        "steps": steps,
        "compensation": "delete doc d-1",
    }
    assert after.status == "FAILED"
    assert_coded(after)


@needs_db
async def test_unknown_without_a_verify_tool_asks_the_user_and_an_append_is_never_retried(ops: DocOpsAgent):
    """unknown: settled like an uncertain write; appendDoc has no verify tool, so the reopened node suspends at
    VERIFY (new process), and the CONFIRM of yet another process settles it. The append ran once."""
    ops.answers(appendDoc=[receipt("unknown", ok=False)])
    script = ops.script(
        call("appendDoc", {"title": "周报", "line": "第三条"}),
        say("结果不确定"),
        finish("已追加"),
    )
    sid = ops.sid("unknown")
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        first = await agent.send(sid, "在《周报》后追加一行", identity=IDENTITY)
        [record] = await stored_evidence(yard, first, "appendDoc")
    assert codes(first) == [PENDING_VERIFY] and record.status == "UNKNOWN" and record.write_status == "unknown"
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        asked = await agent.send(sid, "好了吗", identity=IDENTITY)
    assert asked.checkpoint is not None and asked.checkpoint["type"] == "VERIFY", asked.as_dict()
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.resume(sid, "CONFIRM")
        [record] = await stored_evidence(yard, done, "appendDoc")
    assert done.status == "DONE" and record.status == "SUCCESS"
    assert len(ops.calls("appendDoc")) == 1


@needs_db
async def test_retryable_not_started_is_retried_once_with_the_same_key_and_both_attempts_are_kept(ops: DocOpsAgent):
    """The approved write (confirmed in a new process) answers retryable, not started: it runs once more after the
    delay, with the same idempotency key, and the evidence keeps both attempts."""
    ops.changed("saveDoc", confirm=None)
    ops.answers(
        saveDoc=[
            receipt("retryable", execution_started=False, retryable=True, retry_after_seconds=0.2),
            receipt("success"),
        ]
    )
    script = ops.script(
        call("saveDoc", SAVE),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveDoc"}),
        finish("已保存"),
    )
    sid = ops.sid("retry")
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        await agent.send(sid, ASK, identity=IDENTITY)
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        started = time.monotonic()
        done = await agent.resume(sid, "CONFIRM")
        waited = time.monotonic() - started
        [record] = await stored_evidence(yard, done, "saveDoc")
    runs = ops.calls("saveDoc")
    assert len(runs) == 2 and runs[0]["key"] == runs[1]["key"] == record.idempotency_key
    assert waited >= 0.2  # a real wait
    assert record.status == "SUCCESS" and record.write_status == "success"
    assert record.attempts is not None and [a["status"] for a in record.attempts] == ["retryable"]
    assert record.attempts[0]["retryAfter"] == pytest.approx(0.2)
    assert record.attempts[0]["response"]["status"] == "retryable"
    assert done.status == "DONE"


@needs_db
async def test_retryable_twice_is_not_retried_again(ops: DocOpsAgent):
    ops.answers(saveDoc=[receipt("retryable", execution_started=False, retry_after_seconds=0)])
    script = ops.script(call("saveDoc", SAVE), say("稍后再试"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("retry2"), ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, turn, "saveDoc")
    assert len(ops.calls("saveDoc")) == 2
    assert codes(turn) == [BUSINESS] and "retried once" in turn.observations[0].content
    assert record.business_ok is False and len(record.attempts or []) == 1


@needs_db
@pytest.mark.parametrize("started", [True, None])
async def test_retryable_without_execution_started_false_is_uncertain_and_not_retried(
    ops: DocOpsAgent, started: bool | None
):
    """Only an explicit execution_started: false makes a write retryable; anything else may have written."""
    extra = {} if started is None else {"execution_started": started}
    ops.answers(saveDoc=[receipt("retryable", retry_after_seconds=0, **extra)])
    script = ops.script(call("saveDoc", SAVE), say("不确定"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid(f"rs{started}"), ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, turn, "saveDoc")
    assert len(ops.calls("saveDoc")) == 1 and record.status == "UNKNOWN" and codes(turn) == [PENDING_VERIFY]


@needs_db
async def test_failed_is_a_business_failure_that_may_be_called_again(ops: DocOpsAgent):
    failed = receipt("failed", error={"kind": "validation", "message": "标题太长", "stage": "validate"})
    ops.answers(saveDoc=[failed, receipt("success")])
    script = ops.script(call("saveDoc", SAVE), call("saveDoc", {"title": "季度总结"}), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(ops.sid("failed"), ASK, identity=IDENTITY)
        records = await stored_evidence(yard, done, "saveDoc")
    first = done.observations[0]
    assert first.code == BUSINESS and "标题太长" in first.content and "fix the arguments" in first.next_step
    assert [(r.write_status, r.business_ok) for r in records] == [("failed", False), ("success", True)]
    assert done.status == "DONE"


@needs_db
async def test_an_unrelated_status_of_an_old_contract_keeps_its_meaning(ops: DocOpsAgent):
    """No contractVersion and no receipt key: a result's own ``status`` means nothing to the runtime."""
    ops.answers(saveDoc=[{"ok": True, "status": "failed", "complete": False, "steps": ["x"]}])
    script = ops.script(call("saveDoc", SAVE), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(ops.sid("old"), ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, done, "saveDoc")
    assert done.status == "DONE" and record.status == "SUCCESS" and record.business_ok is True
    assert (record.receipt, record.write_status, record.partial) == (None, None, None)


# the +import receipt and the reading rules ----------------------------------------------------------------------
IMPORTED = {"success": True, "taskId": "t-1", "documentUrl": "https://d/1", "documentName": "a", "documentType": "doc"}


@pytest.mark.parametrize(
    ("root", "write", "status"),
    [
        (IMPORTED, True, "success"),
        ({**IMPORTED, "documentUrl": ""}, True, "unknown"),  # a task id alone proves nothing
        ({"success": True, "taskId": "t-1"}, True, "unknown"),
        ({"success": False, "error": {"kind": "permission_denied"}}, True, "failed"),
        ({"success": False, "error": {"kind": "commit_unknown"}}, True, "unknown"),
    ],
)
def test_the_import_receipt_is_read_as_its_own_shape(root: dict, write: bool, status: str):
    failed = root.get("success") is False
    assert receipts.read(ReceiptKind.IMPORT, root, write=write, failed=failed).status == status


@pytest.mark.parametrize(
    ("root", "write", "status"),
    [
        (receipt("success"), True, "success"),
        (receipt("success", ok=False), True, "unknown"),
        (receipt("success", complete=False), False, "success"),  # a read's page: paging reads complete
        (receipt("partial_success"), True, "partial_success"),
        (receipt("unknown"), True, "unknown"),
        (receipt("unknown"), False, "failed"),
        (receipt("retryable", execution_started=False), True, "retryable"),
        (receipt("retryable", execution_started=False, retryable=False), True, "failed"),
        (receipt("retryable", execution_started=False), False, "failed"),  # reads are not retried
        (receipt("retryable"), True, "unknown"),
        (receipt("failed"), True, "failed"),
        (receipt("pending"), True, "unknown"),  # an unknown status word proves nothing
        ({"contractVersion": "doc.operation.v1", "ok": True}, True, "unknown"),
        ({"contractVersion": "doc.operation.v1", "ok": True}, False, "success"),
    ],
)
def test_operation_statuses(root: dict, write: bool, status: str):
    failed = root.get("ok") is False
    assert receipts.read(ReceiptKind.OPERATION, root, write=write, failed=failed).status == status


def test_the_retry_delay_is_capped_at_sixty_seconds():
    assert receipts.retry_delay({"retry_after_seconds": 3600}, None) == 60.0
    assert receipts.retry_delay({}, {"retry_after_seconds": 1.5}) == 1.5
    assert receipts.retry_delay({"retry_after_seconds": "soon"}, None) == 0.0
