"""Locating a skill's SKILL.md (§2.1, catalog/manifest.py): install manifests, origin paths, optional-skills, docs
folders and READMEs with frontmatter, in the documented order."""

from __future__ import annotations

import json

import pytest

from skillyard import SkillYard
from support.catalog import entries_by_name
from support.cli import listing, one


def test_lookup_order_for_dropped_in_folders(skills_root):
    installed = skills_root / "installed"
    (installed / "pkg" / "src").mkdir(parents=True)
    (installed / "skill.json").write_text(json.dumps({"origin_path": "pkg/src"}))
    (installed / "pkg" / "src" / "skill.md").write_text("---\nname: via_origin\ndescription: d\n---\n")
    opt = skills_root / "opt"
    (opt / "optional-skills").mkdir(parents=True)
    (opt / "optional-skills" / "opt.md").write_text("---\nname: via_optional\ndescription: d\n---\n")
    docs = skills_root / "docsy"
    (docs / "docs" / "docsy").mkdir(parents=True)
    (docs / "docs" / "docsy" / "SKILL.md").write_text("---\nname: via_docs\ndescription: d\n---\n")
    readme = skills_root / "readme"
    readme.mkdir()
    (readme / "README.md").write_text("---\nname: via_readme\ndescription: d\n---\n")
    plain = skills_root / "project"
    (plain / "sub").mkdir(parents=True)
    (plain / "README.md").write_text("# A project README without frontmatter\n")
    custom = skills_root / "custom"
    custom.mkdir()
    (custom / "skill.json").write_text(json.dumps({"skill_md": "MANUAL.md"}))
    (custom / "MANUAL.md").write_text("---\nname: via_skill_md\ndescription: d\n---\n")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert set(entries_by_name(yard)) == {
        "via_origin",
        "via_optional",
        "via_docs",
        "via_readme",
        "via_skill_md",
    }


@pytest.mark.spec("§2.1")
def test_lookup_skill_json_skill_md(skills_root):
    """Issue §2.1 lookup: '`<dir>/<skill_md or SKILL.md>` ... `skill_md` and `origin_path` come from an install manifest
    `skill.json`'."""
    d = skills_root / "inst"
    d.mkdir()
    (d / "skill.json").write_text(json.dumps({"skill_md": "MANUAL.md"}))
    (d / "MANUAL.md").write_text("---\nname: inst\ndescription: from manual\n---\n")
    item = one(listing(skills_root), "inst")
    assert item["description"] == "from manual" and item["skill_md"].endswith("MANUAL.md")


@pytest.mark.spec("§2.1")
def test_lookup_origin_path_lowercase_skill_md(skills_root):
    """Issue §2.1: '`<dir>/<origin_path>/{SKILL.md, skill.md}`'."""
    d = skills_root / "orig"
    (d / "src" / "pkg").mkdir(parents=True)
    (d / "skill.json").write_text(json.dumps({"origin_path": "src/pkg"}))
    (d / "src" / "pkg" / "skill.md").write_text("---\nname: orig\ndescription: from origin\n---\n")
    item = one(listing(skills_root), "orig")
    assert item["description"] == "from origin"


@pytest.mark.spec("§2.1")
def test_lookup_optional_skills_name_md_file(skills_root):
    """Issue §2.1: '`<dir>/optional-skills/<name>` ... `<name>` is the folder name and may be a file (`<name>.md`)'."""
    d = skills_root / "opt"
    (d / "optional-skills").mkdir(parents=True)
    (d / "optional-skills" / "opt.md").write_text("---\nname: opt\ndescription: optional file\n---\n")
    assert one(listing(skills_root), "opt")["description"] == "optional file"


@pytest.mark.spec("§2.1")
def test_lookup_docs_name_folder(skills_root):
    """Issue §2.1: '`<dir>/docs/<name>` ... or a folder holding `SKILL.md`'."""
    d = skills_root / "dd"
    (d / "docs" / "dd").mkdir(parents=True)
    (d / "docs" / "dd" / "SKILL.md").write_text("---\nname: dd\ndescription: docs folder\n---\n")
    assert one(listing(skills_root), "dd")["description"] == "docs folder"


@pytest.mark.spec("§2.1")
def test_lookup_readme_with_frontmatter(skills_root):
    """Issue §2.1: '`<dir>/README.md`. A README counts only when it has frontmatter'."""
    d = skills_root / "rd"
    d.mkdir()
    (d / "README.md").write_text("---\nname: rd\ndescription: readme skill\n---\n# x\n")
    assert one(listing(skills_root), "rd")["description"] == "readme skill"


def test_readme_without_frontmatter_is_not_a_skill(skills_root, make_skill):
    """Issue: 'A README counts only when it has frontmatter, so a project README ... never becomes a false skill.'"""
    d = skills_root / "proj"
    d.mkdir()
    (d / "README.md").write_text("# A project\n\nNot a skill.\n")
    make_skill("real")
    assert {i["name"] for i in listing(skills_root)} == {"real"}


@pytest.mark.spec("§2.1")
def test_lookup_order_skill_md_beats_readme(skills_root):
    """Spec §2.1: '平台按以下顺序定位 SKILL.md，取第一个存在的' — SKILL.md before README.md."""
    d = skills_root / "both"
    d.mkdir()
    (d / "SKILL.md").write_text("---\nname: both\ndescription: the skill md\n---\n")
    (d / "README.md").write_text("---\nname: both\ndescription: the readme\n---\n")
    assert one(listing(skills_root), "both")["description"] == "the skill md"


def test_a_skill_md_without_frontmatter_is_listed_with_a_warning_but_not_exposed(skills_root):
    """Issue 18 (8): the name and description are derived, so it is listed (runnable by name) yet not offered."""
    folder = skills_root / "bare"
    folder.mkdir()
    (folder / "SKILL.md").write_text("# Bare\n\nJust instructions.\n")
    item = one(listing(skills_root), "bare")
    assert item["exposed"] is False and not item["error"]
    assert any("no frontmatter" in w for w in item["warnings"])


@pytest.mark.parametrize(
    "lead",
    ["\n\n", "<!-- generated by a tool -->\n", "<!--\n  Licensed under MIT\n-->\n\n", "\n<!-- a -->\n<!-- b -->\n"],
)
def test_frontmatter_after_blank_lines_or_an_html_comment_is_read(skills_root, lead):
    folder = skills_root / "late"
    folder.mkdir()
    (folder / "SKILL.md").write_text(f"{lead}---\nname: late\ndescription: The real description.\n---\nBody.\n")
    item = one(listing(skills_root), "late")
    assert item["description"] == "The real description." and item["exposed"] is True
    assert any("start the file with its --- line" in w for w in item["warnings"])


@pytest.mark.parametrize("manifest", ["[" * 5000, "{not json", "[1, 2]"])
def test_an_unreadable_install_manifest_is_ignored_and_skill_md_found(skills_root, manifest):
    """A dropped-in folder's ``skill.json`` may be anything, even JSON nested past what Python's json reads."""
    d = skills_root / "odd"
    d.mkdir()
    (d / "skill.json").write_text(manifest)
    (d / "SKILL.md").write_text("---\nname: odd\ndescription: still found\n---\n")
    assert one(listing(skills_root), "odd")["description"] == "still found"
