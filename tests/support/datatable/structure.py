"""Scaffolding of the structure tests (tests/datatable/structure/): the columns PostgreSQL recorded and the
definitions expected."""

from __future__ import annotations

from typing import Any

import asyncpg
from skillyard.builtin_skills.datatable.fields import types as field_types
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.structure import tables as structure_tables


async def column_types(conn: asyncpg.Connection, schema: str, table: str) -> dict[str, str]:
    """Each column of the table with the type PostgreSQL recorded (``numeric(18,2)``, ``text[]``…)."""
    rows = await conn.fetch(
        """SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
           WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum""",
        f"{store_schema.quote_ident(schema)}.{store_schema.quote_ident(table)}",
    )
    return {r["attname"]: r["type"] for r in rows}


async def unique_columns(conn: asyncpg.Connection, schema: str, table: str) -> set[str]:
    """The columns with a UNIQUE constraint."""
    rows = await conn.fetch(
        """SELECT a.attname FROM pg_constraint c
           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
           WHERE c.conrelid = $1::regclass AND c.contype = 'u'""",
        f"{store_schema.quote_ident(schema)}.{store_schema.quote_ident(table)}",
    )
    return {r["attname"] for r in rows}


def expected_columns(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list_columns entries field definitions become."""
    return [field_types.parse_field(s).as_dict() for s in specs]


async def create_data_table(conn: asyncpg.Connection, schema: str, fields: list[dict[str, Any]]) -> str:
    """The table 数据 of ``fields``, made by the store; its id."""
    created = await structure_tables.create_table(conn, schema, "数据", fields)
    return str(created["id"])
