"""Stage 2 (§13 ArgBinding, §5.2–§5.4): ``const`` and ``from`` override the model's values; never refuses.

* ``const`` → written, source ``CONTRACT``;
* ``from`` with a value → written, source of the prefix (§9); ``when: UNIQUE`` binds only a unique candidate;
* array templates (``lines[].x`` from ``…items[].y``) fill item by item, only the indexes the model left empty;
  ``evidence.*`` is never an array template (no binding).
"""

from __future__ import annotations

from typing import Any

from ..contract import ArgContract, When
from ..evaluate import resolve
from ..expressions import Expression, Prefix, parse_expression
from ..paths import get_path, has_value, set_path
from .base import ChainCall


def is_template(path: str) -> bool:
    return "[]" in path


def split_template(path: str) -> tuple[str, str]:
    """``lines[].goods.code`` → (``lines``, ``goods.code``): the list before the first ``[]`` and the item path."""
    head, _, rest = path.partition("[]")
    return head.rstrip("."), rest.lstrip(".")


def item_paths(args: dict[str, Any], path: str) -> list[str]:
    """The concrete paths of a template over the model's list (``lines.0.x``, ``lines.1.x``)."""
    head, rest = split_template(path)
    found, items = get_path(args, head)
    if not found or not isinstance(items, list):
        return []
    return [".".join(p for p in (head, str(i), rest) if p) for i in range(len(items))]


def _unique(expr: Expression, value: Any, ctx_values: tuple[bool, Any]) -> bool:
    """§5.4 UNIQUE: evidence.* needs a one-item list; others need the list before the first [] to have one item."""
    if expr.prefix is Prefix.EVIDENCE:
        return isinstance(value, list) and len(value) == 1
    head = expr.path.partition("[]")[0]
    if head != expr.path:
        found, items = ctx_values
        return found and isinstance(items, list) and len(items) == 1
    return not isinstance(value, list) or len(value) == 1


def put(target: dict[str, Any], path: str, value: Any) -> None:
    """Set a concrete path (``lines.0.x``: an existing list is indexed, never replaced); objects are created."""
    parts = path.split(".")
    node: Any = target
    for position, key in enumerate(parts[:-1]):
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            if not isinstance(node[int(key)], dict):
                node[int(key)] = {}
            node = node[int(key)]
            continue
        if not isinstance(node, dict):
            return
        if not isinstance(node.get(key), dict | list):
            set_path(node, ".".join(parts[position:]), value)
            return
        node = node[key]
    if isinstance(node, list) and parts[-1].isdigit() and int(parts[-1]) < len(node):
        node[int(parts[-1])] = value
    elif isinstance(node, dict):
        node[parts[-1]] = value


def _record(call: ChainCall, path: str, value: Any, source: str) -> None:
    put(call.args, path, value)
    call.sources[path] = source


def _bind_template(call: ChainCall, arg: ArgContract, expr: Expression) -> str | None:
    """Fill ``lines[].x`` from ``<prefix>.items[].y`` index by index, only where the model gave no value; the
    source type when at least one index was filled."""
    src_head, src_rest = split_template(expr.path)
    found, items, source = resolve(call.ctx, parse_expression(f"{expr.prefix.value}.{src_head}"))
    if not found or not isinstance(items, list) or not items:
        return None
    if arg.when is When.UNIQUE and len(items) != 1:
        return None
    head, rest = split_template(arg.path)
    found_list, mine = get_path(call.args, head)
    target = mine if found_list and isinstance(mine, list) else []
    filled = None
    for index, item in enumerate(items):
        has, value = get_path(item, src_rest)
        if not has or not has_value(value):
            continue
        while len(target) <= index:
            target.append({})
        if not isinstance(target[index], dict):
            continue
        at = ".".join(p for p in (head, str(index), rest) if p)
        if has_value(get_path(call.args, at)[1]):
            continue  # the model gave this index a value: keep it
        if filled is None and target is not mine:  # the model sent no list: it appears once an item is filled
            set_path(call.args, head, target)
        filled = source or "MODEL"
        _record(call, at, value, filled)
    return filled


def bind_arg(call: ChainCall, arg: ArgContract) -> None:
    if arg.has_const:
        paths = item_paths(call.args, arg.path) if is_template(arg.path) else [arg.path]
        for path in paths:
            _record(call, path, arg.const, "CONTRACT")
        if paths:
            call.bound.add(arg.path)
            call.sources[arg.path] = "CONTRACT"
        return
    expr = arg.from_expr
    if expr is None:
        return
    if is_template(arg.path) and "[]" in expr.path:
        filled = None if expr.prefix is Prefix.EVIDENCE else _bind_template(call, arg, expr)
        if filled is not None:
            call.bound.add(arg.path)
            call.sources[arg.path] = filled
        return
    found, value, source = resolve(call.ctx, expr)
    if not found or not has_value(value):
        return
    if arg.when is When.UNIQUE:
        head = expr.path.partition("[]")[0].rstrip(".")
        listed = resolve(call.ctx, parse_expression(f"{expr.prefix.value}.{head}"))[:2] if head else (False, None)
        if not _unique(expr, value, listed):
            return
    paths = item_paths(call.args, arg.path) if is_template(arg.path) else [arg.path]
    for path in paths:
        _record(call, path, value, source or "MODEL")
    if paths:
        call.bound.add(arg.path)
        call.sources[arg.path] = source or "MODEL"


def bind(call: ChainCall) -> None:
    for arg in call.plan.binds:  # the args with from/const, in contract order (the others bind nothing)
        bind_arg(call, arg)
