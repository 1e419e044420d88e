"""`skillyard read NAME PATH [--offset N]` and `skillyard show NAME --manual` (issue 18, item 9)."""

from __future__ import annotations

import json

from support.cli import invoke, no_traceback, usage_error


def test_show_manual_prints_the_whole_skill_md(make_skill, skills_root):
    make_skill("guide", body="Read references/steps.md first.\n" + "x" * 45_000 + "\nEND\n")
    result = invoke("show", "guide", "--manual", "--skills-dir", skills_root)
    assert result.exit_code == 0 and no_traceback(result)
    assert result.stdout.startswith("---") and result.stdout.rstrip().endswith("END")  # every page, not the first
    data = json.loads(invoke("show", "guide", "--manual", "--json", "--skills-dir", skills_root).stdout)
    assert data["content"].rstrip().endswith("END") and data["next_offset"] is None


def test_read_prints_a_page_and_says_how_to_get_the_next(make_skill, skills_root):
    make_skill("long", files={"references/big.md": "y" * 50_000})
    first = invoke("read", "long", "references/big.md", "--skills-dir", skills_root)
    assert first.exit_code == 0 and len(first.stdout) == 40_000 and "--offset 40000" in first.stderr
    rest = invoke("read", "long", "references/big.md", "--offset", "40000", "--skills-dir", skills_root)
    assert rest.exit_code == 0 and len(rest.stdout) == 10_000 and rest.stderr == ""
    page = json.loads(invoke("read", "long", "references/big.md", "--json", "--skills-dir", skills_root).stdout)
    assert page["next_offset"] == 40_000 and page["total_chars"] == 50_000


def test_read_refuses_what_is_not_a_skills_file(make_skill, skills_root):
    make_skill("one")
    (skills_root / "loose.txt").write_text("not a skill's")
    usage_error(invoke("read", "one", "missing.md", "--skills-dir", skills_root), "has no file")
    usage_error(invoke("read", "one", "../loose.txt", "--skills-dir", skills_root), "outside the folder")
    usage_error(invoke("read", "nobody", "SKILL.md", "--skills-dir", skills_root), "nobody")
    usage_error(invoke("read", "one", "SKILL.md", "--offset", "-1", "--skills-dir", skills_root), "-1")
