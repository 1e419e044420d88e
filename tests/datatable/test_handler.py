"""The skill's entry (handler.py) end to end through SkillYard: the organisation's schema, the session's transaction
(commit, rollback, redo), failure envelopes and action notes, the nocodb alias, call_skill and ``skillyard run
datatable``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.executors.inprocess import entry_function
from support.datatable import FIELDS, context, count, grant, make_table, run, run_skillyard, titles


def test_the_executor_runs_the_handler_module_tests_import() -> None:
    """The built-in skills' root is a package: the loader imports the skill under its real name, so the handler the
    executor runs is the very module the plugin and the tests import, never a second copy of it."""
    from skillyard.builtin_skills.datatable import handler

    function = entry_function(SkillYard().skill("datatable"))
    assert function is handler.execute
    assert sys.modules[function.__module__] is handler
    assert handler.__name__ == "skillyard.builtin_skills.datatable.handler"


CALLER = """
async def execute(input, ctx):
    call = ctx["call_skill"]
    out = {}
    for name in ("datatable", "nocodb"):
        out[name + "_query"] = await call(name, {"action": "query", "payload": {"table_name": "客户"}})
        out[name + "_sql"] = await call(name, {"action": "sql_query", "sql": "SELECT count(*) AS n FROM 订单"})
    return {"ok": True, "results": out}
"""


async def test_blank_org_is_a_config_failure_and_creates_nothing(yard: SkillYard, conn: Any) -> None:
    for org_id in (None, "", "  "):  # "—" or "中文" is an id now, with a schema of its own (hardening issue 1)
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


async def test_without_a_session_the_handler_says_how_to_run_it(org: str) -> None:
    from skillyard.builtin_skills.datatable import handler

    env = await handler.execute({"action": "list_tables"}, {"org_id": org})
    assert env["ok"] is False and env["error_type"] == "config" and "runtime_context['db']" in env["error"]


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


@pytest.mark.spec("§7.1")
@pytest.mark.parametrize("org_id", [None, "", "   "])
async def test_blank_org_for_every_kind_of_action_is_config_and_creates_nothing(
    yard: SkillYard, conn: Any, org_id: Any
) -> None:
    before = await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'org_data_%'")
    for action, params in [
        ("list_tables", {}),
        ("query", {"table_name": "客户"}),
        ("sql_query", {"sql": "SELECT 1 AS x"}),
        ("create_table", {"table_name": "客户", "fields": FIELDS}),
    ]:
        ctx = {"team_role": "owner", "session_id": "s-blank"}
        if org_id is not None:
            ctx["org_id"] = org_id
        env = await yard.run("datatable", {"action": action, "payload": params}, context=ctx)
        assert env["ok"] is False and env["error_type"] == "config" and env.get("non_retriable") is True, (action, env)
    assert await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'org_data_%'") == before
    assert not await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = 'org_data_'")


async def test_nocodb_alias_runs_every_kind_of_action(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await yard.run(
        "nocodb", {"action": "create_table", "payload": {"table_name": "客户", "fields": FIELDS}}, context=ctx
    )
    assert made["ok"], made
    ins = await yard.run("nocodb", {"action": "insert", "table_name": "客户", "data": {"姓名": "甲"}}, context=ctx)
    assert ins["ok"] and ins["data"]["姓名"] == "甲", ins
    q = await yard.run("nocodb", {"action": "sql_query", "payload": {"sql": "SELECT 姓名 FROM 客户"}}, context=ctx)
    assert q["rows"] == [{"姓名": "甲"}]


@pytest.mark.spec("§7.8")
async def test_failures_mid_action_leave_nothing_and_the_session_usable(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=4)
    ctx = context(org, chat_mode=False)
    for fields in (
        [{"title": "a", "uidt": "文本"}, {"title": "b", "uidt": "bogus"}],
        [{"title": "a", "uidt": "文本", "unique": True}, {"title": "a", "uidt": "整数"}],
        [{"title": "a", "uidt": "文本"}, {"title": "中" * 22, "uidt": "文本"}],
    ):
        env = await run(yard, ctx, "create_table", table_name="半成品", fields=fields)
        assert env["ok"] is False, env
    assert "半成品" not in await titles(yard, org)
    assert not await conn.fetchval(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relname = '半成品'",
        f"org_data_{org}",
    )
    sql = await run(yard, ctx, "sql_execute", sql="UPDATE 客户 SET 金额 = 10 / (金额 - 2) WHERE 金额 >= 0")
    assert sql["ok"] is False and sql["error_type"] == "recoverable", sql
    assert sorted(r["金额"] for r in (await run(yard, ctx, "query", table_id=table_id))["list"]) == [0, 1, 2, 3]
    batch = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields="姓名",
        records=[{"姓名": "人0", "金额": 9}, {"姓名": "人1", "金额": "9万"}],
    )
    assert batch["ok"] and (batch["updated"], batch["failed"]) == (1, 1), batch
    assert await count(conn, org, where="WHERE 金额 = 9") == 1


@pytest.mark.spec("§7")
@pytest.mark.spec("§9.1")
@pytest.mark.usefixtures("db_env")
async def test_call_skill_by_either_name_inherits_org_actor_and_allow_sql(
    org: str, make_skill: Any, skills_root: Path
) -> None:
    make_skill("dt_caller", files={"handler.py": CALLER})
    async with SkillYard(skills_dirs=[skills_root]) as y:
        await make_table(y, org, rows=9)
        await make_table(y, org, title="订单", fields=[{"title": "单号", "uidt": "文本"}])
        await grant(y, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
        env = await y.run("dt_caller", {}, context=context(org, actor_emp_no="E1", allow_sql=False))
    assert env["ok"], env
    for name in ("datatable", "nocodb"):
        q = env["results"][f"{name}_query"]
        assert q["ok"] and {r["工号"] for r in q["list"]} == {"E1"} and q["pageInfo"]["totalRows"] == 3, (name, q)
        s = env["results"][f"{name}_sql"]
        assert s["ok"] is False and s["error_type"] == "config", (name, s)  # allow_sql=False is inherited


@pytest.mark.usefixtures("db_env")
def test_cli_run_datatable_exit_codes_json_and_no_tracebacks(org: str, tmp_path: Path) -> None:
    ctx = json.dumps({"org_id": org, "team_role": "owner"})
    made = run_skillyard(
        "run",
        "datatable",
        "--context",
        ctx,
        "--input",
        json.dumps({"action": "create_table", "payload": {"table_name": "客户", "fields": FIELDS}}, ensure_ascii=False),
    )
    assert made.returncode == 0, made.stderr
    lines = made.stdout.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["ok"] is True and json.loads(lines[0])["title"] == "客户"
    for payload in (
        {"action": "query", "payload": {"table_name": "无"}},
        {"action": "sql_query", "sql": "SELECT 1/0 AS x"},
        {"payload": {"table_name": "客户"}},
        {"action": "insert", "table_name": "客户", "data": {"金额": "3万"}},
    ):
        bad = run_skillyard("run", "nocodb", "--context", ctx, "--input", json.dumps(payload, ensure_ascii=False))
        assert bad.returncode == 1, (payload, bad.stdout, bad.stderr)
        envelope = json.loads(bad.stdout)
        assert envelope["ok"] is False and envelope["error"] and envelope["error_type"] == "recoverable", envelope
        assert "Traceback" not in bad.stderr + bad.stdout, bad.stderr
    ws = tmp_path / "ws"
    (ws / "import").mkdir(parents=True)
    (ws / "import" / "rows.json").write_text(
        json.dumps([{"姓名": f"c{i}"} for i in range(120)], ensure_ascii=False), encoding="utf-8"
    )
    imported = run_skillyard(
        "run",
        "datatable",
        "--workspace",
        str(ws),
        "--context",
        ctx,
        "--input",
        json.dumps({"action": "insert_from_file", "payload": {"table_name": "客户", "file": "import/rows.json"}}),
    )
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert json.loads(imported.stdout)["verified_total"] == 120
    usage = run_skillyard("run", "datatable", "--context", ctx, "--input", "[1]")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr, usage.stderr


@pytest.mark.spec("§3.5")
async def test_nocodb_alias_applies_the_same_normalization(yard: SkillYard, org: str, conn: Any) -> None:
    await make_table(yard, org, rows=3)
    ctx = context(org)
    env = await yard.run("nocodb", {"action": "Delete-Table", "payload": {"table": "客户"}}, context=ctx)
    assert env["ok"] and env["dry_run"] is True and "Delete-Table → delete_table" in env["action_note"], env
    q = await yard.run("nocodb", {"action": "查询", "table": "客户", "order_by": "-金额", "limit": 1}, context=ctx)
    assert q["ok"] and q["list"][0]["金额"] == 2 and "order_by → sort" in q["action_note"], q
    assert await count(conn, org) == 3
