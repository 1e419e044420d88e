"""The datatable skill's row actions against a real PostgreSQL (spec §7.3, §7.4, §7.5, §7.8)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest

from support.datatable import load_datatable_module

store_schema = load_datatable_module("store_schema")
store_tables = load_datatable_module("store_tables")
filters_mod = load_datatable_module("filters")
rows_errors = load_datatable_module("rows_errors")
rows_read = load_datatable_module("rows_read")
rows_upsert = load_datatable_module("rows_upsert")
rows_write = load_datatable_module("rows_write")
RowsError = rows_errors.RowsError
Condition = filters_mod.Condition

FIELDS: list[dict[str, Any]] = [
    {"title": "姓名", "uidt": "文本", "required": True},
    {"title": "工号", "uidt": "整数"},
    {"title": "薪资", "uidt": "金额"},
    {"title": "入职日期", "uidt": "日期"},
    {"title": "打卡时间", "uidt": "日期时间"},
    {"title": "上班时间", "uidt": "时间"},
    {"title": "在职", "uidt": "勾选"},
    {"title": "部门", "uidt": "单选", "options": ["研发", "销售", "行政"]},
    {"title": "技能", "uidt": "多选", "options": ["Python", "SQL", "Go"]},
    {"title": "扩展", "uidt": "JSON"},
    {"title": "负责人", "uidt": "文本"},
]

PEOPLE: list[dict[str, Any]] = [
    {
        "姓名": "张三",
        "工号": 1,
        "薪资": "12,000.50",
        "入职日期": "2024-01-15",
        "打卡时间": "2024-05-01T09:00:00+08:00",
        "上班时间": "09:00",
        "在职": True,
        "部门": "研发",
        "技能": ["SQL", "Python"],
        "扩展": {"级别": 3},
        "负责人": "u1",
    },
    {"姓名": "李四", "工号": 2, "薪资": 8000, "入职日期": "2023-06-01", "在职": False, "部门": "销售", "负责人": "u1"},
    {"姓名": "王五", "工号": 3, "薪资": 20000, "入职日期": "2022-03-10", "在职": True, "部门": "研发", "技能": "Go"},
    {"姓名": "赵六_%", "工号": 4, "薪资": 15000, "部门": "行政", "技能": ["Python"], "负责人": "u2"},
    {"姓名": "孙七", "工号": 5, "在职": True, "部门": "销售", "负责人": "u2"},
]


@pytest.fixture
def schema() -> str:
    return store_schema.schema_for("Rows-" + uuid.uuid4().hex[:12])


async def _make(conn: asyncpg.Connection, schema: str, fields: list[dict[str, Any]] = FIELDS, title: str = "员工"):
    created = await store_tables.create_table(conn, schema, title, fields)
    return await store_schema.resolve_table(conn, schema, created["id"])


@pytest.fixture
async def table(conn: asyncpg.Connection, schema: str):
    return await _make(conn, schema)


@pytest.fixture
async def people(conn: asyncpg.Connection, table) -> Any:
    result = await rows_write.insert_batch(conn, table, PEOPLE)
    assert result["inserted"] == 5, result
    return table


async def _names(conn: asyncpg.Connection, table, **kwargs: Any) -> list[str]:
    result = await rows_read.query(conn, table, sort="工号", **kwargs)
    return [r["姓名"] for r in result["list"]]


# --------------------------------------------------------------------------------------------------------------------
# insert / records


async def test_insert_returns_the_full_record(conn: asyncpg.Connection, table) -> None:
    record = await rows_write.insert(conn, table, {**PEOPLE[0], "不存在": 1})
    assert isinstance(record["id"], int)
    assert record["created_at"].endswith("+00:00")
    assert record["姓名"] == "张三"
    assert record["薪资"] == 12000.5
    assert record["入职日期"] == "2024-01-15"
    assert record["打卡时间"] == "2024-05-01T01:00:00+00:00"
    assert record["上班时间"] == "09:00:00"
    assert record["在职"] is True
    assert record["技能"] == ["Python", "SQL"]  # configured option order
    assert record["扩展"] == {"级别": 3}
    assert record.dropped == ["不存在"]
    assert set(record) == {"id", "created_at", *(f["title"] for f in FIELDS)}
    # committed: visible from another connection's point of view (no transaction left open)
    assert not conn.is_in_transaction()
    assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified}") == 1


async def test_insert_refusals(conn: asyncpg.Connection, table) -> None:
    with pytest.raises(RowsError, match="姓名: required") as info:
        await rows_write.insert(conn, table, {"工号": 9})
    assert info.value.error_type == "recoverable" and info.value.need_param == "data"
    with pytest.raises(RowsError, match="magnitude word"):
        await rows_write.insert(conn, table, {"姓名": "x", "薪资": "3.5万"})
    with pytest.raises(RowsError, match="no values"):
        await rows_write.insert(conn, table, {"未知": 1})
    with pytest.raises(RowsError, match="one object"):
        await rows_write.insert(conn, table, "nope")
    assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified}") == 0


async def test_insert_with_an_array_is_a_batch_with_the_limit(conn: asyncpg.Connection, table) -> None:
    result = await rows_write.insert(conn, table, [{"姓名": "a"}, {"姓名": "b"}])
    assert result["inserted"] == 2 and result["verified_total"] == 2
    with pytest.raises(RowsError, match="insert_from_file"):
        await rows_write.insert(conn, table, [{"姓名": str(i)} for i in range(101)])


async def test_decimal_output_is_exact(conn: asyncpg.Connection, schema: str) -> None:
    table = await _make(conn, schema, [{"title": "值", "uidt": "高精度数字"}, {"title": "钱", "uidt": "金额"}])
    record = await rows_write.insert(conn, table, {"值": "0.123456789012345678", "钱": "100.00"})
    assert record["值"] == "0.123456789012345678"  # not representable as a float: decimal text
    assert record["钱"] == 100


async def test_stamp_forces_values(conn: asyncpg.Connection, table) -> None:
    record = await rows_write.insert(conn, table, {"姓名": "x", "负责人": "someone-else"}, stamp={"负责人": "u9"})
    assert record["负责人"] == "u9"
    result = await rows_write.insert_batch(
        conn, table, [{"姓名": "a", "负责人": "u1"}, {"姓名": "b"}], stamp={"负责人": "u9"}
    )
    assert result["inserted"] == 2
    assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified} WHERE 负责人 = 'u9'") == 3
    with pytest.raises(RowsError) as info:
        await rows_write.insert(conn, table, {"姓名": "x"}, stamp={"没有": 1})
    assert info.value.error_type == "config"


# --------------------------------------------------------------------------------------------------------------------
# insert_batch


async def test_insert_batch_with_invalid_rows(conn: asyncpg.Connection, table) -> None:
    records = [
        {"姓名": "a", "工号": 1},
        {"工号": 2},  # required missing
        {"姓名": "c", "工号": "1.5"},  # not an integer
        {},  # empty → skipped
        {"姓名": "e", "部门": "市场", "未知": 1},  # not an option
        {"姓名": "f", "技能": "SQL,Go"},
    ]
    result = await rows_write.insert_batch(conn, table, records)
    assert result["inserted"] == 2
    assert result["skipped"] == 1
    assert result["failed"] == 3
    assert [e["row"] for e in result["errors"]] == [2, 3, 5]
    assert "姓名" in result["errors"][0]["error"]
    assert result["verified_total"] == 2
    assert len(result["ids"]) == 2
    assert result["dropped"] == ["未知"]
    stored = await conn.fetch(f"SELECT 姓名, 技能 FROM {table.qualified} ORDER BY id")
    assert [(r["姓名"], r["技能"]) for r in stored] == [("a", None), ("f", ["SQL", "Go"])]


async def test_insert_batch_errors_are_capped(conn: asyncpg.Connection, table) -> None:
    result = await rows_write.insert_batch(conn, table, [{"工号": i} for i in range(30)] + [{"姓名": "ok"}])
    assert result["failed"] == 30 and len(result["errors"]) == rows_errors.MAX_ERRORS
    assert result["inserted"] == 1 and result["verified_total"] == 1


async def test_insert_batch_falls_back_per_row_on_unique_violation(conn: asyncpg.Connection, schema: str) -> None:
    table = await _make(
        conn, schema, [{"title": "编号", "uidt": "整数", "unique": True}, {"title": "名", "uidt": "文本"}]
    )
    await rows_write.insert(conn, table, {"编号": 2, "名": "existing"})
    result = await rows_write.insert_batch(conn, table, [{"编号": 1}, {"编号": 2}, {"编号": 3}, {"编号": 3}])
    assert result["inserted"] == 2
    assert result["failed"] == 2
    assert [e["row"] for e in result["errors"]] == [2, 4]
    assert "编号" in result["errors"][0]["error"] and "unique" in result["errors"][0]["error"]
    assert result["verified_total"] == 2
    assert sorted(r["编号"] for r in await conn.fetch(f"SELECT 编号 FROM {table.qualified}")) == [1, 2, 3]
    assert not conn.is_in_transaction()


async def test_insert_batch_limits(conn: asyncpg.Connection, table) -> None:
    with pytest.raises(RowsError, match="insert_from_file") as info:
        await rows_write.insert_batch(conn, table, [{"姓名": str(i)} for i in range(101)])
    assert info.value.need_param == "records"
    with pytest.raises(RowsError, match="empty"):
        await rows_write.insert_batch(conn, table, [])
    result = await rows_write.insert_batch(conn, table, [{"姓名": str(i)} for i in range(100)])
    assert result["inserted"] == 100 and result["verified_total"] == 100


async def test_batch_inside_an_open_transaction_is_a_savepoint(conn: asyncpg.Connection, table) -> None:
    tx = conn.transaction()
    await tx.start()
    result = await rows_write.insert_batch(conn, table, [{"姓名": "a"}, {"姓名": "b"}])
    assert result["inserted"] == 2
    assert conn.is_in_transaction()
    await tx.rollback()
    assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified}") == 0


# --------------------------------------------------------------------------------------------------------------------
# query


async def test_query_shape_and_defaults(conn: asyncpg.Connection, people) -> None:
    result = await rows_read.query(conn, people)
    assert set(result) == {"list", "pageInfo"}
    assert result["pageInfo"] == {"totalRows": 5, "page": 1, "pageSize": 100, "isLastPage": True}
    ids = [r["id"] for r in result["list"]]
    assert ids == sorted(ids, reverse=True)  # default -id


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"field": "部门", "op": "eq", "value": "研发"}, ["张三", "王五"]),
        ({"field": "部门", "op": "ne", "value": "研发"}, ["李四", "赵六_%", "孙七"]),
        ({"field": "薪资", "op": "gt", "value": 12000.5}, ["王五", "赵六_%"]),
        ({"field": "薪资", "op": "gte", "value": "12,000.50"}, ["张三", "王五", "赵六_%"]),
        ({"field": "薪资", "op": "lt", "value": 12000.5}, ["李四"]),
        ({"field": "薪资", "op": "lte", "value": 12000.5}, ["张三", "李四"]),
        ({"field": "姓名", "op": "contains", "value": "_%"}, ["赵六_%"]),
        ({"field": "姓名", "op": "contains", "value": "四"}, ["李四"]),
        ({"field": "工号", "op": "in", "value": [1, "3", 5]}, ["张三", "王五", "孙七"]),
        ({"field": "入职日期", "op": "between", "value": ["2023-01-01", "2024-12-31"]}, ["张三", "李四"]),
        ({"field": "入职日期", "op": "is_null"}, ["赵六_%", "孙七"]),
        ({"field": "技能", "op": "not_null"}, ["张三", "王五", "赵六_%"]),
        ({"field": "在职", "op": "eq", "value": "是"}, ["张三", "王五", "孙七"]),
        ({"field": "技能", "op": "contains", "value": "Python"}, ["张三", "赵六_%"]),
        ({"field": "技能", "op": "contains", "value": ["Python", "SQL"]}, ["张三"]),
        ({"field": "技能", "op": "in", "value": ["Go", "SQL"]}, ["张三", "王五"]),
        ({"field": "技能", "op": "eq", "value": "Go"}, ["王五"]),
        ({"field": "技能", "op": "ne", "value": "Go"}, ["张三", "李四", "赵六_%", "孙七"]),
        ({"field": "打卡时间", "op": "gte", "value": "2024-05-01 08:00+08:00"}, ["张三"]),
        ({"field": "工号", "op": "eq", "value": ""}, []),
    ],
)
async def test_every_filter_op(
    conn: asyncpg.Connection, people, condition: dict[str, Any], expected: list[str]
) -> None:
    assert await _names(conn, people, filters=[condition]) == expected


async def test_filters_are_anded_and_field_maps_read(conn: asyncpg.Connection, people) -> None:
    filters = [{"field": "部门", "op": "eq", "value": "研发"}, {"field": "薪资", "op": "gt", "value": 15000}]
    assert await _names(conn, people, filters=filters) == ["王五"]
    assert await _names(conn, people, filters={"部门": "销售"}) == ["李四", "孙七"]


async def test_bad_filters_are_refused(conn: asyncpg.Connection, people) -> None:
    for bad in (
        [{"field": "不存在", "op": "eq", "value": 1}],
        [{"field": "部门", "op": "like", "value": "x"}],
        [{"field": "工号", "op": "eq", "value": "abc"}],
        [{"field": "技能", "op": "gt", "value": "Go"}],
        [{"field": "部门", "op": "eq", "value": "{部门}"}],
    ):
        with pytest.raises(RowsError) as info:
            await rows_read.query(conn, people, filters=bad)
        assert info.value.need_param == "filters" and info.value.error_type == "recoverable"


async def test_sort_limit_offset(conn: asyncpg.Connection, people) -> None:
    result = await rows_read.query(conn, people, sort="-薪资", limit=2)
    assert [r["姓名"] for r in result["list"]] == ["王五", "赵六_%"]
    assert result["pageInfo"] == {"totalRows": 5, "page": 1, "pageSize": 2, "isLastPage": False}
    result = await rows_read.query(conn, people, sort="-薪资", limit=2, offset=4)
    assert [r["姓名"] for r in result["list"]] == ["孙七"]  # NULLs last
    assert result["pageInfo"] == {"totalRows": 5, "page": 3, "pageSize": 2, "isLastPage": True}
    result = await rows_read.query(conn, people, limit=2, offset=10)
    assert result["list"] == [] and result["pageInfo"]["totalRows"] == 5 and result["pageInfo"]["isLastPage"]
    assert (await rows_read.query(conn, people, limit=5000))["pageInfo"]["pageSize"] == 1000
    assert await _names(conn, people, filters=None, limit=1) == ["张三"]
    result = await rows_read.query(conn, people, sort={"field": "姓名", "direction": "asc"}, fields=["姓名"])
    assert set(result["list"][0]) == {"id", "created_at", "姓名"}
    # sorted by a field that is not returned (carried along for the order only), full page: counted
    result = await rows_read.query(conn, people, sort="-薪资", limit=2, fields=["姓名"])
    assert result["list"] == [
        {k: v for k, v in r.items() if k in ("id", "created_at", "姓名")}
        for r in (await rows_read.query(conn, people, sort="-薪资", limit=2))["list"]
    ]
    assert [r["姓名"] for r in result["list"]] == ["王五", "赵六_%"] and result["pageInfo"]["totalRows"] == 5
    ascending = await rows_read.query(conn, people, sort="id", limit=3, offset=1)
    assert [r["id"] for r in ascending["list"]] == sorted(r["id"] for r in ascending["list"])
    assert ascending["pageInfo"] == {"totalRows": 5, "page": 1, "pageSize": 3, "isLastPage": False}
    for bad in ({"limit": 0}, {"offset": -1}, {"sort": "不存在"}, {"fields": ["不存在"]}):
        with pytest.raises(RowsError):
            await rows_read.query(conn, people, **bad)


async def test_query_empty_table(conn: asyncpg.Connection, table) -> None:
    result = await rows_read.query(conn, table)
    assert result == {"list": [], "pageInfo": {"totalRows": 0, "page": 1, "pageSize": 100, "isLastPage": True}}


# --------------------------------------------------------------------------------------------------------------------
# aggregate


async def test_aggregate_without_group_by(conn: asyncpg.Connection, people) -> None:
    result = await rows_read.aggregate(
        conn,
        people,
        metrics=[
            {"field": "薪资", "op": "sum", "alias": "总薪资"},
            {"field": "薪资", "op": "avg"},
            {"field": "薪资", "op": "max"},
            {"field": "入职日期", "op": "min"},
            {"op": "count"},
            {"field": "薪资", "op": "count", "alias": "有薪资"},
        ],
    )
    assert result["group_by"] == []
    assert [m["alias"] for m in result["metrics"]] == [
        "总薪资",
        "薪资_avg",
        "薪资_max",
        "入职日期_min",
        "count",
        "有薪资",
    ]
    (row,) = result["rows"]
    assert row == {
        "总薪资": 55000.5,
        "薪资_avg": 13750.125,
        "薪资_max": 20000,
        "入职日期_min": "2022-03-10",
        "count": 5,
        "有薪资": 4,
    }


async def test_aggregate_with_group_by(conn: asyncpg.Connection, people) -> None:
    result = await rows_read.aggregate(
        conn, people, metrics=[{"op": "count", "alias": "人数"}, {"field": "薪资", "op": "sum"}], group_by="部门"
    )
    assert result["group_by"] == ["部门"]
    assert {r["部门"]: (r["人数"], r["薪资_sum"]) for r in result["rows"]} == {
        "研发": (2, 32000.5),
        "销售": (2, 8000),
        "行政": (1, 15000),
    }
    assert len(result["rows"]) == 3
    sorted_result = await rows_read.aggregate(
        conn, people, metrics=[{"op": "count", "alias": "人数"}], group_by=["部门"], sort="-人数", limit=1
    )
    assert len(sorted_result["rows"]) == 1 and sorted_result["rows"][0]["人数"] == 2
    filtered = await rows_read.aggregate(
        conn, people, metrics={"op": "count"}, group_by="在职", filters=[{"field": "部门", "op": "ne", "value": "行政"}]
    )
    assert {r["在职"]: r["count"] for r in filtered["rows"]} == {True: 3, False: 1}
    assert (await rows_read.aggregate(conn, people, metrics={"op": "count"}, group_by="工号", limit=10**6))["rows"][0]


async def test_aggregate_refusals(conn: asyncpg.Connection, people) -> None:
    for bad in (
        {"metrics": [{"field": "姓名", "op": "sum"}]},
        {"metrics": [{"field": "在职", "op": "max"}]},
        {"metrics": [{"op": "median"}]},
        {"metrics": [{"op": "count", "alias": "部门"}], "group_by": "部门"},
        {"metrics": [{"op": "count"}], "group_by": "部门", "sort": "薪资"},
    ):
        with pytest.raises(RowsError):
            await rows_read.aggregate(conn, people, **bad)


# --------------------------------------------------------------------------------------------------------------------
# upsert


async def test_upsert_inserts_and_updates_without_a_unique_constraint(conn: asyncpg.Connection, people) -> None:
    result = await rows_upsert.upsert(
        conn,
        people,
        ["工号"],
        [
            {"工号": 1, "薪资": 13000},
            {"工号": 2, "部门": "研发"},
            {"工号": 6, "姓名": "周八"},
            {"工号": 7, "姓名": "吴九", "薪资": "bad"},
            {"姓名": "no key"},
        ],
    )
    assert result == {"inserted": 1, "updated": 2, "failed": 2, "errors": result["errors"], "verified_total": 3}
    assert [e["row"] for e in result["errors"]] == [4, 5]
    stored = {r["工号"]: r for r in await conn.fetch(f"SELECT * FROM {people.qualified}")}
    assert stored[1]["薪资"] == 13000 and stored[1]["姓名"] == "张三"
    assert stored[2]["部门"] == "研发"
    assert stored[6]["姓名"] == "周八"
    assert len(stored) == 6
    # again: everything is an update now; a single dict is accepted
    again = await rows_upsert.upsert(conn, people, "工号", {"工号": 6, "姓名": "周八八"})
    assert (again["inserted"], again["updated"], again["verified_total"]) == (0, 1, 1)


async def test_upsert_verifies_the_rows_it_wrote(conn: asyncpg.Connection, people) -> None:
    """verified_total counts the rows the MERGE wrote (its RETURNING ids, found again), not every row holding a key
    of the batch: a batch of key fields only changes nothing in the rows it matches, so they are neither updated nor
    verified, and the counts agree."""
    result = await rows_upsert.upsert(conn, people, ["工号"], [{"工号": 1}, {"工号": 2}])
    assert (result["inserted"], result["updated"], result["failed"], result["verified_total"]) == (0, 0, 0, 0)
    mixed = await rows_upsert.upsert(conn, people, ["工号"], [{"工号": 1}, {"工号": 2, "薪资": 1}])
    assert (mixed["inserted"], mixed["updated"], mixed["verified_total"]) == (0, 2, 2)


async def test_upsert_duplicate_keys_in_one_batch(conn: asyncpg.Connection, table) -> None:
    result = await rows_upsert.upsert(conn, table, ["工号"], [{"工号": 1, "姓名": "a"}, {"工号": 1, "姓名": "b"}])
    assert (result["inserted"], result["updated"], result["failed"]) == (1, 0, 1)
    assert result["errors"][0]["row"] == 1
    assert await conn.fetchval(f"SELECT 姓名 FROM {table.qualified}") == "b"


async def test_upsert_composite_key_stamp_and_scope(conn: asyncpg.Connection, people) -> None:
    scope = [Condition("负责人", "eq", "u2")]
    result = await rows_upsert.upsert(
        conn,
        people,
        ["部门", "姓名"],
        [{"部门": "销售", "姓名": "孙七", "工号": 50}, {"部门": "销售", "姓名": "李四", "工号": 20}],
        stamp={"负责人": "u2"},
        extra_conditions=scope,
    )
    # 孙七 belongs to u2 → updated; 李四 belongs to u1 → not matched in scope → a new row for u2
    assert (result["inserted"], result["updated"], result["verified_total"]) == (1, 1, 2)
    assert await conn.fetchval(f"SELECT count(*) FROM {people.qualified} WHERE 姓名 = '李四'") == 2
    assert await conn.fetchval(f"SELECT 工号 FROM {people.qualified} WHERE 姓名 = '李四' AND 负责人 = 'u1'") == 2


async def test_upsert_falls_back_per_row(conn: asyncpg.Connection, schema: str) -> None:
    table = await _make(
        conn, schema, [{"title": "编号", "uidt": "整数"}, {"title": "邮件", "uidt": "邮箱", "unique": True}]
    )
    await rows_write.insert(conn, table, {"编号": 1, "邮件": "a@x.cn"})
    result = await rows_upsert.upsert(
        conn, table, ["编号"], [{"编号": 2, "邮件": "a@x.cn"}, {"编号": 3, "邮件": "c@x.cn"}]
    )
    assert (result["inserted"], result["updated"], result["failed"], result["verified_total"]) == (1, 0, 1, 1)
    assert result["errors"][0]["row"] == 1 and "邮件" in result["errors"][0]["error"]


async def test_upsert_without_merge_returning(conn: asyncpg.Connection, people, monkeypatch) -> None:
    """PostgreSQL 15/16 have no MERGE … RETURNING: the counts come from a pre-count of the matching rows."""
    monkeypatch.setattr(rows_upsert, "_has_merge_returning", lambda conn: False)
    result = await rows_upsert.upsert(conn, people, ["工号"], [{"工号": 1, "薪资": 1}, {"工号": 8, "姓名": "新"}])
    assert (result["inserted"], result["updated"], result["verified_total"]) == (1, 1, 2)
    assert await conn.fetchval(f"SELECT 薪资 FROM {people.qualified} WHERE 工号 = 1") == 1


async def test_upsert_multi_select_and_partial_columns(conn: asyncpg.Connection, schema: str) -> None:
    fields = [
        {"title": "编号", "uidt": "整数"},
        {"title": "标签", "uidt": "多选", "options": ['a"b', "c\\d", "e f"]},
        {"title": "备注", "uidt": "文本"},
    ]
    table = await _make(conn, schema, fields)
    await rows_write.insert(conn, table, {"编号": 1, "标签": ["e f"], "备注": "keep"})
    result = await rows_upsert.upsert(
        conn, table, ["编号"], [{"编号": 1, "标签": ['a"b', "c\\d"]}, {"编号": 2, "备注": "new", "标签": ""}]
    )
    assert (result["inserted"], result["updated"]) == (1, 1)
    stored = {r["编号"]: r for r in await conn.fetch(f"SELECT * FROM {table.qualified}")}
    assert stored[1]["标签"] == ['a"b', "c\\d"] and stored[1]["备注"] == "keep"  # 备注 not given: kept
    assert stored[2]["标签"] is None and stored[2]["备注"] == "new"
    cleared = await rows_upsert.upsert(conn, table, ["编号"], [{"编号": 1, "备注": None}])
    assert cleared["updated"] == 1
    assert await conn.fetchval(f"SELECT 备注 FROM {table.qualified} WHERE 编号 = 1") is None  # explicit null clears


async def test_upsert_refusals(conn: asyncpg.Connection, table) -> None:
    with pytest.raises(RowsError, match="key_fields"):
        await rows_upsert.upsert(conn, table, [], [{"姓名": "a"}])
    with pytest.raises(RowsError, match="unknown field"):
        await rows_upsert.upsert(conn, table, ["不存在"], [{"姓名": "a"}])
    with pytest.raises(RowsError, match="insert_from_file"):
        await rows_upsert.upsert(conn, table, ["工号"], [{"工号": i} for i in range(101)])


# --------------------------------------------------------------------------------------------------------------------
# update / update_by


async def _id_of(conn: asyncpg.Connection, table, name: str) -> int:
    return await conn.fetchval(f"SELECT id FROM {table.qualified} WHERE 姓名 = $1", name)


async def test_update(conn: asyncpg.Connection, people) -> None:
    row_id = await _id_of(conn, people, "李四")
    record = await rows_write.update(
        conn, people, str(row_id), {"薪资": "9,000", "技能": "SQL", "姓名": "李四四", "x": 1}
    )
    assert record["id"] == row_id and record["薪资"] == 9000 and record["技能"] == ["SQL"]
    assert record["姓名"] == "李四四" and record.dropped == ["x"]
    record = await rows_write.update(conn, people, row_id, {"部门": ""})  # empty → NULL; required is not re-checked
    assert record["部门"] is None
    with pytest.raises(RowsError, match="no row with id") as info:
        await rows_write.update(conn, people, 999999, {"薪资": 1})
    assert info.value.error_type == "recoverable" and info.value.need_param == "row_id"
    with pytest.raises(RowsError, match="负责人"):
        await rows_write.update(conn, people, row_id, {"负责人": "u2"}, protected=["负责人"])
    with pytest.raises(RowsError, match="changes no field"):
        await rows_write.update(conn, people, row_id, {"未知": 1})
    with pytest.raises(RowsError, match="row id"):
        await rows_write.update(conn, people, "abc", {"薪资": 1})
    # scope: u2 cannot change u1's row
    with pytest.raises(RowsError, match="no row with id"):
        await rows_write.update(conn, people, row_id, {"薪资": 1}, extra_conditions=[Condition("负责人", "eq", "u2")])
    assert await conn.fetchval(f"SELECT 薪资 FROM {people.qualified} WHERE id = $1", row_id) == 9000


async def test_update_by(conn: asyncpg.Connection, people) -> None:
    result = await rows_write.update_by(conn, people, [{"field": "部门", "op": "eq", "value": "研发"}], {"在职": False})
    assert result == {"updated": 2}
    result = await rows_write.update_by(
        conn, people, {"部门": "研发"}, {"薪资": 1}, extra_conditions=[Condition("负责人", "eq", "u1")]
    )
    assert result == {"updated": 1}
    for bad_filters in (None, [], {}):
        with pytest.raises(RowsError, match="needs filters"):
            await rows_write.update_by(conn, people, bad_filters, {"在职": True})
    with pytest.raises(RowsError, match="负责人"):
        await rows_write.update_by(conn, people, {"部门": "研发"}, {"负责人": "x"}, protected={"负责人"})
    assert await conn.fetchval(f"SELECT count(*) FROM {people.qualified} WHERE NOT 在职") == 3


# --------------------------------------------------------------------------------------------------------------------
# count / fetch / delete


async def test_count_fetch_and_delete(conn: asyncpg.Connection, people) -> None:
    sales = [{"field": "部门", "op": "eq", "value": "销售"}]
    assert await rows_read.count_matching(conn, people, sales) == 2
    assert await rows_read.count_matching(conn, people, None) == 5
    fetched = await rows_read.fetch_rows(conn, people, filters=sales)
    assert [r["姓名"] for r in fetched] == ["李四", "孙七"]
    ids = [r["id"] for r in fetched]
    assert [r["id"] for r in await rows_read.fetch_rows(conn, people, row_ids=ids[:1])] == ids[:1]
    for bad in ({}, {"row_ids": []}, {"filters": []}):
        with pytest.raises(RowsError, match="needs row_ids or filters"):
            await rows_write.delete_rows(conn, people, **bad)
        with pytest.raises(RowsError):
            await rows_read.fetch_rows(conn, people, **bad)
    assert await rows_write.delete_rows(conn, people, row_ids=[ids[0], "999999"]) == 1
    assert await rows_write.delete_rows(conn, people, filters=sales) == 1
    assert await rows_write.delete_rows(conn, people, filters=sales) == 0
    assert await rows_read.count_matching(conn, people, None) == 3
    assert not conn.is_in_transaction()


async def test_extra_conditions_restrict_every_action(conn: asyncpg.Connection, people) -> None:
    u1 = [Condition("负责人", "eq", "u1")]
    assert await _names(conn, people, extra_conditions=u1) == ["张三", "李四"]
    assert await _names(conn, people, filters={"部门": "研发"}, extra_conditions=u1) == ["张三"]
    agg = await rows_read.aggregate(conn, people, metrics={"op": "count"}, extra_conditions=u1)
    assert agg["rows"] == [{"count": 2}]
    assert await rows_read.count_matching(conn, people, {"部门": "研发"}, extra_conditions=u1) == 1
    all_ids = [
        r["id"] for r in await rows_read.fetch_rows(conn, people, filters=[{"field": "id", "op": "gt", "value": 0}])
    ]
    assert len(await rows_read.fetch_rows(conn, people, row_ids=all_ids, extra_conditions=u1)) == 2
    assert (await rows_write.update_by(conn, people, {"在职": True}, {"薪资": 1}, extra_conditions=u1)) == {
        "updated": 1
    }
    assert await rows_write.delete_rows(conn, people, row_ids=all_ids, extra_conditions=u1) == 2
    assert await rows_read.count_matching(conn, people, None) == 3
    with pytest.raises(RowsError) as info:
        await rows_read.query(conn, people, extra_conditions=[Condition("不存在", "eq", 1)])
    assert info.value.error_type == "config"


# --------------------------------------------------------------------------------------------------------------------
# errors


async def test_classify_by_sqlstate(conn: asyncpg.Connection, table) -> None:
    def fake(state: str, message: str = "boom", **attrs: Any) -> asyncpg.PostgresError:
        exc = asyncpg.PostgresError.new({"C": state, "M": message, **attrs})
        return exc

    unique = rows_errors.classify(fake("23505", "duplicate key", D="Key (工号)=(7) already exists."))
    assert unique.error_type == "recoverable" and "工号" in str(unique) and "7" in str(unique)
    assert rows_errors.classify(fake("23502", 'null value in column "姓名"')).error_type == "recoverable"
    assert rows_errors.classify(fake("22003")).error_type == "recoverable"
    assert "list_columns" in str(rows_errors.classify(fake("42703")))
    assert rows_errors.classify(fake("42P01")).error_type == "recoverable"
    for state in ("40001", "40P01", "57014", "08006"):
        assert rows_errors.classify(fake(state)).error_type == "transient"
    other = rows_errors.classify(fake("XX000"))
    assert other.error_type == "transient" and "XX000" in str(other)
    assert rows_errors.classify(fake("42501")).error_type == "config"
    assert rows_errors.classify(ValueError("x")).error_type == "recoverable"  # never reached the database
    same = RowsError("x")
    assert rows_errors.classify(same) is same


async def test_database_errors_roll_back_and_classify(conn: asyncpg.Connection, table) -> None:
    await conn.execute(f"ALTER TABLE {table.qualified} DROP COLUMN 负责人")  # metadata now stale
    with pytest.raises(RowsError, match="list_columns") as info:
        await rows_write.insert(conn, table, {"姓名": "x", "负责人": "u1"})
    assert info.value.sqlstate == "42703"
    assert not conn.is_in_transaction()
    assert await conn.fetchval("SELECT 1") == 1  # the connection is usable (rolled back)
    with pytest.raises(RowsError, match="list_columns"):
        await rows_write.insert_batch(conn, table, [{"姓名": "a"}, {"姓名": "b", "负责人": "u"}])
    assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified}") == 0
