"""The SQL channel's execution layer (sql/channel.py, spec §7.6): JSON rows, caps, timeouts, escapes, writes and the
per-organisation role it runs under."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.sql import channel
from skillyard.builtin_skills.datatable.sql import errors as sql_errors
from skillyard.builtin_skills.datatable.sql import role as sql_role
from skillyard.builtin_skills.datatable.sql.channel import run_sql
from skillyard.builtin_skills.datatable.sql.errors import SqlChannelError

from support.datatable import asyncpg_dsn


def _schema() -> str:
    return f"org_data_t{uuid.uuid4().hex[:12]}"


async def _make_schema(conn: asyncpg.Connection, schema: str) -> None:
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    await conn.execute(
        f"""CREATE TABLE "{schema}"."库存" (
              id bigserial PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now(),
              "名称" text NOT NULL UNIQUE, "数量" integer, "价格" numeric(10, 2), "到货" date)"""
    )
    await conn.execute(
        f"""INSERT INTO "{schema}"."库存" ("名称", "数量", "价格", "到货") VALUES
              ('螺丝', 100, 0.50, '2024-03-01'), ('螺母', 5, 0.20, NULL), ('垫片', 42, 12.00, '2024-05-20')"""
    )


async def _drop(conn: asyncpg.Connection, schema: str) -> None:
    role = sql_role.role_name(schema)
    await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
        await conn.execute(f'DROP OWNED BY "{role}" CASCADE')
        await conn.execute(f'DROP ROLE "{role}"')


@pytest.fixture
async def org(conn: asyncpg.Connection) -> AsyncIterator[str]:
    schema = _schema()
    await _make_schema(conn, schema)
    try:
        yield schema
    finally:
        await _drop(conn, schema)


@pytest.fixture
async def other_org(conn: asyncpg.Connection) -> AsyncIterator[str]:
    schema = _schema()
    await _make_schema(conn, schema)
    await conn.execute(f'CREATE TABLE "{schema}".secret (id bigserial PRIMARY KEY, v text)')
    await conn.execute(f"INSERT INTO \"{schema}\".secret (v) VALUES ('b-only')")
    try:
        yield schema
    finally:
        await _drop(conn, schema)


async def query(conn: asyncpg.Connection, schema: str, sql: str, **kw: object):
    return await run_sql(conn, sql, schema=schema, mode="query", **kw)


async def execute(conn: asyncpg.Connection, schema: str, sql: str, **kw: object):
    return await run_sql(conn, sql, schema=schema, mode="execute", **kw)


@pytest.fixture
async def platform_user(conn: asyncpg.Connection, database_url: str) -> AsyncIterator[object]:
    """A factory: ``await platform_user(createrole=...)`` → (connection as a fresh non-superuser, its schema)."""
    made: list[tuple[str, str, asyncpg.Connection]] = []

    async def make(*, createrole: bool) -> tuple[asyncpg.Connection, str]:
        user = f"platform_{uuid.uuid4().hex[:10]}"
        schema = _schema()
        await conn.execute(f'CREATE ROLE "{user}" LOGIN {"CREATEROLE" if createrole else ""}')
        await conn.execute(f'CREATE SCHEMA "{schema}" AUTHORIZATION "{user}"')
        await conn.execute(f'GRANT CONNECT, TEMPORARY ON DATABASE "{conn._params.database}" TO "{user}"')
        dsn = asyncpg_dsn(database_url)
        user_conn = await asyncpg.connect(dsn, user=user)
        made.append((user, schema, user_conn))
        await user_conn.execute(
            f'CREATE TABLE "{schema}"."库存" (id bigserial PRIMARY KEY, "名称" text, "数量" integer)'
        )
        await user_conn.execute(f'INSERT INTO "{schema}"."库存" ("名称", "数量") VALUES (\'螺丝\', 100)')
        return user_conn, schema

    yield make
    for user, schema, user_conn in made:
        await user_conn.close()
        await _drop(conn, schema)
        await conn.execute(f'DROP OWNED BY "{user}" CASCADE')
        await conn.execute(f'DROP ROLE "{user}"')


async def test_select_returns_json_rows_under_the_org_role(conn: asyncpg.Connection, org: str) -> None:
    result = await query(conn, org, "select 名称, 数量, 价格, 到货 from 库存 where 数量 > 10 order by 数量")
    assert result.rows == [
        {"名称": "垫片", "数量": 42, "价格": "12.00", "到货": "2024-05-20"},
        {"名称": "螺丝", "数量": 100, "价格": "0.50", "到货": "2024-03-01"},
    ]
    assert result.row_count == 2
    assert result.truncated is False
    assert result.kind == "select"
    assert result.affected is None
    assert result.isolation == "role"
    assert result.notes == ()
    assert result.sql == f'SELECT "名称", "数量", "价格", "到货" FROM {org}."库存" WHERE "数量" > 10 ORDER BY "数量"'
    json.dumps(result.as_dict(), ensure_ascii=False)


async def test_values_are_json_serialisable(conn: asyncpg.Connection, org: str) -> None:
    result = await query(
        conn,
        org,
        "select 1 as n, 1.5::float8 as f, 'NaN'::numeric as nan, 'Infinity'::float8 as inf, "
        "interval '1 day 2 hours 3.5 seconds' as i, '2024-01-02 03:04:05+00'::timestamptz as ts, "
        "'12:30'::time as t, gen_random_uuid() as u, array[1, 2] as arr, null as nothing, true as b, 1 as n",
    )
    (row,) = result.rows
    json.dumps(row)
    assert row["n"] == 1 and row["n_2"] == 1  # duplicate column names get a suffix
    assert row["f"] == 1.5 and row["nan"] == "NaN" and row["inf"] == "Infinity"
    assert row["i"] == "P1DT2H3.5S"
    assert row["ts"].startswith("2024-01-02T03:04:05")
    assert row["t"] == "12:30:00"
    assert uuid.UUID(row["u"])
    assert row["arr"] == [1, 2] and row["nothing"] is None and row["b"] is True


async def test_row_cap_sets_truncated(conn: asyncpg.Connection, org: str) -> None:
    await conn.execute(
        f'INSERT INTO "{org}"."库存" ("名称", "数量") SELECT \'x\' || i, i FROM generate_series(1, 60) i'
    )
    result = await query(conn, org, "select 名称 from 库存 order by id", max_rows=10)
    assert result.row_count == 10 and len(result.rows) == 10
    assert result.truncated is True
    assert any("cut at 10 rows" in note for note in result.notes)
    exact = await query(conn, org, "select 名称 from 库存", max_rows=63)
    assert exact.row_count == 63 and exact.truncated is False
    capped = await query(conn, org, "select 名称 from 库存", max_rows=62)
    assert capped.row_count == 62 and capped.truncated is True


async def test_byte_cap_sets_truncated(conn: asyncpg.Connection, org: str) -> None:
    result = await query(conn, org, "select repeat('汉', 1000) as s from 库存", max_bytes=5000)
    assert result.truncated is True
    assert result.row_count == 1  # one row is ~3 kB of UTF-8, the second would pass 5,000 bytes
    assert len(json.dumps(result.rows, ensure_ascii=False).encode()) <= 5000
    whole = await query(conn, org, "select repeat('汉', 1000) as s from 库存", max_bytes=20_000)
    assert whole.row_count == 3 and whole.truncated is False


async def test_statement_timeout_is_transient(conn: asyncpg.Connection, org: str) -> None:
    slow = "with recursive c(n) as (select 1 union all select n + 1 from c where n < 1000000000) select count(*) from c"
    started = time.monotonic()
    with pytest.raises(SqlChannelError) as caught:
        await query(conn, org, slow, timeout=0.3)
    assert time.monotonic() - started < 0.3 + channel.CLIENT_GRACE_SECONDS
    assert caught.value.error_type == "transient"
    assert caught.value.code == "timeout"
    assert caught.value.sqlstate == "57014"
    assert "longer than 0.3 s" in str(caught.value)
    assert await conn.fetchval("SELECT 1") == 1  # the connection is usable again
    assert not conn.is_in_transaction()
    assert await conn.fetchval("SHOW statement_timeout") == "0"  # SET LOCAL did not leak
    assert await conn.fetchval("SELECT current_user") == await conn.fetchval("SELECT session_user")


async def test_client_side_timeout_backstop(
    conn: asyncpg.Connection, org: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(channel, "CLIENT_GRACE_SECONDS", -1.7)  # client limit 0.3 s, server limit 2 s
    slow = "with recursive c(n) as (select 1 union all select n + 1 from c where n < 1000000000) select count(*) from c"
    started = time.monotonic()
    with pytest.raises(SqlChannelError) as caught:
        await query(conn, org, slow, timeout=2.0)
    assert time.monotonic() - started < 1.5
    assert caught.value.error_type == "transient" and caught.value.code == "timeout"
    assert "client-side" in str(caught.value)
    assert await conn.fetchval("SELECT 1") == 1
    assert not conn.is_in_transaction()


async def test_stacked_statements_are_refused_and_the_table_survives(conn: asyncpg.Connection, org: str) -> None:
    with pytest.raises(SqlChannelError) as caught:
        await query(conn, org, "SELECT 1; COMMIT; DROP TABLE 库存")
    assert caught.value.error_type == "recoverable"
    assert caught.value.code == "multiple_statements"
    assert caught.value.sqlstate is None
    # The extended protocol refuses the stack on its own, even past the guard.
    with pytest.raises(asyncpg.PostgresSyntaxError, match="multiple commands"):
        await channel._execute(
            conn,
            f'SELECT 1; COMMIT; DROP TABLE {org}."库存"',
            schema=org,
            kind="select",
            role=None,
            statement_timeout=5,
        )
    assert await conn.fetchval(f'SELECT count(*) FROM "{org}"."库存"') == 3


async def test_other_org_is_refused_by_the_guard(conn: asyncpg.Connection, org: str, other_org: str) -> None:
    with pytest.raises(SqlChannelError) as caught:
        await query(conn, org, f"select * from {other_org}.secret")
    assert caught.value.error_type == "recoverable"
    assert caught.value.code == "schema"


async def test_role_layer_holds_without_the_guard(conn: asyncpg.Connection, org: str, other_org: str) -> None:
    role = await sql_role.org_role(conn, org)
    assert role == f"{org}_sql"
    for sql, kind in [
        (f"SELECT * FROM {other_org}.secret", "select"),
        (f"DELETE FROM {other_org}.secret WHERE id > 0", "delete"),
        (f'UPDATE {other_org}."库存" SET "数量" = 0 WHERE id > 0', "update"),
        (f"CREATE TABLE {other_org}.planted (a text)", "create_table"),
    ]:
        with pytest.raises(asyncpg.InsufficientPrivilegeError) as caught:
            await channel._execute(conn, sql, schema=org, kind=kind, role=role, statement_timeout=5)
        assert caught.value.sqlstate == "42501"
        error = sql_errors.classify_error(caught.value, 5)
        assert error.error_type == "recoverable" and error.code == "permission_denied"
        assert "only tables of this organisation are reachable" in str(error)
    assert await conn.fetch(f'SELECT v FROM "{other_org}".secret') == [("b-only",)]
    assert await conn.fetchval(f'SELECT sum("数量") FROM "{other_org}"."库存"') == 147
    assert await conn.fetchval("SELECT to_regclass($1)", f"{other_org}.planted") is None
    # The same statement as the platform user (no role) would have read it: the role is what stopped it.
    rows, *_ = await channel._execute(
        conn, f"SELECT v FROM {other_org}.secret", schema=org, kind="select", role=None, statement_timeout=5
    )
    assert rows == [{"v": "b-only"}]


async def test_role_cannot_read_store_metadata(conn: asyncpg.Connection, org: str) -> None:
    await conn.execute(f'CREATE TABLE "{org}"._dt_tables (id uuid, title text)')
    role = await sql_role.org_role(conn, org)
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await channel._execute(
            conn, f"SELECT * FROM {org}._dt_tables", schema=org, kind="select", role=role, statement_timeout=5
        )
    # Tables the platform creates after the role exist get the role's privileges through default privileges.
    await conn.execute(f'CREATE TABLE "{org}"."新表" (id bigserial PRIMARY KEY, a text)')
    await conn.execute(f'CREATE TABLE "{org}"._dt_fields (id uuid)')
    assert await sql_role.org_role(conn, org) == role  # re-checks, revokes the new metadata table again
    result = await execute(conn, org, "insert into 新表 (a) values ('x')")
    assert result.affected == 1
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await channel._execute(
            conn, f"SELECT * FROM {org}._dt_fields", schema=org, kind="select", role=role, statement_timeout=5
        )


async def test_org_role_is_idempotent_and_limited(conn: asyncpg.Connection, org: str, other_org: str) -> None:
    role = await sql_role.org_role(conn, org)
    assert await sql_role.org_role(conn, org) == role
    assert await conn.fetchval("SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", role) is False
    assert await conn.fetchval("SELECT has_schema_privilege($1, $2, 'USAGE')", role, org)
    assert not await conn.fetchval("SELECT has_schema_privilege($1, $2, 'USAGE')", role, other_org)
    assert not await conn.fetchval("SELECT has_table_privilege($1, $2, 'SELECT')", role, f'{other_org}."库存"')


async def test_guard_only_when_org_role_is_unavailable(
    conn: asyncpg.Connection, org: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_role(conn: asyncpg.Connection, schema: str) -> None:
        return None

    monkeypatch.setattr(channel, "org_role", no_role)
    result = await query(conn, org, "select count(*) as n from 库存")
    assert result.rows == [{"n": 3}]
    assert result.isolation == "guard-only"
    assert any("guard-only" in note and "CREATEROLE" in note for note in result.notes)
    created = await execute(conn, org, "create table 日志 (内容 text)")
    assert created.isolation == "guard-only"
    owner = await conn.fetchval(
        "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass($1)", f'{org}."日志"'
    )
    assert owner == await conn.fetchval("SELECT current_user")


async def test_insert_update_delete_affected_counts(conn: asyncpg.Connection, org: str) -> None:
    inserted = await execute(conn, org, "insert into 库存 (名称, 数量) values ('弹簧', 7), ('铆钉', 8)")
    assert (inserted.kind, inserted.affected, inserted.rows, inserted.truncated) == ("insert", 2, [], False)
    updated = await execute(conn, org, "update 库存 set 数量 = 数量 + 1 where 数量 < 10")
    assert (updated.kind, updated.affected) == ("update", 3)
    deleted = await execute(conn, org, "delete from 库存 where 名称 in ('弹簧', '铆钉')")
    assert (deleted.kind, deleted.affected) == ("delete", 2)
    none = await execute(conn, org, "delete from 库存 where 名称 = '没有'")
    assert none.affected == 0
    assert await conn.fetchval(f'SELECT "数量" FROM "{org}"."库存" WHERE "名称" = \'螺母\'') == 6


async def test_returning_rows_are_capped_and_counted(conn: asyncpg.Connection, org: str) -> None:
    one = await execute(conn, org, "insert into 库存 (名称, 数量) values ('弹簧', 7) returning 名称, 数量")
    assert one.rows == [{"名称": "弹簧", "数量": 7}]
    assert one.affected == 1 and one.truncated is False
    many = await execute(conn, org, "update 库存 set 数量 = 0 where 数量 >= 0 returning 名称", max_rows=2)
    assert many.row_count == 2 and many.truncated is True
    assert many.affected == 4  # every row was updated, only two came back
    assert await conn.fetchval(f'SELECT count(*) FROM "{org}"."库存" WHERE "数量" = 0') == 4


async def test_failed_write_rolls_back(conn: asyncpg.Connection, org: str) -> None:
    with pytest.raises(SqlChannelError) as caught:
        await execute(conn, org, "update 库存 set 数量 = 数量 / (数量 - 5) where 数量 > 0")
    assert caught.value.error_type == "recoverable"
    assert caught.value.code == "data_error" and caught.value.sqlstate == "22012"
    assert await conn.fetchval(f'SELECT sum("数量") FROM "{org}"."库存"') == 147
    with pytest.raises(SqlChannelError) as dup:
        await execute(conn, org, "insert into 库存 (名称) values ('螺丝')")
    assert dup.value.error_type == "recoverable"
    assert dup.value.code == "constraint_violation" and dup.value.sqlstate == "23505"


async def test_create_table_gets_platform_columns(conn: asyncpg.Connection, org: str) -> None:
    result = await execute(conn, org, "create table 订单 (客户 text not null, 金额 numeric(12, 2))")
    assert (result.kind, result.created, result.isolation) == ("create_table", "订单", "role")
    assert any("id" in note and "created_at" in note for note in result.notes)
    columns = await conn.fetch(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = $1 AND table_name = '订单' ORDER BY ordinal_position",
        org,
    )
    assert [(c["column_name"], c["data_type"]) for c in columns] == [
        ("客户", "text"),
        ("金额", "numeric"),
        ("id", "bigint"),
        ("created_at", "timestamp with time zone"),
    ]
    owner = await conn.fetchval(
        "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass($1)", f'{org}."订单"'
    )
    assert owner == f"{org}_sql"
    inserted = await execute(conn, org, "insert into 订单 (客户, 金额) values ('甲', 9.90) returning id, 金额")
    assert inserted.rows[0]["金额"] == "9.90" and inserted.rows[0]["id"] == 1
    rows = (await query(conn, org, "select 客户, created_at is not null as stamped from 订单")).rows
    assert rows == [{"客户": "甲", "stamped": True}]


async def test_create_index_and_view(conn: asyncpg.Connection, org: str) -> None:
    index = await execute(conn, org, "create index 库存_数量 on 库存 (数量)")  # a table the platform owns
    assert (index.kind, index.created) == ("create_index", "库存")
    assert await conn.fetchval("SELECT to_regclass($1)", f'{org}."库存_数量"') is not None
    view = await execute(conn, org, "create view 少量 as select 名称, 数量 from 库存 where 数量 < 10")
    assert (view.kind, view.created) == ("create_view", "少量")
    assert (await query(conn, org, "select 名称 from 少量")).rows == [{"名称": "螺母"}]
    await execute(conn, org, "create table 记录 (内容 text)")
    own = await execute(conn, org, "create index on 记录 (内容)")  # a table the role owns
    assert own.created == "记录"


async def test_unknown_table_and_column_are_recoverable(conn: asyncpg.Connection, org: str) -> None:
    with pytest.raises(SqlChannelError) as table:
        await query(conn, org, "select * from 不存在")
    assert (table.value.error_type, table.value.code, table.value.sqlstate) == (
        "recoverable",
        "undefined_table",
        "42P01",
    )
    assert "list_tables" in str(table.value)
    with pytest.raises(SqlChannelError) as column:
        await query(conn, org, "select 颜色 from 库存")
    assert (column.value.error_type, column.value.code, column.value.sqlstate) == (
        "recoverable",
        "undefined_column",
        "42703",
    )
    assert "颜色" in str(column.value)


async def test_guard_refusal_and_bad_arguments(conn: asyncpg.Connection, org: str) -> None:
    with pytest.raises(SqlChannelError) as refused:
        await query(conn, org, "set role postgres")
    assert refused.value.error_type == "recoverable" and refused.value.code == "statement"
    with pytest.raises(SqlChannelError) as mode:
        await run_sql(conn, "select 1", schema=org, mode="write")
    assert mode.value.error_type == "config"
    with pytest.raises(SqlChannelError) as bad:
        await query(conn, org, "select 1", timeout=0)
    assert bad.value.error_type == "config"


async def test_createrole_platform_user_gets_the_org_role(platform_user, other_org: str) -> None:
    user_conn, schema = await platform_user(createrole=True)
    result = await query(user_conn, schema, "select 名称, 数量 from 库存")
    assert result.rows == [{"名称": "螺丝", "数量": 100}] and result.isolation == "role"
    created = await execute(user_conn, schema, "create table 订单 (客户 text)")
    assert created.isolation == "role"
    inserted = await execute(user_conn, schema, "insert into 订单 (客户) values ('甲') returning id")
    assert inserted.rows == [{"id": 1}]
    # The platform user keeps full use of what the role created (it inherits the role).
    assert await user_conn.fetchval(f'SELECT count(*) FROM "{schema}"."订单"') == 1
    role = sql_role.role_name(schema)
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await channel._execute(
            user_conn,
            f'SELECT * FROM {other_org}."库存"',  # another org's table, under this org's role
            schema=schema,
            kind="select",
            role=role,
            statement_timeout=5,
        )


async def test_platform_user_without_createrole_runs_guard_only(platform_user) -> None:
    user_conn, schema = await platform_user(createrole=False)
    assert await sql_role.org_role(user_conn, schema) is None
    result = await query(user_conn, schema, "select 名称 from 库存")
    assert result.rows == [{"名称": "螺丝"}]
    assert result.isolation == "guard-only"
    assert any("CREATEROLE" in note for note in result.notes)
    created = await execute(user_conn, schema, "create table 订单 (客户 text)")
    assert created.isolation == "guard-only" and created.created == "订单"


async def test_inside_a_callers_transaction_settings_are_restored(conn: asyncpg.Connection, org: str) -> None:
    async with conn.transaction():
        await conn.execute("SET LOCAL statement_timeout = '42s'")
        before = await conn.fetchrow("SELECT current_user AS u, current_setting('search_path') AS p")
        result = await execute(conn, org, "insert into 库存 (名称) values ('弹簧')")
        assert result.affected == 1 and result.isolation == "role"
        after = await conn.fetchrow("SELECT current_user AS u, current_setting('search_path') AS p")
        assert after == before
        assert await conn.fetchval("SHOW statement_timeout") == "42s"
        with pytest.raises(SqlChannelError):
            await query(conn, org, "select 颜色 from 库存")  # rolled back to the savepoint, outer one intact
        assert await conn.fetchval("SELECT current_user") == before["u"]
        assert await conn.fetchval(f'SELECT count(*) FROM "{org}"."库存"') == 4
