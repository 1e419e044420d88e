"""The entry point of the tool-call chain for business tools (§13): :func:`call_tool`.

Stages, in order: catalog (``toolNames``) → arg policy → arg binding → param contract → fingerprint check → write
gate → the call → response contract → evidence → fingerprint count. A refusal before the call registers no
evidence and runs nothing. A write is registered ``STARTED`` before its call and never retried automatically.
"""

from __future__ import annotations

from typing import Any

from ..codes import ErrorCode
from ..context import NodeContext
from ..state import Evidence, EvidenceStatus, Observation
from . import (
    arg_binding,
    arg_policy,
    evidence,
    fingerprint,
    invoke,
    param_contract,
    pinned_schema,
    response,
    write_gate,
)
from .base import ChainCall

SUCCESS = EvidenceStatus.SUCCESS  # read once: an enum member read off its class is slow on Python 3.11


def _denied(call: ChainCall) -> Observation:
    tools = ", ".join(call.ctx.skill.tool_names) or "none"
    return call.refuse(
        ErrorCode.CATALOG_DENIED,
        f"{call.tool!r} is not a tool of this skill",
        f"call one of this skill's tools ({tools}) or a builtin_* tool instead",
    )


def _before(call: ChainCall) -> Observation | None:
    refusal = arg_policy.check(call)
    if refusal is not None:
        return refusal
    if call.plan.binds:  # binding writes only the args with from/const
        arg_binding.bind(call)
    refusal = param_contract.check(call) or pinned_schema.check(call) or fingerprint.check(call)
    if refusal is None and call.plan.write:  # the write gate stops writes only
        refusal = write_gate.check(call)
    return refusal


def _failure_step(call: ChainCall, failure: invoke.Failure, status: EvidenceStatus) -> str:
    if status is EvidenceStatus.UNKNOWN:
        verify = call.contract.verify if call.contract else None
        check = (
            f"it will be checked with {verify.tool} when the node resumes"
            if verify
            else "the user will be asked whether it took effect"
        )
        return f"do not call {call.tool} again: the write may have happened and {check}; continue or finish later"
    if failure is invoke.Failure.PARAMS:
        return f"fix the arguments named in the error and call {call.tool} again"
    if failure is invoke.Failure.MCP_TOOL:
        return f"read the tool's error: fix the arguments and call {call.tool} again, or call builtin_node_fail"
    if failure is invoke.Failure.UNREACHABLE:
        return f"{call.tool} cannot be reached now; try again later or call builtin_node_fail with the reason"
    return f"call {call.tool} again once, or call builtin_node_fail with the reason if it keeps failing"


def _settle(call: ChainCall, record: Evidence, envelope: dict[str, Any]) -> Observation:
    """The response contract and evidence of a returned call: fills ``record`` and says what the model sees."""
    record.response = envelope
    failed = invoke.failed(envelope)  # one check for the §14.4 class and the response contract
    failure = invoke.failure_kind(envelope) if failed else None  # invoke.classify(envelope)
    if failure is not None:
        record.status = failure.status(record.write)
        record.error_code = failure.code.value
        record.error_message = str(envelope.get("error") or failure.name)
        return call.refuse(
            failure.code,
            record.error_message,
            _failure_step(call, failure, record.status),
            evidence_id=record.id,
        )
    record.status = SUCCESS
    root = invoke.result_root(call, envelope)  # an MCP tool's chosen view; any other skill's whole envelope
    # response.business_ok(call.plan.success, root), whose failed() check is the one just made
    record.business_ok = False if failed else response.success_holds(call.plan.success, root)
    if record.business_ok:
        evidence.fill(call.ctx, call.plan, record, root)
        return call.observation(True, envelope, evidence_id=record.id)
    record.error_code, record.error_message = response.business_error(call.contract, root)
    return call.refuse(
        record.error_code,
        f"{call.label} failed: {record.error_message}",
        "read the error: fix the arguments and call again, ask the user with builtin_node_follow_up, "
        "or call builtin_node_fail with the reason",
        evidence_id=record.id,
    )


async def call_tool(
    ctx: NodeContext,
    name: str,
    arguments: str | dict[str, Any],
    *,
    call_id: str | None = None,
    approved: bool = False,
) -> Observation:
    """Run one business-tool call through the §13 chain and return what the model sees.

    ``approved=True`` is the CONFIRM path of §14.1 step 3: no approval and no fingerprint check, everything else
    as usual. Builtin tools are not handled here (they are not in ``toolNames``: ``CATALOG_DENIED``).
    """
    contract = ctx.tool_contract(name)
    call = ChainCall(ctx, name, arguments, call_id, approved, contract)  # positional: cheaper than keywords
    if not ctx.is_business_tool(name):
        return _denied(call)
    write = call.plan.write
    if write and ctx.node.target is None:
        ctx.node.target, ctx.node.target_claimed = name, True  # §10.1 row 3: the first write call, even if stopped
    refusal = _before(call)
    if refusal is not None:
        if refusal.ok:  # §14.2: an identical write answered with its earlier result, nothing run
            fingerprint.count(call, succeeded=True)
        return refusal
    # the call itself (one coroutine layer less than a separate stage function); the record is built positionally:
    # id, task, node, tool, args, write, idempotency key
    record = Evidence.started(
        ctx.store.new_evidence_id(), ctx.task.id, ctx.node.id, name, call.args, write, call.idempotency_key
    )
    if write:
        await ctx.record(record)  # §14: registered before the call, so a crash leaves a trace
    ctx.tool_started(name, contract)
    try:  # invoke.run(call), without its coroutine layer
        envelope = await invoke.start(call)
    except Exception as exc:
        envelope = invoke.crashed(call, exc)
    observation = _settle(call, record, envelope)
    await ctx.record(record)
    fingerprint.count(call, record.succeeded)
    return observation
