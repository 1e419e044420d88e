"""Stage 3 (§13 ParamContract, §5.3 steps 2–5, §5.5): missing values, provenance, enum.

Every argument listed in ``args`` is checked; when several fail, the refusal is the most urgent one:
immediate rejection (``PARAM_PROVENANCE_REJECTED``) > ``FAIL`` > ``CALL_TOOL`` > ``ASK_USER``.
``missing.action: CALL_TOOL`` without a ``tool`` lets the missing value pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..codes import ErrorCode
from ..contract import ArgContract, MissingAction, SourceType
from ..paths import get_path, has_value
from ..state import Observation
from .arg_binding import item_paths
from .base import ChainCall
from .plan import MODEL, ArgPlan
from .provenance import provenance, same

REJECTED, FAIL, CALL_TOOL, ASK_USER = range(4)


@dataclass(frozen=True)
class Problem:
    rank: int
    code: ErrorCode
    message: str
    next_step: str


def _label(arg: ArgContract) -> str:
    return arg.label or arg.path


def _ask(call: ChainCall, arg: ArgContract, why: str) -> Problem:
    return Problem(
        ASK_USER,
        ErrorCode.PARAM_PROVENANCE_ASK_USER,
        f"{_label(arg)} ({arg.path}) {why}",
        f"call builtin_node_follow_up asking the user for {_label(arg)} with expectedFields "
        f"[{json.dumps(arg.path, ensure_ascii=False)}], then call {call.tool} again",
    )


def _missing(call: ChainCall, arg: ArgContract) -> Problem | None:
    spec = arg.missing
    if spec.action is MissingAction.FAIL:
        reason = spec.message or f"the required argument {_label(arg)} of {call.tool} has no value"
        return Problem(
            FAIL,
            ErrorCode.PARAM_PROVENANCE_FAIL,
            reason,
            f"call builtin_node_fail with the reason: {reason}",
        )
    if spec.action is MissingAction.CALL_TOOL:
        if not spec.tool:
            return None  # §5.5: CALL_TOOL without a tool lets the missing value pass
        return Problem(
            CALL_TOOL,
            ErrorCode.PARAM_PROVENANCE_CALL_TOOL,
            f"{_label(arg)} ({arg.path}) has no value; it must come from {spec.tool}",
            f"call {spec.tool} first to find {_label(arg)}, then call {call.tool} again with it",
        )
    return _ask(call, arg, "has no value")


def _read_tools(call: ChainCall) -> list[str]:
    tools = call.ctx.skill.contract.tools
    return [n for n in call.ctx.skill.tool_names if n != call.tool and not (n in tools and tools[n].is_write)]


def _rejected(call: ChainCall, arg: ArgContract, value: Any) -> Problem:
    allowed = ", ".join(s.value for s in arg.sources) or "from/const only"
    steps = []
    if SourceType.EVIDENCE in arg.sources:
        lookups = [arg.missing.tool] if arg.missing.tool else _read_tools(call)
        if lookups:
            steps.append(f"call {' or '.join(lookups)} first and use a value from its result")
    steps.append("ask the user with builtin_node_follow_up")
    steps.append("call builtin_node_fail if the value cannot be obtained")
    shown = "***" if arg.sensitive else json.dumps(value, ensure_ascii=False, default=str)
    return Problem(
        REJECTED,
        ErrorCode.PARAM_PROVENANCE_REJECTED,
        f"the value {shown} of {_label(arg)} ({arg.path}) does not come from an allowed source ({allowed}); "
        "made-up values are refused",
        "; or ".join(steps),
    )


def _in_enum(value: Any, allowed: tuple[Any, ...]) -> bool:
    return any(same(value, item) for item in allowed)


def _check_value(call: ChainCall, item: ArgPlan, path: str, value: Any) -> Problem | None:
    arg = item.arg
    bound = call.sources.get(path) if (item.template or arg.path in call.bound) else None
    if bound:
        source = bound
    elif item.model_only:  # what provenance() answers for this arg without looking anything up
        source = MODEL
    else:
        source = provenance(call.ctx, arg, value, path)
    call.sources[path] = source
    if source == MODEL and not item.model_allowed:
        if item.user_allowed:
            return _ask(call, arg, "was not given by the user")
        return _rejected(call, arg, value)
    if arg.enum and not _in_enum(value, arg.enum):
        options = ", ".join(json.dumps(v, ensure_ascii=False) for v in arg.enum)
        return _ask(call, arg, f"must be one of {options}")
    return None


def check(call: ChainCall) -> Observation | None:
    problems: list[Problem] = []
    for item in call.plan.args:
        arg = item.arg
        if item.const and arg.path in call.bound:
            continue  # §5.3 step 1: a const is written with source CONTRACT, and that is the end (null and enum too)
        paths = (item_paths(call.args, arg.path) or [arg.path]) if item.template else (arg.path,)
        for path in paths:
            found, value = (False, None) if "[]" in path else get_path(call.args, path)
            if found and has_value(value):
                problem = _check_value(call, item, path, value)
            else:
                problem = _missing(call, arg) if arg.required else None
            if problem is not None:
                problems.append(problem)
    if not problems:
        return None
    worst = min(problems, key=lambda p: p.rank)
    return call.refuse(worst.code, worst.message, worst.next_step)
