"""Sort, paging, metrics and grouping of the datatable skill (spec §7.4): query's and aggregate's other parameters.
Pure Python, no database.

Unreadable values are a :class:`~.filters.FilterError` whose message says how to write them; field names are checked
against the table's fields like the filters' (:func:`~.filters.field_name`). Limits are lowered to the cap, never
refused for being too large (query: default 100, cap 1,000; aggregate: default 1,000, cap 10,000).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from .filters import FilterError, field_name, reject_unresolved, short

__all__ = [
    "AGGREGATE_CAP",
    "AGGREGATE_DEFAULT",
    "METRIC_OPS",
    "QUERY_CAP",
    "QUERY_DEFAULT",
    "Metric",
    "clamp_limit",
    "parse_group_by",
    "parse_metrics",
    "parse_offset",
    "parse_sort",
]

METRIC_OPS: frozenset[str] = frozenset({"sum", "avg", "max", "min", "count"})
QUERY_DEFAULT, QUERY_CAP = 100, 1000
AGGREGATE_DEFAULT, AGGREGATE_CAP = 1000, 10000


@dataclass(frozen=True)
class Metric:
    op: str
    field: str | None
    alias: str


# --------------------------------------------------------------------------------------------------------------------
# sort, paging


def parse_sort(raw: Any, known_fields: Collection[str]) -> tuple[str, bool]:
    """(field, descending). None/"" → ("id", True). ``"-薪资"`` descending, ``"薪资"`` or ``"+薪资"`` ascending;
    ``"薪资 desc"``, ``["-薪资"]`` and ``{"field": "薪资", "direction": "desc"}`` are read too. One field only."""
    known = frozenset(known_fields)
    if raw is None or raw == "" or raw == []:
        return "id", True
    reject_unresolved(raw, "sort")
    if isinstance(raw, list | tuple):
        if len(raw) != 1:
            raise FilterError('sort takes a single field, e.g. "-薪资" (descending) or "薪资" (ascending)')
        raw = raw[0]
    if isinstance(raw, Mapping):
        unknown = sorted(str(k) for k in raw if k not in ("field", "direction", "order", "desc"))
        if unknown or "field" not in raw:
            raise FilterError('sort is a field name with an optional "-" for descending, e.g. "-薪资"')
        direction = raw.get("direction", raw.get("order"))
        if "desc" in raw:
            descending = raw["desc"] is True
        elif direction is None:
            descending = False
        elif isinstance(direction, str) and direction.strip().lower() in ("asc", "desc"):
            descending = direction.strip().lower() == "desc"
        else:
            raise FilterError(f"sort direction must be asc or desc, got {direction!r}")
        return field_name(raw["field"], known, "sort"), descending
    if not isinstance(raw, str):
        raise FilterError(f'sort is a field name with an optional "-" for descending, e.g. "-薪资"; got {raw!r}')
    text = raw.strip()
    descending = False
    head, _, tail = text.rpartition(" ")
    if head and tail.lower() in ("asc", "desc"):
        text, descending = head.strip(), tail.lower() == "desc"
    elif text[:1] in ("-", "+"):
        descending, text = text[0] == "-", text[1:].strip()
    if "," in text or "，" in text:
        raise FilterError("sort takes a single field; for several sort keys use sql_query")
    return field_name(text, known, "sort"), descending


def _whole(raw: Any, what: str) -> int:
    if isinstance(raw, bool):
        raise FilterError(f"{what} must be a whole number, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        text = raw.strip()
        if text.removeprefix("-").isdigit() and text.isascii():
            return int(text)
    raise FilterError(f"{what} must be a whole number, got {raw!r}")


def clamp_limit(raw: Any, *, default: int, cap: int) -> int:
    """The row limit: ``default`` when not given, at most ``cap`` (larger values are lowered to the cap).

    query: default 100, cap 1,000; aggregate: default 1,000, cap 10,000 (QUERY_* / AGGREGATE_* constants)."""
    if raw is None or raw == "":
        return default
    limit = _whole(raw, "limit")
    if limit < 1:
        raise FilterError(f"limit must be at least 1 (at most {cap}), got {limit}")
    return min(limit, cap)


def parse_offset(raw: Any) -> int:
    """The number of rows to skip: 0 when not given; never negative."""
    if raw is None or raw == "":
        return 0
    offset = _whole(raw, "offset")
    if offset < 0:
        raise FilterError(f"offset must be 0 or more, got {offset}")
    return offset


# --------------------------------------------------------------------------------------------------------------------
# aggregate

_METRIC_KEYS = frozenset({"field", "op", "alias"})
_METRIC_EXAMPLE = '[{"field": "租金", "op": "sum", "alias": "总租金"}, {"op": "count"}]'


def parse_metrics(raw: Any, known_fields: Collection[str]) -> list[Metric]:
    """``[{field, op, alias?}]`` with op ∈ sum avg max min count (count may omit field). The alias defaults to
    ``<field>_<op>`` (``count`` for a bare count); aliases must be distinct. A single object is read as a list."""
    known = frozenset(known_fields)
    if isinstance(raw, str):
        reject_unresolved(raw, "metrics")
        try:
            raw = json.loads(raw)
        except ValueError:
            raise FilterError(f"metrics must be an array like {_METRIC_EXAMPLE}") from None
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list | tuple) or not raw:
        raise FilterError(f"metrics must be a non-empty array like {_METRIC_EXAMPLE}")
    metrics: list[Metric] = []
    aliases: set[str] = set()
    for index, item in enumerate(raw):
        where = f"metrics[{index}]"
        if not isinstance(item, Mapping):
            raise FilterError(f"{where} is {short(item)}, not an object; write metrics like {_METRIC_EXAMPLE}")
        extra = sorted(str(k) for k in item if k not in _METRIC_KEYS)
        if extra:
            raise FilterError(f"{where} has unknown key(s) {', '.join(extra)}; use field, op, alias")
        reject_unresolved(dict(item), where)
        op = item.get("op")
        op = op.strip().lower() if isinstance(op, str) else op
        if op not in METRIC_OPS:
            raise FilterError(f"{where}: op must be one of {', '.join(sorted(METRIC_OPS))}, got {item.get('op')!r}")
        field_raw = item.get("field")
        if field_raw is None or field_raw == "" or (op == "count" and field_raw == "*"):
            if op != "count":
                raise FilterError(f'{where}: {op} needs a field, e.g. {{"field": "租金", "op": "{op}"}}')
            field = None
        else:
            field = field_name(field_raw, known, where)
        alias_raw = item.get("alias")
        if alias_raw is None or alias_raw == "":
            alias = f"{field}_{op}" if field else "count"
        elif isinstance(alias_raw, str) and alias_raw.strip():
            alias = alias_raw.strip()
        else:
            raise FilterError(f"{where}: alias must be a text, got {alias_raw!r}")
        if len(alias) > 50 or any(c < " " or c == '"' for c in alias):
            raise FilterError(
                f"{where}: alias {alias!r} must be at most 50 characters, without quotes or control chars"
            )
        if alias in aliases:
            raise FilterError(f"{where}: alias {alias!r} is used twice; give each metric its own alias")
        aliases.add(alias)
        metrics.append(Metric(op, field, alias))
    return metrics


def parse_group_by(raw: Any, known_fields: Collection[str]) -> list[str]:
    """Field names to group by: a name, a comma-separated text, or an array of names ([] when not given)."""
    known = frozenset(known_fields)
    if raw is None or raw == "" or raw == []:
        return []
    reject_unresolved(raw, "group_by")
    if isinstance(raw, str):
        items: list[Any] = raw.replace("，", ",").split(",")
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        raise FilterError(f"group_by is a field name or an array of field names, got {short(raw)}")
    fields: list[str] = []
    for index, item in enumerate(items):
        name = field_name(item, known, f"group_by[{index}]")
        if name not in fields:
            fields.append(name)
    return fields
