"""Fixtures of the import tests: a workspace folder and the table the rows go into."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.store import schema as store_schema

from support.datatable import store_table
from support.datatable.importer import IMPORT_FIELDS


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The workspace folder an import reads from (empty)."""
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
async def table(conn: asyncpg.Connection, schema: str) -> store_schema.TableInfo:
    """员工 of :data:`IMPORT_FIELDS`, made by the store, no rows yet."""
    return await store_table(conn, schema, IMPORT_FIELDS)
