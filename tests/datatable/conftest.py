"""Fixtures of the datatable tests: a SkillYard on the session's PostgreSQL, a fresh organisation, and the tables
several folders' tests use."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from skillyard.builtin_skills.datatable.store.owners import resolve_schema

from skillyard import SkillYard
from support.datatable import ONE_OF_EACH_TYPE, context, grant, make_table, run


@pytest.fixture
async def yard(db_env: str) -> AsyncIterator[SkillYard]:
    """A SkillYard with the built-in skills, on the test session's PostgreSQL."""
    async with SkillYard() as y:
        yield y


@pytest.fixture
def org() -> str:
    """A new organisation (and so a new schema) per test."""
    return "q" + uuid.uuid4().hex[:12]


@pytest.fixture
async def schema(conn: Any) -> str:
    """The schema of a new organisation, for the modules that take a schema: recorded as that organisation's, as an
    action would (nothing is created yet)."""
    return await resolve_schema(conn, "Org-" + uuid.uuid4().hex[:12])


async def _one_of_each_type(yard: SkillYard, org: str, title: str) -> str:
    made = await run(yard, context(org), "create_table", table_name=title, fields=ONE_OF_EACH_TYPE)
    assert made["ok"], made
    return str(made["id"])


@pytest.fixture
async def values_table(yard: SkillYard, org: str) -> str:
    """值表, a field of every type (no rows): what writes of every type go into."""
    return await _one_of_each_type(yard, org, "值表")


@pytest.fixture
async def kinds(yard: SkillYard, org: str) -> str:
    """类型表, a field of every type (no rows)."""
    return await _one_of_each_type(yard, org, "类型表")


@pytest.fixture
async def own_table(yard: SkillYard, org: str) -> str:
    """客户 with 9 rows (工号 E0/E1/E2, three each); role staff limited to its own rows by 工号."""
    table_id = await make_table(yard, org, rows=9)
    stored = await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
    assert stored["row_scope"] == "own" and stored["owner_field"] == "工号"
    return table_id
