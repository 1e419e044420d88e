"""Scaffolding of the import tests (tests/datatable/importer/): the table's fields, rows, files and counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg

#: 员工, the table the import tests fill (importer/conftest.py's table).
IMPORT_FIELDS: list[dict[str, Any]] = [
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


def person(i: int) -> dict[str, Any]:
    """Row ``i`` of a file of employees, every field given (in the forms a user types)."""
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


def write_rows(workspace: Path, name: str, rows: list[Any], *, lines: bool = False) -> Path:
    """``rows`` as a JSON array (or JSON Lines) at ``name`` in the workspace; its path."""
    path = workspace / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if lines:
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    return path


async def count_rows(conn: asyncpg.Connection, table: Any) -> int:
    """The rows of the table, read past the skill."""
    return int(await conn.fetchval(f"SELECT count(*) FROM {table.qualified}"))
