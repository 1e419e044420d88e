"""insert_from_file (importer/staging.py, spec §7.4 批量路径): COPY into a staging table, duplicate checks,
on_conflict=skip and the move into the table."""

from __future__ import annotations

import json
import os
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from skillyard.builtin_skills.datatable.importer import staging
from skillyard.builtin_skills.datatable.rows.errors import RowsError

from skillyard import SkillYard
from support.datatable import context, count, make_table, run, session_workspace, store_table, write_json
from support.datatable.importer import count_rows, person, write_rows

UNIQUE_FIELDS: list[dict[str, Any]] = [
    {"title": "编号", "uidt": "文本", "unique": True},
    {"title": "值", "uidt": "整数"},
]


@pytest.mark.spec("§7.4")
async def test_imports_valid_rows_and_reports_invalid(conn, table, workspace: Path) -> None:
    data = [person(i) for i in range(1, 301)]
    data[9] = {**data[9], "工号": "1.5"}  # row 10: decimals in an integer
    data[19] = {**data[19], "部门": "财务"}  # row 20: not an option
    data[29] = {"工号": 30}  # row 30: required 姓名 missing
    data[39] = {"姓名": "  ", "未知": 1}  # row 40: empty → skipped
    data[49] = "not an object"  # row 50
    path = write_rows(workspace, "imports/people.json", data)
    result = await staging.insert_from_file(conn, table, path, workspace=workspace)
    assert result["inserted"] == 295
    assert result["failed"] == 4 and result["skipped"] == 1
    assert [e["row"] for e in result["errors"]] == [10, 20, 30, 50]
    assert "整数" in result["errors"][0]["error"] or "decimal" in result["errors"][0]["error"]
    assert "姓名" in result["errors"][2]["error"]
    assert result["verified_total"] == 295 == await count_rows(conn, table)
    assert result["dropped"] == ["未知"]
    assert path.exists()  # never deleted here (§7.4)
    first = await conn.fetchrow(f"SELECT * FROM {table.qualified} ORDER BY id LIMIT 1")
    assert first["姓名"] == "员工1" and first["工号"] == 1 and first["薪资"] == Decimal("1001.50")
    assert first["入职日期"] == date(2024, 1, 15) and first["技能"] == ["Go"]
    assert json.loads(first["扩展"]) == {"级别": 1}
    ids = [r["id"] for r in await conn.fetch(f"SELECT id FROM {table.qualified} ORDER BY 工号")]
    assert ids == sorted(ids)  # file order kept


async def test_relative_path_and_json_lines(conn, table, workspace: Path) -> None:
    data = [person(i) for i in range(1, 151)]
    path = write_rows(workspace, "imports/people.jsonl", data, lines=True)
    with path.open("a", encoding="utf-8") as f:
        f.write("\n{broken\n")  # line 152 (151 is blank)
    result = await staging.insert_from_file(conn, table, "imports/people.jsonl", workspace=workspace)
    assert result["inserted"] == 150 and result["verified_total"] == 150
    assert result["failed"] == 1 and result["errors"][0]["row"] == 152
    assert "not valid JSON" in result["errors"][0]["error"]


async def test_on_conflict_skip_with_unique_field(conn, schema, workspace: Path) -> None:
    table = await store_table(conn, schema, UNIQUE_FIELDS)
    await conn.execute(f"INSERT INTO {table.qualified} (编号, 值) VALUES ('k5', 0), ('k6', 0)")
    data = [{"编号": f"k{i}", "值": i} for i in range(200)] + [{"编号": "k10", "值": -1}]
    path = write_rows(workspace, "u.json", data)
    result = await staging.insert_from_file(conn, table, path, workspace=workspace, on_conflict="skip")
    assert result["inserted"] == 198 and result["skipped"] == 3 and result["skipped_conflicts"] == 3
    assert result["failed"] == 0 and result["verified_total"] == 198
    assert await conn.fetchval(f"SELECT 值 FROM {table.qualified} WHERE 编号 = 'k10'") == 10  # first one wins


async def test_unique_duplicates_without_skip_are_failed_rows(conn, schema, workspace: Path) -> None:
    table = await store_table(conn, schema, UNIQUE_FIELDS)
    await conn.execute(f"INSERT INTO {table.qualified} (编号, 值) VALUES ('k5', 0)")
    data = [{"编号": f"k{i}", "值": i} for i in range(150)] + [{"编号": "k10", "值": -1}, {"值": 7}, {"值": 8}]
    path = write_rows(workspace, "u.json", data)
    result = await staging.insert_from_file(conn, table, path, workspace=workspace)
    assert result["inserted"] == 151 and result["failed"] == 2 and result["skipped"] == 0  # NULLs never collide
    assert [e["row"] for e in result["errors"]] == [6, 151]
    assert "another row of the table" in result["errors"][0]["error"]
    assert "earlier row of the file" in result["errors"][1]["error"]
    assert result["verified_total"] == 151 and await count_rows(conn, table) == 152


async def test_on_conflict_skip_without_unique_field_refused(conn, table, workspace: Path) -> None:
    path = write_rows(workspace, "x.json", [person(i) for i in range(120)])
    with pytest.raises(RowsError, match="unique") as info:
        await staging.insert_from_file(conn, table, path, workspace=workspace, on_conflict="skip")
    assert info.value.need_param == "on_conflict"
    assert await count_rows(conn, table) == 0


async def test_single_field_table(conn, schema, workspace: Path) -> None:
    table = await store_table(conn, schema, [{"title": "名称", "uidt": "文本"}])
    path = write_rows(workspace, "one.json", [{"名称": f"r{i}"} for i in range(101)])
    result = await staging.insert_from_file(conn, table, path, workspace=workspace)
    assert result["inserted"] == result["verified_total"] == 101


async def test_row_level_database_error_falls_back_row_by_row(conn, schema, workspace: Path) -> None:
    table = await store_table(conn, schema, [{"title": "名称", "uidt": "文本"}, {"title": "值", "uidt": "整数"}])
    await conn.execute(f"ALTER TABLE {table.qualified} ADD CONSTRAINT positive CHECK (值 > 0)")
    data = [{"名称": f"r{i}", "值": i} for i in range(0, 130)]  # row 1 has 值 = 0
    path = write_rows(workspace, "c.json", data)
    result = await staging.insert_from_file(conn, table, path, workspace=workspace)
    assert result["inserted"] == 129 and result["failed"] == 1 and result["errors"][0]["row"] == 1
    assert result["verified_total"] == 129


async def test_file_outside_workspace_refused(conn, table, tmp_path: Path, workspace: Path) -> None:
    outside = write_rows(tmp_path, "outside.json", [person(1)])
    for given in (outside, "../outside.json", str(outside)):
        with pytest.raises(RowsError, match="outside the workspace") as info:
            await staging.insert_from_file(conn, table, given, workspace=workspace)
        assert info.value.need_param == "file"
    os.symlink(outside, workspace / "link.json")
    with pytest.raises(RowsError, match="outside the workspace"):
        await staging.insert_from_file(conn, table, "link.json", workspace=workspace)
    with pytest.raises(RowsError, match="does not exist"):
        await staging.insert_from_file(conn, table, "missing.json", workspace=workspace)


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
            await staging.insert_from_file(conn, table, name, workspace=workspace)
    assert await count_rows(conn, table) == 0


async def test_runs_inside_callers_transaction(conn, table, workspace: Path) -> None:
    path = write_rows(workspace, "t.json", [person(i) for i in range(110)])
    tx = conn.transaction()
    await tx.start()
    result = await staging.insert_from_file(conn, table, path, workspace=workspace)
    assert result["verified_total"] == 110
    await tx.rollback()
    assert await count_rows(conn, table) == 0
    again = await staging.insert_from_file(conn, table, path, workspace=workspace)  # staging name never collides
    assert again["inserted"] == 110


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.spec("§7.8.7")
async def test_insert_from_file_mapping_defaults_skip_and_errors(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="会员",
        fields=[
            {"title": "编号", "uidt": "文本", "unique": True},
            {"title": "姓名", "uidt": "文本", "required": True},
            {"title": "等级", "uidt": "单选", "options": ["金", "银"]},
            {"title": "积分", "uidt": "整数"},
        ],
    )
    table_id = made["id"]
    first = await run(yard, ctx, "insert", table_id=table_id, data={"编号": "M0", "姓名": "老会员"})
    assert first["ok"]
    rows = [{"no": f"M{i}", "name": f"会员{i}", "pts": i} for i in range(150)]
    rows[10]["pts"] = "3万"  # magnitude word → failed
    rows[20]["name"] = ""  # required → failed
    rows.append({"no": "M5", "name": "重复"})  # duplicate within the file → skipped with on_conflict=skip
    rel = write_json(yard, ctx, "import/members.json", rows)
    env = await run(
        yard,
        ctx,
        "insert_from_file",
        table_id=table_id,
        file=rel,
        mapping={"编号": "no", "姓名": "name", "积分": "pts"},
        defaults={"等级": "银"},
        on_conflict="skip",
    )
    assert env["ok"], env
    # M0 exists already and M5 repeats: 2 skipped; rows 11 and 21 fail; the rest go in
    assert (env["inserted"], env["skipped"], env["failed"]) == (150 - 1 - 2, 2, 2), env
    assert env["verified_total"] == env["inserted"]
    assert sorted(e["row"] for e in env["errors"]) == [11, 21] and all(e["error"] for e in env["errors"])
    assert await count(conn, org, "会员") == 1 + env["inserted"]
    assert await count(conn, org, "会员", "WHERE 等级 = '银'") == env["inserted"]
    assert (session_workspace(yard, ctx) / rel).exists(), "datatable does not delete the import file"


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.spec("§7")
async def test_flat_file_parameter_imports_the_same_file_as_payload(yard: SkillYard, org: str, conn: Any) -> None:
    """§7: "payload 中的参数也允许平铺在顶层，由入口自动归拢"; SKILL.md recommends a subdirectory such as import/.
    A flat call must import workspace/import/rows.json, not another file that happens to share its name."""
    table_id = await make_table(yard, org)
    ctx = context(org)
    write_json(yard, ctx, "rows.json", [{"姓名": "根目录的"}])
    rel = write_json(yard, ctx, "import/rows.json", [{"姓名": "导入的"} for _ in range(3)])
    nested = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert nested["ok"] and nested["inserted"] == 3, nested
    flat = await yard.run("datatable", {"action": "insert_from_file", "table_id": table_id, "file": rel}, context=ctx)
    got = [r["姓名"] for r in (await run(yard, ctx, "query", table_id=table_id, limit=10, sort="id"))["list"]][3:]
    assert flat["ok"] and flat["inserted"] == 3 and got == ["导入的"] * 3, (flat, got)


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.spec("§7.8.2–3")
@pytest.mark.usefixtures("db_env")
async def test_a_stopped_import_leaves_nothing_behind(org: str, conn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """§7.8.2–3 and docs: "on any failure it rolls back first … so nothing is half written": the wall clock stops
    a long import in the middle; the table holds either every row or none."""
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", "1")
    async with SkillYard() as y:
        table_id = await make_table(y, org)
        ctx = context(org)
        rows = [{"姓名": f"n{i}", "工号": f"E{i % 50}", "城市": "上海", "金额": i} for i in range(100000)]
        rel = write_json(y, ctx, "import/huge.json", rows)
        env = await run(y, ctx, "insert_from_file", table_id=table_id, file=rel)
        stored = await count(conn, org)
        assert stored == (100000 if env["ok"] else 0), (env, stored)
        after = await run(y, ctx, "insert", table_id=table_id, data={"姓名": "之后"})
        assert after["ok"], after


async def test_insert_from_file_unique_duplicates_by_row_number(yard: SkillYard, org: str, conn: Any) -> None:
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="会员",
        fields=[{"title": "编号", "uidt": "文本", "unique": True}, {"title": "积分", "uidt": "整数"}],
    )
    rows = [{"编号": f"M{i}", "积分": i} for i in range(120)]
    rows[50]["编号"] = "M3"  # repeats row 4
    rows[70]["积分"] = "7万"
    rel = write_json(yard, ctx, "import/m.json", rows)
    env = await run(yard, ctx, "insert_from_file", table_id=made["id"], file=rel)
    assert env["ok"] and (env["inserted"], env["failed"]) == (118, 2), env
    assert sorted(e["row"] for e in env["errors"]) == [51, 71], env
    assert env["verified_total"] == 118 and await count(conn, org, "会员") == 118
