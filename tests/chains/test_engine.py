"""The chain engine end to end in this process (``chain run`` without a worker): references, the empty-result
guard, retries, the unattended policy reaching skills, timeouts, cancel, versions, exactly-once re-delivery and
secrets kept out of every table. Real PostgreSQL, real procrastinate jobs; each test has a database of its own."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.chains import store

pytest_plugins = ("support.databases",)

ECHO = """
async def execute(input, context):
    return {"got": input, "key": context.get("idempotency_key"), "chat_mode": context.get("chat_mode"),
            "channel": context.get("channel"), "org": context.get("org_id"), "actor": context.get("actor_name"),
            "configs": context.get("skill_configs", {}).get("echo", {})}
"""

#: Fails with the error type in input["kind"] until the counter file has input["fail"] lines.
FLAKY = """
from pathlib import Path

async def execute(input, context):
    counter = Path(input["counter"])
    attempts = len(counter.read_text().splitlines()) if counter.exists() else 0
    with counter.open("a") as fh:
        fh.write("x\\n")
    if attempts < input["fail"]:
        return {"ok": False, "error": f"attempt {attempts + 1} failed", "error_type": input["kind"]}
    return {"done": attempts + 1}
"""

SLOW = """
import asyncio
from pathlib import Path

async def execute(input, context):
    signal = context["abort_signal"]
    try:
        await asyncio.wait_for(signal.wait(), input.get("seconds", 30))
        Path(input["marker"]).write_text("aborted")
        return {"ok": False, "error": "aborted", "error_type": "recoverable"}
    except asyncio.TimeoutError:
        return {"slept": True}
"""


def chain_text(name: str, steps: list[dict[str, Any]], **top: Any) -> str:
    return json.dumps({"name": name, "steps": steps, **top})  # JSON is YAML


@pytest.fixture
def skills(make_skill) -> Path:
    make_skill("echo", files={"handler.py": ECHO})
    make_skill("flaky", files={"handler.py": FLAKY})
    make_skill("slow", files={"handler.py": SLOW})
    return make_skill("empty", files={"handler.py": "async def execute(input, context):\n    return {}\n"}).parent


@pytest.fixture
async def engine(empty_database: str, skills: Path):
    async with SkillYard([skills]) as yard, yard.chains() as chains:
        yield chains


async def add(chains, steps: list[dict[str, Any]], **top: Any) -> str:
    name = "c" + uuid.uuid4().hex[:8]
    await chains.add(chains.read(chain_text(name, steps, **top), f"{name}.yaml"))
    return name


async def test_references_of_every_kind_reach_the_steps(engine):
    name = await add(
        engine,
        [
            {"id": "a", "skill": "echo", "input": {"symbol": "{{ trigger.symbol }}", "n": "{{ trigger.n }}"}},
            {
                "id": "b",
                "skill": "echo",
                "input": {
                    "whole": "{{ steps.a.got }}",
                    "first": "{{ trigger.list.0 }}",
                    "text": "{{ chain.name }}/{{ run.id }} n={{ steps.a.got.n }} at {{ run.started_at }}",
                    "flag": "{{ trigger.flag }}",
                },
            },
        ],
    )
    run = await engine.run(name, {"symbol": "ACME", "n": 0, "list": ["x"], "flag": False})
    assert run["status"] == "succeeded", run
    a, b = (s["envelope"]["got"] for s in run["steps"])
    assert a == {"symbol": "ACME", "n": 0}  # a whole-string reference keeps the type (0 stays a number)
    assert b["whole"] == {"symbol": "ACME", "n": 0}
    assert b["first"] == "x"  # a numeric path segment indexes a list
    assert b["flag"] is False  # false is a value, not empty
    assert b["text"] == f"{name}/{run['id']} n=0 at {run['started_at']}"


async def test_each_step_runs_unattended_with_the_owners_identity_role_and_its_own_idempotency_key(engine):
    await engine.yard.configs.set("ops", "echo", {"region": "eu"})
    name = await add(
        engine,
        [
            {"id": "one", "skill": "echo", "input": {}},
            {"id": "two", "skill": "echo", "input": {"x": "{{ steps.one.key }}"}},
        ],
        role_id="ops",
        identity={"org_id": "acme", "actor_name": "scheduler"},
    )
    run = await engine.run(name)
    first, second = (s["envelope"] for s in run["steps"])
    assert first["key"] == f"{run['id']}:one" and second["key"] == f"{run['id']}:two"
    assert first["chat_mode"] is False and first["channel"] == "schedule"  # §7.7
    assert first["org"] == "acme" and first["actor"] == "scheduler"
    assert first["configs"] == {"region": "eu"}


async def test_an_empty_result_stops_the_chain_before_the_next_step(engine):
    name = await add(engine, [{"id": "a", "skill": "empty", "input": {}}, {"id": "b", "skill": "echo", "input": {}}])
    run = await engine.run(name)
    assert run["status"] == "stopped_empty"
    assert [s["status"] for s in run["steps"]] == ["succeeded", "skipped"]
    assert "'a'" in run["error"] and "empty" in run["error"]


async def test_a_missing_referenced_value_stops_the_chain_and_allow_empty_opts_out(engine):
    steps = [
        {"id": "a", "skill": "echo", "input": {"rows": []}},
        {"id": "b", "skill": "echo", "input": {"rows": "{{ steps.a.got.rows }}"}},
    ]
    stopped = await engine.run(await add(engine, steps))
    assert stopped["status"] == "stopped_empty" and "steps.a.got.rows" in stopped["error"]
    steps[1]["allow_empty"] = True
    passed = await engine.run(await add(engine, steps))
    assert passed["status"] == "succeeded" and passed["steps"][1]["envelope"]["got"] == {"rows": []}


async def test_transient_failures_are_retried_with_exponential_backoff(engine, tmp_path):
    counter = tmp_path / "count"
    step = {"id": "f", "skill": "flaky", "input": {"counter": str(counter), "fail": 2, "kind": "transient"}}
    name = await add(engine, [{**step, "retry": {"max": 3, "backoff_s": 0.2}}])
    started = time.monotonic()
    run = await engine.run(name)
    elapsed = time.monotonic() - started
    assert run["status"] == "succeeded", run
    assert run["steps"][0]["attempts"] == 3 and run["steps"][0]["envelope"]["done"] == 3
    assert elapsed >= 0.2 + 0.4  # the first retry after backoff_s, the second after twice that


async def test_retries_stop_after_max_and_the_chain_fails(engine, tmp_path):
    step = {"id": "f", "skill": "flaky", "input": {"counter": str(tmp_path / "c"), "fail": 99, "kind": "transient"}}
    run = await engine.run(await add(engine, [{**step, "retry": {"max": 2, "backoff_s": 0}}]))
    assert run["status"] == "failed" and run["steps"][0]["attempts"] == 3  # the first attempt and two retries
    assert (tmp_path / "c").read_text().count("x") == 3


@pytest.mark.parametrize("kind", ["recoverable", "config", "non_retriable"])
async def test_failures_that_are_not_transient_are_never_retried(engine, tmp_path, kind):
    step = {"id": "f", "skill": "flaky", "input": {"counter": str(tmp_path / "c"), "fail": 1, "kind": kind}}
    run = await engine.run(await add(engine, [step, {"id": "g", "skill": "echo", "input": {}}]))
    assert run["status"] == "failed" and "attempt 1 failed" in run["error"]
    assert [(s["status"], s["attempts"]) for s in run["steps"]] == [("failed", 1), ("skipped", 0)]


async def test_a_step_past_its_timeout_is_aborted_and_a_chain_past_its_own_fails(engine, tmp_path):
    marker = tmp_path / "aborted"
    step = {"id": "s", "skill": "slow", "input": {"marker": str(marker)}, "timeout_s": 0.3, "retry": {"max": 0}}
    run = await engine.run(await add(engine, [step]))
    assert run["status"] == "failed" and run["steps"][0]["envelope"]["timed_out"] is True
    assert marker.read_text() == "aborted"  # the skill saw its abort_signal before it was cancelled
    slow = {"id": "s", "skill": "slow", "input": {"marker": str(marker), "seconds": 0.2}}
    chain = [slow, {**slow, "id": "t"}, {**slow, "id": "u"}]
    timed = await engine.run(await add(engine, chain, timeout_s=0.3))
    assert timed["status"] == "failed" and "timeout_s" in timed["error"]


async def test_cancel_aborts_the_running_step_and_no_pending_step_starts(engine, tmp_path):
    marker = tmp_path / "aborted"
    name = await add(
        engine,
        [{"id": "s", "skill": "slow", "input": {"marker": str(marker)}}, {"id": "after", "skill": "echo", "input": {}}],
    )
    running = asyncio.create_task(engine.run(name))
    for _ in range(100):
        await asyncio.sleep(0.05)
        runs = await engine.runs(name)
        if runs and runs[0]["steps"][0]["status"] == "running":
            break
    cancelled = await engine.cancel(runs[0]["id"])
    assert cancelled["status"] == "cancelled"
    final = await asyncio.wait_for(running, 10)
    assert final["status"] == "cancelled" and final["steps"][1]["status"] == "skipped"
    for _ in range(60):  # the abort reaches the worker's job through procrastinate
        if marker.exists():
            break
        await asyncio.sleep(0.05)
    assert marker.read_text() == "aborted"


async def test_a_run_keeps_the_version_it_started_with(engine):
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {"v": 1}}])
    first = await engine.run(name)
    await engine.add(engine.read(chain_text(name, [{"id": "a", "skill": "echo", "input": {"v": 2}}]), "x"))
    second = await engine.run(name)
    assert (first["version"], first["steps"][0]["envelope"]["got"]) == (1, {"v": 1})
    assert (second["version"], second["steps"][0]["envelope"]["got"]) == (2, {"v": 2})


async def test_a_finished_step_delivered_again_runs_nothing_and_defers_no_second_next_step(engine, tmp_path):
    """A crash after a step's completion commits but before procrastinate marks its job done re-delivers the job:
    the step is not run again and the next step is not deferred twice."""
    counter = tmp_path / "c"
    step = {"id": "f", "skill": "flaky", "input": {"counter": str(counter), "fail": 0, "kind": "transient"}}
    name = await add(engine, [step, {"id": "g", "skill": "flaky", "input": {**step["input"]}}])
    run = await engine.run(name)
    assert run["status"] == "succeeded" and counter.read_text().count("x") == 2
    async with engine.transaction() as conn:
        jobs_before = await _count(conn, "SELECT count(*) FROM procrastinate.procrastinate_jobs")
    await engine.steps(engine.app.connector.pool, None, run["id"], "f")  # the same step job, once more
    async with engine.transaction() as conn:
        jobs_after = await _count(conn, "SELECT count(*) FROM procrastinate.procrastinate_jobs")
    assert counter.read_text().count("x") == 2 and jobs_after == jobs_before


async def test_async_skills_run_in_the_foreground_and_results_stay_whole_inside_a_chain(engine, make_skill):
    big = "async def execute(input, context):\n    return {'rows': ['x' * 100] * 2000}\n"
    make_skill("bulky", frontmatter="description: big\nasync: true", files={"handler.py": big})
    engine.yard.rescan()
    name = await add(
        engine,
        [
            {"id": "b", "skill": "bulky", "input": {}},
            {"id": "n", "skill": "echo", "input": {"n": "{{ steps.b.rows.1999 }}"}},
        ],
    )
    run = await engine.run(name)
    assert run["status"] == "succeeded", run
    assert "async" not in run["steps"][0]["envelope"] and "offloaded" not in run["steps"][0]["envelope"]
    assert run["steps"][1]["envelope"]["got"] == {"n": "x" * 100}


async def test_a_chain_deletes_twenty_rows_without_a_confirmation_token(engine):
    """§7.7: chat_mode is false in chains, so datatable's large-delete confirmation does not apply."""
    ctx = {"org_id": "chainorg", "team_role": "owner"}
    fields = [{"title": "名称", "uidt": "文本"}]
    made = await engine.yard.run("datatable", {"action": "create_table", "table_name": "任务", "fields": fields}, ctx)
    assert made["ok"], made
    records = [{"名称": f"n{i}"} for i in range(20)]
    assert (
        await engine.yard.run("datatable", {"action": "insert_batch", "table_name": "任务", "records": records}, ctx)
    )["ok"]
    name = await add(
        engine,
        [
            {
                "id": "wipe",
                "skill": "datatable",
                "input": {
                    "action": "delete_by",
                    "table_name": "任务",
                    "filters": [{"field": "名称", "op": "not_null"}],
                },
            }
        ],
        identity=ctx,
    )
    run = await engine.run(name)
    assert run["status"] == "succeeded", run
    assert run["steps"][0]["envelope"]["deleted"] == 20
    in_chat = await engine.yard.run(
        "datatable", {"action": "insert_batch", "table_name": "任务", "records": records}, ctx
    )
    assert in_chat["ok"]
    asked = await engine.yard.run(
        "datatable",
        {"action": "delete_by", "table_name": "任务", "filters": [{"field": "名称", "op": "not_null"}]},
        {**ctx, "chat_mode": True},
    )
    assert "confirm_token" in json.dumps(asked, ensure_ascii=False)  # the same delete in a chat asks first


async def test_a_secret_config_never_reaches_the_chain_tables_or_the_job_queue(engine, caplog):
    secret = "sk-live-" + uuid.uuid4().hex
    await engine.yard.configs.set("ops", "echo", {"api_token": secret})
    leak = "async def execute(input, context):\n    return {'token': context['skill_configs']['echo']['api_token']}\n"
    (Path(engine.yard.skill("echo").manifest.path).parent / "handler.py").write_text(leak)
    engine.yard.rescan()
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}], role_id="ops")
    run = await engine.run(name)
    assert run["status"] == "succeeded"
    assert secret not in json.dumps(run)
    async with engine.transaction() as conn:
        for table in ("skillyard.chain_runs", "skillyard.chain_steps", "skillyard.chains"):
            assert not await _count(conn, f"SELECT count(*) FROM {table} t WHERE t::text LIKE %(s)s", s=f"%{secret}%")
        for table in ("procrastinate_jobs", "procrastinate_events"):
            assert not await _count(
                conn, f"SELECT count(*) FROM procrastinate.{table} t WHERE t::text LIKE %(s)s", s=f"%{secret}%"
            )
    assert secret not in caplog.text


async def _count(conn: Any, query: str, **params: Any) -> int:
    async with conn.cursor() as cur:
        await cur.execute(query, params)
        row = await cur.fetchone()
    return int(row[0])


async def test_runs_are_pruned_after_the_retention(engine, monkeypatch):
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}])
    run = await engine.run(name)
    async with engine.transaction() as conn:
        await conn.execute(
            "UPDATE skillyard.chain_runs SET finished_at = now() - interval '31 days' WHERE id = %(id)s",
            {"id": run["id"]},
        )
        assert await store.prune(conn, 30) == 1
        assert await store.get_run(conn, run["id"]) is None


async def test_overlap_skip_records_a_tick_while_the_previous_run_is_unfinished(engine):
    import datetime as dt

    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}])
    schedule = await engine.schedule(name, "* * * * * *", overlap="skip")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=2)
    assert await engine.tick(now) >= 1  # no worker: the first run stays queued
    assert await engine.tick(now + dt.timedelta(seconds=1)) == 0
    ticks = await engine.ticks(schedule["id"])
    assert ticks[-1]["status"] == "skipped" and ticks[0]["status"] == "started"
    assert len({t["run_id"] for t in ticks if t["run_id"]}) == 1


async def test_overlap_queue_holds_the_next_run_until_the_previous_one_ends(engine):
    import datetime as dt

    name = await add(engine, [{"id": "a", "skill": "echo", "input": {"at": "{{ trigger.scheduled_at }}"}}])
    schedule = await engine.schedule(name, "* * * * * *", overlap="queue")
    async with engine.transaction() as conn:  # exactly two ticks from here
        await conn.execute(
            "UPDATE skillyard.chain_schedules SET last_tick_at = %(t)s WHERE id = %(id)s",
            {"t": dt.datetime.now(dt.UTC).replace(microsecond=0), "id": schedule["id"]},
        )
    later = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=2)
    assert await engine.tick(later) == 2
    ticks = await engine.ticks(schedule["id"])
    assert [t["status"] for t in ticks] == ["started", "queued"]
    held = await engine.get_run(ticks[1]["run_id"])
    assert held["status"] == "queued" and held["steps"][0]["status"] == "pending"
    worker = asyncio.create_task(engine.serve(["skillyard"], 1, "test-worker"))
    try:
        for _ in range(100):
            runs = [await engine.get_run(t["run_id"]) for t in ticks]
            if all(r["status"] == "succeeded" for r in runs):
                break
            await asyncio.sleep(0.05)
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
    first, second = runs
    assert first["status"] == second["status"] == "succeeded", runs
    assert first["finished_at"] <= second["started_at"]  # one after the other


async def test_a_tick_more_than_a_minute_late_is_missed_not_run(engine):
    import datetime as dt

    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}])
    half_an_hour_ago = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=30)
    schedule = await engine.schedule(name, f"{half_an_hour_ago.minute} * * * *")  # hourly, its last tick long past
    async with engine.transaction() as conn:  # the workers were down for an hour
        await conn.execute(
            "UPDATE skillyard.chain_schedules SET last_tick_at = now() - interval '1 hour' WHERE id = %(id)s",
            {"id": schedule["id"]},
        )
    now = dt.datetime.now(dt.UTC)
    started = await engine.tick(now)
    ticks = await engine.ticks(schedule["id"])
    assert started == 0 and [t["status"] for t in ticks] == ["missed"]  # one record, no catch-up runs
    assert await engine.tick(now) == 0 and len(await engine.ticks(schedule["id"])) == 1


async def test_a_failure_inside_the_engine_fails_the_run_instead_of_leaving_it_running(engine, monkeypatch):
    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk on fire")

    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}, {"id": "b", "skill": "echo", "input": {}}])
    monkeypatch.setattr(store, "complete_step", broken)
    monkeypatch.setattr(store, "start_step", _failing_second_start(store.start_step))
    run = await asyncio.wait_for(engine.run(name), 30)
    assert run["status"] == "failed" and "disk on fire" in run["error"]
    assert [s["status"] for s in run["steps"]] == ["failed", "skipped"]


def _failing_second_start(start: Any) -> Any:
    """store.start_step that raises when it would also record the step before (the carry-on path)."""

    async def start_step(conn: Any, run_id: str, step_id: str, job_id: Any, done: Any = None) -> int:
        if done is not None:
            raise RuntimeError("disk on fire")
        return await start(conn, run_id, step_id, job_id, done)

    return start_step


async def test_a_waiting_chain_run_gives_up_on_a_run_whose_job_is_gone(engine):
    """A run left `running` with no job (its job failed outside the engine, e.g. a worker without the task) is
    failed by the waiting `chain run` instead of waited for ever."""
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}])
    run_id = await engine.start(name, queue="nobody-listens")
    async with engine.transaction() as conn:
        await conn.execute("UPDATE skillyard.chain_runs SET status = 'running' WHERE id = %(id)s", {"id": run_id})
        await conn.execute(
            "UPDATE procrastinate.procrastinate_jobs SET status = 'failed' WHERE lock = %(id)s", {"id": run_id}
        )
    run = await asyncio.wait_for(engine.wait(run_id), 10)
    assert run["status"] == "failed" and "job ended" in run["error"]
