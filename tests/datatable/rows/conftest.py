"""Fixtures of the row tests: tables of people through the store, and of staff and tags through the skill."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.rows import write as rows_write
from skillyard.builtin_skills.datatable.store import schema as store_schema

from skillyard import SkillYard
from support.datatable import context, run, store_table
from support.datatable.rows import PEOPLE, PEOPLE_FIELDS, STAFF, STAFF_FIELDS


async def _made_with_rows(
    yard: SkillYard, org: str, title: str, fields: list[dict[str, Any]], records: list[dict[str, Any]]
) -> str:
    ctx = context(org)
    made = await run(yard, ctx, "create_table", table_name=title, fields=fields)
    assert made["ok"], made
    batch = await run(yard, ctx, "insert_batch", table_id=made["id"], records=records)
    assert batch["inserted"] == len(records), batch
    return str(made["id"])


@pytest.fixture
async def table(conn: asyncpg.Connection, schema: str) -> store_schema.TableInfo:
    """员工 of :data:`PEOPLE_FIELDS`, made by the store, no rows yet."""
    return await store_table(conn, schema, PEOPLE_FIELDS)


@pytest.fixture
async def people(conn: asyncpg.Connection, table: store_schema.TableInfo) -> Any:
    """The 员工 table with the five :data:`PEOPLE`, written by the row functions."""
    result = await rows_write.insert_batch(conn, table, PEOPLE)
    assert result["inserted"] == 5, result
    return table


@pytest.fixture
async def staff(yard: SkillYard, org: str) -> str:
    """员工 of the five :data:`STAFF` (姓名 required, 标签 多选), through the skill; its id."""
    return await _made_with_rows(yard, org, "员工", STAFF_FIELDS, STAFF)


@pytest.fixture
async def people_table(yard: SkillYard, org: str) -> str:
    """The same five people without their 标签 (and 姓名 not required), through the skill; its id."""
    fields = [{k: v for k, v in f.items() if k != "required"} for f in STAFF_FIELDS if f["title"] != "标签"]
    records = [{k: v for k, v in r.items() if k != "标签"} for r in STAFF]
    return await _made_with_rows(yard, org, "员工", fields, records)


@pytest.fixture
async def tags(yard: SkillYard, org: str) -> str:
    """标签表: four rows of 名称, 标签 (多选), 城市 (单选) and 附加 (JSON), some left empty; its id."""
    records = [
        {"名称": "a", "标签": ["红"], "城市": "上海", "附加": {"a": 1}},
        {"名称": "b", "标签": ["红", "绿"], "附加": [1, 2]},
        {"名称": "c", "标签": ["绿", "蓝"], "城市": "北京"},
        {"名称": "d"},
    ]
    fields = [
        {"title": "名称", "uidt": "文本"},
        {"title": "标签", "uidt": "多选", "options": ["红", "绿", "蓝"]},
        {"title": "城市", "uidt": "单选", "options": ["上海", "北京"]},
        {"title": "附加", "uidt": "JSON"},
    ]
    return await _made_with_rows(yard, org, "标签表", fields, records)
