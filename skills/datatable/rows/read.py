"""Reading row actions of the datatable skill: query, aggregate, count_matching and fetch_rows (spec §7.3, §7.4).

Plain async functions over an asyncpg connection and a :class:`TableInfo`; ``extra_conditions`` (the
row scope, e.g. the owner field) is AND-ed to every statement's WHERE.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import asyncpg

from ..fields.errors import FieldError
from ..store.schema import StoreError, TableInfo, quote_ident
from .context import (
    RowContext,
    json_record,
    json_records,
    json_value,
    load_context,
    parse_row_filters,
    scope_conditions,
    target_conditions,
    where_clause,
)
from .errors import RowsError, classify
from .filters import Condition, FilterError
from .query_options import (
    AGGREGATE_CAP,
    AGGREGATE_DEFAULT,
    QUERY_CAP,
    QUERY_DEFAULT,
    clamp_limit,
    parse_group_by,
    parse_metrics,
    parse_offset,
    parse_sort,
)

__all__ = ["aggregate", "count_matching", "fetch_rows", "query"]


def _projection(ctx: RowContext, raw: Any) -> list[str] | None:
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
        ctx = await load_context(conn, table)
        conditions = [*parse_row_filters(ctx, filters, notes), *scope_conditions(ctx, extra_conditions)]
        try:
            sort_field, descending = parse_sort(sort, ctx.names)
            page_size = clamp_limit(limit, default=QUERY_DEFAULT, cap=QUERY_CAP)
            skip = parse_offset(offset)
        except FilterError as exc:
            raise RowsError(str(exc), need_param="sort/limit/offset") from None
        columns = _projection(ctx, fields)
        names = ["id", "created_at", *(ctx.names if columns is None else columns)]
        where, params = where_clause(ctx, conditions)
        n = len(params)
        # One statement: the page plus one row, and the number of matching rows only when that extra row exists (a
        # page that does not overflow is the last one: no need to count). The uncorrelated count is an InitPlan,
        # which PostgreSQL runs only when the CASE needs it. The outer ORDER BY repeats the page's order (the sort
        # column is carried along when it is not returned); records are built from the leading columns.
        carried = "" if sort_field in names else f", {quote_ident(sort_field)}"
        fetched = await conn.fetch(
            f"SELECT p.*, CASE WHEN count(*) OVER () > ${n + 1} "
            f"THEN (SELECT count(*) FROM {table.qualified}{where}) END "
            f"FROM (SELECT {ctx.select_list(columns)}{carried} FROM {table.qualified}{where} "
            f"ORDER BY {_order(sort_field, descending)} LIMIT ${n + 1} + 1 OFFSET ${n + 2}) AS p "
            f"ORDER BY {_order(sort_field, descending, 'p.')}",
            *params,
            page_size,
            skip,
        )
        page = fetched[:page_size]
        if fetched and fetched[0][-1] is not None:
            total = int(fetched[0][-1])
        elif page or not skip:
            total = skip + len(page)
        else:  # an empty page past the first: count
            total = await conn.fetchval(f"SELECT count(*) FROM {table.qualified}{where}", *params)
        records = json_records(ctx, names, page)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    return {
        "list": records,
        "pageInfo": {
            "totalRows": total,
            "page": skip // page_size + 1,
            "pageSize": page_size,
            "isLastPage": skip + len(records) >= total,
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
        ctx = await load_context(conn, table)
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
        conditions = [*parse_row_filters(ctx, filters, notes), *scope_conditions(ctx, extra_conditions)]
        where, params = where_clause(ctx, conditions)
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
        item = {g: json_value(row[g], ctx.fields[g]) if g in ctx.fields else json_value(row[g]) for g in groups}
        for metric in parsed:
            value = row[metric.alias]
            if isinstance(value, Decimal) and metric.op in ("sum", "avg"):
                value = int(value) if value == value.to_integral_value() else float(value)
            item[metric.alias] = json_value(value, ctx.fields.get(metric.field) if metric.field else None)
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
        ctx = await load_context(conn, table)
        where, params = where_clause(
            ctx, [*parse_row_filters(ctx, filters, notes), *scope_conditions(ctx, extra_conditions)]
        )
        return int(await conn.fetchval(f"SELECT count(*) FROM {table.qualified}{where}", *params))
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None


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
        ctx = await load_context(conn, table)
        where, params = where_clause(ctx, target_conditions(ctx, row_ids, filters, extra_conditions, "fetch", notes))
        rows = await conn.fetch(f"SELECT {ctx.select_list()} FROM {table.qualified}{where} ORDER BY id", *params)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    return [json_record(ctx, r) for r in rows]
