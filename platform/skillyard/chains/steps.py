"""One chain step as one job: read its state, guard, run the skill unattended, record, hand over to the next.

Exactly-once mechanics: a step job first reads its step; a finished step is never run again, its job only makes
sure the next step was deferred. A step's completion and the deferral of the next step (or its own retry) commit in
one transaction on procrastinate's connection, so a crash between them can neither lose nor double a step. A worker
killed mid-step leaves its job to stalled-job recovery, and only that unfinished step runs again (at-least-once for
the step that was killed: its skill makes external writes idempotent with ``idempotency_key``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from psycopg import AsyncConnection

from .. import envelope as env_mod
from ..credentials import masked_logger
from ..invoke.policy import RunPolicy
from . import store
from .definition import Chain, Step, parse_chain
from .guard import empty_reason
from .references import render

if TYPE_CHECKING:
    from ..yard import SkillYard

log = masked_logger("skillyard.chains")

#: How long a step's skill has to stop after its abort_signal is set (cancel, timeout) before it is cancelled.
ABORT_GRACE_S = 2.0
#: Failures of these error types are retried; every other failure fails the chain at once (§9.3).
RETRIED = frozenset({"transient"})

#: Defers a step job: (connection, queue, run id, step id, seconds from now); returns the job id.
Defer = Callable[[AsyncConnection[Any], str, str, str, float], Awaitable[int]]
#: A claimed step, ready to run: the run, its chain, the step, the attempt, what references read, its time limit.
Prepared = tuple[store.Row, Chain, Step, int, dict[str, Any], float | None]
#: Told when a run ends (the in-process runner waits on it).
Finished = Callable[[str], None]


def scope_of(run: store.Row, chain: Chain, steps: list[store.Row]) -> dict[str, Any]:
    """What references read: the trigger, the finished steps' envelopes, the chain's name, the run's id and start."""
    started = run["started_at"] or run["created_at"]
    return {
        "trigger": run["trigger"],
        "steps": {s["step_id"]: s["envelope"] for s in steps if s["status"] == "succeeded"},
        "chain": {"name": chain.name},
        "run": {"id": run["id"], "started_at": started.isoformat() if started else None},
    }


def _stored_chain(run: store.Row) -> Chain:
    """The version the run started with (checked when it was stored, so skills are not looked up again)."""
    return parse_chain(run["definition"], f"chain {run['chain']!r}", lambda _: True)


class StepRunner:
    """Runs step jobs for one host: its skills, its database, the queue's defer function."""

    def __init__(
        self,
        yard: SkillYard,
        defer: Defer,
        finished: Finished,
        may_continue: Callable[[], bool] = lambda: True,
        parking: str = "skillyard-run-",
    ) -> None:
        self.yard = yard
        self.defer = defer
        self.finished = finished
        self.may_continue = may_continue  # False while a worker drains: it finishes its step and takes no new one
        self.parking = parking
        self._chains: dict[tuple[str, int], Chain] = {}

    def _chain(self, run: store.Row) -> Chain:
        """The version the run started with (checked when it was stored: parsed once per version and process)."""
        key = (run["chain"], run["version"])
        chain = self._chains.get(key)
        if chain is None:
            if len(self._chains) > 256:
                self._chains.clear()
            chain = self._chains[key] = _stored_chain(run)
        return chain

    async def __call__(self, conn_pool: Any, job_id: int | None, run_id: str, step_id: str) -> None:
        """Run the step of this job, then, while the next step's job is due at once, that one too.

        Every step is a job, and the jobs of a run share a procrastinate lock (the run id), so no worker takes the
        next step's job while this one runs: instead of handing it back to the queue (a commit, a notification, a
        fetch and a claim later), this job carries on with it and finishes it. Should this process die, the next
        step's job is still there: recovery retries this job, which finds its step done, then the next job runs.
        """
        ended: list[str] = []  # the run, once a transaction of this job ended it (told after the commit)
        host = job_id
        try:
            # One connection for the job (a pool checkout is a round trip), statements pipelined, and a step's
            # record and the next step's claim in one transaction: a step costs a few round trips, not twenty.
            async with conn_pool.connection() as conn:
                async with conn.pipeline():
                    prepared = await self._begin(conn, job_id, run_id, step_id, ended)
                while prepared is not None:
                    run, chain, step, attempt, scope, seconds = prepared
                    envelope = await self._execute(run, chain, step, render(step.input, scope), seconds)
                    own = job_id if job_id != host else None
                    async with conn.pipeline():
                        prepared, job_id = await self._record(
                            conn, run, chain, step, attempt, envelope, ended, own, self.may_continue()
                        )
        except Exception as exc:  # a bug or a lost database: fail the run rather than leave it running
            log.exception("chain run %s failed in the engine", run_id)
            async with conn_pool.connection() as conn, conn.transaction():  # raises again if the database is gone
                await store.fail_unfinished(conn, run_id, f"the chain engine failed: {type(exc).__name__}: {exc}")
            ended.append(run_id)
        finally:
            for run_id in ended:
                self.finished(run_id)

    async def _begin(
        self, conn: AsyncConnection[Any], job_id: int | None, run_id: str, step_id: str, ended: list[str]
    ) -> Prepared | None:
        """Claim the step for this attempt, or settle it without running: None when nothing is left to run."""
        async with conn.transaction():
            run = await store.load_run(conn, run_id)
            if run is None or run["status"] in store.FINISHED:
                return None  # pruned, cancelled or already over: nothing to do
            return await self._claim(conn, run, job_id, step_id, ended)

    async def _claim(
        self,
        conn: AsyncConnection[Any],
        run: store.Row,
        job_id: int | None,
        step_id: str,
        ended: list[str],
        done: tuple[str, dict[str, Any]] | None = None,
    ) -> Prepared | None:
        """In the caller's transaction, with the run loaded (and locked): claim the step, or settle it. ``done``:
        the step before it, just succeeded, recorded by the statement that claims this one (or first, when this
        one is settled without running)."""
        run_id = run["id"]

        async def settle() -> None:
            if done is not None:
                await store.complete_step(conn, run_id, done[0], done[1], step_id, job_id)

        chain = self._chain(run)
        rows = run["steps"]
        row = next((r for r in rows if r["step_id"] == step_id), None)
        if row is None or row["status"] in ("failed", "skipped"):
            await settle()
            return None
        if row["status"] == "succeeded":  # finished before a crash: only make sure the chain moves on
            await self._advance(conn, run, chain, chain.step(step_id), rows, ended)
            return None
        step = chain.step(step_id)
        position = [s.id for s in chain.steps].index(step_id)
        previous = chain.steps[position - 1] if position else None
        scope = scope_of(run, chain, rows)
        prev_envelope = scope["steps"].get(previous.id) if previous else None
        reason = empty_reason(previous, prev_envelope, step, scope)
        if reason:
            await settle()
            await store.update_step(conn, run_id, step_id, status="skipped", error=reason)
            await self._end(conn, run, "stopped_empty", ended, reason)
            return None
        seconds = step.timeout_s
        if run["deadline"] is not None:
            left = (run["deadline"] - dt.datetime.now(dt.UTC)).total_seconds()
            if left <= 0:
                await settle()
                await store.update_step(conn, run_id, step_id, status="failed", error="the chain's timeout_s ran out")
                await self._end(conn, run, "failed", ended, f"the chain's timeout_s ran out before step {step_id!r}")
                return None
            seconds = left if seconds is None else min(seconds, left)
        attempt = await store.start_step(conn, run_id, step_id, job_id, done)
        if attempt > step.retry.max + 1:  # the process running it died on every attempt
            error = f"step {step_id!r} stopped with its process {attempt - 1} times (retry.max {step.retry.max})"
            await store.update_step(conn, run_id, step_id, status="failed", error=error, finished_at=_now())
            await self._end(conn, run, "failed", ended, error)
            return None
        return run, chain, step, attempt, scope, seconds

    async def _execute(
        self, run: store.Row, chain: Chain, step: Step, step_input: dict[str, Any], seconds: float | None
    ) -> dict[str, Any]:
        """The skill's envelope, unattended; a cancel (procrastinate's abort) sets the skill's abort_signal first."""
        abort = asyncio.Event()
        context = {
            **chain.identity,
            "role_id": chain.role_id,
            "session_id": f"chain-{run['id']}",
            "idempotency_key": f"{run['id']}:{step.id}",
            "triggered_at": time.time(),
            "abort_signal": abort,
        }
        started = time.monotonic()
        task = asyncio.ensure_future(self.yard.run(step.skill, step_input, context, policy=RunPolicy.unattended()))
        try:
            done, _ = await asyncio.wait({task}, timeout=seconds)
        except asyncio.CancelledError:
            await _stop(task, abort)
            raise
        if not done:
            await _stop(task, abort)
            assert seconds is not None
            return env_mod.timed_out(step.skill, round(time.monotonic() - started, 3))
        try:
            envelope = task.result()
        except Exception as exc:  # yard.run refuses before running (an unknown skill after a rescan, bad input)
            return env_mod.failure(step.skill, str(exc), error_type="non_retriable", non_retriable=True)
        text = store.nul_text(envelope)
        if text is not None:  # jsonb cannot store it: the step fails with the reason, not the engine
            error = f"the skill's result holds a NUL character (\\u0000) in {text[:40]!r}, which cannot be stored"
            return env_mod.failure(step.skill, error, error_type="non_retriable", non_retriable=True)
        return envelope

    async def _record(
        self,
        conn: AsyncConnection[Any],
        claimed: store.Row,
        chain: Chain,
        step: Step,
        attempt: int,
        envelope: dict[str, Any],
        ended: list[str],
        own_job: int | None = None,
        carry_on: bool = False,
    ) -> tuple[Prepared | None, int | None]:
        """Record a step's outcome (and defer what follows) in one transaction. ``carry_on``: the next step, when
        due at once, is claimed in the same transaction and returned with its job, for this job to run.
        ``own_job``: the job of a step this job carried on with, finished in the same transaction."""
        run_id = claimed["id"]
        async with conn.transaction():
            if own_job is not None:
                await store.finish_job(conn, own_job)
            locked = await store.lock_run(conn, run_id)
            if locked is None:
                return None, None
            # Only this run's job writes its steps (the run's jobs share a lock), so the steps read when the step
            # was claimed are still true; the run's own status may have changed (a cancel).
            run = {**locked, "steps": claimed["steps"]}
            if run["status"] in store.FINISHED:  # cancelled while it ran: keep what it did, start nothing
                await store.update_step(
                    conn,
                    run_id,
                    step.id,
                    status="failed",
                    envelope=envelope,
                    finished_at=_now(),
                    error="the run was cancelled",
                )
                return None, None
            if envelope.get("ok"):
                following = chain.after(step.id)
                # A job this one carries on with waits in a queue nobody listens to (no worker is woken for it); should
                # this process die, recovery moves it to the run's queue.
                queue = (self.parking + run_id[:20]) if carry_on else run["queue"]
                job = None if following is None else await self.defer(conn, queue, run_id, following.id, 0.0)
                if following is None or job is None or not carry_on:
                    await store.complete_step(conn, run_id, step.id, envelope, following.id if following else None, job)
                    if following is None or job is None:
                        await self._end(conn, run, "succeeded", ended)
                    return None, None
                for row in run["steps"]:  # the run as it now stands, to claim the next step without reading it
                    if row["step_id"] == step.id:
                        row.update(status="succeeded", envelope=envelope)
                    elif row["step_id"] == following.id:
                        row["job_id"] = job
                prepared = await self._claim(conn, run, job, following.id, ended, done=(step.id, envelope))
                if prepared is None:
                    await store.finish_job(conn, job)  # settled without running: its job is done too
                return prepared, job
            error = str(envelope.get("error") or envelope.get("user_message") or "failed")
            error_type = envelope.get("error_type")
            if error_type in RETRIED and not envelope.get("non_retriable") and attempt <= step.retry.max:
                delay = step.retry.delay(attempt)
                log.info("step %r of run %s failed (transient), retry %d in %gs", step.id, run_id, attempt, delay)
                job = await self.defer(conn, run["queue"], run_id, step.id, delay)
                await store.update_step(
                    conn, run_id, step.id, status="pending", envelope=envelope, error=error, job_id=job
                )
                return None, None
            await store.update_step(
                conn, run_id, step.id, status="failed", envelope=envelope, error=error, finished_at=_now()
            )
            await self._end(conn, run, "failed", ended, f"step {step.id!r} ({step.skill}) failed: {error}")
        return None, None

    async def _advance(
        self,
        conn: AsyncConnection[Any],
        run: store.Row,
        chain: Chain,
        step: Step,
        rows: list[store.Row],
        ended: list[str],
    ) -> None:
        """Defer the next step once (its job id is recorded with it), or end the run after the last step."""
        following = chain.after(step.id)
        if following is None:
            await self._end(conn, run, "succeeded", ended)
            return
        row = next(r for r in rows if r["step_id"] == following.id)
        if row["job_id"] is None and row["status"] == "pending":
            job = await self.defer(conn, run["queue"], run["id"], following.id, 0.0)
            await store.update_step(conn, run["id"], following.id, job_id=job)

    async def start(
        self,
        conn: AsyncConnection[Any],
        chain: store.Row,
        trigger: dict[str, Any],
        queue: str,
        schedule_id: str | None = None,
        hold: bool = False,
    ) -> str:
        """Create a run and defer its first step in the caller's transaction (``hold``: queued behind a running
        run of the same schedule, started when that one ends); the run id."""
        run_id = await store.create_run(conn, chain, trigger, queue, schedule_id, chain["definition"].get("timeout_s"))
        if not hold:
            first = chain["definition"]["steps"][0]["id"]
            job = await self.defer(conn, queue, run_id, first, 0.0)
            await store.update_step(conn, run_id, first, job_id=job)
        return run_id

    async def _end(
        self, conn: AsyncConnection[Any], run: store.Row, status: str, ended: list[str], error: str | None = None
    ) -> None:
        """End a run; a run of the same schedule queued behind it (overlap ``queue``) starts now."""
        await store.finish_run(conn, run["id"], status, error)
        ended.append(run["id"])
        waiting = await store.held_run(conn, run["id"]) if run["schedule_id"] else None
        if waiting is not None:
            first = waiting["definition"]["steps"][0]["id"]
            job = await self.defer(conn, waiting["queue"], waiting["id"], first, 0.0)
            await store.update_step(conn, waiting["id"], first, job_id=job)


async def _stop(task: asyncio.Future[dict[str, Any]], abort: asyncio.Event) -> None:
    """Ask the skill to stop (abort_signal), give it a moment, then cancel it."""
    abort.set()
    try:
        await asyncio.wait_for(asyncio.shield(task), ABORT_GRACE_S)
    except (TimeoutError, asyncio.CancelledError, Exception):
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
