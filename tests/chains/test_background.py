"""Async skills (§8) on the job queue: their jobs carry no configs or secrets, and a run accepted by a process that
dies is finished by a ``skillyard worker`` (the process is the subject here: real processes, SIGKILL)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from skillyard import SkillYard

pytest_plugins = ("support.databases",)

WRITE_LATER = """
import asyncio
from pathlib import Path

async def execute(input, context):
    await asyncio.sleep(input.get("seconds", 0))
    token = context["skill_configs"].get("later", {}).get("api_token", "none")
    partial = Path(input["file"] + ".partial")
    partial.write_text(token)
    partial.rename(input["file"])  # a test that polls for the file never reads it half written
    return {"user_message": "written"}
"""

ACCEPT_AND_HANG = """
import asyncio, sys
from skillyard import SkillYard

async def main():
    yard = SkillYard([sys.argv[1]])
    ack = await yard.run("later", {"file": sys.argv[2], "seconds": 3}, {"channel": "telegram", "role_id": "ops"})
    print("accepted" if ack.get("async") else f"not async: {ack}", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""

FAST = {"SKILLYARD_WORKER_HEARTBEAT_S": "0.5", "SKILLYARD_WORKER_STALL_S": "2"}


@pytest.fixture
def skills(make_skill) -> Path:
    return make_skill("later", frontmatter="description: d\nasync: true", files={"handler.py": WRITE_LATER}).parent


async def test_a_background_job_holds_no_config_and_the_run_sees_the_prefetched_ones(empty_database, skills, tmp_path):
    secret = "sk-" + uuid.uuid4().hex
    out = tmp_path / "out.txt"
    async with SkillYard([skills]) as yard:
        await yard.configs.set("ops", "later", {"api_token": secret})
        ack = await yard.run("later", {"file": str(out)}, {"channel": "telegram", "role_id": "ops"})
        assert ack["async"] is True
        engine = yard.background._engine
        assert engine is not None
        async with engine.transaction() as conn, conn.cursor() as cur:
            await cur.execute("SELECT args::text, queue_name FROM procrastinate.procrastinate_jobs")
            rows = await cur.fetchall()
        assert rows and all(secret not in args for args, _ in rows)
        assert all(queue.startswith("skillyard-run-") for _, queue in rows)  # this process's own queue
    assert out.read_text() == secret  # yard.close() waited for the run


async def test_a_background_run_survives_the_death_of_the_process_that_accepted_it(empty_database, skills, tmp_path):
    out = tmp_path / "out.txt"
    script = tmp_path / "accept.py"
    script.write_text(ACCEPT_AND_HANG)
    async with SkillYard([skills]) as yard:
        await yard.configs.set("ops", "later", {"api_token": "stored"})
    env = {**os.environ, **FAST}
    accepting = subprocess.Popen(
        [sys.executable, str(script), str(skills), str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    try:
        assert accepting.stdout is not None
        line = accepting.stdout.readline().decode()
        assert line.strip() == "accepted", line + accepting.stdout.read().decode()
        await asyncio.sleep(0.5)  # its own worker has started the run
        accepting.send_signal(signal.SIGKILL)
        accepting.wait()
    finally:
        if accepting.poll() is None:
            accepting.kill()
    assert not out.exists()
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "skillyard", "worker", "--skills-dir", str(skills)], stdout=log, stderr=log, env=env
    )
    try:
        deadline = time.monotonic() + 40
        while not out.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert out.exists(), (tmp_path / "worker.log").read_text()
        assert out.read_text() == "stored"  # the recovering worker read the role's configs itself
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()


async def test_a_queued_job_of_a_dead_process_moves_to_the_shared_queue(empty_database, skills):
    async with SkillYard([skills]) as yard, yard.chains() as chains:
        job = await chains.defer_background(
            "skillyard-run-deadbeef", {"name": "later", "input": {}, "context": {}, "token": "t"}
        )
        async with chains.transaction() as conn:
            await conn.execute(
                "UPDATE procrastinate.procrastinate_events SET at = now() - interval '1 minute' WHERE job_id = %(j)s",
                {"j": job},
            )
        moved = await chains.recover_stalled()
        async with chains.transaction() as conn, conn.cursor() as cur:
            await cur.execute("SELECT queue_name FROM procrastinate.procrastinate_jobs WHERE id = %(j)s", {"j": job})
            (queue,) = await cur.fetchone()
    assert moved == 1 and queue == "skillyard"
