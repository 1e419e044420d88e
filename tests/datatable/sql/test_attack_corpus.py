"""An attack corpus against the SQL channel (sql/guard.py + sql/channel.py), on real PostgreSQL.

Every statement is written to escape organisation A's schema and runs through ``run_sql`` exactly as the skill
calls it: as organisation A, with ``forbidden_tables`` from ``permissions.access.sql_forbidden_tables``. Organisation B
(another schema) holds tables with known rows; A has an ordinary table, a scratch table, an own-scoped table
(row scope ``own`` with an owner field, so row-level security is on) with a view made over it before the grant, and
the skill's metadata tables.

Each case is either *refused* (SqlChannelError with the expected code, from the guard or from PostgreSQL) or
*confined* (it runs, and what it returned or changed is asserted: only inside A). After each case the connection
must be back to its own settings. The last test compares a database-level snapshot taken before the corpus (B's
tables and rows, A's own-scoped rows and metadata, and the counts of roles, functions, schemas and other global
objects) with the state afterwards; it runs whatever part of the corpus a selective run skipped, so it never passes
vacuously."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.actions import protection
from skillyard.builtin_skills.datatable.permissions import access as perm_access
from skillyard.builtin_skills.datatable.permissions import grants as perm_grants
from skillyard.builtin_skills.datatable.sql import channel
from skillyard.builtin_skills.datatable.sql import role as sql_role
from skillyard.builtin_skills.datatable.sql.errors import SqlChannelError
from skillyard.builtin_skills.datatable.structure import tables as structure_tables

from support.datatable import asyncpg_dsn

Q, X = "query", "execute"


TIMEOUT = 1.0  # seconds: the long-running cases must be stopped by the statement timeout


A_ROWS = [("螺丝", 100), ("螺母", 5), ("垫片", 42)]


OWN_ROWS = [("张三", "E1", 9000), ("李四", "E2", 12000), ("王五", "E3", 15000)]


B_ROWS = ["b-only", "b-secret"]


@dataclass(frozen=True)
class Case:
    id: str
    mode: str
    sql: str  # <A> and <B> stand for the two schemas, <BU> for B in upper case, <B1> for B without its first letter
    code: str | None = None  # refused: the expected SqlChannelError code; None: confined
    rows: list[dict[str, Any]] | None = None  # confined: the rows it must return
    affected: int | None = None  # confined writes: the rows it must change


def refused(id: str, mode: str, sql: str, code: str) -> Case:
    return Case(id, mode, sql, code=code)


def confined(id: str, mode: str, sql: str, rows: list[dict[str, Any]], affected: int | None = None) -> Case:
    return Case(id, mode, sql, rows=rows, affected=affected)


TS_STAT = "select ('select to_tsvector(string_agg(relname, '' '')) from pg_class').ts_stat"


CASES: list[Case] = [
    # -- other schemas: organisation B, public, the catalogs, quoting and escapes of schema names --------------------
    refused("b-qualified", Q, "select * from <B>.机密", "schema"),
    refused("b-quoted", Q, 'select * from "<B>"."机密"', "schema"),
    refused("b-mixed-case", Q, 'select * from "<BU>".机密', "schema"),
    refused("b-unicode-escape", Q, 'select * from U&"\\006F<B1>".机密', "schema"),
    refused("b-catalog-qualified", Q, "select * from postgres.<B>.机密", "schema"),
    refused("b-join", Q, "select 名称 from 库存 join <B>.机密 s on true", "schema"),
    refused("b-subquery", Q, "select 名称 from 库存 where 名称 in (select v from <B>.机密)", "schema"),
    refused("b-lateral", Q, "select * from 库存, lateral (select v from <B>.机密) s", "schema"),
    refused("b-column-ref", Q, "select <B>.机密.v from 库存", "schema"),
    refused("b-table-statement", Q, "table <B>.机密", "schema"),
    refused("b-tablesample", Q, "select * from <B>.机密 tablesample system (100)", "schema"),
    refused("b-insert", X, "insert into <B>.机密 (v) values ('planted')", "schema"),
    refused("b-update", X, "update <B>.机密 set v = 'x' where v is not null", "schema"),
    refused("b-delete", X, "delete from <B>.机密 where v is not null", "schema"),
    refused("b-insert-select", X, "insert into 草稿 (内容) select v from <B>.机密", "schema"),
    refused("b-create-table", X, "create table <B>.planted (a text)", "schema"),
    refused("b-create-view", X, "create view <B>.planted as select 1 as a", "schema"),
    refused("b-create-index", X, "create index on <B>.机密 (v)", "schema"),
    refused("public-read", Q, "select * from public.t", "schema"),
    refused("public-create", X, "create table public.planted (a text)", "schema"),
    refused("pg-catalog-qualified", Q, "select relname from pg_catalog.pg_class", "schema"),
    refused("pg-catalog-quoted-upper", Q, 'select * from "PG_CATALOG".pg_class', "schema"),
    refused("information-schema", Q, "select table_name from information_schema.tables", "schema"),
    refused("operator-in-other-schema", Q, "select 1 operator(<B>.+) 1", "schema"),
    refused("dotted-identifier", Q, 'select * from "<B>.机密"', "undefined_table"),
    refused("identifier-embedded-quote", Q, 'select * from "库存""; drop table 库存; --"', "undefined_table"),
    # -- catalog reads by bare name ------------------------------------------------------------------------------------
    refused("pg-tables", Q, "select tablename from pg_tables", "schema"),
    refused("pg-class", Q, "select relname from pg_class", "schema"),
    refused("pg-roles", Q, "select rolname from pg_roles", "schema"),
    refused("pg-stat-activity", Q, "select query from pg_stat_activity", "schema"),
    refused("pg-settings", Q, "select name, setting from pg_settings", "schema"),
    refused("pg-shadow", Q, "select passwd from pg_shadow", "schema"),
    refused("pg-authid-in-subquery", Q, "select (select count(*) from pg_authid)", "schema"),
    refused("pg-namespace-quoted", Q, 'select * from "pg_namespace"', "schema"),
    refused("pg-roles-unicode-escape", Q, 'select * from U&"pg\\005Froles"', "schema"),
    refused("pg-class-in-view", X, "create view 偷看 as select relname from pg_class", "schema"),
    # -- functions -----------------------------------------------------------------------------------------------------
    refused("pg-read-file", Q, "select pg_read_file('/etc/passwd')", "function"),
    refused("pg-ls-dir", Q, "select pg_ls_dir('.')", "function"),
    refused("lo-import", Q, "select lo_import('/etc/passwd')", "function"),
    refused("lo-export", Q, "select lo_export(1, '/tmp/x')", "function"),
    refused("dblink", Q, "select * from dblink('dbname=postgres', 'select 1') as x(a int)", "function"),
    refused("current-setting", Q, "select current_setting('is_superuser')", "function"),
    refused("set-config-role", Q, "select set_config('role', 'postgres', true)", "function"),
    refused("set-config-session-auth", Q, "select set_config('session_authorization', 'postgres', true)", "function"),
    refused("pg-sleep", Q, "select pg_sleep(10)", "function"),
    refused("pg-sleep-qualified", Q, "select pg_catalog.pg_sleep(10)", "function"),
    refused("pg-sleep-quoted-upper", Q, 'select "PG_SLEEP"(10)', "function"),
    refused("pg-sleep-in-where", Q, "select 名称 from 库存 where pg_sleep(10) is null", "function"),
    refused("pg-advisory-lock", Q, "select pg_advisory_lock(42)", "function"),
    refused("pg-terminate-backend", Q, "select pg_terminate_backend(1)", "function"),
    refused("pg-reload-conf", Q, "select pg_reload_conf()", "function"),
    refused("txid-current", Q, "select txid_current()", "function"),
    refused("version", Q, "select version()", "function"),
    refused("current-user", Q, "select current_user", "function"),
    refused("query-to-xml", Q, "select query_to_xml('select * from <B>.机密', true, true, '')", "function"),
    refused("to-regclass", Q, "select to_regclass('<B>.机密')", "function"),
    refused("has-table-privilege", Q, "select has_table_privilege('<B>.机密', 'select')", "function"),
    refused("nextval-b-sequence", Q, "select nextval('<B>.机密_id_seq')", "function"),
    refused("pg-notify", Q, "select pg_notify('c', 'x')", "function"),
    refused("generate-series", Q, "select count(*) from generate_series(1, 1000000000)", "function"),
    refused("row-to-json-field-notation", Q, "select 库存.row_to_json from 库存", "function"),
    confined("format-ident-is-just-text", Q, "select format('%I.%I', '<B>', '机密') as q", [{"q": '<B>."机密"'}]),
    # -- field notation: (value).f and alias.f call the one-argument function f (refused by sql/walker.py) -------------
    refused("field-notation-ts-stat-catalog", Q, TS_STAT, "function"),
    refused(
        "field-notation-ts-stat-session-authorization",
        Q,
        "select ('select to_tsvector(set_config(''session_authorization'', session_user, true))').ts_stat",
        "function",
    ),
    refused(
        "field-notation-superuser-reads-b",
        Q,
        "select (w).word from (select ('select to_tsvector(set_config(''session_authorization'', session_user, true))')"
        ".ts_stat as w union all select ('select to_tsvector(string_agg(v, '' '')) from <B>.机密').ts_stat) s",
        "function",
    ),
    refused("field-notation-current-setting", Q, "select ('is_superuser'::text).current_setting", "function"),
    refused("field-notation-to-regclass", Q, "select ('<B>.机密').to_regclass", "function"),
    refused("field-notation-to-regnamespace", Q, "select ('<B>').to_regnamespace", "function"),
    refused("field-notation-lo-creat", Q, "select (1).lo_creat", "function"),
    refused("field-notation-nextval", Q, "select ('<B>.机密_id_seq').nextval", "function"),
    refused("field-notation-on-column", Q, "select (名称).to_regclass from 库存", "function"),
    refused(
        "field-notation-function-range",
        Q,
        "select u.current_setting from unnest(array['server_version']) u",
        "function",
    ),
    refused(
        "field-notation-function-range-no-alias", Q, "select unnest.to_regclass from unnest(array['x'])", "function"
    ),
    refused(
        "field-notation-format-range", Q, "select f.current_setting from format('%s', 'is_superuser') f", "function"
    ),
    confined(
        "function-range-declared-column", Q, "select u.v from unnest(array['a', 'b']) as u(v)", [{"v": "a"}, {"v": "b"}]
    ),
    # -- several statements --------------------------------------------------------------------------------------------
    refused("stacked-drop", Q, "select 1; drop table 库存", "multiple_statements"),
    refused("stacked-commit-drop", Q, "select 1;COMMIT;DROP TABLE 库存", "multiple_statements"),
    refused("stacked-after-line-comment", Q, "select 1 -- x\n; delete from 库存 where true", "multiple_statements"),
    refused("stacked-after-dollar-quote", Q, "select $a$ $$ $a$; drop table 库存", "multiple_statements"),
    refused(
        "stacked-writes",
        X,
        "delete from 草稿 where 内容 = 'x'; delete from <B>.机密 where v <> ''",
        "multiple_statements",
    ),
    # -- comments ------------------------------------------------------------------------------------------------------
    confined("line-comment-hides-drop", Q, "select 1 as n -- ; drop table 库存", [{"n": 1}]),
    confined("nested-comment-hides-drop", Q, "select 1 as n /* outer /* inner */ ; drop table 库存; */", [{"n": 1}]),
    refused("comment-splits-keyword", Q, "sel/**/ect 1", "parse_error"),
    refused("comment-before-drop", X, "/* harmless */ drop table 库存", "statement"),
    refused("only-a-comment", Q, "-- select 1", "parse_error"),
    # -- quoting tricks ------------------------------------------------------------------------------------------------
    confined("dollar-quote-is-text", Q, "select $$; drop table 库存; $$ as s", [{"s": "; drop table 库存; "}]),
    confined(
        "tagged-dollar-quote-is-text",
        Q,
        "select $x$ $$; delete from 库存; $$ $x$ as s",
        [{"s": " $$; delete from 库存; $$ "}],
    ),
    confined(
        "e-string-escape-is-text", Q, "select e'\\x27; drop table 库存; --' as s", [{"s": "'; drop table 库存; --"}]
    ),
    confined("unicode-string-escape-is-text", Q, "select U&'\\0041\\0042' as s", [{"s": "AB"}]),
    # -- CTEs that write -----------------------------------------------------------------------------------------------
    refused("cte-delete-b", Q, "with d as (delete from <B>.机密 returning *) select * from d", "cte_write"),
    refused(
        "cte-delete-a", Q, "with d as (delete from 库存 where 名称 = '螺丝' returning *) select * from d", "cte_write"
    ),
    refused(
        "cte-update-into-insert",
        X,
        "with u as (update 库存 set 数量 = 0 where 数量 > 0 returning 名称) insert into 草稿 (内容) select 名称 from u",
        "cte_write",
    ),
    refused("cte-named-like-catalog", Q, "with pg_roles as (select 1) select * from pg_roles", "schema"),
    # -- SELECT INTO, locking ------------------------------------------------------------------------------------------
    refused("select-into", Q, "select * into 偷来的 from 库存", "select_into"),
    refused("select-into-temp", Q, "select * into temp 偷来的 from 库存", "select_into"),
    refused("for-update", Q, "select * from 库存 for update", "locking"),
    refused("for-share-nowait", Q, "select * from 库存 for share nowait", "locking"),
    refused("lock-table", X, "lock table 库存 in access exclusive mode", "statement"),
    refused("lock-table-b", X, "lock table <B>.机密", "statement"),
    # -- long-running statements: stopped by the statement timeout ----------------------------------------------------
    refused(
        "recursive-cte-runs-forever",
        Q,
        "with recursive c(n) as (select 1 union all select n + 1 from c where n < 1000000000) select count(*) from c",
        "timeout",
    ),
    refused(
        "cross-join-explodes",
        Q,
        "select count(*) from unnest(string_to_array(repeat('x,', 3000), ',')) a, "
        "unnest(string_to_array(repeat('x,', 3000), ',')) b, unnest(string_to_array(repeat('x,', 3000), ',')) c",
        "timeout",
    ),
    refused(
        "slow-write",
        X,
        "insert into 草稿 (内容) with recursive c(n) as (select 1 union all select n + 1 from c where n < 1000000000) "
        "select 'x' from c where n < 0",
        "timeout",
    ),
    # -- statements that are not on the list ---------------------------------------------------------------------------
    refused("copy-to-program", X, "copy 库存 to program 'id'", "statement"),
    refused("copy-b-to-stdout", X, "copy <B>.机密 to stdout", "statement"),
    refused("copy-from-file", X, "copy 草稿 from '/etc/passwd'", "statement"),
    refused("do-block", X, "do $$ begin delete from <B>.机密; end $$", "statement"),
    refused("set-role", X, "set role postgres", "statement"),
    refused("set-session-authorization", X, "set session authorization postgres", "statement"),
    refused("reset-role", X, "reset role", "statement"),
    refused("set-search-path", X, "set search_path = <B>, public", "statement"),
    refused("set-statement-timeout", X, "set statement_timeout = 0", "statement"),
    refused("show", Q, "show search_path", "statement"),
    refused("create-function", X, "create function 偷() returns int language sql as 'select 1'", "statement"),
    refused("create-role", X, "create role evil superuser login", "statement"),
    refused("create-extension", X, "create extension dblink", "statement"),
    refused("create-schema", X, "create schema evil", "statement"),
    refused("grant", X, "grant select on 工资 to public", "statement"),
    refused("revoke", X, "revoke all on 库存 from public", "statement"),
    refused("alter-table-owner", X, "alter table 库存 owner to postgres", "statement"),
    refused("alter-role", X, "alter role postgres password 'x'", "statement"),
    refused("drop-table", X, "drop table 库存", "statement"),
    refused("drop-schema-b", X, "drop schema <B> cascade", "statement"),
    refused("truncate-b", X, "truncate <B>.机密", "statement"),
    refused("vacuum", X, "vacuum full 库存", "statement"),
    refused("listen", X, "listen evil", "statement"),
    refused("notify", X, "notify evil, 'x'", "statement"),
    refused("prepare", X, "prepare p as select * from <B>.机密", "statement"),
    refused("execute", X, "execute p", "statement"),
    refused("declare-cursor", X, "declare c cursor with hold for select * from 库存", "statement"),
    refused("explain-analyze", Q, "explain analyze select * from 库存", "statement"),
    refused("begin", X, "begin", "transaction"),
    refused("commit", X, "commit", "transaction"),
    refused("create-table-like-b", X, "create table 复制 (like <B>.机密)", "node"),
    refused("bind-parameter", Q, "select * from 库存 where 名称 = $1", "parameter"),
    refused("system-column", Q, "select ctid, 名称 from 库存", "system_column"),
    # -- TABLESAMPLE ---------------------------------------------------------------------------------------------------
    confined("tablesample-own-table", Q, "select count(*)::int as n from 库存 tablesample bernoulli (100)", [{"n": 3}]),
    refused("tablesample-custom-method", Q, "select * from 库存 tablesample system_rows (10)", "function"),
    # -- jsonb, reg* and oid casts to reach other objects -------------------------------------------------------------
    refused("jsonb-cast", Q, "select '{}'::jsonb", "jsonb"),
    refused("jsonb-function", Q, "select jsonb_build_object('a', 1)", "jsonb"),
    refused("regclass-cast-b", Q, "select '<B>.机密'::regclass", "type"),
    refused("regclass-oid-cast-b", Q, "select '<B>.机密'::regclass::oid", "type"),
    refused("regclass-via-text", Q, "select 'pg_authid'::text::regclass", "type"),
    refused("regnamespace-cast", Q, "select cast('<B>' as regnamespace)", "type"),
    refused("oid-cast", Q, "select 1::oid", "type"),
    # -- the own-scoped table (row scope own: forbidden on the channel, row-level security behind it) -----------------
    refused("own-table", Q, "select * from 工资", "forbidden_table"),
    refused("own-table-qualified", Q, "select * from <A>.工资", "forbidden_table"),
    refused("own-table-subquery", Q, "select 名称 from 库存 where 名称 in (select 姓名 from 工资)", "forbidden_table"),
    refused("own-table-cte-name", Q, "with 工资 as (select 1) select * from 工资", "forbidden_table"),
    refused("own-table-update", X, "update 工资 set 薪资 = 0 where 姓名 is not null", "forbidden_table"),
    refused("own-table-insert-select", X, "insert into 草稿 (内容) select 姓名 from 工资", "forbidden_table"),
    refused("own-table-view", X, "create view 工资2 as select * from 工资", "forbidden_table"),
    refused("own-table-index", X, "create index on 工资 (薪资)", "forbidden_table"),
    # a view made over the table before the own grant is refused as the table is (pg_depend finds it)
    refused("own-table-old-view", Q, "select 姓名 from 工资视图", "forbidden_table"),
    refused("own-table-old-view-update", X, "update 工资视图 set 薪资 = 0 where 姓名 is not null", "forbidden_table"),
    # -- the skill's metadata tables (_dt_*) ---------------------------------------------------------------------------
    refused("dt-tables", Q, "select * from _dt_tables", "forbidden_table"),
    refused("dt-fields", Q, "select * from _dt_fields", "forbidden_table"),
    refused("dt-grants", Q, "select * from _dt_grants", "forbidden_table"),
    refused("dt-confirm-tokens", Q, "select * from _dt_confirm_tokens", "forbidden_table"),
    refused("dt-grants-qualified-quoted", Q, 'select * from <A>."_dt_grants"', "forbidden_table"),
    refused("dt-grants-upper", Q, 'select * from "_DT_GRANTS"', "forbidden_table"),
    refused("dt-grants-delete", X, "delete from _dt_grants where role = 'staff'", "forbidden_table"),
    refused(
        "dt-token-forge",
        X,
        "insert into _dt_confirm_tokens (token, action, fingerprint, expires_at) values ('t', 'a', 'f', now())",
        "forbidden_table",
    ),
    refused("dt-create-table", X, "create table _dt_planted (a text)", "forbidden_table"),
    refused("dt-index-name-squat", X, "create index _dt_confirm_tokens_squat on 库存 (名称)", "forbidden_table"),
    refused("dt-cte-name", Q, "with _dt_grants as (select 1) select * from _dt_grants", "forbidden_table"),
    # -- UPDATE / DELETE without a real WHERE --------------------------------------------------------------------------
    refused("update-without-where", X, "update 库存 set 数量 = 0", "where_required"),
    refused("delete-without-where", X, "delete from 库存", "where_required"),
    refused("delete-where-true", X, "delete from 库存 where true", "where_required"),
    refused("update-where-one-equals-one", X, "update 库存 set 数量 = 0 where 1 = 1", "where_required"),
    refused("delete-where-constant-subquery", X, "delete from 库存 where exists (select 1)", "where_required"),
    # -- confined writes: they run, inside A only ----------------------------------------------------------------------
    confined("update-every-own-row", X, "update 库存 set 数量 = 数量 where 名称 = 名称", [], 3),
    confined("delete-nothing", X, "delete from 草稿 where 内容 = 'never'", [], 0),
    confined(
        "insert-b-name-as-text",
        X,
        "insert into 草稿 (内容) values ('<B>.机密') returning 内容",
        [{"内容": "<B>.机密"}],
        1,
    ),
    confined(
        "read-own-table",
        Q,
        "select 名称, 数量::int as n from 库存 order by n",
        [{"名称": "螺母", "n": 5}, {"名称": "垫片", "n": 42}, {"名称": "螺丝", "n": 100}],
    ),
]


@dataclass
class World:
    a: str
    b: str
    forbidden: frozenset[str]
    role: str
    before: dict[str, Any]
    ran: set[str] = field(default_factory=set)

    def sql(self, text: str) -> str:
        return (
            text.replace("<A>", self.a)
            .replace("<BU>", self.b.upper())
            .replace("<B1>", self.b[1:])
            .replace("<B>", self.b)
        )


_COUNTS = {
    "roles": "SELECT count(*) FROM pg_catalog.pg_roles",
    "memberships": "SELECT count(*) FROM pg_catalog.pg_auth_members",
    "functions": "SELECT count(*) FROM pg_catalog.pg_proc",
    "schemas": "SELECT count(*) FROM pg_catalog.pg_namespace",
    "extensions": "SELECT count(*) FROM pg_catalog.pg_extension",
    "large_objects": "SELECT count(*) FROM pg_catalog.pg_largeobject_metadata",
    "triggers": "SELECT count(*) FROM pg_catalog.pg_trigger",
    "event_triggers": "SELECT count(*) FROM pg_catalog.pg_event_trigger",
    "policies": "SELECT count(*) FROM pg_catalog.pg_policy",
    "role_settings": "SELECT count(*) FROM pg_catalog.pg_db_role_setting",
    "default_acls": "SELECT count(*) FROM pg_catalog.pg_default_acl",
    "prepared_xacts": "SELECT count(*) FROM pg_catalog.pg_prepared_xacts",
    "superusers": "SELECT count(*) FROM pg_catalog.pg_roles WHERE rolsuper OR rolbypassrls",
}


async def _rows_as_json(conn: asyncpg.Connection, schema: str, table: str) -> list[str]:
    return [r[0] for r in await conn.fetch(f'SELECT to_jsonb(t)::text FROM "{schema}"."{table}" t ORDER BY 1')]


async def snapshot(conn: asyncpg.Connection, a: str, b: str, role: str) -> dict[str, Any]:
    """What the corpus must not change, read at database level by the platform (superuser) connection."""
    relations = """SELECT c.relname, c.relkind::text, pg_catalog.pg_get_userbyid(c.relowner), c.relacl::text,
                          c.relrowsecurity, c.relforcerowsecurity
                     FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = $1 ORDER BY 1"""
    shot: dict[str, Any] = {"b_relations": [tuple(r) for r in await conn.fetch(relations, b)]}
    shot["public_relations"] = [tuple(r) for r in await conn.fetch(relations, "public")]
    shot["b_schema"] = tuple(
        await conn.fetchrow(
            "SELECT pg_catalog.pg_get_userbyid(nspowner), nspacl::text FROM pg_catalog.pg_namespace WHERE nspname = $1",
            b,
        )
    )
    for name, kind, *_ in shot["b_relations"]:
        if kind == "r":
            shot[f"b.{name}"] = await _rows_as_json(conn, b, name)
        elif kind == "S":
            shot[f"b.{name}"] = tuple(await conn.fetchrow(f'SELECT last_value, is_called FROM "{b}"."{name}"'))
    for table in ("工资", "_dt_tables", "_dt_fields", "_dt_grants", "_dt_confirm_tokens"):
        shot[f"a.{table}"] = await _rows_as_json(conn, a, table)
    shot["a.工资.relation"] = [r for r in await conn.fetch(relations, a) if r[0] in ("工资", "工资视图")]
    shot["a.工资.policies"] = [
        tuple(r)
        for r in await conn.fetch(
            "SELECT policyname, cmd, qual, with_check FROM pg_catalog.pg_policies WHERE schemaname = $1 ORDER BY 1", a
        )
    ]
    shot["org_role"] = tuple(
        await conn.fetchrow(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, rolcanlogin, rolbypassrls, rolreplication, rolinherit "
            "FROM pg_catalog.pg_roles WHERE rolname = $1",
            role,
        )
    )
    shot["org_role_member_of"] = [
        r[0]
        for r in await conn.fetch(
            "SELECT pg_catalog.pg_get_userbyid(m.roleid) FROM pg_catalog.pg_auth_members m "
            "JOIN pg_catalog.pg_roles r ON r.oid = m.member WHERE r.rolname = $1 ORDER BY 1",
            role,
        )
    ]
    for name, sql in _COUNTS.items():
        shot[name] = await conn.fetchval(sql)
    return shot


@pytest.fixture(scope="module")
async def world(database_url: str) -> AsyncIterator[World]:
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    tag = uuid.uuid4().hex[:12]
    a, b = f"org_data_atka{tag}", f"org_data_atkb{tag}"
    role = sql_role.role_name(a)
    try:
        # Organisation A: an ordinary table, a scratch table, an own-scoped table, the metadata tables.
        await structure_tables.create_table(
            conn, a, "库存", [{"title": "名称", "uidt": "文本"}, {"title": "数量", "uidt": "数字"}]
        )
        await conn.executemany(f'INSERT INTO "{a}"."库存" ("名称", "数量") VALUES ($1, $2)', A_ROWS)
        await structure_tables.create_table(conn, a, "草稿", [{"title": "内容", "uidt": "文本"}])
        own = [
            {"title": "姓名", "uidt": "文本"},
            {"title": "负责人", "uidt": "文本"},
            {"title": "薪资", "uidt": "数字"},
        ]
        await structure_tables.create_table(conn, a, "工资", own)
        await conn.executemany(f'INSERT INTO "{a}"."工资" ("姓名", "负责人", "薪资") VALUES ($1, $2, $3)', OWN_ROWS)
        # A view over the own-scoped table, made on the channel before the table was limited: row-level security
        # (FORCEd, and the org role is no superuser) must still hide every row from it.
        await channel.run_sql(conn, "create view 工资视图 as select 姓名, 薪资 from 工资", schema=a, mode=X)
        await perm_grants.grant(
            conn, a, table_id_or_name="工资", role="staff", ops=["read"], row_scope="own", owner_field="负责人"
        )
        await protection.ensure_tokens_table(conn, a)
        await conn.execute(
            f"""INSERT INTO "{a}"."_dt_confirm_tokens" (token, action, fingerprint, affected, expires_at)
                VALUES ('tok', 'delete_by', 'fp', 12, now() + interval '1 hour')"""
        )
        # Organisation B: a store table with rows, and a plain one.
        await structure_tables.create_table(conn, b, "机密", [{"title": "v", "uidt": "文本"}])
        await conn.executemany(f'INSERT INTO "{b}"."机密" (v) VALUES ($1)', [(v,) for v in B_ROWS])
        await conn.execute(f'CREATE TABLE "{b}".secret (id bigserial PRIMARY KEY, v text)')
        await conn.execute(f"INSERT INTO \"{b}\".secret (v) VALUES ('b-plain')")

        forbidden = await perm_access.sql_forbidden_tables(conn, a, ["staff"])
        assert {"工资", "_dt_tables", "_dt_fields", "_dt_grants", "_dt_confirm_tokens"} <= forbidden
        # First use creates the org role: before the snapshot, so the comparison sees only the corpus.
        first = await channel.run_sql(conn, "select 1 as n", schema=a, mode=Q, forbidden_tables=forbidden)
        assert first.isolation == "role"
        before = await snapshot(conn, a, b, role)
        assert before["b.机密"] and before["a.工资"] and before["a._dt_grants"] and before["a._dt_confirm_tokens"]
        yield World(a=a, b=b, forbidden=forbidden, role=role, before=before)
    finally:
        for schema in (a, b):
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
            await conn.execute(f'DROP OWNED BY "{role}" CASCADE')
            await conn.execute(f'DROP ROLE "{role}"')
        await conn.close()


async def run_case(conn: asyncpg.Connection, world: World, case: Case) -> None:
    world.ran.add(case.id)
    sql = world.sql(case.sql)
    defaults = await conn.fetchrow(
        "SELECT current_setting('search_path') AS p, current_setting('statement_timeout') AS t"
    )
    if case.code is not None:
        with pytest.raises(SqlChannelError) as caught:
            result = await channel.run_sql(
                conn, sql, schema=world.a, mode=case.mode, forbidden_tables=world.forbidden, timeout=TIMEOUT
            )
            pytest.fail(f"{case.id} ran: {result.sql!r} returned {result.rows!r} (affected {result.affected})")
        error = caught.value
        assert error.code == case.code, f"{case.id}: {error!r}"
        assert error.error_type in ("recoverable", "transient"), repr(error)
        assert len(error.message) > 20, repr(error)
        if case.code == "timeout":
            assert error.sqlstate == "57014"
    else:
        result = await channel.run_sql(
            conn, sql, schema=world.a, mode=case.mode, forbidden_tables=world.forbidden, timeout=TIMEOUT
        )
        assert result.isolation == "role"
        expected = [{k: world.sql(v) if isinstance(v, str) else v for k, v in row.items()} for row in case.rows or []]
        assert result.rows == expected, result
        if case.affected is not None:
            assert result.affected == case.affected, result
    # The connection is the platform's again: no transaction, its own user, settings, locks and channels.
    assert not conn.is_in_transaction()
    state = await conn.fetchrow(
        """SELECT current_user = session_user AS same_user, current_setting('search_path') AS p,
                  current_setting('statement_timeout') AS t,
                  (SELECT count(*) FROM pg_catalog.pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory')
                    AS advisory_locks,
                  (SELECT count(*) FROM pg_catalog.pg_listening_channels()) AS channels,
                  (SELECT count(*) FROM pg_catalog.pg_cursors WHERE is_holdable) AS cursors"""
    )
    assert state["same_user"], case.id
    assert (state["p"], state["t"]) == (defaults["p"], defaults["t"]), case.id
    assert (state["advisory_locks"], state["channels"], state["cursors"]) == (0, 0, 0), case.id


def test_the_corpus_is_large_and_covers_both_outcomes() -> None:
    assert len(CASES) >= 70
    assert len({c.id for c in CASES}) == len(CASES)
    assert len({(c.mode, c.sql) for c in CASES}) == len(CASES)
    assert sum(c.code is None for c in CASES) >= 10
    for case in CASES:
        assert (case.code is None) == (case.rows is not None), case.id


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_attack(conn: asyncpg.Connection, world: World, case: Case) -> None:
    await run_case(conn, world, case)


async def test_nothing_outside_org_a_changed(conn: asyncpg.Connection, world: World) -> None:
    """Runs last: B, A's own-scoped rows and metadata, and the global catalogs are as before the corpus."""
    for case in CASES:  # a selective run (-k) still checks the whole corpus
        if case.id not in world.ran:
            await run_case(conn, world, case)
    after = await snapshot(conn, world.a, world.b, world.role)
    assert after.keys() == world.before.keys()
    for key, value in world.before.items():
        assert after[key] == value, key
    assert after["b.机密"] and len(after["a.工资"]) == len(OWN_ROWS)
