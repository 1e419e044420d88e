"""Table structure (structure/tables.py, spec §7.1, §7.3): create_table and delete_table."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.store.schema import StoreError
from skillyard.builtin_skills.datatable.structure import tables as structure_tables

from skillyard import SkillYard
from support.datatable import FIELDS, asyncpg_dsn, columns, context, count, make_table, run, titles
from support.datatable.structure import column_types, expected_columns, unique_columns

ALL_FIELDS: list[dict[str, Any]] = [
    {"title": "姓名", "uidt": "文本", "required": True},
    {"title": "简介", "uidt": "长文本"},
    {"title": "工号", "uidt": "整数", "unique": True},
    {"title": "薪资", "uidt": "金额"},
    {"title": "比例", "uidt": "百分比"},
    {"title": "精确值", "uidt": "高精度数字"},
    {"title": "分数", "uidt": "数字", "precision": 10, "scale": 3},
    {"title": "入职日期", "uidt": "日期"},
    {"title": "打卡时间", "uidt": "日期时间"},
    {"title": "上班时间", "uidt": "时间"},
    {"title": "在职", "uidt": "勾选"},
    {"title": "部门", "uidt": "单选", "options": ["研发", "销售"]},
    {"title": "技能", "uidt": "多选", "options": ["Python", "SQL"]},
    {"title": "邮箱", "uidt": "邮箱"},
    {"title": "电话", "uidt": "电话"},
    {"title": "主页", "uidt": "链接"},
    {"title": "扩展", "uidt": "JSON"},
]


EXPECTED_TYPES = {
    "id": "bigint",
    "created_at": "timestamp with time zone",
    "姓名": "text",
    "简介": "text",
    "工号": "bigint",
    "薪资": "numeric(18,2)",
    "比例": "numeric(12,4)",
    "精确值": "numeric(38,18)",
    "分数": "numeric(10,3)",
    "入职日期": "date",
    "打卡时间": "timestamp with time zone",
    "上班时间": "time without time zone",
    "在职": "boolean",
    "部门": "text",
    "技能": "text[]",
    "邮箱": "text",
    "电话": "text",
    "主页": "text",
    "扩展": "text",
}


async def test_create_table_every_type(conn: asyncpg.Connection, schema: str) -> None:
    created = await structure_tables.create_table(conn, schema, "员工", ALL_FIELDS)
    assert created["title"] == "员工"
    uuid.UUID(created["id"])
    assert "already_exists" not in created

    assert await column_types(conn, schema, "员工") == EXPECTED_TYPES
    assert await unique_columns(conn, schema, "员工") == {"工号"}
    primary = await conn.fetchval(
        """SELECT a.attname FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
           WHERE c.conrelid = $1::regclass AND c.contype = 'p'""",
        f'"{schema}"."员工"',
    )
    assert primary == "id"

    columns = await store_schema.list_columns(conn, schema, created["id"])
    assert columns == expected_columns(ALL_FIELDS)
    assert [c["title"] for c in columns] == [f["title"] for f in ALL_FIELDS]

    # the system columns work: id is generated, created_at defaults
    row = await conn.fetchrow(
        f'INSERT INTO "{schema}"."员工" ("姓名", "技能") VALUES ($1, $2) RETURNING id, created_at, "技能"',
        "张三",
        ["Python"],
    )
    assert row["id"] == 1 and row["created_at"] is not None and row["技能"] == ["Python"]

    listed = await store_schema.list_tables(conn, schema)
    assert listed == [
        {"id": created["id"], "title": "员工", "schema": schema, "qualified": f'"{schema}"."员工"'},
    ]


async def test_create_table_already_exists(conn: asyncpg.Connection, schema: str) -> None:
    first = await structure_tables.create_table(conn, schema, "客户", [{"title": "名称", "uidt": "文本"}])
    again = await structure_tables.create_table(conn, schema, " 客户 ", [{"title": "别的", "uidt": "整数"}])
    assert again == {"id": first["id"], "title": "客户", "already_exists": True}
    assert await store_schema.list_columns(conn, schema, first["id"]) == expected_columns(
        [{"title": "名称", "uidt": "文本"}]
    )


async def test_create_table_concurrently_same_title(database_url: str, schema: str) -> None:
    connections = [await asyncpg.connect(asyncpg_dsn(database_url)) for _ in range(4)]
    try:
        results = await asyncio.gather(
            *(
                structure_tables.create_table(c, schema, "订单", [{"title": "金额", "uidt": "金额"}])
                for c in connections
            )
        )
    finally:
        for c in connections:
            await c.close()
    assert len({r["id"] for r in results}) == 1
    assert sum(1 for r in results if not r.get("already_exists")) == 1


@pytest.mark.parametrize(
    ("title", "fields", "param"),
    [
        ("容差%", [{"title": "a", "uidt": "文本"}], "table_name"),
        ("1表", [{"title": "a", "uidt": "文本"}], "table_name"),
        ("", [{"title": "a", "uidt": "文本"}], "table_name"),
        ("_dt_tables", [{"title": "a", "uidt": "文本"}], "table_name"),
        ("表" * 22, [{"title": "a", "uidt": "文本"}], "table_name"),
        ("好表", [{"title": "容差%", "uidt": "数字"}], "fields"),
        ("好表", [{"title": "id", "uidt": "整数"}], "fields"),
        ("好表", [{"title": "created_at", "uidt": "日期时间"}], "fields"),
        ("好表", [{"title": "a", "uidt": "文本"}, {"title": "a", "uidt": "整数"}], "fields"),
        ("好表", [{"title": "a", "uidt": "未知"}], "fields"),
        ("好表", [{"title": "a", "uidt": "单选"}], "fields"),
        ("好表", "a", "fields"),
        ("好表", [{"title": f"f{i}", "uidt": "文本"} for i in range(store_schema.MAX_FIELDS + 1)], "fields"),
    ],
)
async def test_create_table_refusals(
    conn: asyncpg.Connection, schema: str, title: str, fields: Any, param: str
) -> None:
    with pytest.raises(StoreError) as info:
        await structure_tables.create_table(conn, schema, title, fields)
    assert info.value.error_type == "recoverable"
    assert info.value.non_retriable is False
    assert info.value.need_param == param
    assert await store_schema.list_tables(conn, schema) == []


async def test_create_table_with_unregistered_table_of_same_name(conn: asyncpg.Connection, schema: str) -> None:
    await store_schema.ensure_schema(conn, schema)
    await conn.execute(f'CREATE TABLE "{schema}"."手建" (x int)')
    with pytest.raises(StoreError, match="not registered"):
        await structure_tables.create_table(conn, schema, "手建", [{"title": "a", "uidt": "文本"}])


async def test_create_table_rolls_back_as_a_whole(conn: asyncpg.Connection, schema: str) -> None:
    """Inside an outer transaction a failed create leaves neither table nor metadata behind."""
    await store_schema.ensure_schema(conn, schema)
    async with conn.transaction():
        await structure_tables.create_table(conn, schema, "甲", [{"title": "a", "uidt": "文本"}])
        with pytest.raises(StoreError):
            await structure_tables.create_table(conn, schema, "乙", [{"title": "a", "uidt": "单选"}])
    assert [t["title"] for t in await store_schema.list_tables(conn, schema)] == ["甲"]


async def test_delete_table(conn: asyncpg.Connection, schema: str) -> None:
    keep = await structure_tables.create_table(conn, schema, "保留", [{"title": "a", "uidt": "文本"}])
    gone = await structure_tables.create_table(
        conn, schema, "删除", [{"title": "a", "uidt": "文本"}, {"title": "b", "uidt": "整数"}]
    )
    assert await structure_tables.delete_table(conn, schema, gone["id"]) is True
    assert [t["title"] for t in await store_schema.list_tables(conn, schema)] == ["保留"]
    assert await conn.fetchval("SELECT to_regclass($1)", f'"{schema}"."删除"') is None
    assert (
        await conn.fetchval(f'SELECT count(*) FROM "{schema}"."_dt_fields" WHERE table_id = $1', uuid.UUID(gone["id"]))
        == 0
    )
    assert len(await store_schema.list_columns(conn, schema, keep["id"])) == 1
    with pytest.raises(StoreError):
        await structure_tables.delete_table(conn, schema, gone["id"])
    # the title can be used again
    again = await structure_tables.create_table(conn, schema, "删除", [{"title": "c", "uidt": "日期"}])
    assert "already_exists" not in again


async def test_delete_table_with_dependent_view_is_refused(conn: asyncpg.Connection, schema: str) -> None:
    created = await structure_tables.create_table(conn, schema, "源", [{"title": "a", "uidt": "文本"}])
    await conn.execute(f'CREATE VIEW "{schema}"."视图" AS SELECT "a" FROM "{schema}"."源"')
    with pytest.raises(StoreError, match="drop those views"):
        await structure_tables.delete_table(conn, schema, created["id"])
    assert [t["title"] for t in await store_schema.list_tables(conn, schema)] == ["源"]


@pytest.mark.spec("§7.1")
@pytest.mark.spec("§7.5")
async def test_system_columns_cannot_be_defined(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    for title in ("id", "created_at"):
        env = await run(yard, ctx, "create_table", table_name="系统", fields=[{"title": title, "uidt": "文本"}])
        assert env["ok"] is False and env["error_type"] == "recoverable", env


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.spec("§7.8.7")
async def test_create_table_existing_title_returns_it_with_already_exists(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await run(yard, ctx, "create_table", table_name="客户", fields=FIELDS)
    assert made["ok"] and made.get("already_exists") in (None, False) and set(made) >= {"id", "title"}
    again = await run(yard, ctx, "create_table", table_name="客户", fields=[{"title": "别的", "uidt": "整数"}])
    assert again["ok"] and again["already_exists"] is True and again["id"] == made["id"] and again["title"] == "客户"
    cols = await run(yard, ctx, "list_columns", table_id=made["id"])
    assert [c["title"] for c in cols["data"]] == [f["title"] for f in FIELDS]


async def test_delete_table_then_recreate_same_title(yard: SkillYard, org: str, own_table: str) -> None:
    ctx = context(org)
    gone = await run(yard, ctx, "delete_table", table_id=own_table, 确认=True)
    assert gone["ok"] and gone["data"] is True, gone
    again = await run(yard, ctx, "create_table", table_name="客户", fields=FIELDS)
    assert again["ok"] and again["id"] != own_table and not again.get("already_exists"), again
    mine = await run(
        yard, context(org, actor_emp_no="E1"), "insert", table_id=again["id"], data={"姓名": "x", "工号": "E5"}
    )
    assert mine["ok"] and mine["data"]["工号"] == "E5", mine  # the old grant went with the old table


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.5")
@pytest.mark.spec("§3.5")
@pytest.mark.spec("§6.1")
async def test_a_view_over_a_table_never_makes_it_undeletable(yard: SkillYard, org: str, conn: Any) -> None:
    """§6.1: a recoverable error must carry a fix that works. With a view made on the SQL channel, delete_field and
    delete_table say "drop those views first"; DROP on the channel says "use the delete_table action"; delete_table
    does not know the view. Whatever the route (delete the view by name, or delete the table with its views after
    确认), the owner must be able to delete the table."""
    table_id = await make_table(yard, org, rows=2)
    ctx = context(org)
    assert (await run(yard, ctx, "sql_execute", sql="CREATE VIEW 客户视图 AS SELECT 姓名, 城市 FROM 客户"))["ok"]
    field = await run(yard, ctx, "delete_field", table_id=table_id, field_title="城市", 确认=True)
    assert field["ok"] is False and field["error_type"] == "recoverable", field  # nothing half-done
    assert "城市" in await columns(yard, org, table_id) and await count(conn, org) == 2
    assert "DROP VIEW" in field["error"], field  # the refusal names the way out
    blocked = await run(yard, ctx, "delete_table", table_id=table_id, 确认=True)
    assert blocked["ok"] is False and "DROP VIEW" in blocked["error"], blocked
    staff = await run(yard, context(org, team_role="member"), "sql_execute", sql="DROP VIEW 客户视图")
    assert staff["ok"] is False, staff  # a structure statement: owner/admin only
    cascade = await run(yard, ctx, "sql_execute", sql="DROP VIEW 客户视图 CASCADE")
    assert cascade["ok"] is False and cascade["error_code"] == "statement", cascade
    drop = await run(yard, ctx, "sql_execute", sql="DROP VIEW 客户视图")
    assert drop["ok"], drop
    base = await run(yard, ctx, "delete_table", table_id=table_id, 确认=True)
    assert base["ok"] and base["data"] is True, base
    assert "客户" not in await titles(yard, org)
