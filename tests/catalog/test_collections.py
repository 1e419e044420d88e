"""One tree mixing every layout real skill collections use (issue 18): dot-folders, category skills holding skills,
material folders, a lower-case skill.md, symlinked mirrors and a loop, same-name skills in one root, a broken
frontmatter that must not take a name, legacy gating blocks, the model-invocation flag and a SKILL.md without
frontmatter. The listing is checked whole, then again from the manifest cache of a second run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from skillyard.catalog.toolnames import disambiguate
from support.cli import invoke, no_traceback
from support.skills import write_raw, write_skill


@pytest.fixture
def collection(skills_root: Path) -> Path:
    w = write_skill
    w(skills_root, "skills/.curated/gh-fix-ci", "name: gh-fix-ci\ndescription: Fix failing CI")
    w(skills_root, "skills/.system/skill-creator", "name: skill-creator\ndescription: Write new skills")
    w(skills_root, "juicy", "name: juicy\ndescription: Game feel, a category of skills")
    w(skills_root, "juicy/jb-screenshake", "name: jb-screenshake\ndescription: Shake the screen")
    w(skills_root, "juicy/references/jb-draft", "name: jb-draft\ndescription: Notes, not a skill")
    w(skills_root, "juicy/scripts/helper", "name: helper\ndescription: Not a skill either")
    w(skills_root, "docx-official", "name: docx\ndescription: Word documents")
    (skills_root / "docx").symlink_to("docx-official", target_is_directory=True)
    (skills_root / ".claude").mkdir()
    (skills_root / ".claude" / "skills").symlink_to(skills_root / "skills", target_is_directory=True)
    (skills_root / "juicy" / "back").symlink_to("..", target_is_directory=True)
    w(skills_root, "team-a/report", "name: report\ndescription: Report for team A")
    w(skills_root, "team-b/report", "name: report\ndescription: Report for team B")
    write_raw(skills_root, "pdf", "---\nname: [unclosed\ndescription: broken\n---\nBody.\n")
    w(skills_root, "tools/pdf-maker", "name: pdf\ndescription: Make PDFs")
    lower = skills_root / "lower"
    lower.mkdir()
    (lower / "skill.md").write_text("---\nname: lower\ndescription: A lower-case skill file\n---\n")
    w(skills_root, "mac-only", "name: mac-only\ndescription: Darwin only\nmetadata:\n  moltbot:\n    os: [darwin]")
    w(skills_root, "manual-only", "name: manual-only\ndescription: Run by name\ndisable-model-invocation: true")
    write_raw(skills_root, "plain", "# Plain notes\n\nNo frontmatter at all.\n")
    write_raw(
        skills_root, "commented", "\n<!-- generated -->\n---\nname: commented\ndescription: After a comment\n---\n"
    )
    return skills_root


def listed(root: Path) -> tuple[list[dict], str]:
    result = invoke("list", "--json", "--no-builtin", "--skills-dir", root)
    assert result.exit_code == 0 and no_traceback(result), result.output
    return json.loads(result.stdout), result.stderr


def test_a_mixed_collection_lists_every_skill_once(collection: Path) -> None:
    listing, stderr = listed(collection)
    report_b = disambiguate("report", "team-b/report")
    assert sorted((i["name"], Path(i["dir"]).relative_to(collection).as_posix()) for i in listing) == sorted(
        [
            ("gh-fix-ci", "skills/.curated/gh-fix-ci"),
            ("skill-creator", "skills/.system/skill-creator"),
            ("juicy", "juicy"),
            ("jb-screenshake", "juicy/jb-screenshake"),
            ("docx", "docx-official"),
            ("report", "team-a/report"),
            (report_b, "team-b/report"),
            ("pdf", "tools/pdf-maker"),
            ("pdf", "pdf"),  # the broken folder falls back to its folder name, but never takes it
            ("lower", "lower"),
            ("mac-only", "mac-only"),
            ("manual-only", "manual-only"),
            ("plain", "plain"),
            ("commented", "commented"),
        ]
    )
    broken = next(i for i in listing if i["error"])
    assert broken["dir"] == str(collection / "pdf") and not broken["active"]
    assert broken["shadowed_by"] == str(collection / "tools" / "pdf-maker")
    items = {i["name"]: i for i in listing if i["active"]}
    assert len(items) == len(listing) - 1 and all(i["error"] is None for i in items.values())
    assert any("team-a/report" in w for w in items[report_b]["warnings"])
    assert items["mac-only"]["available"] is (sys.platform == "darwin")
    assert items["manual-only"]["exposed"] is False and items["manual-only"]["available"] is True
    assert items["plain"]["exposed"] is False and any("no frontmatter" in w for w in items["plain"]["warnings"])
    assert items["commented"]["description"] == "After a comment" and items["commented"]["exposed"] is True
    assert items["lower"]["skill_md"] == str(collection / "lower" / "skill.md")
    assert f"symlink loop: {collection / 'juicy' / 'back'} leads back to {collection}" in stderr


def test_a_second_listing_from_the_cache_is_the_same(collection: Path) -> None:
    first, first_err = listed(collection)
    second, second_err = listed(collection)
    assert second == first and second_err == first_err
