"""The "标签：值" argument summary of a write (§14.1 step 2): labels from the contract (else the path), sensitive
values masked, platform-injected arguments hidden. Used by the write gate and by builtin_node_approval."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..contract import ArgContract, SourceType, ToolContract
from ..expressions import Prefix

MASK = "***"
_INDEX = re.compile(r"\.\d+(?=\.|$)")


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(``lines.0.code``, value) for every leaf; a list of scalars stays one value."""
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and any(isinstance(item, Mapping) for item in value):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}.{index}")
    else:
        yield path, value


def template_of(path: str) -> str:
    """``lines.0.code`` → ``lines[].code`` (how the contract names an item field)."""
    return _INDEX.sub("[]", path).replace(".[]", "[]")


def _contract_arg(contract: ToolContract | None, path: str) -> ArgContract | None:
    if contract is None:
        return None
    return contract.args.get(path) or contract.args.get(template_of(path))


def _text(value: Any) -> str:
    # sort_keys: objects inside a leaf (a list of lists of objects) must read the same after a JSONB round trip
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _order(contract: ToolContract | None, path: str) -> tuple[int, str]:
    """Contract order first (as the author listed the args), then the rest by path: the summary must not depend on
    the order of the arguments' keys, which JSONB storage does not keep (a CONFIRM compares summaries)."""
    position = {key: index for index, key in enumerate(contract.args)} if contract is not None else {}
    return position.get(path, position.get(template_of(path), len(position))), path


def build_summary(contract: ToolContract | None, args: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    """One "标签：值" line per argument leaf: the contract's args in their order, then the others by path."""
    lines = []
    for path, value in sorted(_leaves(args, ""), key=lambda leaf: _order(contract, leaf[0])):
        arg = _contract_arg(contract, path)
        platform = sources.get(path) == SourceType.PLATFORM.value or (
            arg is not None and arg.from_expr is not None and arg.from_expr.prefix is Prefix.PLATFORM
        )
        if platform:
            continue
        label = arg.label if arg is not None and arg.label else path
        shown = MASK if arg is not None and arg.sensitive else _text(value)
        lines.append(f"{label}：{shown}")
    return "\n".join(lines)
