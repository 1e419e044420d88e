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
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def build_summary(contract: ToolContract | None, args: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    """One "标签：值" line per argument leaf, in argument order."""
    lines = []
    for path, value in _leaves(args, ""):
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
