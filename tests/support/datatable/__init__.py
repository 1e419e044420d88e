"""What the datatable tests share: the skill's folder, the session database's DSN, and the calls through the skill's
documented interfaces (a fresh organisation per test; tables, files and grants made the way a caller makes them).

The fixtures (``yard``, ``org``…) are in tests/datatable/conftest.py; each folder's own scaffolding is in the module
of this package named after it.
"""

from __future__ import annotations

import json
import subprocess
import traceback
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.store.names import schema_name
from skillyard.builtin_skills.datatable.structure import tables as structure_tables

from skillyard import SkillYard

FOLDER = Path(__file__).resolve().parents[3] / "skills" / "datatable"

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

#: The keys of a field definition as list_columns returns it.
COLUMN_KEYS = {"title", "uidt", "required", "unique", "options", "precision", "scale"}

#: A 客户 table with a unique 编号 and a 链接 (:func:`make_numbered_table`).
NUMBERED_FIELDS = [
    {"title": "姓名", "uidt": "文本", "required": True},
    {"title": "编号", "uidt": "文本", "unique": True},
    {"title": "网址", "uidt": "链接"},
]


def asyncpg_dsn(database_url: str) -> str:
    """The session's database URL as asyncpg wants it (no SQLAlchemy driver suffix)."""
    return database_url.replace("postgresql+asyncpg://", "postgresql://")


def context(org: str, **extra: Any) -> dict[str, Any]:
    """The runtime context of an owner of ``org`` with role staff (``extra`` adds or replaces keys)."""
    return {"org_id": org, "team_role": "owner", "role_id": "staff", "session_id": f"s-{org}", **extra}


async def run(yard: SkillYard, ctx: dict[str, Any], action: str, **params: Any) -> dict[str, Any]:
    """One datatable action through the platform, its parameters in ``payload``."""
    return await yard.run("datatable", {"action": action, "payload": params}, context=ctx)


async def make_table(
    yard: SkillYard, org: str, title: str = "客户", rows: int = 0, fields: list[dict[str, Any]] | None = None
) -> str:
    """A table (:data:`FIELDS` unless given) with ``rows`` rows 人0… of 工号 E0/E1/E2; its id."""
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


async def make_numbered_table(yard: SkillYard, org: str, rows: int = 0) -> str:
    """客户 of :data:`NUMBERED_FIELDS` with ``rows`` rows 人0… numbered B0…; its id."""
    created = await run(yard, context(org), "create_table", table_name="客户", fields=NUMBERED_FIELDS)
    assert created["ok"], created
    if rows:
        records = [{"姓名": f"人{i}", "编号": f"B{i}"} for i in range(rows)]
        batch = await run(yard, context(org), "insert_batch", table_id=created["id"], records=records)
        assert batch["inserted"] == rows, batch
    return str(created["id"])


async def big_table(yard: SkillYard, org: str, rows: int) -> str:
    """大表 (编号, 组: both 整数 0…rows-1), imported from a file; its id."""
    ctx = context(org)
    made = await run(
        yard,
        ctx,
        "create_table",
        table_name="大表",
        fields=[{"title": "编号", "uidt": "整数"}, {"title": "组", "uidt": "整数"}],
    )
    rel = write_json(yard, ctx, "import/big.json", [{"编号": i, "组": i} for i in range(rows)])
    imported = await run(yard, ctx, "insert_from_file", table_id=made["id"], file=rel)
    assert imported["ok"] and imported["inserted"] == rows, imported
    return str(made["id"])


async def store_table(
    conn: asyncpg.Connection, schema: str, fields: list[dict[str, Any]], title: str = "员工"
) -> store_schema.TableInfo:
    """A table made by the store itself (no skill call), resolved for the row functions."""
    created = await structure_tables.create_table(conn, schema, title, fields)
    return await store_schema.resolve_table(conn, schema, created["id"])


async def titles(yard: SkillYard, org: str) -> list[str]:
    """The titles list_tables shows, in its order."""
    listed = await run(yard, context(org), "list_tables")
    return [t["title"] for t in listed["data"]]


async def columns(yard: SkillYard, org: str, table_id: str) -> dict[str, dict[str, Any]]:
    """list_columns of a table, by field title."""
    listed = await run(yard, context(org), "list_columns", table_id=table_id)
    return {c["title"]: c for c in listed["data"]}


def session_workspace(yard: SkillYard, ctx: dict[str, Any]) -> Path:
    """The workspace folder of the context's session (made when missing)."""
    path = Path(yard.workspace(ctx["session_id"]))
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_text(yard: SkillYard, ctx: dict[str, Any], rel: str, text: str) -> str:
    """``text`` written to ``rel`` in the session's workspace; ``rel``."""
    target = session_workspace(yard, ctx) / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return rel


def write_json(yard: SkillYard, ctx: dict[str, Any], rel: str, rows: Any) -> str:
    """``rows`` as JSON at ``rel`` in the session's workspace; ``rel``."""
    return write_text(yard, ctx, rel, json.dumps(rows, ensure_ascii=False))


def backups(yard: SkillYard, ctx: dict[str, Any]) -> list[Path]:
    """The delete backups in the session's workspace, by name."""
    return sorted(session_workspace(yard, ctx).glob("del_backup_*.json"))


async def count(conn: Any, org: str, table: str = "客户", where: str = "") -> int:
    """Rows of one of the organisation's tables, read past the skill."""
    return int(await conn.fetchval(f'SELECT count(*) FROM "{schema_name(org)}"."{table}" {where}'))


async def grant(yard: SkillYard, org: str, table: str, role: str, ops: Any, **kw: Any) -> dict[str, Any]:
    """An administrator's grant (admin.py)."""
    from skillyard.builtin_skills.datatable import admin

    return await admin.grant(yard, org=org, table=table, role=role, ops=ops, **kw)


def unload(env: dict[str, Any]) -> dict[str, Any]:
    """The full result of a large reply the platform offloaded to a workspace file (spec §6.4)."""
    if env.get("offloaded"):
        return dict(json.loads(Path(env["offload_file"]).read_text(encoding="utf-8")))
    return env


def run_skillyard(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``skillyard ARGS`` on the click group in this process (as the console script runs it), with this test's
    environment and ``env``: its exit code, stdout and stderr."""
    from click.testing import CliRunner

    from skillyard.cli import cli

    result = CliRunner().invoke(cli, list(args), env=env)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
        return subprocess.CompletedProcess(["skillyard", *args], 1, result.stdout, stderr)
    return subprocess.CompletedProcess(["skillyard", *args], result.exit_code, result.stdout, stderr)


async def schema_dropped_afterwards(conn: asyncpg.Connection, prefix: str) -> AsyncIterator[str]:
    """For a fixture: a new organisation's schema (``prefix`` and random digits), dropped with all in it afterwards."""
    name = schema_name(prefix + uuid.uuid4().hex[:12])
    try:
        yield name
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


async def plain_role_dropped_afterwards(conn: asyncpg.Connection, schema: str, prefix: str) -> AsyncIterator[str]:
    """For a fixture: a NOLOGIN role that is neither superuser nor BYPASSRLS (those always bypass row-level
    security); afterwards ``schema``, what the role owns and the role are dropped."""
    role = f"{prefix}_{uuid.uuid4().hex[:10]}"
    await conn.execute(f'CREATE ROLE "{role}" NOLOGIN NOSUPERUSER NOBYPASSRLS')
    try:
        yield role
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.execute(f'DROP OWNED BY "{role}" CASCADE')
        await conn.execute(f'DROP ROLE "{role}"')
