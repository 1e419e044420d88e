"""Deleting actions of the datatable skill (spec §7.3, §7.7): delete, delete_batch and delete_by.

More than 10 rows (or an unknown number) in chat mode need a confirm token (:func:`confirmation`, also used by
sql_execute's DELETE); the rows are backed up to the workspace before they go (:func:`write_backup`).
"""

from __future__ import annotations

from typing import Any

from ..rows import read as rows_read
from ..rows import write as rows_write
from ..store import schema as store_schema
from . import protection
from .call import Call, require, table_scope

__all__ = ["confirmation", "delete", "delete_batch", "delete_by", "write_backup"]


async def confirmation(call: Call, affected: int | None) -> dict[str, Any] | None:
    """None when the delete may go ahead; else the confirm_token reply (nothing deleted).

    A given confirm_token is redeemed (bound to the action and the exact parameters, single use); without one, a
    chat-mode delete of more than 10 rows (or an unknown number) gets a new token.
    """
    token = call.params.get("confirm_token")
    if token is not None and token != "":
        await protection.redeem_token(call.conn, call.schema, token, call.action, call.params)
        return None
    if not protection.needs_confirmation(call.chat_mode, affected):
        return None
    return await protection.issue_token(call.conn, call.schema, call.action, call.params, affected)


def write_backup(call: Call, title: str, backup: list[dict[str, Any]]) -> str | None:
    path = protection.backup_rows(call.workspace, title, backup)
    return None if path is None else str(path)


async def delete(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    row_id = require(call, "row_id", "the id of the row to delete (several: delete_batch with row_ids)")
    if isinstance(row_id, list):
        raise store_schema.StoreError(
            "row_id is one id; to delete several rows use delete_batch with row_ids", need_param="row_id"
        )
    deleted = await rows_write.delete_rows(call.conn, scope.table, row_ids=[row_id], extra_conditions=scope.conditions)
    if not deleted:
        raise store_schema.StoreError(
            f"no row with id {row_id!r} in table {scope.table.title!r}"
            + (" among your own rows" if scope.conditions else "")
            + "; query the table for the right id",
            need_param="row_id",
        )
    return {"data": True, "deleted": deleted}


async def delete_batch(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    row_ids = require(call, "row_ids", "the ids of the rows to delete, e.g. [3, 7]")
    requested = len(set(map(str, row_ids))) if isinstance(row_ids, list) else 1
    pending = await confirmation(call, requested)
    if pending is not None:
        return pending
    backup = await rows_read.fetch_rows(call.conn, scope.table, row_ids=row_ids, extra_conditions=scope.conditions)
    backup_file = write_backup(call, scope.table.title, backup)
    deleted = await rows_write.delete_rows(call.conn, scope.table, row_ids=row_ids, extra_conditions=scope.conditions)
    return {"deleted": deleted, "requested": requested, "backup_file": backup_file}


async def delete_by(call: Call) -> dict[str, Any]:
    scope = await table_scope(call)
    filters = require(call, "filters", 'which rows, e.g. [{"field": "状态", "op": "eq", "value": "作废"}]')
    matched = await rows_read.count_matching(call.conn, scope.table, filters, scope.conditions, notes=call.notes)
    pending = await confirmation(call, matched)
    if pending is not None:
        return pending
    backup = await rows_read.fetch_rows(call.conn, scope.table, filters=filters, extra_conditions=scope.conditions)
    backup_file = write_backup(call, scope.table.title, backup)
    deleted = await rows_write.delete_rows(call.conn, scope.table, filters=filters, extra_conditions=scope.conditions)
    return {"deleted": deleted, "backup_file": backup_file}
