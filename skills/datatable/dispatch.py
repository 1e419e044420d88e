"""Request normalization of the datatable skill (spec §3.5, §7, §7.3): action and parameter-key aliases, payload
flattening, the 确认 (confirmation) rules and the dry-run (preview) reply. Pure Python, no database.

Input is ``{"action": "<name>", "payload": {...}}``; payload parameters may also sit flat at the top level.
:func:`normalize_request` turns it into a :class:`Request` with a canonical action from :data:`ACTIONS`, canonical
parameter keys and one human-readable note per normalization (``"delete-row → delete"``, ``"filter → filters"``);
the handler joins :attr:`Request.notes` into the envelope's ``action_note``. Anything that cannot be read is a
:class:`DispatchError` with ``need_param`` and a fix, never a guess: no action is never defaulted from the shape of
the parameters (§3.5 point 3), and an ambiguous word (``list``, ``create``, ``drop``, ``show``, ``new``) is refused
with its candidates instead of being mapped onto one of them.

Decisions (documented here so the handler and the tests agree):

* **Action matching** — trimmed, case-folded, camelCase split, ``-`` / space / ``.`` / ``/`` equivalent to ``_``;
  then looked up as a canonical action, then in :data:`ACTION_ALIASES`; last, the same key with every ``_``
  removed is tried (``listTables`` / ``list tables`` / ``删除 表``). The tables are checked at import time: every
  alias value is a canonical action, and no two spellings collide once underscores are removed.
* **确认 prefix** — an action starting with ``确认`` (or its literal English rendering ``confirm`` / ``confirmed``
  followed by a separator, e.g. ``confirm_delete_table``) has the prefix stripped, the rest normalized, and
  ``confirmed=True`` with a note. A bare ``确认`` is not an action (``need_param: action``). If the caller also
  passed an explicit *no* (``确认=false``) that explicit value wins and nothing is confirmed.
* **确认 from the caller** — only the keys in :data:`CONFIRM_KEYS` (confirm / confirmed / approve / approved /
  确定 / 确认 …) count, and only with a yes value (``True``, ``1``, ``"true"``, ``"yes"``, ``"是"``, ``"确认"`` …,
  see :data:`YES_VALUES`). The key is rewritten to ``确认`` holding a bool. Any other value (a sentence such as
  ``"确认初始化"``, ``"maybe"``) is *not* a confirmation and gets a note; nothing else in the input — other fields,
  a previous successful preview — is ever read as a confirmation.
* **Parameter keys** — see :data:`PARAM_ALIASES`. Keys are matched after the same trim / case-fold / camelCase /
  separator folding as actions; unknown keys pass through untouched. ``fields`` is create_table's field list and
  is never aliased *away*; ``columns`` maps onto it (no other action takes a column list). ``field`` (add_field's
  definition) is untouched. When a key is given both as an alias and canonically, the canonical key wins and a note
  says the alias was ignored; two aliases of one key without the canonical one → the first wins, the rest noted.
* **Payload flattening** — ``payload`` may be a mapping, a JSON text of an object, or empty (``None`` / ``""`` /
  ``"null"``). Anything else is a :class:`DispatchError` with ``need_param="payload"``. Its keys are merged with the
  top-level ones; on a conflict **the payload wins** (it is the documented place, §7) and a note names the key —
  only when the two values differ.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ACTIONS",
    "ACTION_ALIASES",
    "AMBIGUOUS_ACTIONS",
    "CANONICAL_PARAMS",
    "CONFIRM_KEY",
    "CONFIRM_KEYS",
    "DESTRUCTIVE_STRUCTURE_ACTIONS",
    "PARAM_ALIASES",
    "YES_VALUES",
    "DispatchError",
    "Request",
    "dry_run",
    "is_destructive_structure",
    "needs_confirmation",
    "normalize_action",
    "normalize_request",
]

ACTIONS: tuple[str, ...] = (
    "list_tables",
    "list_columns",
    "query",
    "aggregate",
    "insert",
    "insert_batch",
    "insert_from_file",
    "upsert",
    "update",
    "update_by",
    "delete",
    "delete_batch",
    "delete_by",
    "sql_query",
    "sql_execute",
    "create_table",
    "add_field",
    "update_field",
    "delete_field",
    "delete_table",
)

CONFIRM_KEY = "确认"


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


_COMPACT_ACTIONS = _compact_index()

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
        CONFIRM_KEY,
    }
)
assert set(PARAM_ALIASES.values()) <= CANONICAL_PARAMS, "every parameter alias must name a canonical key"

CONFIRM_KEYS: frozenset[str] = frozenset({CONFIRM_KEY, *(k for k, v in PARAM_ALIASES.items() if v == CONFIRM_KEY)})

# Keys that name the action itself.
_ACTION_KEY_ALIASES = {"operation": "action", "action_name": "action", "操作": "action"}

YES_VALUES: frozenset[str] = frozenset({"true", "yes", "y", "1", "是", "是的", "确认", "确定", "同意", "ok"})
_NO_VALUES: frozenset[str] = frozenset({"false", "no", "n", "0", "否", "不", "取消", "", "none", "null"})

assert CONFIRM_KEY not in PARAM_ALIASES
assert not set(PARAM_ALIASES) & set(PARAM_ALIASES.values()), "an alias must not also be a canonical key"

DESTRUCTIVE_STRUCTURE_ACTIONS: frozenset[str] = frozenset({"delete_table", "delete_field"})

# 确认…, or the English rendering confirm/confirmed followed by a separator, a capital (camelCase) or a CJK character.
_CONFIRM_PREFIX = re.compile(r"^\s*(?:确认|(?i:confirm(?:ed)?)(?=[\s_\-.:/：]|[A-Z]|[\u4e00-\u9fff]))[\s_\-.:/：，,]*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[\s\-./]+")


class DispatchError(ValueError):
    """An input that cannot be dispatched; ``str(error)`` says the fix. Always recoverable by changing parameters."""

    def __init__(
        self,
        message: str,
        *,
        need_param: str | None = None,
        error_type: str = "recoverable",
        notes: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.need_param = need_param
        self.error_type = error_type
        self.notes = tuple(notes)

    def to_envelope(self) -> dict[str, Any]:
        """The §6.1 failure envelope for this error (``action_note`` when normalizations happened first)."""
        envelope: dict[str, Any] = {"ok": False, "success": False, "error": self.message, "error_type": self.error_type}
        if self.need_param is not None:
            envelope["need_param"] = self.need_param
        if self.need_param == "action":
            envelope["supported_actions"] = list(ACTIONS)
        if self.notes:
            envelope["action_note"] = "; ".join(self.notes)
        return envelope


@dataclass(frozen=True)
class Request:
    """A normalized request: canonical action, canonical parameter keys, the notes, and whether 确认=true was given."""

    action: str
    params: dict[str, Any]
    notes: tuple[str, ...]
    confirmed: bool

    @property
    def action_note(self) -> str | None:
        return "; ".join(self.notes) if self.notes else None


def _fold(text: str) -> str:
    text = _CAMEL.sub("_", text.strip())
    text = _SEPARATORS.sub("_", text.casefold())
    return re.sub(r"_+", "_", text).strip("_")


def _action_list() -> str:
    return ", ".join(ACTIONS)


def normalize_action(raw: str) -> str:
    """The canonical action for ``raw`` (no 确认 prefix handling); :class:`DispatchError` when unknown/ambiguous."""
    key = _fold(raw)
    if key in ACTIONS:
        return key
    if key in ACTION_ALIASES:
        return ACTION_ALIASES[key]
    compact = key.replace("_", "")
    if compact in AMBIGUOUS_ACTIONS or key in AMBIGUOUS_ACTIONS:
        candidates = AMBIGUOUS_ACTIONS.get(key) or AMBIGUOUS_ACTIONS[compact]
        raise DispatchError(
            f"action {raw!r} is ambiguous: it could mean {' / '.join(candidates)}. "
            f"Pass one of the supported actions: {_action_list()}.",
            need_param="action",
        )
    if compact in _COMPACT_ACTIONS:
        return _COMPACT_ACTIONS[compact]
    close = difflib.get_close_matches(key, [*ACTIONS, *ACTION_ALIASES], n=1, cutoff=0.8)
    hint = ""
    if close:
        guess = ACTION_ALIASES.get(close[0], close[0])
        hint = f" Closest supported action: {guess}."
    raise DispatchError(
        f"unknown action {raw!r}.{hint} Pass one of the supported actions: {_action_list()}.",
        need_param="action",
    )


def _read_payload(payload: Any) -> dict[str, Any]:
    if payload is None:
        return {}
    if isinstance(payload, str):
        text = payload.strip()
        if not text:
            return {}
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DispatchError(
                f"payload is a text that is not valid JSON ({exc.msg} at position {exc.pos}); pass payload as an "
                'object, e.g. {"action": "query", "payload": {"table_id": "…"}}, '
                "or put the parameters at the top level.",
                need_param="payload",
            ) from None
        if decoded is None:
            return {}
        payload = decoded
        if not isinstance(payload, Mapping):
            raise DispatchError(
                f"payload is JSON text of a {type(payload).__name__}, not of an object; pass payload as an object "
                "of parameters, or put the parameters at the top level.",
                need_param="payload",
            )
    if not isinstance(payload, Mapping):
        raise DispatchError(
            f"payload must be an object of parameters, got {type(payload).__name__}; pass payload as an object "
            '(e.g. {"table_id": "…", "data": {…}}) or put the parameters at the top level.',
            need_param="payload",
        )
    for key in payload:
        if not isinstance(key, str):
            raise DispatchError(f"payload keys must be text, got {key!r}.", need_param="payload")
    return dict(payload)


def _confirm_value(value: Any) -> bool | None:
    """True / False for a recognized yes / no, None for anything else (never a confirmation)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value == 1 if value in (0, 1) else None
    if value is None:
        return False
    if isinstance(value, str):
        folded = value.strip().casefold()
        if folded in YES_VALUES:
            return True
        if folded in _NO_VALUES:
            return False
    return None


def _canonical_key(key: str) -> str:
    if key == CONFIRM_KEY or key in CANONICAL_PARAMS:
        return key
    folded = _fold(key)
    if folded in PARAM_ALIASES:
        return PARAM_ALIASES[folded]
    if folded in CANONICAL_PARAMS:  # "Table_ID", "tableId", "row-id"
        return folded
    return key


def _normalize_params(merged: Mapping[str, Any], notes: list[str]) -> tuple[dict[str, Any], bool | None]:
    """Canonical keys for ``merged``; returns (params, caller's 确认: True / False / None when not given)."""
    canonical_present = {key for key in merged if _canonical_key(key) == key}
    params: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, value in merged.items():
        target = _canonical_key(key)
        if target == key:
            params[key] = value
            continue
        if target in canonical_present:
            notes.append(f"{key} ignored: {target} was also given")
            continue
        if target in sources:
            notes.append(f"{key} ignored: {sources[target]} → {target} was already used")
            continue
        sources[target] = key
        params[target] = value
        notes.append(f"{key} → {target}")
    confirm: bool | None = None
    if CONFIRM_KEY in params:
        raw = params[CONFIRM_KEY]
        value = _confirm_value(raw)
        if value is None:  # unreadable: not a confirmation, and not an explicit "no" either
            notes.append(f"{CONFIRM_KEY}={raw!r} is not a yes/no value; treated as not confirmed")
            params[CONFIRM_KEY] = False
        else:
            if not isinstance(raw, bool):
                notes.append(f"{CONFIRM_KEY}={raw!r} → {CONFIRM_KEY}={'true' if value else 'false'}")
            params[CONFIRM_KEY] = value
            confirm = value
    return params, confirm


def normalize_request(input: Mapping[str, Any]) -> Request:
    """Normalize ``{"action": …, "payload": {…}, …flat params}`` into a :class:`Request` (rules: module docstring)."""
    if not isinstance(input, Mapping):
        raise DispatchError(
            f'input must be an object like {{"action": "query", "payload": {{…}}}}, got {type(input).__name__}.',
            need_param="action",
        )
    notes: list[str] = []
    top = {k: v for k, v in input.items() if k != "payload"}
    payload = _read_payload(input.get("payload"))
    if isinstance(input.get("payload"), str) and payload:
        notes.append("payload JSON text → object")
    merged: dict[str, Any] = dict(top)
    for key, value in payload.items():
        if key in merged and merged[key] != value:
            notes.append(f"{key} given at top level and in payload; the payload value was used")
        merged[key] = value

    # The action itself (and its key aliases).
    raw_action: Any = merged.pop("action", None)
    for alias, target in _ACTION_KEY_ALIASES.items():
        if alias in merged:
            value = merged.pop(alias)
            if raw_action is None or (isinstance(raw_action, str) and not raw_action.strip()):
                raw_action = value
                notes.append(f"{alias} → {target}")
            else:
                notes.append(f"{alias} ignored: action was also given")
    if raw_action is None or (isinstance(raw_action, str) and not raw_action.strip()):
        raise DispatchError(
            f"no action given; the action is never guessed from the parameters. "
            f"Pass one of the supported actions: {_action_list()}.",
            need_param="action",
            notes=notes,
        )
    if not isinstance(raw_action, str):
        raise DispatchError(
            f"action must be a text naming one action, got {type(raw_action).__name__}. "
            f"Supported actions: {_action_list()}.",
            need_param="action",
            notes=notes,
        )

    params, caller_confirm = _normalize_params(merged, notes)

    prefixed = False
    action_text = raw_action
    match = _CONFIRM_PREFIX.match(raw_action)
    if match:
        action_text = raw_action[match.end() :]
        prefixed = True
        if not action_text.strip():
            raise DispatchError(
                f"action {raw_action!r} confirms nothing: name the action to confirm (e.g. 确认删除表). "
                f"Supported actions: {_action_list()}.",
                need_param="action",
                notes=notes,
            )
    try:
        action = normalize_action(action_text)
    except DispatchError as exc:
        message = exc.message
        if prefixed:
            message += f" (received {raw_action!r}: a leading 确认 only confirms one of these actions.)"
        raise DispatchError(message, need_param="action", notes=notes) from None
    if action != raw_action.strip():  # the action's own note goes first: it is the one the model most needs
        suffix = f" + {CONFIRM_KEY}=true" if prefixed and caller_confirm is not False else ""
        notes.insert(0, f"{raw_action.strip()} → {action}{suffix}")

    confirmed = caller_confirm is True
    if prefixed:
        if caller_confirm is False:
            notes.append(f"the {raw_action.strip()!r} prefix is overridden by the explicit {CONFIRM_KEY}=false")
        else:
            confirmed = True
            params[CONFIRM_KEY] = True
    return Request(action=action, params=params, notes=tuple(notes), confirmed=confirmed)


_DEFAULT_FOR_USER = (
    "确认执行：回复「确认」后按相同参数执行",
    "取消：不做任何改动",
    "修改参数后重新预演",
)


def dry_run(request: Request, would: str, *, for_user: Sequence[str] | None = None) -> dict[str, Any]:
    """The preview reply (§3.5 points 5–6): echoes the parameters, says it only previewed because 确认=true is
    missing, and lists follow-ups for the *user* (no imperative next steps addressed to the model)."""
    what = would.strip().rstrip("。.") or request.action
    reply: dict[str, Any] = {
        "ok": True,
        "success": True,
        "dry_run": True,
        "action": request.action,
        "received": dict(request.params),
        "message": (
            f"Nothing was changed: {request.action} was only previewed because 确认=true is missing. "
            f"Only if the user confirms, the same parameters and 确认=true will {what}."
        ),
        "user_message": f"仅预演，未做任何改动（缺少 确认=true）。用户确认后才会执行：{what}。",
        "for_user": list(for_user if for_user is not None else _DEFAULT_FOR_USER),
    }
    if request.notes:
        reply["action_note"] = "; ".join(request.notes)
    return reply


def is_destructive_structure(action: str, *, type_change: bool = False) -> bool:
    """delete_table, delete_field, and update_field when it changes a field's type."""
    return action in DESTRUCTIVE_STRUCTURE_ACTIONS or (action == "update_field" and type_change)


def needs_confirmation(request: Request, *, type_change: bool = False) -> bool:
    """True when the request is a destructive structure action without 确认=true: the handler must only preview
    (:func:`dry_run`). ``type_change`` is the handler's finding that an update_field patch changes the type."""
    return is_destructive_structure(request.action, type_change=type_change) and not request.confirmed
