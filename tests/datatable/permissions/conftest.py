"""Fixtures of the permission tests: an organisation schema dropped afterwards and its table of tasks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.rows import write as rows_write

from support.datatable import schema_dropped_afterwards, store_table
from support.datatable.permissions import TASK_FIELDS

#: The rows of the tasks table: two of E1, one of E2, one without an owner.
TASKS = [
    {"事项": "a", "负责人": "E1", "金额": 1},
    {"事项": "b", "负责人": "E1", "金额": 2},
    {"事项": "c", "负责人": "E2", "金额": 3},
    {"事项": "d", "负责人": None, "金额": 4},
]


@pytest.fixture
async def schema(conn: asyncpg.Connection) -> AsyncIterator[str]:
    """A new organisation schema, dropped afterwards with everything in it (grants, policies)."""
    async for name in schema_dropped_afterwards(conn, "Perm"):
        yield name


@pytest.fixture
async def table(conn: asyncpg.Connection, schema: str) -> Any:
    """任务 with the four :data:`TASKS` (负责人 E1, E1, E2 and none), made by the store."""
    info = await store_table(conn, schema, TASK_FIELDS, "任务")
    result = await rows_write.insert_batch(conn, info, TASKS)
    assert result["inserted"] == 4, result
    return info
