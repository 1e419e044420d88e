"""Chains, chain runs, their steps, schedules and claimed ticks in PostgreSQL (schema ``skillyard``).

Queries run on procrastinate's psycopg connections, so a step's completion and the job of the next step commit in
one transaction. Every function takes the connection it runs on; the caller owns the transaction.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

RUN_STATUSES = ("queued", "running", "succeeded", "failed", "stopped_empty", "cancelled")
FINISHED = frozenset({"succeeded", "failed", "stopped_empty", "cancelled"})
STEP_STATUSES = ("pending", "running", "succeeded", "failed", "skipped")

Row = dict[str, Any]


def _json(value: Any) -> Jsonb:
    return Jsonb(value, dumps=lambda v: json.dumps(v, ensure_ascii=False, default=str))


def nul_text(value: Any) -> str | None:
    """The first string (key or value) of a JSON value holding a NUL character, which jsonb cannot store; else None.
    The value must be free of cycles (it was dumped to JSON)."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and "\x00" in key:
                    return key
                stack.append(child)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str) and "\x00" in item:
            return item
    return None


async def _one(conn: AsyncConnection[Any], query: str, params: dict[str, Any]) -> Row | None:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchone()


async def _all(conn: AsyncConnection[Any], query: str, params: dict[str, Any]) -> list[Row]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()


async def _exec(conn: AsyncConnection[Any], query: str, params: dict[str, Any]) -> int:
    async with conn.cursor() as cur:
        await cur.execute(query, params)
        return cur.rowcount


def _stamp(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


# Chains ------------------------------------------------------------------------------------------------------------


async def save_chain(conn: AsyncConnection[Any], name: str, definition: dict[str, Any]) -> int:
    """Store a chain's definition as its next version; the version number."""
    row = await _one(
        conn,
        """INSERT INTO skillyard.chains (name, version, definition) VALUES (%(name)s, 1, %(definition)s)
           ON CONFLICT (name) DO UPDATE SET version = chains.version + 1, definition = EXCLUDED.definition,
                                            updated_at = now()
           RETURNING version""",
        {"name": name, "definition": _json(definition)},
    )
    assert row is not None
    return int(row["version"])


async def get_chain(conn: AsyncConnection[Any], name: str) -> Row | None:
    return await _one(
        conn, "SELECT name, version, definition, updated_at FROM skillyard.chains WHERE name = %(name)s", {"name": name}
    )


async def list_chains(conn: AsyncConnection[Any]) -> list[Row]:
    return await _all(
        conn,
        """SELECT c.name, c.version, c.definition, c.updated_at,
                  (SELECT count(*) FROM skillyard.chain_schedules s WHERE s.chain = c.name) AS schedules
           FROM skillyard.chains c ORDER BY c.name""",
        {},
    )


async def remove_chain(conn: AsyncConnection[Any], name: str) -> int:
    await _exec(conn, "DELETE FROM skillyard.chain_schedules WHERE chain = %(name)s", {"name": name})
    return await _exec(conn, "DELETE FROM skillyard.chains WHERE name = %(name)s", {"name": name})


# Runs and steps ----------------------------------------------------------------------------------------------------


def new_id() -> str:
    return uuid.uuid4().hex


async def create_run(
    conn: AsyncConnection[Any],
    chain: Row,
    trigger: dict[str, Any],
    queue: str,
    schedule_id: str | None = None,
    timeout_s: float | None = None,
) -> str:
    """A queued run of the chain's current version, with a pending row per step; its id."""
    run_id = new_id()
    await _exec(
        conn,
        """INSERT INTO skillyard.chain_runs (id, chain, version, definition, status, trigger, queue, schedule_id,
                                             deadline)
           VALUES (%(id)s, %(chain)s, %(version)s, %(definition)s, 'queued', %(trigger)s, %(queue)s, %(schedule)s,
                   CASE WHEN %(timeout)s::float8 IS NULL THEN NULL
                        ELSE now() + make_interval(secs => %(timeout)s::float8) END)""",
        {
            "id": run_id,
            "chain": chain["name"],
            "version": chain["version"],
            "definition": _json(chain["definition"]),
            "trigger": _json(trigger),
            "queue": queue,
            "schedule": schedule_id,
            "timeout": timeout_s,
        },
    )
    for position, step in enumerate(chain["definition"]["steps"]):
        await _exec(
            conn,
            """INSERT INTO skillyard.chain_steps (run_id, step_id, position, skill, status)
               VALUES (%(run)s, %(step)s, %(position)s, %(skill)s, 'pending')""",
            {"run": run_id, "step": step["id"], "position": position, "skill": step["skill"]},
        )
    return run_id


async def lock_run(conn: AsyncConnection[Any], run_id: str) -> Row | None:
    """The run's row, locked for this transaction (a step and a cancel never interleave)."""
    return await _one(conn, "SELECT * FROM skillyard.chain_runs WHERE id = %(id)s FOR UPDATE", {"id": run_id})


async def load_run(conn: AsyncConnection[Any], run_id: str) -> Row | None:
    """The run's row, locked for this transaction (a step and a cancel never interleave), with ``steps``: each
    step's id, status, job, attempts and envelope in order; one query."""
    return await _one(
        conn,
        """SELECT r.*, COALESCE((SELECT json_agg(json_build_object('step_id', s.step_id, 'status', s.status,
                                     'job_id', s.job_id, 'attempts', s.attempts, 'envelope', s.envelope)
                                     ORDER BY s.position)
                                 FROM skillyard.chain_steps s WHERE s.run_id = r.id), '[]'::json) AS steps
           FROM skillyard.chain_runs r WHERE r.id = %(id)s FOR UPDATE OF r""",
        {"id": run_id},
    )


async def steps_of(conn: AsyncConnection[Any], run_id: str) -> list[Row]:
    return await _all(
        conn, "SELECT * FROM skillyard.chain_steps WHERE run_id = %(id)s ORDER BY position", {"id": run_id}
    )


async def update_step(conn: AsyncConnection[Any], run_id: str, step_id: str, **fields: Any) -> None:
    """Set some columns of one step (names are this package's constants, values are parameters)."""
    assigns = ", ".join(f"{name} = %({name})s" for name in fields)
    values = {k: (_json(v) if k == "envelope" and v is not None else v) for k, v in fields.items()}
    await _exec(
        conn,
        f"UPDATE skillyard.chain_steps SET {assigns} WHERE run_id = %(run)s AND step_id = %(step)s",
        {**values, "run": run_id, "step": step_id},
    )


async def start_step(
    conn: AsyncConnection[Any],
    run_id: str,
    step_id: str,
    job_id: int | None,
    done: tuple[str, dict[str, Any]] | None = None,
) -> int:
    """Mark a step running (one more attempt) and its run running; the attempt number. ``done``: the step before
    it (id, envelope), recorded as succeeded by the same statement."""
    done_id, envelope = done if done is not None else (None, None)
    row = await _one(
        conn,
        """WITH run AS (UPDATE skillyard.chain_runs SET status = 'running', started_at = COALESCE(started_at, now())
                        WHERE id = %(run)s AND status = 'queued'),
                done AS (UPDATE skillyard.chain_steps SET status = 'succeeded', envelope = %(envelope)s,
                                finished_at = now()
                         WHERE run_id = %(run)s AND step_id = %(done)s)
           UPDATE skillyard.chain_steps SET status = 'running', attempts = attempts + 1, job_id = %(job)s,
                  started_at = COALESCE(started_at, now()), error = NULL
           WHERE run_id = %(run)s AND step_id = %(step)s RETURNING attempts""",
        {
            "run": run_id,
            "step": step_id,
            "job": job_id,
            "done": done_id,
            "envelope": _json(envelope) if envelope is not None else None,
        },
    )
    assert row is not None
    return int(row["attempts"])


async def complete_step(
    conn: AsyncConnection[Any],
    run_id: str,
    step_id: str,
    envelope: dict[str, Any],
    next_step: str | None,
    next_job: int | None,
) -> None:
    """A step succeeded; the next step's job (deferred in the same transaction) is recorded with it, so a
    redelivered job of this step sees that the next one is on its way."""
    await _exec(
        conn,
        """UPDATE skillyard.chain_steps SET
               status = CASE WHEN step_id = %(step)s THEN 'succeeded' ELSE status END,
               envelope = CASE WHEN step_id = %(step)s THEN %(envelope)s ELSE envelope END,
               finished_at = CASE WHEN step_id = %(step)s THEN now() ELSE finished_at END,
               job_id = CASE WHEN step_id = %(step)s THEN job_id ELSE %(job)s END
           WHERE run_id = %(run)s AND (step_id = %(step)s OR step_id = %(next)s)""",
        {"run": run_id, "step": step_id, "envelope": _json(envelope), "next": next_step, "job": next_job},
    )


async def finish_run(conn: AsyncConnection[Any], run_id: str, status: str, error: str | None = None) -> None:
    """End a run: its status, and every step that never started is skipped."""
    await _exec(
        conn,
        """WITH steps AS (UPDATE skillyard.chain_steps SET status = 'skipped'
                          WHERE run_id = %(run)s AND status = 'pending')
           UPDATE skillyard.chain_runs SET status = %(status)s, error = %(error)s, finished_at = now()
           WHERE id = %(run)s""",
        {"run": run_id, "status": status, "error": error},
    )


async def fail_unfinished(conn: AsyncConnection[Any], run_id: str, error: str) -> None:
    """End a run that cannot go on (its job failed in the engine): running steps failed, pending ones skipped."""
    await _exec(
        conn,
        """UPDATE skillyard.chain_steps SET status = 'failed', error = %(error)s, finished_at = now()
           WHERE run_id = %(run)s AND status = 'running'""",
        {"run": run_id, "error": error},
    )
    await _exec(
        conn,
        """WITH steps AS (UPDATE skillyard.chain_steps SET status = 'skipped'
                          WHERE run_id = %(run)s AND status = 'pending')
           UPDATE skillyard.chain_runs SET status = 'failed', error = %(error)s, finished_at = now()
           WHERE id = %(run)s AND status IN ('queued', 'running')""",
        {"run": run_id, "error": error},
    )


async def held_run(conn: AsyncConnection[Any], ended_run: str) -> Row | None:
    """The oldest run held behind ``ended_run`` (same schedule, queued, its first step never deferred), locked."""
    return await _one(
        conn,
        """SELECT r.* FROM skillyard.chain_runs r
           JOIN skillyard.chain_runs e ON e.id = %(run)s AND e.schedule_id = r.schedule_id
           WHERE r.status = 'queued'
             AND NOT EXISTS (SELECT 1 FROM skillyard.chain_steps s WHERE s.run_id = r.id AND s.job_id IS NOT NULL)
           ORDER BY r.created_at LIMIT 1 FOR UPDATE OF r SKIP LOCKED""",
        {"run": ended_run},
    )


async def get_run(conn: AsyncConnection[Any], run_id: str) -> dict[str, Any] | None:
    row = await _one(conn, "SELECT * FROM skillyard.chain_runs WHERE id = %(id)s", {"id": run_id})
    if row is None:
        return None
    return run_json(row, await steps_of(conn, run_id))


async def list_runs(conn: AsyncConnection[Any], chain: str, limit: int) -> list[dict[str, Any]]:
    rows = await _all(
        conn,
        "SELECT * FROM skillyard.chain_runs WHERE chain = %(chain)s ORDER BY created_at DESC LIMIT %(limit)s",
        {"chain": chain, "limit": limit},
    )
    steps = await _all(  # every listed run's steps in one query, not one query a run
        conn,
        "SELECT * FROM skillyard.chain_steps WHERE run_id = ANY(%(ids)s) ORDER BY run_id, position",
        {"ids": [row["id"] for row in rows]},
    )
    by_run: dict[str, list[Row]] = {}
    for step in steps:
        by_run.setdefault(step["run_id"], []).append(step)
    return [run_json(row, by_run.get(row["id"], [])) for row in rows]


def run_json(row: Row, steps: list[Row]) -> dict[str, Any]:
    """A run as the CLI and Python API print it."""
    return {
        "id": row["id"],
        "chain": row["chain"],
        "version": row["version"],
        "status": row["status"],
        "trigger": row["trigger"],
        "schedule_id": row["schedule_id"],
        "error": row["error"],
        "created_at": _stamp(row["created_at"]),
        "started_at": _stamp(row["started_at"]),
        "finished_at": _stamp(row["finished_at"]),
        "steps": [
            {
                "id": s["step_id"],
                "skill": s["skill"],
                "status": s["status"],
                "attempts": s["attempts"],
                "envelope": s["envelope"],
                "error": s["error"],
                "started_at": _stamp(s["started_at"]),
                "finished_at": _stamp(s["finished_at"]),
            }
            for s in steps
        ],
    }


async def open_jobs(conn: AsyncConnection[Any], run_id: str) -> list[int]:
    """The run's jobs still waiting or running (every job of a run carries the run id as its lock)."""
    rows = await _all(
        conn,
        """SELECT id FROM procrastinate.procrastinate_jobs WHERE lock = %(run)s AND status IN ('todo', 'doing')""",
        {"run": run_id},
    )
    return [int(r["id"]) for r in rows]


async def finish_job(conn: AsyncConnection[Any], job_id: int) -> None:
    """Mark a step's job done in the caller's transaction: the job that carried on with it did its work."""
    await _exec(conn, "SELECT procrastinate.procrastinate_finish_job_v1(%(job)s, 'succeeded', false)", {"job": job_id})


async def prune(conn: AsyncConnection[Any], days: float) -> int:
    """Delete finished runs (their steps go with them) and past ticks older than ``days``."""
    params = {"days": days}
    await _exec(
        conn,
        "DELETE FROM skillyard.chain_ticks WHERE claimed_at < now() - make_interval(secs => %(days)s::float8 * 86400)",
        params,
    )
    return await _exec(
        conn,
        """DELETE FROM skillyard.chain_runs
           WHERE status IN ('succeeded', 'failed', 'stopped_empty', 'cancelled')
             AND finished_at < now() - make_interval(secs => %(days)s::float8 * 86400)""",
        params,
    )


async def move_orphaned_jobs(conn: AsyncConnection[Any], prefix: str, shared: str, seconds: float) -> int:
    """Jobs waiting in a process's own queue for longer than ``seconds`` past their time: that process is gone
    (its worker takes its jobs at once), so they move to the shared queue for a worker."""
    return await _exec(
        conn,
        """UPDATE procrastinate.procrastinate_jobs j SET queue_name = %(shared)s
           WHERE j.status = 'todo' AND starts_with(j.queue_name, %(prefix)s)
             AND COALESCE(j.scheduled_at, (SELECT min(e.at) FROM procrastinate.procrastinate_events e
                                           WHERE e.job_id = j.id))
                 < now() - make_interval(secs => %(seconds)s::float8)""",
        {"prefix": prefix, "shared": shared, "seconds": seconds},
    )


# Schedules ---------------------------------------------------------------------------------------------------------


async def add_schedule(
    conn: AsyncConnection[Any], chain: str, cron: str, tz: str, trigger: dict[str, Any], overlap: str
) -> str:
    schedule_id = new_id()[:12]
    await _exec(
        conn,
        """INSERT INTO skillyard.chain_schedules (id, chain, cron, tz, input, overlap, last_tick_at)
           VALUES (%(id)s, %(chain)s, %(cron)s, %(tz)s, %(input)s, %(overlap)s, now())""",
        {"id": schedule_id, "chain": chain, "cron": cron, "tz": tz, "input": _json(trigger), "overlap": overlap},
    )
    return schedule_id


async def list_schedules(conn: AsyncConnection[Any], chain: str | None = None) -> list[Row]:
    return await _all(
        conn,
        """SELECT * FROM skillyard.chain_schedules WHERE %(chain)s::text IS NULL OR chain = %(chain)s
           ORDER BY created_at, id""",
        {"chain": chain},
    )


async def set_paused(conn: AsyncConnection[Any], schedule_id: str, paused: bool) -> int:
    return await _exec(
        conn,
        """UPDATE skillyard.chain_schedules SET paused = %(paused)s,
                  last_tick_at = CASE WHEN %(paused)s THEN last_tick_at ELSE now() END
           WHERE id = %(id)s""",
        {"id": schedule_id, "paused": paused},
    )


async def remove_schedule(conn: AsyncConnection[Any], schedule_id: str) -> int:
    return await _exec(conn, "DELETE FROM skillyard.chain_schedules WHERE id = %(id)s", {"id": schedule_id})


async def claim_tick(conn: AsyncConnection[Any], schedule_id: str, tick_at: dt.datetime, status: str) -> bool:
    """Claim one tick of a schedule once, whoever evaluates it; False when it was claimed already."""
    row = await _one(
        conn,
        """INSERT INTO skillyard.chain_ticks (schedule_id, tick_at, status) VALUES (%(id)s, %(tick)s, %(status)s)
           ON CONFLICT DO NOTHING RETURNING tick_at""",
        {"id": schedule_id, "tick": tick_at, "status": status},
    )
    if row is not None:
        await _exec(
            conn,
            """UPDATE skillyard.chain_schedules SET last_tick_at = GREATEST(last_tick_at, %(tick)s)
               WHERE id = %(id)s""",
            {"id": schedule_id, "tick": tick_at},
        )
    return row is not None


async def set_tick(
    conn: AsyncConnection[Any], schedule_id: str, tick_at: dt.datetime, status: str, run_id: str | None
) -> None:
    await _exec(
        conn,
        """UPDATE skillyard.chain_ticks SET status = %(status)s, run_id = %(run)s
           WHERE schedule_id = %(id)s AND tick_at = %(tick)s""",
        {"id": schedule_id, "tick": tick_at, "status": status, "run": run_id},
    )


async def ticks(conn: AsyncConnection[Any], schedule_id: str) -> list[Row]:
    return await _all(
        conn,
        "SELECT * FROM skillyard.chain_ticks WHERE schedule_id = %(id)s ORDER BY tick_at",
        {"id": schedule_id},
    )


async def unfinished_runs(conn: AsyncConnection[Any], schedule_id: str) -> int:
    row = await _one(
        conn,
        """SELECT count(*) AS n FROM skillyard.chain_runs
           WHERE schedule_id = %(id)s AND status IN ('queued', 'running')""",
        {"id": schedule_id},
    )
    return int(row["n"]) if row else 0
