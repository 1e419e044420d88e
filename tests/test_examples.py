"""The example skills of the README run as documented (the quickstart's guestbook on a real PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.catalog.validate import validate_paths

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


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
