"""The doc-runtime-contracts part of a call: the checks before it (targets by name, export paths) and the settling
of a result that declares a receipt, or of a tool whose contract declares ``receipt``, ``asyncTask``, ``paging`` or
``export``. Calls of other tools never come here (chain/call.py, one check per call); their judgment is
chain/outcome.py's, which this module builds on.

Receipt statuses (chain/receipt.py) settle the evidence:

* ``success`` → SUCCESS when the contract's ``success`` holds too; an ``asyncTask`` write then waits for its poll;
* ``partial_success`` → a business failure whose ``steps`` and ``compensation`` are kept; never replayed
  (write_gate.py), and the node cannot finish its target (``FINISH_PARTIAL_WRITE``);
* ``unknown`` (and ``commit_unknown``) → UNKNOWN, settled as any uncertain write (§14.3);
* ``retryable`` with ``execution_started: false`` → the write runs once more after ``retry_after_seconds`` (at most
  60 s), with the same idempotency key; both attempts are kept on the evidence;
* ``failed`` → a business failure.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...outputs.safe_write import UnsafePath
from ..codes import ErrorCode
from ..contract import ExportSpec
from ..paths import get_path, has_value
from ..state import Evidence, EvidenceStatus, Observation
from . import async_task, evidence, export, invoke, outcome, paging, receipt, response, targets
from .base import ChainCall
from .receipt import FAILED, PARTIAL, RETRYABLE, SUCCESS, UNKNOWN, Reading

_SUCCESS, _UNKNOWN, _FAILED = EvidenceStatus.SUCCESS, EvidenceStatus.UNKNOWN, EvidenceStatus.FAILED
#: The next step after a structured error, by kind (validation, type_mismatch: fix the arguments).
KIND_STEPS = {
    "validation": "fix the arguments named in the error and call {tool} again",
    "type_mismatch": "the target is of another type than {tool} handles: check the target and its type",
    "not_found": "the target was not found: look it up again (by id, or list it), or ask the user",
    "ambiguous": "several targets match: ask the user to choose with builtin_node_follow_up, then call {tool} with "
    "the chosen id",
    "revision_conflict": "the target changed meanwhile: read its current state again, then call {tool} again",
    "confirmation_required": "the service wants the user's explicit confirmation: ask the user with "
    "builtin_node_follow_up before calling {tool} again",
    "permission_denied": "the user is not allowed to do this: tell the user, or call builtin_node_fail with the reason",
}


def before(call: ChainCall) -> Observation | None:
    """The checks of the declared keys before the call: a write's target (``TARGET_UNRESOLVED``), an export's
    path (``OUTPUT_PATH_INVALID``, ``OUTPUT_WRITE_FORBIDDEN``)."""
    doc = call.plan.doc
    assert doc is not None
    if doc.target_arg is not None and call.plan.write:
        refusal = targets.check(call, doc.target_arg)
        if refusal is not None:
            return refusal
    if doc.export is not None:
        return export.check(call, doc.export)
    return None


async def settle(call: ChainCall, record: Evidence, envelope: dict[str, Any]) -> Observation:
    """Judge the result (retrying a write the service said did not start, once), then follow an asynchronous
    write's task, record a listing's completeness and publish an export."""
    judged = _judge(call, record, envelope, first=True)
    if isinstance(judged, float):  # retryable: once more, after the delay the service asked for
        record.attempts = [*(record.attempts or []), {"response": envelope, "status": RETRYABLE, "retryAfter": judged}]
        await call.ctx.record(record)  # still STARTED: a crash during the wait leaves a trace
        await asyncio.sleep(judged)
        envelope = await invoke.run(call)  # the same arguments, the same idempotency key
        judged = _judge(call, record, envelope, first=False)
    assert not isinstance(judged, float)
    return await _follow(call, record, judged)


def _judge(call: ChainCall, record: Evidence, envelope: dict[str, Any], *, first: bool) -> Observation | float:
    """The observation of a result, or the delay before retrying it."""
    record.response = envelope
    failed = invoke.failed(envelope)
    failure = invoke.failure_kind(envelope) if failed else None
    doc = call.plan.doc
    if failure is not None:
        declared = doc is not None and doc.receipt is not None and record.write
        # a transport error of a write that the service says never started: not uncertain
        if declared and failure.status(True) is _UNKNOWN and receipt.execution_started(envelope) is False:
            return _not_started(call, record, envelope, failure, first)
        return outcome.failed_call(call, record, envelope, failure)
    root = invoke.result_root(call, envelope)
    kind = receipt.declared(call.plan, root)
    if kind is None:
        return outcome.settle(call, record, envelope)
    reading = receipt.read(kind, root, write=record.write, failed=failed)
    record.receipt, record.error_kind, record.retryable = kind.value, reading.error_kind, reading.retryable
    record.write_status = reading.status
    if reading.status == RETRYABLE:
        if first:
            return reading.retry_after
        return _retry_failed(call, record, root, reading)
    if reading.status == SUCCESS:
        record.status = _SUCCESS
        record.business_ok = not failed and response.success_holds(call.plan.success, root)
        if not record.business_ok:
            return outcome.business_failure(call, record, root)
        evidence.fill(call.ctx, call.plan, record, root)
        return call.observation(True, envelope, evidence_id=record.id)
    if reading.status == PARTIAL:
        return _partial(call, record, root, reading)
    if reading.status == UNKNOWN:
        record.status = _UNKNOWN
        record.error_code = ErrorCode.WRITE_PENDING_VERIFY.value
        said = receipt.message(reading, root)
        what = (
            f"the receipt of {call.label} reports success but does not prove it ({reading.why})"
            if reading.why
            else f"the receipt of {call.label} leaves its outcome unknown"
        )
        record.error_message = what + (f": {said}" if said else "")
        return call.refuse(
            ErrorCode.WRITE_PENDING_VERIFY, record.error_message, outcome.unknown_step(call), evidence_id=record.id
        )
    return _failed(call, record, root, reading)


def _not_started(
    call: ChainCall, record: Evidence, envelope: dict[str, Any], failure: invoke.Failure, first: bool
) -> Observation | float:
    """A transport failure of a write the service says never started: retried once, else a certain failure."""
    error = envelope.get("error")
    error = error if isinstance(error, dict) else None
    record.retryable = receipt.flag(envelope, error, "retryable")
    if first and record.retryable is not False:
        record.write_status = RETRYABLE
        return receipt.retry_delay(envelope, error)
    record.status, record.write_status = _FAILED, FAILED
    record.error_code = failure.code.value
    record.error_message = f"{envelope.get('error') or failure.name} (the service says the write did not start)"
    return call.refuse(failure.code, record.error_message, _again_step(call, record, first), evidence_id=record.id)


def _again_step(call: ChainCall, record: Evidence, first: bool) -> str:
    tried = "" if first else " (it was retried once already)"
    if record.retryable is False:
        return (
            f"nothing was written{tried}, and the service says a replay is not safe: tell the user; call {call.tool} "
            "again only if the user asks for it (it needs their approval), or call builtin_node_fail"
        )
    return f"nothing was written{tried}: call {call.tool} again later, or call builtin_node_fail with the reason"


def _retry_failed(call: ChainCall, record: Evidence, root: Any, reading: Reading) -> Observation:
    """The retry of a retryable write was retryable again: nothing ran, and it is not retried a second time."""
    record.status, record.business_ok = _SUCCESS, False
    record.error_code = ErrorCode.TOOL_BUSINESS_FAILED.value
    said = receipt.message(reading, root)
    record.error_message = f"{call.label} did not start, twice (retried once)" + (f": {said}" if said else "")
    return call.refuse(record.error_code, record.error_message, _again_step(call, record, False), evidence_id=record.id)


def _partial(call: ChainCall, record: Evidence, root: Any, reading: Reading) -> Observation:
    """partial_success: a write keeps its steps and compensation; a read keeps its partial items."""
    record.status, record.business_ok = _SUCCESS, False
    record.error_code = ErrorCode.TOOL_BUSINESS_FAILED.value
    said = receipt.message(reading, root)
    if record.write:
        record.partial = {"steps": reading.steps, "compensation": reading.compensation}
        record.error_message = (
            f"{call.label} partly happened (partial_success): steps {receipt.short(reading.steps)}; compensation "
            f"{receipt.short(reading.compensation)}" + (f"; {said}" if said else "")
        )
        return call.refuse(
            record.error_code,
            record.error_message,
            f"do not call {call.tool} again: the steps that succeeded must not be replayed; tell the user which steps "
            "ran and the compensation, then call builtin_node_fail with them",
            evidence_id=record.id,
        )
    details = reading.details or {}
    items = details.get("items")
    cursor = details.get("nextCursor")
    spec = call.plan.doc.paging if call.plan.doc is not None else None
    paging.mark(call, record, False, cursor if has_value(cursor) else None, spec)
    record.error_message = f"{call.label} returned part of the listing and then failed" + (f": {said}" if said else "")
    content = {"error": record.error_message, "partial_items": items, "count": details.get("count")}
    content.update({"nextCursor": record.next_cursor, "reason": details.get("reason"), "page": details.get("page")})
    step = paging.continue_step(call.ctx, call.tool, record.next_cursor, spec, paging.everything_asked(call.ctx))
    return call.observation(False, content, code=record.error_code, next_step=step, evidence_id=record.id)


def _failed(call: ChainCall, record: Evidence, root: Any, reading: Reading) -> Observation:
    """failed (or a failing structured error): a business failure with the receipt's own words."""
    observation = outcome.business_failure(call, record, root)
    said = receipt.message(reading, root)
    if said:
        record.error_message = said
        observation.content = f"{call.label} failed: {said}"
    step = KIND_STEPS.get(reading.error_kind or "", outcome.BUSINESS_STEP).format(tool=call.tool)
    if record.write and reading.retryable is False:
        step += f"; the service says replaying it is not safe: call {call.tool} again only if the user asks for it"
    observation.next_step = step
    return observation


async def _follow(call: ChainCall, record: Evidence, observation: Observation) -> Observation:
    """After the judgment: an asynchronous write's task, a listing's completeness, an export."""
    doc = call.plan.doc
    root = invoke.result_root(call, record.response)
    if record.write:
        task = doc.async_task if doc is not None else None
        if task is None or not (record.succeeded or record.status is _UNKNOWN):
            return observation
        found, task_id = get_path(root, task.id_path)
        if not found or not has_value(task_id):
            if not record.succeeded:
                return observation  # already uncertain: settled as any uncertain write
            record.status, record.write_status = _UNKNOWN, UNKNOWN
            record.error_code = ErrorCode.WRITE_PENDING_VERIFY.value
            record.error_message = f"{call.label} returned no task id at {task.id_path!r}, so it cannot be checked"
            return call.refuse(
                ErrorCode.WRITE_PENDING_VERIFY, record.error_message, outcome.unknown_step(call), evidence_id=record.id
            )
        async_task.begin(record, task, task_id)
        await call.ctx.record(record)
        verdict, _ = await async_task.follow(call.ctx, record, task)
        return async_task.observation(call, record, record.response, verdict)
    if not record.succeeded:
        return observation
    spec = doc.paging if doc is not None else None
    if spec is not None or record.receipt is not None:
        paging.record(call, record, root, spec)
        if record.complete is False:
            word = paging.everything_asked(call.ctx)
            observation.next_step = paging.continue_step(call.ctx, call.tool, record.next_cursor, spec, word)
    if doc is not None and doc.export is not None:
        return _export(call, record, root, observation, doc.export)
    return observation


def _export(call: ChainCall, record: Evidence, root: Any, observation: Observation, spec: ExportSpec) -> Observation:
    try:
        export.publish(call, spec, record, root)
    except FileExistsError:
        return _export_failed(call, record, spec, ErrorCode.OUTPUT_WRITE_FORBIDDEN, "the file appeared meanwhile")
    except (export.ExportFailed, UnsafePath) as exc:
        return _export_failed(call, record, spec, ErrorCode.TOOL_BUSINESS_FAILED, str(exc))
    except OSError as exc:
        return _export_failed(call, record, spec, ErrorCode.TOOL_IO_ERROR, exc.strerror or str(exc))
    facts = record.export or {}
    observation.content = export.shown(record.response, root, spec, record)
    observation.next_step = f"saved to {facts.get('path')} in the workspace ({facts.get('size')} bytes, sha256 " + (
        f"{facts.get('sha256')})"
    )
    return observation


def _export_failed(call: ChainCall, record: Evidence, spec: ExportSpec, code: ErrorCode, why: str) -> Observation:
    found, relative = get_path(record.args, spec.path_arg)
    record.business_ok = False
    record.error_code, record.error_message = code.value, f"the export was not written: {why}"
    record.export = {"path": relative if found else None, "error": why}
    return call.refuse(
        code,
        record.error_message,
        f"nothing was left in the workspace; call {call.tool} again (with another file name if it is taken), or "
        "call builtin_node_fail with the reason",
        evidence_id=record.id,
    )
