"""The chain engine: procrastinate on the project's PostgreSQL, the chain tasks, workers, the ticker and upkeep.

One queue serves everything that runs in the background: every chain step is a job on it. A worker (``skillyard
worker``) takes jobs of the shared queue and runs the upkeep tasks: the schedule ticker every second, stalled-job
recovery and pruning. Without a worker, a chain run started from the CLI runs on a queue of its own in the same
process, so it never picks up anyone else's jobs; should that process die, recovery moves its unfinished step to
the shared queue for a worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import math
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import procrastinate
from psycopg import AsyncConnection

from ..credentials import masked_logger
from ..errors import SkillyardError
from ..plugins import load_plugins
from ..registry import JobHandler, collect_jobs
from . import store
from .definition import Chain, ChainInvalid, read_chain_file
from .detached import run_background_job
from .schedules import MISSED_AFTER_S, check_cron, check_overlap, check_zone, due_ticks, latest_tick, next_tick
from .settings import ChainSettings
from .steps import StepRunner

if TYPE_CHECKING:
    from ..yard import SkillYard

log = masked_logger("skillyard.chains")

QUEUE = "skillyard"
UPKEEP_QUEUE = "skillyard-upkeep"
LOCAL_PREFIX = "skillyard-run-"  # + 20 hex digits: a queue name is at most 40 characters (its NOTIFY channel)
STEP_TASK = "skillyard.chain_step"
BACKGROUND_TASK = "skillyard.background_run"
#: How often a waiting ``chain run`` looks at its run when nothing told it of a change (a cancel elsewhere).
POLL_S = 0.25
#: Every this many polls, a waiting `chain run` checks that its run still has a job.
ORPHAN_CHECK_EVERY = 8


class ChainError(SkillyardError):
    """A chain operation that cannot be done (an unknown chain, run or schedule; a chain still scheduled)."""


def _key(value: str, what: str) -> str:
    """A name or id as given, or ChainError: PostgreSQL text holds no NUL, so no stored name or id has one."""
    if not isinstance(value, str) or "\x00" in value:
        raise ChainError(f"no {what} {value!r}")
    return value


def _trigger(value: Any, what: str = "the trigger input") -> dict[str, Any]:
    """A trigger input PostgreSQL can store: a JSON object without NUL characters (jsonb refuses \\u0000)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ChainError(f"{what} must be a JSON object (a dict), not {type(value).__name__}")
    try:  # as the store writes it: a cycle or a nesting too deep for it is refused here, with the reason
        json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError) as exc:
        reason = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ChainError(f"{what} cannot be stored as JSON: {reason}") from None
    text = store.nul_text(value)
    if text is not None:
        raise ChainError(f"{what} has a NUL character (\\u0000) in {text[:40]!r}: PostgreSQL cannot store it")
    return dict(value)


#: A queue name: PostgreSQL notifies a queue on a channel of at most 63 bytes, 23 of them procrastinate's prefix.
QUEUE_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.\-]{0,39}\Z")


def check_queue(name: str) -> str:
    """The queue name when a worker can be notified on it; ChainError with the rule otherwise."""
    if not isinstance(name, str) or not QUEUE_NAME.match(name):
        raise ChainError(
            f"--queue {name!r} is not a queue name: use 1-40 letters, digits, '_', '-' or '.', starting with a letter "
            "or digit (longer names exceed PostgreSQL's notification channel)"
        )
    return name


def psycopg_url(url: str) -> str:
    """libpq's form of the project's database URL (procrastinate connects with psycopg, the host with asyncpg)."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


class ChainEngine:
    """The chain engine of one host; ``upkeep=True`` for a worker (ticker, recovery and pruning registered)."""

    def __init__(self, yard: SkillYard, *, upkeep: bool = False, concurrency: int = 1) -> None:
        self.yard = yard
        self.settings = ChainSettings.from_env()
        self.upkeep = upkeep
        self.concurrency = concurrency
        self.app: procrastinate.App | None = None
        self._waiters: dict[str, asyncio.Event] = {}
        self._local: tuple[str, asyncio.Task[None]] | None = None
        self.draining = False
        self.steps = StepRunner(yard, self._defer, self._finished, lambda: not self.draining, LOCAL_PREFIX)

    # Opening -----------------------------------------------------------------------------------------------------

    async def open(self) -> ChainEngine:
        if self.app is not None:
            return self
        url = psycopg_url(await self.yard.database.url())  # migrations (procrastinate's schema too) have run
        connector = procrastinate.PsycopgConnector(
            conninfo=url,
            kwargs={"options": "-c search_path=procrastinate -c synchronous_commit=off"},
            min_size=1,
            max_size=self.concurrency + 4,
        )
        app = procrastinate.App(connector=connector, periodic_defaults={"max_delay": MISSED_AFTER_S})
        self._register(app)
        await app.open_async()
        self.app = app
        return self

    async def close(self) -> None:
        if self._local is not None:
            self._local[1].cancel()
            await asyncio.gather(self._local[1], return_exceptions=True)
            self._local = None
        if self.app is not None:
            await self.app.close_async()
            self.app = None

    async def __aenter__(self) -> ChainEngine:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _register(self, app: procrastinate.App) -> None:
        """The tasks, bound to this engine (procrastinate tasks belong to one app, so each engine makes its own)."""

        @app.task(name=STEP_TASK, pass_context=True)
        async def chain_step(context: procrastinate.JobContext, run_id: str, step_id: str) -> None:
            await self.steps(app.connector.pool, context.job.id, run_id, step_id)  # type: ignore[attr-defined]

        @app.task(name=BACKGROUND_TASK)
        async def background_run(
            name: str, input: dict[str, Any], context: dict[str, Any], token: str, run_id: str = ""
        ) -> None:
            await run_background_job(self.yard, name, input, context, token, run_id)

        for job_name, handler in collect_jobs(load_plugins()).items():  # the plugins' jobs (register_jobs)
            app.task(name=job_name)(_job(self.yard, handler))

        if not self.upkeep:
            return

        @app.periodic(cron="* * * * * *")
        @app.task(name="skillyard.tick", queue=UPKEEP_QUEUE, queueing_lock="skillyard.tick")
        async def tick(timestamp: int) -> None:
            await self.tick(dt.datetime.now(dt.UTC))

        @app.periodic(cron="* * * * * */5")
        @app.task(name="skillyard.recover", queue=UPKEEP_QUEUE, queueing_lock="skillyard.recover")
        async def recover(timestamp: int) -> None:
            await self.recover_stalled()

        @app.periodic(cron="17 * * * *")
        @app.task(name="skillyard.prune", queue=UPKEEP_QUEUE, queueing_lock="skillyard.prune")
        async def prune(timestamp: int) -> None:
            await self.prune()

    def app_task(self, name: str) -> procrastinate.tasks.Task[Any, Any, Any]:
        """The task ``name`` of this engine's app (a plugin's job kind, or one of the chain tasks)."""
        return self._app().tasks[name]

    def _app(self) -> procrastinate.App:
        if self.app is None:
            raise RuntimeError("the chain engine is not open: use `async with yard.chains:` or await open()")
        return self.app

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A psycopg connection of procrastinate's pool in one transaction (chain rows and jobs commit together)."""
        pool = self._app().connector.pool  # type: ignore[attr-defined]
        async with pool.connection() as conn, conn.transaction():
            yield conn

    async def _defer(self, conn: AsyncConnection[Any], queue: str, run_id: str, step_id: str, delay: float) -> int:
        task = self._app().tasks[STEP_TASK]
        if delay > 0:
            at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)
            deferrer = task.configure(queue=queue, connection=conn, schedule_at=at, lock=run_id)
        else:
            deferrer = task.configure(queue=queue, connection=conn, lock=run_id)
        job_id = await deferrer.defer_async(run_id=run_id, step_id=step_id)
        return int(job_id)

    async def defer_background(self, queue: str, payload: dict[str, Any]) -> int:
        """Defer an async skill's background run (§8); the job id."""
        deferrer = self._app().tasks[BACKGROUND_TASK].configure(queue=queue)
        return int(await deferrer.defer_async(**payload))

    async def job_statuses(self, job_ids: Iterable[int]) -> dict[int, str]:
        async with self.transaction() as conn, conn.cursor() as cur:
            await cur.execute(
                "SELECT id, status::text FROM procrastinate.procrastinate_jobs WHERE id = ANY(%(ids)s)",
                {"ids": list(job_ids)},
            )
            return {int(row[0]): str(row[1]) for row in await cur.fetchall()}

    def _finished(self, run_id: str) -> None:
        waiter = self._waiters.get(run_id)
        if waiter is not None:
            waiter.set()

    # Chains ------------------------------------------------------------------------------------------------------

    def read(self, text: str, source: str) -> Chain:
        """Parse and check a chain file against this host's skills; ChainInvalid with every problem."""
        chain = read_chain_file(text, source, lambda name: self.yard.resolve(name) is not None)
        nul = store.nul_text(chain.as_json())
        if nul is not None:  # jsonb cannot store it
            raise ChainInvalid(source, [f"{nul[:40]!r} holds a NUL character (\\u0000), which cannot be stored"])
        return chain

    async def add(self, chain: Chain) -> int:
        """Store a chain (a new version when the name exists); the version."""
        async with self.transaction() as conn:
            return await store.save_chain(conn, chain.name, chain.as_json())

    async def chain(self, name: str) -> dict[str, Any]:
        name = _key(name, "chain named")
        async with self.transaction() as conn:
            row = await store.get_chain(conn, name)
            schedules = await store.list_schedules(conn, name)
        if row is None:
            raise ChainError(f"no chain named {name!r}; add it with `skillyard chain add FILE.yaml`")
        return {**_chain_json(row), "schedules": [_schedule_json(s) for s in schedules]}

    async def chains(self) -> list[dict[str, Any]]:
        async with self.transaction() as conn:
            return [{**_chain_json(r), "schedules": r["schedules"]} for r in await store.list_chains(conn)]

    async def remove(self, name: str, force: bool = False) -> dict[str, Any]:
        name = _key(name, "chain named")
        async with self.transaction() as conn:
            if await store.get_chain(conn, name) is None:
                raise ChainError(f"no chain named {name!r}")
            schedules = await store.list_schedules(conn, name)
            if schedules and not force:
                ids = ", ".join(s["id"] for s in schedules)
                raise ChainError(
                    f"chain {name!r} is used by schedule(s) {ids}: remove them first, or pass --force to remove "
                    "them too"
                )
            await store.remove_chain(conn, name)
        return {"removed": name, "schedules_removed": [s["id"] for s in schedules]}

    # Runs --------------------------------------------------------------------------------------------------------

    async def start(self, name: str, trigger: dict[str, Any] | None = None, queue: str = QUEUE) -> str:
        """Queue a run of the chain's current version; its id (a worker, or :meth:`run`, executes it)."""
        name, trigger = _key(name, "chain named"), _trigger(trigger)
        async with self.transaction() as conn:
            row = await store.get_chain(conn, name)
            if row is None:
                raise ChainError(f"no chain named {name!r}; add it with `skillyard chain add FILE.yaml`")
            return await self.steps.start(conn, row, trigger, queue)

    async def run(
        self, name: str, trigger: dict[str, Any] | None = None, progress: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Run a chain to its end in this process, on a queue of this engine's own; the finished run."""
        if self._local is None:  # one worker for every run of this engine, stopped (drained) when it closes
            queue = LOCAL_PREFIX + store.new_id()[:20]
            # The run first: an unknown chain raises before a worker starts (a procrastinate worker cancelled
            # while it starts up never stops, and closing the engine would wait for it forever).
            run_id = await self.start(name, trigger, queue)
            self._local = (queue, asyncio.create_task(self.serve([queue], max(4, self.concurrency), "skillyard-run")))
        else:
            run_id = await self.start(name, trigger, self._local[0])
        return await self.wait(run_id, progress, self._local[1])

    async def wait(
        self,
        run_id: str,
        progress: Callable[[dict[str, Any]], None] | None = None,
        worker: asyncio.Task[None] | None = None,
    ) -> dict[str, Any]:
        """Wait for a run to end; ``progress`` is called with the run whenever a step's status changes."""
        waiter = self._waiters.setdefault(run_id, asyncio.Event())
        seen: list[tuple[str, str]] = []
        polls = 0
        try:
            while True:
                run = await self.get_run(run_id)
                statuses = [(s["id"], s["status"]) for s in run["steps"]]
                if progress is not None and statuses != seen:
                    progress(run)
                seen = statuses
                if run["status"] in store.FINISHED:
                    return run
                if worker is not None and worker.done():
                    worker.result()  # the worker failed: say why
                    raise ChainError(f"the worker of run {run_id} stopped before the run ended")
                polls += 1
                if run["status"] == "running" and polls % ORPHAN_CHECK_EVERY == 0 and await self._orphaned(run_id):
                    continue  # marked failed: the next round returns it
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.wait(), POLL_S)
                waiter.clear()
        finally:
            self._waiters.pop(run_id, None)

    async def _orphaned(self, run_id: str) -> bool:
        """A running run with no job left to run it (its job failed outside the engine's control) is failed, so
        nobody waits for it for ever; True when it was."""
        async with self.transaction() as conn:
            run = await store.lock_run(conn, run_id)
            if run is None or run["status"] != "running" or await store.open_jobs(conn, run_id):
                return False
            await store.fail_unfinished(conn, run_id, "the run's job ended without finishing it (see the worker's log)")
        return True

    async def get_run(self, run_id: str) -> dict[str, Any]:
        run_id = _key(run_id, "chain run")
        async with self.transaction() as conn:
            run = await store.get_run(conn, run_id)
        if run is None:
            raise ChainError(f"no chain run {run_id!r}; `skillyard chain runs NAME` lists the runs of a chain")
        return run

    async def runs(self, name: str, limit: int = 20) -> list[dict[str, Any]]:
        """The newest runs of a chain (also of a removed one, while its runs are kept); ChainError for a name that
        has neither."""
        name = _key(name, "chain named")
        async with self.transaction() as conn:
            runs = await store.list_runs(conn, name, limit)
            if not runs and await store.get_chain(conn, name) is None:
                raise ChainError(f"no chain named {name!r}; `skillyard chain list` shows the stored chains")
            return runs

    async def cancel(self, run_id: str) -> dict[str, Any]:
        """Cancel a run: pending steps never start, the running step's job is aborted (its abort_signal is set)."""
        app = self._app()
        run_id = _key(run_id, "chain run")
        async with self.transaction() as conn:
            run = await store.lock_run(conn, run_id)
            if run is None:
                raise ChainError(f"no chain run {run_id!r}")
            finished = run["status"] in store.FINISHED  # a finished run stays as it ended
            jobs = [] if finished else await store.open_jobs(conn, run_id)
            if not finished:
                await store.finish_run(conn, run_id, "cancelled", "cancelled")
        for job_id in jobs:
            with contextlib.suppress(Exception):  # the job may have ended meanwhile
                await app.job_manager.cancel_job_by_id_async(job_id, abort=True)
        if not finished:
            self._finished(run_id)
        return await self.get_run(run_id)

    # Schedules ---------------------------------------------------------------------------------------------------

    async def schedule(
        self, name: str, cron: str, tz: str = "UTC", trigger: dict[str, Any] | None = None, overlap: str = "skip"
    ) -> dict[str, Any]:
        name, trigger = _key(name, "chain named"), _trigger(trigger, "the schedule's input")
        cron = check_cron(cron)
        check_zone(tz)
        check_overlap(overlap)
        async with self.transaction() as conn:
            if await store.get_chain(conn, name) is None:
                raise ChainError(f"no chain named {name!r}; add it with `skillyard chain add FILE.yaml` first")
            schedule_id = await store.add_schedule(conn, name, cron, tz, trigger, overlap)
            rows = await store.list_schedules(conn, name)
        return _schedule_json(next(r for r in rows if r["id"] == schedule_id))

    async def schedules(self) -> list[dict[str, Any]]:
        async with self.transaction() as conn:
            return [_schedule_json(r) for r in await store.list_schedules(conn)]

    async def pause(self, schedule_id: str, paused: bool = True) -> None:
        schedule_id = _key(schedule_id, "schedule")
        async with self.transaction() as conn:
            if not await store.set_paused(conn, schedule_id, paused):
                raise ChainError(f"no schedule {schedule_id!r}; `skillyard schedule list` shows them")

    async def unschedule(self, schedule_id: str) -> None:
        schedule_id = _key(schedule_id, "schedule")
        async with self.transaction() as conn:
            if not await store.remove_schedule(conn, schedule_id):
                raise ChainError(f"no schedule {schedule_id!r}; `skillyard schedule list` shows them")

    async def ticks(self, schedule_id: str) -> list[dict[str, Any]]:
        async with self.transaction() as conn:
            return [
                {"tick_at": r["tick_at"].isoformat(), "status": r["status"], "run_id": r["run_id"]}
                for r in await store.ticks(conn, schedule_id)
            ]

    async def tick(self, now: dt.datetime) -> int:
        """Evaluate every active schedule at ``now``: claim each due tick once and start (or skip) its run; how many
        runs started."""
        started = 0
        async with self.transaction() as conn:
            schedules = [s for s in await store.list_schedules(conn) if not s["paused"]]
        for schedule in schedules:
            started += await self._tick_one(schedule, now)
        return started

    async def _tick_one(self, schedule: store.Row, now: dt.datetime) -> int:
        zone = check_zone(schedule["tz"])
        after: dt.datetime = schedule["last_tick_at"] or schedule["created_at"]
        late = now - dt.timedelta(seconds=MISSED_AFTER_S)
        started = 0
        async with self.transaction() as conn:
            if after < late:  # no catch-up: the newest tick too late to run is recorded as missed
                missed = latest_tick(schedule["cron"], zone, late)
                if missed > after:
                    await store.claim_tick(conn, schedule["id"], missed, "missed")
                after = late
        for tick_at in due_ticks(schedule["cron"], zone, after, now):
            async with self.transaction() as conn:
                if not await store.claim_tick(conn, schedule["id"], tick_at, "claimed"):
                    continue  # another worker has it
                chain = await store.get_chain(conn, schedule["chain"])
                if chain is None:
                    await store.set_tick(conn, schedule["id"], tick_at, "failed", None)
                    continue
                busy = schedule["overlap"] != "allow" and await store.unfinished_runs(conn, schedule["id"]) > 0
                if busy and schedule["overlap"] == "skip":
                    await store.set_tick(conn, schedule["id"], tick_at, "skipped", None)
                    continue
                trigger = {**schedule["input"], "scheduled_at": tick_at.isoformat()}
                run_id = await self.steps.start(conn, chain, trigger, QUEUE, schedule["id"], hold=busy)
                await store.set_tick(conn, schedule["id"], tick_at, "queued" if busy else "started", run_id)
                started += 1
        return started

    # Workers and upkeep ------------------------------------------------------------------------------------------

    async def work(self, queues: Iterable[str] = (QUEUE,), stop: asyncio.Event | None = None) -> None:
        """Run a worker until ``stop`` is set (or the task is cancelled), then drain: running steps finish, no new
        ones start. The upkeep worker beside it runs the ticker, recovery and pruning."""
        if not self.upkeep:
            raise RuntimeError("a worker's engine is made with upkeep=True")
        queues = [check_queue(q) for q in queues]
        tasks = [
            asyncio.create_task(self.serve(list(queues), self.concurrency, name="skillyard")),
            asyncio.create_task(self.serve([UPKEEP_QUEUE], 1, name="skillyard-upkeep")),
        ]
        waits = [*tasks] + ([asyncio.create_task(stop.wait())] if stop is not None else [])
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.draining = True
            for task in waits:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                raise result

    async def serve(self, queues: list[str], concurrency: int, name: str) -> None:
        """Run one procrastinate worker on ``queues`` until cancelled (then it drains)."""
        await self._app().run_worker_async(
            queues=queues,
            concurrency=concurrency,
            name=name,
            install_signal_handlers=False,
            update_heartbeat_interval=self.settings.heartbeat_s,
            stalled_worker_timeout=self.settings.stall_after_s,
            abort_job_polling_interval=1.0,
        )

    async def recover_stalled(self) -> int:
        """Retry the jobs of workers whose heartbeat stopped (SIGKILL, a lost machine); a dead ``chain run``'s job
        moves to the shared queue. How many were retried."""
        manager = self._app().job_manager
        stalled = await manager.get_stalled_jobs(seconds_since_heartbeat=self.settings.stall_after_s)
        for job in stalled:
            queue = QUEUE if job.queue.startswith(LOCAL_PREFIX) else None
            log.warning("job %s (%s) of a stopped worker is retried", job.id, job.task_name)
            await manager.retry_job(job, queue=queue)
        async with self.transaction() as conn:
            orphans = await store.move_orphaned_jobs(conn, LOCAL_PREFIX, QUEUE, self.settings.stall_after_s)
        if orphans:
            log.warning("%d queued job(s) of a stopped process moved to the shared queue", orphans)
        return len(list(stalled)) + orphans

    async def prune(self) -> int:
        """Delete finished chain runs and jobs older than SKILLYARD_CHAIN_RETENTION_DAYS, upkeep jobs after an hour."""
        manager = self._app().job_manager
        hours = max(1, math.ceil(self.settings.retention_days * 24))
        await manager.delete_old_jobs(nb_hours=1, queue=UPKEEP_QUEUE, include_failed=True)
        await manager.delete_old_jobs(nb_hours=hours, include_failed=True, include_cancelled=True, include_aborted=True)
        async with self.transaction() as conn:
            return await store.prune(conn, self.settings.retention_days)


def _job(yard: SkillYard, handler: JobHandler) -> Callable[..., Any]:
    """A plugin's job handler as a procrastinate task function of this host."""

    async def run(**arguments: Any) -> None:
        await handler(yard, **arguments)

    return run


def _chain_json(row: store.Row) -> dict[str, Any]:
    return {
        "name": row["name"],
        "version": row["version"],
        "updated_at": row["updated_at"].isoformat(),
        **row["definition"],
    }


def _schedule_json(row: store.Row) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC)
    return {
        "id": row["id"],
        "chain": row["chain"],
        "cron": row["cron"],
        "tz": row["tz"],
        "input": row["input"],
        "overlap": row["overlap"],
        "paused": row["paused"],
        "next_tick": None if row["paused"] else next_tick(row["cron"], check_zone(row["tz"]), now).isoformat(),
    }
