"""Real ``skillyard worker`` processes on one database: one run per schedule tick however many workers tick, a
SIGKILLed worker's step recovered by another with every finished step's side effect present once, SIGTERM
draining, and schedules that keep ticking after a restart (procrastinate issue #1495). The process is the subject
here, so these tests start real processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard

pytest_plugins = ("support.databases",)

#: Appends one line to input["file"]: the step id and the run's scheduled time (what a side effect looks like).
APPEND = """
import asyncio
from pathlib import Path

async def execute(input, context):
    await asyncio.sleep(input.get("seconds", 0))
    with Path(input["file"]).open("a") as fh:
        fh.write(f"{input['line']}\\n")
    return {"wrote": input["line"]}
"""

FAST = {"SKILLYARD_WORKER_HEARTBEAT_S": "0.5", "SKILLYARD_WORKER_STALL_S": "2"}


@pytest.fixture
def skills(make_skill) -> Path:
    return make_skill("append", files={"handler.py": APPEND}).parent


class Workers:
    """``skillyard worker`` processes of one test, stopped (SIGKILL if need be) when it ends."""

    def __init__(self, skills: Path, tmp: Path) -> None:
        self.skills = skills
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        log = (self.tmp / f"worker{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "skillyard", "worker", "--concurrency", "2", "--skills-dir", str(self.skills)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **FAST},
        )
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.tmp.glob("worker*.log")))


@pytest.fixture
def workers(skills: Path, tmp_path: Path, empty_database: str) -> Iterator[Workers]:
    group = Workers(skills, tmp_path)
    try:
        yield group
    finally:
        group.stop_all()


async def _wait(check: Any, seconds: float, what: str, workers: Workers) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what} within {seconds} s; worker logs:\n{workers.logs()[-4000:]}")


def chain(name: str, steps: list[dict[str, Any]]) -> str:
    return json.dumps({"name": name, "steps": steps})


async def test_two_workers_start_one_run_per_tick(workers, skills, tmp_path):
    out = tmp_path / "ticks.txt"
    async with SkillYard([skills]) as yard, yard.chains() as chains:
        step = {"id": "w", "skill": "append", "input": {"file": str(out), "line": "{{ trigger.scheduled_at }}"}}
        await chains.add(chains.read(chain("every_second", [step]), "x"))
        workers.start()
        workers.start()
        await asyncio.sleep(2.5)  # both workers up
        schedule = await chains.schedule("every_second", "* * * * * *", overlap="allow")
        await asyncio.sleep(6)
        await chains.pause(schedule["id"])
        await asyncio.sleep(1.5)  # the last runs finish
        ticks = await chains.ticks(schedule["id"])
        runs = await chains.runs("every_second", limit=100)
    lines = out.read_text().splitlines()
    started = [t for t in ticks if t["status"] == "started"]
    assert len(started) >= 4, (ticks, workers.logs()[-3000:])
    assert len(lines) == len(set(lines)) == len(started)  # one run per tick, none twice
    assert len({t["run_id"] for t in started}) == len(started) == len(runs)
    assert all(r["status"] == "succeeded" for r in runs), runs


async def test_a_sigkilled_worker_is_recovered_and_each_finished_step_happened_once(workers, skills, tmp_path):
    out = tmp_path / "effects.txt"
    steps = [
        {"id": "first", "skill": "append", "input": {"file": str(out), "line": "first"}},
        {"id": "slow", "skill": "append", "input": {"file": str(out), "line": "slow", "seconds": 3}},
        {"id": "last", "skill": "append", "input": {"file": str(out), "line": "last"}},
    ]
    async with SkillYard([skills]) as yard, yard.chains() as chains:
        await chains.add(chains.read(chain("crashy", steps), "x"))
        victim = workers.start()
        run_id = await chains.start("crashy")

        async def slow_running() -> bool:
            run = await chains.get_run(run_id)
            return run["steps"][1]["status"] == "running"

        await _wait(slow_running, 20, "the slow step did not start", workers)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        workers.start()

        async def finished() -> dict[str, Any] | None:
            run = await chains.get_run(run_id)
            return run if run["status"] in ("succeeded", "failed") else None

        run = await _wait(finished, 40, "the run did not finish after the crash", workers)
    assert run["status"] == "succeeded", run
    assert out.read_text().splitlines() == ["first", "slow", "last"]  # the killed step ran again, nothing else did
    assert [s["attempts"] for s in run["steps"]] == [1, 2, 1]


async def test_sigterm_drains_the_running_step_and_takes_no_new_one(workers, skills, tmp_path):
    out = tmp_path / "effects.txt"
    steps = [
        {"id": "slow", "skill": "append", "input": {"file": str(out), "line": "slow", "seconds": 2}},
        {"id": "next", "skill": "append", "input": {"file": str(out), "line": "next"}},
    ]
    async with SkillYard([skills]) as yard, yard.chains() as chains:
        await chains.add(chains.read(chain("drain", steps), "x"))
        worker = workers.start()
        run_id = await chains.start("drain")

        async def running() -> bool:
            return (await chains.get_run(run_id))["steps"][0]["status"] == "running"

        await _wait(running, 20, "the slow step did not start", workers)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(20) == 0, workers.logs()
        run = await chains.get_run(run_id)
        assert [s["status"] for s in run["steps"]] == ["succeeded", "pending"]  # finished, the next one left queued
        assert out.read_text().splitlines() == ["slow"]
        workers.start()

        async def done() -> bool:
            return (await chains.get_run(run_id))["status"] == "succeeded"

        await _wait(done, 20, "another worker did not take the next step", workers)
    assert out.read_text().splitlines() == ["slow", "next"]


async def test_schedules_keep_ticking_after_the_workers_restart(workers, skills, tmp_path):
    """procrastinate #1495: a periodic defer record without a job blocked later ticks after a restart; the ticker
    runs every second and schedules are claimed in our own table, so a restarted worker ticks on."""
    out = tmp_path / "ticks.txt"
    async with SkillYard([skills]) as yard, yard.chains() as chains:
        step = {"id": "w", "skill": "append", "input": {"file": str(out), "line": "{{ trigger.scheduled_at }}"}}
        await chains.add(chains.read(chain("restarted", [step]), "x"))
        schedule = await chains.schedule("restarted", "* * * * * *", overlap="allow")
        first = workers.start()

        async def ticked(n: int) -> Any:
            async def check() -> bool:
                return out.exists() and len(out.read_text().splitlines()) >= n

            return check

        await _wait(await ticked(2), 20, "the schedule did not tick", workers)
        first.send_signal(signal.SIGKILL)  # no clean shutdown: whatever procrastinate left behind stays
        first.wait()
        before = len(out.read_text().splitlines())
        workers.start()
        await _wait(await ticked(before + 2), 25, "the schedule did not tick after the restart", workers)
        await chains.pause(schedule["id"])
        runs = await chains.runs("restarted", limit=200)
    ticks = [run["trigger"]["scheduled_at"] for run in runs]
    assert len(ticks) == len(set(ticks))  # one run per tick, before the kill and after the restart
    # A step the SIGKILL cut short may have written its line before its end was recorded; recovered, it ran again.
    attempts = {run["trigger"]["scheduled_at"]: run["steps"][0]["attempts"] for run in runs}
    for line, count in Counter(out.read_text().splitlines()).items():
        assert count <= attempts[line], (line, count, runs)
