"""Writing row actions of the datatable skill: insert, insert_batch, update, update_by and delete_rows (spec §7.3,
§7.5, §7.8); upsert is in upsert.py.

Plain async functions over an asyncpg connection and a :class:`TableInfo`. The handler wraps
permissions, row scope and confirmation around them: ``extra_conditions`` (AND-ed to every statement's WHERE, e.g.
the owner field) and ``stamp`` (values forced on every written row, e.g. the owner) are its hooks.

Decisions:

* Every write runs inside ``conn.transaction()``: a real transaction that commits when the action succeeds, or a
  SAVEPOINT when the caller already opened one. Exceptions are classified (:func:`~.errors.classify`) only
  after the ``async with`` block has rolled back, so the connection is usable afterwards (no 25P02).
* Batches (insert_batch, upsert) are validated row by row in Python first; the valid rows are written with one
  set-based statement (``INSERT … SELECT FROM unnest(per-column arrays)`` / ``MERGE … USING unnest(…)``) inside a
  savepoint. Only when that statement fails on a row-level error (SQLSTATE class 22 or 23) are the rows written one
  by one, each in its own savepoint, so one bad row cannot sink the batch.
* ``verified_total`` counts this operation's rows found again after the write (the returned ids, or for upsert the
  rows holding the batch's keys), never the whole table.
* Unknown fields are dropped (§7.5) and reported: ``dropped`` in dict results, the ``.dropped`` attribute of the
  :class:`Record` returned by insert / update.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import asyncpg

from ..fields.errors import FieldError
from ..store.schema import StoreError, TableInfo, has_unique_index, quote_ident
from .batch import batch_columns, batch_records, is_empty_row, stamp_values, unnest_source, validate_rows
from .context import (
    RowContext,
    count_ids,
    json_record,
    load_context,
    parse_row_filters,
    parse_row_ids,
    scope_conditions,
    status_count,
    target_conditions,
    where_clause,
)
from .errors import RedoAction, RowErrors, RowsError, classify, is_row_level
from .filters import Condition

__all__ = ["Record", "delete_rows", "insert", "insert_batch", "update", "update_by"]


class Record(dict[str, Any]):
    """A written record (insert / update); ``dropped`` lists the unknown field names that were ignored."""

    dropped: list[str]

    def __init__(self, data: Mapping[str, Any], dropped: Sequence[str] = ()) -> None:
        super().__init__(data)
        self.dropped = list(dropped)


async def insert(
    conn: asyncpg.Connection,
    table: TableInfo,
    data: Any,
    *,
    stamp: Mapping[str, Any] | None = None,
    optimistic: bool = False,
) -> Record | dict[str, Any]:
    """Insert one row; the full written record (a :class:`Record`). ``data`` given as an array is handled as
    insert_batch (same 1–100 row limit) and returns its result."""
    if isinstance(data, list | tuple):
        return await insert_batch(conn, table, list(data), stamp=stamp, optimistic=optimistic)
    if not isinstance(data, Mapping) or not data:
        raise RowsError('data must be one object {field: value}, e.g. {"姓名": "张三"}', need_param="data")
    try:
        ctx = await load_context(conn, table)
        forced = stamp_values(ctx, stamp or {})
        values, dropped, problems = ctx.validator.validate(data, insert=True)
        if is_empty_row(values, problems):
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
    return Record(json_record(ctx, row), dropped)


async def _insert_rows(
    conn: asyncpg.Connection, ctx: RowContext, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> list[int]:
    source, params, exprs, _ = unnest_source(ctx, columns, rows)
    result = await conn.fetch(
        f"INSERT INTO {ctx.table.qualified} ({', '.join(map(quote_ident, columns))}) "
        f"SELECT {', '.join(exprs)} FROM {source} RETURNING id",
        *params,
    )
    return [r["id"] for r in result]


async def insert_batch(
    conn: asyncpg.Connection,
    table: TableInfo,
    records: Any,
    *,
    stamp: Mapping[str, Any] | None = None,
    optimistic: bool = False,
    skip_conflicts: bool = False,
) -> dict[str, Any]:
    """Insert 1–100 rows: ``{inserted, skipped, failed, errors, verified_total, ids}`` (+ ``dropped`` when unknown
    fields were ignored). Invalid rows are reported (``errors``: ``{row, error}`` with 1-based row numbers, at most
    20) and the valid ones written; empty rows are skipped.

    ``optimistic`` (the handler's first attempt, inside the transaction it rolls back on any failure): the set-based
    statement runs without its savepoint, and a row-level error raises :class:`~.errors.RedoAction` instead of
    falling back, so that the handler rolls back and redoes the action without ``optimistic`` — the same result.

    ``skip_conflicts`` (on_conflict=skip, §7.4; needs a unique constraint on the table): a row whose unique values
    are taken counts as ``skipped`` instead of failed."""
    rows_in = batch_records(records, "records")
    errors = RowErrors()
    try:
        ctx = await load_context(conn, table)
        if skip_conflicts and not await has_unique_index(conn, table):
            raise RowsError(
                f"on_conflict=skip needs a unique field in table {table.title!r} and it has none; make a field "
                "unique (update_field with unique=true) or insert without on_conflict",
                need_param="on_conflict",
            )
        forced = stamp_values(ctx, stamp or {})
        valid, dropped, skipped = validate_rows(ctx, rows_in, insert=True, errors=errors)
        for _, values in valid:
            values.update(forced)
        ids: list[int] = []
        if valid:
            columns = batch_columns([v for _, v in valid], ctx)
            if optimistic:  # no savepoint: a row-level error redoes the whole action the careful way (below)
                try:
                    ids = await _insert_rows(conn, ctx, columns, [v for _, v in valid])
                except asyncpg.PostgresError as exc:
                    if is_row_level(exc):
                        raise RedoAction("a row of the batch failed; redo with one savepoint per row") from None
                    raise
            # One savepoint (or transaction) for the set-based statement; only when it fails on a row-level error,
            # a second one holding one savepoint per row. Same effect as nesting the first inside the second.
            else:
                try:
                    async with conn.transaction():
                        ids = await _insert_rows(conn, ctx, columns, [v for _, v in valid])
                except asyncpg.PostgresError as exc:
                    if not is_row_level(exc):
                        raise
                    ids = []
                    async with conn.transaction():
                        for number, values in valid:  # fallback: one savepoint per row
                            try:
                                async with conn.transaction():
                                    ids.extend(await _insert_rows(conn, ctx, columns, [values]))
                            except asyncpg.PostgresError as row_exc:
                                if not is_row_level(row_exc):
                                    raise
                                if skip_conflicts and isinstance(row_exc, asyncpg.UniqueViolationError):
                                    skipped += 1
                                    continue
                                errors.add(number, str(classify(row_exc)))
        verified = await count_ids(conn, table, ids)
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


def _update_values(ctx: RowContext, data: Any, protected: Collection[str]) -> tuple[dict[str, Any], list[str]]:
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
        ctx = await load_context(conn, table)
        if isinstance(row_id, list | tuple):
            raise RowsError("update takes one row_id; for several rows use update_by", need_param="row_id")
        (target,) = parse_row_ids(ctx, row_id)
        values, dropped = _update_values(ctx, data, protected)
        assignments, params = _set_clause(values)
        where, where_params = where_clause(
            ctx, [Condition("id", "eq", target), *scope_conditions(ctx, extra_conditions)], len(params) + 1
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
    return Record(json_record(ctx, row), dropped)


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
        ctx = await load_context(conn, table)
        conditions = parse_row_filters(ctx, filters, notes)
        if not conditions:
            raise RowsError(
                "update_by needs filters; empty filters are refused so a whole table is never changed by mistake",
                need_param="filters",
            )
        values, dropped = _update_values(ctx, data, protected)
        assignments, params = _set_clause(values)
        where, where_params = where_clause(
            ctx, [*conditions, *scope_conditions(ctx, extra_conditions)], len(params) + 1
        )
        async with conn.transaction():
            status = await conn.execute(f"UPDATE {table.qualified} SET {assignments}{where}", *params, *where_params)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    result: dict[str, Any] = {"updated": status_count(status)}
    if dropped:
        result["dropped"] = dropped
    return result


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
        ctx = await load_context(conn, table)
        where, params = where_clause(ctx, target_conditions(ctx, row_ids, filters, extra_conditions, "delete", notes))
        async with conn.transaction():
            status = await conn.execute(f"DELETE FROM {table.qualified}{where}", *params)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    return status_count(status)
