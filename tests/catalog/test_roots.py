"""Skill roots and the walk (catalog/roots.py): how deep, which folders are never searched, which root ranks
first (--skills-dir, SKILLYARD_SKILLS_PATH, plugin roots, the built-in skills)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skillyard import SkillYard, hookimpl
from skillyard.errors import SkillyardError
from support.catalog import entries_by_name
from support.cli import listing, named, one
from support.skills import OK_HANDLER


def test_nested_categories_and_excluded_folders(make_skill, skills_root):
    make_skill("research/arxiv")
    make_skill("a/b/c/d/e/deep")  # 6 levels below the root
    make_skill("a/b/c/d/e/f/too_deep")  # 7 levels: not searched
    make_skill("node_modules/pkg")
    make_skill(".git/hooks_skill")
    make_skill("venv/lib")
    make_skill("outer", files={"inner/SKILL.md": "---\nname: inner\ndescription: x\n---\n"})
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    names = entries_by_name(yard)
    assert set(names) == {"arxiv", "deep", "outer"}
    assert names["arxiv"][0]["category"] == "research"
    assert names["outer"][0]["category"] is None


def test_root_that_is_itself_a_skill(make_skill, skills_root):
    folder = make_skill("solo", files={"handler.py": OK_HANDLER})
    yard = SkillYard(skills_dirs=[folder], include_builtin=False)
    assert [e.skill.name for e in yard.entries] == ["solo"]


def test_missing_skills_dir_is_a_clear_error(tmp_path):
    with pytest.raises(SkillyardError, match="does not exist"):
        SkillYard(skills_dirs=[tmp_path / "nope"], include_builtin=False)


def test_builtin_root_ranks_last_and_can_be_disabled(make_skill, skills_root, monkeypatch, tmp_path):
    import skillyard.catalog.builtin_root as builtin_root

    fake_builtin = tmp_path / "builtin"
    make_skill("core", frontmatter="name: core\ndescription: builtin one", root=fake_builtin)
    make_skill("core", frontmatter="name: core\ndescription: local one")
    monkeypatch.setattr(builtin_root, "builtin_skills_dir", lambda: fake_builtin)
    yard = SkillYard(skills_dirs=[skills_root])
    assert yard.skill("core").description == "local one"
    assert {e.skill.source for e in yard.entries} == {"local", "builtin"}
    assert len(SkillYard(skills_dirs=[skills_root], include_builtin=False).entries) == 1


def test_nested_up_to_six_levels_not_seven(make_skill, skills_root):
    """Issue: 'a folder containing `SKILL.md` is a skill, found up to 6 levels deep'."""
    make_skill("a/b/c/d/e/six")
    make_skill("a/b/c/d/e/f/seven")
    names = {i["name"] for i in listing(skills_root)}
    assert "six" in names and "seven" not in names


@pytest.mark.parametrize("excluded", [".git", "node_modules", "__pycache__", ".venv", "venv", "site-packages"])
def test_excluded_folders_are_not_searched(make_skill, skills_root, excluded):
    """Issue: 'do not descend into a skill folder or into `.git`, `node_modules`, `__pycache__`, `.venv`/`venv`,
    `site-packages`'."""
    make_skill(f"cat/{excluded}/hidden_skill")
    make_skill("visible")
    names = {i["name"] for i in listing(skills_root)}
    assert names == {"visible"}


def test_no_descent_into_a_skill_folder(make_skill, skills_root):
    """Issue: 'do not descend into a skill folder'."""
    make_skill("outer", files={"sub/inner/SKILL.md": "---\nname: inner\ndescription: x\n---\n"})
    names = {i["name"] for i in listing(skills_root)}
    assert names == {"outer"}


def test_root_precedence_skills_dir_over_env_path(make_skill, tmp_path, monkeypatch):
    """Issue: 'Skill roots in precedence order: explicit `--skills-dir` ..., `SKILLYARD_SKILLS_PATH`' and
    'The same name in two roots: the higher root wins and `list` says which was shadowed'."""
    hi, lo = tmp_path / "hi", tmp_path / "lo"
    make_skill("dup", frontmatter="name: dup\ndescription: high", root=hi)
    make_skill("dup", frontmatter="name: dup\ndescription: low", root=lo)
    items = listing(hi, env={"SKILLYARD_SKILLS_PATH": str(lo)})
    dups = named(items, "dup")
    assert len(dups) == 2
    winner = [i for i in dups if i["active"]]
    assert len(winner) == 1 and winner[0]["description"] == "high"
    assert winner[0]["shadowed"] == [str(lo / "dup")]
    loser = next(i for i in dups if not i["active"])
    assert loser["tool_names"] == [] and loser["shadowed_by"] == str(hi / "dup")


def test_env_skills_path_is_os_pathsep_list(make_skill, tmp_path):
    """Issue: '`SKILLYARD_SKILLS_PATH` (os.pathsep list)'."""
    a, b = tmp_path / "a", tmp_path / "b"
    make_skill("sa", root=a)
    make_skill("sb", root=b)
    items = listing(env={"SKILLYARD_SKILLS_PATH": f"{a}{os.pathsep}{b}"})
    assert {"sa", "sb"} <= {i["name"] for i in items}


def test_env_skills_path_order_first_wins(make_skill, tmp_path):
    """docs/configuration.md: `SKILLYARD_SKILLS_PATH` roots, in order; docs/authoring.md: 'the first root that holds a
    skill name wins'."""
    a, b = tmp_path / "a", tmp_path / "b"
    make_skill("same", frontmatter="name: same\ndescription: A", root=a)
    make_skill("same", frontmatter="name: same\ndescription: B", root=b)
    items = listing(env={"SKILLYARD_SKILLS_PATH": f"{a}{os.pathsep}{b}"})
    active = [i for i in named(items, "same") if i["active"]]
    assert [i["description"] for i in active] == ["A"]


def test_skills_dir_relative_path_gives_absolute_dir(make_skill, skills_root, monkeypatch):
    """Issue: 'dir (absolute)'."""
    make_skill("rel")
    monkeypatch.chdir(skills_root.parent)
    item = one(listing(Path(skills_root.name)), "rel")
    assert os.path.isabs(item["dir"]) and item["dir"] == str(skills_root / "rel")


def test_plugin_root_ranks_below_env_path_and_gets_source_plugin(make_skill, tmp_path, monkeypatch):
    """Issue: roots 'explicit ..., `SKILLYARD_SKILLS_PATH` ..., plugin roots, built-in'. hooks.md: 'their skills get
    `source: plugin`'."""
    from skillyard.plugins import pm

    proot, eroot = tmp_path / "proot", tmp_path / "eroot"
    make_skill("pl", frontmatter="name: pl\ndescription: from plugin", root=proot)
    make_skill("only_plugin", root=proot)
    make_skill("pl", frontmatter="name: pl\ndescription: from env", root=eroot)
    monkeypatch.setenv("SKILLYARD_SKILLS_PATH", str(eroot))

    class Roots:
        @hookimpl
        def skill_roots(self, yard):
            return [str(proot)]

    plugin = Roots()
    pm.register(plugin, name="probe-roots")
    try:
        yard = SkillYard(include_builtin=False)
        assert yard.skill("pl").description == "from env"
        assert yard.skill("only_plugin").source == "plugin"
    finally:
        pm.unregister(plugin)


def test_skills_dirs_missing_folder_is_clear(tmp_path):
    """docs/cli.md: a `--skills-dir` that does not exist is a usage error; SkillYard(skills_dirs=...) is the same
    option from Python — it must fail clearly or list nothing, never crash later."""
    try:
        yard = SkillYard(skills_dirs=[tmp_path / "missing"], include_builtin=False)
    except SkillyardError:
        return
    with pytest.raises(SkillyardError):
        yard.skill("anything")


def test_a_lower_case_skill_md_is_a_skill_file_at_every_depth(skills_root):
    """Issue 18 (5): `skill.md` in lower case (accepted by the Agent Skills reference validator) is found as a
    direct child, nested in a category, and as a root that is itself a skill; SKILL.md wins when both exist."""
    for rel in ("lower", "category/nested_lower"):
        folder = skills_root / rel
        folder.mkdir(parents=True)
        (folder / "skill.md").write_text(f"---\nname: {folder.name}\ndescription: lower-case file\n---\nBody.\n")
    both = skills_root / "both"
    both.mkdir()
    (both / "SKILL.md").write_text("---\nname: both\ndescription: upper\n---\n")
    if not (both / "skill.md").exists():  # a case-insensitive file system has one file for both names
        (both / "skill.md").write_text("---\nname: both\ndescription: lower\n---\n")
    names = entries_by_name(SkillYard(skills_dirs=[skills_root], include_builtin=False))
    assert {"lower", "nested_lower", "both"} <= set(names)
    assert names["both"][0]["description"] == "upper"
    alone = SkillYard(skills_dirs=[skills_root / "lower"], include_builtin=False)
    assert alone.skill("lower").manifest.path.name == "skill.md"
    assert alone.read_skill_file("lower")["content"].startswith("---")
