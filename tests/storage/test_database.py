"""The database a SkillYard uses (storage/database.py, embedded.py): opened lazily, live sessions for skills, a
clear error for a bad URL."""

from __future__ import annotations

import asyncio

import pytest

from skillyard import SkillYard
from skillyard.errors import SkillyardError
from support.skills import OK_HANDLER, run_skill

DB_SKILL = """
from sqlalchemy import text
async def execute(input, ctx):
    db = ctx["db"]
    value = (await db.execute(text("SELECT 40 + 2"))).scalar()
    async with ctx["db_factory"]() as other:
        same_db = (await other.execute(text("SELECT current_database()"))).scalar()
    return {"value": value, "db_type": type(db).__name__, "same_db": same_db}
"""


async def test_async_skill_gets_a_live_session_and_factory(make_skill, skills_root, db_env):
    make_skill("dbs", files={"handler.py": DB_SKILL})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("dbs")
    assert env["ok"] is True and env["value"] == 42 and env["db_type"] == "AsyncSession"
    assert env["same_db"]


async def test_sync_skill_gets_db_none(make_skill, skills_root, db_env):
    make_skill("sync", files={"handler.py": "def execute(input, ctx):\n    return {'db': ctx['db']}\n"})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("sync"))["db"] is None


async def test_skills_without_db_never_open_the_database(make_skill, skills_root, home):
    make_skill("plain", files={"handler.py": "async def execute(i, c):\n    return {}\n"})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        await yard.run("plain")
        assert yard.database.is_open is False
    assert not (home / "pg").exists()


async def test_embedded_postgres_starts_lazily_under_home(make_skill, skills_root, home):
    make_skill("dbs", files={"handler.py": DB_SKILL})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("dbs")
    assert env["value"] == 42
    assert (home / "pg" / "PG_VERSION").is_file()


async def test_async_entry_gets_live_asyncsession(make_skill, skills_root, db_env):
    """Issue: '`db` is a live SQLAlchemy `AsyncSession` (asyncpg) and `db_factory` a session factory, for in-process
    async entries only.'"""
    make_skill(
        "dbs",
        files={
            "handler.py": """
        from sqlalchemy import text
        async def execute(i, ctx):
            db = ctx["db"]
            val = (await db.execute(text("SELECT 41 + 1"))).scalar()
            async with ctx["db_factory"]() as s2:
                v2 = (await s2.execute(text("SELECT 7"))).scalar()
            return {"v": val, "v2": v2, "cls": type(db).__name__}
    """
        },
    )
    env = await run_skill(skills_root, "dbs")
    assert env["ok"] is True, env
    assert (env["v"], env["v2"], env["cls"]) == (42, 7, "AsyncSession")


@pytest.mark.spec("§1")
async def test_sync_entry_db_none_even_when_db_used(make_skill, skills_root, db_env):
    """Spec §1: '同步入口被平台显式置为 None'."""
    make_skill("dbsync", files={"handler.py": "def execute(i, ctx):\n    return {'db_is_none': ctx['db'] is None}\n"})
    env = await run_skill(skills_root, "dbsync")
    assert env["db_is_none"] is True


async def test_no_database_started_for_plain_run(make_skill, skills_root, home):
    """Issue: 'With no `SKILLYARD_DATABASE_URL`, start the embedded PostgreSQL ... lazily, only when a skill needs
    it.'"""
    make_skill("nodb", files={"handler.py": OK_HANDLER})
    env = await run_skill(skills_root, "nodb")
    assert env["ok"] is True and not (home / "pg").exists()


def test_database_url_bad_scheme_is_an_error(monkeypatch, skills_root):
    """configuration.md: 'A PostgreSQL URL ... Any other scheme is an error.'"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "mysql://u:p@localhost/db")

    async def go():
        async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
            await yard.configs.get("r", "s")

    with pytest.raises(SkillyardError):
        asyncio.run(go())
