"""The embedded PostgreSQL after a host was killed: the next host reuses the server, prunes the dead host from its
users, and the last user to leave stops it (a SIGKILLed host used to leave it running for good)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

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
