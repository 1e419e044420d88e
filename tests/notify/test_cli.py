"""``skillyard notify alias set | list | remove``: aliases stored encrypted per role, listed masked, checked by
Apprise before they are stored; an alias of an Apprise config file notifies only the URLs of its tags."""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg

from support.cli import invoke, usage_error
from support.datatable import asyncpg_dsn

TOKEN = "tok-" + uuid.uuid4().hex


async def test_set_list_remove_and_the_alias_is_encrypted(host, receiver, db_env):
    port = receiver.base.rsplit(":", 1)[1]
    url = f"json://user:{TOKEN}@127.0.0.1:{port}/hook"
    out = await asyncio.to_thread(invoke, "notify", "alias", "set", "ops", url, "--role", host.role)
    assert out.exit_code == 0 and "stored encrypted" in out.stdout and TOKEN not in out.stdout
    listed = await asyncio.to_thread(invoke, "notify", "alias", "list", "--role", host.role, "--json")
    assert json.loads(listed.stdout) == [{"name": "ops", "urls": ["json://127.0.0.1/…"], "config": None, "tags": []}]
    table = await asyncio.to_thread(invoke, "notify", "alias", "list", "--role", host.role)
    assert "ops" in table.stdout and TOKEN not in table.stdout
    conn = await asyncpg.connect(asyncpg_dsn(db_env))
    try:
        row = await conn.fetchrow(
            "SELECT value, secret FROM skillyard.skill_configs WHERE role_id = $1 AND skill = 'notify'", host.role
        )
    finally:
        await conn.close()
    assert row["secret"] is True and TOKEN not in row["value"]
    host.yard.configs.invalidate()
    assert (await host.notify(message="via cli", target="ops"))["sent"] is True
    removed = await asyncio.to_thread(invoke, "notify", "alias", "remove", "ops", "--role", host.role)
    assert "removed" in removed.stdout
    again = await asyncio.to_thread(invoke, "notify", "alias", "remove", "ops", "--role", host.role)
    assert "nothing changed" in again.stdout


async def test_a_config_file_alias_notifies_only_its_tagged_urls(host, receiver, tmp_path):
    port = receiver.base.rsplit(":", 1)[1]
    config = tmp_path / "apprise.yml"
    config.write_text(
        "urls:\n"
        f"  - json://127.0.0.1:{port}/oncall:\n      tag: oncall\n"
        f"  - json://127.0.0.1:{port}/everyone:\n      tag: all_staff\n"
    )
    out = await asyncio.to_thread(
        invoke, "notify", "alias", "set", "pager", "--config", config, "--tag", "oncall", "--role", host.role
    )
    assert out.exit_code == 0, out.output
    listed = json.loads(
        (await asyncio.to_thread(invoke, "notify", "alias", "list", "--role", host.role, "--json")).stdout
    )
    assert listed[0]["tags"] == ["oncall"] and listed[0]["config"].startswith("Apprise config")
    host.yard.configs.invalidate()
    result = await host.notify(message="disk full", target="pager")
    assert result["sent"] is True and len(receiver.sent("/oncall")) == 1 and receiver.sent("/everyone") == []


def test_bad_aliases_are_refused_with_the_fix(tmp_path):
    usage_error(invoke("notify", "alias", "set", "Bad Name!", "json://127.0.0.1/x"), "NAME", "lower-case letters")
    usage_error(invoke("notify", "alias", "set", "ops"), "give one or more Apprise URLs, or --config FILE")
    usage_error(invoke("notify", "alias", "set", "ops", "nosuch://x"), "URL 1 is not a usable Apprise URL")
    usage_error(invoke("notify", "alias", "set", "ops", "json://127.0.0.1/x", "--tag", "t"), "--tag", "--config FILE")
    empty = tmp_path / "empty.yml"
    empty.write_text("urls: []\n")
    usage_error(invoke("notify", "alias", "set", "ops", "--config", empty), "--config", "holds no URL")
