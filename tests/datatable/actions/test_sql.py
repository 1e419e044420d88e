"""The SQL channel's actions through the skill (actions/sql.py, spec §7.6): sql_query and sql_execute, their reply
shapes, refusals, DELETE previews and backups, tables made on the channel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from support.datatable import big_table, context, count, make_table, run, unload


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


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
async def test_sql_query_shape_and_colons_in_literals(yard: SkillYard, org: str) -> None:
    await make_table(yard, org, rows=2)
    ctx = context(org)
    env = await run(
        yard, ctx, "sql_query", sql="""SELECT 姓名, '{"value":0.85}' AS j, 'a:b:c' AS t FROM 客户 ORDER BY 姓名"""
    )
    assert env["ok"], env
    assert set(env) >= {"rows", "row_count", "sql"} and env["row_count"] == 2
    assert env["rows"][0]["j"] == '{"value":0.85}' and env["rows"][0]["t"] == "a:b:c"
    assert f"org_data_{org}" in env["sql"]


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
async def test_sql_result_cap_flags_truncated(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    await big_table(yard, org, 1100)
    env = unload(await run(yard, ctx, "sql_query", sql="SELECT 编号 FROM 大表"))
    assert env["ok"] and env["truncated"] is True and len(env["rows"]) == 1000
    small = await run(yard, ctx, "sql_query", sql="SELECT count(*) AS n FROM 大表")
    assert small["rows"] == [{"n": 1100}] and small["truncated"] is False


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
async def test_sql_execute_shapes(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    made = await run(yard, ctx, "sql_execute", sql="CREATE TABLE 库存 (品名 text, 数量 integer)")
    assert made["ok"] and made["table_id"] and made["created"], made
    assert "affected" in made
    ins = await run(
        yard, ctx, "sql_execute", sql="INSERT INTO 库存 (品名, 数量) VALUES ('a', 1), ('b', 2) RETURNING 品名"
    )
    assert ins["ok"] and ins["affected"] == 2 and sorted(r["品名"] for r in ins["rows"]) == ["a", "b"], ins
    upd = await run(yard, ctx, "sql_execute", sql="UPDATE 库存 SET 数量 = 数量 + 1 WHERE 品名 = 'a'")
    assert upd["ok"] and upd["affected"] == 1
    q = await run(yard, ctx, "query", table_name="库存", sort="品名")
    assert [(r["品名"], r["数量"]) for r in q["list"]] == [("a", 2), ("b", 2)]


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
@pytest.mark.parametrize(
    ("mode", "sql"),
    [
        ("sql_query", "SELECT * FROM public.skill_configs"),
        ("sql_query", "SELECT * FROM pg_catalog.pg_class"),
        ("sql_query", "SELECT * FROM information_schema.tables"),
        ("sql_query", "SELECT * FROM pg_tables"),
        ("sql_query", "SELECT * FROM pg_roles"),
        ("sql_query", "SELECT * FROM org_data_other.客户"),
        ("sql_query", "SELECT set_config('skillyard.all_rows', 'on', false)"),
        ("sql_query", "SELECT current_setting('skillyard.emp_no')"),
        ("sql_query", "SELECT pg_sleep(1)"),
        ("sql_query", "SELECT pg_read_file('/etc/passwd')"),
        ("sql_query", "SELECT lo_import('/etc/passwd')"),
        ("sql_query", "SELECT pg_advisory_lock(1)"),
        ("sql_query", "SELECT * FROM 客户 FOR UPDATE"),
        ("sql_query", "SELECT * INTO 新表 FROM 客户"),
        ("sql_query", "SELECT 1; SELECT 2"),
        ("sql_query", "INSERT INTO 客户 (姓名) VALUES ('x')"),
        ("sql_query", "WITH d AS (DELETE FROM 客户 WHERE 金额 > 0 RETURNING *) SELECT * FROM d"),
        ("sql_query", "SELECT '{}'::jsonb"),
        ("sql_execute", "BEGIN"),
        ("sql_execute", "COMMIT"),
        ("sql_execute", "SET search_path TO public"),
        ("sql_execute", "RESET ROLE"),
        ("sql_execute", "DO $$ BEGIN END $$"),
        ("sql_execute", "COPY 客户 FROM '/etc/passwd'"),
        ("sql_execute", "CREATE FUNCTION f() RETURNS int AS 'SELECT 1' LANGUAGE sql"),
        ("sql_execute", "CREATE ROLE x"),
        ("sql_execute", "CREATE EXTENSION dblink"),
        ("sql_execute", "CREATE SCHEMA x"),
        ("sql_execute", "CREATE TABLE t1 (id bigint, 名称 text)"),
        ("sql_execute", "CREATE TABLE t2 (created_at timestamptz, 名称 text)"),
        ("sql_execute", "CREATE TABLE t3 (名称 text PRIMARY KEY)"),
        ("sql_execute", "CREATE TABLE t4 (名称 text, PRIMARY KEY (名称))"),
        ("sql_execute", "CREATE TABLE t5 (数据 jsonb)"),
        ("sql_execute", "CREATE TABLE t6 (容差% numeric)"),
        ("sql_execute", 'CREATE TABLE t7 ("容差%" numeric)'),
        ("sql_execute", "CREATE TABLE t8 (数据 text DEFAULT '[]'::jsonb)"),
        ("sql_execute", "UPDATE 客户 SET 金额 = 0"),
        ("sql_execute", "DELETE FROM 客户"),
        ("sql_execute", "DROP TABLE 客户"),
        ("sql_execute", "TRUNCATE 客户"),
        ("sql_execute", "ALTER TABLE 客户 ADD COLUMN x text"),
        ("sql_execute", "GRANT ALL ON 客户 TO PUBLIC"),
        ("sql_execute", "LOCK TABLE 客户"),
        ("sql_execute", "UPDATE 客户 SET 金额 = 0 WHERE true; DROP TABLE 客户"),
        ("sql_execute", "SELECT 1"),
        ("sql_query", "SELECT * FROM _dt_tables"),
        ("sql_query", "SELECT dblink('host=x', 'select 1')"),
    ],
)
async def test_sql_refusals_are_recoverable_and_change_nothing(
    yard: SkillYard, org: str, conn: Any, mode: str, sql: str
) -> None:
    await make_table(yard, org, rows=2)
    env = await run(yard, context(org, chat_mode=False), mode, sql=sql)
    assert env["ok"] is False and env["error_type"] in ("recoverable", "config"), env
    assert env.get("need_param") == "sql" or env["error_type"] == "config", env
    assert await count(conn, org) == 2
    listed = await run(yard, context(org), "list_tables")
    assert [t["title"] for t in listed["data"]] == ["客户"]


async def test_statement_timeout_is_transient_not_blacklisted(yard: SkillYard, org: str) -> None:
    await big_table(yard, org, 2000)
    ctx = context(org, skill_configs={"sql_timeout": 0.1})  # the least sql_timeout allowed
    env = await run(yard, ctx, "sql_query", sql="SELECT count(*) FROM 大表 a, 大表 b, 大表 c")
    assert env["ok"] is False and env["error_type"] == "transient" and not env.get("non_retriable"), env


async def test_sql_byte_cap_and_trailing_semicolon(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    await big_table(yard, org, 400)
    big = unload(await run(yard, ctx, "sql_query", sql="SELECT 编号, repeat('x', 10000) AS pad FROM 大表"))
    assert big["ok"] and big["truncated"] is True and 0 < len(big["rows"]) < 400, {
        k: v for k, v in big.items() if k != "rows"
    }
    assert sum(len(json.dumps(r, ensure_ascii=False)) for r in big["rows"]) <= 2 * 1024 * 1024 + 20000
    one = await run(yard, ctx, "sql_query", sql="SELECT count(*) AS n FROM 大表;")
    assert one["ok"] and one["rows"] == [{"n": 400}], one


@pytest.mark.spec("§6.1")
async def test_sql_refusal_for_own_scope_is_a_permission_refusal(yard: SkillYard, org: str, own_table: str) -> None:
    """references/permissions.md: "A refusal by permissions has error_type: config"; §6.1: authorization problems
    are non_retriable."""
    env = await run(yard, context(org, actor_emp_no="E1"), "sql_query", sql="SELECT * FROM 客户")
    assert env["ok"] is False and env["error_code"] == "forbidden_table"
    assert env["error_type"] == "config", env


@pytest.mark.spec("§7.3")
async def test_sql_reply_shapes(yard: SkillYard, org: str) -> None:
    ctx = context(org, chat_mode=False)
    made = await run(yard, ctx, "sql_execute", sql="CREATE TABLE 库存 (品名 text, 数量 integer)")
    assert made["ok"] and made["created"] == "库存" and made["table_id"] and made["fields"], made
    assert [f["title"] for f in made["fields"]] == ["品名", "数量"]
    ins = await run(yard, ctx, "sql_execute", sql="INSERT INTO 库存 (品名, 数量) VALUES ('a', 1), ('b', 2)")
    assert ins["ok"] and ins["affected"] == 2 and ins.get("rows", []) == [], ins
    index = await run(yard, ctx, "sql_execute", sql="CREATE INDEX 库存_品名 ON 库存 (品名)")
    assert index["ok"], index
    q = await run(yard, ctx, "sql_query", sql="SELECT 品名, 数量 FROM 库存 ORDER BY 品名")
    assert set(q) >= {"rows", "row_count", "sql", "truncated", "isolation", "notes"}, q
    assert q["rows"] == [{"品名": "a", "数量": 1}, {"品名": "b", "数量": 2}] and q["row_count"] == 2
    gone = await run(yard, ctx, "sql_execute", sql="DELETE FROM 库存 WHERE 品名 = 'a'")
    assert gone["ok"] and gone["affected"] == 1 and gone["backup_file"], gone
    assert [r["品名"] for r in json.loads(Path(gone["backup_file"]).read_text(encoding="utf-8"))] == ["a"]


@pytest.mark.spec("§7.7")
async def test_sql_delete_confirmation_token_and_backup(yard: SkillYard, org: str, conn: Any) -> None:
    await make_table(yard, org, rows=15)
    ctx = context(org, chat_mode=True)
    ten = await run(yard, ctx, "sql_execute", sql="DELETE FROM 客户 WHERE 金额 < 10")
    assert ten["ok"] and ten["affected"] == 10 and "confirm_token" not in ten and ten["backup_file"], ten
    assert len(json.loads(Path(ten["backup_file"]).read_text(encoding="utf-8"))) == 10
    await make_table(yard, org, title="订单", rows=15)
    sql = "DELETE FROM 订单 WHERE 金额 >= 0"
    asked = await run(yard, ctx, "sql_execute", sql=sql)
    assert asked["ok"] and asked["needs_confirmation"] and asked["affected"] == 15, asked
    other = await run(
        yard, ctx, "sql_execute", sql="DELETE FROM 订单 WHERE 金额 >= 1", confirm_token=asked["confirm_token"]
    )
    assert other["ok"] is False, other
    assert await count(conn, org, "订单") == 15
    done = await run(yard, ctx, "sql_execute", sql=sql, confirm_token=asked["confirm_token"])
    assert done["ok"] and done["affected"] == 15 and done["backup_file"], done
    assert len(json.loads(Path(done["backup_file"]).read_text(encoding="utf-8"))) == 15
    assert await count(conn, org, "订单") == 0


@pytest.mark.spec("§7.7")
async def test_sql_delete_backup_holds_every_deleted_row(yard: SkillYard, org: str, conn: Any) -> None:
    """Issue 4: "Before every delete (delete_batch, delete_by, SQL DELETE), the rows are backed up". A DELETE whose
    WHERE calls a volatile function (random() is on the allow-list) is previewed by a separate SELECT that picks
    other rows than the DELETE removes: the backup must hold every row that was deleted (or such a DELETE is
    refused)."""
    await make_table(yard, org, rows=60)
    ctx = context(org, chat_mode=False)
    env = await run(yard, ctx, "sql_execute", sql="DELETE FROM 客户 WHERE random() < 0.5 AND 金额 >= 0 RETURNING id")
    if not env["ok"]:
        assert await count(conn, org) == 60, env
        return
    deleted = {r["id"] for r in env["rows"]}
    backed = (
        {r["id"] for r in json.loads(Path(env["backup_file"]).read_text(encoding="utf-8"))}
        if env.get("backup_file")
        else set()
    )
    assert deleted <= backed, f"{len(deleted - backed)} of {len(deleted)} deleted rows are not in the backup"


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
@pytest.mark.spec("§7.6.3")
async def test_sql_execute_keeps_colons_and_casts_in_literals(yard: SkillYard, org: str) -> None:
    """§7.6.3 (fix the cause): ':word' inside a literal is no bind parameter, on sql_execute too."""
    ctx = context(org)
    assert (await run(yard, ctx, "sql_execute", sql="CREATE TABLE 配置 (键 text, 值 text, 时刻 time)"))["ok"]
    env = await run(
        yard,
        ctx,
        "sql_execute",
        sql="""INSERT INTO 配置 (键, 值, 时刻) VALUES ('a:b', '{"value":0.85,"k":"v:w"}', '12:30'::time),
               (E'x:y', $$ :z $$, CAST('08:00' AS time)) RETURNING 键, 值""",
    )
    assert env["ok"] and env["affected"] == 2, env
    assert [r["值"] for r in env["rows"]] == ['{"value":0.85,"k":"v:w"}', " :z "]
    upd = await run(yard, ctx, "sql_execute", sql="UPDATE 配置 SET 值 = 'p:q' WHERE 键 = 'a:b'")
    assert upd["ok"] and upd["affected"] == 1, upd


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
async def test_sql_created_timestamp_column_takes_iso_values(yard: SkillYard, org: str) -> None:
    """references/sql.md: "A table made with CREATE TABLE is registered like one made by create_table … the
    structured actions work on it", timestamp → 日期时间. Writing and filtering an ISO date-time through insert,
    update and query must work as on any 日期时间 field (insert_batch already does)."""
    ctx = context(org)
    made = await run(yard, ctx, "sql_execute", sql="CREATE TABLE 日志 (事件 text, 发生 timestamp)")
    assert made["ok"] and {f["title"]: f["uidt"] for f in made["fields"]}["发生"] == "日期时间", made
    batch = await run(
        yard,
        ctx,
        "insert_batch",
        table_name="日志",
        records=[{"事件": "a", "发生": "2026-01-01T10:00:00"}, {"事件": "b"}],
    )
    assert batch["ok"] and batch["inserted"] == 2, batch
    problems = {}
    ins = await run(yard, ctx, "insert", table_name="日志", data={"事件": "c", "发生": "2026-01-02T10:00:00"})
    if not ins["ok"]:
        problems["insert"] = ins["error"]
    upd = await run(
        yard, ctx, "update", table_name="日志", row_id=batch["ids"][1], data={"发生": "2026-02-01T08:00:00"}
    )
    if not upd["ok"]:
        problems["update"] = upd["error"]
    q = await run(yard, ctx, "query", table_name="日志", filters=[{"field": "发生", "op": "gt", "value": "2025-12-31"}])
    if not q["ok"]:
        problems["query"] = q["error"]
    assert not problems, problems


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
async def test_sql_columns_the_table_actions_cannot_handle_are_refused_or_made_usable(
    yard: SkillYard, org: str
) -> None:
    """references/sql.md: `interval` and `timetz` columns are refused with the type to use (the table actions could
    not read or write them as 文本); a `timestamp` column is created as `timestamptz`, so ISO values go in."""
    ctx = context(org)
    for column in ("时长 interval", "钟点 timetz"):
        refused = await run(yard, ctx, "sql_execute", sql=f"CREATE TABLE 计时 (事件 text, {column})")
        assert refused["ok"] is False and refused["error_code"] == "type", refused
        assert "use" in refused["error"], refused
    listed = await run(yard, ctx, "list_tables")
    assert "计时" not in [t["title"] for t in listed["data"]]
    made = await run(yard, ctx, "sql_execute", sql="CREATE TABLE 计时 (事件 text, 开始 timestamp)")
    assert made["ok"] and {f["title"]: f["uidt"] for f in made["fields"]}["开始"] == "日期时间", made
    written = await run(yard, ctx, "insert", table_name="计时", data={"事件": "a", "开始": "2026-01-02T03:04:05+08:00"})
    assert written["ok"], written
    found = await run(
        yard, ctx, "query", table_name="计时", filters=[{"field": "开始", "op": "gte", "value": "2026-01-01"}]
    )
    assert found["ok"] and len(found["list"]) == 1, found


@pytest.mark.parametrize("value", ["inf", "1e308", "0", "0.05", "301", "nan", "soon"])
async def test_a_sql_timeout_outside_its_range_is_a_config_error_naming_it(yard: SkillYard, org: str, value: str):
    """Hardening issue 4: inf or 1e308 made every SQL call fail with OverflowError."""
    env = await run(yard, context(org, skill_configs={"sql_timeout": value}), "sql_query", sql="SELECT 1 AS x")
    assert env["ok"] is False and env["error_type"] == "config", env
    assert "sql_timeout must be a number of seconds from 0.1 to 300" in env["error"]


async def test_returning_rows_are_measured_on_the_server_like_select_rows(yard: SkillYard, org: str) -> None:
    """Hardening issue 4: RETURNING rows bypassed the byte cap (the platform grew to 1.23 GB)."""
    await big_table(yard, org, 5)  # 15 MB of RETURNING rows: well within the 5 s statement timeout under load
    sql = "UPDATE 大表 SET 编号 = 编号 WHERE 编号 IS NOT NULL RETURNING 编号, repeat('x', 3000000) AS pad"
    env = unload(await run(yard, context(org), "sql_execute", sql=sql))
    assert env["ok"] and env["truncated"] is True and env["affected"] == 5, {
        k: v for k, v in env.items() if k != "rows"
    }
    assert env["rows"] == []  # one row is already over the 2 MB cap: none is sent
