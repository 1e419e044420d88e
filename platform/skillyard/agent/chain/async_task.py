"""Asynchronous writes (doc-runtime-contracts: "异步任务必须使用返回的任务 ID 查询到成功终态"), declared with
``asyncTask: {idPath, pollTool, doneWhen}``.

A returned task id never proves success: the write stays open (``UNKNOWN``, with ``async_task`` on its evidence) until
a result of the poll tool called with that id meets ``doneWhen`` (SUCCESS) or ``failedWhen`` (a business failure).
The runtime polls right after the write (``attempts`` times, ``intervalSeconds`` apart), again when the node reopens
(chain/verify.py), and a poll the model makes itself with the same id settles the write as well, so the runtime
never asks again once a poll proved it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..codes import ErrorCode
from ..context import NodeContext
from ..contract import AsyncTaskSpec
from ..paths import get_path
from ..state import Evidence, EvidenceStatus, Observation
from . import arg_binding, evidence, invoke, response
from .base import ChainCall
from .plan import DocPlan, plan
from .provenance import same

DONE, FAILED = "done", "failed"


def judge(doc: DocPlan, root: Any) -> str | None:
    """``done`` when the poll result meets doneWhen, ``failed`` when it meets failedWhen, else None (running)."""
    if doc.done_when is not None and doc.done_when(root):
        return DONE
    if doc.failed_when is not None and doc.failed_when(root):
        return FAILED
    return None


def begin(record: Evidence, spec: AsyncTaskSpec, task_id: Any) -> None:
    """The write answered with a task id: it stays open until a poll proves it."""
    record.status = EvidenceStatus.UNKNOWN
    record.async_task = {"id": task_id, "pollTool": spec.poll_tool, "idArg": spec.id_arg, "done": False, "polls": []}


def settle(record: Evidence, verdict: str, poll: Evidence) -> None:
    """Settle the write by a poll's verdict (``done`` or ``failed``)."""
    task = dict(record.async_task or {})
    task["done"], task["by"] = verdict == DONE, poll.id
    record.async_task = task
    record.status = EvidenceStatus.SUCCESS
    record.business_ok = verdict == DONE
    record.write_status = "success" if verdict == DONE else "failed"
    if verdict == FAILED:
        record.error_code = ErrorCode.TOOL_BUSINESS_FAILED.value
        record.error_message = f"the task {task.get('id')!r} of {record.tool} failed (poll {poll.id})"


async def poll_once(ctx: NodeContext, record: Evidence) -> tuple[str | None, Evidence]:
    """Call the poll tool once with the write's task id (a real read with its own evidence): the verdict and the
    poll's evidence. A poll that fails or whose business fails decides nothing."""
    task = record.async_task or {}
    tool = str(task.get("pollTool"))
    args: dict[str, Any] = {}
    arg_binding.put(args, str(task.get("idArg")), task.get("id"))
    contract = ctx.tool_contract(tool)
    call = ChainCall(ctx, tool, args, contract=contract, args=args)
    check = Evidence.started(ctx.store.new_evidence_id(), ctx.task.id, ctx.node.id, tool, args, False)
    ctx.tool_started(tool, contract)
    envelope = await invoke.run(call)
    check.response = envelope
    failure = invoke.classify(envelope)
    verdict = None
    if failure is not None:
        check.status, check.error_code = EvidenceStatus.FAILED, failure.code.value
        check.error_message = str(envelope.get("error") or failure.name)
    else:
        check.status = EvidenceStatus.SUCCESS
        root = invoke.result_root(call, envelope)
        check.business_ok = not invoke.failed(envelope) and response.success_holds(call.plan.success, root)
        if check.business_ok:
            evidence.fill(ctx, call.plan, check, root)
            doc = plan(ctx.tool_contract(record.tool)).doc
            verdict = judge(doc, root) if doc is not None else None
    await ctx.record(check)
    record.async_task = {**task, "polls": [*task.get("polls", []), check.id]}
    return verdict, check


async def follow(ctx: NodeContext, record: Evidence, spec: AsyncTaskSpec) -> tuple[str | None, Evidence | None]:
    """Poll right after the write, up to ``attempts`` times: the verdict and the last poll."""
    last = None
    for attempt in range(spec.attempts):
        if attempt:
            await asyncio.sleep(spec.interval_seconds)
        verdict, last = await poll_once(ctx, record)
        if verdict is not None:
            settle(record, verdict, last)
            return verdict, last
    return None, last


def pending_step(record: Evidence) -> str:
    """What the model does while the task runs: poll it, never repeat the write."""
    task = record.async_task or {}
    return (
        f"do not call {record.tool} again: it runs as task {task.get('id')!r}; call {task.get('pollTool')} with "
        f"{task.get('idArg')}={task.get('id')!r} later to check it (the runtime also checks it when the node next "
        "reopens), and finish only once it is done"
    )


def observation(call: ChainCall, record: Evidence, envelope: Any, verdict: str | None) -> Observation:
    """What the model reads after an asynchronous write and its first polls."""
    task = record.async_task or {}
    if verdict == DONE:
        return call.observation(
            True,
            envelope,
            next_step=f"the task {task.get('id')!r} finished (checked with {task.get('pollTool')})",
            evidence_id=record.id,
        )
    if verdict == FAILED:
        return call.refuse(
            ErrorCode.TOOL_BUSINESS_FAILED,
            f"{call.label} failed: {record.error_message}",
            "read the poll result with builtin_evidence_get, tell the user, or call builtin_node_fail with the reason",
            evidence_id=record.id,
        )
    return call.refuse(
        ErrorCode.WRITE_PENDING_VERIFY,
        f"{call.label} was accepted as task {task.get('id')!r} but has not finished yet; a task id alone does not "
        "prove that it succeeded",
        pending_step(record),
        evidence_id=record.id,
    )


async def observe(ctx: NodeContext, poll: Evidence, root: Any, seen: Observation) -> Observation:
    """A poll the model made itself: it settles every open write of this node whose task it asked about."""
    settled = []
    for record in ctx.node_evidence():
        task = record.async_task
        if record.status is not EvidenceStatus.UNKNOWN or not task or task.get("pollTool") != poll.tool:
            continue
        found, value = get_path(poll.args, str(task.get("idArg")))
        doc = plan(ctx.tool_contract(record.tool)).doc
        if not found or not same(value, task.get("id")) or doc is None:
            continue
        verdict = judge(doc, root)
        if verdict is not None:
            settle(record, verdict, poll)
            await ctx.record(record)
            settled.append(f"{record.tool} ({record.id}) {'is done' if verdict == DONE else 'failed'}")
    if settled:
        seen.next_step = "this settles the write: " + "; ".join(settled)
    return seen
