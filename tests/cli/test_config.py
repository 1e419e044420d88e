"""``skillyard config set | list | unset`` (docs/cli.md) on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from support.cli import invoke, usage_error
from support.cli_probes import GREET, GREET_SCHEMA
from support.skills import write_skill


def test_config_commands(skills_root, db_env):
    result = invoke("config", "set", "weather", "api-key=abc", "units=metric", "--role", "r1")
    assert result.exit_code == 0, result.output
    assert "set weather.api_key (secret, encrypted)" in result.output
    listed = invoke("config", "list", "weather", "--role", "r1")
    assert "api_key = ********" in listed.output and "units = metric" in listed.output and "abc" not in listed.output
    assert invoke("config", "set", "weather", "novalue").exit_code == 2
    assert "removed 2" in invoke("config", "unset", "weather", "--role", "r1").output


def test_config_set_with_an_empty_key_is_a_usage_error(db_env):
    result = invoke("config", "set", "weather", "--", "-=x")
    assert result.exit_code == 2 and "empty once normalized" in result.output


def test_config_cli_set_list_masks_secrets(db_env, monkeypatch):
    """docs/cli.md: 'keys containing `key`, `token` ... are encrypted and reported as `set SKILL.KEY (secret,
    encrypted)`' and '`list` prints `KEY = VALUE` ... credential values shown as `********`'."""
    res = invoke("config", "set", "wx", "--role", "cfgrole", "--", "--api-token=abc123", "units=metric")
    assert res.exit_code == 0, res.output
    assert "api_token" in res.output and "encrypted" in res.output
    lst = invoke("config", "list", "wx", "--role", "cfgrole")
    assert "abc123" not in lst.output and "units = metric" in lst.output and "********" in lst.output
    invoke("config", "unset", "wx", "--role", "cfgrole")


def test_config_set_pair_without_value_exit_2(db_env):
    """docs/cli.md: '`set` stores each pair (a pair without `=` or with an empty key exits 2)'."""
    res = invoke("config", "set", "wx", "novalue")
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_config_set_plain_and_secret(db_env):
    """keys containing `key`, `token`, … are encrypted and reported as `set SKILL.KEY (secret, encrypted)`"""
    skill = "cfg" + uuid.uuid4().hex[:6]
    out = invoke("config", "set", skill, "api_token=abc12345", "units=metric")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert f"set {skill}.api_token (secret, encrypted)" in lines and f"set {skill}.units" in lines
    assert "abc12345" not in out.output


def test_config_keys_normalized(db_env):
    """Keys are normalized (`api-token` → `api_token`)"""
    skill = "cfg" + uuid.uuid4().hex[:6]
    out = invoke("config", "set", skill, "api-token=abc12345", "my name=v")
    assert f"{skill}.api_token" in out.stdout and f"{skill}.my_name" in out.stdout
    listing = invoke("config", "list", skill)
    assert "api_token = ********" in listing.stdout and "my_name = v" in listing.stdout


def test_config_list_sorted_and_masked(db_env):
    """`list` prints `KEY = VALUE` sorted by key, with credential values shown as `********`."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "zeta=1", "alpha=2", "db_password=hunter22", "Mid=3")
    out = invoke("config", "list", skill)
    assert out.exit_code == 0
    lines = out.stdout.splitlines()
    assert [line.split(" = ")[0] for line in lines] == sorted(["zeta", "alpha", "db_password", "Mid"])
    assert "db_password = ********" in lines and "hunter22" not in out.output


@pytest.mark.parametrize("key", ["key", "token", "secret", "password", "credential", "auth"])
def test_config_credential_substrings_encrypted(db_env, key):
    """keys containing `key`, `token`, `secret`, `password`, `credential` or `auth` are encrypted"""
    skill = "cfg" + uuid.uuid4().hex[:6]
    out = invoke("config", "set", skill, f"My{key.upper()}x=value-{key}-1234")
    assert "(secret, encrypted)" in out.stdout and f"value-{key}-1234" not in invoke("config", "list", skill).stdout


def test_config_secret_stored_encrypted(db_env, database_url):
    """**Encryption.** A key containing `key`, … is stored encrypted with Fernet"""
    import asyncpg

    from support.datatable import asyncpg_dsn

    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "api_key=plain-text-never-stored")

    async def read() -> list[Any]:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            return [dict(r) for r in await conn.fetch("SELECT * FROM skillyard.skill_configs WHERE skill = $1", skill)]
        finally:
            await conn.close()

    rows = asyncio.run(read())
    assert rows and "plain-text-never-stored" not in json.dumps(rows, default=str)


def test_config_secret_key_file_mode(db_env, home, monkeypatch):
    """The key is `SKILLYARD_SECRET_KEY` if set, else `SKILLYARD_HOME/secret.key`, created with mode 0600 the first
    time a secret is stored."""
    monkeypatch.delenv("SKILLYARD_SECRET_KEY", raising=False)
    invoke("config", "set", "cfg" + uuid.uuid4().hex[:6], "token=abcd1234")
    key_file = home / "secret.key"
    assert key_file.is_file() and (key_file.stat().st_mode & 0o777) == 0o600


def test_config_set_replaces(db_env):
    """Setting a key again replaces it."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "units=metric")
    invoke("config", "set", skill, "units=imperial")
    assert invoke("config", "list", skill).stdout.splitlines() == ["units = imperial"]


@pytest.mark.parametrize("pair", ["nokey", "=value", " =value"])
def test_config_set_bad_pair_exit_2(db_env, pair):
    """`set` stores each pair (a pair without `=` or with an empty key exits 2)."""
    usage_error(invoke("config", "set", "cfgbad", pair), "KEY=VALUE")


def test_config_bad_pair_stores_nothing(db_env):
    """`set` stores each pair (a pair without `=` or with an empty key exits 2)."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    out = invoke("config", "set", skill, "good=1", "bad")
    assert out.exit_code == 2 and invoke("config", "list", skill).stdout.strip() == ""


def test_config_dash_key_after_double_dash(db_env):
    """A key that starts with `-` is read as an option; put such pairs after `--`."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    out = invoke("config", "set", skill, "--", "--api-token=zz991122")
    assert out.exit_code == 0 and f"set {skill}.api_token (secret, encrypted)" in out.stdout


def test_config_unset_keys(db_env):
    """`unset` removes the given keys … and prints `removed N key(s)`."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "a=1", "b=2", "c=3")
    out = invoke("config", "unset", skill, "a", "b")
    assert out.exit_code == 0 and out.stdout.strip() == "removed 2 key(s)"
    assert invoke("config", "list", skill).stdout.splitlines() == ["c = 3"]


def test_config_unset_all(db_env):
    """`unset` removes … every key of the skill for that role when none is given"""
    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "a=1", "b=2")
    invoke("config", "set", skill, "a=9", "--role", "other")
    assert invoke("config", "unset", skill).stdout.strip() == "removed 2 key(s)"
    assert invoke("config", "list", skill, "--role", "other").stdout.splitlines() == ["a = 9"]


def test_config_unset_missing_key_removes_zero(db_env):
    """`unset` … prints `removed N key(s)`."""
    assert invoke("config", "unset", "cfg" + uuid.uuid4().hex[:6], "nothing").stdout.strip() == "removed 0 key(s)"


def test_config_roles_are_separate(db_env):
    """Per-role skill configs … `--role` defaults to `$SKILLYARD_ROLE`, else the default role `""`."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "units=metric", "--role", "sales")
    assert invoke("config", "list", skill).stdout.strip() == ""
    assert invoke("config", "list", skill, "--role", "sales").stdout.splitlines() == ["units = metric"]


def test_config_role_from_environment(db_env, monkeypatch):
    """`--role` defaults to `$SKILLYARD_ROLE`"""
    skill = "cfg" + uuid.uuid4().hex[:6]
    monkeypatch.setenv("SKILLYARD_ROLE", "support")
    invoke("config", "set", skill, "units=metric")
    monkeypatch.delenv("SKILLYARD_ROLE")
    assert invoke("config", "list", skill, "--role", "support").stdout.splitlines() == ["units = metric"]


def test_config_skill_not_checked_against_catalog(db_env):
    """The skill name is not checked against the catalog."""
    out = invoke("config", "set", "definitely_not_a_skill_" + uuid.uuid4().hex[:6], "a=1")
    assert out.exit_code == 0


def test_config_missing_pairs_exit_2(db_env):
    """2 | usage error: unknown command or option … (set needs KEY=VALUE pairs)"""
    usage_error(invoke("config", "set", "x"))


def test_config_unreachable_database_exit_2(monkeypatch):
    """2 | … host errors raised around a run (database unreachable, …)"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:cfg-pass-77@127.0.0.1:1/db")
    out = invoke("config", "list", "x")
    usage_error(out)
    assert "cfg-pass-77" not in out.output


def test_config_role_reaches_run(db_env, tmp_path):
    """Configs are read for the `role_id` given in `--context` (default role `""`)."""
    skill = "leaky" + uuid.uuid4().hex[:6]
    write_skill(
        tmp_path / "cr",
        skill,
        f"name: {skill}\ndescription: d",
        files={"handler.py": GREET, "schema.json": GREET_SCHEMA},
    )
    invoke("config", "set", skill, "api_key=role-secret-value", "--role", "sales")
    base = ["run", skill, "--skills-dir", str(tmp_path / "cr"), "--input", '{"who": "x"}']
    default = invoke(*base)
    assert default.exit_code == 0 and json.loads(default.stdout)["got_key"] is None
    sales = invoke(*base, "--context", '{"role_id": "sales"}')
    assert sales.exit_code == 0  # the value reached the skill; whether it is echoed is the skill's business
    assert json.loads(sales.stdout)["got_key"] in ("role-secret-value", "***")


def test_config_set_reads_a_secret_from_stdin_and_keeps_it_off_argv(db_env):
    """Hardening issue 10: KEY=- reads the value from stdin (a hidden prompt on a terminal), one key per call."""
    done = invoke("config", "set", "weather", "api_token=-", input="from-stdin-123\n")
    assert done.exit_code == 0 and "set weather.api_token (secret, encrypted)" in done.stdout, done.output
    listed = invoke("config", "list", "weather")
    assert "api_token = ********" in listed.stdout and "from-stdin-123" not in listed.output
    two = invoke("config", "set", "weather", "api_token=-", "region=eu", input="x\n")
    assert two.exit_code == 2 and "one key per call" in two.output


def test_config_list_masks_what_the_wider_rule_and_the_skill_call_secret(db_env, make_skill, skills_root):
    make_skill(
        "hook", frontmatter="name: hook\ndescription: d\nmetadata:\n  skillyard:\n    secret_configs: [target_url]"
    )
    env = {"SKILLYARD_SKILLS_PATH": str(skills_root)}
    stored = invoke("config", "set", "hook", "db_passwd=p4ssw0rd-x", "target_url=https://h/x", "region=eu", env=env)
    assert stored.exit_code == 0, stored.output
    assert "db_passwd (secret" in stored.stdout and "target_url (secret" in stored.stdout
    assert "region (secret" not in stored.stdout
    listed = invoke("config", "list", "hook", env=env).stdout
    assert "db_passwd = ********" in listed and "target_url = ********" in listed and "region = eu" in listed


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def test_config_rotate_key_with_the_key_file(empty_database, home, monkeypatch):
    """docs/cli.md: '`rotate-key` adds a new key at the top of the key file, re-encrypts every stored secret with it
    and prints how many'."""
    monkeypatch.delenv("SKILLYARD_SECRET_KEY")
    invoke("config", "set", "weather", "api_token=tok-rot-1", "units=metric")
    invoke("config", "set", "weather", "api_token=tok-rot-2", "--role", "r2")
    out = invoke("config", "rotate-key")
    assert out.exit_code == 0, out.output
    header, line = out.stdout.splitlines()
    assert header.split() == ["ROTATED", "KEYS", "NEW", "KEY", "KEY", "SOURCE"]
    assert line.split() == ["2", "2", "yes", str(home / "secret.key")]
    as_json = invoke("config", "rotate-key", "--json")
    assert json.loads(as_json.stdout) == {
        "rotated": 2,
        "key_source": "key file",
        "key_file": str(home / "secret.key"),
        "key_added": True,
        "keys": 3,
        "note": None,
    }
    assert len((home / "secret.key").read_text().split()) == 3
    assert "api_token = ********" in invoke("config", "list", "weather", "--role", "r2").stdout


def test_config_rotate_key_with_env_keys_says_it_cannot_edit_them(empty_database, monkeypatch):
    old, new = _fernet_key(), _fernet_key()
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", old)
    invoke("config", "set", "weather", "api_token=tok-env-1")
    monkeypatch.setenv("SKILLYARD_SECRET_KEYS", f"{new},{old}")
    out = invoke("config", "rotate-key")
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[1].split() == ["1", "2", "no", "SKILLYARD_SECRET_KEYS"]
    assert "cannot edit" in out.stdout and "put a new key first in SKILLYARD_SECRET_KEYS" in out.stdout
    report = json.loads(invoke("config", "rotate-key", "--json").stdout)
    assert report["rotated"] == 1 and report["key_source"] == "SKILLYARD_SECRET_KEYS" and report["key_file"] is None
    assert report["key_added"] is False and "cannot edit" in report["note"]
    monkeypatch.setenv("SKILLYARD_SECRET_KEYS", new)  # the old key can go
    monkeypatch.delenv("SKILLYARD_SECRET_KEY")
    assert invoke("config", "list", "weather").stdout.splitlines() == ["api_token = ********"]


def test_config_rotate_key_on_an_empty_store_says_0(empty_database):
    out = invoke("config", "rotate-key")
    assert out.exit_code == 0 and out.stdout.splitlines()[1].split()[0] == "0"
    assert json.loads(invoke("config", "rotate-key", "--json").stdout)["rotated"] == 0


def test_config_rotate_key_with_a_bad_key_is_a_usage_error(empty_database, monkeypatch):
    """An invalid key anywhere in the list: exit 2 naming the position and how to generate a key, never its value."""
    monkeypatch.setenv("SKILLYARD_SECRET_KEYS", f"{_fernet_key()},bad-key-value-42,{_fernet_key()}")
    out = invoke("config", "rotate-key")
    usage_error(out, "SKILLYARD_SECRET_KEYS: key 2 of 3", "Fernet.generate_key()")
    assert "bad-key-value-42" not in out.output
