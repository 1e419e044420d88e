"""The chain engine: a 3-step chain of trivial in-process skills, run by two `skillyard worker` processes and by the
in-process runner (`chains.run`), against `yard.run` of the same three skills.

    python bench/bench_chains.py

Uses the embedded PostgreSQL as a user's machine runs it: SKILLYARD_DATABASE_URL stays unset, so the server in the
temporary SKILLYARD_HOME starts (its first start and the migrations happen before anything is timed) and the workers,
started with the same SKILLYARD_HOME, share it.

Every skill returns ``{"n": input["n"] + 1, "t": time.time()}``: ``t`` is when the skill itself ran, in whichever
process ran it. The gap between two consecutive steps' ``t`` is one whole step of the engine (the rest of the first
skill's yard.run, recording it, deferring the next job and committing, the worker fetching that job, reading and
claiming the next step, and the next yard.run up to its skill): the per-step overhead is that gap minus the
per-step time of `yard.run` alone. defer→start is from `chains.start` returning (the first job committed) to the
first skill's ``t``, with the workers idle (one run at a time).

(b) 300 runs of `await chains.run(...)`, each interleaved with 5 baseline rounds; (a) two workers
(`--concurrency 4`), 100 runs one at a time (the idle figures), then 300 runs started at once (throughput and CPU
per step, no target). BENCH_INPROCESS_RUNS, BENCH_IDLE_RUNS and BENCH_LOADED_RUNS change the counts. About a minute
on a 2-CPU VM; progress goes to stderr. Exits non-zero only when a run's result is wrong.

Targets (the issue): per-step overhead <= 5 ms median; defer→start median <= 20 ms with a worker idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
from _common import isolate, verdict

TMP, BASE = isolate("chains")

from skillyard import RunPolicy  # noqa: E402  (after isolate(): the host reads the environment)
from skillyard.yard import SkillYard  # noqa: E402

OVERHEAD_TARGET_MS = 5.0
LATENCY_TARGET_MS = 20.0
#: (b) runs of the in-process runner; (a) sequential runs on idle workers and runs started at once.
N_INPROCESS = int(os.environ.get("BENCH_INPROCESS_RUNS", "300"))
N_IDLE = int(os.environ.get("BENCH_IDLE_RUNS", "100"))
N_LOADED = int(os.environ.get("BENCH_LOADED_RUNS", "300"))
WORKERS = 2
WORKER_CONCURRENCY = 4
WORKER_COMMAND = (sys.executable, "-m", "skillyard", "worker", "--concurrency", str(WORKER_CONCURRENCY))
#: yard.run rounds of the three skills per chain run of (b), interleaved with it.
BASELINE_ROUNDS = 5
SKILLS = ("bench_a", "bench_b", "bench_c")
CHAIN = "bench3"
HANDLER = textwrap.dedent(
    """\
    import time

    async def execute(input, context):
        return {"n": input.get("n", 0) + 1, "t": time.time()}
    """
)
STEPS = [
    {"id": "a", "skill": "bench_a", "input": {"n": "{{ trigger.n }}"}},
    {"id": "b", "skill": "bench_b", "input": {"n": "{{ steps.a.n }}"}},
    {"id": "c", "skill": "bench_c", "input": {"n": "{{ steps.b.n }}"}},
]

Run = dict[str, Any]


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def make_skills(root: Path) -> None:
    for name in SKILLS:
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Add one to n.\n---\n\n# {name}\n")
        (folder / "handler.py").write_text(HANDLER)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.2f} ms"


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    at = (len(ordered) - 1) * q / 100
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def skill_times(run: Run, trigger_n: int = 0) -> list[float]:
    """The three skills' own times of a run, after checking the run did what the chain says; exits when not."""
    steps = run["steps"]
    ok = run["status"] == "succeeded" and [s["id"] for s in steps] == ["a", "b", "c"]
    ok = ok and all(s["status"] == "succeeded" and s["attempts"] == 1 for s in steps)
    ok = ok and [(s["envelope"] or {}).get("n") for s in steps] == [trigger_n + 1, trigger_n + 2, trigger_n + 3]
    if not ok:
        sys.exit(f"wrong chain run: {json.dumps(run, default=str)[:2000]}")
    return [float(s["envelope"]["t"]) for s in steps]


def gaps(times: list[list[float]]) -> list[float]:
    """Seconds from each skill to the next one of the same run (two per run)."""
    return [t[i + 1] - t[i] for t in times for i in range(len(t) - 1)]


async def baseline_round(yard: SkillYard, as_step: bool = False) -> float:
    """Seconds per skill of `yard.run` of the three skills in sequence, the chain's inputs, checked.

    ``as_step``: with what a chain step adds, RunPolicy.unattended() and a step's runtime context (a session of
    its own per run, an idempotency key, an abort_signal), for the size of that part (no target).
    """
    session = f"chain-{uuid.uuid4().hex}"
    start = time.perf_counter()
    n = 0
    for name in SKILLS:
        if as_step:
            context = {
                "role_id": "",
                "session_id": session,
                "idempotency_key": f"{session}:{name}",
                "triggered_at": time.time(),
                "abort_signal": asyncio.Event(),
            }
            result = await yard.run(name, {"n": n}, context, policy=RunPolicy.unattended())
        else:
            result = await yard.run(name, {"n": n})
        if result.get("n") != n + 1 or not result.get("ok"):
            sys.exit(f"unexpected envelope from yard.run({name!r}): {result!r}")
        n = result["n"]
    return (time.perf_counter() - start) / len(SKILLS)


async def count(chains: Any, query: str, params: dict[str, Any] | None = None) -> int:
    async with chains.transaction() as conn, conn.cursor() as cur:
        await cur.execute(query, params or {})
        row = await cur.fetchone()
        return int(row[0])


async def wait_finished(chains: Any, run_ids: list[str], timeout: float, poll: float, first: float = 0.0) -> None:
    """Poll until every run has ended (a run's end is told only to the process whose worker ended it); the first
    look after ``first`` seconds, so that polling does not compete with the run for the CPUs."""
    deadline = time.monotonic() + timeout
    await asyncio.sleep(first)
    while time.monotonic() < deadline:
        left = await count(
            chains,
            """SELECT count(*) FROM skillyard.chain_runs
               WHERE id = ANY(%(ids)s) AND status NOT IN ('succeeded', 'failed', 'stopped_empty', 'cancelled')""",
            {"ids": run_ids},
        )
        if left == 0:
            return
        await asyncio.sleep(poll)
    sys.exit(f"{len(run_ids)} chain run(s) did not all end within {timeout:g} s")


class Workers:
    """`python -m skillyard worker` processes on the same SKILLYARD_HOME (so the same embedded server)."""

    def __init__(self, skills: Path) -> None:
        self.skills = skills
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def start(self, n: int) -> None:
        for i in range(n):
            log = BASE / f"worker{i}.log"
            self.logs.append(log)
            with log.open("wb") as out:
                self.procs.append(
                    subprocess.Popen(
                        [*WORKER_COMMAND, "--skills-dir", str(self.skills)],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=dict(os.environ),
                    )
                )

    def cpu(self) -> float:
        """CPU seconds the worker processes have used so far."""
        return sum(sum(psutil.Process(p.pid).cpu_times()[:2]) for p in self.procs)

    def check_alive(self) -> None:
        for proc, log in zip(self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                sys.exit(f"a worker exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def step_lines(label: str, per_step: list[float], baseline: float, target: bool) -> str:
    """Median and p95 of a per-step time and of its overhead over the baseline."""
    med, p95 = statistics.median(per_step), pct(per_step, 95)
    over = med - baseline
    line = (
        f"{label}\n    per step {ms(med)} median, {ms(p95)} p95"
        f"  -> overhead {ms(over)} median, {ms(p95 - baseline)} p95"
    )
    if target:
        line += f"  [<= {OVERHEAD_TARGET_MS:g} ms median: {verdict(over * 1e3 <= OVERHEAD_TARGET_MS)}]"
    return line


def postgres_cpu() -> dict[int, float]:
    """CPU seconds of each process of the embedded server (the postmaster and its backends) so far."""
    pid = int((Path(os.environ["SKILLYARD_HOME"]) / "pg" / "postmaster.pid").read_text().split()[0])
    used: dict[int, float] = {}
    server = psutil.Process(pid)
    for proc in [server, *server.children()]:
        with contextlib.suppress(psutil.Error):  # a backend that just ended
            used[proc.pid] = sum(proc.cpu_times()[:2])
    return used


def cpu_since(before: dict[int, float]) -> float:
    """CPU seconds the server used since ``before`` (backends started since count from zero)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in postgres_cpu().items())


async def in_process(yard: SkillYard, chains: Any, baseline: list[float], as_step: list[float]) -> dict[str, Any]:
    """(b): `chains.run` N times, each interleaved with a few baseline rounds."""
    walls: list[float] = []
    firsts: list[float] = []
    times: list[list[float]] = []
    for i in range(N_INPROCESS):
        for _ in range(BASELINE_ROUNDS):
            baseline.append(await baseline_round(yard))
            as_step.append(await baseline_round(yard, as_step=True))
        t0 = time.time()
        start = time.perf_counter()
        run = await chains.run(CHAIN, {"n": i})
        walls.append(time.perf_counter() - start)
        t = skill_times(run, i)
        firsts.append(t[0] - t0)
        times.append(t)
        if (i + 1) % 100 == 0:
            progress(f"  (b) {i + 1}/{N_INPROCESS} runs")
    return {"walls": walls, "firsts": firsts, "gaps": gaps(times)}


async def on_workers(yard: SkillYard, chains: Any, workers: Workers) -> dict[str, Any]:
    """(a): sequential runs on idle workers, then N runs started at once."""
    # Up: each `skillyard worker` registers two procrastinate workers (its steps and its upkeep).
    deadline = time.monotonic() + 60
    while await count(chains, "SELECT count(*) FROM procrastinate.procrastinate_workers") < 2 * WORKERS:
        workers.check_alive()
        if time.monotonic() > deadline:
            sys.exit("the workers did not register within 60 s")
        await asyncio.sleep(0.1)
    # Warm-up: both workers import the three handlers (a batch spreads over both), then a few sequential runs.
    warm = [await chains.start(CHAIN, {"n": 0}) for _ in range(40)]
    await wait_finished(chains, warm, 60, 0.05)
    for _ in range(10):
        run_id = await chains.start(CHAIN, {"n": 0})
        await wait_finished(chains, [run_id], 30, 0.01, first=0.06)
    for run_id in warm:
        skill_times(await chains.get_run(run_id))

    progress(f"  (a) {N_IDLE} runs one at a time (workers idle)")
    latencies: list[float] = []
    idle_times: list[list[float]] = []
    for i in range(N_IDLE):
        await asyncio.sleep(0.02)  # the previous run's job is finished on the worker too
        run_id = await chains.start(CHAIN, {"n": i})
        committed = time.time()
        await wait_finished(chains, [run_id], 30, 0.01, first=0.06)
        t = skill_times(await chains.get_run(run_id), i)
        latencies.append(t[0] - committed)
        idle_times.append(t)

    progress(f"  (a) {N_LOADED} runs started at once")
    await asyncio.sleep(0.2)
    workers_cpu, server_cpu, own_cpu = workers.cpu(), postgres_cpu(), time.process_time()
    first = time.time()
    ids = [await chains.start(CHAIN, {"n": i}) for i in range(N_LOADED)]
    started = time.time() - first
    await wait_finished(chains, ids, 120, 0.1)
    cpu = {
        "workers": workers.cpu() - workers_cpu,
        "postgres": cpu_since(server_cpu),
        "bench": time.process_time() - own_cpu,
    }
    loaded = [skill_times(await chains.get_run(run_id), i) for i, run_id in enumerate(ids)]
    return {
        "latencies": latencies,
        "idle_gaps": gaps(idle_times),
        "loaded_elapsed": max(t[-1] for t in loaded) - first,
        "loaded_started": started,
        "loaded_cpu": cpu,
    }


async def main() -> None:
    root = BASE / "skills"
    make_skills(root)
    progress("starting the embedded PostgreSQL (first start and migrations, not timed)")
    async with SkillYard(skills_dirs=[root], include_builtin=False) as yard:
        await yard.database.engine()
        async with yard.chains() as chains:
            await chains.add(chains.read(json.dumps({"name": CHAIN, "steps": STEPS}), "bench"))
            for _ in range(2000):  # warm up yard.run: imports, validators, caches
                await baseline_round(yard)
            for i in range(10):  # and the in-process runner
                skill_times(await chains.run(CHAIN, {"n": i}), i)

            progress(f"(b) in-process runner: {N_INPROCESS} runs of chains.run")
            baseline: list[float] = []
            as_step: list[float] = []
            b = await in_process(yard, chains, baseline, as_step)

            progress(f"(a) starting {WORKERS} workers (concurrency {WORKER_CONCURRENCY})")
            workers = Workers(root)
            try:
                workers.start(WORKERS)
                a = await on_workers(yard, chains, workers)
                workers.check_alive()
            finally:
                workers.stop()
            for _ in range(len(baseline) // 2):  # the baseline again, with the workers gone
                baseline.append(await baseline_round(yard))

    report(baseline, as_step, a, b)


def report(baseline: list[float], as_step: list[float], a: dict[str, Any], b: dict[str, Any]) -> None:
    base = statistics.median(baseline)
    print(f"python {sys.version.split()[0]}; {os.cpu_count()} CPUs; embedded PostgreSQL; chain a -> b -> c")
    print(
        f"baseline yard.run of the three skills in sequence: {ms(base)} median per skill, {ms(min(baseline))} best,"
        f" {ms(pct(baseline, 95))} p95 ({len(baseline)} rounds)"
    )
    step = statistics.median(as_step)
    print(
        f"  as a chain step runs it (RunPolicy.unattended(), a step's context, a new session per run):"
        f" {ms(step)} median ({ms(step - base)} more; part of the overhead below, no target)"
    )
    print()
    print(f"(a) {WORKERS} `skillyard worker` processes, --concurrency {WORKER_CONCURRENCY}")
    print(
        step_lines(
            f"  one run at a time, workers idle ({N_IDLE} runs, skill-to-skill gap of consecutive steps):",
            a["idle_gaps"],
            base,
            target=True,
        )
    )
    lat = a["latencies"]
    med = statistics.median(lat)
    print(
        f"  defer->start (chains.start returned -> first skill ran), workers idle ({N_IDLE} runs):\n"
        f"    {ms(med)} median, {ms(pct(lat, 95))} p95, {ms(min(lat))} best"
        f"  [<= {LATENCY_TARGET_MS:g} ms median: {verdict(med * 1e3 <= LATENCY_TARGET_MS)}]"
    )
    steps = 3 * N_LOADED
    per = a["loaded_elapsed"] / steps
    print(
        f"  {N_LOADED} runs started at once ({a['loaded_started']:.2f} s to start them all):"
        f" all ended in {a['loaded_elapsed']:.2f} s, {steps / a['loaded_elapsed']:,.0f} steps/s,"
        f" {ms(per)} per step -> {ms(per - base)} over the baseline (throughput; no target)"
    )
    cpu = a["loaded_cpu"]
    print(
        f"    CPU per step meanwhile: workers {ms(cpu['workers'] / steps)}, PostgreSQL {ms(cpu['postgres'] / steps)},"
        f" this process (starting the runs, polling) {ms(cpu['bench'] / steps)}"
    )
    print()
    print(f"(b) in-process runner, `await chains.run(...)` ({N_INPROCESS} runs, the engine's one worker)")
    print(step_lines("  skill-to-skill gap of consecutive steps:", b["gaps"], base, target=True))
    walls = [w / 3 for w in b["walls"]]
    print(step_lines("  whole chains.run / 3 (start and wait included):", walls, base, False))
    print(
        f"  chains.run called -> first skill ran: {ms(statistics.median(b['firsts']))} median,"
        f" {ms(pct(b['firsts'], 95))} p95"
    )


if __name__ == "__main__":
    asyncio.run(main())
