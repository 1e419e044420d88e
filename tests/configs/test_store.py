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


# key rotation (issue 15): every stored secret re-encrypted with the newest key, in one transaction; each test has an
# empty database of its own, since rotation touches every secret row and other tests store rows under other keys


def _key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def _opens(key: str, token: str) -> str:
    from cryptography.fernet import Fernet

    return Fernet(key.encode()).decrypt(token.encode()).decode()


SECRETS = {("", "wx", "api_token"): "tok-one-111", ("sales", "wx", "api_token"): "tok-two-222"}


async def _store_secrets(root) -> None:
    async with yard_of(root) as yard:
        for (role, skill, key), value in SECRETS.items():
            await yard.configs.set(role, skill, {key: value, "units": "metric"})


async def _read_back(root) -> dict[tuple[str, str, str], str]:
    async with yard_of(root) as yard:
        return {(r, s, k): (await yard.configs.get(r, s))[k] for r, s, k in SECRETS}


async def test_rotate_key_with_env_keys_reencrypts_with_the_newest(skills_root, empty_database, monkeypatch):
    """configuration.md: 'put a new key first in SKILLYARD_SECRET_KEYS ... run rotate-key: every stored secret is
    re-encrypted with the newest key' (both variables set: SKILLYARD_SECRET_KEYS wins)."""
    from support.databases import secret_rows

    old, new = _key(), _key()
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", old)
    await _store_secrets(skills_root)
    monkeypatch.setenv("SKILLYARD_SECRET_KEYS", f"{new},{old}")
    assert await _read_back(skills_root) == SECRETS  # saved under the old key, still read
    async with yard_of(skills_root) as yard:
        rotation = await yard.configs.rotate_key()
        assert (rotation.rotated, rotation.key_added, rotation.ring.source) == (2, False, "SKILLYARD_SECRET_KEYS")
        assert rotation.ring.file is None and len(rotation.ring.keys) == 2
    rows = await secret_rows(empty_database)
    assert {k: _opens(new, v) for k, v in rows.items()} == SECRETS  # the newest key alone opens every row
    monkeypatch.setenv("SKILLYARD_SECRET_KEYS", new)  # the old key dropped after the rotation
    assert await _read_back(skills_root) == SECRETS
    assert not (skills_root.parent / "home" / "secret.key").exists()


async def test_rotate_key_with_the_key_file_adds_a_key_on_top_and_keeps_the_old(
    skills_root, empty_database, home, monkeypatch
):
    """configuration.md: 'rotate-key adds a new key at the top of SKILLYARD_HOME/secret.key (one key a line, newest
    first, mode 0600, written atomically), keeps the old ones and re-encrypts every stored secret with the new one'."""
    from support.databases import secret_rows

    monkeypatch.delenv("SKILLYARD_SECRET_KEY")
    await _store_secrets(skills_root)
    path = home / "secret.key"
    [old] = path.read_text().split()
    async with yard_of(skills_root) as yard:
        rotation = await yard.configs.rotate_key()
        assert (rotation.rotated, rotation.key_added, rotation.ring.file) == (2, True, path)
        await yard.configs.set("", "wx", {"api_token": "after-rotation"})  # this host now encrypts with the new key
    new, kept = path.read_text().split()
    assert kept == old and new != old and (path.stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in home.iterdir() if "secret" in p.name) == ["secret.key"]
    rows = await secret_rows(empty_database)
    assert {k: _opens(new, v) for k, v in rows.items()} == {**SECRETS, ("", "wx", "api_token"): "after-rotation"}
    async with yard_of(skills_root) as yard:
        assert (await yard.configs.rotate_key()).ring.keys == tuple(k.encode() for k in [*path.read_text().split()])
    assert len(path.read_text().split()) == 3


async def test_rotate_key_on_an_empty_store_rotates_nothing(skills_root, empty_database):
    async with yard_of(skills_root) as yard:
        assert (await yard.configs.rotate_key()).rotated == 0


async def test_rotate_key_is_all_or_nothing(skills_root, empty_database, home, monkeypatch):
    """A secret no key opens stops the rotation before anything changes: rows and key file stay as they were, and the
    error names the config, never a value."""
    from support.databases import secret_rows

    monkeypatch.delenv("SKILLYARD_SECRET_KEY")
    await _store_secrets(skills_root)
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", _key())
    async with yard_of(skills_root) as yard:
        await yard.configs.set("other", "mail", {"smtp_password": "lost-key-value"})
    monkeypatch.delenv("SKILLYARD_SECRET_KEY")
    before, key_file = await secret_rows(empty_database), (home / "secret.key").read_bytes()
    async with yard_of(skills_root) as yard:
        with pytest.raises(SkillyardError, match=r"mail\.smtp_password of role 'other'") as caught:
            await yard.configs.rotate_key()
    assert "lost-key-value" not in str(caught.value) and "nothing was re-encrypted" in str(caught.value)
    assert await secret_rows(empty_database) == before and (home / "secret.key").read_bytes() == key_file


async def test_rotate_key_with_a_bad_key_in_the_list_names_its_position(skills_root, empty_database, monkeypatch):
    monkeypatch.setenv("SKILLYARD_SECRET_KEYS", f"{_key()},not-a-key-777")
    async with yard_of(skills_root) as yard:
        with pytest.raises(SkillyardError, match="SKILLYARD_SECRET_KEYS: key 2 of 2 is not a valid Fernet key") as e:
            await yard.configs.rotate_key()
    assert "not-a-key-777" not in str(e.value) and "generate_key" in str(e.value)


async def test_a_running_host_reads_secrets_rotated_by_another(skills_root, empty_database, monkeypatch):
    """A host that loaded the key file before another process's rotate-key reads the file again when no key it
    holds opens a secret."""
    monkeypatch.delenv("SKILLYARD_SECRET_KEY")
    await _store_secrets(skills_root)
    async with yard_of(skills_root) as running, yard_of(skills_root) as admin:
        assert await running.configs.get("", "wx") == {"api_token": "tok-one-111", "units": "metric"}
        await admin.configs.rotate_key()
        running.configs.invalidate()
        assert (await running.configs.get("", "wx"))["api_token"] == "tok-one-111"


# §5.2: a credential typed by a user in chat is saved only when it appears in that turn's message


async def test_save_config_from_user_accepts_a_credential_typed_in_this_message(skills_root, db_env):
    async with yard_of(skills_root) as yard:
        stored = await yard.save_config_from_user(
            "u52", "wx", "api-token", "  sk-live-ABC123  ", "my token is sk-live-ABC123, thanks"
        )
        assert stored == {"api_token": True}
        assert (await yard.configs.get("u52", "wx"))["api_token"] == "sk-live-ABC123"  # stored stripped


@pytest.mark.parametrize(
    ("value", "raw_input"),
    [
        ("sk-live-ABC123", "here it is"),  # the value is in another message, not this one
        ("sk-live-ABC123", "sk-live-ABC12"),  # only part of the value was typed
        ("sk-live-ABC123", "sk-live- ABC123"),  # typed with a space inside: not the whole value
        ("sk-live-abc123", "sk-live-ABC123"),  # case matters
        ("sk-live-ABC123-extra", "sk-live-ABC123"),  # the model added to what was typed
    ],
)
async def test_save_config_from_user_refuses_a_credential_not_typed_in_this_message(
    skills_root, db_env, value, raw_input
):
    import skillyard

    async with yard_of(skills_root) as yard:
        with pytest.raises(skillyard.CredentialNotInInput) as caught:
            await yard.save_config_from_user("u52r", "wx", "api_token", value, raw_input)
        assert await yard.configs.get("u52r", "wx") == {}
    message = str(caught.value)
    assert "wx.api_token" in message and "must type the value in this message" in message and value not in message


async def test_save_config_from_user_matches_a_substring_of_the_message(skills_root, db_env):
    """The choice (docs/decisions.md): the whole value must appear somewhere in the message, inside other text too."""
    async with yard_of(skills_root) as yard:
        await yard.save_config_from_user("u52s", "wx", "db_password", "hunter22", "pw:hunter22!")
        assert (await yard.configs.get("u52s", "wx"))["db_password"] == "hunter22"


@pytest.mark.parametrize("value", ["", "   ", "\n\t", None])
async def test_save_config_from_user_refuses_an_empty_value(skills_root, db_env, value):
    from skillyard.errors import InvalidInput

    async with yard_of(skills_root) as yard:
        with pytest.raises(InvalidInput, match="is empty"):
            await yard.save_config_from_user("u52e", "wx", "api_token", value, "   ")


async def test_save_config_from_user_saves_other_keys_without_the_check(skills_root, db_env):
    async with yard_of(skills_root) as yard:
        assert await yard.save_config_from_user("u52n", "wx", "units", "metric", "something else") == {"units": False}
        assert await yard.configs.get("u52n", "wx") == {"units": "metric"}


async def test_save_config_from_user_checks_the_keys_a_skill_declares_secret(make_skill, skills_root, db_env):
    import skillyard

    make_skill("hook", frontmatter="name: hook\ndescription: d\nmetadata: {skillyard: {secret_configs: [target_url]}}")
    async with yard_of(skills_root) as yard:
        with pytest.raises(skillyard.CredentialNotInInput):
            await yard.save_config_from_user("u52d", "hook", "target_url", "https://h.example/x", "see above")
        assert await yard.save_config_from_user("u52d", "hook", "target_url", "https://h/x", "https://h/x") == {
            "target_url": True
        }


async def test_save_config_from_user_bad_arguments_are_invalid_input(skills_root, db_env):
    from skillyard.errors import InvalidInput

    async with yard_of(skills_root) as yard:
        with pytest.raises(InvalidInput, match="raw_input") as caught:
            await yard.save_config_from_user("u52b", "wx", "api_token", "abc123456", None)  # type: ignore[arg-type]
        assert "abc123456" not in str(caught.value)
        with pytest.raises(InvalidInput):
            await yard.save_config_from_user("u52b", "", "api_token", "abc123456", "abc123456")


def test_credential_not_in_input_is_a_skillyard_error_exported_by_skillyard():
    import skillyard
    from skillyard.errors import CredentialNotInInput, InvalidInput

    assert skillyard.CredentialNotInInput is CredentialNotInInput and "CredentialNotInInput" in skillyard.__all__
    assert issubclass(CredentialNotInInput, SkillyardError) and not issubclass(CredentialNotInInput, InvalidInput)
