"""State builtins of §12: the node's private notes, reading an evidence's raw response, and session info.

Reserved note keys (``STATE_KEY_RESERVED``), compared case-insensitively: any key starting with ``_`` or ``$``,
the expression prefixes of §9 (``inputs``, ``outputs``, ``shared``, ``session``, ``prior``, ``platform``,
``evidence``, ``call``), the names of the runtime's own node state (``status``, ``target``, ``checkpoint``,
``gated``, ``reply``, ``messages``, ``answered``, ``user_fields``, ``fingerprint``, ``node``, ``task``) and the §11
platform field names.
"""

from __future__ import annotations

from ..codes import ErrorCode
from ..context import NodeContext
from ..expressions import HIDDEN_PLATFORM_FIELDS, PLATFORM_FIELDS, Prefix
from ..state import Observation
from .tool import Builtin, Call, JsonObject, params, text_arg

STATE_SET = "builtin_state_set"
EVIDENCE_GET = "builtin_evidence_get"
SESSION_INFO = "builtin_session_info"

_RUNTIME_NAMES = (
    "status",
    "target",
    "checkpoint",
    "gated",
    "reply",
    "messages",
    "answered",
    "user_fields",
    "fingerprint",
    "node",
    "task",
)
RESERVED_STATE_KEYS = frozenset(
    k.lower() for k in (*(p.value for p in Prefix), *_RUNTIME_NAMES, *PLATFORM_FIELDS, *HIDDEN_PLATFORM_FIELDS)
)


def state_key_reserved(key: str) -> bool:
    return key.startswith(("_", "$")) or key.lower() in RESERVED_STATE_KEYS


async def state_set(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    key = text_arg(args, "key")
    if not key:
        return call.refuse(ErrorCode.ARG_REJECTED, "the note key is empty", f"call {STATE_SET} with a short key")
    if state_key_reserved(key):
        return call.refuse(
            ErrorCode.STATE_KEY_RESERVED,
            f"{key!r} is a reserved key the runtime uses",
            f"use another key, e.g. 'note_{key.strip('_$').lower() or 'x'}' (no leading '_' or '$')",
        )
    ctx.node.scratch[key] = args.get("value")
    return call.ok({"key": key, "written": True})


async def evidence_get(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    evidence_id = text_arg(args, "evidenceId")
    visible = ctx.visible_evidence()
    listing = ", ".join(f"{e.id} ({e.tool})" for e in visible) or "none yet"
    if not evidence_id:
        return call.refuse(
            ErrorCode.EVIDENCE_PATH_INVALID,
            "the evidence id is empty",
            f"pass the evidence_id of a tool result (visible: {listing})",
        )
    found = next((e for e in visible if e.id == evidence_id), None)
    if found is None:
        return call.refuse(
            ErrorCode.EVIDENCE_PATH_INVALID,
            f"evidence {evidence_id!r} is not visible to this node",
            f"pass one of the visible evidence ids: {listing}",
        )
    return call.ok(
        {
            "evidenceId": found.id,
            "tool": found.tool,
            "status": found.status.value,
            "businessOk": found.business_ok,
            "empty": found.empty,
            "response": found.response,
        }
    )


async def session_info(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    return call.ok(
        {
            "sessionId": ctx.session.id,
            "taskId": ctx.task.id,
            "nodeId": ctx.node.id,
            "nodeStatus": ctx.node.status.value,
        }
    )


STATE_SET_TOOL = Builtin(
    STATE_SET,
    "Write a private note of this node (kept while the node runs). Keys starting with '_' are reserved.",
    params({"key": {"type": "string"}, "value": {"description": "any JSON"}}, ("key", "value")),
    state_set,
)
EVIDENCE_GET_TOOL = Builtin(
    EVIDENCE_GET,
    "Read the raw response of a tool result by its evidence_id.",
    params({"evidenceId": {"type": "string"}}, ("evidenceId",)),
    evidence_get,
)
SESSION_INFO_TOOL = Builtin(SESSION_INFO, "The session id, task id, node id and node status.", params(), session_info)
