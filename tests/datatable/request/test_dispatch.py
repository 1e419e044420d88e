"""Reading a request (request/dispatch.py, spec §3.5, §7): the action given or not, payload flattening, the 确认 rules,
dry runs and the failure envelope of a request that cannot be read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from skillyard.builtin_skills.datatable.actions.table import ACTIONS
from skillyard.builtin_skills.datatable.request.dispatch import (
    DispatchError,
    dry_run,
    needs_confirmation,
    normalize_request,
)
from skillyard.builtin_skills.datatable.request.param_aliases import CONFIRM_KEY

from skillyard import SkillYard
from support.datatable import FOLDER, context, make_table, run, titles
from support.datatable.request import req


def test_every_canonical_action_passes_without_a_note() -> None:
    assert req("  query ").notes == ()  # surrounding blanks are not worth a note
    for action in ACTIONS:
        request = req(action)
        assert request.action == action
        assert request.notes == ()
        assert request.confirmed is False


def test_no_skillyard_import() -> None:
    for name in ("request/dispatch.py", "request/action_aliases.py", "request/param_aliases.py"):
        source = Path(FOLDER / name).read_text(encoding="utf-8")
        assert "skillyard" not in source.replace("skillyard.builtin", ""), name


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


async def test_no_action_is_need_param_with_the_list(yard: SkillYard, org: str) -> None:
    for data in ({}, {"payload": {"table_name": "客户", "data": {"姓名": "x"}}}, {"data": {"姓名": "x"}}):
        env = await yard.run("datatable", data, context=context(org))
        assert env["ok"] is False and env["need_param"] == "action", env
        assert {"query", "insert", "delete_by", "sql_query"} <= set(env["supported_actions"])


@pytest.mark.spec("§3.5")
async def test_flat_payload_and_json_text_payload_are_the_same_call(yard: SkillYard, org: str) -> None:
    await make_table(yard, org, rows=4)
    ctx = context(org)
    filters = [{"field": "金额", "op": "gte", "value": 2}]
    flat = await yard.run("datatable", {"action": "query", "table_name": "客户", "filters": filters}, context=ctx)
    nested = await run(yard, ctx, "query", table_name="客户", filters=filters)
    text = await yard.run(
        "datatable",
        {"action": "query", "payload": json.dumps({"table_name": "客户", "filters": filters}, ensure_ascii=False)},
        context=ctx,
    )
    assert flat["list"] == nested["list"] == text["list"] and len(flat["list"]) == 2
    assert "payload" in (text.get("action_note") or ""), text


@pytest.mark.spec("§3.5")
async def test_payload_wins_over_a_different_flat_value_and_says_so(yard: SkillYard, org: str) -> None:
    await make_table(yard, org, rows=3)
    env = await yard.run(
        "datatable",
        {"action": "query", "limit": 1, "payload": {"table_name": "客户", "limit": 2}},
        context=context(org),
    )
    assert env["ok"] and len(env["list"]) == 2, env
    assert "limit" in env["action_note"], env


@pytest.mark.spec("§3.5")
@pytest.mark.parametrize("value", ["确认删除", "确认初始化", "maybe", "请确认"])
async def test_a_sentence_in_the_confirm_key_is_not_a_confirmation(yard: SkillYard, org: str, value: str) -> None:
    table_id = await make_table(yard, org, rows=2)
    env = await run(yard, context(org), "delete_table", table_id=table_id, 确认=value)
    assert env["ok"] and env["dry_run"] is True, env
    assert env.get("action_note"), env  # the unreadable value is reported
    assert await titles(yard, org) == ["客户"]


@pytest.mark.spec("§3.5")
async def test_english_confirm_prefix_confirms_and_explicit_false_wins(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=2)
    ctx = context(org)
    kept = await yard.run(
        "datatable", {"action": "confirm_delete_table", "payload": {"table_id": table_id, "确认": False}}, context=ctx
    )
    assert kept["ok"] and kept["dry_run"] is True and "确认=false" in kept["action_note"], kept
    assert await titles(yard, org) == ["客户"]
    gone = await yard.run(
        "datatable", {"action": "confirm_delete_table", "payload": {"table_id": table_id}}, context=ctx
    )
    assert gone["ok"] and gone["data"] is True and "确认=true" in gone["action_note"], gone
    assert await titles(yard, org) == []


@pytest.mark.spec("§3.5")
@pytest.mark.parametrize("word", ["确认", " 确认 ", "confirm", "确认确认"])
async def test_a_bare_confirm_is_no_action(yard: SkillYard, org: str, word: str) -> None:
    table_id = await make_table(yard, org)
    env = await yard.run("datatable", {"action": word, "payload": {"table_id": table_id}}, context=context(org))
    assert env["ok"] is False and env["need_param"] == "action" and "delete_table" in env["supported_actions"], env
    listed = await run(yard, context(org), "list_tables")
    assert [t["title"] for t in listed["data"]] == ["客户"]


@pytest.mark.spec("§3.5")
@pytest.mark.spec("§3.5.4")
@pytest.mark.parametrize(
    ("value", "confirmed"),
    [
        ("true", True),
        ("是", True),
        ("yes", True),
        (1, True),
        ("false", False),
        ("否", False),
        (0, False),
        (None, False),
    ],
)
async def test_confirm_values(yard: SkillYard, org: str, value: Any, confirmed: bool) -> None:
    """§3.5.4: 确认=true only from the caller; an explicit no (or nothing) only previews."""
    table_id = await make_table(yard, org)
    env = await run(yard, context(org), "delete_field", table_id=table_id, field_title="城市", 确认=value)
    assert env["ok"], env
    if confirmed:
        assert env.get("deleted") is True and "dry_run" not in env, env
    else:
        assert env["dry_run"] is True, env
    cols = [c["title"] for c in (await run(yard, context(org), "list_columns", table_id=table_id))["data"]]
    assert ("城市" in cols) is not confirmed


@pytest.mark.spec("§3.5")
@pytest.mark.spec("§3.5.5")
@pytest.mark.spec("§3.5.1–2")
async def test_dry_run_echoes_the_normalized_parameters(yard: SkillYard, org: str) -> None:
    """§3.5.5: 预演返回必须回显收到的参数，并写明「缺 确认=true 所以只预演」; §3.5.1–2 notes for every alias."""
    await make_table(yard, org)
    ctx = context(org)
    env = await yard.run("datatable", {"action": "drop_table", "payload": {"table": "客户"}}, context=ctx)
    assert env["ok"] and env["dry_run"] is True and env["action"] == "delete_table", env
    assert env["received"].get("table_name") == "客户", env
    assert "确认=true" in env["message"], env
    assert "drop_table → delete_table" in env["action_note"] and "table → table_name" in env["action_note"], env
    assert isinstance(env["for_user"], list) and env["for_user"], env
    listed = await run(yard, ctx, "list_tables")
    assert [t["title"] for t in listed["data"]] == ["客户"]


@pytest.mark.spec("§3.5")
async def test_confirm_is_never_read_from_data_or_other_keys(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    for extra in (
        {"data": {"确认": True}},
        {"patch": {"确认": True}},
        {"ok": True},
        {"user_said": "确认"},
        {"message": "确认删除"},
    ):
        env = await run(yard, ctx, "delete_table", table_id=table_id, **extra)
        assert env["ok"] and env["dry_run"] is True, (extra, env)
    listed = await run(yard, ctx, "list_tables")
    assert [t["title"] for t in listed["data"]] == ["客户"]
