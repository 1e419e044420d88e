"""Scaffolding of the row tests (tests/datatable/rows/): the people and staff tables' rows and the names a query
returns."""

from __future__ import annotations

from typing import Any

import asyncpg
from skillyard.builtin_skills.datatable.rows import read as rows_read

from skillyard import SkillYard
from support.datatable import context, run

#: The fields the parsing tests of filters and query options know.
KNOWN = ["部门", "薪资", "姓名", "入职日期", "标签", "field", "备注"]


async def tag_names(yard: SkillYard, org: str, table_id: str, filters: Any) -> dict[str, Any]:
    """:func:`names` of the tags table, whose rows are named by 名称."""
    return await names(yard, org, table_id, filters, column="名称")


#: 员工, the table of the row functions' tests (rows/conftest.py's table).
PEOPLE_FIELDS: list[dict[str, Any]] = [
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


#: Five employees in the forms users type them (a text amount, an offset, options as a list or a text).
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


async def names_by_number(conn: asyncpg.Connection, table: Any, **kwargs: Any) -> list[str]:
    """The 姓名 the row function query returns (``kwargs`` its parameters), sorted by 工号."""
    result = await rows_read.query(conn, table, sort="工号", **kwargs)
    return [r["姓名"] for r in result["list"]]


#: 员工 of :data:`STAFF` (rows/conftest.py's staff and, without 标签, people_table).
STAFF_FIELDS = [
    {"title": "姓名", "uidt": "文本", "required": True},
    {"title": "部门", "uidt": "单选", "options": ["研发", "销售", "财务"]},
    {"title": "薪资", "uidt": "整数"},
    {"title": "入职", "uidt": "日期"},
    {"title": "备注", "uidt": "文本"},
    {"title": "标签", "uidt": "多选", "options": ["红", "绿", "蓝"]},
]

#: Five employees of 研发 / 销售 / 财务, some with 备注 and 标签.
STAFF = [
    {"姓名": "张三", "部门": "研发", "薪资": 8000, "入职": "2024-01-01", "备注": "Alpha", "标签": ["红"]},
    {"姓名": "李四", "部门": "研发", "薪资": 15000, "入职": "2024-06-01", "标签": ["红", "绿"]},
    {"姓名": "王五", "部门": "销售", "薪资": 20000, "入职": "2025-01-01", "备注": "beta"},
    {"姓名": "赵六", "部门": "财务", "薪资": 30000, "入职": "2025-06-01", "标签": ["蓝"]},
    {"姓名": "钱七", "部门": "销售", "薪资": 5000, "入职": "2023-03-01", "备注": "100%达成", "标签": ["绿", "蓝"]},
]


async def names(
    yard: SkillYard, org: str, table_id: str, filters: Any, *, column: str = "姓名", **extra: Any
) -> dict[str, Any]:
    """query with ``filters`` (and ``extra`` parameters); the reply, with the set of the rows' ``column`` in
    ``names`` when it succeeds."""
    env = await run(yard, context(org), "query", table_id=table_id, filters=filters, **extra)
    if env["ok"]:
        env["names"] = {r[column] for r in env["list"]}
    return env
