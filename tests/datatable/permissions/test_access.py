"""The access decision (permissions/access.py, spec §7.2): grants as exceptions, structure and SQL actions, row scope
own on every action and on the SQL channel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.permissions import access as perm_access
from skillyard.builtin_skills.datatable.permissions import errors as perm_errors
from skillyard.builtin_skills.datatable.permissions import grants as perm_grants
from skillyard.builtin_skills.datatable.permissions import rls as perm_rls
from skillyard.builtin_skills.datatable.rows import errors as rows_errors
from skillyard.builtin_skills.datatable.rows import read as rows_read
from skillyard.builtin_skills.datatable.rows import write as rows_write
from skillyard.builtin_skills.datatable.rows.filters import Condition
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.structure import fields as structure_fields
from skillyard.builtin_skills.datatable.structure import tables as structure_tables

from skillyard import SkillYard
from support.datatable import FIELDS, context, count, grant, make_table, run, write_json
from support.datatable.permissions import TASK_FIELDS, access_for


async def _settings(conn: asyncpg.Connection) -> tuple[str, str, str]:
    row = await conn.fetchrow(
        "SELECT current_setting($1, true) AS emp, current_setting($2, true) AS emp_int, "
        "current_setting($3, true) AS all_rows",
        perm_rls.EMP_NO_SETTING,
        perm_rls.EMP_NO_INT_SETTING,
        perm_rls.ALL_ROWS_SETTING,
    )
    return row["emp"] or "", row["emp_int"] or "", row["all_rows"] or ""


async def grant_in_schema(conn: Any, org: str, table: str, role: str, ops: str, **kw: Any) -> None:
    await perm_grants.grant(conn, f"org_data_{org}", table_id_or_name=table, role=role, ops=ops, **kw)


async def test_open_by_default(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    for action in ("query", "insert", "delete_by", "list_columns"):
        access = await access_for(conn, schema, table, action, ["sales"])
        assert access == perm_access.Access(True, "all", None, None)
    assert await perm_grants.list_grants(conn, schema) == []
    assert await perm_access.own_scoped_tables(conn, schema, ["sales"]) == frozenset()


async def test_grants_are_exceptions(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    g = await perm_grants.grant(conn, schema, table_id_or_name="任务", role="sales", ops=["read"])
    assert g == perm_grants.Grant(table.id, "任务", "sales", perm_grants.READ_ACTIONS, "all", None)
    assert (await access_for(conn, schema, table, "query", ["sales"])).allowed
    denied = await access_for(conn, schema, table, "insert", ["sales"])
    assert not denied.allowed
    assert "skillyard datatable grant" in denied.reason and "任务" in denied.reason
    # another table without grants stays open
    other = await structure_tables.create_table(conn, schema, "其他", TASK_FIELDS)
    other_info = await store_schema.resolve_table(conn, schema, other["id"])
    assert (await access_for(conn, schema, other_info, "insert", ["sales"])).allowed
    # upsert per (table, role)
    await perm_grants.grant(conn, schema, table_id_or_name=table.id, role="sales", ops=["write"])
    assert [x.ops for x in await perm_grants.list_grants(conn, schema)] == [perm_grants.WRITE_ACTIONS]
    assert not (await access_for(conn, schema, table, "query", ["sales"])).allowed
    assert await perm_grants.revoke(conn, schema, table_id_or_name="任务", role="sales") is True
    assert await perm_grants.revoke(conn, schema, table_id_or_name="任务", role="sales") is False
    assert (await access_for(conn, schema, table, "query", ["sales"])).allowed


async def test_unconfigured_role_opens_the_table(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="sales", ops=[])
    assert not (await access_for(conn, schema, table, "query", ["sales"])).allowed
    assert (await access_for(conn, schema, table, "query", ["hr"])).allowed  # hr has no row: open
    assert (await access_for(conn, schema, table, "delete_by", ["sales", "hr"])).allowed  # one unconfigured role
    assert (await access_for(conn, schema, table, "delete_by", [])).allowed  # no roles: unconfigured


async def test_union_of_ops_and_widest_scope(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="a", ops=["query"], row_scope="own", owner_field="负责人"
    )
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="b", ops=["insert", "query"])
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="c", ops=["read", "update"], row_scope="own",
                      owner_field="负责人")  # fmt: skip
    own = perm_access.Access(True, "own", "负责人", None)
    assert await access_for(conn, schema, table, "query", ["a"]) == own
    assert await access_for(conn, schema, table, "query", ["a", "b"]) == perm_access.Access(True)  # all beats own
    assert await access_for(conn, schema, table, "insert", ["a", "b"]) == perm_access.Access(True)
    assert await access_for(conn, schema, table, "update", ["a", "c"]) == own  # union: c brings update
    assert not (await access_for(conn, schema, table, "delete", ["a", "b", "c"])).allowed
    # the role with scope all only widens the actions it was granted
    assert await access_for(conn, schema, table, "update", ["b", "c"]) == own
    grants = await perm_grants.list_grants(conn, schema)
    assert [(x.role, x.row_scope, x.owner_field) for x in grants] == [
        ("a", "own", "负责人"),
        ("b", "all", None),
        ("c", "own", "负责人"),
    ]


async def test_structure_needs_owner_or_admin(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    for action in perm_access.STRUCTURE_ACTIONS:
        for team_role in ("owner", "admin", "Admin"):
            assert (await access_for(conn, schema, table, action, [], team_role=team_role)).allowed
        for team_role in ("member", "", None):
            access = await access_for(conn, schema, table, action, [], team_role=team_role)
            assert not access.allowed and "owner or admin" in access.reason
    assert (await access_for(conn, schema, None, "create_table", ["x"], team_role="admin")).allowed


async def test_sql_needs_allow_sql(conn: asyncpg.Connection, schema: str) -> None:
    for action in perm_access.SQL_ACTIONS:
        assert (await access_for(conn, schema, None, action, ["x"])).allowed
        access = await access_for(conn, schema, None, action, ["x"], allow_sql=False)
        assert not access.allowed and "allow_sql" in access.reason
    assert (await access_for(conn, schema, None, "list_tables", ["x"])).allowed
    assert not (await access_for(conn, schema, None, "fly", ["x"])).allowed


def test_own_scope_conditions_and_stamp() -> None:
    own = perm_access.Access(True, "own", "负责人", None)
    assert perm_access.own_scope(own, {"actor_emp_no": "E1", "emp_no": "E9"}) == (
        [Condition("负责人", "eq", "E1")],
        {"负责人": "E1"},
    )
    assert perm_access.own_scope(own, {"emp_no": " E9 "}) == ([Condition("负责人", "eq", "E9")], {"负责人": "E9"})
    assert perm_access.own_scope(own, {"actor_emp_no": "", "emp_no": 42}) == (
        [Condition("负责人", "eq", "42")],
        {"负责人": "42"},
    )
    for ctx in ({}, None, {"actor_emp_no": "  "}, {"emp_no": True}, {"user_id": "E1"}):
        with pytest.raises(perm_errors.PermissionDenied) as info:
            perm_access.own_scope(own, ctx)
        assert info.value.error_type == "config" and "employee number" in str(info.value)
    assert perm_access.own_scope(perm_access.Access(True), {}) == ([], {})
    with pytest.raises(perm_errors.PermissionDenied):
        perm_access.own_scope(perm_access.Access(False, reason="no"), {"emp_no": "E1"})
    assert perm_access.protected_fields(own) == {"负责人"}
    assert perm_access.protected_fields(perm_access.Access(True)) == frozenset()


async def test_own_scope_drives_the_row_functions(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="r", ops=["all"], row_scope="own", owner_field="负责人"
    )
    access = await access_for(conn, schema, table, "query", ["r"])
    extra, stamp = perm_access.own_scope(access, {"actor_emp_no": "E1"})
    result = await rows_read.query(conn, table, extra_conditions=extra, sort="事项")
    assert [r["事项"] for r in result["list"]] == ["a", "b"]
    record = await rows_write.insert(conn, table, {"事项": "e", "负责人": "E2"}, stamp=stamp)
    assert record["负责人"] == "E1"
    assert await rows_read.count_matching(conn, table, None, extra) == 3
    with pytest.raises(rows_errors.RowsError):
        await rows_write.update(conn, table, record["id"], {"负责人": "E2"}, extra_conditions=extra,
                          protected=perm_access.protected_fields(access))  # fmt: skip


async def test_own_scoped_tables(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    other = await structure_tables.create_table(conn, schema, "其他", TASK_FIELDS)
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="r", ops=["read"], row_scope="own", owner_field="负责人"
    )
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="boss", ops=["all"])
    await perm_grants.grant(conn, schema, table_id_or_name=other["id"], role="r", ops=["query"])
    assert await perm_access.own_scoped_tables(conn, schema, ["r"]) == {"任务"}
    assert await perm_access.own_scoped_tables(conn, schema, ["r", "boss"]) == frozenset()  # all beats own
    assert await perm_access.own_scoped_tables(conn, schema, ["r", "hr"]) == frozenset()  # hr unconfigured: open
    assert await perm_access.own_scoped_tables(conn, schema, []) == frozenset()
    forbidden = await perm_access.sql_forbidden_tables(conn, schema, ["r"])
    assert {"任务", "其他", "_dt_grants", "_dt_tables", "_dt_fields"} <= forbidden  # 其他: r may only query
    assert "任务" not in await perm_access.sql_forbidden_tables(conn, schema, ["boss"])


async def test_table_access_agrees_with_check_access(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    async def compare(by: str, action: str, roles: list[str], emp_no: str | None) -> None:
        has_grants = await perm_grants.has_grants_table(conn, schema)
        expected = await access_for(conn, schema, table, action, roles)
        async with conn.transaction():
            found = await perm_access.table_access(
                conn,
                schema,
                table_id=by,
                table_name=None,
                action=action,
                roles=roles,
                emp_no=emp_no,
                has_grants=has_grants,
            )
            assert found is not None
            info, access, preset = found
            assert (info, access) == (table, expected), (action, roles)
            assert [f.as_dict() for f in info.fields] == await store_schema.list_columns(conn, schema, table.id)
            own = access.row_scope == "own"
            wanted = perm_rls.actor_settings(emp_no if own else None, all_rows=not own)
            assert preset == wanted == await _settings(conn), (action, roles, preset, wanted)
        outside = await perm_access.table_access(
            conn,
            schema,
            table_id=by,
            table_name=None,
            action=action,
            roles=roles,
            emp_no=emp_no,
            has_grants=has_grants,
        )
        assert outside is not None and outside[2] is None  # outside a transaction nothing is set

    cases = [
        ("query", ["a"]),
        ("query", ["a", "b"]),
        ("insert", ["a"]),
        ("update", ["b"]),
        ("query", []),
        ("delete_by", ["c"]),
        ("query", ["c", "zz"]),
        ("aggregate", ["b", "c"]),
    ]
    for action, roles in cases:  # no grants table yet
        await compare(table.id, action, roles, "E1")
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="a", ops=["query"], row_scope="own", owner_field="负责人"
    )
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="b", ops=["read", "update"], row_scope="all")
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="c", ops=["all"], row_scope="own", owner_field="负责人"
    )
    for action, roles in cases:
        for emp_no in ("E1", None, " 007 "):
            await compare(table.id, action, roles, emp_no)
            await compare(" 任务 ", action, roles, emp_no)
    assert (
        await perm_access.table_access(
            conn, schema, table_id="没有", table_name=None, action="query", roles=["a"], emp_no="E1", has_grants=True
        )
        is None
    )
    assert (
        await perm_access.table_access(
            conn,
            schema,
            table_id=table.id,
            table_name=None,
            action="create_table",
            roles=[],
            emp_no=None,
            has_grants=True,
        )
        is None
    )
    await structure_fields.update_field(
        conn, schema, table.id, "负责人", {"title": "经办人"}
    )  # the owner field is gone: refused
    await compare(table.id, "query", ["a"], "E1")


async def test_own_scope_filters_stamps_and_fails_closed(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=9)  # 工号 E0, E1, E2 three rows each
    await grant_in_schema(conn, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    me = context(org, actor_emp_no="E1")

    mine = await run(yard, me, "query", table_id=table_id)
    assert {r["工号"] for r in mine["list"]} == {"E1"} and mine["pageInfo"]["totalRows"] == 3
    count = await run(yard, me, "aggregate", table_id=table_id, metrics=[{"op": "count", "alias": "n"}])
    assert count["rows"][0]["n"] == 3

    written = await run(yard, me, "insert", table_id=table_id, data={"姓名": "新", "工号": "E2"})
    assert written["data"]["工号"] == "E1"  # stamped, whatever the input said
    moved = await run(yard, me, "update", table_id=table_id, row_id=written["id"], data={"工号": "E2"})
    assert moved["ok"] is False and "工号" in moved["error"]
    other = next(
        r
        for r in (await run(yard, context(org, role_id="boss"), "query", table_id=table_id))["list"]
        if r["工号"] == "E2"
    )
    assert (await run(yard, me, "delete", table_id=table_id, row_id=other["id"]))["ok"] is False

    no_emp = await run(yard, context(org), "query", table_id=table_id)
    assert no_emp["ok"] is False and no_emp["error_type"] == "config" and "employee number" in no_emp["error"]
    sql = await run(yard, me, "sql_query", sql="SELECT count(*) FROM 客户")
    assert sql["ok"] is False and sql["error_code"] == "forbidden_table"
    meta = await run(yard, context(org, role_id="boss"), "sql_query", sql="SELECT * FROM _dt_grants")
    assert meta["ok"] is False and meta["error_code"] == "forbidden_table"
    tokens = await run(yard, context(org, role_id="boss"), "sql_query", sql="SELECT * FROM _dt_confirm_tokens")
    assert tokens["ok"] is False and tokens["error_code"] == "forbidden_table"


async def test_grants_refuse_ops_and_allow_sql_switch(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=2)
    await grant_in_schema(conn, org, "客户", "staff", "read")
    ctx = context(org)
    assert (await run(yard, ctx, "query", table_id=table_id))["ok"]
    refused = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "x"})
    assert refused["ok"] is False and refused["error_type"] == "config"
    off = await run(yard, context(org, role_id="boss", allow_sql=False), "sql_query", sql="SELECT 1 AS x")
    assert off["ok"] is False and "allow_sql" in off["error"]


@pytest.mark.spec("§7.2")
@pytest.mark.parametrize("team_role", ["member", None, "", "viewer"])
async def test_every_structure_action_needs_owner_or_admin(
    yard: SkillYard, org: str, conn: Any, team_role: Any
) -> None:
    table_id = await make_table(yard, org, rows=1)
    ctx = context(org, team_role=team_role)
    if team_role is None:
        ctx.pop("team_role")
    for action, params in [
        ("create_table", {"table_name": "新表", "fields": FIELDS}),
        ("add_field", {"table_id": table_id, "field": {"title": "x", "uidt": "文本"}}),
        ("update_field", {"table_id": table_id, "field_title": "工号", "patch": {"title": "员工号"}}),
        ("update_field", {"table_id": table_id, "field_title": "工号", "patch": {"uidt": "整数"}, "确认": True}),
        ("delete_field", {"table_id": table_id, "field_title": "城市", "确认": True}),
        ("delete_field", {"table_id": table_id, "field_title": "城市"}),
        ("delete_table", {"table_id": table_id, "确认": True}),
        ("sql_execute", {"sql": "CREATE TABLE 新表 (名称 text)"}),
        ("sql_execute", {"sql": "CREATE INDEX ON 客户 (姓名)"}),
        ("sql_execute", {"sql": "CREATE VIEW 视图 AS SELECT 姓名 FROM 客户"}),
    ]:
        env = await run(yard, ctx, action, **params)
        assert env["ok"] is False and env["error_type"] == "config", (action, env)
    cols = (await run(yard, context(org), "list_columns", table_id=table_id))["data"]
    assert [c["title"] for c in cols] == ["姓名", "工号", "城市", "金额"]
    listed = await run(yard, context(org), "list_tables")
    assert [t["title"] for t in listed["data"]] == ["客户"]


@pytest.mark.spec("§7.2")
async def test_own_scope_every_read_and_count(yard: SkillYard, org: str, own_table: str) -> None:
    me = context(org, actor_emp_no="E1")
    q = await run(yard, me, "query", table_id=own_table)
    assert {r["工号"] for r in q["list"]} == {"E1"} and q["pageInfo"]["totalRows"] == 3
    agg = await run(
        yard,
        me,
        "aggregate",
        table_id=own_table,
        metrics=[{"op": "count", "alias": "n"}, {"field": "金额", "op": "sum", "alias": "s"}],
    )
    assert agg["rows"][0]["n"] == 3 and float(agg["rows"][0]["s"]) == 1 + 4 + 7
    grouped = await run(
        yard, me, "aggregate", table_id=own_table, metrics=[{"op": "count", "alias": "n"}], group_by="工号"
    )
    assert grouped["rows"] == [{"工号": "E1", "n": 3}]
    filtered = await run(yard, me, "query", table_id=own_table, filters=[{"field": "工号", "op": "eq", "value": "E2"}])
    assert filtered["list"] == [] and filtered["pageInfo"]["totalRows"] == 0


@pytest.mark.spec("§7.2")
async def test_own_scope_writes_stay_inside_own_rows(yard: SkillYard, org: str, own_table: str, conn: Any) -> None:
    me = context(org, actor_emp_no="E1", chat_mode=False)
    by = await run(
        yard,
        me,
        "update_by",
        table_id=own_table,
        filters=[{"field": "城市", "op": "eq", "value": "上海"}],
        data={"城市": "北京"},
    )
    assert by["ok"] and by["updated"] == 3, by
    assert await count(conn, org, where="WHERE 城市 = '北京'") == 3
    owner_change = await run(
        yard,
        me,
        "update_by",
        table_id=own_table,
        filters=[{"field": "城市", "op": "eq", "value": "北京"}],
        data={"工号": "E2"},
    )
    assert owner_change["ok"] is False and "工号" in owner_change["error"]
    others = [
        r["id"]
        for r in (await run(yard, context(org, role_id="boss"), "query", table_id=own_table))["list"]
        if r["工号"] != "E1"
    ]
    upd = await run(yard, me, "update", table_id=own_table, row_id=others[0], data={"城市": "深圳"})
    assert upd["ok"] is False
    batch = await run(yard, me, "delete_batch", table_id=own_table, row_ids=others[:4])
    assert batch.get("deleted", 0) == 0, batch
    dby = await run(yard, me, "delete_by", table_id=own_table, filters=[{"field": "金额", "op": "gte", "value": 0}])
    assert dby["ok"] and dby["deleted"] == 3, dby
    assert await count(conn, org) == 6 and await count(conn, org, where="WHERE 工号 = 'E1'") == 0


@pytest.mark.spec("§7.2")
async def test_own_scope_stamps_every_insert_path(yard: SkillYard, org: str, own_table: str, conn: Any) -> None:
    me = context(org, actor_emp_no="E7")
    one = await run(yard, me, "insert", table_id=own_table, data={"姓名": "a", "工号": "E2"})
    assert one["ok"] and one["data"]["工号"] == "E7", one
    batch = await run(
        yard, me, "insert_batch", table_id=own_table, records=[{"姓名": "b", "工号": "E2"}, {"姓名": "c"}]
    )
    assert batch["inserted"] == 2
    up = await run(yard, me, "upsert", table_id=own_table, key_fields=["姓名"], records=[{"姓名": "人0", "工号": "E0"}])
    assert up["ok"], up
    rel = write_json(yard, me, "import/own.json", [{"姓名": f"f{i}", "工号": "E0"} for i in range(3)])
    imp = await run(yard, me, "insert_from_file", table_id=own_table, file=rel)
    assert imp["inserted"] == 3
    assert await count(conn, org, where="WHERE 工号 = 'E7'") == 1 + 2 + 1 + 3
    # the row 人0 of E0 was not touched by E7's upsert
    assert await count(conn, org, where="WHERE 姓名 = '人0' AND 工号 = 'E0'") == 1


@pytest.mark.spec("§7.2")
async def test_own_scope_employee_number_only_from_context(yard: SkillYard, org: str, own_table: str) -> None:
    fallback = await run(yard, context(org, emp_no="E2"), "query", table_id=own_table)
    assert fallback["ok"] and {r["工号"] for r in fallback["list"]} == {"E2"}
    both = await run(yard, context(org, emp_no="E2", actor_emp_no="E0"), "query", table_id=own_table)
    assert {r["工号"] for r in both["list"]} == {"E0"}
    for params in ({"actor_emp_no": "E1"}, {"emp_no": "E1"}):
        env = await run(yard, context(org), "query", table_id=own_table, **params)
        assert env["ok"] is False and env["error_type"] == "config", env
    for action, params in [
        ("insert", {"data": {"姓名": "x"}}),
        ("aggregate", {"metrics": [{"op": "count"}]}),
        ("delete_by", {"filters": [{"field": "金额", "op": "gte", "value": 0}]}),
        ("update_by", {"filters": [{"field": "金额", "op": "gte", "value": 0}], "data": {"城市": "北京"}}),
        ("upsert", {"key_fields": ["姓名"], "records": [{"姓名": "人1", "城市": "北京"}]}),
    ]:
        env = await run(yard, context(org, chat_mode=False), action, table_id=own_table, **params)
        assert env["ok"] is False and env["error_type"] == "config", (action, env)


@pytest.mark.spec("§7.2")
async def test_grants_union_and_widest_scope(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=3)
    await grant(yard, org, "客户", "reader", "read")
    await grant(yard, org, "客户", "writer", ["insert"])
    await grant(yard, org, "客户", "mine", "read", row_scope="own", owner_field="工号")
    only_read = context(org, role_id="reader")
    assert (await run(yard, only_read, "query", table_id=table_id))["ok"]
    refused = await run(yard, only_read, "insert", table_id=table_id, data={"姓名": "x"})
    assert refused["ok"] is False and refused["error_type"] == "config"
    both = context(org, role_id="reader", roles=["writer"])
    assert (await run(yard, both, "insert", table_id=table_id, data={"姓名": "x"}))["ok"]
    widest = context(org, role_id="mine", roles=["reader"], actor_emp_no="E1")
    assert (await run(yard, widest, "query", table_id=table_id))["pageInfo"]["totalRows"] == 4
    narrow = context(org, role_id="mine", actor_emp_no="E1")
    assert (await run(yard, narrow, "query", table_id=table_id))["pageInfo"]["totalRows"] == 1


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
async def test_own_scoped_table_is_unreachable_on_the_sql_channel(
    yard: SkillYard, org: str, own_table: str, conn: Any
) -> None:
    await make_table(yard, org, title="订单", fields=[{"title": "单号", "uidt": "文本"}])
    me = context(org, actor_emp_no="E1", chat_mode=False)  # allow_sql not set: default True
    schema = f"org_data_{org}"
    for mode, sql in [
        ("sql_query", "SELECT * FROM 客户"),
        ("sql_query", 'SELECT count(*) FROM "客户"'),
        ("sql_query", f'SELECT * FROM {schema}."客户"'),
        ("sql_query", "SELECT * FROM 订单 WHERE 单号 IN (SELECT 姓名 FROM 客户)"),
        ("sql_query", "WITH c AS (SELECT * FROM 客户) SELECT * FROM c"),
        ("sql_query", "SELECT o.* FROM 订单 o JOIN 客户 k ON k.姓名 = o.单号"),
        ("sql_execute", "INSERT INTO 订单 (单号) SELECT 姓名 FROM 客户"),
        ("sql_execute", "UPDATE 客户 SET 城市 = '北京' WHERE 金额 > 0"),
        ("sql_execute", "DELETE FROM 客户 WHERE 金额 > 0"),
        ("sql_execute", "INSERT INTO 客户 (姓名, 工号) VALUES ('x', 'E2')"),
    ]:
        env = await run(yard, me, mode, sql=sql)
        assert env["ok"] is False and env["error_code"] == "forbidden_table", (sql, env)
    assert await count(conn, org) == 9 and await count(conn, org, "订单") == 0
    other = await run(yard, me, "sql_query", sql="SELECT count(*) AS n FROM 订单")
    assert other["ok"] and other["rows"] == [{"n": 0}]


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
@pytest.mark.parametrize("when", ["view-made-before-the-grant", "view-made-after-the-grant"])
async def test_view_over_own_scoped_table_does_not_leak_other_rows(
    yard: SkillYard, org: str, conn: Any, when: str
) -> None:
    """Issue 4: "make own-scoped tables unreachable through the SQL channel for roles that have own scope". A view
    an owner made over the table must not hand a restricted role everybody's rows (nor let it change them)."""
    table_id = await make_table(yard, org, rows=9)
    boss = context(org, role_id="boss")
    if when.endswith("before-the-grant"):
        made = await run(yard, boss, "sql_execute", sql="CREATE VIEW 客户视图 AS SELECT 姓名, 工号, 金额 FROM 客户")
        assert made["ok"], made
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    if when.endswith("after-the-grant"):
        made = await run(yard, boss, "sql_execute", sql="CREATE VIEW 客户视图 AS SELECT 姓名, 工号, 金额 FROM 客户")
        assert made["ok"], made
    me = context(org, actor_emp_no="E1", chat_mode=False)
    assert (await run(yard, me, "query", table_id=table_id))["pageInfo"]["totalRows"] == 3
    problems = []
    read = await run(yard, me, "sql_query", sql="SELECT 工号 FROM 客户视图")
    if read["ok"] and not {r["工号"] for r in read["rows"]} <= {"E1"}:
        problems.append(f"read others' rows through the view: {sorted({r['工号'] for r in read['rows']})}")
    write = await run(yard, me, "sql_execute", sql="UPDATE 客户视图 SET 姓名 = '改' WHERE 工号 = 'E2'")
    changed = await count(conn, org, where="WHERE 姓名 = '改'")
    if changed:
        problems.append(f"changed {changed} row(s) of E2 through the view: {write.get('affected')}")
    assert not problems, problems


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
async def test_views_over_a_grant_limited_table_are_refused_at_any_depth(yard: SkillYard, org: str, conn: Any) -> None:
    """A role limited by grants on a table (here: read only) cannot reach it on the SQL channel, nor through a view
    over it, nor through a view over that view; a permission refusal is config + non_retriable. A role the grants
    do not limit still reads the views."""
    await make_table(yard, org, rows=6)
    boss = context(org, role_id="boss")
    for sql in (
        "CREATE VIEW 客户视图 AS SELECT 姓名, 工号 FROM 客户",
        "CREATE VIEW 二层视图 AS SELECT 姓名 FROM 客户视图",
    ):
        made = await run(yard, boss, "sql_execute", sql=sql)
        assert made["ok"], made
    await grant(yard, org, "客户", "sales", "query")
    await grant(yard, org, "客户", "boss", "all")
    sales = context(org, role_id="sales", chat_mode=False)
    for mode, sql in [
        ("sql_query", "SELECT * FROM 客户"),
        ("sql_query", "SELECT * FROM 客户视图"),
        ("sql_query", "SELECT * FROM 二层视图"),
        ("sql_execute", "UPDATE 客户视图 SET 姓名 = '改' WHERE 工号 = 'E1'"),
    ]:
        env = await run(yard, sales, mode, sql=sql)
        assert env["ok"] is False and env["error_code"] == "forbidden_table", (sql, env)
        assert env["error_type"] == "config" and env["non_retriable"] is True, env
    assert await count(conn, org, where="WHERE 姓名 = '改'") == 0
    read = await run(yard, context(org, role_id="boss", chat_mode=False), "sql_query", sql="SELECT * FROM 二层视图")
    assert read["ok"] and read["row_count"] == 6, read


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
async def test_sql_channel_allow_sql_false_switches_it_off(yard: SkillYard, org: str) -> None:
    await make_table(yard, org)
    for value in (False, "false"):
        env = await run(yard, context(org, allow_sql=value), "sql_query", sql="SELECT 1 AS x")
        assert env["ok"] is False and env["error_type"] == "config", env
    assert (await run(yard, context(org), "sql_query", sql="SELECT 1 AS x"))["rows"] == [{"x": 1}]


async def test_own_scope_confirmation_counts_only_own_rows(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=30)  # 工号 E0 / E1 / E2, ten rows each
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    me = context(org, actor_emp_no="E1", chat_mode=True)
    env = await run(yard, me, "delete_by", table_id=table_id, filters=[{"field": "金额", "op": "gte", "value": 0}])
    assert env["ok"] and env.get("deleted") == 10 and "confirm_token" not in env, env
    assert await count(conn, org) == 20


async def test_deleted_owner_field_fails_closed(yard: SkillYard, org: str, own_table: str) -> None:
    """Deleting the owner field is either refused, or the own-scoped role is refused afterwards (never opened)."""
    gone = await run(
        yard, context(org, role_id="boss"), "delete_field", table_id=own_table, field_title="工号", 确认=True
    )
    env = await run(yard, context(org, actor_emp_no="E1"), "query", table_id=own_table)
    if gone["ok"]:
        assert env["ok"] is False and env["error_type"] == "config", env
    else:
        assert gone["error_type"] == "recoverable" and env["pageInfo"]["totalRows"] == 3, (gone, env)
    boss = await run(yard, context(org, role_id="boss"), "query", table_id=own_table)
    assert boss["ok"] and boss["pageInfo"]["totalRows"] == 9


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.5")
@pytest.mark.spec("§3.5")
async def test_renamed_or_retyped_owner_field_never_opens_other_rows(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=9)
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    boss, me = context(org, role_id="boss"), context(org, actor_emp_no="E1", chat_mode=False)
    renamed = await run(yard, boss, "update_field", table_id=table_id, field_title="工号", patch={"title": "员工号"})
    if renamed["ok"]:
        q = await run(yard, me, "query", table_id=table_id)
        assert q["ok"] is False or {r["员工号"] for r in q["list"]} == {"E1"}, q
        s = await run(yard, me, "sql_query", sql="SELECT * FROM 客户")
        assert s["ok"] is False, s
        assert (
            await run(yard, boss, "update_field", table_id=table_id, field_title="员工号", patch={"title": "工号"})
        )["ok"]
    retyped = await run(
        yard, boss, "update_field", table_id=table_id, field_title="工号", patch={"uidt": "长文本"}, 确认=True
    )
    q = await run(yard, me, "query", table_id=table_id)
    assert q["ok"] is False or {r["工号"] for r in q["list"]} == {"E1"}, (retyped, q)


@pytest.mark.spec("§7.7")
async def test_own_scope_delete_batch_backs_up_and_deletes_only_own_rows(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=9)  # 工号 E0/E1/E2
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    boss = context(org, role_id="boss", chat_mode=False)
    every = (await run(yard, boss, "query", table_id=table_id))["list"]
    me = context(org, actor_emp_no="E1", chat_mode=False)
    env = await run(yard, me, "delete_batch", table_id=table_id, row_ids=[r["id"] for r in every])
    assert env["ok"] and env["deleted"] == 3, env
    saved = json.loads(Path(env["backup_file"]).read_text(encoding="utf-8"))
    assert {r["工号"] for r in saved} == {"E1"} and len(saved) == 3, saved
    assert await count(conn, org) == 6 and await count(conn, org, where="WHERE 工号 = 'E1'") == 0


@pytest.mark.spec("§7.2")
async def test_own_scope_single_delete_and_update_of_owner_field(
    yard: SkillYard, org: str, own_table: str, conn: Any
) -> None:
    boss = context(org, role_id="boss")
    rows = (await run(yard, boss, "query", table_id=own_table))["list"]
    mine = next(r["id"] for r in rows if r["工号"] == "E1")
    theirs = next(r["id"] for r in rows if r["工号"] == "E2")
    me = context(org, actor_emp_no="E1")
    gone = await run(yard, me, "delete", table_id=own_table, row_id=theirs)
    assert gone["ok"] is False and gone["error_type"] == "recoverable", gone
    assert await count(conn, org, where=f"WHERE id = {theirs}") == 1
    steal = await run(yard, me, "update", table_id=own_table, row_id=mine, data={"工号": "E2"})
    assert steal["ok"] is False and "工号" in steal["error"], steal
    assert await count(conn, org, where=f"WHERE id = {mine} AND 工号 = 'E1'") == 1
    cols = await run(yard, me, "list_columns", table_id=own_table)
    assert cols["ok"] and [c["title"] for c in cols["data"]] == ["姓名", "工号", "城市", "金额"], cols
    mine_gone = await run(yard, me, "delete", table_id=own_table, row_id=mine)
    assert mine_gone["ok"] and mine_gone["data"] is True, mine_gone


@pytest.mark.spec("§7.2")
async def test_own_scope_import_defaults_and_mapping_cannot_set_another_owner(
    yard: SkillYard, org: str, own_table: str, conn: Any
) -> None:
    me = context(org, actor_emp_no="E5")
    rel = write_json(yard, me, "import/own.json", [{"n": f"x{i}", "who": "E0"} for i in range(4)])
    env = await run(
        yard,
        me,
        "insert_from_file",
        table_id=own_table,
        file=rel,
        mapping={"姓名": "n", "工号": "who"},
        defaults={"工号": "E2"},
    )
    assert env["ok"] and env["inserted"] == 4, env
    assert await count(conn, org, where="WHERE 工号 = 'E5'") == 4


@pytest.mark.spec("§7.2")
async def test_own_scope_upsert_cannot_change_owner_of_own_row(
    yard: SkillYard, org: str, own_table: str, conn: Any
) -> None:
    me = context(org, actor_emp_no="E1")
    env = await run(yard, me, "upsert", table_id=own_table, key_fields="姓名", records=[{"姓名": "人1", "工号": "E0"}])
    assert env["ok"] or env["error_type"] == "recoverable", env
    assert await count(conn, org, where="WHERE 姓名 = '人1' AND 工号 = 'E1'") == 1
    assert await count(conn, org, where="WHERE 工号 = 'E0'") == 3


@pytest.mark.spec("§7.2")
async def test_own_scope_with_an_integer_owner_field(yard: SkillYard, org: str, conn: Any) -> None:
    """permissions.md: on an own-scoped table you see, count, change and delete only rows whose owner field holds
    your employee number, and every row you insert gets it (here the owner field is an 整数)."""
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="工单",
        fields=[{"title": "标题", "uidt": "文本"}, {"title": "员工号", "uidt": "整数"}],
    )
    records = [{"标题": f"t{i}", "员工号": 1000 + i % 2} for i in range(6)]
    assert (await run(yard, ctx, "insert_batch", table_id=made["id"], records=records))["inserted"] == 6
    await grant(yard, org, "工单", "staff", "all", row_scope="own", owner_field="员工号")
    me = context(org, actor_emp_no=1001, chat_mode=False)
    q = await run(yard, me, "query", table_id=made["id"])
    assert q["ok"] and {r["员工号"] for r in q["list"]} == {1001} and q["pageInfo"]["totalRows"] == 3, q
    ins = await run(yard, me, "insert", table_id=made["id"], data={"标题": "new", "员工号": 1000})
    assert ins["ok"] and ins["data"]["员工号"] == 1001, ins
    gone = await run(yard, me, "delete_by", table_id=made["id"], filters=[{"field": "标题", "op": "not_null"}])
    assert gone["ok"] and gone["deleted"] == 4, gone
    assert await count(conn, org, "工单") == 3 and await count(conn, org, "工单", "WHERE 员工号 = 1001") == 0


@pytest.mark.spec("§7.2")
async def test_grants_limit_each_action_separately(yard: SkillYard, org: str) -> None:
    """§7.2 / references/permissions.md: on a table with grants, a granted role may only run the actions it was
    granted; structure actions stay owner/admin whatever the grants say."""
    table_id = await make_table(yard, org, rows=3)
    stored = await grant(yard, org, "客户", "clerk", ["query"])
    assert stored["ops"] == ["query"], stored
    clerk = context(org, role_id="clerk", team_role="member", chat_mode=False)
    assert (await run(yard, clerk, "query", table_id=table_id))["ok"]
    for action, params in [
        ("aggregate", {"metrics": [{"op": "count"}]}),
        ("insert", {"data": {"姓名": "x"}}),
        ("insert_batch", {"records": [{"姓名": "x"}, {"姓名": "y"}]}),
        ("upsert", {"key_fields": ["姓名"], "records": [{"姓名": "人1"}]}),
        ("update_by", {"filters": [{"field": "姓名", "op": "eq", "value": "人1"}], "data": {"城市": "北京"}}),
        ("delete_by", {"filters": [{"field": "姓名", "op": "eq", "value": "人1"}]}),
        ("delete", {"row_id": 1}),
    ]:
        env = await run(yard, clerk, action, table_id=table_id, **params)
        assert env["ok"] is False and env["error_type"] == "config", (action, env)
    full = await grant(yard, org, "客户", "writer", "all")
    assert "delete_by" in full["ops"]
    writer = context(org, role_id="writer", team_role="member")
    structure = await run(yard, writer, "add_field", table_id=table_id, field={"title": "x", "uidt": "文本"})
    assert structure["ok"] is False and structure["error_type"] == "config", structure
