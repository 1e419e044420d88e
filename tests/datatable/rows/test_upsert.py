"""upsert (rows/upsert.py, spec §7.3, §7.8.6): one MERGE matched on key fields, keys compared on converted values."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.rows import upsert as rows_upsert
from skillyard.builtin_skills.datatable.rows import write as rows_write
from skillyard.builtin_skills.datatable.rows.errors import RowsError
from skillyard.builtin_skills.datatable.rows.filters import Condition

from skillyard import SkillYard
from support.datatable import context, count, make_table, run, store_table


async def _keyed_table(yard: SkillYard, org: str) -> str:
    made = await run(
        yard,
        context(org),
        "create_table",
        table_name="键表",
        fields=[
            {"title": "时刻", "uidt": "日期时间"},
            {"title": "价格", "uidt": "数字"},
            {"title": "标签", "uidt": "多选", "options": ["红", "绿"]},
            {"title": "备注", "uidt": "文本"},
        ],
    )
    assert made["ok"], made
    return str(made["id"])


@pytest.mark.parametrize(
    ("key", "first", "second"),
    [
        ("时刻", "2024-01-01T10:00:00+08:00", "2024-01-01T02:00:00Z"),
        ("时刻", "2024-01-01 02:00", "2024-01-01T02:00:00+00:00"),
        ("价格", "1.5", "1.50"),
        ("价格", 2, "2.001"),
        ("标签", ["绿", "红"], "红,绿"),
    ],
)
async def test_upsert_collapses_keys_equal_after_conversion(
    yard: SkillYard, org: str, conn: Any, key: str, first: Any, second: Any
) -> None:
    """The later record wins and the earlier one is reported, as for a key written twice the same way; the same
    call again updates that one row instead of failing."""
    table_id = await _keyed_table(yard, org)
    ctx = context(org)
    records = [{key: first, "备注": "x"}, {key: second, "备注": "y"}]
    env = await run(yard, ctx, "upsert", table_id=table_id, key_fields=key, records=records)
    assert env["ok"] and (env["inserted"], env["updated"], env["failed"]) == (1, 0, 1), env
    assert env["errors"][0]["row"] == 1 and "same key as row 2" in env["errors"][0]["error"], env
    again = await run(yard, ctx, "upsert", table_id=table_id, key_fields=key, records=records)
    assert again["ok"] and (again["inserted"], again["updated"], again["failed"]) == (0, 1, 1), again
    assert again["verified_total"] == 1, again
    assert await count(conn, org, "键表") == 1 and await count(conn, org, "键表", "WHERE 备注 = 'y'") == 1


async def test_upsert_keeps_distinct_keys_apart(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await _keyed_table(yard, org)
    records = [
        {"时刻": "2024-01-01T10:00:00+08:00", "备注": "x"},
        {"时刻": "2024-01-01T10:00:00Z", "备注": "y"},
    ]
    env = await run(yard, context(org), "upsert", table_id=table_id, key_fields="时刻", records=records)
    assert env["ok"] and (env["inserted"], env["failed"]) == (2, 0), env
    assert await count(conn, org, "键表") == 2


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
    table = await store_table(
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
    table = await store_table(conn, schema, fields)
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


@pytest.mark.spec("§7.5")
async def test_upsert_that_inserts_a_new_row_checks_required(yard: SkillYard, org: str, conn: Any) -> None:
    """§7.5 "required checked on insert only": an upsert record that becomes a new row is an insert."""
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="员工",
        fields=[{"title": "工号", "uidt": "文本"}, {"title": "姓名", "uidt": "文本", "required": True}],
    )
    env = await run(yard, ctx, "upsert", table_id=made["id"], key_fields=["工号"], records=[{"工号": "E9"}])
    assert env["ok"], env
    assert env["inserted"] == 0 and env["failed"] == 1, env
    assert await count(conn, org, "员工") == 0


@pytest.mark.spec("§7.8")
async def test_upsert_with_repeated_keys_writes_one_row_per_key(yard: SkillYard, org: str, conn: Any) -> None:
    table_id = await make_table(yard, org, rows=3)
    ctx = context(org)
    env = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields="姓名",
        records=[
            {"姓名": "人1", "城市": "北京"},
            {"姓名": "人1", "城市": "深圳"},
            {"姓名": "新", "城市": "北京"},
            {"姓名": "新", "城市": "深圳"},
        ],
    )
    assert env["ok"], env
    assert env["inserted"] + env["updated"] == env["verified_total"] == 2 and env["failed"] == 2, env
    assert await count(conn, org, where="WHERE 姓名 = '新'") == 1
    assert await count(conn, org, where="WHERE 姓名 = '人1'") == 1


async def test_upsert_collapses_keys_that_are_equal_after_conversion(yard: SkillYard, org: str, conn: Any) -> None:
    """actions.md: "A record whose key values match an existing row updates it; otherwise it is inserted." Two
    records of one batch whose keys are the same value once converted (1,001 and 1001; one instant written with two
    offsets) write one row per key, as the same key written twice does."""
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="打卡",
        fields=[
            {"title": "编号", "uidt": "整数"},
            {"title": "时刻", "uidt": "日期时间"},
            {"title": "备注", "uidt": "文本"},
        ],
    )
    table_id = made["id"]
    by_number = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields="编号",
        records=[{"编号": "1,001", "备注": "a"}, {"编号": 1001, "备注": "b"}],
    )
    assert by_number["ok"], by_number
    assert await count(conn, org, "打卡", "WHERE 编号 = 1001") == 1
    instants = [
        {"时刻": "2024-01-01T10:00:00+08:00", "备注": "x"},
        {"时刻": "2024-01-01T02:00:00Z", "备注": "y"},
    ]
    first = await run(yard, ctx, "upsert", table_id=table_id, key_fields="时刻", records=instants)
    after_first = await count(conn, org, "打卡", "WHERE 时刻 = '2024-01-01T02:00:00Z'")
    again = await run(yard, ctx, "upsert", table_id=table_id, key_fields="时刻", records=instants)
    after_again = await count(conn, org, "打卡", "WHERE 时刻 = '2024-01-01T02:00:00Z'")
    assert first["ok"] and again["ok"] and after_first == after_again == 1, (first, after_first, again, after_again)


async def test_upsert_with_several_key_fields_and_missing_keys(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org, rows=3)  # 人0/E0, 人1/E1, 人2/E2
    env = await run(
        yard,
        ctx,
        "upsert",
        table_id=table_id,
        key_fields=["姓名", "工号"],
        records=[
            {"姓名": "人1", "工号": "E1", "城市": "北京"},  # matches both keys → update
            {"姓名": "人1", "工号": "E2", "城市": "深圳"},  # matches one key only → insert
            {"姓名": "人9", "城市": "深圳"},  # a key field missing → fails alone
            {"姓名": "人8", "工号": "", "城市": "深圳"},  # a key field empty → fails alone
        ],
    )
    assert env["ok"], env
    assert (env["inserted"], env["updated"], env["failed"]) == (1, 1, 2), env
    assert sorted(e["row"] for e in env["errors"]) == [3, 4], env
    assert env["verified_total"] == 2, env
    assert await count(conn, org) == 4
    bad = await run(yard, ctx, "upsert", table_id=table_id, key_fields=["不存在"], records=[{"姓名": "x"}])
    assert bad["ok"] is False and bad["need_param"] == "key_fields", bad


async def test_flat_key_fields_are_a_parameter_not_a_credential(yard: SkillYard, org: str, conn: Any) -> None:
    """Hardening issue 3: key_fields at the top level (§7: the payload may be flat) was stripped as a credential."""
    table_id = await make_table(yard, org)
    flat = {"action": "upsert", "table_id": table_id, "key_fields": ["工号"], "records": [{"工号": "E1", "姓名": "a"}]}
    first = await yard.run("datatable", flat, context=context(org))
    assert first["ok"] and first["inserted"] == 1, first
    flat["records"] = [{"工号": "E1", "姓名": "b"}]
    second = await yard.run("datatable", flat, context=context(org))
    assert second["ok"] and second["updated"] == 1, second
    assert await count(conn, org) == 1


async def test_concurrent_upserts_of_the_same_keys_never_duplicate_them(yard: SkillYard, org: str, conn: Any) -> None:
    """Hardening issue 2: 20 concurrent upserts of the same 20 keys into a table without a unique constraint left
    80-260 rows; writers of the same keys are serialised (§7.8.6: upsert must not rely on a constraint)."""
    import asyncio

    table_id = await make_table(yard, org)
    records = [{"工号": f"K{i}", "姓名": "x"} for i in range(20)]

    async def one(n: int) -> dict[str, Any]:
        return await run(yard, context(org), "upsert", table_id=table_id, key_fields=["工号"], records=records)

    results = await asyncio.gather(*(one(n) for n in range(20)))
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]][:1]
    assert sum(r["inserted"] for r in results) == 20
    assert await count(conn, org) == 20
