"""Skill roots and the walk (catalog/roots.py): how deep, which folders are never searched, which root ranks
first (--skills-dir, SKILLYARD_SKILLS_PATH, plugin roots, the built-in skills)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skillyard import SkillYard, hookimpl
from skillyard.catalog.roots import SKILL_MATERIAL_DIRS
from skillyard.errors import SkillyardError
from support.catalog import entries_by_name
from support.cli import invoke, listing, named, one
from support.skills import OK_HANDLER


def test_nested_categories_and_excluded_folders(make_skill, skills_root):
    make_skill("research/arxiv")
    make_skill("a/b/c/d/e/deep")  # 6 levels below the root
    make_skill("a/b/c/d/e/f/too_deep")  # 7 levels: not searched
    make_skill("node_modules/pkg")
    make_skill(".git/hooks_skill")
    make_skill("venv/lib")
    make_skill("outer", files={"references/inner/SKILL.md": "---\nname: inner\ndescription: x\n---\n"})
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


def test_no_descent_into_a_skill_folders_material(make_skill, skills_root):
    """Issue 18 (2): nested skills are listed, but never inside a skill's references/, templates/, assets/,
    scripts/, examples/, tests/, fixtures/ or testdata/."""
    files = {f"{d}/inner_{d}/SKILL.md": f"---\nname: inner_{d}\ndescription: x\n---\n" for d in SKILL_MATERIAL_DIRS}
    files["sub/inner/SKILL.md"] = "---\nname: inner\ndescription: x\n---\n"
    make_skill("outer", files=files)
    names = {i["name"] for i in listing(skills_root)}
    assert names == {"outer", "inner"}


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


# Issue 18 (1): dot-folders -------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", [".curated", ".system", ".experimental", ".claude/skills", ".github/skills"])
def test_skills_in_dot_folders_are_listed(make_skill, skills_root, folder):
    make_skill(f"{folder}/dotted")
    assert {i["name"] for i in listing(skills_root)} == {"dotted"}


@pytest.mark.parametrize(
    "cache", [".git", ".hg", ".svn", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache"]
)
def test_vcs_and_tool_caches_are_still_skipped(make_skill, skills_root, cache):
    make_skill(f"{cache}/hidden")
    make_skill("visible")
    assert {i["name"] for i in listing(skills_root)} == {"visible"}


# Issue 18 (2): nested skills -----------------------------------------------------------------------------------


def test_category_skills_list_the_skills_inside_them(make_skill, skills_root):
    make_skill("juicy")
    make_skill("juicy/jb-color")
    make_skill("juicy/jb-sound")
    make_skill("game-development")
    make_skill("game-development/2d-games")
    make_skill("game-development/2d-games/pixel-art")  # a skill in a nested skill
    items = {i["name"]: i for i in listing(skills_root)}
    assert set(items) == {"juicy", "jb-color", "jb-sound", "game-development", "2d-games", "pixel-art"}
    assert all(i["error"] is None for i in items.values())
    assert items["jb-color"]["dir"] == str(skills_root / "juicy" / "jb-color")


def test_nested_skills_keep_the_depth_limit(make_skill, skills_root):
    make_skill("a")
    make_skill("a/b/c/d/e/six")
    make_skill("a/b/c/d/e/f/seven")
    assert {i["name"] for i in listing(skills_root)} == {"a", "six"}


def test_material_folder_names_are_searched_outside_skill_folders(make_skill, skills_root, tmp_path):
    """The exclusions apply inside skill folders, not to roots the user names or to category folders."""
    for name in SKILL_MATERIAL_DIRS:
        make_skill(f"{name}/in_{name}")
    assert {i["name"] for i in listing(skills_root)} == {f"in_{n}" for n in SKILL_MATERIAL_DIRS}
    examples = tmp_path / "examples"
    make_skill("demo", root=examples)
    assert {i["name"] for i in listing(examples)} == {"demo"}


def test_a_root_that_is_a_skill_lists_its_nested_skills_but_not_its_material(make_skill, skills_root):
    folder = make_skill(
        "solo",
        files={
            "child/SKILL.md": "---\nname: child\ndescription: x\n---\n",
            "references/ref/SKILL.md": "---\nname: ref\ndescription: x\n---\n",
            "templates/tpl/SKILL.md": "---\nname: tpl\ndescription: x\n---\n",
        },
    )
    assert {i["name"] for i in listing(folder)} == {"solo", "child"}


# Issue 18 (3): symlinks ----------------------------------------------------------------------------------------


def _names_and_dirs(items):
    return sorted((i["name"], i["dir"]) for i in items)


def test_a_symlinked_folder_is_one_skill_at_its_real_path(make_skill, skills_root):
    real = make_skill("docx-official", frontmatter="name: docx\ndescription: Word documents")
    (skills_root / "docx").symlink_to("docx-official", target_is_directory=True)
    result = invoke("list", "--json", "--no-builtin", "--skills-dir", skills_root)
    items = json.loads(result.stdout)
    assert _names_and_dirs(items) == [("docx", str(real))]
    assert items[0]["error"] is None and items[0]["warnings"] == [] and items[0]["active"]
    assert "warning" not in result.stderr


def test_a_mirror_copy_in_a_dot_folder_is_not_listed_twice(make_skill, skills_root):
    real = make_skill("skills/pdf")
    (skills_root / ".claude" / "skills").mkdir(parents=True)
    (skills_root / ".claude" / "skills" / "pdf").symlink_to(real, target_is_directory=True)
    (skills_root / ".agents").symlink_to(skills_root / "skills", target_is_directory=True)  # a mirror of the folder
    assert _names_and_dirs(listing(skills_root)) == [("pdf", str(real))]


def test_a_symlinked_skill_md_counts_as_the_same_skill(make_skill, skills_root):
    real = make_skill("b", frontmatter="name: shared\ndescription: one file")
    (skills_root / "a").mkdir()
    (skills_root / "a" / "SKILL.md").symlink_to(real / "SKILL.md")
    assert _names_and_dirs(listing(skills_root)) == [("shared", str(real))]


def test_a_hard_linked_skill_md_is_one_skill(make_skill, skills_root):
    """A bind mount shows one folder at two real paths, as a hard link shows one file: compared by device and inode,
    both are one skill."""
    real = make_skill("a", frontmatter="name: same_file\ndescription: x")
    (skills_root / "b").mkdir()
    os.link(real / "SKILL.md", skills_root / "b" / "SKILL.md")
    assert _names_and_dirs(listing(skills_root)) == [("same_file", str(real))]


def test_symlink_loops_are_skipped_with_a_warning(make_skill, skills_root):
    make_skill("cat/ok")
    (skills_root / "cat" / "up").symlink_to("..", target_is_directory=True)
    (skills_root / "self").symlink_to("self")  # ELOOP
    (skills_root / "cat" / "ok" / "again").symlink_to(skills_root / "cat", target_is_directory=True)
    result = invoke("list", "--json", "--no-builtin", "--skills-dir", skills_root)
    assert result.exit_code == 0
    assert _names_and_dirs(json.loads(result.stdout)) == [("ok", str(skills_root / "cat" / "ok"))]
    assert f"symlink loop: {skills_root / 'cat' / 'up'} leads back to {skills_root}" in result.stderr
    assert f"symlink loop at {skills_root / 'self'}" in result.stderr
    assert f"{skills_root / 'cat' / 'ok' / 'again'} leads back to {skills_root / 'cat'}" in result.stderr


def test_links_out_of_the_root_are_followed_only_into_a_configured_root(make_skill, skills_root, tmp_path):
    outside, other = tmp_path / "outside", tmp_path / "other"
    make_skill("stranger", root=outside)
    theirs = make_skill("theirs", root=other)
    (skills_root / "stranger").symlink_to(outside / "stranger", target_is_directory=True)
    (skills_root / "theirs").symlink_to(theirs, target_is_directory=True)
    (skills_root / "deep_link").symlink_to(other, target_is_directory=True)
    result = invoke("list", "--json", "--no-builtin", "--skills-dir", skills_root)
    assert json.loads(result.stdout) == []
    assert f"{skills_root / 'stranger'} links to {outside / 'stranger'}, outside every skills root" in result.stderr
    both = invoke("list", "--json", "--no-builtin", "--skills-dir", skills_root, "--skills-dir", other)
    assert _names_and_dirs(json.loads(both.stdout)) == [("theirs", str(theirs))]  # once, at its real path


def test_a_skill_md_linked_out_of_every_root_is_not_a_skill(skills_root, tmp_path):
    secret = tmp_path / "elsewhere" / "notes.md"
    secret.parent.mkdir()
    secret.write_text("---\nname: leak\ndescription: not in any root\n---\n")
    (skills_root / "leak").mkdir()
    (skills_root / "leak" / "SKILL.md").symlink_to(secret)
    result = invoke("list", "--json", "--no-builtin", "--skills-dir", skills_root)
    assert json.loads(result.stdout) == []
    assert "outside every skills root: not a skill" in result.stderr


def test_a_link_to_a_folder_the_walk_never_enters_lists_it_at_the_link(make_skill, skills_root):
    """A skill kept in another skill's material folder is reachable through a link placed in the root."""
    make_skill("host", files={"assets/bundled/SKILL.md": "---\nname: bundled\ndescription: x\n---\n"})
    (skills_root / "bundled").symlink_to(skills_root / "host" / "assets" / "bundled", target_is_directory=True)
    assert _names_and_dirs(listing(skills_root)) == [
        ("bundled", str(skills_root / "bundled")),
        ("host", str(skills_root / "host")),
    ]


def test_a_web_of_links_is_walked_once_per_folder(make_skill, skills_root):
    """Thirty category folders each linking to all the others: every folder is entered once, so the walk stays
    linear instead of branching thirty ways six levels deep."""
    count = 30
    for n in range(count):
        make_skill(f"c{n:02d}/s{n:02d}")
    for n in range(count):
        for m in range(count):
            if m != n:
                (skills_root / f"c{n:02d}" / f"to{m:02d}").symlink_to(f"../c{m:02d}", target_is_directory=True)
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert sorted(e.skill.name for e in yard.entries) == [f"s{n:02d}" for n in range(count)]
    assert all(e.skill.dir == skills_root / f"c{e.skill.name[1:]}" / e.skill.name for e in yard.entries)
