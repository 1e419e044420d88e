"""Writing actions of the datatable skill (spec §7.3): insert, insert_batch, insert_from_file, upsert, update and
update_by."""

from __future__ import annotations

from typing import Any

from ..importer import prepare, staging
from ..rows import upsert as rows_upsert
from ..rows import write as rows_write
from .call import Call, require, table_scope

__all__ = ["insert", "insert_batch", "insert_from_file", "update", "update_by", "upsert"]


def _record_reply(record: rows_write.Record) -> dict[str, Any]:
    reply: dict[str, Any] = {"data": dict(record), "id": record.get("id")}
    if record.dropped:
        reply["dropped"] = record.dropped
    return reply


async def insert(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    data = require(call, "data", 'one record as an object, e.g. {"姓名": "张三"} (2–100 records: insert_batch)')
    result = await rows_write.insert(call.conn, scope.table, data, stamp=scope.stamp, optimistic=call.optimistic)
    if isinstance(result, rows_write.Record):
        return _record_reply(result)
    call.notes.append("data was an array: inserted as insert_batch")
    return result


async def insert_batch(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    records = require(call, "records", "an array of 1–100 objects (more than 100: write a JSON file, insert_from_file)")
    return await rows_write.insert_batch(
        call.conn,
        scope.table,
        records,
        stamp=scope.stamp,
        optimistic=call.optimistic,
        skip_conflicts=prepare.on_conflict(call.params.get("on_conflict")),
    )


async def insert_from_file(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    p = call.params
    return await staging.insert_from_file(
        call.conn,
        scope.table,
        require(call, "file", "the path of a JSON file (array of objects or JSON Lines) in the workspace"),
        workspace=call.workspace,
        mapping=p.get("mapping"),
        defaults=p.get("defaults"),
        on_conflict=p.get("on_conflict"),
        stamp=scope.stamp,
    )


async def upsert(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    p = call.params
    records = p.get("records")
    if records in (None, "", []):
        data = require(call, "data", "the records to insert or update (records: array, or data: one object)")
        records = data if isinstance(data, list) else [data]
    return await rows_upsert.upsert(
        call.conn,
        scope.table,
        require(call, "key_fields", 'the fields that identify a record, e.g. ["工号"]'),
        records,
        stamp=scope.stamp,
        extra_conditions=scope.conditions,
        optimistic=call.optimistic,
    )


async def update(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    record = await rows_write.update(
        call.conn,
        scope.table,
        require(call, "row_id", "the id of the row to change (from query)"),
        require(call, "data", 'the fields to change, e.g. {"状态": "完成"}'),
        extra_conditions=scope.conditions,
        protected=scope.protected,
    )
    return _record_reply(record)


async def update_by(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    return await rows_write.update_by(
        call.conn,
        scope.table,
        require(call, "filters", 'which rows, e.g. [{"field": "部门", "op": "eq", "value": "研发"}]'),
        require(call, "data", 'the fields to change, e.g. {"状态": "完成"}'),
        extra_conditions=scope.conditions,
        protected=scope.protected,
        notes=call.notes,
    )
