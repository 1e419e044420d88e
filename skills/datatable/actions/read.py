"""Reading actions of the datatable skill (spec §7.3): list_tables, list_columns, query and aggregate."""

from __future__ import annotations

from typing import Any

from ..rows import read as rows_read
from ..store import schema as store_schema
from .call import Call, check, require, table_scope

__all__ = ["aggregate", "list_columns", "list_tables", "query"]


async def list_tables(call: Call) -> dict[str, Any]:
    await check(call, "list_tables")
    tables = await store_schema.list_tables(call.conn, call.schema)
    return {"data": tables, "count": len(tables)}


async def list_columns(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    columns = await store_schema.list_columns(call.conn, call.schema, scope.table.id)
    return {"data": columns, "table": scope.table.as_dict(), "count": len(columns)}


async def query(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    p = call.params
    return await rows_read.query(
        call.conn,
        scope.table,
        filters=p.get("filters"),
        sort=p.get("sort"),
        limit=p.get("limit"),
        offset=p.get("offset"),
        fields=p.get("fields"),
        extra_conditions=scope.conditions,
        notes=call.notes,
    )


async def aggregate(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    p = call.params
    return await rows_read.aggregate(
        call.conn,
        scope.table,
        metrics=require(call, "metrics", 'e.g. [{"field": "金额", "op": "sum", "alias": "总额"}]'),
        group_by=p.get("group_by"),
        filters=p.get("filters"),
        sort=p.get("sort"),
        limit=p.get("limit"),
        extra_conditions=scope.conditions,
        notes=call.notes,
    )
