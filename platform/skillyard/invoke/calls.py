"""call_skill (§9.1): skills chaining skills in-process, with the spec's exact semantics. It never raises."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..credentials import masked_logger
from ..envelope import failure
from .context import callee_context

if TYPE_CHECKING:
    from ..yard import SkillYard

MAX_CALL_DEPTH = 3
log = masked_logger("skillyard.calls")
_FIELD = re.compile(r"\{([^{}]+)\}")

CallSkill = Callable[..., Awaitable[dict[str, Any]]]


def fill_template(template: Mapping[str, Any], source: Mapping[str, Any]) -> dict[str, Any]:
    """``{"to": "Dear {name}"}`` filled from source; a value that is exactly ``{field}`` keeps its type."""
    out: dict[str, Any] = {}
    for key, value in template.items():
        if not isinstance(value, str):
            out[key] = value
            continue
        whole = _FIELD.fullmatch(value)
        if whole and whole.group(1) in source:
            out[key] = source[whole.group(1)]
        else:
            out[key] = _FIELD.sub(lambda m: str(source.get(m.group(1), m.group(0))), value)
    return out


def merge_call_input(
    input: Mapping[str, Any] | None,
    fields: Mapping[str, Any],
    source: Any,
    template: Mapping[str, Any] | None,
    passthrough: bool,
) -> dict[str, Any]:
    """Priority: explicit dict / kwargs > template > passthrough (the callee's configs come last, in the run)."""
    merged: dict[str, Any] = {}
    src = source if isinstance(source, Mapping) else {}
    if passthrough:
        merged.update(src)
    if template:
        merged.update(fill_template(template, src))
    merged.update(input or {})
    merged.update(fields)
    return merged


def make_call_skill(yard: SkillYard, caller: str, caller_ctx: Mapping[str, Any], depth: int) -> CallSkill:
    """The ``call_skill`` a skill at ``depth`` gets; callee runs skip result post-processing (§9.1)."""

    async def call_skill(
        name: str,
        input: Mapping[str, Any] | None = None,
        *,
        source: Any = None,
        template: Mapping[str, Any] | None = None,
        passthrough: bool = False,
        **fields: Any,
    ) -> dict[str, Any]:
        if input is not None and not isinstance(input, Mapping):
            return failure(name, f"call_skill({name!r}) input must be a dict, not {type(input).__name__}")
        resolved = yard.resolve(name)
        target = resolved[0].name if resolved else name
        if target == caller:
            return failure(name, f"skill {caller!r} cannot call itself through call_skill")
        if depth >= MAX_CALL_DEPTH:
            return failure(
                name, f"call_skill nesting is limited to {MAX_CALL_DEPTH} levels; {caller!r} is at the limit"
            )
        merged = merge_call_input(input, fields, source, template, passthrough)
        try:
            return await yard.run_nested(name, merged, callee_context(caller_ctx), depth + 1)
        except Exception as exc:  # never raise into the calling skill
            log.exception("call_skill(%r) from %r failed", name, caller)
            return failure(name, f"call_skill({name!r}) failed: {exc}")

    return call_skill
