"""The example skills of the README run as documented (the quickstart's guestbook on a real PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.catalog.validate import validate_paths
from support import EXAMPLES


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
    import uuid

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
