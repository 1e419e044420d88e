"""Async skills (§8) on the job queue: a background run is a job, so a restart loses none.

The process that accepts a background run defers its job to a queue of its own and runs a worker for that queue,
so the run starts at once and the CLI needs no second process; ``yard.close()`` waits for its jobs. The job's
arguments are the skill, its input and the portable context (no configs, no secrets); the configs fetched before
dispatch stay in the accepting process's memory (the overlay). Should that process die, stalled-job recovery in
a ``skillyard worker`` moves the job to the shared queue, and that worker runs it with the role's configs as
stored then.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from ..credentials import masked_logger
from ..errors import SkillyardError
from ..invoke.background import BackgroundJob
from . import background_runs

if TYPE_CHECKING:
    from ..yard import SkillYard
    from .engine import ChainEngine

log = masked_logger("skillyard.background")

#: Background runs of one process at once (the rest wait in its queue).
CONCURRENCY = 16
POLL_S = 0.1
#: How long closing the host waits for its background worker to stop once its jobs have ended.
STOP_WAIT_S = 10.0
FINISHED_JOB = frozenset({"succeeded", "failed", "cancelled", "aborted"})


class BackgroundQueue:
    """The background runs this host accepted: deferred as jobs, run by a worker of this process."""

    def __init__(self, yard: SkillYard) -> None:
        self.yard = yard
        self.queue = ""
        self._engine: ChainEngine | None = None
        self._worker: asyncio.Task[None] | None = None
        self._jobs: set[int] = set()
        self._overlays: dict[str, dict[str, Any]] = {}
        self._lock = asyncio.Lock()

    async def engine(self) -> ChainEngine:
        """This host's engine, its worker on :attr:`queue` started on first use (jobs deferred to that queue run in
        this process; :meth:`track` them so ``yard.close()`` waits for them)."""
        async with self._lock:
            if self._engine is None:
                from .engine import LOCAL_PREFIX, ChainEngine

                engine = await ChainEngine(self.yard, concurrency=CONCURRENCY).open()
                self.queue = LOCAL_PREFIX + uuid.uuid4().hex[:20]
                self._worker = asyncio.create_task(engine.serve([self.queue], CONCURRENCY, "skillyard-background"))
                self._engine = engine
        return self._engine

    async def submit(self, job: BackgroundJob) -> None:
        """Record and defer a background run (both committed before this returns)."""
        engine = await self.engine()
        context = job.payload["context"]
        await background_runs.started(self.yard, job.run_id, job.payload["name"], str(context.get("session_id") or ""))
        token = uuid.uuid4().hex
        self._overlays[token] = job.overlay
        self._jobs.add(await engine.defer_background(self.queue, {**job.payload, "token": token}))

    async def defer(self, task: str, arguments: dict[str, Any]) -> int:
        """Defer a job of a plugin's kind (``register_jobs``) to this process's queue; its id (drained on close)."""
        engine = await self.engine()
        job_id = int(await engine.app_task(task).configure(queue=self.queue).defer_async(**arguments))
        self._jobs.add(job_id)
        return job_id

    @property
    def shared_queue(self) -> str:
        """The queue every ``skillyard worker`` takes (jobs for whichever worker comes first)."""
        from .engine import QUEUE

        return QUEUE

    def track(self, job_id: int) -> None:
        """Wait for this job of :attr:`queue` when draining (another module deferred it there)."""
        self._jobs.add(job_id)

    async def wait(self, job_ids: set[int]) -> None:
        """Wait until these jobs of :attr:`queue` have ended (their worker is this process's)."""
        engine = await self.engine()
        while job_ids:
            if self._worker is not None and self._worker.done():
                self._worker.result()
                raise SkillyardError("the background worker stopped before its jobs ended")
            statuses = await engine.job_statuses(job_ids)
            job_ids = {job for job in job_ids if statuses.get(job) not in FINISHED_JOB}
            if job_ids:
                await asyncio.sleep(POLL_S)

    def overlay(self, token: str) -> dict[str, Any] | None:
        """What only the accepting process knows of a job (None in any other process)."""
        return self._overlays.get(token)

    def forget(self, token: str) -> None:
        self._overlays.pop(token, None)

    async def drain(self) -> None:
        """Wait until every background run this host accepted has ended, then stop its worker."""
        engine = self._engine
        if engine is None:
            return
        try:
            while self._jobs:  # a job may defer another one (an agent resumed by an event waits again)
                current = set(self._jobs)
                await self.wait(current)
                self._jobs -= current
        finally:
            if self._worker is not None:
                self._worker.cancel()
                # a procrastinate worker cancelled while it starts up may never stop (see engine.run): bounded
                done, _ = await asyncio.wait([self._worker], timeout=STOP_WAIT_S)
                if not done:
                    log.warning("the background worker did not stop within %.0f s; leaving it", STOP_WAIT_S)
                self._worker = None
            self._engine = None
            await engine.close()
