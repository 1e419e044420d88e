"""The empty-result guard (§9.3): a chain stops before a step whose previous step gave nothing to work with.

An envelope is empty when none of its fields but the platform's own holds a value; a step is starved when a value
its input references from an earlier step is missing (``null``, ``""``, ``[]``, ``{}``). ``0`` and ``false`` are
values (§3.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .definition import Step
from .references import referenced_values

#: The fields every envelope may carry that say nothing about the result itself.
PLATFORM_FIELDS = frozenset(
    {
        "ok",
        "success",
        "display_md",
        "display_only",
        "action_note",
        "user_message",
        "message",
        "async",
        "warnings",
        "offloaded",
    }
)


def empty_reason(
    previous: Step | None, envelope: Mapping[str, Any] | None, step: Step, scope: Mapping[str, Any]
) -> str | None:
    """Why ``step`` must not start, or None when it may; ``envelope`` is the previous step's."""
    if step.allow_empty:
        return None
    if (
        previous is not None
        and envelope is not None
        and all(key in PLATFORM_FIELDS or _blank(value) for key, value in envelope.items())
    ):
        return f"step {previous.id!r} ({previous.skill}) returned an empty result, so step {step.id!r} did not start"
    for place, ref, value in referenced_values(step.input, scope):
        if _blank(value):
            shown = "null" if value is None else repr(value)
            return f"step {step.id!r} did not start: {place} references {{{{ {ref.text} }}}}, which is {shown}"
    return None


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and not value)
