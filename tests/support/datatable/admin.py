"""Scaffolding of the admin tests (tests/datatable/test_admin.py, test_plugin.py): a fresh connection for the
synchronous CLI tests, an organisation dropped afterwards, what exists in the database."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import asyncpg
from skillyard.builtin_skills.datatable.store.names import OWN_POLICY, schema_name

from support.datatable import asyncpg_dsn


def org_dropped_afterwards(database_url: str, prefix: str) -> Iterator[str]:
    """A fresh organisation id starting with ``prefix``, for a fixture: its schema is dropped after the test."""
    name = prefix + uuid.uuid4().hex[:12]
    yield name

    async def drop(conn: asyncpg.Connection) -> None:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema_name(name)}" CASCADE')

    on_connection(database_url, drop)


T = TypeVar("T")

#: 客户, the table of the admin tests.
CUSTOMER_FIELDS = [
    {"title": "名称", "uidt": "文本"},
    {"title": "工号", "uidt": "文本"},
    {"title": "金额", "uidt": "数字"},
]


def on_connection(database_url: str, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
    """Run ``work`` on a fresh connection of its own (the CLI tests are synchronous: the CLI runs its own loop)."""

    async def go() -> T:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            return await work(conn)
        finally:
            await conn.close()

    return asyncio.run(go())


async def schema_exists(conn: asyncpg.Connection, schema: str) -> bool:
    """Whether the schema exists."""
    return bool(await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", f'"{schema}"'))


async def policy_exists(conn: asyncpg.Connection, schema: str, table: str) -> bool:
    """Whether the table has the skill's row-level security policy of row scope own."""
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_policies WHERE schemaname = $1 AND tablename = $2 AND policyname = $3)",
            schema,
            table,
            OWN_POLICY,
        )
    )
