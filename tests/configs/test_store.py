"""Skill configs per (role, skill) in PostgreSQL (configs/store.py, crypto.py): secrets encrypted at rest, reads
cached until changed, no fallback between roles."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from skillyard import SkillYard
from skillyard.errors import SkillyardError
from support.skills import CTX_DUMP, yard_of


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


async def test_configs_set_get_unset_roundtrip(skills_root, db_env):
    """configuration.md: '`await yard.configs.set(role, skill, {...})`, `yard.configs.unset(...)`'; 'Keys are
    normalized: ... (`--api-token` → `api_token`). Case is kept.'"""
    async with yard_of(skills_root) as yard:
        await yard.configs.set("cr1", "wx", {"--api-token": "SECRETVALUE", "Units": "metric"})
        got = await yard.configs.get("cr1", "wx")
        assert got == {"api_token": "SECRETVALUE", "Units": "metric"}
        await yard.configs.unset("cr1", "wx", ["Units"])
        assert await yard.configs.get("cr1", "wx") == {"api_token": "SECRETVALUE"}
        await yard.configs.unset("cr1", "wx")
        assert await yard.configs.get("cr1", "wx") == {}


async def test_configs_credential_keys_encrypted_at_rest(skills_root, db_env):
    """configuration.md: 'A key containing `key`, `token`, `secret`, `password`, `credential` or `auth` (any case,
    anywhere in the name) is stored encrypted ... Other keys are stored as plain text.'"""
    from sqlalchemy import text

    values = {"MyAuthor": "AUTHORVAL1", "db_PASSWORD": "PWVAL12345", "units": "PLAINVAL1"}
    async with yard_of(skills_root) as yard:
        await yard.configs.set("enc1", "wx", values)
        async with await yard.database.session() as s:
            rows = (
                await s.execute(text("SELECT * FROM skillyard.skill_configs WHERE role_id = 'enc1' AND skill = 'wx'"))
            ).mappings()
            dump = {r["key"]: json.dumps({k: str(v) for k, v in r.items()}) for r in rows}
    assert "AUTHORVAL1" not in dump["MyAuthor"] and "PWVAL12345" not in dump["db_PASSWORD"]
    assert "PLAINVAL1" in dump["units"]


async def test_configs_role_scoping_no_fallback(skills_root, db_env):
    """configuration.md: 'there is no fallback from a role to the default role.'"""
    async with yard_of(skills_root) as yard:
        await yard.configs.set("", "wx2", {"units": "default-role"})
        assert await yard.configs.get("someone", "wx2") == {}
        assert await yard.configs.get("", "wx2") == {"units": "default-role"}


async def test_configs_wrong_secret_key_says_so(skills_root, db_env, monkeypatch):
    """configuration.md: 'reading them with another key fails with a message saying so (set them again, or restore
    the key)'."""
    from cryptography.fernet import Fernet

    monkeypatch.setenv("SKILLYARD_SECRET_KEY", Fernet.generate_key().decode())
    async with yard_of(skills_root) as yard:
        await yard.configs.set("wk", "wx3", {"api_key": "ORIGINAL"})
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", Fernet.generate_key().decode())
    async with yard_of(skills_root) as yard:
        with pytest.raises(SkillyardError, match=r"(?i)key"):
            await yard.configs.get("wk", "wx3")


async def test_configs_set_invalidates_cache_for_runs(make_skill, skills_root, db_env):
    """configuration.md: '`set` and `unset` through the same `SkillYard` ... drop that entry.'"""
    make_skill("cfgd", files={"handler.py": CTX_DUMP})
    async with yard_of(skills_root) as yard:
        await yard.configs.set("ci", "cfgd", {"units": "a"})
        assert (await yard.run("cfgd", {}, context={"role_id": "ci"}))["ctx"]["units"] == "a"
        await yard.configs.unset("ci", "cfgd", ["units"])
        ctx = (await yard.run("cfgd", {}, context={"role_id": "ci"}))["ctx"]
    assert "units" not in ctx


@pytest.mark.parametrize(
    ("role", "skill", "values"),
    [(None, "wx", {"a": "1"}), ("r", "", {"a": "1"}), ("r", None, {"a": "1"}), ("r", "wx", ["a=1"]), ("r", "wx", None)],
)
async def test_configs_set_bad_arguments(skills_root, db_env, role, skill, values):
    """Brief: bad arguments to `yard.configs.set` give a clear SkillyardError, never TypeError/AttributeError."""
    async with yard_of(skills_root) as yard:
        with pytest.raises(SkillyardError):
            await yard.configs.set(role, skill, values)


async def test_configs_set_empty_key_refused(skills_root, db_env):
    """configuration.md: 'Keys are normalized: surrounding `-` removed' — a key that normalizes to nothing is refused
    clearly."""
    async with yard_of(skills_root) as yard:
        with pytest.raises(SkillyardError):
            await yard.configs.set("r", "wx", {"--": "v"})


async def test_configs_set_non_string_value(skills_root, db_env):
    """configuration.md: 'Skill configs are key/value strings' — a number is stored as its text or refused clearly."""
    async with yard_of(skills_root) as yard:
        try:
            await yard.configs.set("nv", "wx", {"limit": 5})
        except SkillyardError:
            return
        assert (await yard.configs.get("nv", "wx"))["limit"] == "5"


async def test_configs_invalidate_sees_external_change(make_skill, skills_root, db_env):
    """configuration.md: 'Changes made elsewhere ... are seen after `yard.configs.invalidate(role_id=None,
    skill=None)`'."""
    make_skill("cfge", files={"handler.py": CTX_DUMP})
    async with yard_of(skills_root) as a, yard_of(skills_root) as b:
        await a.configs.set("ext", "cfge", {"units": "one"})
        assert (await b.run("cfge", {}, context={"role_id": "ext"}))["ctx"]["units"] == "one"
        await a.configs.set("ext", "cfge", {"units": "two"})
        b.configs.invalidate(role_id="ext")
        ctx = (await b.run("cfge", {}, context={"role_id": "ext"}))["ctx"]
    assert ctx["units"] == "two"
