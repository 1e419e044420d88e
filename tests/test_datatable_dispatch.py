"""The datatable skill's request normalization: action / key aliases, payload flattening, 确认, dry run (§3.5, §7)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from support.datatable import FOLDER, load_datatable_module

action_aliases = load_datatable_module("action_aliases")
dispatch = load_datatable_module("dispatch")
param_aliases = load_datatable_module("param_aliases")
ACTIONS = action_aliases.ACTIONS
ACTION_ALIASES = action_aliases.ACTION_ALIASES
PARAM_ALIASES = param_aliases.PARAM_ALIASES
CONFIRM_KEY = param_aliases.CONFIRM_KEY
DispatchError = dispatch.DispatchError
Request = dispatch.Request
normalize_request = dispatch.normalize_request
dry_run = dispatch.dry_run
needs_confirmation = dispatch.needs_confirmation


def req(action: Any = None, **params: Any) -> Any:
    data = dict(params)
    if action is not None:
        data["action"] = action
    return normalize_request(data)


# ---------------------------------------------------------------- the tables


def test_canonical_actions_are_exactly_the_spec_list() -> None:
    spec = (
        "list_tables list_columns query aggregate insert insert_batch insert_from_file upsert update update_by "
        "delete delete_batch delete_by sql_query sql_execute create_table add_field update_field delete_field "
        "delete_table"
    )
    assert isinstance(ACTIONS, tuple)
    assert list(ACTIONS) == spec.split()


def test_alias_values_are_canonical_and_the_module_asserts_it() -> None:
    assert set(ACTION_ALIASES.values()) <= set(ACTIONS)
    tree = ast.parse((FOLDER / "action_aliases.py").read_text(encoding="utf-8"))
    asserts = [ast.unparse(node.test) for node in tree.body if isinstance(node, ast.Assert)]
    assert "set(ACTION_ALIASES.values()) <= set(ACTIONS)" in asserts


def test_every_alias_normalizes_to_its_value() -> None:
    for alias, canonical in ACTION_ALIASES.items():
        assert req(alias).action == canonical, alias


def test_every_canonical_action_passes_without_a_note() -> None:
    assert req("  query ").notes == ()  # surrounding blanks are not worth a note
    for action in ACTIONS:
        request = req(action)
        assert request.action == action
        assert request.notes == ()
        assert request.confirmed is False


def test_no_skillyard_import() -> None:
    for name in ("dispatch.py", "action_aliases.py", "param_aliases.py"):
        source = Path(FOLDER / name).read_text(encoding="utf-8")
        assert "skillyard" not in source.replace("skillyard.builtin", ""), name


# ---------------------------------------------------------------- action aliases


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("Query", "query"),
        ("QUERY", "query"),
        ("list-tables", "list_tables"),
        ("list tables", "list_tables"),
        ("listTables", "list_tables"),
        ("ListColumns", "list_columns"),
        ("insert-from-file", "insert_from_file"),
        ("Delete Table", "delete_table"),
        ("delete-row", "delete"),
        ("deleteRow", "delete"),
        ("sql.query", "sql_query"),
    ],
)
def test_case_and_separators(raw: str, canonical: str) -> None:
    request = req(raw)
    assert request.action == canonical
    assert request.notes[0] == f"{raw.strip()} → {canonical}"


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("select", "query"),
        ("find", "query"),
        ("search", "query"),
        ("get", "query"),
        ("add", "insert"),
        ("add_row", "insert"),
        ("create-row", "insert"),
        ("new row", "insert"),
        ("bulk_insert", "insert_batch"),
        ("import", "insert_from_file"),
        ("load_file", "insert_from_file"),
        ("merge", "upsert"),
        ("modify", "update"),
        ("edit", "update"),
        ("patch", "update"),
        ("update_where", "update_by"),
        ("remove", "delete"),
        ("drop row", "delete"),
        ("bulk_delete", "delete_batch"),
        ("delete_where", "delete_by"),
        ("sql", "sql_query"),
        ("select_sql", "sql_query"),
        ("exec_sql", "sql_execute"),
        ("run_sql", "sql_execute"),
        ("new_table", "create_table"),
        ("drop_table", "delete_table"),
        ("describe", "list_columns"),
        ("columns", "list_columns"),
        ("schema", "list_columns"),
        ("tables", "list_tables"),
        ("show_tables", "list_tables"),
        ("count", "aggregate"),
        ("sum", "aggregate"),
        ("stats", "aggregate"),
        ("group", "aggregate"),
        ("add_column", "add_field"),
        ("alter_field", "update_field"),
        ("drop_column", "delete_field"),
    ],
)
def test_english_synonyms(raw: str, canonical: str) -> None:
    request = req(raw)
    assert request.action == canonical
    assert request.notes == (f"{raw} → {canonical}",)


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("查询", "query"),
        ("查", "query"),
        ("统计", "aggregate"),
        ("汇总", "aggregate"),
        ("新增", "insert"),
        ("插入", "insert"),
        ("添加", "insert"),
        ("批量新增", "insert_batch"),
        ("批量插入", "insert_batch"),
        ("导入", "insert_from_file"),
        ("更新", "update"),
        ("修改", "update"),
        ("按条件更新", "update_by"),
        ("删除", "delete"),
        ("批量删除", "delete_batch"),
        ("按条件删除", "delete_by"),
        ("建表", "create_table"),
        ("创建表", "create_table"),
        ("删表", "delete_table"),
        ("删除表", "delete_table"),
        ("删除 表", "delete_table"),
        ("加字段", "add_field"),
        ("新增字段", "add_field"),
        ("改字段", "update_field"),
        ("修改字段", "update_field"),
        ("删字段", "delete_field"),
        ("删除字段", "delete_field"),
        ("表列表", "list_tables"),
        ("所有表", "list_tables"),
        ("字段", "list_columns"),
        ("列", "list_columns"),
        ("执行SQL", "sql_execute"),
        ("执行sql", "sql_execute"),
        ("查询SQL", "sql_query"),
        ("SQL查询", "sql_query"),
    ],
)
def test_chinese_words(raw: str, canonical: str) -> None:
    request = req(raw)
    assert request.action == canonical
    assert request.notes == (f"{raw} → {canonical}",)
    assert request.confirmed is False


@pytest.mark.parametrize("raw", ["list", "show", "create", "new", "drop", "查看", "List"])
def test_ambiguous_words_are_refused_with_candidates(raw: str) -> None:
    with pytest.raises(DispatchError) as info:
        req(raw)
    error = info.value
    assert error.need_param == "action"
    assert error.error_type == "recoverable"
    assert "ambiguous" in str(error)
    for action in ACTIONS:
        assert action in str(error)


@pytest.mark.parametrize("raw", ["frobnicate", "初始化", "确认初始化", "deleteAll"])
def test_unknown_action_lists_the_actions(raw: str) -> None:
    with pytest.raises(DispatchError) as info:
        req(raw, table_id="t")
    error = info.value
    assert error.need_param == "action"
    assert error.error_type == "recoverable"
    assert raw in str(error)
    assert all(action in str(error) for action in ACTIONS)


def test_unknown_action_suggests_a_close_match() -> None:
    with pytest.raises(DispatchError, match="Closest supported action: insert_batch"):
        req("insert_bach")


@pytest.mark.parametrize("data", [{}, {"action": ""}, {"action": "   "}, {"action": None}])
def test_no_action_is_never_guessed(data: dict[str, Any]) -> None:
    # even a shape that looks like an insert or an update is refused
    with pytest.raises(DispatchError) as info:
        normalize_request({**data, "table_id": "t", "data": {"a": 1}, "row_id": 3})
    error = info.value
    assert error.need_param == "action"
    assert "no action" in str(error)
    assert all(action in str(error) for action in ACTIONS)
    envelope = error.to_envelope()
    assert envelope["ok"] is False and envelope["success"] is False
    assert envelope["need_param"] == "action"
    assert envelope["supported_actions"] == list(ACTIONS)
    assert envelope["error_type"] == "recoverable"
    assert envelope["error"]


@pytest.mark.parametrize("bad", [3, ["query"], {"name": "query"}, True])
def test_non_text_action_is_refused(bad: Any) -> None:
    with pytest.raises(DispatchError) as info:
        req(bad)
    assert info.value.need_param == "action"


def test_action_key_alias_and_the_action_in_the_payload() -> None:
    request = normalize_request({"operation": "查询", "table_id": "t"})
    assert request.action == "query"
    assert "operation → action" in request.notes
    assert normalize_request({"payload": {"action": "query", "table_id": "t"}}).action == "query"


def test_not_a_mapping_input() -> None:
    with pytest.raises(DispatchError) as info:
        normalize_request(["query"])  # type: ignore[arg-type]
    assert info.value.need_param == "action"


# ---------------------------------------------------------------- parameter keys


@pytest.mark.parametrize(
    ("key", "canonical"),
    [
        ("record", "data"),
        ("row", "data"),
        ("values", "data"),
        ("rows", "records"),
        ("filter", "filters"),
        ("where", "filters"),
        ("conditions", "filters"),
        ("order_by", "sort"),
        ("orderBy", "sort"),
        ("order", "sort"),
        ("table", "table_name"),
        ("table_title", "table_name"),
        ("tableTitle", "table_name"),
        ("id", "row_id"),
        ("rowid", "row_id"),
        ("record_id", "row_id"),
        ("ids", "row_ids"),
        ("columns", "fields"),
        ("field_name", "field_title"),
        ("keys", "key_fields"),
        ("page_size", "limit"),
        ("statement", "sql"),
        ("file_path", "file"),
        ("tableId", "table_id"),
        ("Table_ID", "table_id"),
        ("row-id", "row_id"),
    ],
)
def test_param_key_aliases(key: str, canonical: str) -> None:
    value = {"x": 1}
    request = req("query", **{key: value})
    assert request.params == {canonical: value}
    assert request.notes == (f"{key} → {canonical}",)


def test_param_alias_values_are_canonical_keys() -> None:
    assert set(PARAM_ALIASES.values()) <= param_aliases.CANONICAL_PARAMS
    assert "fields" not in PARAM_ALIASES  # create_table's field list is never aliased away
    assert "field" not in PARAM_ALIASES  # add_field's definition


def test_canonical_and_unknown_keys_pass_untouched() -> None:
    params = {"table_id": "t", "fields": [{"title": "a"}], "field": {"title": "b"}, "部门": "研发", "extra": 1}
    request = req("create_table", **params)
    assert request.params == params
    assert request.notes == ()


def test_canonical_key_wins_over_alias() -> None:
    request = req("query", filter=[{"field": "a"}], filters=[{"field": "b"}])
    assert request.params == {"filters": [{"field": "b"}]}
    assert request.notes == ("filter ignored: filters was also given",)


def test_first_of_two_aliases_wins() -> None:
    request = normalize_request({"action": "insert", "record": {"a": 1}, "row": {"a": 2}})
    assert request.params == {"data": {"a": 1}}
    assert request.notes == ("record → data", "row ignored: record → data was already used")


def test_table_name_keys_are_normalized_not_resolved() -> None:
    request = req("query", table="客户")
    assert request.params == {"table_name": "客户"}
    request = req("query", table_title="客户", table_name="订单")
    assert request.params == {"table_name": "订单"}


# ---------------------------------------------------------------- payload flattening


def test_payload_and_top_level_merge() -> None:
    request = normalize_request({"action": "update", "table_id": "t", "payload": {"row_id": 3, "data": {"a": 1}}})
    assert request.params == {"table_id": "t", "row_id": 3, "data": {"a": 1}}
    assert request.notes == ()


def test_payload_wins_on_conflict_with_a_note() -> None:
    request = normalize_request({"action": "query", "table_id": "top", "payload": {"table_id": "inner"}})
    assert request.params == {"table_id": "inner"}
    assert request.notes == ("table_id given at top level and in payload; the payload value was used",)
    same = normalize_request({"action": "query", "table_id": "t", "payload": {"table_id": "t"}})
    assert same.notes == ()


def test_alias_in_payload_and_canonical_at_top() -> None:
    request = normalize_request({"action": "query", "filters": [1], "payload": {"filter": [2]}})
    assert request.params == {"filters": [1]}
    assert request.notes == ("filter ignored: filters was also given",)


def test_json_text_payload() -> None:
    request = normalize_request({"action": "insert", "payload": '{"table_id": "t", "record": {"名称": "甲"}}'})
    assert request.params == {"table_id": "t", "data": {"名称": "甲"}}
    assert request.notes == ("payload JSON text → object", "record → data")


@pytest.mark.parametrize("empty", [None, "", "  ", "null", {}])
def test_empty_payloads(empty: Any) -> None:
    request = normalize_request({"action": "list_tables", "payload": empty})
    assert request.params == {}
    assert request.notes == ()


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not of an object"),
        ('"text"', "not of an object"),
        ([{"table_id": "t"}], "must be an object"),
        (5, "must be an object"),
        ({1: "x"}, "keys must be text"),
    ],
)
def test_bad_payloads_are_clear_errors(payload: Any, fragment: str) -> None:
    with pytest.raises(DispatchError) as info:
        normalize_request({"action": "query", "payload": payload})
    assert info.value.need_param == "payload"
    assert info.value.error_type == "recoverable"
    assert fragment in str(info.value)
    assert info.value.to_envelope()["need_param"] == "payload"


# ---------------------------------------------------------------- 确认


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("确认删除表", "delete_table"),
        ("确认 删除字段", "delete_field"),
        ("确认：delete_table", "delete_table"),
        ("确认delete-table", "delete_table"),
        ("confirm_delete_table", "delete_table"),
        ("Confirm delete field", "delete_field"),
        ("confirmDeleteTable", "delete_table"),
        ("确认按条件删除", "delete_by"),
    ],
)
def test_confirm_prefix(raw: str, canonical: str) -> None:
    request = req(raw, table_id="t")
    assert request.action == canonical
    assert request.confirmed is True
    assert request.params == {"table_id": "t", CONFIRM_KEY: True}
    assert request.notes[0] == f"{raw} → {canonical} + 确认=true"


@pytest.mark.parametrize("raw", ["确认", " 确认 ", "confirm_"])
def test_bare_confirm_is_not_an_action(raw: str) -> None:
    with pytest.raises(DispatchError) as info:
        req(raw)
    assert info.value.need_param == "action"


def test_confirmation_word_is_not_a_prefix_of_other_words() -> None:
    with pytest.raises(DispatchError):
        req("confirmation")  # not "confirm" + "ation"


@pytest.mark.parametrize("key", ["confirm", "confirmed", "approve", "approved", "确定", "确认", "Confirm"])
@pytest.mark.parametrize("value", [True, "true", "TRUE", "是", "yes", 1, "1", "确认"])
def test_caller_confirm_keys(key: str, value: Any) -> None:
    request = req("delete_table", table_id="t", **{key: value})
    assert request.confirmed is True
    assert request.params == {"table_id": "t", CONFIRM_KEY: True}
    if key != CONFIRM_KEY:
        assert f"{key} → 确认" in request.notes


@pytest.mark.parametrize("value", [False, "false", "否", "no", 0, None])
def test_caller_no(value: Any) -> None:
    request = req("delete_table", table_id="t", confirm=value)
    assert request.confirmed is False
    assert request.params[CONFIRM_KEY] is False


@pytest.mark.parametrize("value", ["确认初始化", "maybe", 2, ["true"], {"ok": True}])
def test_unreadable_confirm_value_is_not_a_confirmation(value: Any) -> None:
    request = req("delete_table", table_id="t", **{CONFIRM_KEY: value})
    assert request.confirmed is False
    assert request.params[CONFIRM_KEY] is False
    assert any("not a yes/no value" in note for note in request.notes)


def test_confirmation_is_never_inferred() -> None:
    for params in (
        {"note": "确认初始化"},
        {"message": "确认", "comment": "yes"},
        {"data": {"确认": True}},
        {"dry_run": False},
        {"preview": "done", "status": "confirmed"},
    ):
        request = req("delete_table", table_id="t", **params)
        assert request.confirmed is False, params
        assert CONFIRM_KEY not in request.params
    # a sentence as the action is not a confirmation of anything
    with pytest.raises(DispatchError):
        req("确认初始化")


def test_explicit_no_overrides_the_prefix() -> None:
    request = req("确认删除表", table_id="t", 确认=False)
    assert request.confirmed is False
    assert request.params[CONFIRM_KEY] is False
    assert request.notes[0] == "确认删除表 → delete_table"
    assert any("overridden" in note for note in request.notes)


def test_prefix_plus_unreadable_value_still_confirms() -> None:
    request = req("确认删除表", table_id="t", confirm="用户说确认")
    assert request.confirmed is True
    assert request.params[CONFIRM_KEY] is True


def test_two_confirm_keys_canonical_wins() -> None:
    request = req("delete_table", 确认=False, confirm=True)
    assert request.confirmed is False
    assert "confirm ignored: 确认 was also given" in request.notes


# ---------------------------------------------------------------- needs_confirmation / dry run


def test_needs_confirmation() -> None:
    assert needs_confirmation(req("delete_table", table_id="t")) is True
    assert needs_confirmation(req("delete_field", table_id="t", field_title="a")) is True
    assert needs_confirmation(req("update_field", table_id="t")) is False
    assert needs_confirmation(req("update_field", table_id="t"), type_change=True) is True
    assert needs_confirmation(req("update_field", table_id="t", 确认=True), type_change=True) is False
    assert needs_confirmation(req("确认删除表", table_id="t")) is False
    for action in ("query", "insert", "delete", "delete_by", "create_table", "add_field", "sql_execute"):
        assert needs_confirmation(req(action)) is False


def test_dry_run_echoes_and_says_why() -> None:
    request = normalize_request({"action": "drop-table", "payload": {"table": "客户", "confirm": "no"}})
    reply = dry_run(request, "delete table 客户 and all its rows")
    assert reply["ok"] is True and reply["dry_run"] is True
    assert reply["action"] == "delete_table"
    assert reply["received"] == {"table_name": "客户", CONFIRM_KEY: False}
    assert reply["received"] is not request.params
    assert "only previewed because 确认=true is missing" in reply["message"]
    assert "the same parameters and 确认=true" in reply["message"]
    assert "delete table 客户 and all its rows" in reply["message"]
    assert "Nothing was changed" in reply["message"]
    assert (
        reply["action_note"] == "drop-table → delete_table; table → table_name; confirm → 确认; 确认='no' → 确认=false"
    )
    assert isinstance(reply["for_user"], list) and reply["for_user"]
    assert "确认" in reply["user_message"]


def test_dry_run_has_no_imperatives_for_the_model() -> None:
    reply = dry_run(req("delete_table", table_id="t"), "delete the table")
    text = reply["message"] + reply["user_message"]
    for imperative in ("下一步", "Next step", "next step", "Call again", "call again", "请调用", "请传"):
        assert imperative not in text
    assert "the user confirms" in reply["message"]
    assert "action_note" not in reply


def test_dry_run_custom_follow_ups() -> None:
    reply = dry_run(req("delete_field", table_id="t"), "delete field 备注", for_user=["确认删除字段「备注」", "取消"])
    assert reply["for_user"] == ["确认删除字段「备注」", "取消"]


def test_request_action_note_property() -> None:
    assert req("query").action_note is None
    assert req("查询", filter=[]).action_note == "查询 → query; filter → filters"


def test_error_envelope_carries_notes() -> None:
    with pytest.raises(DispatchError) as info:
        normalize_request({"action": "frobnicate", "filter": []})
    envelope = info.value.to_envelope()
    assert envelope["action_note"] == "filter → filters"
