"""Errors of the row actions (rows/errors.py, spec §7.8.4): classification by SQLSTATE."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.rows import errors as rows_errors
from skillyard.builtin_skills.datatable.rows import write as rows_write
from skillyard.builtin_skills.datatable.rows.errors import RowsError

from skillyard import SkillYard
from support.datatable import context, run


@pytest.mark.spec("§7.8.4")
async def test_cardinality_violation_is_recoverable(conn: Any) -> None:
    """§7.8.4: classified by SQLSTATE — 21000 (a MERGE target row matched twice) is the caller's input to fix."""
    await conn.execute("CREATE TEMP TABLE twice (k int, v text)")
    await conn.execute("INSERT INTO twice VALUES (1, 'a')")
    with pytest.raises(asyncpg.PostgresError) as info:
        await conn.execute(
            "MERGE INTO twice AS t USING (VALUES (1, 'b'), (1, 'c')) AS s(k, v) ON t.k = s.k "
            "WHEN MATCHED THEN UPDATE SET v = s.v"
        )
    assert info.value.sqlstate == "21000"
    error = rows_errors.classify(info.value)
    assert error.error_type == "recoverable" and error.sqlstate == "21000", error
    assert "send each key once" in str(error) and error.need_param == "records", error


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


async def test_database_errors_are_classified_and_recoverable(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    made = await run(
        yard, ctx, "create_table", table_name="唯一", fields=[{"title": "编号", "uidt": "文本", "unique": True}]
    )
    assert (await run(yard, ctx, "insert", table_id=made["id"], data={"编号": "A"}))["ok"]
    dup = await run(yard, ctx, "insert", table_id=made["id"], data={"编号": "A"})
    assert dup["ok"] is False and dup["error_type"] == "recoverable" and not dup.get("non_retriable"), dup
    assert "编号" in dup["error"] or "A" in dup["error"]
    # the session is usable afterwards
    assert (await run(yard, ctx, "insert", table_id=made["id"], data={"编号": "B"}))["ok"]
