"""§5.3 step 3: which trusted source a model-given argument value matches (``USER``, ``EVIDENCE``, …)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..context import NodeContext
from ..contract import ArgContract, SourceType
from ..evaluate import resolve
from ..expressions import Prefix
from ..paths import get_path

MIN_USER_TEXT = 2
MODEL = SourceType.MODEL.value


def normalize(value: Any) -> str:
    """str, whitespace stripped, lower-case (the §5.3 USER text normalization)."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    return str(value).strip().lower()


def _ascii_word(char: str) -> bool:
    return char.isascii() and char.isalnum()


def said_by_user(value: Any, messages: list[str]) -> bool:
    """The normalized value (≥ 2 characters) occurs in a message with no ASCII letter or digit right before or after
    it: ``10`` does not match inside ``2010``, ``季度总结`` matches inside a Chinese sentence."""
    if isinstance(value, dict | list) or value is None:
        return False
    needle = normalize(value)
    if len(needle) < MIN_USER_TEXT:
        return False
    for message in messages:
        text = message.lower()
        start = text.find(needle)
        while start >= 0:
            end = start + len(needle)
            before = text[start - 1] if start > 0 else ""
            after = text[end] if end < len(text) else ""
            if not (before and _ascii_word(before)) and not (after and _ascii_word(after)):
                return True
            start = text.find(needle, start + 1)
    return False


def walk(value: Any) -> Iterator[Any]:
    """The value and every value inside it (objects' values and list items), depth first."""
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def same(a: Any, b: Any) -> bool:
    """Equal as JSON values; a boolean never equals a number (``True`` is not ``1``), inside objects and lists too."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return bool(a == b)


def in_evidence(ctx: NodeContext, value: Any, events: bool = False) -> bool:
    """Exactly equal to some value in the extracts of a succeeded evidence of this node or an upstream node: of a
    business call (``EVIDENCE``), or with ``events`` of an external event (``EVENT``: its extracts, or its whole
    payload when the contract declares none)."""
    for evidence in ctx.visible_evidence():
        if not evidence.succeeded or evidence.from_event is not events:
            continue
        values = evidence.response if events and not evidence.extracts else evidence.extracts
        if any(same(value, v) for v in walk(values)):
            return True
    return False


def user_field(ctx: NodeContext, arg: ArgContract, value: Any = None) -> bool:
    """The argument is one of the current follow-up's expectedFields that the user answered; a field answered by
    a CHOICE counts for the chosen id only."""
    for name in (arg.path, arg.leaf):
        if name in ctx.node.chosen:
            return normalize(value) == normalize(ctx.node.chosen[name])
    return arg.path in ctx.node.user_fields or arg.leaf in ctx.node.user_fields


def matches(ctx: NodeContext, arg: ArgContract, source: SourceType, value: Any, path: str) -> bool:
    if source is SourceType.MODEL:
        return True
    if source is SourceType.USER:
        return user_field(ctx, arg, value) or said_by_user(value, ctx.session.user_messages)
    if source is SourceType.EVIDENCE:
        return in_evidence(ctx, value)
    if source is SourceType.EVENT:
        return in_evidence(ctx, value, events=True)
    if source is SourceType.NODE_OUTPUT:
        outputs = {k: v.value for k, v in ctx.node.outputs.items()}
        return any(_found_equal(data, path, value) for data in (ctx.node.inputs, outputs))
    if source is SourceType.SHARED:
        return _found_equal(ctx.task.shared, path, value)
    if source is SourceType.SESSION:
        return _found_equal(ctx.session.values, path, value)
    if source is SourceType.PRIOR_TASK:
        if arg.from_expr is not None and arg.from_expr.prefix is Prefix.PRIOR:
            found, expected, _ = resolve(ctx, arg.from_expr)
            return found and same(expected, value)
        return any(same(entity.id, value) for entity in ctx.session.entities)
    return False  # PLATFORM / CONTRACT only come from from/const


def _found_equal(data: Any, path: str, value: Any) -> bool:
    found, there = get_path(data, path)
    return found and same(there, value)


def provenance(ctx: NodeContext, arg: ArgContract, value: Any, path: str) -> str:
    """The source of a value that binding did not set: the first matching ``sources`` entry, else ``MODEL``."""
    if arg.from_expr is not None or arg.has_const:
        return MODEL
    for source in arg.sources:
        if matches(ctx, arg, source, value, path):
            return str(source)  # a StrEnum: its value
    return MODEL
