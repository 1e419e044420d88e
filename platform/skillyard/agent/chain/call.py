"""The entry point of the tool-call chain for business tools (§13): :func:`call_tool`.

Stages, in order: catalog (``toolNames``) → arg policy → arg binding → param contract → [targets by name, export
path] → fingerprint check → write gate → the call → response contract → evidence → fingerprint count. A refusal
before the call registers no evidence and runs nothing. A write is registered ``STARTED`` before its call and never
retried automatically, except once when its receipt says ``retryable`` and that the execution had not started
(doc_settle.py). Tools and results that declare none of the doc-runtime-contracts keys take outcome.settle.
"""

from __future__ import annotations

from typing import Any

from ..codes import ErrorCode
from ..context import NodeContext
from ..state import Evidence, Observation
from . import (
    arg_binding,
    arg_policy,
    async_task,
    doc_settle,
    fingerprint,
    invoke,
    outcome,
    param_contract,
    pinned_schema,
    receipt,
    write_gate,
)
from .base import ChainCall


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
    refusal = param_contract.check(call) or pinned_schema.check(call)
    if refusal is None and call.plan.doc is not None:  # targets by name, export paths (doc-runtime-contracts)
        refusal = doc_settle.before(call)
    refusal = refusal or fingerprint.check(call)
    if refusal is None and call.plan.write:  # the write gate stops writes only
        refusal = write_gate.check(call)
    return refusal


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
    if call.plan.doc is None and not receipt.announced(call, envelope):  # the usual case: one dict check
        observation = outcome.settle(call, record, envelope)
    else:  # receipts, structured errors, retries, async tasks, paging, exports
        observation = await doc_settle.settle(call, record, envelope)
    await ctx.record(record)
    fingerprint.count(call, record.succeeded)
    if name in ctx.skill.contract.poll_tools and record.succeeded:  # a poll may settle a running write
        observation = await async_task.observe(ctx, record, invoke.result_root(call, envelope), observation)
    return observation
