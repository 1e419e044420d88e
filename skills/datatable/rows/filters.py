"""Filters of the datatable skill (spec §7.4): the ``filters`` parameter → conditions → SQL. Pure Python, no database.

Filters are an array of ``{field, op, value}`` joined with AND. Anything that cannot be read is a
:class:`FilterError`, never dropped: a dropped condition widens the result, and on update_by / delete_by a widened
result is data loss. The tolerated shapes (a field map ``{"部门": "研发"}``, a single condition object, a JSON text,
symbolic operators, ``eq null``) are converted and reported as action notes.

Values stay raw here (only their shape is checked); the caller converts them with the field's type before
:func:`compile_conditions` turns the conditions into SQL with asyncpg's ``$n`` parameters.

Sort, paging, metrics and grouping are read by query_options.py with the same helpers (:func:`field_name`,
:func:`reject_unresolved`) and the same :class:`FilterError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, time
from decimal import Decimal
from typing import Any

from ..fields.types import SYSTEM_COLUMNS

__all__ = [
    "OPS",
    "Condition",
    "FilterError",
    "compile_conditions",
    "field_name",
    "parse_filters",
    "reject_unresolved",
    "short",
]


class FilterError(ValueError):
    """Filters, sort, paging, metrics or grouping could not be read; the message says how to write them."""


OPS: frozenset[str] = frozenset(
    {"eq", "ne", "gt", "gte", "lt", "lte", "contains", "in", "between", "is_null", "not_null"}
)

#: Operators written another way → the canonical op (reported as an action note).
_OP_ALIASES = {
    "=": "eq",
    "==": "eq",
    "!=": "ne",
    "<>": "ne",
    ">": "gt",
    ">=": "gte",
    "<": "lt",
    "<=": "lte",
    "is null": "is_null",
    "isnull": "is_null",
    "is not null": "not_null",
    "not null": "not_null",
    "notnull": "not_null",
    "is_not_null": "not_null",
}
_NO_VALUE = frozenset({"is_null", "not_null"})
_COMPARE = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_ITEM_KEYS = frozenset({"field", "op", "value"})
_SCALARS = (str, int, float, Decimal, date, time)  # bool is an int
_EXAMPLE = (
    '[{"field": "部门", "op": "eq", "value": "研发"}, {"field": "薪资", "op": "between", "value": [8000, 20000]}]'
)
#: An unfilled template placeholder: ``{name}`` or ``{{ name }}`` whose content is a name — a letter (any script) or
#: ``_`` first, then word characters, dots or hyphens, spaces allowed around it — as templates write them
#: (``{部门}``, ``{{ dept }}``, ``{step.output}``). Braces around anything else are a value, not a reference: JSON text
#: (``{"a": 1}``), ``{}`` and array literals (``{1,2}``) may be legitimate filter values.
_PLACEHOLDER = re.compile(r"\{\{?\s*[^\W\d][\w.\-]*\s*\}\}?")


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: Any = None


# --------------------------------------------------------------------------------------------------------------------
# helpers


def _unresolved(value: Any) -> str | None:
    """The first text inside ``value`` that still holds an unresolved reference ({xxx} or $steps.), else None."""
    if isinstance(value, str):
        return value if "$steps." in value or _PLACEHOLDER.search(value) else None
    if isinstance(value, list | tuple):
        for item in value:
            found = _unresolved(item)
            if found is not None:
                return found
    elif isinstance(value, Mapping):
        for key, item in value.items():
            found = _unresolved(key) or _unresolved(item)
            if found is not None:
                return found
    return None


def reject_unresolved(value: Any, where: str) -> None:
    found = _unresolved(value)
    if found is not None:
        raise FilterError(
            f"{where} holds an unresolved reference {found!r} ({{xxx}} or $steps.…); the value was never filled in — "
            "pass the actual value (check the step that should have produced it)"
        )


def field_name(raw: Any, known: Collection[str], where: str) -> str:
    reject_unresolved(raw, where)
    if not isinstance(raw, str) or not raw.strip():
        raise FilterError(f"{where}: the field must be a field name (text), got {raw!r}")
    name = raw.strip()
    if name in known or name in SYSTEM_COLUMNS:
        return name
    shown = sorted(known)
    listed = ", ".join(shown[:40]) + (f", … ({len(shown)} in all)" if len(shown) > 40 else "")
    raise FilterError(f"{where}: unknown field {name!r}; the table's fields are {listed} (and id, created_at)")


def _is_scalar(value: Any) -> bool:
    return isinstance(value, _SCALARS)


def short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:200] + "…"


# --------------------------------------------------------------------------------------------------------------------
# filters


def parse_filters(
    raw: Any, known_fields: Collection[str], *, array_fields: Collection[str] = ()
) -> tuple[list[Condition], list[str]]:
    """(conditions, action notes). ``raw`` is the ``filters`` parameter; empty/None means no conditions.

    Accepted: the array of ``{field, op, value}`` (§7.4). Tolerated and reported in the notes: a JSON text of it, a
    single condition object, a field map ``{"部门": "研发"}`` (eq conditions; a list value → in; null → is_null),
    symbolic ops (``>=``), a missing op (eq), eq/ne with null or empty text (is_null / not_null). eq / ne on a field
    of ``array_fields`` (多选) also take an array of options — the whole set, as a write to the field takes it.
    Everything else — unknown fields, items that are not objects, unknown keys or ops, bad value shapes, unresolved
    references — raises :class:`FilterError`.
    """
    known = frozenset(known_fields)
    arrays = frozenset(array_fields)
    notes: list[str] = []
    if raw is None or raw == "" or raw == [] or raw == {}:
        return [], notes
    if isinstance(raw, str):
        reject_unresolved(raw, "filters")
        try:
            raw = json.loads(raw)
        except ValueError:
            raise FilterError(f"filters must be an array of {{field, op, value}} objects, e.g. {_EXAMPLE}") from None
        notes.append("filters given as a JSON text; parsed")
        if raw is None or raw == [] or raw == {}:
            return [], notes
    if isinstance(raw, Mapping):
        if "field" in raw and set(raw) <= _ITEM_KEYS and "field" not in known:
            notes.append("filters given as a single condition object; read as a one-item array")
            raw = [raw]
        else:
            return _from_field_map(raw, known, notes), notes
    if not isinstance(raw, list | tuple):
        raise FilterError(f"filters must be an array of {{field, op, value}} objects, e.g. {_EXAMPLE}")
    conditions = [_condition(item, i, known, arrays, notes) for i, item in enumerate(raw)]
    return conditions, notes


def _from_field_map(raw: Mapping[Any, Any], known: frozenset[str], notes: list[str]) -> list[Condition]:
    conditions: list[Condition] = []
    for key, value in raw.items():
        if isinstance(key, str) and key.strip().lower() in ("or", "$or", "any") and key.strip() not in known:
            raise FilterError("filters are joined with AND only; for OR use sql_query")
        field = field_name(key, known, f"filters[{key!r}]")
        reject_unresolved(value, f"filters[{key!r}]")
        if value is None or (isinstance(value, str) and not value.strip()):
            conditions.append(Condition(field, "is_null", None))
        elif isinstance(value, list | tuple):
            conditions.append(Condition(field, "in", _in_values(value, f"filters[{key!r}]")))
        elif _is_scalar(value):
            conditions.append(Condition(field, "eq", value))
        else:
            raise FilterError(f"filters[{key!r}]: cannot read {short(value)} as a value; write filters as {_EXAMPLE}")
    notes.append(
        f"filters given as a field map {short(dict(raw))}; read as "
        + " AND ".join(f"{c.field} {c.op}" for c in conditions)
        + " conditions — write filters as an array of {field, op, value} next time"
    )
    return conditions


def _condition(item: Any, index: int, known: frozenset[str], arrays: frozenset[str], notes: list[str]) -> Condition:
    where = f"filters[{index}]"
    if not isinstance(item, Mapping):
        raise FilterError(
            f"{where} is {short(item)}, not a {{field, op, value}} object; every item must be one, e.g. {_EXAMPLE}"
        )
    extra = sorted(str(k) for k in item if k not in _ITEM_KEYS)
    if extra:
        raise FilterError(
            f"{where} has unknown key(s) {', '.join(extra)}; an item has only field, op, value "
            "(items are joined with AND; for OR use sql_query)"
        )
    if "field" not in item:
        raise FilterError(f"{where} has no field; write {{field, op, value}}")
    field = field_name(item["field"], known, where)
    reject_unresolved(item.get("value"), where)
    op_raw = item.get("op")
    if op_raw is None or op_raw == "":
        op = "eq"
        notes.append(f"{where} ({field}) has no op; read as eq")
    elif not isinstance(op_raw, str):
        raise FilterError(f"{where}: op must be one of {', '.join(sorted(OPS))}, got {op_raw!r}")
    else:
        op = op_raw.strip().lower()
        if op in _OP_ALIASES:
            notes.append(f"{where} op {op_raw!r} read as {_OP_ALIASES[op]}")
            op = _OP_ALIASES[op]
        elif op not in OPS:
            raise FilterError(
                f"{where}: unknown op {op_raw!r}; use one of {', '.join(sorted(OPS))} (AND only; OR via sql_query)"
            )
    has_value = "value" in item
    value = item.get("value")

    if op in _NO_VALUE:
        if value is not None and value is not True and value != "":
            other = "not_null" if op == "is_null" else "is_null"
            raise FilterError(f"{where}: {op} takes no value (got {short(value)}); omit value, or use {other}")
        return Condition(field, op, None)
    if not has_value:
        raise FilterError(f'{where}: {op} needs a value, e.g. {{"field": {field!r}, "op": {op!r}, "value": …}}')
    if op in ("eq", "ne") and (value is None or (isinstance(value, str) and not value.strip())):
        new = "is_null" if op == "eq" else "not_null"
        notes.append(f"{where} {field} {op} {short(value)} read as {new} (empty values are stored as NULL)")
        return Condition(field, new, None)
    if op == "in":
        return Condition(field, op, _in_values(value, where))
    if op == "between":
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise FilterError(f"{where}: between needs a two-item array [low, high], got {short(value)}")
        low, high = value
        if not (_is_scalar(low) and _is_scalar(high)) or isinstance(low, bool) or isinstance(high, bool):
            raise FilterError(f"{where}: between needs two values [low, high], got {short(value)}")
        if (isinstance(low, str) and not low.strip()) or (isinstance(high, str) and not high.strip()):
            raise FilterError(f"{where}: between has an empty bound; give both [low, high]")
        if _is_number(low) and _is_number(high) and low > high:
            raise FilterError(f"{where}: between [{low}, {high}] is empty; write the lower bound first")
        return Condition(field, op, [low, high])
    if op == "contains":
        if isinstance(value, list | tuple):  # a 多选 field: contains all of these options
            return Condition(field, op, _options(value, where, op))
        if not _is_scalar(value) or isinstance(value, bool) or (isinstance(value, str) and not value.strip()):
            raise FilterError(f"{where}: contains needs a non-empty text to look for, got {short(value)}")
        return Condition(field, op, value)
    # eq ne gt gte lt lte
    if op in ("eq", "ne") and field in arrays and isinstance(value, list | tuple):  # a 多选 field: exactly these
        return Condition(field, op, _options(value, where, op))
    if isinstance(value, list | tuple):
        hint = " use in for a list of values" if op in ("eq", "ne") else " use between for a range"
        raise FilterError(f"{where}: {op} takes one value, got an array;{hint}")
    if value is None:
        raise FilterError(f"{where}: {op} needs a value to compare with, got null")
    if not _is_scalar(value):
        raise FilterError(f"{where}: {op} takes one value (text, number, date), got {short(value)}")
    if op not in ("eq", "ne") and (isinstance(value, bool) or (isinstance(value, str) and not value.strip())):
        raise FilterError(f"{where}: {op} needs a value to compare with, got {short(value)}")
    return Condition(field, op, value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _options(value: Sequence[Any], where: str, op: str) -> list[str]:
    """An array of 多选 option texts (contains, eq, ne): at least one, none empty — an empty array or a blank or
    nested item would otherwise match nothing or everything; the field's converter then checks the texts are
    configured options."""
    if not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise FilterError(f"{where}: {op} takes a text, or a non-empty array of option texts, got {short(value)}")
    return list(value)


def _in_values(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise FilterError(f'{where}: in needs an array of values, e.g. ["研发", "销售"], got {short(value)}')
    if not value:
        raise FilterError(f"{where}: in needs at least one value (an empty list matches nothing)")
    for item in value:
        if item is None or not _is_scalar(item):
            raise FilterError(
                f"{where}: in takes plain values (text, numbers), got {short(item)}; use is_null for empty"
            )
    return list(value)


def _like_pattern(value: Any) -> str:
    text = str(value)
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def compile_conditions(
    conditions: Sequence[Condition],
    quote: Callable[[str], str],
    start: int = 1,
    *,
    array_fields: Collection[str] = (),
) -> tuple[str, list[Any]]:
    """SQL text ``col op $n AND …`` (no leading WHERE; "" when there are no conditions) and its parameters.

    eq ``=``; ne ``IS DISTINCT FROM`` (rows where the field is empty count as "not equal"); contains → ``ILIKE`` on
    the column cast to text with %, _ and \\ escaped; in → ``= ANY($n)``; between → ``BETWEEN $n AND $n+1``;
    is_null / not_null take no parameter. Fields in ``array_fields`` (多选, ``text[]``): contains → ``@>`` (has all
    the given options), in → ``&&`` (has any of them), eq / ne compare the whole set; order comparisons are refused.
    """
    parts: list[str] = []
    params: list[Any] = []
    arrays = frozenset(array_fields)
    n = start
    for cond in conditions:
        column = quote(cond.field)
        op, value = cond.op, cond.value
        if op == "is_null":
            parts.append(f"{column} IS NULL")
            continue
        if op == "not_null":
            parts.append(f"{column} IS NOT NULL")
            continue
        if cond.field in arrays:
            if op in ("contains", "in", "eq", "ne"):
                items = _flatten(value)
                sql = {"contains": "@>", "in": "&&", "eq": "=", "ne": "IS DISTINCT FROM"}[op]
                parts.append(f"{column} {sql} ${n}")
                params.append(items)
                n += 1
                continue
            raise FilterError(
                f"{cond.field} is a 多选 field; use contains (has all of), in (has any of), eq, ne, is_null, not_null"
            )
        if op in _COMPARE:
            parts.append(f"{column} {_COMPARE[op]} ${n}")
            params.append(value)
            n += 1
        elif op == "ne":
            parts.append(f"{column} IS DISTINCT FROM ${n}")
            params.append(value)
            n += 1
        elif op == "contains":
            if isinstance(value, list | tuple):
                raise FilterError(f"{cond.field}: contains takes one text for a field that is not 多选")
            parts.append(f"CAST({column} AS text) ILIKE ${n}")
            params.append(_like_pattern(value))
            n += 1
        elif op == "in":
            parts.append(f"{column} = ANY(${n})")
            params.append(list(value))
            n += 1
        elif op == "between":
            low, high = value
            parts.append(f"{column} BETWEEN ${n} AND ${n + 1}")
            params.extend((low, high))
            n += 2
        else:
            raise FilterError(f"unknown op {op!r}; use one of {', '.join(sorted(OPS))}")
    return " AND ".join(parts), params


def _flatten(value: Any) -> list[Any]:
    if not isinstance(value, list | tuple):
        return [value]
    items: list[Any] = []
    for item in value:
        if isinstance(item, list | tuple):
            items.extend(item)
        else:
            items.append(item)
    return items
