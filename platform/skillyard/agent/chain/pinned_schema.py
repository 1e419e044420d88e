"""Stage 3b (orchestration P0): a pinned task's call is checked against the input schema the task pinned.

A task runs its tools as they were when it started (binding.py). When a tool's current schema differs from the
pinned one and rejects arguments the pinned one accepts, the call fails with ``TOOL_SCHEMA_CHANGED`` naming the
difference, instead of being sent to a tool that now means something else. Equal schemas (the usual case) cost one
dict comparison.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...invoke.validation import first_error, input_validator
from ..codes import ErrorCode
from ..state import Observation
from .base import ChainCall, canonical


def check(call: ChainCall) -> Observation | None:
    pinned = call.ctx.skill.pinned_tools
    view = pinned.get(call.tool) if pinned is not None else None
    skill = call.catalog_skill
    if view is None or skill is None or skill.schema.exposed == view["input_schema"]:
        return None
    why = schema_change(view["input_schema"], skill.schema.exposed, call.args)
    if why is None:
        return None
    return call.refuse(
        ErrorCode.TOOL_SCHEMA_CHANGED,
        f"{call.tool!r} changed since this task started: its current input schema rejects these arguments, which "
        f"the schema pinned by the task accepts: {why}",
        "do not retry the same call: tell the user the tool changed, and call builtin_node_fail with the reason "
        "(a new task uses the new schema)",
    )


def schema_change(pinned: Mapping[str, Any], current: Mapping[str, Any], args: Any) -> str | None:
    """Why ``args``, accepted by the pinned input schema, are rejected by the current one; None when the current
    schema accepts them too (or the pinned one rejects them: that is an ordinary argument error)."""
    pinned_error, _ = first_error(input_validator(pinned), args)
    if pinned_error is not None:
        return None
    current_error, unusable = first_error(input_validator(current), args)
    if current_error is None and unusable is None:
        return None
    changes = schema_differences(pinned, current)
    why = unusable or current_error.message  # type: ignore[union-attr]
    return f"{why}" + (f" (schema changes since the task started: {'; '.join(changes)})" if changes else "")


def schema_differences(pinned: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Top-level differences between two object schemas: properties added, removed or retyped, required changed."""
    before = pinned.get("properties") or {}
    after = current.get("properties") or {}
    changes = [f"{name!r} added" for name in after if name not in before]
    changes += [f"{name!r} removed" for name in before if name not in after]
    for name in before:
        if name in after and canonical(before[name]) != canonical(after[name]):
            changes.append(f"{name!r} changed from {canonical(before[name])} to {canonical(after[name])}")
    required_before, required_after = set(pinned.get("required") or ()), set(current.get("required") or ())
    if required_after - required_before:
        changes.append("now required: " + ", ".join(sorted(required_after - required_before)))
    if required_before - required_after:
        changes.append("no longer required: " + ", ".join(sorted(required_before - required_after)))
    return changes
