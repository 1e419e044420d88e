"""Stage 1 (§13 ArgPolicy): the arguments are a JSON object carrying every schema-required argument.

Arguments bound by ``from``/``const`` are exempt from the required check (binding fills them next). The schema is
the one of the tool's catalog skill (found by tool name); a tool the catalog does not know is unreachable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...envelope import MAX_NESTING, is_empty, nesting_problem
from ..codes import ErrorCode
from ..state import Observation
from .base import ChainCall, json_copy

if TYPE_CHECKING:
    from ...catalog.skill import Skill


def _schema(call: ChainCall, skill: Skill, tool_sub: str | None, args: dict[str, Any]) -> Mapping[str, Any]:
    """The schema ``args`` are checked against: the subcommand's — the tool name's (``notes__add``), else the one
    the arguments choose — else the one exposed to models (as the task pinned it, binding.py)."""
    schema = skill.schema
    if not schema.subcommands:
        pinned = call.ctx.skill.pinned_tools
        view = pinned.get(call.tool) if pinned is not None else None
        return view["input_schema"] if view is not None else schema.exposed
    sub = tool_sub or args.get("_subcommand")
    if isinstance(sub, str) and sub in schema.subcommands:
        return schema.subcommands[sub]
    return schema.exposed


def _too_deep(call: ChainCall, problem: str) -> Observation:
    return call.refuse(
        ErrorCode.ARG_REJECTED,
        f"the arguments of {call.tool!r} cannot be used: {problem}",
        f"call {call.tool} again with flatter, valid arguments",
    )


def check(call: ChainCall) -> Observation | None:
    raw = call.raw_arguments
    if isinstance(raw, str):
        if not raw.strip():
            raw = {}
        else:
            try:
                raw = json.loads(raw)
            except ValueError as exc:
                return call.refuse(
                    ErrorCode.ARG_JSON_INVALID,
                    f"the arguments of {call.tool!r} are not valid JSON: {exc}",
                    f'call {call.tool} again with the arguments as one JSON object, e.g. {{"name": "value"}}',
                )
            except RecursionError:
                return _too_deep(call, f"it is nested more than {MAX_NESTING} levels deep; flatten it")
    too_deep = nesting_problem(raw)
    if too_deep:
        return _too_deep(call, too_deep)
    if type(raw) is not dict and not isinstance(raw, Mapping):
        return call.refuse(
            ErrorCode.ARG_REJECTED,
            f"the arguments of {call.tool!r} must be a JSON object, not {type(raw).__name__}",
            f"call {call.tool} again with the arguments as one JSON object",
        )
    call.args = json_copy(raw)  # a private deep copy binding may change
    resolved = call.ctx.yard.resolve(call.tool)
    if resolved is None:
        return call.refuse(
            ErrorCode.TOOL_UNREACHABLE,
            f"tool {call.tool!r} is listed for this skill but no skill of that name is installed",
            "do not call it again; use another tool or call builtin_node_fail with the reason",
        )
    skill = call.catalog_skill = resolved[0]
    tool_sub = resolved[1]
    exempt = call.plan.exempt  # top-level names bound by from/const
    args = call.args
    missing = []
    for item in _schema(call, skill, tool_sub, args).get("required") or []:
        name = item if type(item) is str else str(item)
        if name not in exempt and is_empty(args.get(name)):
            missing.append(name)
    if missing:
        names = ", ".join(missing)
        return call.refuse(
            ErrorCode.ARG_REJECTED,
            f"{call.tool!r} is missing required argument(s): {names}",
            f"call {call.tool} again with a value for {names} (ask the user with builtin_node_follow_up "
            "if you do not know it)",
        )
    return None
