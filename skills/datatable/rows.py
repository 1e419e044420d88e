"""Row actions of the datatable skill: query, aggregate, insert, insert_batch, upsert, update, update_by, delete
(spec §7.3, §7.4, §7.5, §7.8).

Plain async functions over an asyncpg connection and a :class:`~.store.TableInfo`. The handler wraps permissions,
row scope and confirmation around them: ``extra_conditions`` (AND-ed to every statement's WHERE, e.g. the owner
field) and ``stamp`` (values forced on every written row, e.g. the owner) are its hooks.

Decisions:

* Every write runs inside ``conn.transaction()``: a real transaction that commits when the action succeeds, or a
  SAVEPOINT when the caller already opened one. Exceptions are classified (:func:`classify`) only after the
  ``async with`` block has rolled back, so the connection is usable afterwards (no 25P02).
* Batches (insert_batch, upsert) are validated row by row in Python first; the valid rows are written with one
  set-based statement (``INSERT … SELECT FROM unnest(per-column arrays)`` / ``MERGE … USING unnest(…)``) inside a
  savepoint. Only when that statement fails on a row-level error (SQLSTATE class 22 or 23) are the rows written one
  by one, each in its own savepoint, so one bad row cannot sink the batch.
* upsert matches on ``key_fields`` (equal values; a key field may not be empty, so this is ``IS NOT DISTINCT FROM``)
  and needs no unique constraint (§7.8.6). Rows of one batch with the same key are collapsed: the last one is
  written, the earlier ones are reported as failed.
* ``verified_total`` counts this operation's rows found again after the write (the returned ids, or for upsert the
  rows holding the batch's keys), never the whole table.
* Returned records are JSON-ready: id int, created_at / 日期 / 日期时间 / 时间 ISO 8601 text, 多选 a list, JSON
  the parsed value (raw text when the stored text is not valid JSON), 数字 a number when the number is exact in
  JSON (an int, or a float whose shortest form is the same decimal) and the decimal text otherwise (like
  fields.py's JSON encoding, without losing digits). Aggregate results are numbers (avg / sum as float when not
  whole).
* Unknown fields are dropped (§7.5) and reported: ``dropped`` in dict results, the ``.dropped`` attribute of the
  :class:`Record` returned by insert / update.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from functools import cached_property
from typing import Any

import asyncpg
from asyncpg.exceptions._base import DataError as _EncodeError

from .fields import FieldDef, FieldError, RowValidator
from .filters import (
    AGGREGATE_CAP,
    AGGREGATE_DEFAULT,
    QUERY_CAP,
    QUERY_DEFAULT,
    Condition,
    FilterError,
    clamp_limit,
    compile_conditions,
    parse_filters,
    parse_group_by,
    parse_metrics,
    parse_offset,
    parse_sort,
)
from .store import StoreError, TableInfo, load_fields, quote_ident

__all__ = [
    "BATCH_LIMIT",
    "MAX_ERRORS",
    "Record",
    "RowsError",
    "aggregate",
    "classify",
    "count_matching",
    "delete_rows",
    "fetch_rows",
    "insert",
    "insert_batch",
    "query",
    "update",
    "update_by",
    "upsert",
]

#: insert_batch / upsert take at most this many rows; more go through insert_from_file (§7.4).
BATCH_LIMIT = 100
#: Per-row errors reported in a batch result (``failed`` still counts them all).
MAX_ERRORS = 20
_ROW_LEVEL_CLASSES = ("22", "23")


class RowsError(StoreError):
    """A row action was refused or failed; ``error_type`` recoverable / config / transient, ``need_param`` the
    parameter to fix, ``non_retriable`` True when the same call cannot work for deployment reasons."""

    def __init__(
        self,
        message: str,
        *,
        error_type: str = "recoverable",
        non_retriable: bool = False,
        need_param: str | None = None,
        sqlstate: str | None = None,
    ) -> None:
        super().__init__(message, error_type=error_type, non_retriable=non_retriable, need_param=need_param)
        self.sqlstate = sqlstate


class Record(dict[str, Any]):
    """A written record (insert / update); ``dropped`` lists the unknown field names that were ignored."""

    dropped: list[str]

    def __init__(self, data: Mapping[str, Any], dropped: Sequence[str] = ()) -> None:
        super().__init__(data)
        self.dropped = list(dropped)


# --------------------------------------------------------------------------------------------------------------------
# Errors

_UNIQUE_DETAIL = re.compile(r"Key \((?P<cols>.*)\)=\((?P<vals>.*)\) already exists", re.S)
_NOT_NULL_COLUMN = re.compile(r'column "(?P<col>[^"]+)"')


def classify(exc: BaseException) -> RowsError:
    """A RowsError for any exception of a row action, by SQLSTATE (§7.8.4), never by class name or English text.

    23505 → recoverable naming the field and value; other 23xxx and 22xxx → recoverable (fix the value);
    42P01 / 42703 → recoverable (the table or a field changed: refresh list_columns); 40001 / 40P01 / 57014 / 08xxx /
    53xxx / 55P03 → transient (retry); 42501 → config; any other code → transient with the code. No SQLSTATE means
    the value never reached the database (asyncpg could not encode it) → recoverable.
    """
    if isinstance(exc, RowsError):
        return exc
    if isinstance(exc, StoreError):
        return RowsError(
            str(exc), error_type=exc.error_type, non_retriable=exc.non_retriable, need_param=exc.need_param
        )
    if isinstance(exc, FieldError | FilterError):
        return RowsError(str(exc))
    state = getattr(exc, "sqlstate", None) if isinstance(exc, asyncpg.PostgresError) else None
    message = getattr(exc, "message", None) or str(exc)
    if not state and isinstance(exc, asyncpg.InterfaceError) and not isinstance(exc, _EncodeError):
        return RowsError(
            f"the database connection failed ({type(exc).__name__}: {exc}); retry the same call",
            error_type="transient",
        )
    if not state:
        return RowsError(
            f"a value could not be sent to the database ({type(exc).__name__}: {exc}); check the value types "
            "against list_columns",
            need_param="data",
        )
    if state == "23505":
        detail = getattr(exc, "detail", None) or ""
        found = _UNIQUE_DETAIL.search(detail)
        if found:
            text = f"{found['cols']} must be unique and {found['vals']!r} is already used by another row"
        else:
            text = f"a unique field already holds this value ({message})"
        return RowsError(
            f"{text}; use another value, update the existing row, or upsert with key_fields",
            need_param="data",
            sqlstate=state,
        )
    if state == "23502":
        col = _NOT_NULL_COLUMN.search(message)
        name = col["col"] if col else "a field"
        return RowsError(f"{name} cannot be empty; give a value", need_param="data", sqlstate=state)
    if state.startswith(_ROW_LEVEL_CLASSES):
        return RowsError(
            f"the database refused a value ({message}); fix it to match the field's type (list_columns)",
            need_param="data",
            sqlstate=state,
        )
    if state in ("42P01", "42703"):
        return RowsError(
            f"the table or one of its fields no longer exists as given ({message}); refresh list_columns and retry "
            "with the current field names",
            sqlstate=state,
        )
    if state in ("40001", "40P01", "57014", "55P03") or state.startswith(("08", "53")):
        return RowsError(
            f"temporary database problem ({state}: {message}); retry the same call",
            error_type="transient",
            sqlstate=state,
        )
    if state == "42501":
        return RowsError(
            f"the database role lacks a permission ({message}); this is a deployment problem",
            error_type="config",
            non_retriable=True,
            sqlstate=state,
        )
    return RowsError(f"database error {state}: {message}", error_type="transient", sqlstate=state)


# --------------------------------------------------------------------------------------------------------------------
# Table context


@dataclass(frozen=True)
class _Ctx:
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
    def json_fields(self) -> frozenset[str]:
        return frozenset(t for t, f in self.fields.items() if f.uidt == "JSON")

    def select_list(self, columns: Sequence[str] | None = None, alias: str = "") -> str:
        names = ["id", "created_at", *(self.names if columns is None else columns)]
        return ", ".join(alias + quote_ident(n) for n in names)


async def _ctx(conn: asyncpg.Connection, table: TableInfo) -> _Ctx:
    """The table's fields: the ones read with the table in this transaction when it carries them, else loaded."""
    fields = list(table.fields) if table.fields is not None else await load_fields(conn, table.schema, table.id)
    return _Ctx(table, {f.title: f for f in fields}, RowValidator(fields))


def _json_number(value: Decimal) -> Any:
    if not value.is_finite():
        return str(value)
    if value == value.to_integral_value():
        whole = int(value)
        return whole if abs(whole) < 2**53 else str(whole)
    number = float(value)
    return number if Decimal(repr(number)) == value.normalize() else str(value.normalize())


def _out(value: Any, field: FieldDef | None = None) -> Any:
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


#: Value types :func:`_out` returns unchanged (checked with ``type() in``, so subclasses such as asyncpg's Point, a
#: tuple, still go through it); a JSON field's text always does.
_PLAIN = frozenset({str, int, bool, float, list, type(None)})


def _record(ctx: _Ctx, row: Mapping[str, Any]) -> dict[str, Any]:
    json_fields = ctx.json_fields
    return {
        key: value
        if type(value) in _PLAIN and key not in json_fields
        else _out(value, ctx.fields.get(key))
        for key, value in row.items()
    }


def _status_count(status: str) -> int:
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


# --------------------------------------------------------------------------------------------------------------------
# Conditions


def _convert_condition(ctx: _Ctx, cond: Condition) -> Condition:
    op, field, value = cond.op, cond.field, cond.value
    if op in ("is_null", "not_null"):
        return cond
    convert = ctx.validator.convert
    try:
        if field in ctx.arrays:
            items = convert(field, value if isinstance(value, list | tuple) else [value])
            if items is None:
                raise FieldError(f"{field}: give at least one option")
            return Condition(field, op, items)
        if op == "contains":
            return cond  # compared as text (ILIKE) whatever the type
        if op in ("in", "between"):
            return Condition(field, op, [convert(field, v) for v in value])
        return Condition(field, op, convert(field, value))
    except FieldError as exc:
        raise RowsError(f"filters: {exc}", need_param="filters") from None


def _parse_filters(ctx: _Ctx, raw: Any, notes: list[str] | None) -> list[Condition]:
    """The conditions; what parse_filters normalized (e.g. a field-map shape) is appended to ``notes``."""
    try:
        conditions, found = parse_filters(raw, ctx.names)
    except FilterError as exc:
        raise RowsError(str(exc), need_param="filters") from None
    if notes is not None:
        notes.extend(found)
    return list(conditions)


def _where(
    ctx: _Ctx, conditions: Sequence[Condition], start: int = 1, column_prefix: str = ""
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


def _check_extra(ctx: _Ctx, extra: Sequence[Condition]) -> list[Condition]:
    for cond in extra:
        if cond.field not in ctx.fields and cond.field not in ("id", "created_at"):
            raise RowsError(
                f"row scope refers to field {cond.field!r}, which table {ctx.table.title!r} does not have; check the "
                "table's owner-field setting",
                error_type="config",
                non_retriable=True,
            )
    return list(extra)


def _row_ids(ctx: _Ctx, raw: Any) -> list[int]:
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


# --------------------------------------------------------------------------------------------------------------------
# Reading


def _projection(ctx: _Ctx, raw: Any) -> list[str] | None:
    if raw is None or raw == "" or raw == []:
        return None
    items = raw.replace("，", ",").split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple):
        raise RowsError('fields is a list of field names to return, e.g. ["姓名", "部门"]', need_param="fields")
    chosen: list[str] = []
    for item in items:
        name = item.strip() if isinstance(item, str) else item
        if name in ("id", "created_at"):
            continue
        if name not in ctx.fields:
            raise RowsError(
                f"fields: unknown field {item!r}; the table's fields are {', '.join(ctx.names)}", need_param="fields"
            )
        if name not in chosen:
            chosen.append(name)
    return chosen


def _order(field: str, descending: bool, alias: str = "") -> str:
    direction = "DESC" if descending else "ASC"
    if field == "id":
        # id is the platform's bigserial primary key, never NULL: NULLS LAST would change nothing but keep
        # PostgreSQL from reading the primary key index backwards for the default sort -id (a full scan and sort)
        return f"{alias}id {direction}"
    return f"{alias}{quote_ident(field)} {direction} NULLS LAST, {alias}id {direction}"


async def query(
    conn: asyncpg.Connection,
    table: TableInfo,
    *,
    filters: Any = None,
    sort: Any = None,
    limit: Any = None,
    offset: Any = None,
    fields: Any = None,
    extra_conditions: Sequence[Condition] = (),
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """``{list, pageInfo: {totalRows, page, pageSize, isLastPage}}``; sort default ``-id``, limit 100 (cap 1000)."""
    try:
        ctx = await _ctx(conn, table)
        conditions = [*_parse_filters(ctx, filters, notes), *_check_extra(ctx, extra_conditions)]
        try:
            sort_field, descending = parse_sort(sort, ctx.names)
            page_size = clamp_limit(limit, default=QUERY_DEFAULT, cap=QUERY_CAP)
            skip = parse_offset(offset)
        except FilterError as exc:
            raise RowsError(str(exc), need_param="sort/limit/offset") from None
        columns = _projection(ctx, fields)
        names = ["id", "created_at", *(ctx.names if columns is None else columns)]
        where, params = _where(ctx, conditions)
        n = len(params)
        # One statement: the page, and the number of matching rows only when the page is full (a partly filled page
        # is the last one: no need to count). The uncorrelated count is an InitPlan, which PostgreSQL runs only when
        # the CASE needs it. The outer ORDER BY repeats the page's order (the sort column is carried along when it is
        # not returned); records are built from the leading columns.
        carried = "" if sort_field in names else f", {quote_ident(sort_field)}"
        page = await conn.fetch(
            f"SELECT p.*, CASE WHEN count(*) OVER () >= ${n + 1} "
            f"THEN (SELECT count(*) FROM {table.qualified}{where}) END "
            f"FROM (SELECT {ctx.select_list(columns)}{carried} FROM {table.qualified}{where} "
            f"ORDER BY {_order(sort_field, descending)} LIMIT ${n + 1} OFFSET ${n + 2}) AS p "
            f"ORDER BY {_order(sort_field, descending, 'p.')}",
            *params,
            page_size,
            skip,
        )
        if page and page[0][-1] is not None:
            total = int(page[0][-1])
        elif page or not skip:
            total = skip + len(page)
        else:  # an empty page past the first: count
            total = await conn.fetchval(f"SELECT count(*) FROM {table.qualified}{where}", *params)
        rows = [dict(zip(names, tuple(r)[: len(names)], strict=True)) for r in page]
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    return {
        "list": [_record(ctx, r) for r in rows],
        "pageInfo": {
            "totalRows": total,
            "page": skip // page_size + 1,
            "pageSize": page_size,
            "isLastPage": skip + len(rows) >= total,
        },
    }


_NUMERIC_TYPES = frozenset({"整数", "数字"})


async def aggregate(
    conn: asyncpg.Connection,
    table: TableInfo,
    *,
    metrics: Any,
    group_by: Any = None,
    filters: Any = None,
    sort: Any = None,
    limit: Any = None,
    extra_conditions: Sequence[Condition] = (),
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """``{rows, group_by, metrics}``: one row per group (or one row without group_by) with the group fields and the
    metric aliases. sort may name a group field or a metric alias (default: group fields ascending); limit 1000
    (cap 10000)."""
    try:
        ctx = await _ctx(conn, table)
        try:
            parsed = parse_metrics(metrics, ctx.names)
            groups = parse_group_by(group_by, ctx.names)
            row_limit = clamp_limit(limit, default=AGGREGATE_DEFAULT, cap=AGGREGATE_CAP)
        except FilterError as exc:
            raise RowsError(str(exc), need_param="metrics") from None
        for metric in parsed:
            if metric.alias in groups:
                raise RowsError(
                    f"metric alias {metric.alias!r} is also a group_by field; choose another alias",
                    need_param="metrics",
                )
            field = ctx.fields.get(metric.field) if metric.field else None
            uidt = field.uidt if field else ("整数" if metric.field == "id" else "日期时间")
            if metric.op in ("sum", "avg") and uidt not in _NUMERIC_TYPES:
                raise RowsError(
                    f"{metric.op} needs a 整数 or 数字 field; {metric.field!r} is {uidt} (use count, min or max)",
                    need_param="metrics",
                )
            if metric.op in ("min", "max") and uidt == "勾选":
                raise RowsError(
                    f"{metric.op} does not apply to the 勾选 field {metric.field!r}; count with a filter instead",
                    need_param="metrics",
                )
        conditions = [*_parse_filters(ctx, filters, notes), *_check_extra(ctx, extra_conditions)]
        where, params = _where(ctx, conditions)
        selects = [quote_ident(g) for g in groups]
        for metric in parsed:
            arg = quote_ident(metric.field) if metric.field else "*"
            selects.append(f"{metric.op}({arg}) AS {quote_ident(metric.alias)}")
        sql = f"SELECT {', '.join(selects)} FROM {table.qualified}{where}"
        if groups:
            sql += " GROUP BY " + ", ".join(quote_ident(g) for g in groups)
            if sort is None or sort == "" or sort == []:
                order = ", ".join(f"{quote_ident(g)} ASC NULLS LAST" for g in groups)
            else:
                try:
                    key, descending = parse_sort(sort, [*groups, *(m.alias for m in parsed)])
                except FilterError as exc:
                    raise RowsError(f"{exc} (sort by a group_by field or a metric alias)", need_param="sort") from None
                if key not in groups and key not in {m.alias for m in parsed}:
                    raise RowsError(f"sort {key!r}: sort by a group_by field or a metric alias", need_param="sort")
                order = f"{quote_ident(key)} {'DESC' if descending else 'ASC'} NULLS LAST"
            sql += f" ORDER BY {order} LIMIT ${len(params) + 1}"
            params.append(row_limit)
        rows = await conn.fetch(sql, *params)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    out_rows = []
    for row in rows:
        item = {g: _out(row[g], ctx.fields[g]) if g in ctx.fields else _out(row[g]) for g in groups}
        for metric in parsed:
            value = row[metric.alias]
            if isinstance(value, Decimal) and metric.op in ("sum", "avg"):
                value = int(value) if value == value.to_integral_value() else float(value)
            item[metric.alias] = _out(value, ctx.fields.get(metric.field) if metric.field else None)
        out_rows.append(item)
    return {
        "rows": out_rows,
        "group_by": groups,
        "metrics": [{"field": m.field, "op": m.op, "alias": m.alias} for m in parsed],
    }


async def count_matching(
    conn: asyncpg.Connection,
    table: TableInfo,
    filters: Any,
    extra_conditions: Sequence[Condition] = (),
    notes: list[str] | None = None,
) -> int:
    """How many rows the filters (AND row scope) match; empty filters count the whole (scoped) table."""
    try:
        ctx = await _ctx(conn, table)
        where, params = _where(ctx, [*_parse_filters(ctx, filters, notes), *_check_extra(ctx, extra_conditions)])
        return int(await conn.fetchval(f"SELECT count(*) FROM {table.qualified}{where}", *params))
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None


def _target(
    ctx: _Ctx, row_ids: Any, filters: Any, extra: Sequence[Condition], action: str, notes: list[str] | None
) -> list[Condition]:
    conditions: list[Condition] = []
    if row_ids is not None and row_ids != [] and row_ids != "":
        conditions.append(Condition("id", "in", _row_ids(ctx, row_ids)))
    conditions.extend(_parse_filters(ctx, filters, notes))
    if not conditions:
        raise RowsError(
            f"{action} needs row_ids or filters; empty ones are refused so a whole table is never {action}d by mistake",
            need_param="filters",
        )
    return [*conditions, *_check_extra(ctx, extra)]


async def fetch_rows(
    conn: asyncpg.Connection,
    table: TableInfo,
    *,
    row_ids: Any = None,
    filters: Any = None,
    extra_conditions: Sequence[Condition] = (),
    notes: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The full records matched by row_ids and/or filters (AND row scope), in id order (e.g. a delete backup)."""
    try:
        ctx = await _ctx(conn, table)
        where, params = _where(ctx, _target(ctx, row_ids, filters, extra_conditions, "fetch", notes))
        rows = await conn.fetch(f"SELECT {ctx.select_list()} FROM {table.qualified}{where} ORDER BY id", *params)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    return [_record(ctx, r) for r in rows]


# --------------------------------------------------------------------------------------------------------------------
# Writing helpers


def _stamp(ctx: _Ctx, stamp: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in stamp.items():
        if key not in ctx.fields:
            raise RowsError(
                f"the forced field {key!r} does not exist in table {ctx.table.title!r}; check the owner-field setting",
                error_type="config",
                non_retriable=True,
            )
        try:
            values[key] = ctx.validator.convert(key, value)
        except FieldError as exc:
            raise RowsError(f"forced value: {exc}", error_type="config", non_retriable=True) from None
    return values


def _array_literal(items: Sequence[str] | None) -> str | None:
    if items is None:
        return None
    return "{" + ",".join('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' for s in items) + "}"


def _unnest(
    ctx: _Ctx,
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    start: int = 1,
    flagged: Collection[str] = (),
) -> tuple[str, list[Any], list[str], dict[str, str]]:
    """(``unnest($1::t[], …) AS s(c0, …)`` SQL, per-column arrays, the source expressions ``s.c0``…, and for each
    column in ``flagged`` the expression of a boolean telling whether the row gave that column at all)."""
    params: list[Any] = []
    casts: list[str] = []
    exprs: list[str] = []
    aliases: list[str] = []
    for i, column in enumerate(columns):
        field = ctx.fields[column]
        if field.uidt == "多选":
            params.append([_array_literal(r.get(column)) for r in rows])
            casts.append(f"${start + len(casts)}::text[]")
            exprs.append(f"s.c{i}::text[]")
        else:
            params.append([r.get(column) for r in rows])
            casts.append(f"${start + len(casts)}::{field.pg_type()}[]")
            exprs.append(f"s.c{i}")
        aliases.append(f"c{i}")
    flags: dict[str, str] = {}
    for i, column in enumerate(columns):
        if column in flagged:
            params.append([column in r for r in rows])
            casts.append(f"${start + len(casts)}::boolean[]")
            aliases.append(f"p{i}")
            flags[column] = f"s.p{i}"
    return f"unnest({', '.join(casts)}) AS s({', '.join(aliases)})", params, exprs, flags


def _is_row_level(exc: asyncpg.PostgresError) -> bool:
    return (exc.sqlstate or "").startswith(_ROW_LEVEL_CLASSES)


def _batch_list(records: Any, what: str) -> list[Any]:
    if isinstance(records, Mapping):
        records = [records]
    if not isinstance(records, list | tuple):
        raise RowsError(f"{what} must be an array of objects {{field: value}}", need_param="records")
    if not records:
        raise RowsError(f"{what} is empty; give 1–{BATCH_LIMIT} objects", need_param="records")
    if len(records) > BATCH_LIMIT:
        raise RowsError(
            f"{len(records)} rows given; insert_batch / upsert take at most {BATCH_LIMIT}. Write all rows at once to "
            "a JSON file in the workspace and import it with insert_from_file (do not split into several batches)",
            need_param="records",
        )
    return list(records)


class RowErrors:
    """Per-row errors of a batch: every failure counted, the first MAX_ERRORS listed with 1-based row numbers."""

    __slots__ = ("failed", "items")

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.failed = 0

    def add(self, row: int, message: str) -> None:
        self.failed += 1
        if len(self.items) < MAX_ERRORS:
            self.items.append({"row": row, "error": message})


def _validate_rows(
    ctx: _Ctx, records: Sequence[Any], *, insert: bool, errors: RowErrors
) -> tuple[list[tuple[int, dict[str, Any]]], list[str], int]:
    """(valid (row number, values) pairs, dropped names, rows skipped as empty)."""
    valid: list[tuple[int, dict[str, Any]]] = []
    dropped: dict[str, None] = {}
    skipped = 0
    for number, record in enumerate(records, start=1):
        values, unknown, problems = ctx.validator.validate(record, insert=insert)
        dropped.update(dict.fromkeys(unknown))
        if _is_empty(values, problems):
            skipped += 1
        elif problems:
            errors.add(number, "; ".join(problems))
        else:
            valid.append((number, values))
    return valid, list(dropped), skipped


_REQUIRED = ": required; give a value"


def _is_empty(values: Mapping[str, Any], problems: Sequence[str]) -> bool:
    """No value for any field (only unknown fields or blanks): the only problems are missing required fields."""
    return all(v is None for v in values.values()) and all(p.endswith(_REQUIRED) for p in problems)


def _columns(rows: Sequence[Mapping[str, Any]], ctx: _Ctx) -> list[str]:
    present: set[str] = set()
    for row in rows:
        present.update(row)
    return [name for name in ctx.names if name in present]


# --------------------------------------------------------------------------------------------------------------------
# insert


async def insert(
    conn: asyncpg.Connection, table: TableInfo, data: Any, *, stamp: Mapping[str, Any] | None = None
) -> Record | dict[str, Any]:
    """Insert one row; the full written record (a :class:`Record`). ``data`` given as an array is handled as
    insert_batch (same 1–100 row limit) and returns its result."""
    if isinstance(data, list | tuple):
        return await insert_batch(conn, table, list(data), stamp=stamp)
    if not isinstance(data, Mapping) or not data:
        raise RowsError('data must be one object {field: value}, e.g. {"姓名": "张三"}', need_param="data")
    try:
        ctx = await _ctx(conn, table)
        forced = _stamp(ctx, stamp or {})
        values, dropped, problems = ctx.validator.validate(data, insert=True)
        if _is_empty(values, problems):
            known = ", ".join(ctx.names)
            extra = f" (ignored unknown field(s) {', '.join(dropped)})" if dropped else ""
            raise RowsError(f"data has no values for the table's fields{extra}; fields are {known}", need_param="data")
        if problems:
            raise RowsError("; ".join(problems), need_param="data")
        values.update(forced)
        columns = [n for n in ctx.names if n in values]
        placeholders = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
        async with conn.transaction():
            row = await conn.fetchrow(
                f"INSERT INTO {table.qualified} ({', '.join(map(quote_ident, columns))}) VALUES ({placeholders}) "
                f"RETURNING {ctx.select_list()}",
                *(values[c] for c in columns),
            )
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    return Record(_record(ctx, row), dropped)


async def _insert_rows(
    conn: asyncpg.Connection, ctx: _Ctx, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> list[int]:
    source, params, exprs, _ = _unnest(ctx, columns, rows)
    result = await conn.fetch(
        f"INSERT INTO {ctx.table.qualified} ({', '.join(map(quote_ident, columns))}) "
        f"SELECT {', '.join(exprs)} FROM {source} RETURNING id",
        *params,
    )
    return [r["id"] for r in result]


async def insert_batch(
    conn: asyncpg.Connection, table: TableInfo, records: Any, *, stamp: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Insert 1–100 rows: ``{inserted, skipped, failed, errors, verified_total, ids}`` (+ ``dropped`` when unknown
    fields were ignored). Invalid rows are reported (``errors``: ``{row, error}`` with 1-based row numbers, at most
    20) and the valid ones written; empty rows are skipped."""
    rows_in = _batch_list(records, "records")
    errors = RowErrors()
    try:
        ctx = await _ctx(conn, table)
        forced = _stamp(ctx, stamp or {})
        valid, dropped, skipped = _validate_rows(ctx, rows_in, insert=True, errors=errors)
        for _, values in valid:
            values.update(forced)
        ids: list[int] = []
        if valid:
            columns = _columns([v for _, v in valid], ctx)
            # One savepoint (or transaction) for the set-based statement; only when it fails on a row-level error,
            # a second one holding one savepoint per row. Same effect as nesting the first inside the second.
            try:
                async with conn.transaction():
                    ids = await _insert_rows(conn, ctx, columns, [v for _, v in valid])
            except asyncpg.PostgresError as exc:
                if not _is_row_level(exc):
                    raise
                ids = []
                async with conn.transaction():
                    for number, values in valid:  # fallback: one savepoint per row
                        try:
                            async with conn.transaction():
                                ids.extend(await _insert_rows(conn, ctx, columns, [values]))
                        except asyncpg.PostgresError as row_exc:
                            if not _is_row_level(row_exc):
                                raise
                            errors.add(number, str(classify(row_exc)))
        verified = (
            int(await conn.fetchval(f"SELECT count(*) FROM {table.qualified} WHERE id = ANY($1::bigint[])", ids))
            if ids
            else 0
        )
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    result: dict[str, Any] = {
        "inserted": len(ids),
        "skipped": skipped,
        "failed": errors.failed,
        "errors": sorted(errors.items, key=lambda e: e["row"]),
        "verified_total": verified,
        "ids": ids,
    }
    if dropped:
        result["dropped"] = dropped
    return result


# --------------------------------------------------------------------------------------------------------------------
# upsert


def _key_fields(ctx: _Ctx, raw: Any) -> list[str]:
    items = raw.replace("，", ",").split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple) or not items:
        raise RowsError(
            'upsert needs key_fields, e.g. ["工号"]: the fields that identify a row', need_param="key_fields"
        )
    keys: list[str] = []
    for item in items:
        name = item.strip() if isinstance(item, str) else item
        if name not in ctx.fields:
            raise RowsError(
                f"key_fields: unknown field {item!r}; the table's fields are {', '.join(ctx.names)}",
                need_param="key_fields",
            )
        if name not in keys:
            keys.append(name)
    return keys


def _key_match(keys: Sequence[str], exprs: Sequence[str]) -> str:
    """``t.key = s.cN AND …``: a row of the table matches a batch row holding the same key values.

    upsert refuses batch rows with an empty key field, so every ``s.cN`` here is non-NULL, and then ``=`` means
    exactly what ``IS NOT DISTINCT FROM`` means (a NULL in the table matches neither); unlike it, ``=`` lets
    PostgreSQL hash-join the batch with the table (or use an index on the key) instead of comparing every row of
    the table with every row of the batch.
    """
    return " AND ".join(f"t.{quote_ident(k)} = {e}" for k, e in zip(keys, exprs, strict=True))


def _has_merge_returning(conn: asyncpg.Connection) -> bool:
    return bool(conn.get_server_version().major >= 17)  # MERGE … RETURNING merge_action() is PostgreSQL 17+


async def _merge(
    conn: asyncpg.Connection,
    ctx: _Ctx,
    keys: Sequence[str],
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    extra: Sequence[Condition],
) -> tuple[int, int]:
    """One MERGE of ``rows``; (inserted, updated)."""
    non_keys = [c for c in columns if c not in keys]
    source, params, exprs, flags = _unnest(ctx, columns, rows, flagged=non_keys)
    src = dict(zip(columns, exprs, strict=True))
    on = _key_match(keys, [src[k] for k in keys])
    scope, scope_params = _where(ctx, extra, start=len(params) + 1, column_prefix="t.")
    if scope:
        on += " AND " + scope.removeprefix(" WHERE ")
    params.extend(scope_params)
    # a column some rows of the batch do not give keeps its value in those rows (CASE on the presence flag)
    matched = (
        "WHEN MATCHED THEN UPDATE SET "
        + ", ".join(
            f"{quote_ident(c)} = CASE WHEN {flags[c]} THEN {src[c]} ELSE t.{quote_ident(c)} END" for c in non_keys
        )
        if non_keys
        else "WHEN MATCHED THEN DO NOTHING"
    )
    sql = (
        f"MERGE INTO {ctx.table.qualified} AS t USING (SELECT * FROM {source}) AS s ON {on} {matched} "
        f"WHEN NOT MATCHED THEN INSERT ({', '.join(map(quote_ident, columns))}) VALUES ({', '.join(exprs)})"
    )
    if _has_merge_returning(conn):
        result = await conn.fetch(sql + " RETURNING merge_action() AS action", *params)
        inserted = sum(1 for r in result if r["action"] == "INSERT")
        return inserted, len(result) - inserted
    existing = await conn.fetchval(
        f"SELECT count(*) FROM {ctx.table.qualified} AS t WHERE EXISTS (SELECT 1 FROM {source} WHERE {on})", *params
    )
    status = await conn.execute(sql, *params)
    total = _status_count(status)
    updated = int(existing) if non_keys else 0
    return total - updated, updated


async def upsert(
    conn: asyncpg.Connection,
    table: TableInfo,
    key_fields: Any,
    records: Any,
    *,
    stamp: Mapping[str, Any] | None = None,
    extra_conditions: Sequence[Condition] = (),
) -> dict[str, Any]:
    """Insert or update 1–100 rows matched on ``key_fields`` (no unique constraint needed): ``{inserted, updated,
    failed, errors, verified_total}`` (+ ``dropped``). Rows outside ``extra_conditions`` never match (a new row is
    inserted instead); ``stamp`` is written on inserted and updated rows. Required fields are not checked (a row may
    turn out to be an update)."""
    rows_in = _batch_list(records, "records")
    errors = RowErrors()
    inserted = updated = 0
    try:
        ctx = await _ctx(conn, table)
        keys = _key_fields(ctx, key_fields)
        extra = _check_extra(ctx, extra_conditions)
        forced = _stamp(ctx, stamp or {})
        valid, dropped, skipped = _validate_rows(ctx, rows_in, insert=False, errors=errors)
        by_key: dict[tuple[Any, ...], tuple[int, dict[str, Any]]] = {}
        for number, values in valid:
            missing = [k for k in keys if values.get(k) is None]
            if missing:
                errors.add(number, f"key field(s) {', '.join(missing)} empty; every record needs its key_fields")
                continue
            key = tuple(json.dumps(values[k], default=str, ensure_ascii=False) for k in keys)
            if key in by_key:
                errors.add(by_key[key][0], f"same key as row {number}; only the last row with this key was written")
            values.update(forced)
            by_key[key] = (number, values)
        batch = sorted(by_key.values(), key=lambda item: item[0])
        if batch:
            columns = _columns([v for _, v in batch], ctx)
            try:  # as in insert_batch: the per-row fallback gets its own savepoint only when it is needed
                async with conn.transaction():
                    inserted, updated = await _merge(conn, ctx, keys, columns, [v for _, v in batch], extra)
            except asyncpg.PostgresError as exc:
                if not _is_row_level(exc):
                    raise
                inserted = updated = 0
                async with conn.transaction():
                    for number, values in batch:
                        try:
                            async with conn.transaction():
                                added, changed = await _merge(conn, ctx, keys, columns, [values], extra)
                        except asyncpg.PostgresError as row_exc:
                            if not _is_row_level(row_exc):
                                raise
                            errors.add(number, str(classify(row_exc)))
                            by_key.pop(next(k for k, v in by_key.items() if v[0] == number))
                            continue
                        inserted += added
                        updated += changed
            verified = await _count_keys(conn, ctx, keys, [v for _, v in by_key.values()], extra)
        else:
            verified = 0
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    result: dict[str, Any] = {
        "inserted": inserted,
        "updated": updated,
        "failed": errors.failed,
        "errors": sorted(errors.items, key=lambda e: e["row"]),
        "verified_total": verified,
    }
    if skipped:
        result["skipped"] = skipped
    if dropped:
        result["dropped"] = dropped
    return result


async def _count_keys(
    conn: asyncpg.Connection,
    ctx: _Ctx,
    keys: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    extra: Sequence[Condition],
) -> int:
    if not rows:
        return 0
    source, params, exprs, _ = _unnest(ctx, keys, rows)
    on = _key_match(keys, exprs)
    scope, scope_params = _where(ctx, extra, start=len(params) + 1, column_prefix="t.")
    if scope:
        on += " AND " + scope.removeprefix(" WHERE ")
    return int(
        await conn.fetchval(
            f"SELECT count(*) FROM {ctx.table.qualified} AS t WHERE EXISTS (SELECT 1 FROM {source} WHERE {on})",
            *params,
            *scope_params,
        )
    )


# --------------------------------------------------------------------------------------------------------------------
# update


def _update_values(ctx: _Ctx, data: Any, protected: Collection[str]) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(data, Mapping) or not data:
        raise RowsError('data must be one object with the changes, e.g. {"部门": "销售"}', need_param="data")
    values, dropped, problems = ctx.validator.validate(data, insert=False)
    if problems:
        raise RowsError("; ".join(problems), need_param="data")
    locked = [name for name in values if name in set(protected)]
    if locked:
        raise RowsError(
            f"field(s) {', '.join(locked)} cannot be changed here (managed by the platform); remove them from data",
            need_param="data",
        )
    if not values:
        extra = f" (ignored unknown field(s) {', '.join(dropped)})" if dropped else ""
        raise RowsError(f"data changes no field{extra}; fields are {', '.join(ctx.names)}", need_param="data")
    return values, dropped


def _set_clause(values: Mapping[str, Any]) -> tuple[str, list[Any]]:
    names = list(values)
    return ", ".join(f"{quote_ident(n)} = ${i}" for i, n in enumerate(names, start=1)), [values[n] for n in names]


async def update(
    conn: asyncpg.Connection,
    table: TableInfo,
    row_id: Any,
    data: Any,
    *,
    extra_conditions: Sequence[Condition] = (),
    protected: Collection[str] = (),
) -> Record:
    """Update one row by id; the full updated record. A missing row (or one outside the row scope) is recoverable."""
    try:
        ctx = await _ctx(conn, table)
        if isinstance(row_id, list | tuple):
            raise RowsError("update takes one row_id; for several rows use update_by", need_param="row_id")
        (target,) = _row_ids(ctx, row_id)
        values, dropped = _update_values(ctx, data, protected)
        assignments, params = _set_clause(values)
        where, where_params = _where(
            ctx, [Condition("id", "eq", target), *_check_extra(ctx, extra_conditions)], len(params) + 1
        )
        async with conn.transaction():
            row = await conn.fetchrow(
                f"UPDATE {table.qualified} SET {assignments}{where} RETURNING {ctx.select_list()}",
                *params,
                *where_params,
            )
        if row is None:
            raise RowsError(
                f"no row with id {target} in table {table.title!r} (or it is not yours to change); query first to "
                "find the row id",
                need_param="row_id",
            )
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    return Record(_record(ctx, row), dropped)


async def update_by(
    conn: asyncpg.Connection,
    table: TableInfo,
    filters: Any,
    data: Any,
    *,
    extra_conditions: Sequence[Condition] = (),
    notes: list[str] | None = None,
    protected: Collection[str] = (),
) -> dict[str, Any]:
    """Update every row the filters match (AND row scope): ``{updated}`` (+ ``dropped``). Empty filters are refused."""
    try:
        ctx = await _ctx(conn, table)
        conditions = _parse_filters(ctx, filters, notes)
        if not conditions:
            raise RowsError(
                "update_by needs filters; empty filters are refused so a whole table is never changed by mistake",
                need_param="filters",
            )
        values, dropped = _update_values(ctx, data, protected)
        assignments, params = _set_clause(values)
        where, where_params = _where(ctx, [*conditions, *_check_extra(ctx, extra_conditions)], len(params) + 1)
        async with conn.transaction():
            status = await conn.execute(f"UPDATE {table.qualified} SET {assignments}{where}", *params, *where_params)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    result: dict[str, Any] = {"updated": _status_count(status)}
    if dropped:
        result["dropped"] = dropped
    return result


# --------------------------------------------------------------------------------------------------------------------
# delete


async def delete_rows(
    conn: asyncpg.Connection,
    table: TableInfo,
    *,
    row_ids: Any = None,
    filters: Any = None,
    extra_conditions: Sequence[Condition] = (),
    notes: list[str] | None = None,
) -> int:
    """Delete the rows matched by row_ids and/or filters (AND row scope); the number deleted. Both empty: refused."""
    try:
        ctx = await _ctx(conn, table)
        where, params = _where(ctx, _target(ctx, row_ids, filters, extra_conditions, "delete", notes))
        async with conn.transaction():
            status = await conn.execute(f"DELETE FROM {table.qualified}{where}", *params)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    return _status_count(status)
