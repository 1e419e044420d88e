"""Changing a field's type with data in it (structure/type_change.py, spec §7.3, §7.5): refused when a write of the
new type would refuse a stored value, else stored as writes store them."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.permissions import grants as perm_grants
from skillyard.builtin_skills.datatable.permissions import rls as perm_rls
from skillyard.builtin_skills.datatable.rows import write as rows_write
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.store.schema import StoreError
from skillyard.builtin_skills.datatable.structure import fields as structure_fields

from skillyard import SkillYard
from support.datatable import (
    columns,
    context,
    count,
    make_table,
    plain_role_dropped_afterwards,
    run,
    schema_dropped_afterwards,
    store_table,
)
from support.datatable.structure import column_types, create_data_table


@pytest.fixture
async def schema(conn: asyncpg.Connection) -> AsyncIterator[str]:
    """A new organisation schema, dropped afterwards with everything in it."""
    async for name in schema_dropped_afterwards(conn, "Type"):
        yield name


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


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


@pytest.fixture
async def owner_role(conn: asyncpg.Connection, schema: str) -> AsyncIterator[str]:
    """A NOLOGIN role that is neither superuser nor BYPASSRLS (superusers always bypass row-level security)."""
    async for role in plain_role_dropped_afterwards(conn, schema, "dt_type"):
        yield role


async def test_update_field_type_changes(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await create_data_table(
        conn,
        schema,
        [
            {"title": "数量", "uidt": "文本"},
            {"title": "金额", "uidt": "数字"},
            {"title": "标签", "uidt": "文本"},
            {"title": "完成", "uidt": "文本"},
        ],
    )
    await conn.execute(
        f'INSERT INTO "{schema}"."数据" ("数量", "金额", "标签", "完成") VALUES '
        "($1, $2, $3, $4), ($5, $6, $7, $8), (NULL, NULL, NULL, NULL)",
        " 12 ",
        3,
        "红, 蓝",
        "true",
        "",
        4.5,
        "蓝",
        "no",
    )
    result = await structure_fields.update_field(conn, schema, table_id, "数量", {"uidt": "整数"})
    assert result["uidt"] == "整数"
    await structure_fields.update_field(conn, schema, table_id, "完成", {"type": "checkbox"})
    await structure_fields.update_field(conn, schema, table_id, "标签", {"uidt": "多选", "options": ["红", "蓝", "绿"]})
    await structure_fields.update_field(conn, schema, table_id, "金额", {"uidt": "金额"})
    types = await column_types(conn, schema, "数据")
    assert types["数量"] == "bigint" and types["完成"] == "boolean"
    assert types["标签"] == "text[]" and types["金额"] == "numeric(18,2)"
    rows = await conn.fetch(f'SELECT "数量", "金额", "标签", "完成" FROM "{schema}"."数据" ORDER BY id')
    assert [tuple(r) for r in rows] == [
        (12, pytest.approx(3), ["红", "蓝"], True),
        (None, pytest.approx(4.5), ["蓝"], False),
        (None, None, None, None),
    ]
    columns = {c["title"]: c for c in await store_schema.list_columns(conn, schema, table_id)}
    assert columns["金额"]["precision"] == 18 and columns["金额"]["scale"] == 2
    assert columns["标签"]["options"] == ["红", "蓝", "绿"]

    # back to text: 多选 joins with commas, precision is dropped
    back = await structure_fields.update_field(conn, schema, table_id, "标签", {"uidt": "文本"})
    assert back["options"] == [] and back["precision"] is None
    assert await conn.fetchval(f'SELECT "标签" FROM "{schema}"."数据" ORDER BY id LIMIT 1') == "红,蓝"
    back = await structure_fields.update_field(conn, schema, table_id, "金额", {"uidt": "文本"})
    assert back["precision"] is None and back["scale"] is None
    assert await conn.fetchval(f'SELECT "金额" FROM "{schema}"."数据" ORDER BY id LIMIT 1') == "3"


async def test_failing_type_change_leaves_table_unchanged(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await create_data_table(
        conn, schema, [{"title": "数量", "uidt": "文本"}, {"title": "小数", "uidt": "数字"}]
    )
    await conn.executemany(
        f'INSERT INTO "{schema}"."数据" ("数量", "小数") VALUES ($1, $2)',
        [("1", 1), ("两个", 10.5), ("3万", 20), ("4", 22.25)],
    )
    before_types = await column_types(conn, schema, "数据")
    before_columns = await store_schema.list_columns(conn, schema, table_id)

    with pytest.raises(StoreError) as info:
        await structure_fields.update_field(conn, schema, table_id, "数量", {"uidt": "整数", "title": "件数"})
    message = str(info.value)
    assert "2 row(s)" in message and "row ids 2, 3" in message
    assert info.value.error_type == "recoverable" and info.value.need_param == "patch"

    with pytest.raises(StoreError, match="2 row"):
        await structure_fields.update_field(
            conn, schema, table_id, "小数", {"uidt": "整数"}
        )  # 10.5 and 22.25 are not whole
    with pytest.raises(StoreError, match="1 row"):
        await structure_fields.update_field(
            conn, schema, table_id, "数量", {"uidt": "单选", "options": ["1", "4", "两个"]}
        )
    with pytest.raises(StoreError, match="3 row"):
        await structure_fields.update_field(
            conn, schema, table_id, "小数", {"precision": 2, "scale": 1}
        )  # 10+ overflows
    with pytest.raises(StoreError):
        await structure_fields.update_field(conn, schema, table_id, "数量", {"uidt": "JSON"})

    assert await column_types(conn, schema, "数据") == before_types
    assert await store_schema.list_columns(conn, schema, table_id) == before_columns
    assert [r["数量"] for r in await conn.fetch(f'SELECT "数量" FROM "{schema}"."数据" ORDER BY id')] == [
        "1",
        "两个",
        "3万",
        "4",
    ]


async def test_smaller_scale_rounds_like_writes(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await create_data_table(conn, schema, [{"title": "值", "uidt": "数字", "precision": 10, "scale": 3}])
    await conn.execute(f'INSERT INTO "{schema}"."数据" ("值") VALUES (2.125)')
    await structure_fields.update_field(conn, schema, table_id, "值", {"scale": 2})
    assert str(await conn.fetchval(f'SELECT "值" FROM "{schema}"."数据"')) == "2.13"


async def test_removing_used_options_is_refused(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await create_data_table(
        conn,
        schema,
        [
            {"title": "部门", "uidt": "单选", "options": ["研发", "销售"]},
            {"title": "技能", "uidt": "多选", "options": ["a", "b"]},
        ],
    )
    await conn.execute(f'INSERT INTO "{schema}"."数据" ("部门", "技能") VALUES ($1, $2)', "销售", ["b"])
    with pytest.raises(StoreError, match="1 row"):
        await structure_fields.update_field(conn, schema, table_id, "部门", {"options": ["研发"]})
    with pytest.raises(StoreError, match="1 row"):
        await structure_fields.update_field(conn, schema, table_id, "技能", {"options": ["a"]})
    updated = await structure_fields.update_field(conn, schema, table_id, "部门", {"options": ["研发", "销售", "市场"]})
    assert updated["options"] == ["研发", "销售", "市场"]
    updated = await structure_fields.update_field(conn, schema, table_id, "部门", {"uidt": "多选"})
    assert updated["options"] == ["研发", "销售", "市场"]
    assert await conn.fetchval(f'SELECT "部门" FROM "{schema}"."数据"') == ["销售"]


async def test_refused_change_leaves_type_data_and_metadata_unchanged(conn: asyncpg.Connection, schema: str) -> None:
    table = await store_table(conn, schema, title="数据", fields=[{"title": "日", "uidt": "文本"}])
    values = ["2026-03-01", "tomorrow", None, "03/04/2026", "tomorrow", "2026-03-01 10:00"]
    await insert_raw(conn, table, "日", values)
    before = await store_schema.list_columns(conn, schema, table.id)
    async with conn.transaction():  # the caller's transaction (the session's) survives the refusal
        with pytest.raises(StoreError) as info:
            await structure_fields.update_field(conn, schema, table.id, "日", {"uidt": "日期", "title": "日子"})
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
    table = await store_table(conn, schema, title="数据", fields=[{"title": "值", "uidt": "文本"}])
    await insert_raw(conn, table, "值", ["", value, None])
    with pytest.raises(StoreError) as info:
        await structure_fields.update_field(conn, schema, table.id, "值", patch)
    message = str(info.value)
    assert "1 row(s)" in message and "row ids 2)" in message and repr(value) in message and reason in message
    assert await column_type(conn, table, "值") == "text"
    assert await column_values(conn, table, "值") == ["", value, None]


async def test_non_text_sources_are_checked_by_the_converter_too(conn: asyncpg.Connection, schema: str) -> None:
    """A 日期时间 → 日期 change keeps no time of day silently: a 日期 write refuses a date-time."""
    table = await store_table(
        conn, schema, title="数据", fields=[{"title": "时刻", "uidt": "日期时间"}, {"title": "数", "uidt": "数字"}]
    )
    await conn.execute(
        f'INSERT INTO {table.qualified} ("时刻", "数") VALUES ($1, 2.5), (NULL, 3)', utc("2026-03-01 10:30")
    )
    with pytest.raises(StoreError, match="1 row"):
        await structure_fields.update_field(conn, schema, table.id, "时刻", {"uidt": "日期"})
    with pytest.raises(StoreError, match=r"1 row.*has decimals"):
        await structure_fields.update_field(conn, schema, table.id, "数", {"uidt": "整数"})
    assert await column_type(conn, table, "时刻") == "timestamp with time zone"
    assert await column_type(conn, table, "数") == "numeric(38,2)"


@pytest.mark.parametrize("time_zone", ["UTC", "Asia/Shanghai"])
@pytest.mark.parametrize(("patch", "values"), ACCEPTED, ids=[p["uidt"] for p, _ in ACCEPTED])
async def test_accepted_values_are_stored_as_writes_store_them(
    conn: asyncpg.Connection, schema: str, patch: dict[str, Any], values: list[str], time_zone: str
) -> None:
    """The column afterwards equals a column of the new type the same texts were written to through insert_batch.

    In Asia/Shanghai PostgreSQL's own cast would read a naive date-time as local time; writes read it as UTC."""
    await conn.execute(f"SET TIME ZONE '{time_zone}'")
    table = await store_table(
        conn, schema, title="数据", fields=[{"title": "旧", "uidt": "文本"}, {"title": "对照", **patch}]
    )
    written = await rows_write.insert_batch(conn, table, [{"旧": v, "对照": v} for v in values])
    assert written["inserted"] == len(values), written
    await insert_raw(conn, table, "旧", ["", "  ", None])  # writes store empty as NULL (such rows are skipped)
    changed = await structure_fields.update_field(conn, schema, table.id, "旧", patch)
    assert changed["uidt"] == patch["uidt"]
    rows = await conn.fetch(f'SELECT "旧", "对照", "旧" IS NOT DISTINCT FROM "对照" AS same FROM {table.qualified}')
    assert all(r["same"] for r in rows), [tuple(r) for r in rows]
    assert await column_type(conn, table, "旧") == await column_type(conn, table, "对照")
    assert await leftovers(conn) == 0


async def test_non_text_sources_are_stored_as_writes_store_them(conn: asyncpg.Connection, schema: str) -> None:
    """A 日期 becomes midnight UTC, as a write of the same date to a 日期时间 field (not the session's midnight)."""
    await conn.execute("SET TIME ZONE 'America/New_York'")
    fields = [{"title": "日", "uidt": "日期"}, {"title": "金额", "uidt": "金额"}, {"title": "数", "uidt": "整数"}]
    table = await store_table(conn, schema, title="数据", fields=fields)
    await rows_write.insert_batch(conn, table, [{"日": "2026-03-01", "金额": "12.00", "数": 1}, {"数": 0}])
    await structure_fields.update_field(conn, schema, table.id, "日", {"uidt": "日期时间"})
    await structure_fields.update_field(conn, schema, table.id, "金额", {"uidt": "整数"})
    await structure_fields.update_field(conn, schema, table.id, "数", {"uidt": "勾选"})
    rows = await conn.fetch(f'SELECT "日", "金额", "数" FROM {table.qualified} ORDER BY id')
    assert [tuple(r) for r in rows] == [(utc("2026-03-01 00:00"), 12, True), (None, None, False)]


async def test_same_column_type_is_normalized_in_place(conn: asyncpg.Connection, schema: str) -> None:
    table = await store_table(
        conn, schema, title="数据", fields=[{"title": "邮箱", "uidt": "文本"}, {"title": "备注", "uidt": "文本"}]
    )
    await conn.execute(
        f"INSERT INTO {table.qualified} (\"邮箱\", \"备注\") VALUES (' a@b.cn ', 'x'), ('c@d.cn', 'y'), ('  ', 'z')"
    )
    xmin_before = await conn.fetch(f"SELECT xmin::text AS x FROM {table.qualified} ORDER BY id")
    await structure_fields.update_field(conn, schema, table.id, "邮箱", {"uidt": "邮箱"})
    assert await column_values(conn, table, "邮箱") == ["a@b.cn", "c@d.cn", None]
    xmin_after = await conn.fetch(f"SELECT xmin::text AS x FROM {table.qualified} ORDER BY id")
    assert xmin_after[1] == xmin_before[1]  # a row that already held the stored form is not rewritten


async def test_values_that_collide_after_conversion_in_a_unique_field_are_refused(
    conn: asyncpg.Connection, schema: str
) -> None:
    table = await store_table(conn, schema, title="数据", fields=[{"title": "编号", "uidt": "文本", "unique": True}])
    await insert_raw(conn, table, "编号", ["1,200", "1200", "7"])
    with pytest.raises(StoreError, match="existing values do not convert"):
        await structure_fields.update_field(conn, schema, table.id, "编号", {"uidt": "整数"})
    assert await column_values(conn, table, "编号") == ["1,200", "1200", "7"]
    assert await column_type(conn, table, "编号") == "text"


async def test_long_values_are_mapped_and_shown_short(conn: asyncpg.Connection, schema: str) -> None:
    """Values far over a B-tree key's ~2.7 kB convert, and a refused one is cut short in the message."""
    table = await store_table(conn, schema, title="数据", fields=[{"title": "扩展", "uidt": "长文本"}])
    document = json.dumps({"items": [uuid.uuid4().hex for _ in range(400)]}, separators=(",", ":"))
    await insert_raw(conn, table, "扩展", [document, "x" * 20000])
    with pytest.raises(StoreError) as info:
        await structure_fields.update_field(conn, schema, table.id, "扩展", {"uidt": "JSON"})
    assert "1 row(s)" in str(info.value) and "'xxxx" in str(info.value) and len(str(info.value)) < 1000
    await conn.execute(f"UPDATE {table.qualified} SET \"扩展\" = '[]' WHERE id = 2")
    await structure_fields.update_field(conn, schema, table.id, "扩展", {"uidt": "JSON"})
    assert await column_values(conn, table, "扩展") == [json.dumps(json.loads(document), ensure_ascii=False), "[]"]


async def test_null_and_empty_values_become_null(conn: asyncpg.Connection, schema: str) -> None:
    table = await store_table(
        conn,
        schema,
        title="数据",
        fields=[{"title": "数", "uidt": "文本"}, {"title": "日", "uidt": "文本"}, {"title": "空", "uidt": "文本"}],
    )
    await conn.executemany(
        f'INSERT INTO {table.qualified} ("数", "日", "空") VALUES ($1, $2, $3)',
        [(None, None, None), ("", "", ""), ("   ", " \t ", "\u3000"), ("5", "2026-03-01", None)],
    )
    await structure_fields.update_field(conn, schema, table.id, "数", {"uidt": "整数"})
    await structure_fields.update_field(conn, schema, table.id, "日", {"uidt": "日期"})
    await structure_fields.update_field(conn, schema, table.id, "空", {"uidt": "多选", "options": ["a"]})
    rows = await conn.fetch(f'SELECT "数", "日", "空" FROM {table.qualified} ORDER BY id')
    assert [r["数"] for r in rows] == [None, None, None, 5]
    assert [str(r["日"]) if r["日"] else None for r in rows] == [None, None, None, "2026-03-01"]
    assert [r["空"] for r in rows] == [None, None, None, None]


async def test_twenty_thousand_rows_in_several_batches(conn: asyncpg.Connection, schema: str) -> None:
    """15,000 distinct values (more than one batch of the cursor); '1,234' forms need the mapping, not the cast."""
    table = await store_table(conn, schema, title="数据", fields=[{"title": "数", "uidt": "文本"}])
    await conn.execute(
        f"""INSERT INTO {table.qualified} ("数")
            SELECT CASE WHEN g % 2 = 0 THEN to_char(g % 15000, 'FM999,999') ELSE (g % 15000)::text END
            FROM generate_series(1, 20000) g"""
    )
    await conn.execute(f"UPDATE {table.qualified} SET \"数\" = 'zwölf' WHERE id IN (17000, 19999)")
    with pytest.raises(StoreError) as info:
        await structure_fields.update_field(conn, schema, table.id, "数", {"uidt": "整数"})
    assert "2 row(s)" in str(info.value) and "row ids 17000, 19999" in str(info.value), str(info.value)
    assert await column_type(conn, table, "数") == "text"
    await conn.execute(f'UPDATE {table.qualified} SET "数" = NULL WHERE id IN (17000, 19999)')
    await structure_fields.update_field(conn, schema, table.id, "数", {"uidt": "整数"})
    wrong = await conn.fetchval(
        f'SELECT count(*) FROM {table.qualified} WHERE "数" IS DISTINCT FROM '
        "CASE WHEN id IN (17000, 19999) THEN NULL ELSE id % 15000 END"
    )
    assert wrong == 0 and await column_type(conn, table, "数") == "bigint"


async def test_rows_hidden_by_row_level_security_are_checked_and_converted(
    conn: asyncpg.Connection, schema: str, owner_role: str
) -> None:
    table = await store_table(
        conn, schema, title="数据", fields=[{"title": "负责人", "uidt": "文本"}, {"title": "数", "uidt": "文本"}]
    )
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
            await structure_fields.update_field(conn, schema, table.id, "数", patch)
            # the actor's view is back afterwards
            assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified}") == 1

    with pytest.raises(StoreError, match=r"1 row.*'x'"):
        await as_owner_of_e1({"uidt": "整数"})
    await conn.execute(f"UPDATE {table.qualified} SET \"数\" = '3' WHERE \"数\" = 'x'")
    await as_owner_of_e1({"uidt": "整数"})
    assert await column_values(conn, table, "数") == [1, 2000, 3]


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.5")
@pytest.mark.spec("§3.5")
@pytest.mark.parametrize(
    ("value", "new_type"),
    [
        ("tomorrow", "日期"),
        ("03/04/2026", "日期"),
        ("now", "日期时间"),
        ("NaN", "数字"),
        ("not-an-email", "邮箱"),
        ("example.com", "链接"),
    ],
)
async def test_type_change_does_not_silently_convert_values_writes_would_refuse(
    yard: SkillYard, org: str, conn: Any, value: str, new_type: str
) -> None:
    """§7.5: dates are ISO, numbers are digits (NaN is "not a number" on every write), e-mails and links are
    checked. docs: "A change the existing values cannot take is refused with the number of rows in the way." A
    confirmed type change must not turn 'tomorrow' into a date, read 03/04/2026 as March 4th, store NaN or keep an
    invalid e-mail in a 邮箱 field."""
    ctx = context(org)
    made = await run(yard, ctx, "create_table", table_name="杂项", fields=[{"title": "值", "uidt": "文本"}])
    assert (await run(yard, ctx, "insert", table_id=made["id"], data={"值": value}))["ok"]
    write = await run(yard, ctx, "add_field", table_id=made["id"], field={"title": "对照", "uidt": new_type})
    assert write["ok"]
    refused_on_write = await run(yard, ctx, "insert", table_id=made["id"], data={"对照": value})
    assert refused_on_write["ok"] is False, refused_on_write  # the write rules of the new type refuse the value
    env = await run(
        yard, ctx, "update_field", table_id=made["id"], field_title="值", patch={"uidt": new_type}, 确认=True
    )
    stored = await conn.fetchval(f'SELECT "值"::text FROM org_data_{org}."杂项" ORDER BY id LIMIT 1')
    assert env["ok"] is False and env["error_type"] == "recoverable", (
        f"{value!r} → {new_type}: the change was applied and the value is now {stored!r}"
    )
    assert (await columns(yard, org, made["id"]))["值"]["uidt"] == "文本" and stored == value


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.5")
@pytest.mark.spec("§3.5")
async def test_type_change_converts_values_that_fit(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="转换",
        fields=[
            {"title": "日", "uidt": "文本"},
            {"title": "数", "uidt": "数字"},
            {"title": "签", "uidt": "文本"},
            {"title": "城", "uidt": "单选", "options": ["上海", "北京"]},
        ],
    )
    tid = made["id"]
    assert (
        await run(yard, ctx, "insert", table_id=tid, data={"日": "2026-03-01", "数": 12, "签": "红、绿", "城": "上海"})
    )["ok"]
    for title, patch in [
        ("日", {"uidt": "日期"}),
        ("数", {"uidt": "整数"}),
        ("签", {"uidt": "多选", "options": ["红", "绿", "蓝"]}),
        ("城", {"uidt": "多选"}),
    ]:
        env = await run(yard, ctx, "update_field", table_id=tid, field_title=title, patch=patch, 确认=True)
        assert env["ok"] and env["uidt"] == patch["uidt"], (title, env)
    row = (await run(yard, ctx, "query", table_id=tid))["list"][0]
    assert (row["日"], row["数"], row["签"], row["城"]) == ("2026-03-01", 12, ["红", "绿"], ["上海"]), row


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.5")
@pytest.mark.spec("§3.5")
async def test_failed_type_change_with_rename_changes_nothing(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org)
    env = await run(
        yard,
        ctx,
        "update_field",
        table_id=table_id,
        field_title="姓名",
        patch={"title": "名字", "uidt": "整数"},
        确认=True,
    )
    assert env["ok"] is False and env["error_type"] == "recoverable" and env["need_param"] == "patch", env
    assert "3" in env["error"]  # the number of rows in the way
    dupes = await run(
        yard, ctx, "update_field", table_id=table_id, field_title="城市", patch={"title": "地", "unique": True}
    )
    assert dupes["ok"] is False, dupes
    cols = await columns(yard, org, table_id)
    assert list(cols) == ["姓名", "工号", "城市", "金额"] and cols["城市"]["unique"] is False
    assert await count(conn, org, where="WHERE 城市 = '上海'") == 3
