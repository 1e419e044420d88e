"""What the datatable review probes share (tests/test_datatable_conformance*.py): a SkillYard on the test
session's PostgreSQL, a fresh organisation per test, and the calls every probe makes through the documented
interfaces."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard

FIELDS = [
    {"title": "姓名", "uidt": "文本", "required": True},
    {"title": "工号", "uidt": "文本"},
    {"title": "城市", "uidt": "单选", "options": ["上海", "北京", "深圳"]},
    {"title": "金额", "uidt": "金额"},
]

#: One field of every logical type (§7.1), the required text first.
ONE_OF_EACH_TYPE = [
    {"title": "名称", "uidt": "文本", "required": True},
    {"title": "数量", "uidt": "整数"},
    {"title": "价格", "uidt": "数字"},
    {"title": "金额", "uidt": "金额"},
    {"title": "日期", "uidt": "日期"},
    {"title": "时刻", "uidt": "日期时间"},
    {"title": "时间", "uidt": "时间"},
    {"title": "完成", "uidt": "勾选"},
    {"title": "城市", "uidt": "单选", "options": ["上海", "北京"]},
    {"title": "标签", "uidt": "多选", "options": ["红", "绿", "蓝"]},
    {"title": "邮箱", "uidt": "邮箱"},
    {"title": "电话", "uidt": "电话"},
    {"title": "主页", "uidt": "链接"},
    {"title": "附加", "uidt": "JSON"},
]


@pytest.fixture
async def yard() -> AsyncIterator[SkillYard]:
    async with SkillYard() as y:
        yield y


@pytest.fixture
def org() -> str:
    return "q" + uuid.uuid4().hex[:12]  # a new organisation (schema) per test


def context(org: str, **extra: Any) -> dict[str, Any]:
    return {"org_id": org, "team_role": "owner", "role_id": "staff", "session_id": f"s-{org}", **extra}


async def run(yard: SkillYard, ctx: dict[str, Any], action: str, **params: Any) -> dict[str, Any]:
    return await yard.run("datatable", {"action": action, "payload": params}, context=ctx)


async def make_table(
    yard: SkillYard, org: str, title: str = "客户", rows: int = 0, fields: list[dict[str, Any]] | None = None
) -> str:
    created = await run(yard, context(org), "create_table", table_name=title, fields=fields or FIELDS)
    assert created["ok"], created
    if rows:
        records = [{"姓名": f"人{i}", "工号": f"E{i % 3}", "城市": "上海", "金额": i} for i in range(rows)]
        for start in range(0, rows, 100):
            batch = await run(
                yard, context(org), "insert_batch", table_id=created["id"], records=records[start : start + 100]
            )
            assert batch["inserted"] == len(records[start : start + 100]), batch
    return str(created["id"])


def workspace(yard: SkillYard, ctx: dict[str, Any]) -> Path:
    path = Path(yard.workspace(ctx["session_id"]))
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_text(yard: SkillYard, ctx: dict[str, Any], rel: str, text: str) -> str:
    target = workspace(yard, ctx) / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return rel


def write_json(yard: SkillYard, ctx: dict[str, Any], rel: str, rows: Any) -> str:
    return write_text(yard, ctx, rel, json.dumps(rows, ensure_ascii=False))


async def count(conn: Any, org: str, table: str = "客户", where: str = "") -> int:
    return int(await conn.fetchval(f'SELECT count(*) FROM org_data_{org}."{table}" {where}'))


async def grant(yard: SkillYard, org: str, table: str, role: str, ops: Any, **kw: Any) -> dict[str, Any]:
    from skillyard.builtin_skills.datatable import admin

    return await admin.grant(yard, org=org, table=table, role=role, ops=ops, **kw)


def unload(env: dict[str, Any]) -> dict[str, Any]:
    """The full result of a large reply the platform offloaded to a workspace file (spec §6.4)."""
    if env.get("offloaded"):
        return dict(json.loads(Path(env["offload_file"]).read_text(encoding="utf-8")))
    return env
