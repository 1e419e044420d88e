"""Scaffolding of the permission tests (tests/datatable/permissions/): the tasks table and one access decision."""

from __future__ import annotations

from typing import Any

import asyncpg
from skillyard.builtin_skills.datatable.permissions import access as perm_access

#: 任务, the table of the permission tests (permissions/conftest.py's table).
TASK_FIELDS = [
    {"title": "事项", "uidt": "文本"},
    {"title": "负责人", "uidt": "文本"},
    {"title": "金额", "uidt": "数字"},
]


async def access_for(conn: asyncpg.Connection, schema: str, table: Any, action: str, roles: list[str], **kw: Any):
    """check_access for a member (no structure rights) with SQL allowed, unless ``kw`` says otherwise."""
    kw.setdefault("team_role", "member")
    kw.setdefault("allow_sql", True)
    return await perm_access.check_access(conn, schema, table=table, action=action, roles=roles, **kw)
