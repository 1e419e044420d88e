"""The writing row functions (rows/write.py, spec §7.3, §7.5): insert, insert_batch, update, update_by and
delete_rows."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.rows import errors as rows_errors
from skillyard.builtin_skills.datatable.rows import read as rows_read
from skillyard.builtin_skills.datatable.rows import write as rows_write
from skillyard.builtin_skills.datatable.rows.errors import RowsError
from skillyard.builtin_skills.datatable.rows.filters import Condition

from skillyard import SkillYard
from support.datatable import context, count, make_numbered_table, make_table, run, store_table, write_json
from support.datatable.rows import PEOPLE, PEOPLE_FIELDS


async def _id_of(conn: asyncpg.Connection, table, name: str) -> int:
    return await conn.fetchval(f"SELECT id FROM {table.qualified} WHERE 姓名 = $1", name)


async def test_insert_batch_on_conflict_skip_counts_duplicates_as_skipped(yard: SkillYard, org: str) -> None:
    table_id = await make_numbered_table(yard, org, rows=2)
    records = [{"姓名": "重复", "编号": "B1"}, {"姓名": "新", "编号": "N1"}]
    env = await run(yard, context(org), "insert_batch", table_id=table_id, records=records, on_conflict="skip")
    assert env["ok"], env
    assert (env["inserted"], env["skipped"], env["failed"], env["errors"]) == (1, 1, 0, []), env
    assert env["verified_total"] == 1
    plain = await run(yard, context(org), "insert_batch", table_id=table_id, records=[{"姓名": "x", "编号": "B0"}])
    assert plain["failed"] == 1 and plain["skipped"] == 0  # without on_conflict a duplicate still fails


async def test_insert_batch_on_conflict_skip_needs_a_unique_field(yard: SkillYard, org: str) -> None:
    created = await run(
        yard, context(org), "create_table", table_name="无唯一", fields=[{"title": "名", "uidt": "文本"}]
    )
    env = await run(
        yard, context(org), "insert_batch", table_id=created["id"], records=[{"名": "a"}], on_conflict="skip"
    )
    assert env["ok"] is False and env["need_param"] == "on_conflict"
    bad = await run(yard, context(org), "insert_batch", table_id=created["id"], records=[{"名": "a"}], on_conflict="x")
    assert bad["ok"] is False and bad["need_param"] == "on_conflict"


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
    assert set(record) == {"id", "created_at", *(f["title"] for f in PEOPLE_FIELDS)}
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
    table = await store_table(
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


async def test_update_returns_full_record_and_insert_has_system_columns(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    ins = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "甲", "金额": "12.345"})
    assert ins["ok"] and set(ins["data"]) == {"id", "created_at", "姓名", "工号", "城市", "金额"}, ins
    assert float(ins["data"]["金额"]) == 12.35
    upd = await run(yard, ctx, "update", table_id=table_id, row_id=ins["id"], data={"城市": "上海"})
    assert (
        upd["ok"] and upd["data"]["姓名"] == "甲" and upd["data"]["城市"] == "上海" and upd["data"]["id"] == ins["id"]
    )


@pytest.mark.spec("§7.4")
async def test_on_conflict_skip_inside_one_batch_and_without_a_unique_field(
    yard: SkillYard, org: str, conn: Any
) -> None:
    """§7.4 on_conflict=skip 要求表上已有唯一约束; references/actions.md: rows whose unique values exist count as
    skipped."""
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="会员",
        fields=[{"title": "编号", "uidt": "文本", "unique": True}, {"title": "姓名", "uidt": "文本"}],
    )
    records = [{"编号": "A", "姓名": "1"}, {"编号": "A", "姓名": "2"}, {"编号": "B", "姓名": "3"}]
    skip = await run(yard, ctx, "insert_batch", table_id=made["id"], records=records, on_conflict="skip")
    assert skip["ok"] and (skip["inserted"], skip["skipped"], skip["failed"]) == (2, 1, 0), skip
    assert skip["verified_total"] == 2
    plain = await run(yard, ctx, "insert_batch", table_id=made["id"], records=[{"编号": "C"}, {"编号": "C"}])
    assert plain["ok"] and (plain["inserted"], plain["failed"]) == (1, 1) and plain["errors"][0]["row"] == 2, plain
    bad = await run(yard, ctx, "insert_batch", table_id=made["id"], records=records, on_conflict="update")
    assert bad["ok"] is False and bad["need_param"] == "on_conflict", bad
    plain_table = await make_table(yard, org)
    no_unique = await run(yard, ctx, "insert_batch", table_id=plain_table, records=[{"姓名": "x"}], on_conflict="skip")
    assert no_unique["ok"] is False and no_unique["need_param"] == "on_conflict", no_unique
    rel = write_json(yard, ctx, "import/n.json", [{"姓名": "x"}])
    from_file = await run(yard, ctx, "insert_from_file", table_id=plain_table, file=rel, on_conflict="skip")
    assert from_file["ok"] is False and from_file["need_param"] == "on_conflict", from_file
    assert await count(conn, org) == 0
