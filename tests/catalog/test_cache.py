"""The manifest cache under SKILLYARD_HOME (catalog/cache.py): a second process reuses what the first parsed while
every file that shapes a skill is unchanged (path, size, mtime_ns, inode), and reads afresh whatever changed."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.catalog.cache import ManifestCache
from skillyard.catalog.describe import describe_entry
from support.cli import invoke
from support.skills import OK_HANDLER


def yard(*roots: Path) -> SkillYard:
    """A new host over ``roots``, as a new process builds it: empty in-memory caches, the home's cache on disk."""
    return SkillYard(skills_dirs=list(roots), include_builtin=False)


def listing(y: SkillYard) -> list[dict]:
    return [describe_entry(e) for e in y.entries]


def cache_files() -> list[Path]:
    folder = Path(os.environ["SKILLYARD_HOME"]) / "cache" / "catalog"
    return sorted(folder.glob("*.pickle")) if folder.is_dir() else []


@pytest.fixture
def tree(make_skill, skills_root):
    make_skill("guide", frontmatter="name: guide\ndescription: Reads the manual")
    make_skill(
        "tool",
        frontmatter="name: tool\ndescription: Runs code",
        files={"handler.py": OK_HANDLER, "schema.json": '{"type": "object", "properties": {"q": {"type": "string"}}}'},
    )
    return skills_root


def test_a_second_host_parses_nothing_and_lists_the_same(tree):
    first = yard(tree)
    assert first.catalog.last_parsed == 2 and len(cache_files()) == 1
    second = yard(tree)
    assert second.catalog.last_parsed == 0
    assert listing(second) == listing(first)
    assert second.skill("tool").version == first.skill("tool").version  # stable across processes
    assert second.skill("tool").schema.exposed == first.skill("tool").schema.exposed


@pytest.mark.parametrize(
    ("file", "content"),
    [
        ("SKILL.md", "---\nname: tool\ndescription: Runs other code\n---\n"),
        ("schema.json", '{"type": "object", "properties": {"r": {"type": "integer"}}}'),
        ("handler.py", OK_HANDLER + "\n# edited\n"),
        ("contract.json", "{}"),
    ],
)
def test_a_changed_file_is_read_again(tree, file, content):
    yard(tree)
    (tree / "tool" / file).write_text(content)
    again = yard(tree)
    assert again.catalog.last_parsed == 1


def test_a_replaced_file_of_the_same_size_and_time_is_read_again(tree):
    """Size and mtime_ns alone can miss an edit (an editor's atomic save, a coarse clock): the inode tells."""
    yard(tree)
    md = tree / "guide" / "SKILL.md"
    st = md.stat()
    text = md.read_text().replace("Reads the manual", "Reads the MANUAL")
    replacement = md.with_name("SKILL.md.new")
    replacement.write_text(text)
    os.utime(replacement, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(replacement, md)
    assert md.stat().st_size == st.st_size and md.stat().st_mtime_ns == st.st_mtime_ns
    again = yard(tree)
    assert again.catalog.last_parsed == 1
    assert again.skill("guide").description == "Reads the MANUAL"


def test_an_exec_config_in_a_subfolder_is_part_of_the_key(make_skill, skills_root):
    make_skill(
        "nested_exec",
        frontmatter="name: nested_exec\ndescription: x\nexec:\n  config: code/main.py",
        files={"code/main.py": OK_HANDLER},
    )
    assert yard(skills_root).skill("nested_exec").skill_type == "handler"
    (skills_root / "nested_exec" / "code" / "main.py").write_text("VALUE = 1  # no entry function any more\n")
    again = yard(skills_root)
    assert again.catalog.last_parsed == 1 and again.skill("nested_exec").skill_type == "skill_md"


def test_added_and_removed_folders(tree, make_skill):
    yard(tree)
    make_skill("fresh")
    added = yard(tree)
    assert added.catalog.last_parsed == 1 and {e.skill.name for e in added.entries} == {"guide", "tool", "fresh"}
    (tree / "fresh" / "SKILL.md").unlink()
    (tree / "fresh").rmdir()
    removed = yard(tree)
    assert removed.catalog.last_parsed == 0 and {e.skill.name for e in removed.entries} == {"guide", "tool"}
    assert yard(tree).catalog.last_parsed == 0  # the shrunken cache was written back


def test_tool_names_are_the_catalog_of_this_process(tree, make_skill, tmp_path):
    """A skill that won its name when cached, and is shadowed now, offers no tool names."""
    yard(tree)
    higher = tmp_path / "higher"
    make_skill("tool", frontmatter="name: tool\ndescription: the higher one", root=higher)
    both = yard(higher, tree)
    loser = next(e for e in both.entries if not e.active)
    assert loser.skill.dir == tree / "tool" and describe_entry(loser)["tool_names"] == []
    assert both.catalog.by_tool["tool"][0].description == "the higher one"


@pytest.mark.parametrize("content", [b"", b"not a pickle", pickle.dumps(("other code", "root", {}))])
def test_an_unusable_cache_file_is_ignored(tree, content):
    yard(tree)
    [file] = cache_files()
    file.write_bytes(content)
    again = yard(tree)
    assert again.catalog.last_parsed == 2 and {e.skill.name for e in again.entries} == {"guide", "tool"}
    assert yard(tree).catalog.last_parsed == 0  # rewritten


def test_a_cache_file_of_another_root_is_not_used(tree, tmp_path, make_skill):
    other = tmp_path / "other"
    make_skill("guide", frontmatter="name: guide\ndescription: other root", root=other)
    yard(tree)
    cache = ManifestCache(Path(os.environ["SKILLYARD_HOME"]) / "cache" / "catalog")
    [file] = cache_files()
    os.replace(file, cache._file(other))
    assert yard(other).skill("guide").description == "other root"


def test_an_unwritable_cache_only_loses_the_speed_up(tree):
    (Path(os.environ["SKILLYARD_HOME"]) / "cache").write_text("a file where the cache folder would be")
    first = yard(tree)
    assert first.catalog.last_parsed == 2 and first.skill("tool").error is None
    assert yard(tree).catalog.last_parsed == 2


def test_the_cache_is_private_to_the_home(tree):
    yard(tree)
    folder = Path(os.environ["SKILLYARD_HOME"]) / "cache" / "catalog"
    assert folder.stat().st_mode & 0o077 == 0


def test_cli_list_twice_prints_the_same(tree):
    first = invoke("list", "--json", "--no-builtin", "--skills-dir", tree)
    second = invoke("list", "--json", "--no-builtin", "--skills-dir", tree)
    assert first.exit_code == second.exit_code == 0
    assert json.loads(first.stdout) == json.loads(second.stdout) and len(json.loads(first.stdout)) == 2
