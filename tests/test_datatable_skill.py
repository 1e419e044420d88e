"""The built-in datatable skill end to end: through SkillYard.run, the platform's session, real PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard

pytestmark = pytest.mark.usefixtures("home", "db_env")

FIELDS = [
    {"title": "姓名", "uidt": "文本", "required": True},
    {"title": "工号", "uidt": "文本"},
    {"title": "城市", "uidt": "单选", "options": ["上海", "北京", "深圳"]},
    {"title": "金额", "uidt": "金额"},
]


@pytest.fixture
async def yard() -> AsyncIterator[SkillYard]:
    async with SkillYard() as y:
        yield y


@pytest.fixture
def org() -> str:
    return "t" + uuid.uuid4().hex[:12]


def context(org: str, **extra: Any) -> dict[str, Any]:
    return {"org_id": org, "team_role": "owner", "role_id": "staff", "session_id": f"s-{org}", **extra}


async def run(yard: SkillYard, ctx: dict[str, Any], action: str, **params: Any) -> dict[str, Any]:
    return await yard.run("datatable", {"action": action, "payload": params}, context=ctx)


async def make_table(yard: SkillYard, org: str, title: str = "客户", rows: int = 0) -> str:
    created = await run(yard, context(org), "create_table", table_name=title, fields=FIELDS)
    assert created["ok"], created
    if rows:
        records = [{"姓名": f"人{i}", "工号": f"E{i % 3}", "城市": "上海", "金额": i} for i in range(rows)]
        for start in range(0, rows, 100):
            batch = await run(
                yard, context(org), "insert_batch", table_id=created["id"], records=records[start : start + 100]
            )
            assert batch["inserted"] == len(records[start : start + 100]), batch
    return str(created["id"])


async def schema_exists(conn: Any, org: str) -> bool:
    return bool(await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", f"org_data_{org}"))


# --------------------------------------------------------------------------------------------------------------------
# Setup, dispatch and errors


async def test_blank_org_is_a_config_failure_and_creates_nothing(yard: SkillYard, conn: Any) -> None:
    for org_id in (None, "", "  ", "—"):
        env = await run(yard, {"org_id": org_id, "team_role": "owner"}, "create_table", table_name="x", fields=FIELDS)
        assert env["ok"] is False
        assert env["error_type"] == "config" and env["non_retriable"] is True
        assert "org_id" in env["error"]
    assert not await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = 'org_data_'")


async def test_answers_to_its_alias_and_lists_actions_without_one(yard: SkillYard, org: str) -> None:
    env = await yard.run("nocodb", {"action": "list_tables"}, context=context(org))
    assert env["ok"] and env["data"] == [] and env["count"] == 0
    missing = await yard.run("datatable", {"payload": {"table_name": "x"}}, context=context(org))
    assert missing["ok"] is False and missing["need_param"] == "action"
    assert "query" in missing["supported_actions"]


async def test_aliases_are_normalized_and_reported(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=3)
    env = await yard.run(
        "datatable",
        {
            "action": "Query-Rows",
            "payload": {"tableId": table_id, "filter": [{"field": "城市", "op": "=", "value": "上海"}]},
        },
        context=context(org),
    )
    assert env["ok"], env
    assert env["pageInfo"]["totalRows"] == 3
    note = env["action_note"]
    assert "Query-Rows → query" in note and "filter → filters" in note


async def test_unknown_table_lists_the_tables(yard: SkillYard, org: str) -> None:
    await make_table(yard, org)
    env = await run(yard, context(org), "query", table_name="订单")
    assert env["ok"] is False and env["need_param"] == "table_id" and "客户" in env["error"]
    none = await run(yard, context(org), "query")
    assert none["ok"] is False and none["need_param"] == "table_id"


async def test_failed_action_rolls_back_and_the_session_stays_usable(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=2)
    bad = await run(
        yard,
        context(org),
        "update_by",
        table_id=table_id,
        filters=[{"field": "无此字段", "op": "eq", "value": 1}],
        data={"城市": "北京"},
    )
    assert bad["ok"] is False and bad["error_type"] == "recoverable" and "无此字段" in bad["error"]
    dup = await run(yard, context(org), "create_table", table_name="客户", fields=FIELDS)
    assert dup["ok"] and dup["already_exists"] is True and dup["id"] == table_id
    assert await conn.fetchval(f'SELECT count(*) FROM org_data_{org}."客户" WHERE "城市" = $1', "北京") == 0


# --------------------------------------------------------------------------------------------------------------------
# Every action


async def test_row_actions_end_to_end(yard: SkillYard, org: str, tmp_path: Path) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    columns = await run(yard, ctx, "list_columns", table_id=table_id)
    assert [c["title"] for c in columns["data"]] == ["姓名", "工号", "城市", "金额"]
    assert columns["data"][3]["precision"] == 18 and columns["data"][3]["scale"] == 2

    one = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "甲", "金额": "１,２００.５", "外号": "x"})
    assert one["ok"] and one["data"]["金额"] == 1200.5 and one["dropped"] == ["外号"]
    many = await run(yard, ctx, "insert", table_id=table_id, data=[{"姓名": "乙"}, {"姓名": "丙"}])
    assert many["inserted"] == 2 and "insert_batch" in many["action_note"]
    too_many = await run(yard, ctx, "insert_batch", table_id=table_id, records=[{"姓名": str(i)} for i in range(101)])
    assert too_many["ok"] is False and "insert_from_file" in too_many["error"]

    upserted = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields=["姓名"],
        records=[{"姓名": "甲", "城市": "北京"}, {"姓名": "丁"}],
    )
    assert (upserted["inserted"], upserted["updated"], upserted["verified_total"]) == (1, 1, 2)

    updated = await run(yard, ctx, "update", table_id=table_id, row_id=one["id"], data={"城市": "深圳"})
    assert updated["data"]["城市"] == "深圳"
    by = await run(
        yard, ctx, "update_by", table_id=table_id, filters=[{"field": "城市", "op": "is_null"}], data={"城市": "上海"}
    )
    assert by["updated"] == 3

    agg = await run(yard, ctx, "aggregate", table_id=table_id, metrics=[{"op": "count", "alias": "n"}], group_by="城市")
    assert {r["城市"]: r["n"] for r in agg["rows"]} == {"上海": 3, "深圳": 1}

    workspace = Path(yard.workspace(ctx["session_id"]))
    (workspace / "import").mkdir(parents=True, exist_ok=True)
    (workspace / "import" / "rows.json").write_text(
        json.dumps([{"名字": f"导{i}", "金额": i} for i in range(150)] + [{"名字": "坏", "金额": "1亿"}]),
        encoding="utf-8",
    )
    imported = await run(
        yard, ctx, "insert_from_file", table_id=table_id, file="import/rows.json", mapping={"姓名": "名字"}
    )
    assert (imported["inserted"], imported["failed"], imported["verified_total"]) == (150, 1, 150), imported

    page = await run(
        yard,
        ctx,
        "query",
        table_id=table_id,
        sort="金额",
        limit=5,
        offset=1,
        filters=[{"field": "姓名", "op": "contains", "value": "导"}],
    )
    assert [r["金额"] for r in page["list"]] == [1, 2, 3, 4, 5] and page["pageInfo"]["totalRows"] == 150

    single = await run(yard, ctx, "delete", table_id=table_id, row_id=one["id"])
    assert single["ok"] and single["data"] is True and "backup_file" not in single
    again = await run(yard, ctx, "delete", table_id=table_id, row_id=one["id"])
    assert again["ok"] is False and again["need_param"] == "row_id"


async def test_structure_actions_and_dry_runs(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org, rows=2)
    added = await run(yard, ctx, "add_field", table_id=table_id, field={"title": "备注", "type": "long_text"})
    assert added["ok"] and added["uidt"] == "长文本"
    renamed = await run(yard, ctx, "update_field", table_id=table_id, field_title="备注", patch={"title": "说明"})
    assert renamed["title"] == "说明"

    preview = await run(yard, ctx, "update_field", table_id=table_id, field_title="工号", patch={"uidt": "整数"})
    assert preview["dry_run"] is True and "确认=true" in preview["message"]
    still = await run(yard, ctx, "list_columns", table_id=table_id)
    assert next(c for c in still["data"] if c["title"] == "工号")["uidt"] == "文本"

    preview = await run(yard, ctx, "delete_field", table_id=table_id, field_title="说明")
    assert preview["dry_run"] is True
    deleted = await run(yard, ctx, "delete_field", table_id=table_id, field_title="说明", confirm=True)
    assert deleted["deleted"] is True and "confirm → 确认" in deleted["action_note"]

    preview = await run(yard, ctx, "delete_table", table_id=table_id)
    assert preview["dry_run"] is True and "2 row(s)" in preview["message"]
    assert await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f'org_data_{org}."客户"')
    gone = await yard.run("datatable", {"action": "确认删除表", "payload": {"table_id": table_id}}, context=ctx)
    assert gone["ok"] and gone["data"] is True
    assert not await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f'org_data_{org}."客户"')


async def test_structure_needs_owner_or_admin(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    member = context(org, team_role="member")
    for action, params in [
        ("create_table", {"table_name": "新表", "fields": FIELDS}),
        ("add_field", {"table_id": table_id, "field": {"title": "x", "uidt": "文本"}}),
        ("delete_table", {"table_id": table_id, "确认": True}),
        ("sql_execute", {"sql": "CREATE TABLE 新表 (名称 text)"}),
    ]:
        env = await run(yard, member, action, **params)
        assert env["ok"] is False and env["error_type"] == "config" and "owner or admin" in env["error"], (action, env)
    assert (
        await run(
            yard, context(org, team_role="admin"), "add_field", table_id=table_id, field={"title": "x", "uidt": "文本"}
        )
    )["ok"]


# --------------------------------------------------------------------------------------------------------------------
# Permissions


async def grant(conn: Any, org: str, table: str, role: str, ops: str, **kw: Any) -> None:
    from support.datatable import load_datatable_module

    permission_grants = load_datatable_module("permissions_grants")
    await permission_grants.grant(conn, f"org_data_{org}", table_id_or_name=table, role=role, ops=ops, **kw)


async def test_own_scope_filters_stamps_and_fails_closed(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=9)  # 工号 E0, E1, E2 three rows each
    await grant(conn, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
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
    await grant(conn, org, "客户", "staff", "read")
    ctx = context(org)
    assert (await run(yard, ctx, "query", table_id=table_id))["ok"]
    refused = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "x"})
    assert refused["ok"] is False and refused["error_type"] == "config"
    off = await run(yard, context(org, role_id="boss", allow_sql=False), "sql_query", sql="SELECT 1 AS x")
    assert off["ok"] is False and "allow_sql" in off["error"]


# --------------------------------------------------------------------------------------------------------------------
# Delete protection


def backups(yard: SkillYard, ctx: dict[str, Any]) -> list[Path]:
    return sorted(Path(yard.workspace(ctx["session_id"])).glob("del_backup_*.json"))


async def test_delete_by_needs_a_token_in_chat_mode_and_backs_up(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=12)
    ctx = context(org, chat_mode=True)
    filters = [{"field": "城市", "op": "eq", "value": "上海"}]
    asked = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters)
    assert asked["needs_confirmation"] is True and asked["affected"] == 12 and asked["confirm_token"]
    assert await conn.fetchval(f'SELECT count(*) FROM org_data_{org}."客户"') == 12

    other = await run(
        yard,
        ctx,
        "delete_by",
        table_id=table_id,
        filters=[{"field": "金额", "op": "gt", "value": 0}],
        confirm_token=asked["confirm_token"],
    )
    assert other["ok"] is False and other["need_param"] == "confirm_token"
    done = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters, confirm_token=asked["confirm_token"])
    assert done["ok"] and done["deleted"] == 12
    backup = Path(done["backup_file"])
    assert backup in backups(yard, ctx) and len(json.loads(backup.read_text(encoding="utf-8"))) == 12
    reused = await run(yard, ctx, "delete_by", table_id=table_id, filters=filters, confirm_token=asked["confirm_token"])
    assert reused["ok"] is False and "already used" in reused["error"]

    empty = await run(yard, ctx, "delete_by", table_id=table_id, filters=[])
    assert empty["ok"] is False and empty["need_param"] == "filters"


async def test_delete_batch_small_runs_at_once_large_asks(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    ids = [r["id"] for r in (await run(yard, ctx, "query", table_id=table_id))["list"]]
    small = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids[:3])
    assert (small["deleted"], small["requested"]) == (3, 3) and small["backup_file"]
    large = await run(yard, ctx, "delete_batch", table_id=table_id, row_ids=ids[3:])
    assert large["needs_confirmation"] is True and large["affected"] == 12
    unattended = await run(yard, context(org, chat_mode=False), "delete_batch", table_id=table_id, row_ids=ids[3:])
    assert unattended["deleted"] == 12


async def test_sql_delete_is_confirmed_and_backed_up(yard: SkillYard, org: str, conn: Any) -> None:
    await make_table(yard, org, rows=20)
    ctx = context(org, chat_mode=True)
    sql = "DELETE FROM 客户 WHERE 金额 >= 5"
    asked = await run(yard, ctx, "sql_execute", sql=sql)
    assert asked["needs_confirmation"] is True and asked["affected"] == 15
    assert await conn.fetchval(f'SELECT count(*) FROM org_data_{org}."客户"') == 20
    done = await run(yard, ctx, "sql_execute", sql=sql, confirm_token=asked["confirm_token"])
    assert done["ok"] and done["affected"] == 15
    assert len(json.loads(Path(done["backup_file"]).read_text(encoding="utf-8"))) == 15
    few = await run(yard, ctx, "sql_execute", sql="DELETE FROM 客户 WHERE 金额 < 2")
    assert few["affected"] == 2 and few["backup_file"]


# --------------------------------------------------------------------------------------------------------------------
# SQL channel


async def test_sql_created_tables_become_ordinary_tables(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "sql_execute",
        sql="CREATE TABLE 库存 (品名 text UNIQUE, 数量 integer, 单价 numeric(10,2), 到货 date)",
    )
    assert made["ok"] and made["table_id"], made
    assert [(f["title"], f["uidt"]) for f in made["fields"]] == [
        ("品名", "文本"),
        ("数量", "整数"),
        ("单价", "数字"),
        ("到货", "日期"),
    ]
    listed = await run(yard, ctx, "list_tables")
    assert "库存" in [t["title"] for t in listed["data"]]
    inserted = await run(
        yard,
        ctx,
        "insert",
        table_name="库存",
        data={"品名": "螺丝", "数量": "1,000", "单价": "0.5", "到货": "2026-11-01"},
    )
    assert inserted["ok"] and inserted["data"]["数量"] == 1000
    read = await run(
        yard, ctx, "sql_query", sql="SELECT 品名, 单价 * 数量 AS 总价 FROM 库存 WHERE note IS NULL OR true"
    )
    assert read["ok"] is False  # unknown column: PostgreSQL's error, classified
    read = await run(yard, ctx, "sql_query", sql="SELECT 品名, 单价 * 数量 AS 总价 FROM 库存")
    assert read["rows"] == [{"品名": "螺丝", "总价": "500.00"}] and read["row_count"] == 1
    refused = await run(yard, ctx, "sql_query", sql="SELECT * FROM pg_tables")
    assert refused["ok"] is False and refused["error_type"] == "recoverable" and refused["need_param"] == "sql"


# --------------------------------------------------------------------------------------------------------------------
# Bad input: a clear error, nothing written


@pytest.mark.parametrize(
    ("input", "need_param", "says"),
    [
        ({"action": "query", "payload": "{not json"}, "payload", "not valid JSON"),
        ({"action": "query", "payload": [1, 2]}, "payload", "object"),
        ({"action": "list"}, "action", "ambiguous"),
        ({"action": "explode_table"}, "action", "unknown action"),
        ({"action": 7}, "action", "string"),
        ({"action": "确认"}, "action", "confirms nothing"),
    ],
)
async def test_unreadable_requests(
    yard: SkillYard, org: str, input: dict[str, Any], need_param: str, says: str
) -> None:
    env = await yard.run("datatable", input, context=context(org))
    assert env["ok"] is False and env["need_param"] == need_param and says in env["error"], env


async def test_bad_parameters_say_what_to_fix(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org, rows=1)
    cases = [
        ("insert", {"table_id": table_id}, "data"),
        ("insert_batch", {"table_id": table_id, "records": "not a list"}, "records"),
        ("update", {"table_id": table_id, "data": {"姓名": "x"}}, "row_id"),
        ("aggregate", {"table_id": table_id}, "metrics"),
        ("upsert", {"table_id": table_id, "records": [{"姓名": "x"}]}, "key_fields"),
        ("delete_batch", {"table_id": table_id}, "row_ids"),
        ("insert_from_file", {"table_id": table_id, "file": "../../etc/passwd"}, "file"),
        ("sql_query", {}, "sql"),
        ("create_table", {"table_name": "1坏名", "fields": FIELDS}, "table_name"),
        ("query", {"table_id": table_id, "filters": [{"field": "姓名", "op": "eq", "value": "{name}"}]}, "filters"),
    ]
    for action, params, need in cases:
        env = await run(yard, ctx, action, **params)
        assert env["ok"] is False and env["error_type"] == "recoverable", (action, env)
        assert env.get("need_param") == need or need in env["error"], (action, env)
    assert await conn.fetchval(f'SELECT count(*) FROM org_data_{org}."客户"') == 1


async def test_sql_statements_that_try_to_stack_or_escape(yard: SkillYard, org: str, conn: Any) -> None:
    await make_table(yard, org, rows=2)
    ctx = context(org)
    for sql in (
        "SELECT 1; DROP TABLE 客户",
        "DELETE FROM 客户",
        "UPDATE 客户 SET 金额 = 0 WHERE true",
        "SELECT * FROM public.skill_configs",
        "SELECT pg_sleep(10)",
        "COPY 客户 TO '/tmp/x'",
    ):
        env = await run(yard, ctx, "sql_execute" if not sql.startswith("SELECT") else "sql_query", sql=sql)
        assert env["ok"] is False and env["error_code"], (sql, env)
    assert await conn.fetchval(f'SELECT count(*) FROM org_data_{org}."客户"') == 2


async def test_without_a_session_the_handler_says_how_to_run_it(org: str) -> None:
    from support.datatable import load_datatable_module

    handler = load_datatable_module("handler")
    env = await handler.execute({"action": "list_tables"}, {"org_id": org})
    assert env["ok"] is False and env["error_type"] == "config" and "runtime_context['db']" in env["error"]


async def test_bad_sql_timeout_config_is_a_config_error(yard: SkillYard, org: str) -> None:
    env = await run(yard, context(org, skill_configs={"sql_timeout": "soon"}), "sql_query", sql="SELECT 1 AS x")
    assert env["ok"] is False and env["error_type"] == "config" and "sql_timeout" in env["error"]


async def test_a_table_named_like_a_type_does_not_shadow_it(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await run(yard, ctx, "sql_execute", sql="CREATE TABLE timestamptz (名称 text)")
    assert made["ok"], made  # the follow-up ALTER TABLE … created_at timestamptz still means the built-in type
    again = await run(yard, ctx, "sql_execute", sql="INSERT INTO timestamptz (名称) VALUES ('a')")
    assert again["affected"] == 1
    read = await run(yard, ctx, "sql_query", sql="SELECT 名称, created_at IS NOT NULL AS stamped FROM timestamptz")
    assert read["rows"] == [{"名称": "a", "stamped": True}]


async def test_page_boundaries_report_exact_totals(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=12)
    ctx = context(org)
    for limit, offset, total, last, size in [
        (12, 0, 12, True, 12),
        (11, 0, 12, False, 11),
        (5, 10, 12, True, 2),
        (5, 12, 12, True, 0),
        (13, 0, 12, True, 12),
    ]:
        page = await run(yard, ctx, "query", table_id=table_id, limit=limit, offset=offset)
        info = page["pageInfo"]
        assert (info["totalRows"], info["isLastPage"], len(page["list"])) == (total, last, size), (limit, offset, info)


# --------------------------------------------------------------------------------------------------------------------
# The handler's fast path and its redo (a set-based write without its savepoint; metadata remembered per process)


async def test_row_level_failure_redoes_the_batch_with_one_savepoint_per_row(yard: SkillYard, org: str) -> None:
    made = await run(
        yard,
        context(org),
        "create_table",
        table_name="编号表",
        fields=[{"title": "编号", "uidt": "文本", "unique": True}, {"title": "姓名", "uidt": "文本"}],
    )
    assert made["ok"], made
    records = [{"编号": "A", "姓名": "甲"}, {"编号": "A", "姓名": "乙"}, {"编号": "B", "姓名": "丙"}]
    batch = await run(yard, context(org), "insert_batch", table_id=made["id"], records=records)
    assert batch["ok"], batch
    assert (batch["inserted"], batch["failed"], batch["verified_total"]) == (2, 1, 2), batch
    assert [e["row"] for e in batch["errors"]] == [2]
    merged = await run(
        yard,
        context(org),
        "upsert",
        table_id=made["id"],
        key_fields=["姓名"],
        records=[{"编号": "C", "姓名": "丁"}, {"编号": "B", "姓名": "戊"}],
    )
    assert merged["ok"], merged
    assert (merged["inserted"], merged["updated"], merged["failed"], merged["verified_total"]) == (1, 0, 1, 1)
    assert [e["row"] for e in merged["errors"]] == [2]
    listed = await run(yard, context(org), "query", table_id=made["id"], sort="id")
    assert [r["编号"] for r in listed["list"]] == ["A", "B", "C"]


async def test_vanished_metadata_is_redone_the_slow_way(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=3)
    assert (await run(yard, context(org), "query", table_id=table_id))["pageInfo"]["totalRows"] == 3
    await conn.execute(f"DROP SCHEMA org_data_{org} CASCADE")
    gone = await run(yard, context(org), "query", table_id=table_id)
    assert gone["ok"] is False and gone.get("need_param") == "table_id", gone
    assert "no tables yet" in gone["error"]
