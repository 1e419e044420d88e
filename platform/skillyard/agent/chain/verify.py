"""§14.3 / §6.4: checking an uncertain write with its read-only verify tool, and re-binding an approved write.

:func:`verify_write` builds the verify arguments (``const`` or ``call.<path>`` of the original request; none
configured: the original request as it is), runs the verify tool once (a real execution: it gets its own
evidence; a succeeded call of the verify tool with the same arguments the node made after the write proves it
already, and nothing runs) and settles the write by the verify tool's own success condition: success → the write
SUCCESS, business failure → the write FAILED. When the verify call itself fails the write stays uncertain. An
asynchronous write (``asyncTask``) is settled by polling its task instead (chain/async_task.py).

:func:`preview_binding` re-binds a gated write's arguments against the current state (no side effects) and
rebuilds its summary, so a CONFIRM can tell whether what will run is still what the user saw.
"""

from __future__ import annotations

import copy
from typing import Any

from ..codes import ErrorCode
from ..context import NodeContext
from ..contract import UNSET
from ..paths import get_path
from ..state import Evidence, EvidenceStatus, Observation
from . import arg_binding, async_task, evidence, invoke, response
from .base import ChainCall
from .provenance import same
from .summary import build_summary


def preview_binding(ctx: NodeContext, tool: str, args: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(the arguments after binding, their "标签：值" summary) without running anything."""
    call = ChainCall(ctx, tool, args, contract=ctx.tool_contract(tool))
    call.args = copy.deepcopy(args)
    arg_binding.bind(call)
    return call.args, build_summary(call.contract, call.args, call.sources)


def verify_args(ctx: NodeContext, record: Evidence) -> dict[str, Any] | None:
    contract = ctx.tool_contract(record.tool)
    spec = contract.verify if contract is not None else None
    if spec is None:
        return None
    if not spec.args:
        return copy.deepcopy(record.args)
    args: dict[str, Any] = {}
    for key, arg in spec.args.items():
        if arg.const is not UNSET:
            arg_binding.put(args, key, arg.const)
        elif arg.from_expr is not None:
            found, value = get_path(record.args, arg.from_expr.path)
            if found:
                arg_binding.put(args, key, copy.deepcopy(value))
    return args


def can_verify(ctx: NodeContext, record: Evidence) -> bool:
    """Whether the runtime settles this uncertain write itself: its task can be polled, or it has a verify tool
    (else the user is asked at a VERIFY checkpoint)."""
    contract = ctx.tool_contract(record.tool)
    return record.async_task is not None or (contract is not None and contract.verify is not None)


def _proved(ctx: NodeContext, record: Evidence, tool: str, args: dict[str, Any]) -> Evidence | None:
    """A read-back the node already made after the write (the verify tool, the same arguments, business success):
    it proves the write, so the runtime does not ask again."""
    for later in ctx.node_evidence():
        if later.seq > record.seq and later.tool == tool and later.succeeded and same(later.args, args):
            return later
    return None


async def _poll(ctx: NodeContext, record: Evidence) -> Observation:
    """An asynchronous write still running: its task is polled once more."""
    verdict, poll = await async_task.poll_once(ctx, record)
    if verdict is not None:
        async_task.settle(record, verdict, poll)
    await ctx.record(record)
    call = ChainCall(ctx, record.tool, record.args, contract=ctx.tool_contract(record.tool), args=record.args)
    if verdict is None:
        return call.refuse(
            ErrorCode.WRITE_PENDING_VERIFY,
            f"{record.tool} still runs as task {(record.async_task or {}).get('id')!r}",
            async_task.pending_step(record),
            evidence_id=record.id,
        )
    done = verdict == async_task.DONE
    return call.observation(
        True,
        {"verified": record.tool, "took_effect": done, "result": poll.response},
        next_step=f"{record.tool} {'took effect' if done else 'failed'} (its task was checked with {poll.tool})",
        evidence_id=record.id,
    )


async def verify_write(ctx: NodeContext, record: Evidence) -> Observation:
    """Verify one UNKNOWN / UNKNOWN_PRE_CALL write (poll its task, or call its verify tool, unless a read-back of the
    node already proved it); the returned observation says what was concluded."""
    if record.async_task is not None:
        return await _poll(ctx, record)
    contract = ctx.tool_contract(record.tool)
    args = verify_args(ctx, record)
    assert contract is not None and contract.verify is not None and args is not None
    tool = contract.verify.tool
    verifier = ctx.tool_contract(tool)
    call = ChainCall(ctx, tool, args, contract=verifier, args=args)
    earlier = _proved(ctx, record, tool, args)
    if earlier is not None:
        record.status, record.business_ok = EvidenceStatus.SUCCESS, True
        await ctx.record(record)
        return call.observation(
            True,
            {"verified": record.tool, "took_effect": True, "result": earlier.response},
            next_step=f"{record.tool} took effect (already shown by {tool}, evidence {earlier.id})",
            evidence_id=record.id,
        )
    check = Evidence.started(
        id=ctx.store.new_evidence_id(),
        task_id=ctx.task.id,
        node_id=ctx.node.id,
        tool=tool,
        args=args,
        write=False,
    )
    ctx.tool_started(tool, verifier)
    envelope = await invoke.run(call)
    check.response = envelope
    failure = invoke.classify(envelope)
    if failure is not None:
        check.status, check.error_code = EvidenceStatus.FAILED, failure.code.value
        check.error_message = str(envelope.get("error") or failure.name)
        await ctx.record(check)
        return call.refuse(
            failure.code,
            f"could not check whether {record.tool} took effect: {check.error_message}",
            f"do not call {record.tool} again until it is settled: it is checked again when the node next reopens; "
            "continue with other work or reply",
            evidence_id=record.id,
        )
    check.status = EvidenceStatus.SUCCESS
    root = invoke.result_root(call, envelope)
    check.business_ok = not invoke.failed(envelope) and response.success_holds(call.plan.success, root)
    if check.business_ok:
        evidence.fill(ctx, call.plan, check, root)
    await ctx.record(check)
    record.status = EvidenceStatus.SUCCESS if check.business_ok else EvidenceStatus.FAILED
    record.business_ok = bool(check.business_ok)
    if not check.business_ok:
        record.error_code = ErrorCode.TOOL_BUSINESS_FAILED.value
        record.error_message = f"{tool} found no trace of the write"
    await ctx.record(record)
    verdict = "took effect" if check.business_ok else "did not take effect"
    return call.observation(
        True,
        {"verified": record.tool, "took_effect": bool(check.business_ok), "result": envelope},
        next_step=f"{record.tool} {verdict} (checked with {tool})",
        evidence_id=record.id,
    )
