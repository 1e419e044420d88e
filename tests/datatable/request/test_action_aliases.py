"""The other names of the actions (request/action_aliases.py, spec §3.5): every spelling reaches its canonical
action, ambiguous and unknown words are refused with the list."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from skillyard.builtin_skills.datatable.actions.table import ACTIONS
from skillyard.builtin_skills.datatable.request.action_aliases import ACTION_ALIASES
from skillyard.builtin_skills.datatable.request.dispatch import DispatchError

from skillyard import SkillYard
from support.datatable import FOLDER, context, count, make_table, titles
from support.datatable.request import req


def test_alias_values_are_canonical_and_the_module_asserts_it() -> None:
    assert set(ACTION_ALIASES.values()) <= set(ACTIONS)
    tree = ast.parse((FOLDER / "request" / "action_aliases.py").read_text(encoding="utf-8"))
    asserts = [ast.unparse(node.test) for node in tree.body if isinstance(node, ast.Assert)]
    assert "set(ACTION_ALIASES.values()) <= set(ACTIONS)" in asserts


def test_every_alias_normalizes_to_its_value() -> None:
    for alias, canonical in ACTION_ALIASES.items():
        assert req(alias).action == canonical, alias


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


@pytest.mark.parametrize(
    ("action", "canonical"),
    [("QUERY", "query"), ("insert-batch", "insert_batch"), ("list tables", "list_tables"), ("查询", "query")],
)
async def test_action_aliases_are_reported(yard: SkillYard, org: str, action: str, canonical: str) -> None:
    await make_table(yard, org)
    env = await yard.run(
        "datatable",
        {"action": action, "payload": {"table_name": "客户", "records": [{"姓名": "a"}, {"姓名": "b"}]}},
        context=context(org),
    )
    assert env["ok"] and env["action"] == canonical, env
    assert f"→ {canonical}" in env["action_note"]


@pytest.mark.spec("§3.5")
@pytest.mark.parametrize(
    ("word", "canonical"),
    [
        ("删除表", "delete_table"),
        ("删除字段", "delete_field"),
        ("改字段", "update_field"),
        ("加字段", "add_field"),
        ("建表", "create_table"),
        ("批量新增", "insert_batch"),
        ("插入或更新", "upsert"),
        ("按条件删除", "delete_by"),
        ("批量删除", "delete_batch"),
        ("导入", "insert_from_file"),
        ("统计", "aggregate"),
        ("执行sql", "sql_execute"),
        ("Delete-Table", "delete_table"),
        ("listTables", "list_tables"),
    ],
)
async def test_chinese_and_spelled_action_aliases_map_to_the_canonical_action(
    yard: SkillYard, org: str, word: str, canonical: str
) -> None:
    await make_table(yard, org)
    env = await yard.run("datatable", {"action": word, "payload": {"table_name": "客户"}}, context=context(org))
    assert env.get("action") == canonical, env
    assert f"→ {canonical}" in (env.get("action_note") or ""), env
    assert await titles(yard, org) == ["客户"]  # a destructive alias without 确认 only previews


@pytest.mark.spec("§3.5")
@pytest.mark.parametrize("word", ["list", "drop", "查看"])
async def test_ambiguous_action_words_are_refused_with_the_list(yard: SkillYard, org: str, word: str) -> None:
    await make_table(yard, org)
    env = await yard.run("datatable", {"action": word, "payload": {"table_name": "客户"}}, context=context(org))
    assert env["ok"] is False and env["need_param"] == "action" and "delete_table" in env["supported_actions"], env
    assert await titles(yard, org) == ["客户"]


@pytest.mark.spec("§3.5")
@pytest.mark.parametrize("word", ["LIST-COLUMNS", "listColumns", "list columns", "List_Columns", "describe"])
async def test_action_spellings_reach_list_columns(yard: SkillYard, org: str, word: str) -> None:
    await make_table(yard, org)
    env = await yard.run("datatable", {"action": word, "payload": {"table_name": "客户"}}, context=context(org))
    assert env["ok"] and env["action"] == "list_columns" and "→ list_columns" in env["action_note"], env


@pytest.mark.spec("§3.5")
@pytest.mark.parametrize("word", ["Update-By", "UPDATE_BY", "updateBy", "update by", "按条件更新"])
async def test_action_spellings_reach_update_by(yard: SkillYard, org: str, conn: Any, word: str) -> None:
    await make_table(yard, org, rows=2)
    env = await yard.run(
        "datatable",
        {"action": word, "table_name": "客户", "filter": {"姓名": "人1"}, "values": {"城市": "北京"}},
        context=context(org),
    )
    assert env["ok"] and env["action"] == "update_by" and env["updated"] == 1, env
    note = env["action_note"]
    assert "→ update_by" in note and "filter → filters" in note and "values → data" in note, note
    assert await count(conn, org, where="WHERE 城市 = '北京'") == 1
