"""Stage 5 (§13 WriteGate, §14.1–§14.2): identical writes, writes in flight or unsettled, and approval.

Order: an identical write (same tool + idempotency key in this task) that succeeded returns its earlier result
without approval and without a call; one in flight → ``WRITE_IN_FLIGHT``; one uncertain → ``WRITE_PENDING_VERIFY``;
otherwise the write needs approval (``APPROVAL_REQUIRED``: the node remembers it as ``node.gated`` and among
``node.pending_writes``, by its call id, for a batch approval) unless the tool
has ``confirm: false`` AND is listed in ``settings.write_confirm_bypass_tools``, or this is the CONFIRM path.
"""

from __future__ import annotations

from typing import Any

from ..codes import ErrorCode
from ..contract import ToolContract
from ..paths import get_path, has_value
from ..state import EvidenceStatus, GatedWrite, Observation
from .base import ChainCall, canonical, digest
from .summary import build_summary


def idempotency_key(
    tool: str, contract: ToolContract | None, args: dict[str, Any], canonical_args: str | None = None
) -> str:
    """§14.2: SHA-256 of the listed paths' values concatenated, paths in lexicographic order, missing ones skipped
    (a text as it is, any other value as canonical JSON: ``12``, ``true``, ``{"a":1}``), so another system
    following the spec derives the same key. Without a configured key, or when every listed path is missing: the
    tool name + a digest of all arguments (``canonical_args``: ``canonical(args)``, when the caller already has
    it)."""
    paths = sorted(contract.idempotency_key) if contract is not None else []
    parts = []
    for path in paths:
        found, value = get_path(args, path)
        if found and has_value(value):
            parts.append(value if isinstance(value, str) else canonical(value))
    if parts:
        return digest("".join(parts))
    return f"{tool}:{digest(canonical(args) if canonical_args is None else canonical_args)}"


def check(call: ChainCall) -> Observation | None:
    """The gate of a write (reads never reach it)."""
    assert call.contract is not None
    ctx = call.ctx
    # the fingerprint stage ran just before on the same arguments (binding is done): its canonical text is reused
    key = call.idempotency_key = idempotency_key(call.tool, call.contract, call.args, call.canonical_args)
    same = [e for e in ctx.evidence if e.write and e.tool == call.tool and e.idempotency_key == key]
    done = next((e for e in reversed(same) if e.succeeded), None)
    if done is not None:
        return call.observation(True, done.response, evidence_id=done.id)
    if any(e.status is EvidenceStatus.STARTED for e in same):
        return call.refuse(
            ErrorCode.WRITE_IN_FLIGHT,
            f"the same {call.label} is already running; it must not run twice",
            "wait for it: do not call this write again; continue with other work or call builtin_session_info",
        )
    pending = next((e for e in same if e.status in (EvidenceStatus.UNKNOWN, EvidenceStatus.UNKNOWN_PRE_CALL)), None)
    if pending is not None:
        verify = call.contract.verify
        how = f"it will be checked with {verify.tool}" if verify else "the user will be asked whether it took effect"
        return call.refuse(
            ErrorCode.WRITE_PENDING_VERIFY,
            f"the outcome of the same {call.label} (evidence {pending.id}) is not known yet; {how}",
            f"do not call {call.tool} again; "
            + (
                f"call {verify.tool} to check whether it took effect"
                if verify
                else "the user is asked whether it took effect when the node next reopens; continue with other work "
                "or reply"
            ),
            evidence_id=pending.id,
        )
    if call.approved:
        return None
    bypass: frozenset[str] = getattr(ctx.settings, "write_confirm_bypass_tools", frozenset())
    if not call.contract.confirm and call.tool in bypass:
        return None
    summary = build_summary(call.contract, call.args, call.sources)
    gated = ctx.node.gated = GatedWrite(
        tool=call.tool,
        args=call.args,
        sources=dict(call.sources),
        summary=summary,
        idempotency_key=key,
        call_id=call.call_id,
    )
    pending = ctx.node.pending_writes  # the same write stopped again replaces its earlier entry
    pending[:] = [g for g in pending if not (g.tool == call.tool and g.idempotency_key == key)]
    pending.append(gated)
    return call.refuse(
        ErrorCode.APPROVAL_REQUIRED,
        f"{call.label} changes data and needs the user's confirmation first:\n{summary}",
        f"call builtin_node_approval with toolName {call.tool!r} and a one-line summary of what will be done",
    )
