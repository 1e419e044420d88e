"""What makes an input schema unsafe to validate against, found once when the skill is read.

A dropped-in skill's schema must not be able to stop the host: a schema nested thousands deep (every recursive
reader dies with RecursionError), a ``$ref`` that reads a file or fetches a URL, one that points nowhere, or a loop
of references that applies to the same value forever. Each is that skill's load error, so listing, validating
and running every other skill of the root go on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

#: Keywords whose subschemas apply to the same value as the schema holding them (a loop through them never ends).
_SAME_VALUE_LISTS = ("allOf", "anyOf", "oneOf")
_SAME_VALUE_ONE = ("not", "if", "then", "else")


def _schemas(root: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object of the schema with its JSON pointer (``#``, ``#/properties/a`` …)."""
    stack: list[tuple[str, Any]] = [("#", root)]
    while stack:
        pointer, node = stack.pop()
        if isinstance(node, dict):
            yield pointer, node
            stack.extend((f"{pointer}/{_escape(str(k))}", v) for k, v in node.items() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((f"{pointer}/{i}", v) for i, v in enumerate(node) if isinstance(v, (dict, list)))


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _resolve(root: dict[str, Any], anchors: dict[str, str], ref: str) -> str | None:
    """The pointer a local ``$ref`` names, or None when it names nothing in this schema."""
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        return anchors.get(fragment)
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in fragment.split("/")[1:]]
    node: Any = root
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return "#" + "".join(f"/{_escape(t)}" for t in tokens)


def reference_problem(schema: dict[str, Any]) -> str | None:
    """The problem with the schema's references: one leading outside it (a file, a URL, another document), one
    that names nothing, or a loop that applies to the same value forever; None when every reference is local."""
    nodes = dict(_schemas(schema))
    anchors = {node["$anchor"]: pointer for pointer, node in nodes.items() if isinstance(node.get("$anchor"), str)}
    same_value: dict[str, list[str]] = {}
    for pointer, node in nodes.items():
        edges = same_value.setdefault(pointer, [])
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#"):
                return (
                    f"$ref {ref!r} at {pointer} leads outside the schema (files, URLs and other documents are never "
                    "read); put the referenced schema under $defs and refer to it as '#/$defs/…'"
                )
            target = _resolve(schema, anchors, ref)
            if target is None:
                return f"$ref {ref!r} at {pointer} names nothing in this schema; fix the pointer"
            if target in nodes:  # else a boolean schema: nothing further applies
                edges.append(target)
        for key in _SAME_VALUE_LISTS:
            if isinstance(node.get(key), list):
                edges.extend(f"{pointer}/{key}/{i}" for i, sub in enumerate(node[key]) if isinstance(sub, dict))
        edges.extend(f"{pointer}/{key}" for key in _SAME_VALUE_ONE if isinstance(node.get(key), dict))
    loop = _find_loop(same_value)
    if loop:
        return (
            f"$ref loop {' → '.join(loop)}: these schemas apply to the same value without end; break the loop "
            "(a recursive schema must descend into properties or items)"
        )
    return None


def _find_loop(edges: dict[str, list[str]]) -> list[str] | None:
    """A cycle of the same-value graph as its pointers (the first found), iteratively."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if start in state:
            continue
        path = [start]
        pending = [iter(edges.get(start, ()))]
        state[start] = 1
        while pending:
            child = next(pending[-1], None)
            if child is None:
                state[path.pop()] = 2
                pending.pop()
                continue
            if state.get(child) == 1:
                return [*path[path.index(child) :], child]
            if child not in state:
                state[child] = 1
                path.append(child)
                pending.append(iter(edges.get(child, ())))
    return None
