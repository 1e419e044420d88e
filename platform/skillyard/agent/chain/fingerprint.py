"""Stages 4 and 8 (§13.4): the repeated-call fuse.

The count is of consecutive successful calls with the same tool and the same (bound) arguments; any other real
call resets it. With ``settings.fingerprint_limit`` = 3, calls 1–3 run and the 4th identical call trips
``FINGERPRINT_TRIP``, which fails the node.
"""

from __future__ import annotations

from ..codes import ErrorCode
from ..state import NodeStatus, Observation
from .base import ChainCall, canonical, digest


def check(call: ChainCall) -> Observation | None:
    """The fingerprint is the SHA-256 of the tool name and the canonical JSON of the (bound) arguments."""
    text = call.canonical_args = canonical(call.args)  # the write gate's default idempotency key reuses it
    call.fingerprint = digest(f"{call.tool}\n{text}")
    if call.approved:
        return None  # §14.1 step 3: the confirmed write skips the fuse
    node = call.ctx.node
    if node.fingerprint != call.fingerprint:
        return None
    if node.fingerprint_count < int(getattr(call.ctx.settings, "fingerprint_limit", 3)):
        return None
    reason = (
        f"{call.tool} was called {node.fingerprint_count} times in a row with the same arguments and the same "
        "success; the node stopped to avoid a loop"
    )
    node.status = NodeStatus.FAILED
    node.reply = reason
    return call.refuse(
        ErrorCode.FINGERPRINT_TRIP,
        reason,
        "the node has failed; do not call tools again — use the results you already have in your reply",
    )


def count(call: ChainCall, succeeded: bool) -> None:
    """After a call that returned: one more identical success, or a reset. An identical write answered with its
    earlier result (§14.2) is a successful call too, so a model repeating it trips the fuse like any other loop."""
    node = call.ctx.node
    if not succeeded:
        node.fingerprint, node.fingerprint_count = None, 0
    elif node.fingerprint == call.fingerprint:
        node.fingerprint_count += 1
    else:
        node.fingerprint, node.fingerprint_count = call.fingerprint, 1
