"""The datatable skill's parameter keys and their aliases, and the words read as a yes or a no for 确认 (spec §3.5,
§7.3, §7.4): data that dispatch.py's normalize_request reads. Checked at import time: every alias names a canonical
key and no alias is also a canonical key.
"""

from __future__ import annotations

__all__ = [
    "ACTION_KEY_ALIASES",
    "CANONICAL_PARAMS",
    "CONFIRM_KEY",
    "CONFIRM_KEYS",
    "NO_VALUES",
    "PARAM_ALIASES",
    "YES_VALUES",
]


CONFIRM_KEY = "确认"


# Normalized alias key → canonical parameter key.
PARAM_ALIASES: dict[str, str] = {
    # data: a single record (insert / update / update_by / upsert)
    "record": "data",
    "row": "data",
    "values": "data",
    "row_data": "data",
    "record_data": "data",
    # records: a list of records (insert_batch / upsert)
    "rows": "records",
    "items": "records",
    "record_list": "records",
    # filters
    "filter": "filters",
    "where": "filters",
    "conditions": "filters",
    "condition": "filters",
    "filter_by": "filters",
    # sort
    "order_by": "sort",
    "orderby": "sort",
    "order": "sort",
    "sort_by": "sort",
    "sortby": "sort",
    # table name (the handler resolves it to table_id by exact title, §7.3)
    "table": "table_name",
    "table_title": "table_name",
    "tablename": "table_name",
    "表名": "table_name",
    "tableid": "table_id",
    # row ids
    "id": "row_id",
    "rowid": "row_id",
    "record_id": "row_id",
    "recordid": "row_id",
    "ids": "row_ids",
    "rowids": "row_ids",
    "record_ids": "row_ids",
    # structure
    "columns": "fields",
    "field_name": "field_title",
    "fieldname": "field_title",
    "column_name": "field_title",
    "field_patch": "patch",
    # upsert keys
    "key_field": "key_fields",
    "keys": "key_fields",
    "unique_keys": "key_fields",
    "match_fields": "key_fields",
    "conflict_keys": "key_fields",
    # aggregate
    "metric": "metrics",
    "aggregations": "metrics",
    "aggs": "metrics",
    "measures": "metrics",
    "groupby": "group_by",
    "group": "group_by",
    "dimensions": "group_by",
    # paging
    "page_size": "limit",
    "pagesize": "limit",
    "max_rows": "limit",
    "top": "limit",
    "skip": "offset",
    # sql
    "statement": "sql",
    "sql_statement": "sql",
    "sql_text": "sql",
    "raw_sql": "sql",
    # insert_from_file
    "path": "file",
    "file_path": "file",
    "filepath": "file",
    "input_file": "file",
    "filename": "file",
    "column_mapping": "mapping",
    "field_mapping": "mapping",
    "default_values": "defaults",
    # the delete confirmation token (protection.py): "confirmToken" / "Confirm-Token" fold onto it as a canonical key
    "token": "confirm_token",
    "delete_token": "confirm_token",
    # confirmation (value checked separately, see CONFIRM_KEYS)
    "confirm": CONFIRM_KEY,
    "confirmed": CONFIRM_KEY,
    "confirmation": CONFIRM_KEY,
    "approve": CONFIRM_KEY,
    "approved": CONFIRM_KEY,
    "确定": CONFIRM_KEY,
}


# The parameter keys of §7.3 / §7.4 (and 确认); differently spelled forms ("tableId", "Row-ID") fold onto them.
CANONICAL_PARAMS: frozenset[str] = frozenset(
    {
        "table_id",
        "table_name",
        "data",
        "records",
        "filters",
        "sort",
        "limit",
        "offset",
        "row_id",
        "row_ids",
        "fields",
        "field",
        "field_title",
        "patch",
        "key_fields",
        "metrics",
        "group_by",
        "sql",
        "file",
        "mapping",
        "defaults",
        "on_conflict",
        "confirm_token",
        CONFIRM_KEY,
    }
)


assert set(PARAM_ALIASES.values()) <= CANONICAL_PARAMS, "every parameter alias must name a canonical key"


CONFIRM_KEYS: frozenset[str] = frozenset({CONFIRM_KEY, *(k for k, v in PARAM_ALIASES.items() if v == CONFIRM_KEY)})


# Keys that name the action itself.
ACTION_KEY_ALIASES = {"operation": "action", "action_name": "action", "操作": "action"}


YES_VALUES: frozenset[str] = frozenset({"true", "yes", "y", "1", "是", "是的", "确认", "确定", "同意", "ok"})


NO_VALUES: frozenset[str] = frozenset({"false", "no", "n", "0", "否", "不", "取消", "", "none", "null"})


assert CONFIRM_KEY not in PARAM_ALIASES


assert not set(PARAM_ALIASES) & set(PARAM_ALIASES.values()), "an alias must not also be a canonical key"
