"""The storage model (store/schema.py, spec §7.1): quoting, the org schema and its metadata, table lookup, isolation
between organisations and the session's connection."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.store.owners import resolve_schema
from skillyard.builtin_skills.datatable.store.schema import StoreError
from skillyard.builtin_skills.datatable.structure import fields as structure_fields
from skillyard.builtin_skills.datatable.structure import tables as structure_tables

from skillyard import SkillYard
from support.datatable import asyncpg_dsn, context, make_table, run


async def test_unknown_table_lists_the_tables(yard: SkillYard, org: str) -> None:
    await make_table(yard, org)
    env = await run(yard, context(org), "query", table_name="订单")
    assert env["ok"] is False and env["need_param"] == "table_id" and "客户" in env["error"]
    none = await run(yard, context(org), "query")
    assert none["ok"] is False and none["need_param"] == "table_id"


def test_quote_ident() -> None:
    assert store_schema.quote_ident("员工") == '"员工"'
    assert store_schema.quote_ident('a"b') == '"a""b"'


async def test_ensure_schema_twice(conn: asyncpg.Connection, schema: str) -> None:
    await store_schema.ensure_schema(conn, schema)
    await store_schema.ensure_schema(conn, schema)
    tables = await conn.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1", schema
    )
    assert [r["table_name"] for r in tables] == ["_dt_fields", "_dt_tables"]
    assert await store_schema.list_tables(conn, schema) == []


async def test_ensure_schema_concurrently(database_url: str, schema: str) -> None:
    connections = [await asyncpg.connect(asyncpg_dsn(database_url)) for _ in range(6)]
    try:
        await asyncio.gather(*(store_schema.ensure_schema(c, schema) for c in connections))
        assert await store_schema.list_tables(connections[0], schema) == []
    finally:
        for c in connections:
            await c.close()


async def test_bad_schema_is_refused(conn: asyncpg.Connection) -> None:
    with pytest.raises(StoreError) as info:
        await store_schema.ensure_schema(conn, "public")
    assert info.value.error_type == "config"


async def test_list_tables_before_any_table(conn: asyncpg.Connection, schema: str) -> None:
    assert await store_schema.list_tables(conn, schema) == []
    with pytest.raises(StoreError) as info:
        await store_schema.resolve_table(conn, schema, table_name="员工")
    assert "no tables yet" in str(info.value)
    assert info.value.need_param == "table_id"


async def test_resolve_table(conn: asyncpg.Connection, schema: str) -> None:
    a = await structure_tables.create_table(conn, schema, "项目", [{"title": "名称", "uidt": "文本"}])
    b = await structure_tables.create_table(conn, schema, "Project", [{"title": "name", "uidt": "文本"}])
    by_id = await store_schema.resolve_table(conn, schema, table_id=a["id"])
    assert (by_id.id, by_id.title, by_id.schema) == (a["id"], "项目", schema)
    assert by_id.qualified == f'"{schema}"."项目"'
    assert (await store_schema.resolve_table(conn, schema, table_id=uuid.UUID(b["id"]))).title == "Project"
    assert (await store_schema.resolve_table(conn, schema, table_name="Project")).id == b["id"]
    # a title passed as table_id is accepted too
    assert (await store_schema.resolve_table(conn, schema, table_id="项目")).id == a["id"]

    with pytest.raises(StoreError) as info:
        await store_schema.resolve_table(conn, schema, table_name="project")  # exact title only
    assert info.value.need_param == "table_id"
    assert "项目" in str(info.value) and "Project" in str(info.value)
    assert info.value.error_type == "recoverable" and not info.value.non_retriable

    with pytest.raises(StoreError):
        await store_schema.resolve_table(conn, schema, table_id=str(uuid.uuid4()))
    with pytest.raises(StoreError) as info:
        await store_schema.resolve_table(conn, schema)
    assert info.value.need_param == "table_id" and "项目" in str(info.value)


async def test_orgs_are_isolated(conn: asyncpg.Connection, schema: str) -> None:
    other = await resolve_schema(conn, "other" + uuid.uuid4().hex[:8])
    created = await structure_tables.create_table(conn, schema, "员工", [{"title": "名称", "uidt": "文本"}])
    await store_schema.ensure_schema(conn, other)
    assert await store_schema.list_tables(conn, other) == []
    with pytest.raises(StoreError):
        await store_schema.resolve_table(conn, other, table_id=created["id"])


async def test_raw_connection_from_session(database_url: str, schema: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    engine = create_async_engine(database_url)
    try:
        async with AsyncSession(engine) as session:
            raw = await store_schema.raw_connection(session)
            assert isinstance(raw, asyncpg.Connection)
            created = await structure_tables.create_table(raw, schema, "会话表", [{"title": "a", "uidt": "文本"}])
            await session.rollback()
        async with AsyncSession(engine) as session:
            raw = await store_schema.raw_connection(session)
            assert await store_schema.list_tables(raw, schema) == []
            created = await structure_tables.create_table(raw, schema, "会话表", [{"title": "a", "uidt": "文本"}])
            await raw.execute(f'INSERT INTO "{schema}"."会话表" ("a") VALUES ($1), ($1)', "y")
            with pytest.raises(StoreError, match="2 row"):
                await structure_fields.update_field(raw, schema, created["id"], "a", {"uidt": "单选", "options": ["x"]})
            with pytest.raises(StoreError, match="more than one row"):
                await structure_fields.update_field(raw, schema, created["id"], "a", {"unique": True, "title": "b"})
            assert (await session.execute(text("SELECT 1"))).scalar() == 1  # the session is not aborted
            await session.commit()
        async with AsyncSession(engine) as session:
            raw = await store_schema.raw_connection(session)
            assert [t["id"] for t in await store_schema.list_tables(raw, schema)] == [created["id"]]
    finally:
        await engine.dispose()


@pytest.mark.spec("§7.1")
async def test_table_name_table_and_table_title_resolve_by_exact_title(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org, rows=2)
    ctx = context(org)
    for key in ("table_name", "table", "table_title"):
        env = await run(yard, ctx, "query", **{key: "客户"})
        assert env["ok"] and env["pageInfo"]["totalRows"] == 2, (key, env)
    listed = await run(yard, ctx, "list_tables")
    row = listed["data"][0]
    assert set(row) >= {"id", "title", "schema", "qualified"} and row["id"] == table_id
    assert uuid.UUID(row["id"]) and row["schema"] == f"org_data_{org}"
    # not a prefix / case-insensitive match
    near = await run(yard, ctx, "query", table_name="客")
    assert near["ok"] is False and near["need_param"] == "table_id" and "客户" in near["error"]
