"""The builtin tools of contract spec §12: what the model may call besides the skill's business tools.

* :data:`BUILTIN_NAMES` — every builtin, offered or not;
* :func:`offered_builtins` — the OpenAI function definitions offered to the model right now;
* :func:`call_builtin` — run one builtin call and return its :class:`~skillyard.agent.state.Observation`.

Builtins never pass through the parameter contract, approval or business checks (§12). A call is answered in this
order: an unknown name → ``CATALOG_DENIED``; a builtin not offered now → its own code where the spec has one
(``APPROVAL_NOT_GATED``, ``DELEGATE_FORBIDDEN``), else ``CATALOG_DENIED``; arguments that are not JSON →
``ARG_JSON_INVALID``; not an object, or a missing / wrongly typed argument → ``ARG_REJECTED``; then the builtin.

Modules: ``node`` (follow-up, approval, finish, fail, delegate, wait for an event), ``outputs``
(``builtin_output_set``, the §10.2 completion checks, shares and entities of a DONE node), ``state_tools`` (notes,
evidence, session info), ``env`` (``builtin_env_*``).
"""

from __future__ import annotations

import json
from typing import Any

from ...envelope import MAX_NESTING, nesting_problem
from ..codes import ErrorCode
from ..context import NodeContext
from ..state import Observation
from .env import ENV_TOOLS
from .node import (
    APPROVAL,
    APPROVAL_TOOL,
    DELEGATE,
    DELEGATE_TOOL,
    FAIL_TOOL,
    FINISH_TOOL,
    FOLLOW_UP_TOOL,
    WAIT_EVENT,
    WAIT_EVENT_TOOL,
    delegation_offered,
    wait_offered,
)
from .outputs import OUTPUT_SET, OUTPUT_SET_TOOL, completion_refusal, outputs_used
from .skill_file import READ_SKILL_FILE, READ_SKILL_FILE_TOOL
from .skill_file import offered as skill_file_offered
from .state_tools import EVIDENCE_GET_TOOL, RESERVED_STATE_KEYS, SESSION_INFO_TOOL, STATE_SET_TOOL
from .tool import Builtin, Call, JsonObject, shape_problems

__all__ = [
    "BUILTINS",
    "BUILTIN_NAMES",
    "RESERVED_STATE_KEYS",
    "call_builtin",
    "completion_refusal",
    "is_offered",
    "offered_builtins",
]

#: Every builtin by name, in the order they are offered.
BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        FOLLOW_UP_TOOL,
        APPROVAL_TOOL,
        FINISH_TOOL,
        FAIL_TOOL,
        DELEGATE_TOOL,
        WAIT_EVENT_TOOL,
        OUTPUT_SET_TOOL,
        STATE_SET_TOOL,
        EVIDENCE_GET_TOOL,
        SESSION_INFO_TOOL,
        *ENV_TOOLS,
        READ_SKILL_FILE_TOOL,
    )
}
BUILTIN_NAMES: frozenset[str] = frozenset(BUILTINS)


def is_offered(ctx: NodeContext, name: str) -> bool:
    """Whether the builtin ``name`` is offered to the model now (§12)."""
    if name == APPROVAL:
        return ctx.node.gated is not None
    if name == OUTPUT_SET:
        return outputs_used(ctx)
    if name == DELEGATE:
        return delegation_offered(ctx)
    if name == WAIT_EVENT:
        return wait_offered(ctx)
    if name == READ_SKILL_FILE:
        return skill_file_offered(ctx)
    return name in BUILTINS


def offered_builtins(ctx: NodeContext) -> list[dict[str, Any]]:
    """The OpenAI function definitions of the builtins offered right now."""
    return [b.definition() for name, b in BUILTINS.items() if is_offered(ctx, name)]


def _not_offered(ctx: NodeContext, call: Call) -> Observation:
    if call.name == APPROVAL:
        return call.refuse(
            ErrorCode.APPROVAL_NOT_GATED,
            "no write call of this node is waiting for approval",
            "call the write tool first; ask for approval only after it answers APPROVAL_REQUIRED",
        )
    if call.name == DELEGATE:
        deep = ctx.node.depth + 1 > ctx.settings.delegate_max_depth
        why = (
            f"the delegation depth limit ({ctx.settings.delegate_max_depth}) is reached"
            if deep
            else ("this agent has no other delegatable skill")
        )
        return call.refuse(
            ErrorCode.DELEGATE_FORBIDDEN,
            f"delegation is not available to this node: {why}",
            "do the work with this skill's own tools, or call builtin_node_fail with the reason",
        )
    offered = [n for n in BUILTINS if is_offered(ctx, n)]
    why = "is not offered now" if call.name in BUILTINS else "is not a tool of this node"
    tools = ", ".join([*ctx.skill.tool_names, *offered])
    return call.refuse(ErrorCode.CATALOG_DENIED, f"{call.name!r} {why}", f"call one of the offered tools: {tools}")


def _parse(call: Call) -> JsonObject | Observation:
    raw = call.arguments
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            return call.refuse(
                ErrorCode.ARG_JSON_INVALID,
                f"the arguments are not valid JSON: {exc}",
                f"call {call.name} again with a JSON object of arguments",
            )
        except RecursionError:
            raw = None
            too_deep: str | None = f"they are nested more than {MAX_NESTING} levels deep"
        else:
            too_deep = nesting_problem(raw)
        if too_deep:
            return call.refuse(
                ErrorCode.ARG_REJECTED,
                f"the arguments cannot be used: {too_deep}",
                f"call {call.name} again with flatter, valid arguments",
            )
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        return call.refuse(
            ErrorCode.ARG_REJECTED,
            f"the arguments must be a JSON object, not {type(raw).__name__}",
            f"call {call.name} again with a JSON object of arguments",
        )
    return raw


async def call_builtin(
    ctx: NodeContext, name: str, arguments: str | dict[str, Any], *, call_id: str | None = None
) -> Observation:
    """Run one builtin call (see the module docstring for the order of refusals)."""
    call = Call(name, arguments, call_id)
    if not is_offered(ctx, name):
        return _not_offered(ctx, call)
    args = _parse(call)
    if isinstance(args, Observation):
        return args
    builtin = BUILTINS[name]
    problems = shape_problems(builtin.parameters, args)
    if problems:
        expected = ", ".join(builtin.parameters.get("properties", {})) or "no arguments"
        return call.refuse(
            ErrorCode.ARG_REJECTED,
            f"wrong arguments for {name}: {'; '.join(problems)}",
            f"call {name} again with the arguments {expected}",
        )
    return await builtin.handler(ctx, args, call)
