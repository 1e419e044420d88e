"""update_field type changes of the datatable skill against a real PostgreSQL (spec §7.3, §7.5, docs/datatable.md).

A type change checks the stored values with the converter a write of the new type uses: what a write would refuse
refuses the change (nothing altered), and what it accepts ends up stored exactly as the write would have stored it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from support.datatable import load_datatable_module

perm_grants = load_datatable_module("permissions_grants")
perm_rls = load_datatable_module("permissions_rls")
rows_write = load_datatable_module("rows_write")
store_fields = load_datatable_module("store_fields")
store_schema = load_datatable_module("store_schema")
store_tables = load_datatable_module("store_tables")
StoreError = store_schema.StoreError


@pytest.fixture
async def schema(conn: asyncpg.Connection) -> AsyncIterator[str]:
    name = store_schema.schema_for("Type" + uuid.uuid4().hex[:12])
    try:
        yield name
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


async def make_table(conn: asyncpg.Connection, schema: str, fields: list[dict[str, Any]]) -> Any:
    created = await store_tables.create_table(conn, schema, "数据", fields)
    return await store_schema.resolve_table(conn, schema, created["id"])


async def insert_raw(conn: asyncpg.Connection, table: Any, column: str, values: list[Any]) -> None:
    """Rows written straight into the column (a 文本 column holds whatever older writes or SQL put there)."""
    await conn.executemany(f'INSERT INTO {table.qualified} ("{column}") VALUES ($1)', [(v,) for v in values])


async def column_values(conn: asyncpg.Connection, table: Any, column: str) -> list[Any]:
    return [r[0] for r in await conn.fetch(f'SELECT "{column}" FROM {table.qualified} ORDER BY id')]


async def column_type(conn: asyncpg.Connection, table: Any, column: str) -> str:
    return str(
        await conn.fetchval(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2",
            table.qualified,
            column,
        )
    )


async def leftovers(conn: asyncpg.Connection) -> int:
    """TEMP tables and functions a type change left behind in this session."""
    return int(
        await conn.fetchval(
            """SELECT (SELECT count(*) FROM pg_class WHERE relname LIKE '\\_dt\\_convert\\_%' AND relpersistence = 't')
                    + (SELECT count(*) FROM pg_proc WHERE proname LIKE '\\_dt\\_convert\\_%')"""
        )
    )


# --------------------------------------------------------------------------------------------------------------------
# refused: nothing changes


async def test_refused_change_leaves_type_data_and_metadata_unchanged(conn: asyncpg.Connection, schema: str) -> None:
    table = await make_table(conn, schema, [{"title": "日", "uidt": "文本"}])
    values = ["2026-03-01", "tomorrow", None, "03/04/2026", "tomorrow", "2026-03-01 10:00"]
    await insert_raw(conn, table, "日", values)
    before = await store_schema.list_columns(conn, schema, table.id)
    async with conn.transaction():  # the caller's transaction (the session's) survives the refusal
        with pytest.raises(StoreError) as info:
            await store_fields.update_field(conn, schema, table.id, "日", {"uidt": "日期", "title": "日子"})
        assert await conn.fetchval("SELECT 1") == 1
    message = str(info.value)
    assert info.value.error_type == "recoverable" and info.value.need_param == "patch"
    assert "4 row(s)" in message and "row ids 2, 4, 5, 6" in message, message
    assert "'tomorrow' is not an ISO date" in message and "'03/04/2026' is not an ISO date" in message, message
    assert "'03/04/2026'" in message and "'2026-03-01 10:00'" in message, message
    assert "Clean those values first" in message and "choose another type" in message, message
    assert await column_type(conn, table, "日") == "text"
    assert await column_values(conn, table, "日") == values
    assert await store_schema.list_columns(conn, schema, table.id) == before
    assert await leftovers(conn) == 0


@pytest.mark.parametrize(
    ("value", "patch", "reason"),
    [
        ("tomorrow", {"uidt": "日期"}, "not an ISO date"),
        ("now", {"uidt": "日期时间"}, "not an ISO 8601 date-time"),
        ("NaN", {"uidt": "数字"}, "not a number"),
        ("Infinity", {"uidt": "数字"}, "not a number"),
        ("3万", {"uidt": "整数"}, "magnitude word"),
        ("12.5", {"uidt": "整数"}, "has decimals"),
        ("1e3", {"uidt": "整数"}, "exponent"),
        ("25:00", {"uidt": "时间"}, "not a time of day"),
        ("allballs", {"uidt": "时间"}, "not a time of day"),
        ("maybe", {"uidt": "勾选"}, "not a yes/no value"),
        ("not-an-email", {"uidt": "邮箱"}, "not an email address"),
        ("example.com", {"uidt": "链接"}, "not an http(s) link"),
        ("call me", {"uidt": "电话"}, "not a phone number"),
        ("NaN", {"uidt": "JSON"}, "cannot be stored as JSON"),
        ("{a: 1}", {"uidt": "JSON"}, "must be valid JSON"),
        ("广州", {"uidt": "单选", "options": ["上海", "北京"]}, "allowed options: 上海, 北京"),
        ("上海,广州", {"uidt": "多选", "options": ["上海", "北京"]}, "not among the options"),
    ],
)
async def test_values_a_write_refuses_refuse_the_change(
    conn: asyncpg.Connection, schema: str, value: str, patch: dict[str, Any], reason: str
) -> None:
    table = await make_table(conn, schema, [{"title": "值", "uidt": "文本"}])
    await insert_raw(conn, table, "值", ["", value, None])
    with pytest.raises(StoreError) as info:
        await store_fields.update_field(conn, schema, table.id, "值", patch)
    message = str(info.value)
    assert "1 row(s)" in message and "row ids 2)" in message and repr(value) in message and reason in message
    assert await column_type(conn, table, "值") == "text"
    assert await column_values(conn, table, "值") == ["", value, None]


async def test_non_text_sources_are_checked_by_the_converter_too(conn: asyncpg.Connection, schema: str) -> None:
    """A 日期时间 → 日期 change keeps no time of day silently: a 日期 write refuses a date-time."""
    table = await make_table(conn, schema, [{"title": "时刻", "uidt": "日期时间"}, {"title": "数", "uidt": "数字"}])
    await conn.execute(
        f'INSERT INTO {table.qualified} ("时刻", "数") VALUES ($1, 2.5), (NULL, 3)', utc("2026-03-01 10:30")
    )
    with pytest.raises(StoreError, match="1 row"):
        await store_fields.update_field(conn, schema, table.id, "时刻", {"uidt": "日期"})
    with pytest.raises(StoreError, match=r"1 row.*has decimals"):
        await store_fields.update_field(conn, schema, table.id, "数", {"uidt": "整数"})
    assert await column_type(conn, table, "时刻") == "timestamp with time zone"
    assert await column_type(conn, table, "数") == "numeric(38,2)"


# --------------------------------------------------------------------------------------------------------------------
# accepted: stored as the write path stores them


ACCEPTED: list[tuple[dict[str, Any], list[str]]] = [
    ({"uidt": "整数"}, ["1,200", " 12 ", "+5", "-7", "１２", "12.00", "-1,234,567"]),
    ({"uidt": "数字", "precision": 10, "scale": 2}, ["1,234.5", "2.125", "-2.125", "０.５", "7"]),
    ({"uidt": "日期"}, ["2026-03-01", " 2026-03-02 ", "2026-03-03 00:00", "2026-03-04T00:00:00"]),
    ({"uidt": "日期时间"}, ["2026-03-01 10:00", "2026-03-01T10:00:00+08:00", "2026-03-01", "2026-03-01 10:00Z"]),
    ({"uidt": "时间"}, ["9:30", "09:30:15", " 23:59 "]),
    ({"uidt": "勾选"}, ["是", "否", "yes", "N", "1", "0", "✓", "off"]),
    ({"uidt": "邮箱"}, [" a@b.cn ", "x.y@example.com"]),
    ({"uidt": "链接"}, [" https://example.com/a ", "HTTP://X.CN"]),
    ({"uidt": "电话"}, ["（010）1234-5678", " +86 138-0000-0000 ", "１３８"]),
    ({"uidt": "JSON"}, ['{"a":1}', "[1,2]", '"x"', "12"]),
    ({"uidt": "单选", "options": ["上海", "北京"]}, [" 上海 ", "北京"]),
    ({"uidt": "多选", "options": ["红", "绿", "蓝"]}, ["绿、红，红", "蓝; 红", '["绿"]', " , "]),
]


@pytest.mark.parametrize("time_zone", ["UTC", "Asia/Shanghai"])
@pytest.mark.parametrize(("patch", "values"), ACCEPTED, ids=[p["uidt"] for p, _ in ACCEPTED])
async def test_accepted_values_are_stored_as_writes_store_them(
    conn: asyncpg.Connection, schema: str, patch: dict[str, Any], values: list[str], time_zone: str
) -> None:
    """The column afterwards equals a column of the new type the same texts were written to through insert_batch.

    In Asia/Shanghai PostgreSQL's own cast would read a naive date-time as local time; writes read it as UTC."""
    await conn.execute(f"SET TIME ZONE '{time_zone}'")
    table = await make_table(conn, schema, [{"title": "旧", "uidt": "文本"}, {"title": "对照", **patch}])
    written = await rows_write.insert_batch(conn, table, [{"旧": v, "对照": v} for v in values])
    assert written["inserted"] == len(values), written
    await insert_raw(conn, table, "旧", ["", "  ", None])  # writes store empty as NULL (such rows are skipped)
    changed = await store_fields.update_field(conn, schema, table.id, "旧", patch)
    assert changed["uidt"] == patch["uidt"]
    rows = await conn.fetch(f'SELECT "旧", "对照", "旧" IS NOT DISTINCT FROM "对照" AS same FROM {table.qualified}')
    assert all(r["same"] for r in rows), [tuple(r) for r in rows]
    assert await column_type(conn, table, "旧") == await column_type(conn, table, "对照")
    assert await leftovers(conn) == 0


async def test_non_text_sources_are_stored_as_writes_store_them(conn: asyncpg.Connection, schema: str) -> None:
    """A 日期 becomes midnight UTC, as a write of the same date to a 日期时间 field (not the session's midnight)."""
    await conn.execute("SET TIME ZONE 'America/New_York'")
    fields = [{"title": "日", "uidt": "日期"}, {"title": "金额", "uidt": "金额"}, {"title": "数", "uidt": "整数"}]
    table = await make_table(conn, schema, fields)
    await rows_write.insert_batch(conn, table, [{"日": "2026-03-01", "金额": "12.00", "数": 1}, {"数": 0}])
    await store_fields.update_field(conn, schema, table.id, "日", {"uidt": "日期时间"})
    await store_fields.update_field(conn, schema, table.id, "金额", {"uidt": "整数"})
    await store_fields.update_field(conn, schema, table.id, "数", {"uidt": "勾选"})
    rows = await conn.fetch(f'SELECT "日", "金额", "数" FROM {table.qualified} ORDER BY id')
    assert [tuple(r) for r in rows] == [(utc("2026-03-01 00:00"), 12, True), (None, None, False)]


async def test_same_column_type_is_normalized_in_place(conn: asyncpg.Connection, schema: str) -> None:
    table = await make_table(conn, schema, [{"title": "邮箱", "uidt": "文本"}, {"title": "备注", "uidt": "文本"}])
    await conn.execute(
        f"INSERT INTO {table.qualified} (\"邮箱\", \"备注\") VALUES (' a@b.cn ', 'x'), ('c@d.cn', 'y'), ('  ', 'z')"
    )
    xmin_before = await conn.fetch(f"SELECT xmin::text AS x FROM {table.qualified} ORDER BY id")
    await store_fields.update_field(conn, schema, table.id, "邮箱", {"uidt": "邮箱"})
    assert await column_values(conn, table, "邮箱") == ["a@b.cn", "c@d.cn", None]
    xmin_after = await conn.fetch(f"SELECT xmin::text AS x FROM {table.qualified} ORDER BY id")
    assert xmin_after[1] == xmin_before[1]  # a row that already held the stored form is not rewritten


async def test_values_that_collide_after_conversion_in_a_unique_field_are_refused(
    conn: asyncpg.Connection, schema: str
) -> None:
    table = await make_table(conn, schema, [{"title": "编号", "uidt": "文本", "unique": True}])
    await insert_raw(conn, table, "编号", ["1,200", "1200", "7"])
    with pytest.raises(StoreError, match="existing values do not convert"):
        await store_fields.update_field(conn, schema, table.id, "编号", {"uidt": "整数"})
    assert await column_values(conn, table, "编号") == ["1,200", "1200", "7"]
    assert await column_type(conn, table, "编号") == "text"


async def test_long_values_are_mapped_and_shown_short(conn: asyncpg.Connection, schema: str) -> None:
    """Values far over a B-tree key's ~2.7 kB convert, and a refused one is cut short in the message."""
    table = await make_table(conn, schema, [{"title": "扩展", "uidt": "长文本"}])
    document = json.dumps({"items": [uuid.uuid4().hex for _ in range(400)]}, separators=(",", ":"))
    await insert_raw(conn, table, "扩展", [document, "x" * 20000])
    with pytest.raises(StoreError) as info:
        await store_fields.update_field(conn, schema, table.id, "扩展", {"uidt": "JSON"})
    assert "1 row(s)" in str(info.value) and "'xxxx" in str(info.value) and len(str(info.value)) < 1000
    await conn.execute(f"UPDATE {table.qualified} SET \"扩展\" = '[]' WHERE id = 2")
    await store_fields.update_field(conn, schema, table.id, "扩展", {"uidt": "JSON"})
    assert await column_values(conn, table, "扩展") == [json.dumps(json.loads(document), ensure_ascii=False), "[]"]


# --------------------------------------------------------------------------------------------------------------------
# NULL and empty values


async def test_null_and_empty_values_become_null(conn: asyncpg.Connection, schema: str) -> None:
    table = await make_table(
        conn,
        schema,
        [{"title": "数", "uidt": "文本"}, {"title": "日", "uidt": "文本"}, {"title": "空", "uidt": "文本"}],
    )
    await conn.executemany(
        f'INSERT INTO {table.qualified} ("数", "日", "空") VALUES ($1, $2, $3)',
        [(None, None, None), ("", "", ""), ("   ", " \t ", "\u3000"), ("5", "2026-03-01", None)],
    )
    await store_fields.update_field(conn, schema, table.id, "数", {"uidt": "整数"})
    await store_fields.update_field(conn, schema, table.id, "日", {"uidt": "日期"})
    await store_fields.update_field(conn, schema, table.id, "空", {"uidt": "多选", "options": ["a"]})
    rows = await conn.fetch(f'SELECT "数", "日", "空" FROM {table.qualified} ORDER BY id')
    assert [r["数"] for r in rows] == [None, None, None, 5]
    assert [str(r["日"]) if r["日"] else None for r in rows] == [None, None, None, "2026-03-01"]
    assert [r["空"] for r in rows] == [None, None, None, None]


# --------------------------------------------------------------------------------------------------------------------
# big tables, row-level security


async def test_twenty_thousand_rows_in_several_batches(conn: asyncpg.Connection, schema: str) -> None:
    """15,000 distinct values (more than one batch of the cursor); '1,234' forms need the mapping, not the cast."""
    table = await make_table(conn, schema, [{"title": "数", "uidt": "文本"}])
    await conn.execute(
        f"""INSERT INTO {table.qualified} ("数")
            SELECT CASE WHEN g % 2 = 0 THEN to_char(g % 15000, 'FM999,999') ELSE (g % 15000)::text END
            FROM generate_series(1, 20000) g"""
    )
    await conn.execute(f"UPDATE {table.qualified} SET \"数\" = 'zwölf' WHERE id IN (17000, 19999)")
    with pytest.raises(StoreError) as info:
        await store_fields.update_field(conn, schema, table.id, "数", {"uidt": "整数"})
    assert "2 row(s)" in str(info.value) and "row ids 17000, 19999" in str(info.value), str(info.value)
    assert await column_type(conn, table, "数") == "text"
    await conn.execute(f'UPDATE {table.qualified} SET "数" = NULL WHERE id IN (17000, 19999)')
    await store_fields.update_field(conn, schema, table.id, "数", {"uidt": "整数"})
    wrong = await conn.fetchval(
        f'SELECT count(*) FROM {table.qualified} WHERE "数" IS DISTINCT FROM '
        "CASE WHEN id IN (17000, 19999) THEN NULL ELSE id % 15000 END"
    )
    assert wrong == 0 and await column_type(conn, table, "数") == "bigint"


@pytest.fixture
async def owner_role(conn: asyncpg.Connection, schema: str) -> AsyncIterator[str]:
    """A NOLOGIN role that is neither superuser nor BYPASSRLS (superusers always bypass row-level security)."""
    role = f"dt_type_{uuid.uuid4().hex[:10]}"
    await conn.execute(f'CREATE ROLE "{role}" NOLOGIN NOSUPERUSER NOBYPASSRLS')
    try:
        yield role
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.execute(f'DROP OWNED BY "{role}" CASCADE')
        await conn.execute(f'DROP ROLE "{role}"')


async def test_rows_hidden_by_row_level_security_are_checked_and_converted(
    conn: asyncpg.Connection, schema: str, owner_role: str
) -> None:
    table = await make_table(conn, schema, [{"title": "负责人", "uidt": "文本"}, {"title": "数", "uidt": "文本"}])
    await conn.executemany(
        f'INSERT INTO {table.qualified} ("负责人", "数") VALUES ($1, $2)', [("E1", "1"), ("E2", "2,000"), ("E2", "x")]
    )
    await perm_grants.grant(
        conn, schema, table_id_or_name="数据", role="r", ops=["read"], row_scope="own", owner_field="负责人"
    )
    await conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{owner_role}"')
    await conn.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO "{owner_role}"')
    await conn.execute(f'ALTER TABLE {table.qualified} OWNER TO "{owner_role}"')  # FORCE filters the owner too

    async def as_owner_of_e1(patch: dict[str, Any]) -> None:
        async with conn.transaction():
            await perm_rls.set_actor(conn, "E1")
            await conn.execute(f'SET LOCAL ROLE "{owner_role}"')
            assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified}") == 1
            await store_fields.update_field(conn, schema, table.id, "数", patch)
            # the actor's view is back afterwards
            assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified}") == 1

    with pytest.raises(StoreError, match=r"1 row.*'x'"):
        await as_owner_of_e1({"uidt": "整数"})
    await conn.execute(f"UPDATE {table.qualified} SET \"数\" = '3' WHERE \"数\" = 'x'")
    await as_owner_of_e1({"uidt": "整数"})
    assert await column_values(conn, table, "数") == [1, 2000, 3]
