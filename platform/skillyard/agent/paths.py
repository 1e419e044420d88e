"""Dotted paths into JSON values, as the contract writes them (§5.1, §6, §9).

* ``a.b`` — nested keys; ``a.0.id`` — a list index written as a segment (``evidence.tag_list.0.id``);
* ``lines[].goodsCode`` — every item of the list ``lines`` (reading gives the list of values; writing fills the
  items by index).

Reading never raises: :func:`get_path` says whether the path exists, so ``EXISTS`` can tell a ``null`` value from a
missing one (§6.1).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

MISSING: Any = object()


@functools.lru_cache(maxsize=1024)
def _split(path: str) -> tuple[str, ...]:
    parts: list[str] = []
    for segment in path.split("."):
        if segment.endswith("[]"):
            if segment[:-2]:
                parts.append(segment[:-2])
            parts.append("[]")
        elif segment:
            parts.append(segment)
    return tuple(parts)


def split(path: str) -> list[str]:
    """``"lines[].x"`` → ``["lines", "[]", "x"]``; ``"a.0.b"`` → ``["a", "0", "b"]`` (parsed once per path)."""
    return list(_split(path))


def _step(value: Any, key: str) -> Any:
    if type(value) is dict or isinstance(value, Mapping):
        return value.get(key, MISSING)
    if isinstance(value, list) and (key.isdigit() or (key.startswith("-") and key[1:].isdigit())):
        index = int(key)
        return value[index] if -len(value) <= index < len(value) else MISSING
    return MISSING


def _get(value: Any, parts: Sequence[str]) -> Any:
    for position, key in enumerate(parts):
        if type(value) is dict and key != "[]":  # the usual step, as _step does it
            value = value.get(key, MISSING)
            if value is MISSING:
                return MISSING
            continue
        if key == "[]":
            if not isinstance(value, list):
                return MISSING
            rest = parts[position + 1 :]
            found = [_get(item, rest) for item in value]
            return [item for item in found if item is not MISSING]
        value = _step(value, key)
        if value is MISSING:
            return MISSING
    return value


def get_path(value: Any, path: str | None) -> tuple[bool, Any]:
    """``(True, value)`` when ``path`` exists in ``value`` (an empty path: the value itself), else ``(False, None)``."""
    if not path:
        return True, value
    parts = _split(path)
    found = value
    for key in parts:  # the usual walk through nested dicts, in place
        if type(found) is not dict or key == "[]":
            found = _get(value, parts)  # a list, a Mapping or a template on the way: the general walk
            break
        found = found.get(key, MISSING)
        if found is MISSING:
            break
    return (False, None) if found is MISSING else (True, found)


def has_value(value: Any) -> bool:
    """A usable argument value: not None, not an empty string, not an empty list or object."""
    kind = type(value)
    if kind is str or kind is dict or kind is list:  # the usual JSON values: empty means falsy
        return bool(value)
    if kind is int or kind is float or kind is bool:
        return True
    return not (value is None or value == "" or value == [] or value == {})


def set_path(target: dict[str, Any], path: str, value: Any) -> None:
    """Set ``path`` in ``target``, creating objects on the way (``[]`` paths are set item by item by the caller)."""
    parts = split(path)
    if "[]" in parts:
        raise ValueError(f"set_path cannot write the array template {path!r} as a whole; fill it item by item")
    node: Any = target
    for key in parts[:-1]:
        nxt = node.get(key) if isinstance(node, dict) else None
        if not isinstance(nxt, dict):
            nxt = {}
            node[key] = nxt
        node = nxt
    node[parts[-1]] = value
