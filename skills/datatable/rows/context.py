"""What every row action shares: the table's fields (:class:`RowContext`), WHERE clauses from filters, row ids and
row scope, and JSON-ready records (spec §7.3, §7.4).

The handler wraps permissions, row scope and confirmation around the row actions: ``extra_conditions`` (AND-ed to
every statement's WHERE, e.g. the owner field) is checked here (:func:`scope_conditions`).

Decisions:

* Returned records are JSON-ready: id int, created_at / 日期 / 日期时间 / 时间 ISO 8601 text, 多选 a list, JSON
  the parsed value (raw text when the stored text is not valid JSON), 数字 a number when the number is exact in
  JSON (an int, or a float whose shortest form is the same decimal) and the decimal text otherwise (like
  fields/values.py's JSON encoding, without losing digits). Aggregate results are numbers (avg / sum as float when
  not whole).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from functools import cached_property
from typing import Any

import asyncpg

from ..fields.errors import FieldError
from ..fields.types import FieldDef
from ..fields.validator import RowValidator
from ..store.schema import TableInfo, load_fields, quote_ident
from .errors import RowsError
from .filters import Condition, FilterError, compile_conditions, parse_filters

__all__ = [
    "RowContext",
    "count_ids",
    "json_record",
    "json_records",
    "json_value",
    "load_context",
    "parse_row_filters",
    "parse_row_ids",
    "scope_conditions",
    "status_count",
    "target_conditions",
    "where_clause",
]


@dataclass(frozen=True)
class RowContext:
    table: TableInfo
    fields: dict[str, FieldDef]
    validator: RowValidator

    @property
    def names(self) -> list[str]:
        return list(self.fields)

    @property
    def arrays(self) -> frozenset[str]:
        return frozenset(t for t, f in self.fields.items() if f.uidt == "多选")

    @cached_property
    def required(self) -> tuple[str, ...]:
        """The required fields, in the table's order."""
        return tuple(t for t, f in self.fields.items() if f.required)

    @cached_property
    def json_fields(self) -> frozenset[str]:
        return frozenset(t for t, f in self.fields.items() if f.uidt == "JSON")

    def select_list(self, columns: Sequence[str] | None = None, alias: str = "") -> str:
        names = ["id", "created_at", *(self.names if columns is None else columns)]
        return ", ".join(alias + quote_ident(n) for n in names)


async def load_context(conn: asyncpg.Connection, table: TableInfo) -> RowContext:
    """The table's fields: the ones read with the table in this transaction when it carries them, else loaded."""
    fields = list(table.fields) if table.fields is not None else await load_fields(conn, table.schema, table.id)
    return RowContext(table, {f.title: f for f in fields}, RowValidator(fields))


def _json_number(value: Decimal) -> Any:
    if not value.is_finite():
        return str(value)
    if value == value.to_integral_value():
        whole = int(value)
        return whole if abs(whole) < 2**53 else str(whole)
    number = float(value)
    return number if Decimal(repr(number)) == value.normalize() else str(value.normalize())


def json_value(value: Any, field: FieldDef | None = None) -> Any:
    if value is None:
        return None
    if isinstance(value, Decimal):
        return _json_number(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if field is not None and field.uidt == "JSON" and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, tuple):
        return list(value)
    return value


#: Value types :func:`json_value` returns unchanged (checked with ``type() in``, so subclasses such as asyncpg's
#: Point, a tuple, still go through it); a JSON field's text always does.
_PLAIN = frozenset({str, int, bool, float, list, type(None)})


def json_record(ctx: RowContext, row: Mapping[str, Any]) -> dict[str, Any]:
    json_fields = ctx.json_fields
    return {
        key: value if type(value) in _PLAIN and key not in json_fields else json_value(value, ctx.fields.get(key))
        for key, value in row.items()
    }


async def count_ids(conn: asyncpg.Connection, table: TableInfo, ids: Sequence[int]) -> int:
    """How many of the rows a write returned are found again (``verified_total``), read through the primary key."""
    if not ids:
        return 0
    return int(await conn.fetchval(f"SELECT count(*) FROM {table.qualified} WHERE id = ANY($1::bigint[])", ids))


def status_count(status: str) -> int:
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _convert_condition(ctx: RowContext, cond: Condition) -> Condition:
    op, field, value = cond.op, cond.field, cond.value
    if op in ("is_null", "not_null"):
        return cond
    convert = ctx.validator.convert
    try:
        if field in ctx.arrays:
            return Condition(field, op, _option_set(ctx, field, op, value))
        if op == "contains":
            return cond  # compared as text (ILIKE) whatever the type
        if op in ("in", "between"):
            converted = [convert(field, v) for v in value]
            if op == "between" and _is_reversed(*converted):
                raise RowsError(
                    f"filters: between [{value[0]}, {value[1]}] on {field} is empty (the first bound is the later "
                    "one); write the lower bound first",
                    need_param="filters",
                )
            return Condition(field, op, converted)
        return Condition(field, op, convert(field, value))
    except FieldError as exc:
        raise RowsError(f"filters: {exc}", need_param="filters") from None


def _is_reversed(low: Any, high: Any) -> bool:
    """Whether converted between bounds of a number, date, datetime or time field are in the wrong order (texts
    are left alone: their order is the database collation's)."""
    if type(low) is not type(high) or not isinstance(low, int | Decimal | date | time) or isinstance(low, bool):
        return False
    try:
        return bool(low > high)
    except TypeError:  # a naive and an aware time
        return False


def _option_set(ctx: RowContext, field: str, op: str, value: Any) -> list[str]:
    """A 多选 filter value as the field's converter writes it: known options, de-duplicated, in the options' order.

    eq / ne compare the whole stored set, so their value is converted exactly like a write (an option, a list, or a
    text such as "红,绿"); the stored array has the same canonical order, so ``=`` compares the sets regardless of
    the order they were given in. contains / in take an option or a list of options, each one an option."""
    whole = op in ("eq", "ne") or isinstance(value, list | tuple)
    items = ctx.validator.convert(field, value if whole else [value])
    if items is None:
        raise FieldError(f"{field}: give at least one option")
    return list(items)


def parse_row_filters(ctx: RowContext, raw: Any, notes: list[str] | None) -> list[Condition]:
    """The conditions; what parse_filters normalized (e.g. a field-map shape) is appended to ``notes``."""
    try:
        conditions, found = parse_filters(raw, ctx.names, array_fields=ctx.arrays)
    except FilterError as exc:
        raise RowsError(str(exc), need_param="filters") from None
    if notes is not None:
        notes.extend(found)
    return list(conditions)


def where_clause(
    ctx: RowContext, conditions: Sequence[Condition], start: int = 1, column_prefix: str = ""
) -> tuple[str, list[Any]]:
    """``" WHERE …"`` (or "") and its parameters numbered from ``start``."""
    converted = [_convert_condition(ctx, c) for c in conditions]
    try:
        sql, params = compile_conditions(
            converted, lambda n: column_prefix + quote_ident(n), start, array_fields=ctx.arrays
        )
    except FilterError as exc:
        raise RowsError(str(exc), need_param="filters") from None
    return (f" WHERE {sql}" if sql else ""), params


def scope_conditions(ctx: RowContext, extra: Sequence[Condition]) -> list[Condition]:
    for cond in extra:
        if cond.field not in ctx.fields and cond.field not in ("id", "created_at"):
            raise RowsError(
                f"row scope refers to field {cond.field!r}, which table {ctx.table.title!r} does not have; check the "
                "table's owner-field setting",
                error_type="config",
                non_retriable=True,
            )
    return list(extra)


def parse_row_ids(ctx: RowContext, raw: Any) -> list[int]:
    items = raw if isinstance(raw, list | tuple) else [raw]
    ids: list[int] = []
    for item in items:
        try:
            value = ctx.validator.convert("id", item)
        except FieldError:
            value = None
        if value is None:
            raise RowsError(f"row id {item!r} is not a row id (a whole number from query)", need_param="row_ids")
        ids.append(value)
    return ids


def target_conditions(
    ctx: RowContext, row_ids: Any, filters: Any, extra: Sequence[Condition], action: str, notes: list[str] | None
) -> list[Condition]:
    conditions: list[Condition] = []
    if row_ids is not None and row_ids != [] and row_ids != "":
        conditions.append(Condition("id", "in", parse_row_ids(ctx, row_ids)))
    conditions.extend(parse_row_filters(ctx, filters, notes))
    if not conditions:
        raise RowsError(
            f"{action} needs row_ids or filters; empty ones are refused so a whole table is never {action}d by mistake",
            need_param="filters",
        )
    return [*conditions, *scope_conditions(ctx, extra)]


def json_records(ctx: RowContext, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """:func:`json_record` of many rows read as sequences whose leading columns are ``names`` (same values): the
    per-column decisions (JSON field or not) are taken once, and Decimal / date-time values converted directly."""
    fields = ctx.fields
    json_fields = ctx.json_fields
    columns = [(i, name, name in json_fields, fields.get(name)) for i, name in enumerate(names)]
    out: list[dict[str, Any]] = []
    for row in rows:
        record: dict[str, Any] = {}
        for i, name, is_json, field in columns:
            value = row[i]
            kind = type(value)
            if kind in _PLAIN and not is_json:
                record[name] = value
            elif kind is Decimal:
                record[name] = _json_number(value)
            elif kind is datetime or kind is date:
                record[name] = value.isoformat()
            else:
                record[name] = json_value(value, field)
        out.append(record)
    return out
