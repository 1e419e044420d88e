"""Field structure (structure/fields.py, spec §7.1, §7.3): add_field, update_field and delete_field."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.store.schema import StoreError
from skillyard.builtin_skills.datatable.structure import fields as structure_fields

from skillyard import SkillYard
from support.datatable import context, count, make_table, run
from support.datatable.structure import column_types, create_data_table, expected_columns, unique_columns


async def test_add_field(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await create_data_table(conn, schema, [{"title": "名称", "uidt": "文本"}])
    await conn.execute(f'INSERT INTO "{schema}"."数据" ("名称") VALUES ($1)', "x")
    added = await structure_fields.add_field(
        conn, schema, table_id, {"title": "编号", "type": "integer", "unique": True}
    )
    assert added == expected_columns([{"title": "编号", "uidt": "整数", "unique": True}])[0]
    await structure_fields.add_field(
        conn, schema, table_id, {"title": "状态", "uidt": "单选", "options": "开,关", "required": True}
    )
    columns = await store_schema.list_columns(conn, schema, table_id)
    assert [c["title"] for c in columns] == ["名称", "编号", "状态"]
    assert columns[2]["options"] == ["开", "关"] and columns[2]["required"] is True
    types = await column_types(conn, schema, "数据")
    assert types["编号"] == "bigint" and types["状态"] == "text"
    assert await unique_columns(conn, schema, "数据") == {"编号"}

    with pytest.raises(StoreError, match="already has a field"):
        await structure_fields.add_field(conn, schema, table_id, {"title": "名称", "uidt": "整数"})
    with pytest.raises(StoreError) as info:
        await structure_fields.add_field(conn, schema, table_id, {"title": "a%", "uidt": "整数"})
    assert info.value.need_param == "field"
    with pytest.raises(StoreError):
        await structure_fields.add_field(conn, schema, table_id, {"title": "id", "uidt": "整数"})
    assert len(await store_schema.list_columns(conn, schema, table_id)) == 3


async def test_update_field_rename_and_flags(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await create_data_table(
        conn, schema, [{"title": "名称", "uidt": "文本"}, {"title": "编码", "uidt": "文本"}]
    )
    await conn.execute(f'INSERT INTO "{schema}"."数据" ("名称", "编码") VALUES ($1, $2), ($3, $4)', "a", "1", "b", "2")
    updated = await structure_fields.update_field(
        conn, schema, table_id, "编码", {"title": "代码", "unique": True, "required": 1}
    )
    assert updated["title"] == "代码" and updated["unique"] is True and updated["required"] is True
    assert (await column_types(conn, schema, "数据"))["代码"] == "text"
    assert await unique_columns(conn, schema, "数据") == {"代码"}
    assert await conn.fetchval(f'SELECT "代码" FROM "{schema}"."数据" WHERE "名称" = $1', "b") == "2"

    # the constraint follows renames and can be dropped again
    await structure_fields.update_field(conn, schema, table_id, "代码", {"name": "标识"})
    await structure_fields.update_field(conn, schema, table_id, "标识", {"unique": False})
    assert await unique_columns(conn, schema, "数据") == set()
    assert [c["title"] for c in await store_schema.list_columns(conn, schema, table_id)] == ["名称", "标识"]

    with pytest.raises(StoreError, match="already has a field"):
        await structure_fields.update_field(conn, schema, table_id, "标识", {"title": "名称"})
    with pytest.raises(StoreError) as info:
        await structure_fields.update_field(conn, schema, table_id, "不存在", {"required": True})
    assert info.value.need_param == "field_title" and "名称" in str(info.value)
    with pytest.raises(StoreError) as info:
        await structure_fields.update_field(conn, schema, table_id, "名称", {})
    assert info.value.need_param == "patch"
    with pytest.raises(StoreError, match="unknown key"):
        await structure_fields.update_field(conn, schema, table_id, "名称", {"colour": "red"})


async def test_update_field_unique_with_duplicates_is_refused(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await create_data_table(conn, schema, [{"title": "名称", "uidt": "文本"}])
    await conn.execute(f'INSERT INTO "{schema}"."数据" ("名称") VALUES ($1), ($1), ($2)', "a", "b")
    with pytest.raises(StoreError, match="1 value"):
        await structure_fields.update_field(conn, schema, table_id, "名称", {"unique": True, "title": "新名"})
    assert (await store_schema.list_columns(conn, schema, table_id))[0]["unique"] is False
    assert "名称" in await column_types(conn, schema, "数据")


async def test_delete_field(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await create_data_table(
        conn, schema, [{"title": "名称", "uidt": "文本"}, {"title": "备注", "uidt": "长文本", "unique": True}]
    )
    assert await structure_fields.delete_field(conn, schema, table_id, "备注") == {"deleted": True, "field": "备注"}
    assert [c["title"] for c in await store_schema.list_columns(conn, schema, table_id)] == ["名称"]
    assert "备注" not in await column_types(conn, schema, "数据")
    with pytest.raises(StoreError) as info:
        await structure_fields.delete_field(conn, schema, table_id, "备注")
    assert info.value.need_param == "field_title"
    # a new field after a delete goes last
    await structure_fields.add_field(conn, schema, table_id, {"title": "备注", "uidt": "文本"})
    assert [c["title"] for c in await store_schema.list_columns(conn, schema, table_id)] == ["名称", "备注"]


@pytest.mark.spec("§7.1")
@pytest.mark.spec("§7.5")
async def test_add_field_with_type_alias_returns_the_definition(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    added = await run(yard, ctx, "add_field", table_id=table_id, field={"title": "比例", "type": "percent"})
    assert added["ok"], added
    assert (added["title"], added["uidt"], added["precision"], added["scale"]) == ("比例", "数字", 12, 4)


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.5")
@pytest.mark.spec("§3.5")
async def test_add_required_unique_field_to_a_table_with_rows(yard: SkillYard, org: str, conn: Any) -> None:
    """§7.5: required is checked on insert only — adding a required field keeps the old rows writable."""
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org)
    added = await run(
        yard,
        ctx,
        "add_field",
        table_id=table_id,
        field={"title": "编号", "uidt": "文本", "required": True, "unique": True},
    )
    assert added["ok"] and added["required"] is True and added["unique"] is True, added
    assert await count(conn, org, where="WHERE 编号 IS NULL") == 3
    old = await run(yard, ctx, "update", table_id=table_id, row_id=1, data={"城市": "北京"})
    assert old["ok"], old
    new = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "新"})
    assert new["ok"] is False and "编号" in new["error"], new
    ok = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "新", "编号": "N1"})
    dup = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "新2", "编号": "N1"})
    assert ok["ok"] and dup["ok"] is False and dup["error_type"] == "recoverable", (ok, dup)
