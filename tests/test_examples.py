"""The example skills of the README run as documented (the quickstart's guestbook on a real PostgreSQL)."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.catalog.validate import validate_paths
from support import EXAMPLES
from support.cli import invoke
from support.outputs_probes import sid


def test_examples_pass_validate():
    reports = validate_paths([EXAMPLES])
    assert {r["name"] for r in reports} >= {"hello", "guestbook", "word_count", "shout", "word_report"}
    assert [r for r in reports if r["errors"]] == []


@pytest.mark.parametrize(
    ("name", "input", "check"),
    [
        ("hello", {"who": "Ada"}, lambda env: "Ada" in env["greeting"]),
        ("word_count", {"text": "one two three"}, lambda env: env["ok"]),
        ("shout", {"text": "hi", "times": 2}, lambda env: env["ok"]),
    ],
)
async def test_examples_run(name, input, check):
    async with SkillYard(skills_dirs=[EXAMPLES], include_builtin=False) as yard:
        env = await yard.run(name, input)
    assert env["ok"] is True and check(env), env


async def test_guestbook_quickstart_and_word_report_artifact(db_env):
    async with SkillYard(skills_dirs=[EXAMPLES], include_builtin=False) as yard:
        signed = await yard.run("guestbook", {"name": "Ada", "message": "Hello"})
        report = await yard.run("word_report", {"text": "the cat and the hat"}, context={"session_id": "ex-1"})
        listed = await yard.attachments.for_session("ex-1")
    assert signed["ok"] is True and signed["entries"] >= 1 and "Ada" in signed["display_md"]
    assert report["ref"] == "file_1" and Path(report["local_path"]).read_text().startswith("word,count")
    assert [a.filename for a in listed] == ["word_counts.csv"]


def test_notes_agent_demo_as_the_readme_runs_it(db_env, home):
    """The README's agent demo: check, run (suspends for approval), resume CONFIRM (saves the note once)."""
    import json

    from click.testing import CliRunner

    from skillyard.cli import cli
    from skillyard.plugins import load_plugins

    load_plugins().hook.register_commands(cli=cli)
    agent = EXAMPLES / "agents" / "notes"
    runner = CliRunner()
    checked = runner.invoke(cli, ["agent", "check", str(agent)])
    assert checked.exit_code == 0, checked.output
    model = f"script:{agent / 'demo.yaml'}"
    message = "把标题为季度总结的笔记保存下来：收入增长 12%"
    session = f"demo-{uuid.uuid4().hex[:8]}"  # the test database outlives one run
    first = runner.invoke(
        cli, ["agent", "run", str(agent), "--session", session, "--message", message, "--model", model, "--json"]
    )
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["checkpoint"]["type"] == "APPROVAL"
    done = runner.invoke(cli, ["agent", "resume", "--session", session, "--action", "CONFIRM", "--json"])
    assert json.loads(done.stdout)["status"] == "DONE", done.output
    notes = json.loads((home / "workspaces" / session / "notes" / "notes.json").read_text(encoding="utf-8"))
    assert [n["title"] for n in notes] == ["季度总结"]


def test_examples_quickstart_hello():
    """README: 'skillyard run hello --skills-dir examples --input '{"who": "Ada"}''."""
    res = invoke("run", "hello", "--skills-dir", EXAMPLES, "--input", '{"who": "Ada"}')
    assert res.exit_code == 0 and "Ada" in json.loads(res.stdout)["greeting"]


def test_run_example_hello():
    """$ skillyard run hello --skills-dir examples --input '{"who": "Ada"}'"""
    out = invoke("run", "hello", "--skills-dir", str(EXAMPLES), "--input", '{"who": "Ada"}')
    env = json.loads(out.stdout)
    assert out.exit_code == 0 and env["ok"] is True and env["greeting"] == "Hello, Ada!" and env["success"] is True


def test_run_example_guestbook_failure(db_env):
    """$ skillyard run guestbook --skills-dir examples --input '{"name": "", "message": "Hi"}'; echo $? … 1"""
    out = invoke("run", "guestbook", "--skills-dir", str(EXAMPLES), "--input", '{"name": "", "message": "Hi"}')
    env = json.loads(out.stdout)
    assert out.exit_code == 1 and env["need_param"] == "name" and env["error_type"] == "recoverable"
    assert env["skill"] == "guestbook" and "call 'guestbook' again" in env["error"]


def test_run_shell_example():
    """skillyard run shout --skills-dir examples --input '{"text": "hi", "times": 2}'       # a shell skill"""
    out = invoke("run", "shout", "--skills-dir", str(EXAMPLES), "--input", '{"text": "hi", "times": 2}')
    assert out.exit_code == 0 and "HI" in out.stdout


def test_run_python_cli_example():
    """skillyard run word_count --skills-dir examples --input '{"text": "one two three"}'   # a Python CLI skill"""
    out = invoke("run", "word_count", "--skills-dir", str(EXAMPLES), "--input", '{"text": "one two three"}')
    assert out.exit_code == 0 and json.loads(out.stdout)["ok"] is True and "3" in out.stdout


def test_cli_readme_word_report_example_registers_file_1(db_env):
    """README: `skillyard run word_report --skills-dir examples --session demo --input …` writes a CSV that is
    registered as `file_1`, then `skillyard artifacts --session demo` lists it."""
    session = sid("readme")
    run = invoke(
        "run", "word_report", "--skills-dir", str(EXAMPLES), "--session", session, "--input", '{"text": "a b a"}'
    )
    assert run.exit_code == 0, run.stderr
    env = json.loads(run.stdout)
    assert env["ref"] == "file_1"
    table = invoke("artifacts", "--session", session)
    assert table.exit_code == 0, table.stderr
    _header, row = table.stdout.splitlines()
    assert row.split()[0] == "file_1" and "word_report" in row and env["local_path"] in row
    [item] = json.loads(invoke("artifacts", "--session", session, "--json").stdout)
    data = Path(item["local_path"]).read_bytes()
    assert item["skill"] == "word_report" and item["size"] == len(data)
    assert item["sha256"] == hashlib.sha256(data).hexdigest()
    assert Path(item["local_path"]).parent.name == session
