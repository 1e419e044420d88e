"""An attack corpus against the SQL channel black-box through the skill (``SkillYard.run("datatable", …)`` and
``skillyard run datatable``; spec §7.6, §7.2, §7.7), on real PostgreSQL.

Each probe states the secure behaviour: the statement is refused with a clear error, or it is confined (it cannot
read or change another organisation's data, the catalog, the server's settings or files; a role limited to its own
rows cannot see other people's rows in any way; sql_query cannot write; system columns are the platform's; every
deleted row is in the backup; timeouts and the result cap hold and the platform survives any statement). After every
statement the second organisation's rows, the own-scoped rows and the global catalog are compared with a snapshot.
The channel's own corpus (run_sql directly) is sql/test_attack_corpus.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from support.datatable import context, count, grant, make_table, run

Q, X = "sql_query", "sql_execute"


BOSS, ME = "boss", "me"  # boss: no grant limits it; me: role staff, limited to its own rows (工号 = E1) on 客户


@dataclass
class World:
    org: str
    other: str
    boss: dict[str, Any]
    me: dict[str, Any]

    def sql(self, text: str) -> str:
        return text.replace("<B>", f"org_data_{self.other}").replace("<A>", f"org_data_{self.org}")

    def ctx(self, who: str) -> dict[str, Any]:
        return self.me if who == ME else self.boss


async def snapshot(conn: Any, world: World) -> dict[str, Any]:
    """What no probe may change: B's rows, A's rows of 客户 and 订单, A's relations and grants, global objects."""
    a, b = f"org_data_{world.org}", f"org_data_{world.other}"

    async def rows(schema: str, table: str) -> list[str]:
        return [r[0] for r in await conn.fetch(f'SELECT to_jsonb(t)::text FROM "{schema}"."{table}" t ORDER BY 1')]

    relations = (
        "SELECT c.relname, c.relkind::text, c.relrowsecurity, c.relforcerowsecurity FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 ORDER BY 1"
    )
    shot: dict[str, Any] = {
        "b.机密": await rows(b, "机密"),
        "a.客户": await rows(a, "客户"),
        "a.订单": await rows(a, "订单"),
        "a._dt_grants": await rows(a, "_dt_grants"),
        "a.relations": [tuple(r) for r in await conn.fetch(relations, a)],
        "b.relations": [tuple(r) for r in await conn.fetch(relations, b)],
        "public.relations": [tuple(r) for r in await conn.fetch(relations, "public")],
        "a.policies": [
            tuple(r) for r in await conn.fetch("SELECT * FROM pg_catalog.pg_policies WHERE schemaname = $1", a)
        ],
    }
    for name, sql in {
        "roles": "SELECT count(*) FROM pg_catalog.pg_roles",
        "superusers": "SELECT count(*) FROM pg_catalog.pg_roles WHERE rolsuper OR rolbypassrls",
        "schemas": "SELECT count(*) FROM pg_catalog.pg_namespace",
        "functions": "SELECT count(*) FROM pg_catalog.pg_proc",
        "casts": "SELECT count(*) FROM pg_catalog.pg_cast",
        "operators": "SELECT count(*) FROM pg_catalog.pg_operator",
        "publications": "SELECT count(*) FROM pg_catalog.pg_publication",
        "servers": "SELECT count(*) FROM pg_catalog.pg_foreign_server",
        "prepared_xacts": "SELECT count(*) FROM pg_catalog.pg_prepared_xacts",
        "role_settings": "SELECT count(*) FROM pg_catalog.pg_db_role_setting",
        "default_acls": "SELECT count(*) FROM pg_catalog.pg_default_acl",
    }.items():
        shot[name] = await conn.fetchval(sql)
    return shot


@pytest.fixture
async def world(yard: SkillYard, org: str) -> World:
    """Organisation A (``org``): 客户 (9 rows, 工号 E0/E1/E2, limited to own rows for role staff), a view 客户视图
    over it made by an owner before the grant, and 订单 (2 rows). Organisation B: 机密 with one row."""
    other = "b" + org[1:]
    await make_table(yard, org, rows=9)
    order_fields = [{"title": "单号", "uidt": "文本"}, {"title": "数量", "uidt": "整数"}]
    await make_table(yard, org, title="订单", fields=order_fields)
    await make_table(yard, other, title="机密", fields=[{"title": "v", "uidt": "文本"}])
    boss = context(org, role_id="boss", chat_mode=False)
    for ctx, sql in [
        (context(other), "INSERT INTO 机密 (v) VALUES ('b-secret')"),
        (boss, "INSERT INTO 订单 (单号, 数量) VALUES ('a', 1), ('人1', 2)"),
        (boss, "CREATE VIEW 客户视图 AS SELECT 姓名, 工号 FROM 客户"),
    ]:
        made = await run(yard, ctx, X, sql=sql)
        assert made["ok"], made
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    me = context(org, actor_emp_no="E1", chat_mode=False)
    return World(org=org, other=other, boss=boss, me=me)


def leaked(env: dict[str, Any]) -> bool:
    """Whether a reply carries something of another organisation or another employee's rows."""
    text = json.dumps(env, ensure_ascii=False)
    return "b-secret" in text or '"E0"' in text or '"E2"' in text or "人0" in text or "人2" in text


REFUSED: list[tuple[str, str, str, str]] = [
    # -- server / session information functions (the allow-list is aggregate, string, numeric, date/time, conditional)
    ("info-backend-pid", BOSS, Q, "select pg_backend_pid()"),
    ("info-current-database", BOSS, Q, "select current_database()"),
    ("info-current-catalog", BOSS, Q, "select current_catalog"),
    ("info-current-role", BOSS, Q, "select current_role"),
    ("info-user", BOSS, Q, "select user"),
    ("info-current-schemas", BOSS, Q, "select current_schemas(true)"),
    ("info-server-addr", BOSS, Q, "select inet_server_addr()"),
    ("info-postmaster-start", BOSS, Q, "select pg_postmaster_start_time()"),
    ("info-current-xact-id", BOSS, Q, "select pg_current_xact_id()"),
    ("info-setseed", BOSS, Q, "select setseed(0.5)"),
    ("oracle-input-is-valid-regclass", BOSS, Q, "select pg_input_is_valid('<B>.机密', 'regclass')"),
    ("oracle-input-error-info", BOSS, Q, "select pg_input_error_info('<B>.机密', 'regclass')"),
    # -- reg* / oid types in disguise ----------------------------------------------------------------------------------
    ("regclass-array", BOSS, Q, "select '{pg_authid}'::regclass[]"),
    ("regclass-internal-array-name", BOSS, Q, "select '{pg_authid}'::_regclass"),
    ("oid-internal-array-name", BOSS, Q, "select '{1}'::_oid"),
    ("regproc-from-int", BOSS, Q, "select 1::regproc"),
    ("regclass-oid-to-name", BOSS, Q, "select 1259::regclass::text"),
    ("regrole", BOSS, Q, "select 'postgres'::regrole"),
    ("xid", BOSS, Q, "select '1'::xid"),
    # -- row types of catalog and other organisations' tables ----------------------------------------------------------
    ("rowtype-pg-authid", BOSS, Q, "select (null::pg_authid).*"),
    ("populate-record-b-rowtype", BOSS, Q, 'select * from json_populate_record(null::<B>.机密, \'{"v": "x"}\')'),
    ("row-cast-b-rowtype", BOSS, Q, "select row('x')::<B>.机密"),
    ("column-definition-b-rowtype", BOSS, Q, "select * from json_to_record('{\"a\": 1}') as x(a <B>.机密)"),
    # -- XML functions that run SQL or read files ------------------------------------------------------------------
    ("schema-to-xml", BOSS, Q, "select schema_to_xml('<A>', true, false, '')"),
    ("database-to-xml", BOSS, Q, "select database_to_xml(true, false, '')"),
    ("cursor-to-xml", BOSS, Q, "select cursor_to_xml('c', 1, true, false, '')"),
    ("xpath", BOSS, Q, "select xpath('/a/text()', '<a>x</a>')"),
    (
        "xmlparse-external-entity",
        BOSS,
        Q,
        "select xmlparse(document '<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><x>&e;</x>')",
    ),
    ("xmltable", BOSS, Q, "select * from xmltable('/a' passing '<a>x</a>' columns b text) x"),
    # -- locking in every position ------------------------------------------------------------------------------------
    ("for-no-key-update", BOSS, Q, "select * from 订单 for no key update"),
    ("for-update-in-subquery", BOSS, Q, "select * from (select * from 订单 for update) s"),
    ("for-share-in-cte", BOSS, Q, "with c as (select * from 订单 for share) select * from c"),
    (
        "key-share-skip-locked-in-in",
        BOSS,
        Q,
        "select * from 订单 where 单号 in (select 单号 from 订单 for key share skip locked)",
    ),
    ("for-update-in-insert-select", BOSS, X, "insert into 订单 (单号) select 单号 from 订单 for update"),
    # -- writable CTEs nested where the top level is a SELECT -----------------------------------------------------
    (
        "cte-delete-in-scalar-subquery",
        BOSS,
        Q,
        "select (with d as (delete from 订单 where 数量 > 0 returning 单号) select count(*) from d)",
    ),
    (
        "cte-update-in-exists",
        BOSS,
        Q,
        "select * from 订单 where exists "
        "(with u as (update 订单 set 数量 = 0 where 数量 > 0 returning 1) select 1 from u)",
    ),
    (
        "cte-delete-inside-insert-select",
        BOSS,
        X,
        "insert into 订单 (单号) with d as (delete from 订单 where 数量 > 0 returning 单号) select 单号 from d",
    ),
    # -- statements outside the allow-list ----------------------------------------------------------------------------
    ("call", BOSS, X, "call p()"),
    ("security-label", BOSS, X, "security label on table 订单 is 'x'"),
    ("disable-row-level-security", BOSS, X, "alter table 客户 disable row level security"),
    ("no-force-row-level-security", BOSS, X, "alter table 客户 no force row level security"),
    ("drop-policy", BOSS, X, "drop policy if exists p on 客户"),
    ("reindex", BOSS, X, "reindex table 订单"),
    ("analyze", BOSS, X, "analyze 订单"),
    ("cluster", BOSS, X, "cluster 订单"),
    ("discard-all", BOSS, X, "discard all"),
    ("alter-system", BOSS, X, "alter system set work_mem = '1GB'"),
    ("refresh-materialized-view", BOSS, X, "refresh materialized view 客户视图"),
    ("savepoint", BOSS, X, "savepoint s"),
    ("rollback-to-savepoint", BOSS, X, "rollback to savepoint s"),
    ("release-savepoint", BOSS, X, "release savepoint s"),
    ("prepare-transaction", BOSS, X, "prepare transaction 'x'"),
    ("set-constraints", BOSS, X, "set constraints all deferred"),
    ("set-transaction", BOSS, X, "set transaction isolation level serializable"),
    ("fetch", BOSS, X, "fetch all from c"),
    ("close-all", BOSS, X, "close all"),
    ("create-statistics", BOSS, X, "create statistics st on 单号, 数量 from 订单"),
    ("create-domain", BOSS, X, "create domain d as text"),
    ("create-text-search-config", BOSS, X, "create text search configuration c (copy = simple)"),
    ("create-publication", BOSS, X, "create publication pub for all tables"),
    ("create-server", BOSS, X, "create server s foreign data wrapper fdw"),
    ("import-foreign-schema", BOSS, X, "import foreign schema x from server s into y"),
    ("create-aggregate", BOSS, X, "create aggregate a (sfunc = int4pl, stype = int)"),
    ("create-operator", BOSS, X, "create operator === (function = texteq, leftarg = text, rightarg = text)"),
    ("create-cast", BOSS, X, "create cast (text as int) with inout"),
    ("reassign-owned", BOSS, X, "reassign owned by current_user to postgres"),
    ("alter-default-privileges", BOSS, X, "alter default privileges grant all on tables to public"),
    ("values-on-execute", BOSS, X, "values (1)"),
    ("values-reads-b", BOSS, Q, "values ((select v from <B>.机密 limit 1))"),
    # -- DDL options and expressions ---------------------------------------------------------------------------------
    ("view-security-invoker", BOSS, X, "create view 安全 with (security_invoker = true) as select 单号 from 订单"),
    ("index-storage-options", BOSS, X, "create index on 订单 (单号) with (fillfactor = 10)"),
    ("generated-column", BOSS, X, "create table 生成 (a text, b text generated always as (upper(a)) stored)"),
    ("check-calls-settings", BOSS, X, "create table 检查 (a text check (a <> current_setting('x')))"),
    ("default-nextval", BOSS, X, "create table 默认 (a bigint default nextval('订单_id_seq'))"),
    ("column-xml", BOSS, X, "create table 奇 (a xml)"),
    ("column-regclass", BOSS, X, "create table 奇 (a regclass)"),
    ("column-oid", BOSS, X, "create table 奇 (a oid)"),
    ("column-pg-lsn", BOSS, X, "create table 奇 (a pg_lsn)"),
    ("column-name", BOSS, X, "create table 奇 (a name)"),
    ("column-of-a-table-rowtype", BOSS, X, "create table 套娃 (c 订单)"),
    ("column-of-b-rowtype", BOSS, X, "create table 套娃 (c <B>.机密)"),
    ("ctas-system-column", BOSS, X, "create table 抄 as select 1 as id"),
    # -- the own-scoped table 客户 (and the view over it) for a role limited to its own rows --------------------------
    ("own-unicode-escape", ME, Q, 'select * from U&"\\5BA2\\6237"'),
    ("own-unicode-escape-uescape", ME, Q, "select * from U&\"!5BA2!6237\" uescape '!'"),
    ("own-tablesample-repeatable", ME, Q, "select * from 客户 tablesample bernoulli (100) repeatable (1)"),
    ("own-exists-oracle", ME, Q, "select 1 as n where exists (select 1 from 客户 where 工号 = 'E2')"),
    ("own-union-all", ME, Q, "select 单号 from 订单 union all select 姓名 from 客户"),
    ("own-except", ME, Q, "select 单号 from 订单 except select 姓名 from 客户"),
    ("own-scalar-count", ME, Q, "select (select count(*) from 客户) as n"),
    ("own-order-by-subquery", ME, Q, "select 单号 from 订单 order by (select count(*) from 客户)"),
    ("own-having", ME, Q, "select count(*) from 订单 having count(*) < (select count(*) from 客户)"),
    ("own-values", ME, Q, "select * from (values ((select count(*) from 客户))) v(n)"),
    ("own-lateral-filtered", ME, Q, "select * from 订单, lateral (select 工号 from 客户 where 工号 = 'E2') x"),
    ("own-star-inheritance", ME, Q, "select * from 客户 *"),
    ("own-materialized-cte", ME, Q, "with x as materialized (select * from 客户) select * from x"),
    ("own-rows-from-join", ME, Q, "select * from rows from (unnest(array[1])) r, 客户"),
    ("own-row-to-json", ME, Q, "select row_to_json(k) from 客户 k"),
    ("own-view-in-subquery", ME, Q, "select 1 from 订单 where 单号 in (select 工号 from 客户视图)"),
    ("own-rowtype", ME, Q, "select (null::客户).*"),
    ("own-populate-record", ME, Q, "select * from json_populate_record(null::客户, '{}')"),
    ("own-drop-view", ME, X, "drop view 客户视图"),
    ("own-replace-view", ME, X, "create or replace view 客户视图 as select 单号 as 姓名, 单号 as 工号 from 订单"),
    ("own-inherits", ME, X, "create table 子客户 () inherits (客户)"),
    ("own-partition-of", ME, X, "create table 分区 partition of 客户 for values in ('x')"),
    ("own-foreign-key", ME, X, "create table 引用 (k bigint references 客户 (id))"),
    ("own-ctas", ME, X, "create table 抄 as select * from 客户"),
    ("own-like", ME, X, "create table 形 (like 客户)"),
    ("own-column-rowtype", ME, X, "create table 套娃 (c 客户)"),
    (
        "own-on-conflict-subquery",
        ME,
        X,
        "insert into 订单 (单号) values ('x') on conflict (id) do update set 单号 = (select 姓名 from 客户 limit 1)",
    ),
    ("own-update-set-subquery", ME, X, "update 订单 set 单号 = (select max(姓名) from 客户) where 单号 = 'a'"),
    ("own-merge", ME, X, "merge into 客户 k using 订单 o on k.姓名 = o.单号 when matched then update set 金额 = 0"),
    # the sequence of the own-scoped table counts everybody's rows (the table "cannot be referenced at all")
    ("own-table-sequence", ME, Q, "select last_value from 客户_id_seq"),
    ("own-table-sequence-quoted", ME, Q, 'select * from "客户_id_seq"'),
]


CONFINED: list[tuple[str, str, list[dict[str, Any]]]] = [
    ("colon-word-in-block-comment", "select 1 as n /* :foo */", [{"n": 1}]),
    ("colon-word-in-line-comment", "select 1 as n -- :bar", [{"n": 1}]),
    ("array-slice-literal-bounds", "select (array[1,2,3])[1:2] as a", [{"a": [1, 2]}]),
    (
        "array-slice-column-bounds",
        "select 数量 as n, (array[10,20,30])[数量:数量] as a from 订单 order by 数量",
        [{"n": 1, "a": [10]}, {"n": 2, "a": [20]}],
    ),
    ("e-string-escaped-quote-then-colon", "select E'a\\'b:c' as s", [{"s": "a'b:c"}]),
    ("colon-in-quoted-identifier", 'select 1 as "a:b"', [{"a:b": 1}]),
    ("unicode-string-with-colon", "select U&'\\0041:x' as s", [{"s": "A:x"}]),
    (
        "dollar-quote-hides-semicolon-and-bind",
        "select $q$ ; delete from 订单 where true; :x $q$ as s",
        [{"s": " ; delete from 订单 where true; :x "}],
    ),
    ("tablesample-repeatable", "select count(*) as n from 订单 tablesample bernoulli (100) repeatable (7)", [{"n": 2}]),
    (
        "format-identifier-is-text",
        "select format('%I.%I', 'pg_catalog', 'pg_authid') as q",
        [{"q": "pg_catalog.pg_authid"}],
    ),
]


VIEW_WRITES = [
    ("update-id-through-view", "update 改名 set 编号 = 999 where 单号 = 'a'"),
    ("update-created-at-through-view", "update 改名 set 时间 = '2000-01-01' where 单号 = 'a'"),
    ("insert-id-through-view", "insert into 改名 (编号, 单号) values (3, 'planted')"),
    ("insert-created-at-through-view", "insert into 改名 (时间, 单号) values ('1999-01-01', 'backdated')"),
]


UNSTABLE_DELETES = [
    (
        "tablesample-without-repeatable",
        "delete from 订单 where id in (select id from 订单 tablesample bernoulli (50)) returning id",
    ),
    ("random-inside-a-view", "delete from 订单 where id in (select id from 随机) returning id"),
]


CHAT_DELETES = [
    ("where-id-positive", "delete from 订单 where id > 0"),
    ("where-tautology-or-true", "delete from 订单 where 单号 = 单号 or true"),
    ("with-select-cte", "with x as (select id from 订单) delete from 订单 where id in (select id from x)"),
    ("through-a-view", "delete from 全部 where 数量 > 0"),
    ("using-self-join", "delete from 订单 o using 订单 p where o.id = p.id and p.数量 > 0"),
    ("aliased-target", "delete from 订单 as o where o.数量 > 0"),
    ("only-target", "delete from only 订单 where 数量 > 0"),
]


ROUTES = [
    ("sql_query", "TABLE 客户"),
    ("sql_query", "TABLE OTHER.客户"),
    ("sql_query", "SELECT * FROM ONLY 客户"),
    ("sql_query", "SELECT o.* FROM 订单 o, LATERAL (SELECT 姓名 FROM 客户 k WHERE k.姓名 = o.单号) x"),
    ("sql_query", "SELECT o.* FROM 订单 o, LATERAL (SELECT 姓名 FROM OTHER.客户) x"),
    ("sql_query", "SELECT (WITH 客户 AS (SELECT 1 AS a) SELECT a FROM 客户) AS z"),
    ("sql_query", "SELECT * FROM (WITH pg_class AS (SELECT 1 AS a) SELECT * FROM pg_class) s"),
    ("sql_query", "SELECT 单号 FROM 订单 UNION SELECT 姓名 FROM OTHER.客户"),
    ("sql_query", "SELECT ctid, xmin, 单号 FROM 订单"),
    ("sql_query", "SELECT query_to_xml('select * from OTHER.\"客户\"', true, true, '')"),
    ("sql_query", "SELECT table_to_xml('OTHER.客户', true, true, '')"),
    ("sql_query", "SELECT 'OTHER.客户'::regclass"),
    ("sql_query", "SELECT nextval('订单_id_seq')"),
    ("sql_query", "SELECT setval('订单_id_seq', 1)"),
    ("sql_query", "SELECT current_user"),
    ("sql_query", "SELECT * FROM json_each('{\"a\": 1}')"),
    ("sql_query", "SELECT * FROM generate_series(1, 3)"),
    ("sql_query", "SELECT xmlparse(document '<x/>')"),
    ("sql_query", 'SELECT count(*) FROM U&"pg\\005Fclass"'),
    ("sql_query", "SELECT pg_read_binary_file('/etc/hostname')"),
    ("sql_query", "SELECT pg_ls_dir('.')"),
    ("sql_query", "SELECT lo_get(1)"),
    ("sql_query", "SELECT pg_notify('c', 'x')"),
    ("sql_query", "SELECT pg_terminate_backend(1)"),
    ("sql_query", "SELECT 1 FROM 订单 FOR KEY SHARE"),
    ("sql_execute", "LISTEN ch"),
    ("sql_execute", "NOTIFY ch, 'x'"),
    ("sql_execute", "PREPARE p AS SELECT 1"),
    ("sql_execute", "EXECUTE p"),
    ("sql_execute", "DEALLOCATE ALL"),
    ("sql_execute", "DECLARE c CURSOR FOR SELECT 1"),
    ("sql_execute", "VACUUM 订单"),
    ("sql_execute", "CHECKPOINT"),
    ("sql_execute", "LOAD 'plpgsql'"),
    ("sql_execute", "COPY 订单 TO '/tmp/dt_copy_probe'"),
    ("sql_execute", "COPY (SELECT 1) TO PROGRAM 'id'"),
    ("sql_execute", "EXPLAIN ANALYZE DELETE FROM 订单 WHERE 单号 = 'a'"),
    ("sql_execute", "MERGE INTO 订单 o USING 订单 p ON o.id = p.id WHEN MATCHED THEN DELETE"),
    ("sql_execute", "TRUNCATE 订单"),
    ("sql_execute", "SET SESSION AUTHORIZATION postgres"),
    ("sql_execute", "CREATE TEMP TABLE t1 (a text)"),
    ("sql_execute", "CREATE TABLE t2 (LIKE OTHER.客户)"),
    ("sql_execute", "CREATE TABLE pg_temp.t3 (a text)"),
    ("sql_execute", "CREATE INDEX ON OTHER.客户 (姓名)"),
    ("sql_execute", "CREATE VIEW v1 AS SELECT * FROM OTHER.客户"),
    ("sql_execute", "CREATE SEQUENCE s1"),
    ("sql_execute", "CREATE RULE r AS ON INSERT TO 订单 DO INSTEAD NOTHING"),
    ("sql_execute", "CREATE POLICY p ON 订单 USING (true)"),
    ("sql_execute", "COMMENT ON TABLE 订单 IS 'x'"),
    ("sql_execute", "INSERT INTO 订单 (单号) SELECT 姓名 FROM OTHER.客户"),
    ("sql_execute", "INSERT INTO 订单 (单号) VALUES ('x') RETURNING (SELECT count(*) FROM OTHER.客户)"),
    ("sql_execute", "UPDATE 订单 SET 单号 = k.姓名 FROM 客户 k WHERE 订单.单号 = k.姓名"),
    ("sql_execute", "UPDATE 订单 SET 单号 = b.姓名 FROM OTHER.客户 b WHERE 订单.单号 = b.姓名"),
    ("sql_execute", "DELETE FROM 订单 USING 客户 k WHERE 订单.单号 = k.姓名"),
    ("sql_execute", "INSERT INTO 订单 (id, 单号) VALUES (999, 'x')"),
    ("sql_execute", "UPDATE 订单 SET created_at = '2000-01-01' WHERE 单号 = 'a'"),
    ("sql_execute", "INSERT INTO 订单 (单号) OVERRIDING SYSTEM VALUE VALUES ('o')"),
    ("sql_execute", "INSERT INTO 订单 (单号) VALUES ('w') ON CONFLICT (id) DO UPDATE SET id = 7"),
]


@pytest.mark.parametrize(("who", "mode", "sql"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
async def test_refused_and_nothing_changes(
    yard: SkillYard, world: World, conn: Any, who: str, mode: str, sql: str
) -> None:
    before = await snapshot(conn, world)
    env = await run(yard, world.ctx(who), mode, sql=world.sql(sql))
    assert env["ok"] is False, f"ran: {env}"
    assert env["error_type"] in ("recoverable", "config"), env
    assert isinstance(env.get("error"), str) and len(env["error"]) > 20, env
    assert not leaked(env), env
    assert await snapshot(conn, world) == before


def test_the_refused_corpus_is_large_and_unique() -> None:
    assert len(REFUSED) >= 100
    assert len({c[0] for c in REFUSED}) == len(REFUSED)
    assert len({c[1:] for c in REFUSED}) == len(REFUSED)


@pytest.mark.parametrize(("sql", "rows"), [c[1:] for c in CONFINED], ids=[c[0] for c in CONFINED])
async def test_confined_statements_run_as_written(
    yard: SkillYard, world: World, conn: Any, sql: str, rows: list[dict[str, Any]]
) -> None:
    before = await snapshot(conn, world)
    env = await run(yard, world.boss, Q, sql=sql)
    assert env["ok"], env
    assert env["rows"] == rows, env
    assert await snapshot(conn, world) == before


async def test_nul_byte_cannot_hide_a_second_statement(yard: SkillYard, world: World, conn: Any) -> None:
    before = await snapshot(conn, world)
    env = await run(yard, world.boss, Q, sql="select 1 as n\x00; drop table 订单")
    assert env["ok"] is False or env["rows"] == [{"n": 1}], env
    assert await snapshot(conn, world) == before
    assert await count(conn, world.org, "订单") == 2


@pytest.mark.spec("§7.1")
@pytest.mark.parametrize("sql", [c[1] for c in VIEW_WRITES], ids=[c[0] for c in VIEW_WRITES])
async def test_system_columns_cannot_be_written_through_a_renaming_view(
    yard: SkillYard, world: World, conn: Any, sql: str
) -> None:
    made = await run(
        yard, world.boss, X, sql="create view 改名 as select id as 编号, created_at as 时间, 单号 from 订单"
    )
    assert made["ok"], made
    before = await conn.fetch(f'SELECT id, created_at, "单号" FROM org_data_{world.org}."订单" ORDER BY id')
    env = await run(yard, world.boss, X, sql=sql)
    after = await conn.fetch(f'SELECT id, created_at, "单号" FROM org_data_{world.org}."订单" ORDER BY id')
    assert env["ok"] is False and after == before, f"{env} — 订单 went from {before} to {after}"
    # a forged id collides with the bigserial later: the structured insert must keep working
    ins = await run(yard, world.boss, "insert", table_name="订单", data={"单号": "next"})
    assert ins["ok"], ins


@pytest.mark.spec("§7.7")
@pytest.mark.parametrize("sql", [c[1] for c in UNSTABLE_DELETES], ids=[c[0] for c in UNSTABLE_DELETES])
async def test_unstable_delete_is_refused_or_fully_backed_up(
    yard: SkillYard, world: World, conn: Any, sql: str
) -> None:
    schema = f"org_data_{world.org}"
    await conn.execute(
        f'INSERT INTO {schema}."订单" ("单号", "数量") SELECT \'n\' || i, i FROM generate_series(1, 60) i'
    )
    view = await run(yard, world.boss, X, sql="create view 随机 as select id from 订单 where random() < 0.5")
    assert view["ok"], view
    env = await run(yard, world.boss, X, sql=sql)
    if not env["ok"]:
        assert await count(conn, world.org, "订单") == 62, env
        return
    deleted = {r["id"] for r in env["rows"]}
    backed = {r["id"] for r in json.loads(Path(env["backup_file"]).read_text(encoding="utf-8"))}
    assert deleted <= backed, (
        f"{len(deleted - backed)} of {len(deleted)} deleted rows are not in the backup ({len(backed)} rows backed up)"
    )


@pytest.mark.spec("§7.7")
@pytest.mark.parametrize("sql", [c[1] for c in CHAT_DELETES], ids=[c[0] for c in CHAT_DELETES])
async def test_chat_mode_delete_of_many_rows_needs_confirmation(
    yard: SkillYard, world: World, conn: Any, sql: str
) -> None:
    schema = f"org_data_{world.org}"
    await conn.execute(
        f'INSERT INTO {schema}."订单" ("单号", "数量") SELECT \'n\' || i, i FROM generate_series(1, 20) i'
    )
    assert (await run(yard, world.boss, X, sql="create view 全部 as select * from 订单"))["ok"]
    env = await run(yard, {**world.boss, "chat_mode": True}, X, sql=sql)
    assert await count(conn, world.org, "订单") == 22, env
    assert env["ok"] is False or (env.get("needs_confirmation") and env.get("confirm_token")), env


@pytest.mark.spec("§7.7")
async def test_sql_delete_beyond_the_result_cap_backs_up_every_row(yard: SkillYard, world: World, conn: Any) -> None:
    schema = f"org_data_{world.org}"
    await conn.execute(
        f'INSERT INTO {schema}."订单" ("单号", "数量") SELECT \'n\' || i, i FROM generate_series(1, 1100) i'
    )
    env = await run(yard, world.boss, X, sql="delete from 订单 where 数量 >= 0")
    assert env["ok"] and env["affected"] == 1102, env
    assert len(json.loads(Path(env["backup_file"]).read_text(encoding="utf-8"))) == 1102


@pytest.mark.spec("§7.7")
async def test_a_large_sql_delete_runs_whole_and_backs_up_every_row(yard: SkillYard, world: World, conn: Any) -> None:
    """20,000 rows: the delete limited to the previewed ids must not outgrow the statement length limit (the ids
    travel as a parameter, not as text)."""
    schema = f"org_data_{world.org}"
    await conn.execute(
        f'INSERT INTO {schema}."订单" ("单号", "数量") SELECT \'n\' || i, i FROM generate_series(1, 20000) i'
    )
    env = await run(yard, world.boss, X, sql="delete from 订单 where 数量 >= 0")
    assert env["ok"] and env["affected"] == 20002, env
    assert len(json.loads(Path(env["backup_file"]).read_text(encoding="utf-8"))) == 20002
    assert await count(conn, world.org, "订单") == 0


async def test_payload_cannot_lift_the_timeout(yard: SkillYard, world: World) -> None:
    slow = "with recursive c(n) as (select 1 union all select n + 1 from c where n < 1000000000) select count(*) from c"
    ctx = {**world.boss, "skill_configs": {"sql_timeout": 1}}
    env = await run(yard, ctx, Q, sql=slow, timeout=60, sql_timeout=60, statement_timeout=60)
    assert env["ok"] is False and env["error_code"] == "timeout", env
    assert "longer than 1 s" in env["error"], env  # the configured timeout, not the payload's 60 s


async def test_payload_cannot_change_role_actor_or_schema(yard: SkillYard, world: World, conn: Any) -> None:
    before = await snapshot(conn, world)
    for sql, extra in [
        ("select 工号 from 客户", {"forbidden_tables": [], "row_scope": "all", "role_id": "boss", "roles": ["boss"]}),
        ("select 工号 from 客户", {"actor_emp_no": "E2", "emp_no": "E2", "allow_sql": True}),
        ("select v from 机密", {"org_id": world.other, "schema": f"org_data_{world.other}"}),
    ]:
        env = await run(yard, world.me, Q, sql=sql, **extra)
        assert env["ok"] is False and not leaked(env), (extra, env)
    assert await snapshot(conn, world) == before


async def test_long_identifier_is_not_truncated_onto_the_own_scoped_table(yard: SkillYard, org: str, conn: Any) -> None:
    long = "长" * 21  # 63 bytes in UTF-8
    await make_table(yard, org, title=long, rows=9)
    await grant(yard, org, long, "staff", "all", row_scope="own", owner_field="工号")
    me = context(org, actor_emp_no="E1", chat_mode=False)
    for mode, sql in [
        (Q, f'select 工号 from "{long}X"'),
        (Q, f"select 工号 from {long}长长"),
        (X, f"update {long}长 set 姓名 = '改' where 工号 = 'E2'"),
    ]:
        env = await run(yard, me, mode, sql=sql)
        assert env["ok"] is False and not leaked(env), (sql, env)
    assert await conn.fetchval(f'SELECT count(*) FROM org_data_{org}."{long}" WHERE "姓名" = \'改\'') == 0


async def test_result_caps_hold(yard: SkillYard, world: World, conn: Any) -> None:
    rows = await run(yard, world.boss, Q, sql="select x from unnest(string_to_array(repeat('x,', 3000000), ',')) x")
    assert rows["ok"] and rows["truncated"] is True and len(rows["rows"]) == 1000, {k: rows[k] for k in ("ok",)}
    big = await run(yard, world.boss, Q, sql="select repeat('x', 3000000) as s")
    assert big["ok"] and big["truncated"] is True and len(json.dumps(big, ensure_ascii=False)) < 2_100_000
    returning = await run(
        yard, world.boss, X, sql="update 订单 set 数量 = 数量 where 数量 >= 0 returning repeat('汉', 1000000) as big"
    )
    assert returning["ok"] and returning["affected"] == 2 and returning["truncated"] is True, returning["ok"]
    assert len(json.dumps(returning, ensure_ascii=False).encode()) < 2_100_000


async def test_a_huge_single_value_is_not_pulled_whole_into_the_platform(yard: SkillYard, world: World) -> None:
    """The 2 MB result cap must also bound what the platform takes in: one sql_query returning a 100 MB value may
    not make the platform process allocate hundreds of MB (a few at once would exhaust its memory)."""
    tracemalloc.start()
    try:
        env = await run(yard, world.boss, Q, sql="select repeat('x', 100000000) as s")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert env["ok"] is False or env["truncated"] is True, env.get("ok")
    assert peak < 64 * 2**20, f"the platform allocated {peak / 2**20:.0f} MB for one capped reply"


async def test_guard_work_is_bounded_before_the_parser(yard: SkillYard, world: World) -> None:
    """A statement under the 100,000-character limit that would hold the parser up: nested comments cost the
    lexer time quadratic in their depth (3 s a pass at this size), in the platform process, where statement_timeout
    does not reach. It must be refused before any parsing, with a fix the model can apply."""
    ctx = {**world.boss, "skill_configs": {"sql_timeout": 1}}
    sql = "select 1 as n " + "/*" * 12000 + "*/" * 12000  # 48,014 characters of nested comments
    env = await run(yard, ctx, Q, sql=sql)
    assert env["ok"] is False and env["error_code"] == "too_complex", env
    assert "/*" in env["error"]


@pytest.mark.usefixtures("db_env")
@pytest.mark.parametrize(
    "sql",
    [
        "select " + "(" * 5000 + "1" + ")" * 5000 + " as n",
        "select 1 as n" + " union all select 1" * 1000,
        "select " + "coalesce(" * 8000 + "1" + ")" * 8000 + " as s",
        "select " + "+".join(["1"] * 30000) + " as s",
        "select " + "||".join(["'a'"] * 19000) + " as s",
    ],
    ids=["parentheses-5000", "union-1000", "coalesce-8000", "plus-chain-30000", "concat-chain-19000"],
)
def test_deep_statements_get_an_answer_and_never_crash_the_platform(org: str, sql: str) -> None:
    """Run in a real `skillyard run datatable` process: a statement below the length limit must come back as a JSON
    envelope (refused as too complex, or run), never kill the process (SIGSEGV in the parser)."""
    ctx = json.dumps({"org_id": org, "team_role": "owner"})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "skillyard",
            "run",
            "datatable",
            "--context",
            ctx,
            "--input",
            json.dumps({"action": Q, "sql": sql}),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=180,
    )
    assert done.returncode in (0, 1), (
        f"exit {done.returncode} for a {len(sql)}-character statement: {done.stderr[-500:]}"
    )
    envelope = json.loads(done.stdout)
    assert envelope["ok"] is True or envelope["error_type"] in ("recoverable", "config"), envelope


@pytest.mark.spec("§7.6")
@pytest.mark.spec("§7.2")
@pytest.mark.parametrize(("mode", "sql"), ROUTES, ids=[f"{m[4:]}:{s[:40]}" for m, s in ROUTES])
async def test_less_obvious_sql_routes_are_refused_and_change_nothing(
    yard: SkillYard, org: str, conn: Any, mode: str, sql: str
) -> None:
    other = "q" + uuid.uuid4().hex[:12]
    await make_table(yard, org, rows=6)
    await make_table(yard, other, rows=3)
    await make_table(yard, org, title="订单", fields=[{"title": "单号", "uidt": "文本"}])
    assert (await run(yard, context(org), "sql_execute", sql="INSERT INTO 订单 (单号) VALUES ('a'), ('人1')"))["ok"]
    await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    me = context(org, actor_emp_no="E1", chat_mode=False)
    before = await conn.fetch(f'SELECT id, "姓名", "金额" FROM org_data_{other}."客户" ORDER BY id')
    env = await run(yard, me, mode, sql=sql.replace("OTHER", f"org_data_{other}"))
    assert env["ok"] is False and env["error_type"] in ("recoverable", "config"), env
    assert await conn.fetch(f'SELECT id, "姓名", "金额" FROM org_data_{other}."客户" ORDER BY id') == before
    assert await count(conn, org) == 6
    assert await conn.fetchval(f'SELECT string_agg("单号", \',\' ORDER BY id) FROM org_data_{org}."订单"') == "a,人1"
    assert not Path("/tmp/dt_copy_probe").exists()
