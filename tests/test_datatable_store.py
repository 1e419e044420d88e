"""The datatable skill's storage model and structure actions against a real PostgreSQL (spec §7.1, §7.3)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest

from support.datatable import asyncpg_dsn, load_datatable_module

store_fields = load_datatable_module("store_fields")
store_schema = load_datatable_module("store_schema")
store_tables = load_datatable_module("store_tables")
StoreError = store_schema.StoreError

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


@pytest.fixture
def schema() -> str:
    return store_schema.schema_for("Org-" + uuid.uuid4().hex[:12])


async def column_types(conn: asyncpg.Connection, schema: str, table: str) -> dict[str, str]:
    rows = await conn.fetch(
        """SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
           WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum""",
        f"{store_schema.quote_ident(schema)}.{store_schema.quote_ident(table)}",
    )
    return {r["attname"]: r["type"] for r in rows}


async def unique_columns(conn: asyncpg.Connection, schema: str, table: str) -> set[str]:
    rows = await conn.fetch(
        """SELECT a.attname FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
           WHERE c.conrelid = $1::regclass AND c.contype = 'u'""",
        f"{store_schema.quote_ident(schema)}.{store_schema.quote_ident(table)}",
    )
    return {r["attname"] for r in rows}


def expected_columns(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    field_types = load_datatable_module("field_types")
    return [field_types.parse_field(s).as_dict() for s in specs]


# --------------------------------------------------------------------------------------------------------------------
# Schema


def test_schema_naming() -> None:
    assert store_schema.schema_for("Org-42_AB") == "org_data_org42ab"
    assert store_schema.schema_for("abc") == "org_data_abc"
    assert store_schema.schema_for("组织-7") == "org_data_7"
    assert store_schema.schema_for(123) == "org_data_123"


@pytest.mark.parametrize("org", ["", "   ", None, "---", "组织"])
def test_blank_org_is_a_config_error(org: Any) -> None:
    with pytest.raises(StoreError) as info:
        store_schema.schema_for(org)
    assert info.value.error_type == "config"
    assert info.value.non_retriable is True
    assert "org_id" in str(info.value)


def test_too_long_org_is_refused() -> None:
    with pytest.raises(StoreError) as info:
        store_schema.schema_for("a" * 60)
    assert info.value.error_type == "config"


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


# --------------------------------------------------------------------------------------------------------------------
# Tables


async def test_create_table_every_type(conn: asyncpg.Connection, schema: str) -> None:
    created = await store_tables.create_table(conn, schema, "员工", ALL_FIELDS)
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
    first = await store_tables.create_table(conn, schema, "客户", [{"title": "名称", "uidt": "文本"}])
    again = await store_tables.create_table(conn, schema, " 客户 ", [{"title": "别的", "uidt": "整数"}])
    assert again == {"id": first["id"], "title": "客户", "already_exists": True}
    assert await store_schema.list_columns(conn, schema, first["id"]) == expected_columns(
        [{"title": "名称", "uidt": "文本"}]
    )


async def test_create_table_concurrently_same_title(database_url: str, schema: str) -> None:
    connections = [await asyncpg.connect(asyncpg_dsn(database_url)) for _ in range(4)]
    try:
        results = await asyncio.gather(
            *(store_tables.create_table(c, schema, "订单", [{"title": "金额", "uidt": "金额"}]) for c in connections)
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
        await store_tables.create_table(conn, schema, title, fields)
    assert info.value.error_type == "recoverable"
    assert info.value.non_retriable is False
    assert info.value.need_param == param
    assert await store_schema.list_tables(conn, schema) == []


async def test_create_table_with_unregistered_table_of_same_name(conn: asyncpg.Connection, schema: str) -> None:
    await store_schema.ensure_schema(conn, schema)
    await conn.execute(f'CREATE TABLE "{schema}"."手建" (x int)')
    with pytest.raises(StoreError, match="not registered"):
        await store_tables.create_table(conn, schema, "手建", [{"title": "a", "uidt": "文本"}])


async def test_create_table_rolls_back_as_a_whole(conn: asyncpg.Connection, schema: str) -> None:
    """Inside an outer transaction a failed create leaves neither table nor metadata behind."""
    await store_schema.ensure_schema(conn, schema)
    async with conn.transaction():
        await store_tables.create_table(conn, schema, "甲", [{"title": "a", "uidt": "文本"}])
        with pytest.raises(StoreError):
            await store_tables.create_table(conn, schema, "乙", [{"title": "a", "uidt": "单选"}])
    assert [t["title"] for t in await store_schema.list_tables(conn, schema)] == ["甲"]


# --------------------------------------------------------------------------------------------------------------------
# Resolve


async def test_resolve_table(conn: asyncpg.Connection, schema: str) -> None:
    a = await store_tables.create_table(conn, schema, "项目", [{"title": "名称", "uidt": "文本"}])
    b = await store_tables.create_table(conn, schema, "Project", [{"title": "name", "uidt": "文本"}])
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
    other = store_schema.schema_for("other" + uuid.uuid4().hex[:8])
    created = await store_tables.create_table(conn, schema, "员工", [{"title": "名称", "uidt": "文本"}])
    await store_schema.ensure_schema(conn, other)
    assert await store_schema.list_tables(conn, other) == []
    with pytest.raises(StoreError):
        await store_schema.resolve_table(conn, other, table_id=created["id"])


# --------------------------------------------------------------------------------------------------------------------
# Fields


async def _table(conn: asyncpg.Connection, schema: str, fields: list[dict[str, Any]]) -> str:
    created = await store_tables.create_table(conn, schema, "数据", fields)
    return str(created["id"])


async def test_add_field(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await _table(conn, schema, [{"title": "名称", "uidt": "文本"}])
    await conn.execute(f'INSERT INTO "{schema}"."数据" ("名称") VALUES ($1)', "x")
    added = await store_fields.add_field(conn, schema, table_id, {"title": "编号", "type": "integer", "unique": True})
    assert added == expected_columns([{"title": "编号", "uidt": "整数", "unique": True}])[0]
    await store_fields.add_field(
        conn, schema, table_id, {"title": "状态", "uidt": "单选", "options": "开,关", "required": True}
    )
    columns = await store_schema.list_columns(conn, schema, table_id)
    assert [c["title"] for c in columns] == ["名称", "编号", "状态"]
    assert columns[2]["options"] == ["开", "关"] and columns[2]["required"] is True
    types = await column_types(conn, schema, "数据")
    assert types["编号"] == "bigint" and types["状态"] == "text"
    assert await unique_columns(conn, schema, "数据") == {"编号"}

    with pytest.raises(StoreError, match="already has a field"):
        await store_fields.add_field(conn, schema, table_id, {"title": "名称", "uidt": "整数"})
    with pytest.raises(StoreError) as info:
        await store_fields.add_field(conn, schema, table_id, {"title": "a%", "uidt": "整数"})
    assert info.value.need_param == "field"
    with pytest.raises(StoreError):
        await store_fields.add_field(conn, schema, table_id, {"title": "id", "uidt": "整数"})
    assert len(await store_schema.list_columns(conn, schema, table_id)) == 3


async def test_update_field_rename_and_flags(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await _table(conn, schema, [{"title": "名称", "uidt": "文本"}, {"title": "编码", "uidt": "文本"}])
    await conn.execute(f'INSERT INTO "{schema}"."数据" ("名称", "编码") VALUES ($1, $2), ($3, $4)', "a", "1", "b", "2")
    updated = await store_fields.update_field(
        conn, schema, table_id, "编码", {"title": "代码", "unique": True, "required": 1}
    )
    assert updated["title"] == "代码" and updated["unique"] is True and updated["required"] is True
    assert (await column_types(conn, schema, "数据"))["代码"] == "text"
    assert await unique_columns(conn, schema, "数据") == {"代码"}
    assert await conn.fetchval(f'SELECT "代码" FROM "{schema}"."数据" WHERE "名称" = $1', "b") == "2"

    # the constraint follows renames and can be dropped again
    await store_fields.update_field(conn, schema, table_id, "代码", {"name": "标识"})
    await store_fields.update_field(conn, schema, table_id, "标识", {"unique": False})
    assert await unique_columns(conn, schema, "数据") == set()
    assert [c["title"] for c in await store_schema.list_columns(conn, schema, table_id)] == ["名称", "标识"]

    with pytest.raises(StoreError, match="already has a field"):
        await store_fields.update_field(conn, schema, table_id, "标识", {"title": "名称"})
    with pytest.raises(StoreError) as info:
        await store_fields.update_field(conn, schema, table_id, "不存在", {"required": True})
    assert info.value.need_param == "field_title" and "名称" in str(info.value)
    with pytest.raises(StoreError) as info:
        await store_fields.update_field(conn, schema, table_id, "名称", {})
    assert info.value.need_param == "patch"
    with pytest.raises(StoreError, match="unknown key"):
        await store_fields.update_field(conn, schema, table_id, "名称", {"colour": "red"})


async def test_update_field_unique_with_duplicates_is_refused(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await _table(conn, schema, [{"title": "名称", "uidt": "文本"}])
    await conn.execute(f'INSERT INTO "{schema}"."数据" ("名称") VALUES ($1), ($1), ($2)', "a", "b")
    with pytest.raises(StoreError, match="1 value"):
        await store_fields.update_field(conn, schema, table_id, "名称", {"unique": True, "title": "新名"})
    assert (await store_schema.list_columns(conn, schema, table_id))[0]["unique"] is False
    assert "名称" in await column_types(conn, schema, "数据")


async def test_update_field_type_changes(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await _table(
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
    result = await store_fields.update_field(conn, schema, table_id, "数量", {"uidt": "整数"})
    assert result["uidt"] == "整数"
    await store_fields.update_field(conn, schema, table_id, "完成", {"type": "checkbox"})
    await store_fields.update_field(conn, schema, table_id, "标签", {"uidt": "多选", "options": ["红", "蓝", "绿"]})
    await store_fields.update_field(conn, schema, table_id, "金额", {"uidt": "金额"})
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
    back = await store_fields.update_field(conn, schema, table_id, "标签", {"uidt": "文本"})
    assert back["options"] == [] and back["precision"] is None
    assert await conn.fetchval(f'SELECT "标签" FROM "{schema}"."数据" ORDER BY id LIMIT 1') == "红,蓝"
    back = await store_fields.update_field(conn, schema, table_id, "金额", {"uidt": "文本"})
    assert back["precision"] is None and back["scale"] is None
    assert await conn.fetchval(f'SELECT "金额" FROM "{schema}"."数据" ORDER BY id LIMIT 1') == "3"


async def test_failing_type_change_leaves_table_unchanged(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await _table(conn, schema, [{"title": "数量", "uidt": "文本"}, {"title": "小数", "uidt": "数字"}])
    await conn.executemany(
        f'INSERT INTO "{schema}"."数据" ("数量", "小数") VALUES ($1, $2)',
        [("1", 1), ("两个", 10.5), ("3万", 20), ("4", 22.25)],
    )
    before_types = await column_types(conn, schema, "数据")
    before_columns = await store_schema.list_columns(conn, schema, table_id)

    with pytest.raises(StoreError) as info:
        await store_fields.update_field(conn, schema, table_id, "数量", {"uidt": "整数", "title": "件数"})
    message = str(info.value)
    assert "2 row(s)" in message and "row ids 2, 3" in message
    assert info.value.error_type == "recoverable" and info.value.need_param == "patch"

    with pytest.raises(StoreError, match="2 row"):
        await store_fields.update_field(
            conn, schema, table_id, "小数", {"uidt": "整数"}
        )  # 10.5 and 22.25 are not whole
    with pytest.raises(StoreError, match="1 row"):
        await store_fields.update_field(conn, schema, table_id, "数量", {"uidt": "单选", "options": ["1", "4", "两个"]})
    with pytest.raises(StoreError, match="3 row"):
        await store_fields.update_field(conn, schema, table_id, "小数", {"precision": 2, "scale": 1})  # 10+ overflows
    with pytest.raises(StoreError):
        await store_fields.update_field(conn, schema, table_id, "数量", {"uidt": "JSON"})

    assert await column_types(conn, schema, "数据") == before_types
    assert await store_schema.list_columns(conn, schema, table_id) == before_columns
    assert [r["数量"] for r in await conn.fetch(f'SELECT "数量" FROM "{schema}"."数据" ORDER BY id')] == [
        "1",
        "两个",
        "3万",
        "4",
    ]


async def test_smaller_scale_rounds_like_writes(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await _table(conn, schema, [{"title": "值", "uidt": "数字", "precision": 10, "scale": 3}])
    await conn.execute(f'INSERT INTO "{schema}"."数据" ("值") VALUES (2.125)')
    await store_fields.update_field(conn, schema, table_id, "值", {"scale": 2})
    assert str(await conn.fetchval(f'SELECT "值" FROM "{schema}"."数据"')) == "2.13"


async def test_removing_used_options_is_refused(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await _table(
        conn,
        schema,
        [
            {"title": "部门", "uidt": "单选", "options": ["研发", "销售"]},
            {"title": "技能", "uidt": "多选", "options": ["a", "b"]},
        ],
    )
    await conn.execute(f'INSERT INTO "{schema}"."数据" ("部门", "技能") VALUES ($1, $2)', "销售", ["b"])
    with pytest.raises(StoreError, match="1 row"):
        await store_fields.update_field(conn, schema, table_id, "部门", {"options": ["研发"]})
    with pytest.raises(StoreError, match="1 row"):
        await store_fields.update_field(conn, schema, table_id, "技能", {"options": ["a"]})
    updated = await store_fields.update_field(conn, schema, table_id, "部门", {"options": ["研发", "销售", "市场"]})
    assert updated["options"] == ["研发", "销售", "市场"]
    updated = await store_fields.update_field(conn, schema, table_id, "部门", {"uidt": "多选"})
    assert updated["options"] == ["研发", "销售", "市场"]
    assert await conn.fetchval(f'SELECT "部门" FROM "{schema}"."数据"') == ["销售"]


async def test_delete_field(conn: asyncpg.Connection, schema: str) -> None:
    table_id = await _table(
        conn, schema, [{"title": "名称", "uidt": "文本"}, {"title": "备注", "uidt": "长文本", "unique": True}]
    )
    assert await store_fields.delete_field(conn, schema, table_id, "备注") == {"deleted": True, "field": "备注"}
    assert [c["title"] for c in await store_schema.list_columns(conn, schema, table_id)] == ["名称"]
    assert "备注" not in await column_types(conn, schema, "数据")
    with pytest.raises(StoreError) as info:
        await store_fields.delete_field(conn, schema, table_id, "备注")
    assert info.value.need_param == "field_title"
    # a new field after a delete goes last
    await store_fields.add_field(conn, schema, table_id, {"title": "备注", "uidt": "文本"})
    assert [c["title"] for c in await store_schema.list_columns(conn, schema, table_id)] == ["名称", "备注"]


async def test_delete_table(conn: asyncpg.Connection, schema: str) -> None:
    keep = await store_tables.create_table(conn, schema, "保留", [{"title": "a", "uidt": "文本"}])
    gone = await store_tables.create_table(
        conn, schema, "删除", [{"title": "a", "uidt": "文本"}, {"title": "b", "uidt": "整数"}]
    )
    assert await store_tables.delete_table(conn, schema, gone["id"]) is True
    assert [t["title"] for t in await store_schema.list_tables(conn, schema)] == ["保留"]
    assert await conn.fetchval("SELECT to_regclass($1)", f'"{schema}"."删除"') is None
    assert (
        await conn.fetchval(f'SELECT count(*) FROM "{schema}"."_dt_fields" WHERE table_id = $1', uuid.UUID(gone["id"]))
        == 0
    )
    assert len(await store_schema.list_columns(conn, schema, keep["id"])) == 1
    with pytest.raises(StoreError):
        await store_tables.delete_table(conn, schema, gone["id"])
    # the title can be used again
    again = await store_tables.create_table(conn, schema, "删除", [{"title": "c", "uidt": "日期"}])
    assert "already_exists" not in again


async def test_delete_table_with_dependent_view_is_refused(conn: asyncpg.Connection, schema: str) -> None:
    created = await store_tables.create_table(conn, schema, "源", [{"title": "a", "uidt": "文本"}])
    await conn.execute(f'CREATE VIEW "{schema}"."视图" AS SELECT "a" FROM "{schema}"."源"')
    with pytest.raises(StoreError, match="drop those views"):
        await store_tables.delete_table(conn, schema, created["id"])
    assert [t["title"] for t in await store_schema.list_tables(conn, schema)] == ["源"]


async def test_raw_connection_from_session(database_url: str, schema: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    engine = create_async_engine(database_url)
    try:
        async with AsyncSession(engine) as session:
            raw = await store_schema.raw_connection(session)
            assert isinstance(raw, asyncpg.Connection)
            created = await store_tables.create_table(raw, schema, "会话表", [{"title": "a", "uidt": "文本"}])
            await session.rollback()
        async with AsyncSession(engine) as session:
            raw = await store_schema.raw_connection(session)
            assert await store_schema.list_tables(raw, schema) == []
            created = await store_tables.create_table(raw, schema, "会话表", [{"title": "a", "uidt": "文本"}])
            await raw.execute(f'INSERT INTO "{schema}"."会话表" ("a") VALUES ($1), ($1)', "y")
            with pytest.raises(StoreError, match="2 row"):
                await store_fields.update_field(raw, schema, created["id"], "a", {"uidt": "单选", "options": ["x"]})
            with pytest.raises(StoreError, match="more than one row"):
                await store_fields.update_field(raw, schema, created["id"], "a", {"unique": True, "title": "b"})
            assert (await session.execute(text("SELECT 1"))).scalar() == 1  # the session is not aborted
            await session.commit()
        async with AsyncSession(engine) as session:
            raw = await store_schema.raw_connection(session)
            assert [t["id"] for t in await store_schema.list_tables(raw, schema)] == [created["id"]]
    finally:
        await engine.dispose()
