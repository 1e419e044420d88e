"""The other names of the datatable skill's actions (spec §3.5, §7.3): data that dispatch.py's normalize_action
reads; the canonical actions are those of the action table (actions/table.py).

Keys are written in normalized form (case-folded, separators as ``_``). The tables are checked at import time: every
alias value is a canonical action, and no two spellings collide once underscores are removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..actions.table import ACTIONS

__all__ = ["ACTION_ALIASES", "AMBIGUOUS_ACTIONS", "COMPACT_ACTIONS"]


def _aliases(table: Mapping[str, Iterable[str]]) -> dict[str, str]:
    flat: dict[str, str] = {}
    for canonical, words in table.items():
        for word in words:
            assert word not in flat or flat[word] == canonical, f"alias {word!r} maps to two actions"
            flat[word] = canonical
    return flat


# Keys are written in normalized form (case-folded, separators as "_"); see normalize_action.
ACTION_ALIASES: dict[str, str] = _aliases(
    {
        "list_tables": (
            "tables",
            "list_table",
            "show_tables",
            "get_tables",
            "all_tables",
            "table_list",
            "list_all_tables",
            "表列表",
            "所有表",
            "全部表",
            "列出表",
            "列出所有表",
            "数据表列表",
            "查看表",
            "查看所有表",
            "有哪些表",
        ),
        "list_columns": (
            "columns",
            "fields",
            "schema",
            "describe",
            "desc",
            "describe_table",
            "table_schema",
            "list_column",
            "list_fields",
            "list_field",
            "get_columns",
            "get_fields",
            "show_columns",
            "show_fields",
            "get_schema",
            "字段",
            "列",
            "字段列表",
            "列信息",
            "表结构",
            "查看字段",
            "查看列",
            "查看表结构",
            "所有字段",
        ),
        "query": (
            "select",
            "find",
            "search",
            "get",
            "fetch",
            "read",
            "lookup",
            "filter",
            "list_rows",
            "get_rows",
            "query_rows",
            "find_rows",
            "search_rows",
            "select_rows",
            "read_rows",
            "list_records",
            "get_records",
            "查询",
            "查",
            "查找",
            "搜索",
            "检索",
            "查数据",
            "查询数据",
            "查询记录",
            "读取",
            "查看数据",
            "筛选",
        ),
        "aggregate": (
            "count",
            "sum",
            "avg",
            "stats",
            "statistics",
            "group",
            "group_by",
            "groupby",
            "agg",
            "aggregation",
            "summarize",
            "summary",
            "统计",
            "汇总",
            "聚合",
            "计数",
            "求和",
            "分组统计",
            "分组",
        ),
        "insert": (
            "add",
            "add_row",
            "create_row",
            "new_row",
            "insert_row",
            "add_record",
            "create_record",
            "new_record",
            "insert_record",
            "insert_one",
            "append",
            "新增",
            "插入",
            "添加",
            "新增记录",
            "新增一行",
            "插入数据",
            "插入记录",
            "添加记录",
            "添加数据",
            "写入",
            "新建记录",
        ),
        "insert_batch": (
            "bulk_insert",
            "batch_insert",
            "insert_many",
            "insert_rows",
            "insert_records",
            "add_rows",
            "add_records",
            "bulk_add",
            "batch_add",
            "批量新增",
            "批量插入",
            "批量添加",
            "批量写入",
        ),
        "insert_from_file": (
            "import",
            "load_file",
            "import_file",
            "insert_file",
            "load",
            "import_csv",
            "import_json",
            "from_file",
            "insert_file_rows",
            "file_import",
            "导入",
            "导入文件",
            "文件导入",
            "从文件导入",
        ),
        "upsert": (
            "merge",
            "insert_or_update",
            "update_or_insert",
            "upsert_rows",
            "upsert_batch",
            "插入或更新",
            "更新或插入",
            "合并",
            "存在则更新",
        ),
        "update": (
            "modify",
            "edit",
            "patch",
            "set",
            "change",
            "update_row",
            "update_record",
            "edit_row",
            "modify_row",
            "更新",
            "修改",
            "编辑",
            "更新记录",
            "修改记录",
            "更新数据",
            "修改数据",
        ),
        "update_by": (
            "update_where",
            "update_by_filter",
            "update_by_filters",
            "update_by_condition",
            "update_many",
            "bulk_update",
            "batch_update",
            "按条件更新",
            "条件更新",
            "批量更新",
            "按条件修改",
            "批量修改",
        ),
        "delete": (
            "remove",
            "del",
            "delete_row",
            "remove_row",
            "drop_row",
            "delete_record",
            "remove_record",
            "delete_one",
            "删除",
            "删除记录",
            "删除行",
            "删行",
            "删除数据",
        ),
        "delete_batch": (
            "bulk_delete",
            "batch_delete",
            "delete_many",
            "delete_rows",
            "delete_records",
            "remove_rows",
            "批量删除",
        ),
        "delete_by": (
            "delete_where",
            "delete_by_filter",
            "delete_by_filters",
            "delete_by_condition",
            "remove_where",
            "按条件删除",
            "条件删除",
        ),
        "sql_query": (
            "sql",
            "select_sql",
            "sql_select",
            "query_sql",
            "raw_sql",
            "run_query",
            "sql_read",
            "查询sql",
            "sql查询",
        ),
        "sql_execute": (
            "exec_sql",
            "run_sql",
            "execute_sql",
            "sql_exec",
            "sql_run",
            "execute",
            "exec",
            "sql_write",
            "执行sql",
            "sql执行",
        ),
        "create_table": (
            "new_table",
            "add_table",
            "make_table",
            "建表",
            "创建表",
            "新建表",
            "创建数据表",
            "新建数据表",
        ),
        "add_field": (
            "add_column",
            "new_field",
            "create_field",
            "add_col",
            "new_column",
            "create_column",
            "加字段",
            "新增字段",
            "添加字段",
            "增加字段",
            "加列",
            "新增列",
            "添加列",
            "增加列",
        ),
        "update_field": (
            "alter_field",
            "modify_field",
            "edit_field",
            "change_field",
            "rename_field",
            "update_column",
            "alter_column",
            "modify_column",
            "rename_column",
            "改字段",
            "修改字段",
            "更新字段",
            "改列",
            "修改列",
            "重命名字段",
        ),
        "delete_field": (
            "drop_field",
            "remove_field",
            "drop_column",
            "delete_column",
            "remove_column",
            "删字段",
            "删除字段",
            "删列",
            "删除列",
        ),
        "delete_table": (
            "drop_table",
            "remove_table",
            "删表",
            "删除表",
            "删除数据表",
        ),
    }
)


# Words that name two different actions; refused with the candidates rather than guessed.
AMBIGUOUS_ACTIONS: dict[str, tuple[str, ...]] = {
    "list": ("list_tables", "query", "list_columns"),
    "show": ("list_tables", "query", "list_columns"),
    "create": ("insert", "create_table"),
    "new": ("insert", "create_table"),
    "drop": ("delete", "delete_field", "delete_table"),
    "查看": ("list_tables", "list_columns", "query"),
}


assert set(ACTION_ALIASES.values()) <= set(ACTIONS), "every action alias must name a canonical action"


assert not set(ACTION_ALIASES) & set(ACTIONS), "a canonical action must not be an alias"


assert all(set(c) <= set(ACTIONS) for c in AMBIGUOUS_ACTIONS.values())


assert not set(AMBIGUOUS_ACTIONS) & (set(ACTION_ALIASES) | set(ACTIONS))


def _compact_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for word, canonical in [*((a, a) for a in ACTIONS), *ACTION_ALIASES.items()]:
        key = word.replace("_", "")
        assert index.get(key, canonical) == canonical, f"{word!r} collides with another action once '_' is removed"
        index[key] = canonical
    return index


COMPACT_ACTIONS = _compact_index()
