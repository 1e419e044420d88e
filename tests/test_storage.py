"""Storage on a real PostgreSQL: db sessions for skills, configs (encrypted, cached), the run log, laziness."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from skillyard import SkillYard

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


async def test_configs_are_encrypted_at_rest_and_cached(make_skill, skills_root, db_env):
    make_skill(
        "cfg",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"token": ctx["api_token"], "region": ctx["skill_args"]["region"]}
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        stored = await yard.configs.set("role-x", "cfg", {"--api-token": "s3cr3t-value", "region": "eu"})
        assert stored == {"api_token": True, "region": False}
        env = await yard.run("cfg", context={"role_id": "role-x"})
        # the skill sees its secret; a result that echoes it is masked (the hardening issue: every envelope field)
        assert env == {"token": "***", "region": "eu", "ok": True, "success": True}
        async with await yard.database.session() as session:
            rows = dict(
                (
                    await session.execute(
                        text("SELECT key, value FROM skillyard.skill_configs WHERE role_id = 'role-x'")
                    )
                ).all()
            )
        assert rows["region"] == "eu" and "s3cr3t-value" not in rows["api_token"]
        # cached: a change behind the store's back is not seen until invalidated
        async with await yard.database.session() as session:
            await session.execute(
                text("UPDATE skillyard.skill_configs SET value = 'us' WHERE key = 'region' AND role_id = 'role-x'")
            )
            await session.commit()
        assert (await yard.run("cfg", context={"role_id": "role-x"}))["region"] == "eu"
        yard.configs.invalidate("role-x", "cfg")
        assert (await yard.run("cfg", context={"role_id": "role-x"}))["region"] == "us"
        # set() invalidates by itself
        await yard.configs.set("role-x", "cfg", {"region": "ap"})
        assert (await yard.run("cfg", context={"role_id": "role-x"}))["region"] == "ap"
        assert await yard.configs.unset("role-x", "cfg", ["region"]) == 1
        assert "region" not in await yard.configs.get("role-x", "cfg")


async def test_configs_are_per_role(make_skill, skills_root, db_env):
    make_skill("cfg", files={"handler.py": "async def execute(i, ctx):\n    return {'r': ctx.get('region')}\n"})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        await yard.configs.set("r1", "cfg", {"region": "one"})
        await yard.configs.set("r2", "cfg", {"region": "two"})
        assert (await yard.run("cfg", context={"role_id": "r1"}))["r"] == "one"
        assert (await yard.run("cfg", context={"role_id": "r2"}))["r"] == "two"
        assert (await yard.run("cfg"))["r"] is None


async def test_stored_config_satisfies_requires_env(make_skill, skills_root, db_env, monkeypatch):
    monkeypatch.delenv("WEATHER_KEY", raising=False)
    make_skill(
        "w",
        frontmatter="name: w\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [WEATHER_KEY]",
        files={"handler.py": "async def execute(i, c):\n    return {}\n"},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("w", context={"role_id": "r"}))["needs_config"] == ["WEATHER_KEY"]
        await yard.configs.set("r", "w", {"WEATHER_KEY": "k"})
        assert (await yard.run("w", context={"role_id": "r"}))["ok"] is True


async def test_run_log_is_written_in_batches_without_inputs(make_skill, skills_root, db_env):
    make_skill(
        "logged",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"ok": not input.get("fail"), "error": "nope" if input.get("fail") else None}
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        await yard.database.engine()
        async with await yard.database.session() as s:
            await s.execute(text("DELETE FROM skillyard.runs WHERE skill = 'logged'"))
            await s.commit()
        for i in range(5):
            await yard.run("logged", {"fail": i == 4, "password_hint": "hunter2"}, context={"session_id": "s9"})
    async with SkillYard(include_builtin=False) as yard, await yard.database.session() as s:
        rows = (
            await s.execute(text("SELECT ok, session_id FROM skillyard.runs WHERE skill = 'logged' ORDER BY id"))
        ).all()
        dump = str((await s.execute(text("SELECT * FROM skillyard.runs"))).all())
    assert [r.ok for r in rows] == [True, True, True, True, False]
    assert {r.session_id for r in rows} == {"s9"}
    assert "hunter2" not in dump


async def test_two_hosts_migrate_the_same_database_concurrently(db_env):
    yards = [SkillYard(include_builtin=False) for _ in range(3)]
    await asyncio.gather(*(y.database.engine() for y in yards))
    for y in yards:
        await y.close()
