"""The other names of the parameters (request/param_aliases.py, spec §3.5, §7.3): aliases fold onto canonical keys
and are reported."""

from __future__ import annotations

from typing import Any

import pytest
from skillyard.builtin_skills.datatable.request import param_aliases
from skillyard.builtin_skills.datatable.request.dispatch import normalize_request
from skillyard.builtin_skills.datatable.request.param_aliases import PARAM_ALIASES

from skillyard import SkillYard
from support.datatable import context, make_numbered_table, make_table, run
from support.datatable.request import req


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


async def test_confirm_token_given_in_camel_case_is_honoured(yard: SkillYard, org: str, conn: Any) -> None:
    """A model writing ``confirmToken`` (or ``token``) must redeem the token, not get a fresh one forever."""
    table_id = await make_numbered_table(yard, org, rows=12)
    ctx = context(org, chat_mode=True)
    ids = [r["id"] for r in (await run(yard, ctx, "query", table_id=table_id))["list"]]
    asked = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids)
    assert asked["needs_confirmation"] is True
    done = await yard.run(
        "datatable",
        {
            "action": "delete_batch",
            "payload": {"table_id": table_id, "row_ids": ids, "confirmToken": asked["confirm_token"]},
        },
        context=ctx,
    )
    assert done["ok"] and done["deleted"] == 12, done
    assert "confirmToken → confirm_token" in done["action_note"]
    assert await conn.fetchval(f'SELECT count(*) FROM org_data_{org}."客户"') == 0


async def test_param_key_aliases_are_reported(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org)
    env = await run(
        yard, ctx, "query", table_id=table_id, filter=[{"field": "金额", "op": "gte", "value": 1}], order_by="金额"
    )
    assert env["ok"] and [r["金额"] for r in env["list"]] == [1, 2], env
    assert "filter → filters" in env["action_note"] and "order_by → sort" in env["action_note"]
    rec = await run(yard, ctx, "insert", table_id=table_id, record={"姓名": "r"})
    assert rec["ok"] and "record → data" in rec["action_note"], rec
    for key in ("row", "values"):
        env = await run(yard, ctx, "insert", table_id=table_id, **{key: {"姓名": key}})
        assert env["ok"] and f"{key} → data" in env["action_note"], env


@pytest.mark.spec("§3.5")
async def test_more_parameter_key_aliases_are_normalized_and_noted(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org, chat_mode=False)
    R = lambda data: yard.run("datatable", data, context=ctx)  # noqa: E731
    where = await R({"action": "query", "table": "客户", "where": [{"field": "姓名", "op": "eq", "value": "人1"}]})
    assert where["ok"] and [r["姓名"] for r in where["list"]] == ["人1"], where
    assert "where → filters" in where["action_note"] and "table → table_name" in where["action_note"]
    row_id = where["list"][0]["id"]
    upd = await R({"action": "update", "table_id": table_id, "id": row_id, "values": {"城市": "北京"}})
    assert upd["ok"] and upd["data"]["城市"] == "北京", upd
    assert "id → row_id" in upd["action_note"] and "values → data" in upd["action_note"]
    rows = await R({"action": "insert_batch", "table_id": table_id, "rows": [{"姓名": "x"}, {"姓名": "y"}]})
    assert rows["ok"] and rows["inserted"] == 2 and "rows → records" in rows["action_note"], rows
    sql = await R({"operation": "sql_query", "statement": "SELECT count(*) AS n FROM 客户"})
    assert sql["ok"] and sql["rows"] == [{"n": 5}], sql
    assert "operation → action" in sql["action_note"] and "statement → sql" in sql["action_note"]
    ids = await R({"action": "delete_batch", "table_id": table_id, "ids": [row_id]})
    assert ids["ok"] and ids["deleted"] == 1 and "ids → row_ids" in ids["action_note"], ids


@pytest.mark.spec("§3.5")
async def test_fields_alias_columns_and_type_key_in_create_table(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    env = await yard.run(
        "datatable",
        {
            "action": "create_table",
            "table_name": "订单",
            "columns": [{"title": "单号", "type": "text", "required": True}, {"title": "金额", "type": "currency"}],
        },
        context=ctx,
    )
    assert env["ok"] and "columns → fields" in env["action_note"], env
    cols = (await run(yard, ctx, "list_columns", table_id=env["id"]))["data"]
    assert [(c["title"], c["uidt"], c["required"]) for c in cols] == [("单号", "文本", True), ("金额", "数字", False)]
    assert (cols[1]["precision"], cols[1]["scale"]) == (18, 2)
