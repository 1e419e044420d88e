"""Structure actions of the datatable skill (spec §7.3; owner/admin, §7.2): create_table, add_field, update_field,
delete_field and delete_table. The destructive ones preview without 确认=true (dispatch.py's dry run)."""

from __future__ import annotations

from typing import Any

from ..request.dispatch import dry_run, needs_confirmation
from ..store import schema as store_schema
from ..structure import fields as structure_fields
from ..structure import tables as structure_tables
from .call import Call, check, require

__all__ = ["add_field", "create_table", "delete_field", "delete_table", "update_field"]


async def create_table(call: Call) -> dict[str, Any]:
    await check(call, "create_table")
    title = require(call, "table_name", "the new table's title, e.g. 客户")
    fields = require(call, "fields", 'the field list, e.g. [{"title": "姓名", "uidt": "文本"}]')
    return await structure_tables.create_table(call.conn, call.schema, title, fields)


async def _structure_table(call: Call) -> store_schema.TableInfo:
    table = await store_schema.resolve_table(
        call.conn, call.schema, call.params.get("table_id"), call.params.get("table_name")
    )
    await check(call, call.action, table)
    return table


async def add_field(call: Call) -> dict[str, Any]:
    table = await _structure_table(call)
    definition = require(call, "field", 'the field definition, e.g. {"title": "电话", "uidt": "电话"}')
    return await structure_fields.add_field(call.conn, call.schema, table.id, definition)


async def update_field(call: Call) -> dict[str, Any]:
    table = await _structure_table(call)
    title = require(call, "field_title", "the field to change")
    patch = require(call, "patch", 'the changes, e.g. {"title": "新名"} or {"uidt": "整数"}')
    type_change = await structure_fields.changes_type(call.conn, call.schema, table.id, title, patch)
    if needs_confirmation(call.request, type_change=type_change):
        return dry_run(call.request, f"change the type of field {title!r} of table {table.title!r} ({patch})")
    return await structure_fields.update_field(call.conn, call.schema, table.id, title, patch)


async def delete_field(call: Call) -> dict[str, Any]:
    table = await _structure_table(call)
    title = require(call, "field_title", "the field to delete")
    if needs_confirmation(call.request):
        return dry_run(call.request, f"delete field {title!r} and its data from table {table.title!r}")
    return await structure_fields.delete_field(call.conn, call.schema, table.id, title)


async def delete_table(call: Call) -> dict[str, Any]:
    table = await _structure_table(call)
    if needs_confirmation(call.request):
        count = await call.conn.fetchval(f"SELECT count(*) FROM {table.qualified}")
        return dry_run(call.request, f"delete table {table.title!r} with its {count} row(s)")
    await structure_tables.delete_table(call.conn, call.schema, table.id)
    return {"data": True, "deleted": table.as_dict()}
