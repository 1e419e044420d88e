"""``skillyard chain`` and ``skillyard schedule`` (skillyard.chains.cli) in-process on a real PostgreSQL.

Usage errors exit 2, an invalid chain file exits 1 with every problem on stderr, nothing is stored when a command
fails, and no command ever shows a traceback. Tests that look at whole listings (or leave a queued run behind, which
a worker of another test would take) use ``empty_database``; the others use ``db_env`` with chain names of their own.
"""

from __future__ import annotations

import json
import textwrap
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from support.cli import invoke, no_traceback, usage_error

FETCH = """
async def execute(input, context):
    return {"ok": True, "rows": [{"price": 1}, {"price": 2}], "who": input.get("who")}
"""

SAVE = """
async def execute(input, context):
    return {"ok": True, "saved": len(input["rows"]), "title": input.get("title")}
"""

NOTHING = """
async def execute(input, context):
    return {"ok": True, "message": "nothing today"}
"""

BOOM = """
async def execute(input, context):
    raise ValueError("kaput")
"""

RUN_FIELDS = {"id", "chain", "version", "status", "trigger", "started_at", "finished_at", "steps"}
STEP_FIELDS = {"id", "skill", "status", "attempts", "envelope", "error"}


def unique(prefix: str = "c") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def skills(make_skill, skills_root: Path) -> Path:
    """A skill root with fetch, save, nothing (an empty result) and boom (raises)."""
    for name, handler in (("fetch", FETCH), ("save", SAVE), ("nothing", NOTHING), ("boom", BOOM)):
        make_skill(name, files={"handler.py": handler})
    return skills_root


def chain_file(tmp_path: Path, text: str, name: str = "chain.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def two_steps(tmp_path: Path, name: str, first: str = "fetch", retries: int = 3) -> Path:
    return chain_file(
        tmp_path,
        f"""
        name: {name}
        description: 每日价格 digest
        steps:
          - id: fetch
            skill: {first}
            input: {{who: "{{{{ trigger.who }}}}"}}
            retry: {{max: {retries}}}
          - id: save
            skill: save
            input: {{rows: "{{{{ steps.fetch.rows }}}}", title: "{{{{ chain.name }}}} 标题"}}
        """,
        f"{name}.yaml",
    )


def ok(*args: str | Path) -> Any:
    """Run a command that must succeed with --json; its parsed stdout."""
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    assert no_traceback(result), result.output
    return json.loads(result.stdout)


def add(path: Path, skills: Path) -> dict[str, Any]:
    return ok("chain", "add", path, "--skills-dir", skills)  # type: ignore[no-any-return]


def invoke_within(seconds: float, *args: str | Path) -> Result:
    """``invoke`` that fails the test instead of hanging when the command does not end (a step job that raises
    leaves its run ``running``, and ``chain run`` would wait for it forever)."""
    done: list[Result] = []
    thread = threading.Thread(target=lambda: done.append(invoke(*args)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert done, f"skillyard {' '.join(map(str, args))} did not end within {seconds:g}s"
    return done[0]


def chain_names(skills: Path) -> list[str]:
    return [c["name"] for c in ok("chain", "list", "--skills-dir", skills)]


# chain add -------------------------------------------------------------------------------------------------------


def test_chain_add_stores_the_chain_and_says_so(db_env, skills, tmp_path):
    name = unique()
    result = invoke("chain", "add", two_steps(tmp_path, name), "--skills-dir", skills)
    assert result.exit_code == 0, result.output
    assert no_traceback(result)
    assert result.stdout.startswith(f"stored chain {name} version 1"), result.stdout
    assert result.stderr == ""


def test_chain_add_json_and_adding_again_bumps_the_version(db_env, skills, tmp_path):
    name = unique()
    path = two_steps(tmp_path, name)
    first = add(path, skills)
    assert {"name", "version", "steps"} <= set(first)
    assert first["name"] == name and first["version"] == 1 and first["steps"] == ["fetch", "save"]
    second = add(path, skills)
    assert second["version"] == 2
    result = invoke("chain", "add", path, "--skills-dir", skills)
    assert result.exit_code == 0 and f"stored chain {name} version 3" in result.stdout


def test_chain_show_json(db_env, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    shown = ok("chain", "show", name, "--skills-dir", skills)
    assert shown["name"] == name and shown["version"] == 1
    assert shown["description"] == "每日价格 digest"  # Chinese text kept as written
    assert [s["id"] for s in shown["steps"]] == ["fetch", "save"]
    assert shown["steps"][1]["input"] == {"rows": "{{ steps.fetch.rows }}", "title": "{{ chain.name }} 标题"}
    assert shown["steps"][0]["retry"] == {"max": 3, "backoff_s": 2.0}
    assert shown["schedules"] == []
    text = invoke("chain", "show", name, "--skills-dir", skills)
    assert text.exit_code == 0 and f"chain {name} v1" in text.stdout and no_traceback(text)


def test_chain_show_of_an_unknown_chain_exits_2(db_env):
    name = unique("missing")
    usage_error(invoke("chain", "show", name), name)


def test_an_invalid_file_exits_1_with_every_problem_on_stderr_and_stores_nothing(empty_database, skills, tmp_path):
    name = unique()
    path = chain_file(
        tmp_path,
        f"""
        name: {name}
        colour: blue
        steps:
          - id: fetch
            skill: no_such_skill
            input: {{x: "{{{{ steps.save.rows }}}}"}}
          - id: fetch
            skill: save
            retry: {{max: 99}}
            input: {{y: "{{{{ bogus.root }}}}"}}
        """,
    )
    result = invoke("chain", "add", path, "--skills-dir", skills)
    assert result.exit_code == 1, result.output
    assert no_traceback(result), result.output
    assert result.stdout == ""
    assert f"{path} is not a valid chain" in result.stderr
    for needle in [
        "unknown key 'colour'",
        "steps[0] fetch: no skill named 'no_such_skill'",
        "steps[0] fetch: input.x: {{ steps.save.rows }} names no earlier step",
        "steps[1] fetch: the step id 'fetch' is used twice",
        "steps[1] fetch: retry.max",
        "steps[1] fetch: input.y: '{{ bogus.root }}' starts with 'bogus'",
    ]:
        assert needle in result.stderr, (needle, result.stderr)
    assert chain_names(skills) == []


def test_an_invalid_file_with_json_prints_the_problems(db_env, skills, tmp_path):
    path = chain_file(tmp_path, f"name: {unique()}\nsteps:\n  - {{id: a, skill: nope}}\n")
    result = invoke("chain", "add", path, "--skills-dir", skills, "--json")
    assert result.exit_code == 1 and no_traceback(result)
    body = json.loads(result.stdout)
    assert body["problems"] == ["steps[0] a: no skill named 'nope' (see `skillyard list`, or pass its --skills-dir)"]
    assert "nope" in body["error"]


def test_a_reference_to_a_later_step_is_refused(db_env, skills, tmp_path):
    name = unique()
    path = chain_file(
        tmp_path,
        f"""
        name: {name}
        steps:
          - {{id: first, skill: save, input: {{rows: "{{{{ steps.second.rows }}}}"}}}}
          - {{id: second, skill: fetch}}
        """,
    )
    result = invoke("chain", "add", path, "--skills-dir", skills)
    assert result.exit_code == 1 and no_traceback(result)
    assert "steps[0] first: input.rows: {{ steps.second.rows }} names no earlier step" in result.stderr
    usage_error(invoke("chain", "show", name), name)  # not stored


def test_malformed_yaml_exits_1_naming_the_line(empty_database, skills, tmp_path):
    path = chain_file(tmp_path, "name: x\nsteps:\n  - id: a\n    skill: fetch\n   input: {x: 1}\n")
    result = invoke("chain", "add", path, "--skills-dir", skills)
    assert result.exit_code == 1, result.output
    assert no_traceback(result)
    assert "not valid YAML at line 5" in result.stderr
    assert chain_names(skills) == []


@pytest.mark.parametrize(
    "text", ["", "- a\n- b\n", "just text\n", "a: &a [*a]\n", "x: " + "[" * 500 + "]" * 500 + "\n"]
)
def test_other_unreadable_files_exit_1_without_a_traceback(db_env, skills, tmp_path, text):
    result = invoke("chain", "add", chain_file(tmp_path, text), "--skills-dir", skills)
    assert result.exit_code == 1, result.output
    assert no_traceback(result) and "is not a valid chain" in result.stderr


def test_a_missing_file_exits_2(db_env, tmp_path):
    missing = tmp_path / "nope.yaml"
    usage_error(invoke("chain", "add", missing), "cannot read", str(missing))


def test_a_directory_exits_2(db_env, tmp_path):
    result = invoke("chain", "add", tmp_path)
    assert result.exit_code == 2 and no_traceback(result)


def test_a_non_utf8_file_exits_2(db_env, tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: café\nsteps: []\n".encode("latin-1"))
    usage_error(invoke("chain", "add", path), "is not UTF-8 text", "save it as UTF-8")


# chain run -------------------------------------------------------------------------------------------------------


def test_chain_run_of_an_unknown_chain_exits_2_naming_it(db_env):
    """Also: the in-process worker is not started for a chain that does not exist (cancelled while it starts up, a
    procrastinate worker never stopped, and the command hung while closing the engine)."""
    name = unique("missing")
    usage_error(invoke_within(30, "chain", "run", name), f"no chain named {name!r}")
    usage_error(invoke_within(30, "chain", "run", name, "--json"), f"no chain named {name!r}")
    usage_error(invoke_within(30, "chain", "run", name, "--detach"), f"no chain named {name!r}")


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("not json", "--input is not valid JSON"),
        ("{'a': 1}", "--input is not valid JSON"),
        ("[1, 2]", "--input must be a JSON object, not list"),
        ('"text"', "--input must be a JSON object, not str"),
        ("42", "--input must be a JSON object, not int"),
        ("null", "--input must be a JSON object, not NoneType"),
        ('{"x": NaN}', "--input is not valid JSON"),
    ],
)
def test_chain_run_input_that_is_no_json_object_exits_2(db_env, skills, tmp_path, value, needle):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    usage_error(invoke("chain", "run", name, "--input", value, "--skills-dir", skills), needle)
    assert ok("chain", "runs", name) == []  # no run was started


def test_chain_run_input_from_a_missing_file_exits_2(db_env, tmp_path):
    usage_error(invoke("chain", "run", unique(), "--input", f"@{tmp_path / 'none.json'}"), "--input: cannot read")


def test_chain_run_json_of_a_two_step_chain(db_env, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    result = invoke("chain", "run", name, "--json", "--input", '{"who": "张三"}', "--skills-dir", skills)
    assert result.exit_code == 0, result.output
    assert no_traceback(result)
    run = json.loads(result.stdout)
    assert set(run) >= RUN_FIELDS, sorted(run)
    assert run["chain"] == name and run["version"] == 1 and run["status"] == "succeeded"
    assert run["trigger"] == {"who": "张三"}
    assert run["started_at"] and run["finished_at"] and run["finished_at"] >= run["started_at"]
    assert [s["id"] for s in run["steps"]] == ["fetch", "save"]
    for step in run["steps"]:
        assert set(step) >= STEP_FIELDS, sorted(step)
        assert step["status"] == "succeeded" and step["attempts"] == 1 and step["error"] is None
    fetch, save = run["steps"]
    assert fetch["skill"] == "fetch" and fetch["envelope"]["who"] == "张三"  # the trigger reached the first step
    assert save["skill"] == "save" and save["envelope"]["saved"] == 2  # the list reached the second step as a list
    assert save["envelope"]["title"] == f"{name} 标题"


def test_references_rendered_at_run_time_two_adjacent_ones_and_list_indexes(db_env, skills, tmp_path):
    """``{{ a }}{{ b }}`` passes chain add as two references; the step must get them as text at run time."""
    name = unique()
    path = chain_file(
        tmp_path,
        f"""
        name: {name}
        steps:
          - {{id: fetch, skill: fetch, input: {{who: "{{{{ chain.name }}}}{{{{ trigger.n }}}}"}}}}
          - id: save
            skill: save
            input:
              rows: ["{{{{ steps.fetch.rows.-1 }}}}"]
              title: "{{{{ steps.fetch.rows.0.price }}}}{{{{ trigger.n }}}}"
        """,
    )
    add(path, skills)
    result = invoke_within(60, "chain", "run", name, "--json", "--input", '{"n": 0}', "--skills-dir", skills)
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)
    fetch, save = run["steps"]
    assert fetch["envelope"]["who"] == f"{name}0"
    assert save["envelope"] == {**save["envelope"], "saved": 1, "title": "10"}


def test_chain_run_without_json_prints_the_run_and_progress(db_env, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    result = invoke("chain", "run", name, "--skills-dir", skills)
    assert result.exit_code == 0, result.output
    assert no_traceback(result)
    assert f"chain {name} v1  succeeded" in result.stdout
    assert "step fetch (fetch): succeeded" in result.stderr and "step save (save): succeeded" in result.stderr


def test_chain_runs_json_lists_the_runs_newest_first(db_env, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    first = ok("chain", "run", name, "--input", '{"who": "a"}', "--skills-dir", skills)
    second = ok("chain", "run", name, "--input", '{"who": "b"}', "--skills-dir", skills)
    runs = ok("chain", "runs", name)
    assert [r["id"] for r in runs] == [second["id"], first["id"]]
    assert set(runs[0]) >= RUN_FIELDS and set(runs[0]["steps"][0]) >= STEP_FIELDS
    assert [r["status"] for r in runs] == ["succeeded", "succeeded"]
    assert [r["id"] for r in ok("chain", "runs", name, "--limit", "1")] == [second["id"]]
    text = invoke("chain", "runs", name)
    assert text.exit_code == 0 and second["id"] in text.stdout and no_traceback(text)


def test_a_run_with_a_failing_step_exits_1(db_env, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name, first="boom", retries=0), skills)
    result = invoke("chain", "run", name, "--json", "--skills-dir", skills)
    assert result.exit_code == 1, result.output
    assert no_traceback(result), result.output
    run = json.loads(result.stdout)
    assert run["status"] == "failed"
    boom, save = run["steps"]
    assert boom["status"] == "failed" and boom["attempts"] == 1 and boom["error"]
    assert save["status"] == "skipped"  # never started
    assert "boom" in (run.get("error") or "")
    text = invoke("chain", "run", name, "--skills-dir", skills)
    assert text.exit_code == 1 and no_traceback(text) and "failed" in text.stdout


def test_a_run_stopped_by_the_empty_result_guard_exits_1_naming_the_step(db_env, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name, first="nothing"), skills)
    result = invoke("chain", "run", name, "--json", "--skills-dir", skills)
    assert result.exit_code == 1, result.output
    assert no_traceback(result)
    run = json.loads(result.stdout)
    assert run["status"] == "stopped_empty"
    first, second = run["steps"]
    assert first["status"] == "succeeded" and second["status"] == "skipped" and second["attempts"] == 0
    assert "step 'fetch' (nothing) returned an empty result, so step 'save' did not start" in run["error"]


def test_detach_prints_a_queued_id_and_the_run_stays_queued(empty_database, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    result = invoke("chain", "run", name, "--detach", "--skills-dir", skills)
    assert result.exit_code == 0, result.output
    assert no_traceback(result)
    line = result.stdout.strip()
    assert line.startswith("queued run ") and "skillyard worker" in line
    run_id = line.split()[2]
    detached = ok("chain", "run", name, "--detach", "--skills-dir", skills)
    assert detached["status"] == "queued" and detached["id"] != run_id
    runs = {r["id"]: r for r in ok("chain", "runs", name)}
    assert set(runs) == {run_id, detached["id"]}
    for run in runs.values():  # no worker runs here: nothing moved
        assert run["status"] == "queued" and run["finished_at"] is None
        assert [s["status"] for s in run["steps"]] == ["pending", "pending"]


# chain list / remove ---------------------------------------------------------------------------------------------


def test_chain_list_json(empty_database, skills, tmp_path):
    assert chain_names(skills) == []
    names = sorted([unique("b"), unique("a")])
    for name in names:
        add(two_steps(tmp_path, name), skills)
    listed = ok("chain", "list")
    assert [c["name"] for c in listed] == names
    assert all(c["version"] == 1 and c["schedules"] == 0 and len(c["steps"]) == 2 for c in listed)


def test_chain_remove_is_refused_while_a_schedule_uses_it_and_force_removes_both(empty_database, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    schedule = ok("schedule", "add", name, "--cron", "0 9 * * *", "--tz", "Europe/Berlin")
    usage_error(invoke("chain", "remove", name), schedule["id"], "--force")
    assert chain_names(skills) == [name]
    assert [s["id"] for s in ok("schedule", "list")] == [schedule["id"]]
    removed = ok("chain", "remove", name, "--force")
    assert removed == {"removed": name, "schedules_removed": [schedule["id"]]}
    assert chain_names(skills) == [] and ok("schedule", "list") == []


def test_chain_remove_without_schedules(db_env, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    result = invoke("chain", "remove", name)
    assert result.exit_code == 0 and f"removed chain {name}" in result.stdout and no_traceback(result)
    usage_error(invoke("chain", "show", name), name)
    usage_error(invoke("chain", "remove", name), f"no chain named {name!r}")


# schedule --------------------------------------------------------------------------------------------------------


def test_schedule_add_and_list_json(empty_database, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    result = invoke("schedule", "add", name, "--cron", "*/5  * * * *", "--tz", "Asia/Shanghai")
    assert result.exit_code == 0 and no_traceback(result)
    schedule_id = result.stdout.strip()
    added = ok("schedule", "add", name, "--cron", "* * * * * */2", "--input", '{"who": "李四"}', "--overlap", "queue")
    listed = ok("schedule", "list")
    assert [s["id"] for s in listed] == [schedule_id, added["id"]]
    first, second = listed
    assert first["chain"] == name and first["cron"] == "*/5 * * * *" and first["tz"] == "Asia/Shanghai"
    assert first["overlap"] == "skip" and first["paused"] is False and first["input"] == {} and first["next_tick"]
    assert second["cron"] == "* * * * * */2" and second["tz"] == "UTC" and second["overlap"] == "queue"
    assert second["input"] == {"who": "李四"}
    assert ok("chain", "show", name)["schedules"] == listed
    assert ok("chain", "list")[0]["schedules"] == 2


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--cron", "garbage"), ("--cron 'garbage' is not a cron expression",)),
        (("--cron", "* * * * * * *"), ("is not a cron expression", "six with trailing seconds")),
        (("--cron", ""), ("is not a cron expression",)),
        (("--cron", "0 0 30 2 *"), ("never fires",)),
        (("--cron", "* * * * *", "--tz", "Mars/Olympus"), ("--tz 'Mars/Olympus' is not a time zone",)),
        (("--cron", "* * * * *", "--overlap", "replace"), ("--overlap",)),
        (("--cron", "* * * * *", "--input", "[1]"), ("--input must be a JSON object",)),
        (("--cron", "* * * * *", "--input", "{nope"), ("--input is not valid JSON",)),
    ],
)
def test_schedule_add_with_a_bad_option_exits_2_and_stores_nothing(empty_database, skills, tmp_path, args, needles):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    usage_error(invoke("schedule", "add", name, *args), *needles)
    assert ok("schedule", "list") == []


def test_schedule_add_without_cron_exits_2(db_env):
    usage_error(invoke("schedule", "add", unique()), "--cron")


def test_schedule_add_for_an_unknown_chain_exits_2_and_stores_nothing(empty_database):
    name = unique("missing")
    usage_error(invoke("schedule", "add", name, "--cron", "* * * * *"), f"no chain named {name!r}")
    assert ok("schedule", "list") == []


def test_schedule_pause_resume_remove(empty_database, skills, tmp_path):
    name = unique()
    add(two_steps(tmp_path, name), skills)
    schedule_id = ok("schedule", "add", name, "--cron", "0 9 * * *")["id"]
    result = invoke("schedule", "pause", schedule_id)
    assert result.exit_code == 0 and f"paused schedule {schedule_id}" in result.stdout and no_traceback(result)
    (paused,) = ok("schedule", "list")
    assert paused["paused"] is True and paused["next_tick"] is None
    result = invoke("schedule", "resume", schedule_id)
    assert result.exit_code == 0 and f"resumed schedule {schedule_id}" in result.stdout
    (resumed,) = ok("schedule", "list")
    assert resumed["paused"] is False and resumed["next_tick"]
    result = invoke("schedule", "remove", schedule_id)
    assert result.exit_code == 0 and f"removed schedule {schedule_id}" in result.stdout
    assert ok("schedule", "list") == []
    assert chain_names(skills) == [name]  # the chain stays


@pytest.mark.parametrize("verb", ["pause", "resume", "remove"])
def test_schedule_change_of_an_unknown_id_exits_2(db_env, verb):
    usage_error(invoke("schedule", verb, "nosuchid1234"), "no schedule 'nosuchid1234'", "schedule list")


def test_chain_cancel_of_an_unknown_run_exits_2(db_env):
    usage_error(invoke("chain", "cancel", "0" * 32), "no chain run")


def test_help_of_every_command_shows_no_traceback():
    for args in (("chain", "--help"), ("chain", "add", "--help"), ("chain", "run", "--help"), ("schedule", "--help")):
        result = invoke(*args)
        assert result.exit_code == 0 and no_traceback(result), (args, result.output)


def test_chain_runs_of_an_unknown_chain_exits_2(db_env):
    usage_error(invoke("chain", "runs", unique()), "no chain named")
