"""The import's rows made ready for COPY (importer/prepare.py): mapping, defaults, stamp, errors and memoised
conversion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from skillyard.builtin_skills.datatable.importer import prepare, staging
from skillyard.builtin_skills.datatable.rows.errors import RowsError

from skillyard import SkillYard
from support.datatable import context, count, make_table, run, write_json
from support.datatable.importer import IMPORT_FIELDS, count_rows, person, write_rows


async def test_mapping_and_defaults(conn, table, workspace: Path) -> None:
    data = [{"name": f"n{i}", "no": i, "dept": None if i % 2 else "销售"} for i in range(1, 201)]
    path = write_rows(workspace, "m.json", data)
    result = await staging.insert_from_file(
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
    path = write_rows(workspace, "d.json", [{"工号": i} for i in range(120)])
    result = await staging.insert_from_file(conn, table, path, workspace=workspace, defaults={"姓名": "匿名"})
    assert result["inserted"] == 120 and result["failed"] == 0


async def test_bad_mapping_defaults_and_on_conflict_refused(conn, table, workspace: Path) -> None:
    path = write_rows(workspace, "x.json", [person(1)])
    with pytest.raises(RowsError, match="unknown field") as info:
        await staging.insert_from_file(conn, table, path, workspace=workspace, mapping={"不存在": "a"})
    assert info.value.need_param == "mapping"
    with pytest.raises(RowsError) as info:
        await staging.insert_from_file(conn, table, path, workspace=workspace, defaults={"部门": "财务"})
    assert info.value.need_param == "defaults"
    with pytest.raises(RowsError, match="on_conflict"):
        await staging.insert_from_file(conn, table, path, workspace=workspace, on_conflict="update")
    assert await count_rows(conn, table) == 0


async def test_stamp_forces_owner(conn, table, workspace: Path) -> None:
    path = write_rows(workspace, "s.json", [person(i) for i in range(150)])
    result = await staging.insert_from_file(conn, table, path, workspace=workspace, stamp={"负责人": "E007"})
    assert result["inserted"] == 150
    blank = write_rows(workspace, "blank.json", [{"姓名": ""}, {"备注": "x"}] * 60)
    empty = await staging.insert_from_file(conn, table, blank, workspace=workspace, stamp={"负责人": "E007"})
    assert empty["inserted"] == 0 and empty["skipped"] == 120  # the stamp alone does not make a row
    assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified} WHERE 负责人 = 'E007'") == 150
    with pytest.raises(RowsError) as info:
        await staging.insert_from_file(conn, table, path, workspace=workspace, stamp={"owner": "E007"})
    assert info.value.error_type == "config"


async def test_errors_capped_at_twenty(conn, table, workspace: Path) -> None:
    data = [{"姓名": f"n{i}", "工号": "x"} for i in range(130)]
    path = write_rows(workspace, "bad.json", data)
    result = await staging.insert_from_file(conn, table, path, workspace=workspace)
    assert result["inserted"] == 0 and result["failed"] == 130 and len(result["errors"]) == 20
    assert [e["row"] for e in result["errors"]] == list(range(1, 21))
    assert result["verified_total"] == 0


def test_memoized_validation_matches_plain() -> None:
    from skillyard.builtin_skills.datatable.fields import types as field_types
    from skillyard.builtin_skills.datatable.fields import validator as row_validator

    defs = [field_types.parse_field(f) for f in IMPORT_FIELDS]
    columns = [f.title for f in defs]
    source = [person(i) for i in range(6000)]
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
    plain = prepare.Prepared(row_validator.RowValidator(defs), columns, {}, {}, {})
    validator = row_validator.RowValidator(defs)
    prepare.memoize(validator)
    memo = prepare.Prepared(validator, columns, {}, {}, {})
    assert memo.chunk(items) == plain.chunk(items)
    assert memo.errors.items == plain.errors.items and memo.errors.failed == plain.errors.failed > 0


def test_memoized_converters_are_the_ones_validation_uses() -> None:
    """memoize must reach the validator's row path (a regression once made every import convert every value)."""
    from skillyard.builtin_skills.datatable.fields import types as field_types
    from skillyard.builtin_skills.datatable.fields import validator as row_validator
    from skillyard.builtin_skills.datatable.importer import prepare

    validator = row_validator.RowValidator([field_types.parse_field({"title": "日期", "uidt": "日期"})])
    original = validator.converters()["日期"]
    calls = []

    def counting(value):
        calls.append(value)
        return original(value)

    validator.set_converter("日期", counting)
    prepare.memoize(validator)
    for _ in range(100):
        values, _, errors = validator.validate({"日期": "2026-01-01"}, insert=True)
        assert not errors and str(values["日期"]) == "2026-01-01"
    assert len(calls) == 1


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.spec("§7.8.7")
async def test_insert_from_file_errors_are_capped_but_counted(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    rel = write_json(yard, ctx, "import/bad.json", [{"姓名": f"x{i}", "金额": "5万"} for i in range(300)])
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] and env["failed"] == 300 and env["inserted"] == 0 and env["verified_total"] == 0, env
    assert 0 < len(env["errors"]) < 300


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
async def test_import_rows_that_are_not_objects_fail_alone(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    rel = write_json(yard, ctx, "import/mixed.json", [1, "x", None, [1], {"姓名": "ok"}, True])
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] and (env["inserted"], env["failed"], env["verified_total"]) == (1, 5, 1), env
    assert [e["row"] for e in env["errors"]] == [1, 2, 3, 4, 6]


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
async def test_errors_list_is_capped_at_20_but_failed_counts_all(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    rows = [{"姓名": f"n{i}", "金额": "1万"} for i in range(35)]
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=write_json(yard, ctx, "import/e.json", rows))
    assert env["ok"] and env["failed"] == 35 and len(env["errors"]) == 20, env
    assert [e["row"] for e in env["errors"]] == list(range(1, 21))
    batch = await run(yard, ctx, "insert_batch", table_id=table_id, records=rows)
    assert batch["ok"] and batch["failed"] == 35 and len(batch["errors"]) == 20, batch


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
async def test_import_defaults_fill_required_blanks_and_bad_defaults_are_refused(
    yard: SkillYard, org: str, conn: Any
) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    rows = [{"name": f"n{i}"} for i in range(3)] + [{"name": ""}, {"金额": 5}]
    rel = write_json(yard, ctx, "import/d.json", rows)
    env = await run(
        yard,
        ctx,
        "insert_from_file",
        table_id=table_id,
        file=rel,
        mapping={"姓名": "name"},
        defaults={"姓名": "无名", "城市": "深圳"},
    )
    assert env["ok"] and env["inserted"] == 5 and env["failed"] == 0, env
    assert await count(conn, org, where="WHERE 姓名 = '无名'") == 2
    assert await count(conn, org, where="WHERE 城市 = '深圳'") == 5
    for params in ({"defaults": {"金额": "3万"}}, {"defaults": {"城市": "广州"}}, {"mapping": {"不存在": "name"}}):
        bad = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel, **params)
        assert bad["ok"] is False and bad["need_param"] in ("defaults", "mapping"), (params, bad)
    assert await count(conn, org) == 5


@pytest.mark.spec("§7.5")
async def test_insert_from_file_reports_unknown_fields(yard: SkillYard, org: str) -> None:
    """issue 4 / §7.5: unknown fields dropped and reported — on every insert path, insert_from_file included."""
    table_id = await make_table(yard, org)
    ctx = context(org)
    rel = write_json(yard, ctx, "import/u.json", [{"姓名": f"n{i}", "外号": "x"} for i in range(3)])
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] and env["inserted"] == 3 and env.get("dropped") == ["外号"], env
