"""References in a chain step's input (§9.3): ``{{ trigger.symbol }}``, ``{{ steps.fetch.rows }}``, ``{{ run.id }}``.

A string that is exactly one reference becomes the referenced JSON value (any type); references inside a longer
string are rendered as text. A reference is a root and a dot-separated path with numeric list indexes, nothing
more: no expressions, no filters, no code, so a chain file can never make the worker evaluate anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: ``{{ ref }}`` with any spaces inside the braces; what is inside is checked by :func:`parse`.
_REF = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_SEGMENT = re.compile(r"\A[\w\-]+\Z")  # names (any script), digits, _ and -: no operators, brackets or pipes
_INDEX = re.compile(r"\A-?[0-9]+\Z")
ROOTS = ("trigger", "steps", "chain", "run")
#: The fields of the ``chain`` and ``run`` roots.
FIXED = {"chain": ("name",), "run": ("id", "started_at")}


class BadReference(ValueError):
    """A reference that cannot be read: what is wrong with it."""


@dataclass(frozen=True)
class Reference:
    """One parsed reference: its text, its root and the path below the root."""

    text: str
    root: str
    path: tuple[str, ...]

    @property
    def step(self) -> str | None:
        """The step a ``steps.<id>`` reference reads, else None."""
        return self.path[0] if self.root == "steps" and self.path else None


def parse(inner: str) -> Reference:
    """A reference from the text between the braces; BadReference naming the rule when it is not one."""
    text = inner.strip()
    segments = text.split(".")
    if not text or not all(_SEGMENT.match(s) for s in segments):
        raise BadReference(
            f"'{{{{{inner}}}}}' is not a reference: write {{{{ root.path }}}} with a root of {', '.join(ROOTS)} and "
            "dot-separated names or list indexes (no spaces, expressions or filters)"
        )
    root, path = segments[0], tuple(segments[1:])
    if root not in ROOTS:
        raise BadReference(
            f"'{{{{ {text} }}}}' starts with {root!r}: a reference starts with one of {', '.join(ROOTS)}"
        )
    if root == "steps" and not path:
        raise BadReference(f"'{{{{ {text} }}}}' names no step: write {{{{ steps.<step id>.<field> }}}}")
    if root in FIXED and (len(path) != 1 or path[0] not in FIXED[root]):
        fields = ", ".join(f"{root}.{f}" for f in FIXED[root])
        raise BadReference(f"'{{{{ {text} }}}}' is not a field of {root}: use {fields}")
    return Reference(text, root, path)


def references(value: Any, where: str = "input") -> Iterator[tuple[str, Reference]]:
    """Every reference in a step's input, with the place it stands (``input.records``, ``input.items.0``).

    Raises BadReference (prefixed with the place) for text between braces that is no reference.
    """
    for place, text in strings(value, where):
        for ref in string_references(text, place):
            yield place, ref


def strings(value: Any, where: str = "input") -> Iterator[tuple[str, str]]:
    """Every string of an input that holds ``{{``, with its place, in document order."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        place, item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend((f"{place}.{k}", v) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((f"{place}.{i}", v) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, str) and "{{" in item:
            yield place, item


def string_references(text: str, place: str) -> list[Reference]:
    """The references of one string; BadReference (prefixed with the place) for the first that is none, or for a
    ``{{`` that no ``}}`` closes."""
    if "{{" in _REF.sub("", text):
        raise BadReference(f"{place}: '{{{{' without a closing '}}}}'")
    found = []
    for match in _REF.finditer(text):
        try:
            found.append(parse(match.group(1)))
        except BadReference as exc:
            raise BadReference(f"{place}: {exc}") from None
    return found


def lookup(ref: Reference, scope: Mapping[str, Any]) -> Any:
    """The referenced value, or None when the path leads nowhere (the empty-result guard then stops the chain)."""
    value: Any = scope.get(ref.root)
    for segment in ref.path:
        if isinstance(value, Mapping):
            value = value.get(segment)
        elif isinstance(value, list) and _INDEX.match(segment):
            index = int(segment)
            value = value[index] if -len(value) <= index < len(value) else None
        else:
            return None
    return value


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render(value: Any, scope: Mapping[str, Any]) -> Any:
    """The input with its references replaced: a whole-string reference by the value, others by its text."""
    if isinstance(value, Mapping):
        return {k: render(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, scope) for v in value]
    if not isinstance(value, str) or "{{" not in value:
        return value
    whole = _REF.fullmatch(value)
    if whole and "}}" not in whole.group(1):  # not ``{{ a }}{{ b }}``, which is two references in a text
        return lookup(parse(whole.group(1)), scope)
    return _REF.sub(lambda m: _as_text(lookup(parse(m.group(1)), scope)), value)


def referenced_values(value: Any, scope: Mapping[str, Any]) -> Iterator[tuple[str, Reference, Any]]:
    """Each reference of an input to an earlier step, with its place and the value it reads now."""
    for place, ref in references(value):
        if ref.root == "steps":
            yield place, ref, lookup(ref, scope)
