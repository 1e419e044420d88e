"""The token store and ``skillyard token``: shown once, stored hashed, listed without it, revoked."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from skillyard.cli import cli
from skillyard.errors import InvalidInput
from skillyard.storage.database import Database
from skillyard.tokens import TokenStore
from skillyard.tokens.store import token_hash


async def test_a_token_is_kept_only_as_its_hash_and_carries_its_identity(empty_database: str, tmp_path) -> None:
    database = Database(empty_database, tmp_path / "pg")
    store = TokenStore(database)
    try:
        token = await store.add("bot", "sales", "acme", {"actor_emp_no": "E1", "allow_sql": True}, is_admin=True)
        identity = await store.verify(token)
        assert identity is not None and identity.context()["org_id"] == "acme"
        assert identity.context()["is_admin"] is True and identity.context()["actor_emp_no"] == "E1"
        assert await store.verify(token + "x") is None
        engine = await database.engine()
        async with engine.connect() as conn:
            from sqlalchemy import text

            rows = (await conn.execute(text("SELECT * FROM skillyard.api_tokens"))).all()
        assert token not in repr(rows) and token_hash(token) in repr(rows)
        with pytest.raises(InvalidInput, match="is taken; choose another name"):
            await store.add("bot", "sales", "acme")
        with pytest.raises(InvalidInput, match="unknown field 'org'"):
            await store.add("bad", "sales", "acme", {"org": "x"})
        with pytest.raises(InvalidInput, match="may not set 'org_id'"):
            await store.add("bad", "sales", "acme", {"org_id": "x"})
        assert await store.revoke("bot") is True
        assert await store.verify(token) is None
    finally:
        await database.close()


def test_the_token_commands(empty_database: str) -> None:
    runner = CliRunner()
    made = runner.invoke(cli, ["token", "add", "--name", "cli-bot", "--role", "r", "--org", "o"])
    assert made.exit_code == 0, made.output
    token = made.stdout.strip().splitlines()[0]
    assert token.startswith("sy_")
    listed = runner.invoke(cli, ["token", "list", "--json"])
    assert json.loads(listed.stdout)[0]["name"] == "cli-bot" and token not in listed.output
    bad = runner.invoke(cli, ["token", "add", "--name", "x", "--role", "r", "--org", "o", "--identity", "[1]"])
    assert bad.exit_code == 2 and "must be a JSON object" in bad.output
    assert runner.invoke(cli, ["token", "revoke", "cli-bot"]).exit_code == 0
    missing = runner.invoke(cli, ["token", "revoke", "cli-bot"])
    assert missing.exit_code == 2 and "no token named 'cli-bot'" in missing.output
