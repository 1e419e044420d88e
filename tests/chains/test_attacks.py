"""Red-team tests of the chain engine, black-box through ``skillyard chain|schedule`` and ``yard.chains()``.

An attacker's and a careless user's inputs: odd names and ids, SQL in every string, huge and deeply nested inputs,
triggers that try to set the step's identity, secrets in errors, time zones and cron strings that are no such
thing, concurrent adds, cancels and removes at the wrong moment. Each test asserts the correct behaviour and is
bounded in time. Real PostgreSQL (a database per test).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from skillyard import RunPolicy, SkillYard
from skillyard.chains.definition import ChainInvalid
from skillyard.chains.engine import ChainError
from skillyard.errors import SkillyardError
from support.cli import invoke, no_traceback, usage_error

pytest_plugins = ("support.databases",)

LIMIT_S = 30.0

ECHO = """
async def execute(input, context):
    return {"got": input, "org": context.get("org_id"), "role": context.get("role_id"),
            "team_role": context.get("team_role"), "actor": context.get("actor_name"),
            "key": context.get("idempotency_key")}
"""

BIG = """
async def execute(input, context):
    return {"rows": [{"i": i, "pad": "x" * 100} for i in range(input.get("n", 10))]}
"""

ODD = """
import datetime

async def execute(input, context):
    return {"when": datetime.datetime(2026, 1, 1), "raw": b"bytes", "things": {1, 2}, "obj": object()}
"""

SLOW = """
import asyncio

async def execute(input, context):
    try:
        await asyncio.wait_for(context["abort_signal"].wait(), input.get("seconds", 3))
        return {"ok": False, "error": "aborted", "error_type": "recoverable"}
    except asyncio.TimeoutError:
        return {"slept": True}
"""

LEAK = """
async def execute(input, context):
    token = context["skill_configs"]["leak"]["api_token"]
    if input.get("how") == "raise":
        raise ValueError(f"the service refused token {token}")
    return {"ok": False, "error": f"bad token {token}", "error_type": "non_retriable"}
"""

ZERO = """
async def execute(input, context):
    return {"count": 0, "flag": False}
"""


def within(awaitable: Any) -> Any:
    return asyncio.wait_for(awaitable, LIMIT_S)


def chain_text(name: str, steps: list[dict[str, Any]], **top: Any) -> str:
    return json.dumps({"name": name, "steps": steps, **top})


@pytest.fixture
def skills(make_skill) -> Path:
    for name, handler in (("echo", ECHO), ("big", BIG), ("odd", ODD), ("slow", SLOW), ("leak", LEAK), ("zero", ZERO)):
        make_skill(name, files={"handler.py": handler})
    return make_skill("empty", files={"handler.py": "async def execute(input, context):\n    return {}\n"}).parent


@pytest.fixture
async def engine(empty_database: str, skills: Path):
    async with SkillYard([skills]) as yard, yard.chains() as chains:
        yield chains


async def add(chains: Any, steps: list[dict[str, Any]], **top: Any) -> str:
    name = "c" + uuid.uuid4().hex[:8]
    await chains.add(chains.read(chain_text(name, steps, **top), f"{name}.yaml"))
    return name


def clean(result: Any, code: int) -> str:
    assert no_traceback(result), result.output
    assert result.exit_code == code, (result.exit_code, result.output)
    return str(result.output)


# Identity: a trigger cannot become the step's context ------------------------------------------------------------


async def test_a_trigger_cannot_set_the_steps_identity_or_role(engine):
    name = await add(
        engine,
        [{"id": "a", "skill": "echo", "input": {"all": "{{ trigger.role_id }}", "org": "{{ trigger.org_id }}"}}],
        role_id="ops",
        identity={"org_id": "acme", "team_role": "member", "actor_name": "scheduler"},
    )
    trigger = {"role_id": "admin", "org_id": "victim", "team_role": "owner", "is_admin": True, "actor_name": "root"}
    run = await within(engine.run(name, trigger))
    assert run["status"] == "succeeded", run
    envelope = run["steps"][0]["envelope"]
    assert (envelope["org"], envelope["role"], envelope["team_role"], envelope["actor"]) == (
        "acme",
        "ops",
        "member",
        "scheduler",
    )
    assert envelope["got"] == {"all": "admin", "org": "victim"}  # only as the step's input, as written


async def test_a_chain_file_cannot_smuggle_context_keys_through_identity(engine):
    text = chain_text(
        "sneaky", [{"id": "a", "skill": "echo", "input": {}}], identity={"org_id": "acme", "skill_configs": {"x": 1}}
    )
    with pytest.raises(SkillyardError, match="skill_configs"):
        engine.read(text, "sneaky.yaml")


# SQL and odd characters in names and ids -------------------------------------------------------------------------

SQL = "x'; DROP TABLE skillyard.chains; --"


@pytest.mark.parametrize("odd", [SQL, "../../etc/passwd", "a\nb", "", " ", "%s", "%(name)s", "é" * 300, "\x00"])
async def test_odd_run_and_schedule_ids_are_unknown_not_errors(engine, odd):
    for call in (engine.get_run(odd), engine.cancel(odd), engine.pause(odd), engine.unschedule(odd)):
        with pytest.raises(SkillyardError):
            await within(call)
    for call in (engine.chain(odd), engine.runs(odd), engine.remove(odd), engine.start(odd)):
        with pytest.raises(SkillyardError):
            await within(call)
    assert isinstance(await engine.chains(), list)  # the tables are still there


@pytest.mark.parametrize("odd", [SQL, "a\x00b", "%(name)s"])
def test_cli_odd_ids_are_usage_errors(db_env, skills, odd):
    for args in (
        ("chain", "cancel", odd),
        ("chain", "show", odd),
        ("chain", "runs", odd),
        ("chain", "remove", odd),
        ("chain", "run", odd),
        ("schedule", "pause", odd),
        ("schedule", "remove", odd),
        ("schedule", "add", odd, "--cron", "* * * * *"),
    ):
        clean(invoke(*args, "--skills-dir", skills), 2)


def test_cli_a_chain_file_named_with_sql_is_refused(db_env, skills, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(chain_text(SQL, [{"id": "a'; --", "skill": "echo", "input": {}}]))
    out = clean(invoke("chain", "add", path, "--skills-dir", skills), 1)
    assert "name" in out and "a'; --" in out


# Huge and deep inputs --------------------------------------------------------------------------------------------


def test_cli_deeply_nested_input_file_is_a_usage_error(db_env, skills, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}")
    clean(invoke("chain", "run", "whatever", "--input", f"@{path}", "--skills-dir", skills), 2)


def test_cli_input_with_a_nul_escape_is_a_clear_error(db_env, skills, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(chain_text("nul_" + uuid.uuid4().hex[:6], [{"id": "a", "skill": "echo", "input": {}}]))
    name = json.loads(path.read_text())["name"]
    clean(invoke("chain", "add", path, "--skills-dir", skills), 0)
    result = invoke("chain", "run", name, "--detach", "--input", '{"a": "x\\u0000y"}', "--skills-dir", skills)
    assert no_traceback(result), result.output
    assert result.exit_code == 2, result.output
    result = invoke("schedule", "add", name, "--cron", "* * * * *", "--input", '{"\\u0000": 1}', "--skills-dir", skills)
    assert no_traceback(result), result.output
    assert result.exit_code == 2, result.output


async def test_a_deeply_nested_step_input_is_refused_when_read(engine):
    deep = "[" * 5000 + '"{{ trigger.a }}"' + "]" * 5000
    text = '{"name": "deep", "steps": [{"id": "a", "skill": "echo", "input": {"x": ' + deep + "}}]}"
    with pytest.raises(SkillyardError):
        engine.read(text, "deep.yaml")


async def test_a_big_trigger_and_big_envelopes_through_many_steps_end(engine):
    steps = [{"id": "s0", "skill": "big", "input": {"n": 2000}}] + [
        {
            "id": f"s{i}",
            "skill": "echo",
            "input": {"rows": f"{{{{ steps.s{i - 1}.{'rows' if i == 1 else 'got.rows'} }}}}"},
        }
        for i in range(1, 100)
    ]
    name = await add(engine, steps)
    run = await within(engine.run(name, {"blob": "y" * 2_000_000}))
    assert run["status"] == "succeeded", run["error"]
    assert len(run["steps"][-1]["envelope"]["got"]["rows"]) == 2000


async def test_a_reference_into_a_huge_list_reads_one_item(engine):
    name = await add(
        engine,
        [
            {"id": "a", "skill": "big", "input": {"n": 50_000}},
            {
                "id": "b",
                "skill": "echo",
                "input": {"last": "{{ steps.a.rows.-1.i }}", "far": "{{ steps.a.rows.99999999999999999999 }}"},
                "allow_empty": True,
            },
        ],
    )
    run = await within(engine.run(name))
    assert run["status"] == "succeeded", run["error"]
    assert run["steps"][1]["envelope"]["got"] == {"last": 49_999, "far": None}


# The empty-result guard ------------------------------------------------------------------------------------------


async def test_zero_and_false_are_values_for_the_guard(engine):
    name = await add(
        engine,
        [
            {"id": "a", "skill": "zero", "input": {}},
            {"id": "b", "skill": "echo", "input": {"c": "{{ steps.a.count }}", "f": "{{ steps.a.flag }}"}},
        ],
    )
    run = await within(engine.run(name))
    assert run["status"] == "succeeded", run
    assert run["steps"][1]["envelope"]["got"] == {"c": 0, "f": False}


async def test_a_trigger_of_zero_and_false_is_kept(engine):
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {"n": "{{ trigger.n }}", "b": "{{ trigger.b }}"}}])
    run = await within(engine.run(name, {"n": 0, "b": False}))
    assert run["steps"][0]["envelope"]["got"] == {"n": 0, "b": False}


# Skills that misbehave -------------------------------------------------------------------------------------------


async def test_a_skill_returning_non_json_values_does_not_break_the_run(engine):
    name = await add(engine, [{"id": "a", "skill": "odd", "input": {}}, {"id": "b", "skill": "echo", "input": {}}])
    run = await within(engine.run(name))
    assert run["status"] == "succeeded", run
    assert run["steps"][0]["envelope"]["when"] == "2026-01-01T00:00:00"
    json.dumps(run)  # the stored run is JSON whatever the skill returned
    assert "Traceback" not in json.dumps(run)


async def test_a_secret_in_a_skills_error_is_masked_in_every_table(engine):
    secret = "sk-live-" + uuid.uuid4().hex
    await engine.yard.configs.set("ops", "leak", {"api_token": secret})
    for how in ("raise", "envelope"):
        name = await add(
            engine, [{"id": "a", "skill": "leak", "input": {"how": how}, "retry": {"max": 0}}], role_id="ops"
        )
        run = await within(engine.run(name))
        assert run["status"] == "failed", run
        assert secret not in json.dumps(run), how
    async with engine.transaction() as conn, conn.cursor() as cur:
        for table in ("skillyard.chain_runs", "skillyard.chain_steps", "procrastinate.procrastinate_jobs"):
            await cur.execute(f"SELECT count(*) FROM {table} t WHERE t::text LIKE %(s)s", {"s": f"%{secret}%"})
            row = await cur.fetchone()
            assert row is not None and row[0] == 0, table


# Cancel, remove, unschedule at the wrong moment ------------------------------------------------------------------


async def test_cancel_of_a_finished_run_keeps_its_status(engine):
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}])
    run = await within(engine.run(name))
    again = await within(engine.cancel(run["id"]))
    assert again["status"] == "succeeded" and again["steps"] == run["steps"]


async def test_remove_while_a_run_is_going_lets_it_finish_with_its_definition(engine):
    name = await add(
        engine, [{"id": "a", "skill": "slow", "input": {"seconds": 1}}, {"id": "b", "skill": "echo", "input": {}}]
    )
    running = asyncio.ensure_future(engine.run(name))
    for _ in range(100):
        await asyncio.sleep(0.05)
        runs = await engine.runs(name)
        if runs and runs[0]["status"] == "running":
            break
    await engine.remove(name)
    run = await within(running)
    assert run["status"] == "succeeded", run
    assert [s["status"] for s in run["steps"]] == ["succeeded", "succeeded"]


async def test_unschedule_while_its_run_is_going_lets_the_run_finish(engine):
    name = await add(engine, [{"id": "a", "skill": "slow", "input": {"seconds": 1}}])
    schedule = await engine.schedule(name, "* * * * * *")
    running = asyncio.ensure_future(engine.run(name, {"from": "test"}))
    await asyncio.sleep(0.3)
    await engine.unschedule(schedule["id"])
    run = await within(running)
    assert run["status"] == "succeeded", run


async def test_concurrent_adds_of_one_name_get_distinct_versions(engine):
    text = chain_text("same", [{"id": "a", "skill": "echo", "input": {}}])
    versions = await within(asyncio.gather(*(engine.add(engine.read(text, "same.yaml")) for _ in range(10))))
    assert sorted(versions) == list(range(1, 11))


# Schedules: time zones, cron, overlap ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tz", ["../../etc/passwd", "UTC\n", "/etc/localtime", "", "Etc/../UTC", "a" * 300, "UTC'; --", "\x00", "."]
)
async def test_a_bad_time_zone_is_refused(engine, tz):
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}])
    with pytest.raises(SkillyardError, match="time zone"):
        await within(engine.schedule(name, "* * * * *", tz=tz))
    assert await engine.schedules() == []


@pytest.mark.parametrize(
    "cron",
    [
        " ".join(["*"] * 1000),
        "* * * * * * *",
        "0 0 31 2 *",
        "'; DROP TABLE x; -- * * * *",
        "* * * * *\n* * * * *",
        "",
        "@reboot",
        "0-" + "9" * 5000 + " * * * *",
    ],
)
async def test_a_bad_cron_is_refused_quickly(engine, cron):
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}])
    with pytest.raises(SkillyardError):
        await within(engine.schedule(name, cron))
    assert await engine.schedules() == []


def test_cli_bad_tz_and_cron_are_usage_errors(db_env, skills, tmp_path):
    path = tmp_path / "c.yaml"
    name = "s_" + uuid.uuid4().hex[:8]
    path.write_text(chain_text(name, [{"id": "a", "skill": "echo", "input": {}}]))
    clean(invoke("chain", "add", path, "--skills-dir", skills), 0)
    for extra in (("--tz", "../../etc/passwd"), ("--tz", "UTC\n"), ("--tz", "a" * 5000), ("--overlap", "x' --")):
        clean(invoke("schedule", "add", name, "--cron", "* * * * *", *extra, "--skills-dir", skills), 2)
    clean(invoke("schedule", "add", name, "--cron", " ".join(["1"] * 1000), "--skills-dir", skills), 2)


async def test_python_api_type_misuse_is_a_clear_error(engine):
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}])
    for bad in ("abc", ["x"], 5):
        with pytest.raises(SkillyardError):
            await within(engine.start(name, bad))
        with pytest.raises(SkillyardError):
            await within(engine.schedule(name, "* * * * *", trigger=bad))
    with pytest.raises(SkillyardError):
        await within(engine.schedule(name, "* * * * *", overlap="SKIP"))


# RunPolicy misuse ------------------------------------------------------------------------------------------------


async def test_a_policy_that_is_no_run_policy_is_invalid_input(engine):
    from skillyard.errors import InvalidInput

    for bad in ("x", {"chat_mode": False}, RunPolicy):
        with pytest.raises(InvalidInput, match="RunPolicy"):
            await within(engine.yard.run("echo", {}, {}, policy=bad))
    assert (await within(engine.yard.run("echo", {}, {}, policy=RunPolicy.unattended())))["ok"]


async def test_a_cyclic_or_too_deep_python_trigger_is_refused(engine):
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}])
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    deep: Any = {}
    for _ in range(100_000):
        deep = {"d": deep}
    for bad in (cyclic, deep):
        with pytest.raises(SkillyardError, match="JSON"):
            await within(engine.start(name, bad))


NUL_OUT = """
async def execute(input, context):
    return {"text": "a\\x00b"}
"""


async def test_a_skill_returning_a_nul_character_ends_the_run(engine, make_skill):
    make_skill("nul", files={"handler.py": NUL_OUT})
    engine.yard.rescan()
    name = await add(engine, [{"id": "a", "skill": "nul", "input": {}}, {"id": "b", "skill": "echo", "input": {}}])
    run = await within(engine.run(name))
    assert run["status"] == "failed", run  # the step fails with the reason, not the engine
    assert run["steps"][0]["status"] == "failed" and "NUL" in run["steps"][0]["error"], run
    assert "engine failed" not in run["error"] and [s["status"] for s in run["steps"]] == ["failed", "skipped"]


def test_cli_a_huge_input_file_is_queued_or_refused_without_a_traceback(db_env, skills, tmp_path):
    path = tmp_path / "c.yaml"
    name = "h_" + uuid.uuid4().hex[:8]
    path.write_text(chain_text(name, [{"id": "a", "skill": "echo", "input": {}}]))
    clean(invoke("chain", "add", path, "--skills-dir", skills), 0)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"blob": "z" * 20_000_000}))
    result = invoke("chain", "run", name, "--detach", "--json", "--input", f"@{big}", "--skills-dir", skills)
    assert no_traceback(result), result.output[:2000]
    assert result.exit_code in (0, 2), result.output[:2000]
    if result.exit_code == 0:
        run_id = json.loads(result.stdout)["id"]
        clean(invoke("chain", "cancel", run_id, "--json", "--skills-dir", skills), 0)


@pytest.mark.parametrize("queue", ["x'; DROP TABLE procrastinate.procrastinate_jobs; --", "q" * 41, 'é\\n"', "", "-a"])
async def test_a_worker_refuses_a_queue_name_it_could_not_be_notified_on(empty_database, skills, queue):
    """A queue is notified on a channel of at most 63 bytes; a name a worker could only poll for is refused, and
    nothing is touched."""
    async with SkillYard([skills]) as yard, yard.chains(upkeep=True) as chains:
        with pytest.raises(ChainError, match="is not a queue name"):
            await within(chains.work([queue], asyncio.Event()))
        assert isinstance(await chains.chains(), list)


async def test_a_worker_on_a_custom_queue_of_forty_characters_starts_and_drains(empty_database, skills):
    async with SkillYard([skills]) as yard, yard.chains(upkeep=True) as chains:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(1.5, stop.set)
        await within(chains.work(["q" * 40], stop))


def test_cli_worker_with_a_bad_queue_name_is_a_usage_error(db_env, skills):
    usage_error(invoke("worker", "--queue", "bad queue", "--skills-dir", skills), "is not a queue name")


CYCLE = """
async def execute(input, context):
    rows = []
    rows.append(rows)
    return {"rows": rows}
"""


async def test_a_skill_returning_a_cycle_ends_the_run(engine, make_skill):
    make_skill("cycle", files={"handler.py": CYCLE})
    engine.yard.rescan()
    name = await add(engine, [{"id": "a", "skill": "cycle", "input": {}}])
    run = await within(engine.run(name))
    assert run["status"] in ("succeeded", "failed"), run
    json.dumps(run)


NUL_FILE = '{"name": "nulfile", "description": "a\\u0000b", "steps": [{"id": "a", "skill": "echo", "input": {}}]}'


async def test_a_nul_in_a_chain_file_is_a_problem_not_a_traceback(engine):
    with pytest.raises(ChainInvalid, match="NUL"):
        engine.read(NUL_FILE, "nulfile.yaml")


def test_cli_a_nul_in_a_chain_file_exits_1_with_the_problem(db_env, skills, tmp_path):
    text = NUL_FILE
    path = tmp_path / "nulfile.yaml"
    path.write_text(text)
    assert "NUL" in clean(invoke("chain", "add", path, "--skills-dir", skills), 1)


async def test_references_cannot_reach_python_attributes(engine):
    name = await add(
        engine,
        [
            {"id": "a", "skill": "echo", "input": {}},
            {
                "id": "b",
                "skill": "echo",
                "allow_empty": True,
                "input": {"c": "{{ trigger.__class__ }}", "d": "{{ steps.a.__dict__ }}", "e": "x {{ trigger.keys }}"},
            },
        ],
    )
    run = await within(engine.run(name, {"k": 1}))
    assert run["steps"][1]["envelope"]["got"] == {"c": None, "d": None, "e": "x null"}


async def test_python_api_non_string_cron_and_zone_are_clear_errors(engine):
    name = await add(engine, [{"id": "a", "skill": "echo", "input": {}}])
    for cron, tz in ((5, "UTC"), (None, "UTC"), ("* * * * *", 5), ("* * * * *", None)):
        with pytest.raises(SkillyardError):
            await within(engine.schedule(name, cron, tz=tz))
