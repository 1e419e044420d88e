"""insert_from_file of the datatable skill against a real PostgreSQL (spec §7.3, §7.4 批量路径)."""

from __future__ import annotations

import json
import os
import uuid
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from support.datatable import load_datatable_module

store_schema = load_datatable_module("store_schema")
store_tables = load_datatable_module("store_tables")
rows_errors = load_datatable_module("rows_errors")
importer = load_datatable_module("importer")
importer_rows = load_datatable_module("importer_rows")
RowsError = rows_errors.RowsError

FIELDS: list[dict[str, Any]] = [
    {"title": "姓名", "uidt": "文本", "required": True},
    {"title": "工号", "uidt": "整数"},
    {"title": "薪资", "uidt": "金额"},
    {"title": "入职日期", "uidt": "日期"},
    {"title": "在职", "uidt": "勾选"},
    {"title": "部门", "uidt": "单选", "options": ["研发", "销售", "行政"]},
    {"title": "技能", "uidt": "多选", "options": ["Python", "SQL", "Go"]},
    {"title": "扩展", "uidt": "JSON"},
    {"title": "负责人", "uidt": "文本"},
]


UNIQUE_FIELDS: list[dict[str, Any]] = [
    {"title": "编号", "uidt": "文本", "unique": True},
    {"title": "值", "uidt": "整数"},
]


@pytest.fixture
def schema() -> str:
    return store_schema.schema_for("Imp-" + uuid.uuid4().hex[:12])


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


async def _make(conn: asyncpg.Connection, schema: str, fields: list[dict[str, Any]] = FIELDS, title: str = "员工"):
    created = await store_tables.create_table(conn, schema, title, fields)
    return await store_schema.resolve_table(conn, schema, created["id"])


@pytest.fixture
async def table(conn: asyncpg.Connection, schema: str):
    return await _make(conn, schema)


def _person(i: int) -> dict[str, Any]:
    return {
        "姓名": f"员工{i}",
        "工号": i,
        "薪资": f"{1000 + i}.50",
        "入职日期": "2024-01-15",
        "在职": i % 2 == 0,
        "部门": ["研发", "销售", "行政"][i % 3],
        "技能": ["Python", "SQL"] if i % 4 == 0 else "Go",
        "扩展": {"级别": i % 5},
        "负责人": "u1",
    }


def _write(workspace: Path, name: str, rows: list[Any], *, lines: bool = False) -> Path:
    path = workspace / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if lines:
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    return path


async def _count(conn: asyncpg.Connection, table: Any) -> int:
    return int(await conn.fetchval(f"SELECT count(*) FROM {table.qualified}"))


# --------------------------------------------------------------------------------------------------------------------


async def test_imports_valid_rows_and_reports_invalid(conn, table, workspace: Path) -> None:
    data = [_person(i) for i in range(1, 301)]
    data[9] = {**data[9], "工号": "1.5"}  # row 10: decimals in an integer
    data[19] = {**data[19], "部门": "财务"}  # row 20: not an option
    data[29] = {"工号": 30}  # row 30: required 姓名 missing
    data[39] = {"姓名": "  ", "未知": 1}  # row 40: empty → skipped
    data[49] = "not an object"  # row 50
    path = _write(workspace, "imports/people.json", data)
    result = await importer.insert_from_file(conn, table, path, workspace=workspace)
    assert result["inserted"] == 295
    assert result["failed"] == 4 and result["skipped"] == 1
    assert [e["row"] for e in result["errors"]] == [10, 20, 30, 50]
    assert "整数" in result["errors"][0]["error"] or "decimal" in result["errors"][0]["error"]
    assert "姓名" in result["errors"][2]["error"]
    assert result["verified_total"] == 295 == await _count(conn, table)
    assert result["dropped"] == ["未知"]
    assert path.exists()  # never deleted here (§7.4)
    first = await conn.fetchrow(f"SELECT * FROM {table.qualified} ORDER BY id LIMIT 1")
    assert first["姓名"] == "员工1" and first["工号"] == 1 and first["薪资"] == Decimal("1001.50")
    assert first["入职日期"] == date(2024, 1, 15) and first["技能"] == ["Go"]
    assert json.loads(first["扩展"]) == {"级别": 1}
    ids = [r["id"] for r in await conn.fetch(f"SELECT id FROM {table.qualified} ORDER BY 工号")]
    assert ids == sorted(ids)  # file order kept


async def test_relative_path_and_json_lines(conn, table, workspace: Path) -> None:
    data = [_person(i) for i in range(1, 151)]
    path = _write(workspace, "imports/people.jsonl", data, lines=True)
    with path.open("a", encoding="utf-8") as f:
        f.write("\n{broken\n")  # line 152 (151 is blank)
    result = await importer.insert_from_file(conn, table, "imports/people.jsonl", workspace=workspace)
    assert result["inserted"] == 150 and result["verified_total"] == 150
    assert result["failed"] == 1 and result["errors"][0]["row"] == 152
    assert "not valid JSON" in result["errors"][0]["error"]


async def test_mapping_and_defaults(conn, table, workspace: Path) -> None:
    data = [{"name": f"n{i}", "no": i, "dept": None if i % 2 else "销售"} for i in range(1, 201)]
    path = _write(workspace, "m.json", data)
    result = await importer.insert_from_file(
        conn,
        table,
        path,
        workspace=workspace,
        mapping={"姓名": "name", "工号": "no", "部门": "dept"},
        defaults={"部门": "研发", "负责人": "sys"},
    )
    assert result["inserted"] == 200 and result["failed"] == 0 and "dropped" not in result
    counts = dict(await conn.fetch(f"SELECT 部门, count(*) FROM {table.qualified} GROUP BY 部门"))
    assert counts == {"研发": 100, "销售": 100}
    assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified} WHERE 负责人 = 'sys'") == 200


async def test_defaults_fill_required(conn, table, workspace: Path) -> None:
    path = _write(workspace, "d.json", [{"工号": i} for i in range(120)])
    result = await importer.insert_from_file(conn, table, path, workspace=workspace, defaults={"姓名": "匿名"})
    assert result["inserted"] == 120 and result["failed"] == 0


async def test_bad_mapping_defaults_and_on_conflict_refused(conn, table, workspace: Path) -> None:
    path = _write(workspace, "x.json", [_person(1)])
    with pytest.raises(RowsError, match="unknown field") as info:
        await importer.insert_from_file(conn, table, path, workspace=workspace, mapping={"不存在": "a"})
    assert info.value.need_param == "mapping"
    with pytest.raises(RowsError) as info:
        await importer.insert_from_file(conn, table, path, workspace=workspace, defaults={"部门": "财务"})
    assert info.value.need_param == "defaults"
    with pytest.raises(RowsError, match="on_conflict"):
        await importer.insert_from_file(conn, table, path, workspace=workspace, on_conflict="update")
    assert await _count(conn, table) == 0


async def test_stamp_forces_owner(conn, table, workspace: Path) -> None:
    path = _write(workspace, "s.json", [_person(i) for i in range(150)])
    result = await importer.insert_from_file(conn, table, path, workspace=workspace, stamp={"负责人": "E007"})
    assert result["inserted"] == 150
    blank = _write(workspace, "blank.json", [{"姓名": ""}, {"备注": "x"}] * 60)
    empty = await importer.insert_from_file(conn, table, blank, workspace=workspace, stamp={"负责人": "E007"})
    assert empty["inserted"] == 0 and empty["skipped"] == 120  # the stamp alone does not make a row
    assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified} WHERE 负责人 = 'E007'") == 150
    with pytest.raises(RowsError) as info:
        await importer.insert_from_file(conn, table, path, workspace=workspace, stamp={"owner": "E007"})
    assert info.value.error_type == "config"


async def test_on_conflict_skip_with_unique_field(conn, schema, workspace: Path) -> None:
    table = await _make(conn, schema, UNIQUE_FIELDS)
    await conn.execute(f"INSERT INTO {table.qualified} (编号, 值) VALUES ('k5', 0), ('k6', 0)")
    data = [{"编号": f"k{i}", "值": i} for i in range(200)] + [{"编号": "k10", "值": -1}]
    path = _write(workspace, "u.json", data)
    result = await importer.insert_from_file(conn, table, path, workspace=workspace, on_conflict="skip")
    assert result["inserted"] == 198 and result["skipped"] == 3 and result["skipped_conflicts"] == 3
    assert result["failed"] == 0 and result["verified_total"] == 198
    assert await conn.fetchval(f"SELECT 值 FROM {table.qualified} WHERE 编号 = 'k10'") == 10  # first one wins


async def test_unique_duplicates_without_skip_are_failed_rows(conn, schema, workspace: Path) -> None:
    table = await _make(conn, schema, UNIQUE_FIELDS)
    await conn.execute(f"INSERT INTO {table.qualified} (编号, 值) VALUES ('k5', 0)")
    data = [{"编号": f"k{i}", "值": i} for i in range(150)] + [{"编号": "k10", "值": -1}, {"值": 7}, {"值": 8}]
    path = _write(workspace, "u.json", data)
    result = await importer.insert_from_file(conn, table, path, workspace=workspace)
    assert result["inserted"] == 151 and result["failed"] == 2 and result["skipped"] == 0  # NULLs never collide
    assert [e["row"] for e in result["errors"]] == [6, 151]
    assert "another row of the table" in result["errors"][0]["error"]
    assert "earlier row of the file" in result["errors"][1]["error"]
    assert result["verified_total"] == 151 and await _count(conn, table) == 152


async def test_on_conflict_skip_without_unique_field_refused(conn, table, workspace: Path) -> None:
    path = _write(workspace, "x.json", [_person(i) for i in range(120)])
    with pytest.raises(RowsError, match="unique") as info:
        await importer.insert_from_file(conn, table, path, workspace=workspace, on_conflict="skip")
    assert info.value.need_param == "on_conflict"
    assert await _count(conn, table) == 0


async def test_single_field_table(conn, schema, workspace: Path) -> None:
    table = await _make(conn, schema, [{"title": "名称", "uidt": "文本"}])
    path = _write(workspace, "one.json", [{"名称": f"r{i}"} for i in range(101)])
    result = await importer.insert_from_file(conn, table, path, workspace=workspace)
    assert result["inserted"] == result["verified_total"] == 101


async def test_row_level_database_error_falls_back_row_by_row(conn, schema, workspace: Path) -> None:
    table = await _make(conn, schema, [{"title": "名称", "uidt": "文本"}, {"title": "值", "uidt": "整数"}])
    await conn.execute(f"ALTER TABLE {table.qualified} ADD CONSTRAINT positive CHECK (值 > 0)")
    data = [{"名称": f"r{i}", "值": i} for i in range(0, 130)]  # row 1 has 值 = 0
    path = _write(workspace, "c.json", data)
    result = await importer.insert_from_file(conn, table, path, workspace=workspace)
    assert result["inserted"] == 129 and result["failed"] == 1 and result["errors"][0]["row"] == 1
    assert result["verified_total"] == 129


async def test_file_outside_workspace_refused(conn, table, tmp_path: Path, workspace: Path) -> None:
    outside = _write(tmp_path, "outside.json", [_person(1)])
    for given in (outside, "../outside.json", str(outside)):
        with pytest.raises(RowsError, match="outside the workspace") as info:
            await importer.insert_from_file(conn, table, given, workspace=workspace)
        assert info.value.need_param == "file"
    os.symlink(outside, workspace / "link.json")
    with pytest.raises(RowsError, match="outside the workspace"):
        await importer.insert_from_file(conn, table, "link.json", workspace=workspace)
    with pytest.raises(RowsError, match="does not exist"):
        await importer.insert_from_file(conn, table, "missing.json", workspace=workspace)


async def test_bad_files(conn, table, workspace: Path) -> None:
    (workspace / "empty.json").write_text("", encoding="utf-8")
    (workspace / "broken.json").write_text('[{"姓名": "a"},', encoding="utf-8")
    (workspace / "none.json").write_text("[]", encoding="utf-8")
    (workspace / "text.json").write_text("hello", encoding="utf-8")
    (workspace / "pretty.json").write_text('{\n "姓名": "a"\n}\n', encoding="utf-8")
    for name, pattern in (
        ("empty.json", "empty or not JSON"),
        ("broken.json", "not valid JSON"),
        ("none.json", "no rows"),
        ("text.json", "not JSON"),
        ("pretty.json", "neither a JSON array nor JSON Lines"),
    ):
        with pytest.raises(RowsError, match=pattern):
            await importer.insert_from_file(conn, table, name, workspace=workspace)
    assert await _count(conn, table) == 0


async def test_errors_capped_at_twenty(conn, table, workspace: Path) -> None:
    data = [{"姓名": f"n{i}", "工号": "x"} for i in range(130)]
    path = _write(workspace, "bad.json", data)
    result = await importer.insert_from_file(conn, table, path, workspace=workspace)
    assert result["inserted"] == 0 and result["failed"] == 130 and len(result["errors"]) == 20
    assert [e["row"] for e in result["errors"]] == list(range(1, 21))
    assert result["verified_total"] == 0


async def test_runs_inside_callers_transaction(conn, table, workspace: Path) -> None:
    path = _write(workspace, "t.json", [_person(i) for i in range(110)])
    tx = conn.transaction()
    await tx.start()
    result = await importer.insert_from_file(conn, table, path, workspace=workspace)
    assert result["verified_total"] == 110
    await tx.rollback()
    assert await _count(conn, table) == 0
    again = await importer.insert_from_file(conn, table, path, workspace=workspace)  # staging name never collides
    assert again["inserted"] == 110


def test_memoized_validation_matches_plain() -> None:
    field_types = load_datatable_module("field_types")
    row_validator = load_datatable_module("row_validator")
    defs = [field_types.parse_field(f) for f in FIELDS]
    columns = [f.title for f in defs]
    source = [_person(i) for i in range(6000)]
    source += [
        {"姓名": "a", "工号": True},  # bool is not an integer, even after 1 was seen
        {"姓名": "b", "工号": 1.0},
        {"姓名": "c", "工号": "1"},
        {"姓名": "d", "部门": "财务"},
        {"姓名": "e", "技能": ["Go", "Rust"]},
        {"姓名": "f", "技能": ["Go", "SQL"]},
        {"姓名": "g", "技能": "Go"},
        {"姓名": "h", "在职": "yes"},
        {"姓名": "i", "在职": 1},
    ] * 3
    items = list(enumerate(source, start=1))
    plain = importer_rows.Prepared(row_validator.RowValidator(defs), columns, {}, {}, {})
    validator = row_validator.RowValidator(defs)
    importer_rows.memoize(validator)
    memo = importer_rows.Prepared(validator, columns, {}, {}, {})
    assert memo.chunk(items) == plain.chunk(items)
    assert memo.errors.items == plain.errors.items and memo.errors.failed == plain.errors.failed > 0


def test_memoized_converters_are_the_ones_validation_uses() -> None:
    """memoize must reach the validator's row path (a regression once made every import convert every value)."""
    importer_rows = load_datatable_module("importer_rows")
    field_types = load_datatable_module("field_types")
    row_validator = load_datatable_module("row_validator")
    validator = row_validator.RowValidator([field_types.parse_field({"title": "日期", "uidt": "日期"})])
    original = validator.converters()["日期"]
    calls = []

    def counting(value):
        calls.append(value)
        return original(value)

    validator.set_converter("日期", counting)
    importer_rows.memoize(validator)
    for _ in range(100):
        values, _, errors = validator.validate({"日期": "2026-01-01"}, insert=True)
        assert not errors and str(values["日期"]) == "2026-01-01"
    assert len(calls) == 1
