"""Discovery: roots and precedence, SKILL.md lookup, skill types, exposure, tool names, aliases, rescan."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from skillyard import SkillYard, SkillyardError
from skillyard.catalog.describe import describe_entry
from skillyard.catalog.toolnames import TOOL_NAME_RX, safe_tool_name
from support.catalog import entries_by_name
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


def test_category_from_frontmatter_beats_path(make_skill, skills_root):
    make_skill("tools/x", frontmatter="name: x\ndescription: d\ncategory: data")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    skill = yard.skill("x")
    assert skill.category == "data"
    assert skill.tool_description == "[data] d"


def test_root_that_is_itself_a_skill(make_skill, skills_root):
    folder = make_skill("solo", files={"handler.py": OK_HANDLER})
    yard = SkillYard(skills_dirs=[folder], include_builtin=False)
    assert [e.skill.name for e in yard.entries] == ["solo"]


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


def test_precedence_and_shadowing(make_skill, tmp_path, monkeypatch):
    first = tmp_path / "first"
    second = tmp_path / "second"
    make_skill("dup", frontmatter="name: dup\ndescription: from first", root=first)
    make_skill("dup", frontmatter="name: dup\ndescription: from env", root=second)
    monkeypatch.setenv("SKILLYARD_SKILLS_PATH", str(second))
    yard = SkillYard(skills_dirs=[first], include_builtin=False)
    assert yard.skill("dup").description == "from first"
    listed = entries_by_name(yard)["dup"]
    assert len(listed) == 2
    winner = next(d for d in listed if d["active"])
    loser = next(d for d in listed if not d["active"])
    assert winner["shadowed"] == [str(second / "dup")]
    assert loser["shadowed_by"] == str(first / "dup")
    assert loser["error"] is None


def test_same_name_twice_in_one_root_is_reported(make_skill, skills_root):
    make_skill("one", frontmatter="name: same\ndescription: a")
    make_skill("two", frontmatter="name: same\ndescription: b")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    listed = entries_by_name(yard)["same"]
    assert len(listed) == 2
    loser = next(d for d in listed if not d["active"])
    assert "two skills named 'same' in one root" in loser["error"]
    winner = next(d for d in listed if d["active"])
    assert any("ignored" in w for w in winner["warnings"])


def test_missing_skills_dir_is_a_clear_error(tmp_path):
    with pytest.raises(SkillyardError, match="does not exist"):
        SkillYard(skills_dirs=[tmp_path / "nope"], include_builtin=False)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("here.now", "here_now"),
        ("2048", "skill_2048"),
        ("fetch_price", "fetch_price"),
        ("my-skill", "my-skill"),
    ],
)
def test_safe_tool_names(name, expected):
    assert safe_tool_name(name) == expected


def test_non_ascii_and_long_names_get_usable_distinct_tool_names():
    a, b = safe_tool_name("数据-技能"), safe_tool_name("数据-表格")
    assert TOOL_NAME_RX.match(a) and TOOL_NAME_RX.match(b) and a != b
    assert safe_tool_name("数据-技能") == a  # deterministic
    long = safe_tool_name("x" * 200)
    assert TOOL_NAME_RX.match(long) and len(long) == 64


def test_tool_name_collisions_are_resolved_and_reported(make_skill, skills_root):
    make_skill("a", frontmatter="name: here.now\ndescription: d")
    make_skill("b", frontmatter="name: here_now\ndescription: d")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    tools = {d["name"]: d["tool_names"] for d in (describe_entry(e) for e in yard.entries)}
    assert tools["here.now"] != tools["here_now"]
    all_tools = [t for ts in tools.values() for t in ts]
    assert len(set(all_tools)) == 2 and all(TOOL_NAME_RX.match(t) for t in all_tools)
    warned = [w for e in yard.entries for w in e.skill.warnings if "is taken by skill" in w]
    assert len(warned) == 1
    again = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert {d["name"]: d["tool_names"] for d in (describe_entry(e) for e in again.entries)} == tools


def test_skill_types_and_exposure(make_skill, skills_root):
    make_skill("code", files={"handler.py": OK_HANDLER})
    make_skill("doc")
    make_skill("know", frontmatter="name: know\ndescription: d\nskill_type: knowledge")
    make_skill(
        "hidden",
        frontmatter="name: hidden\ndescription: d\ntrigger-type: auto",
        files={"handler.py": OK_HANDLER},
    )
    make_skill("nested_trigger", frontmatter="name: nested_trigger\ndescription: d\ntrigger:\n  type: explicit")
    make_skill("no_entry", files={"handler.py": "def helper():\n    return 1\n"})
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    d = {x["name"]: x for x in (describe_entry(e) for e in yard.entries)}
    assert (d["code"]["skill_type"], d["code"]["exec_type"], d["code"]["exposed"]) == (
        "handler",
        "PYTHON",
        True,
    )
    assert (d["doc"]["skill_type"], d["doc"]["exec_type"], d["doc"]["exposed"]) == ("skill_md", None, True)
    assert d["know"]["exposed"] is False and d["know"]["trigger_type"] == "explicit"
    assert d["hidden"]["exposed"] is False and d["hidden"]["trigger_type"] == "auto"
    assert d["nested_trigger"]["exposed"] is True
    assert d["no_entry"]["skill_type"] == "skill_md"
    assert any("downgraded to skill_md" in w for w in d["no_entry"]["warnings"])


def test_long_skill_md_warns_only_for_skill_md(make_skill, skills_root):
    make_skill("long_doc", body="x" * 8100)
    make_skill("long_code", body="x" * 8100, files={"handler.py": OK_HANDLER})
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert any("over 8000" in w for w in yard.skill("long_doc").warnings)
    assert not any("over 8000" in w for w in yard.skill("long_code").warnings)


def test_exec_type_from_extension_and_declaration(make_skill, skills_root):
    cases = {
        "sh": ("exec:\n  config: run.sh", {"run.sh": "echo {}"}, "SHELL"),
        "js": ("exec:\n  config: run.mjs", {"run.mjs": "console.log('{}')"}, "NODE"),
        "rb": ("exec:\n  config: run.rb", {"run.rb": "puts '{}'"}, "RUBY"),
        "go": ("exec:\n  config: main.go", {"main.go": "package main\nfunc main(){}"}, "GO"),
        "toml": ("exec:\n  config: api.toml", {"api.toml": "[request]\nurl='http://127.0.0.1/'"}, "HTTP"),
        "inline": ("exec:\n  primary:\n    type: inline_shell\n    command: echo hi", {}, "INLINE_SHELL"),
        "browser": ("exec:\n  primary:\n    type: BROWSER", {}, "BROWSER"),
    }
    for name, (fm, files, _) in cases.items():
        make_skill(name, frontmatter=f"name: {name}\ndescription: d\n{fm}", files=files)
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    for name, (_, _, expected) in cases.items():
        assert yard.skill(name).exec_type == expected, name


def test_aliases_resolve(make_skill, skills_root):
    make_skill(
        "datatable",
        frontmatter="name: datatable\ndescription: d\naliases: [nocodb, tables]",
        files={"handler.py": OK_HANDLER},
    )
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert yard.skill("nocodb").name == "datatable"
    assert describe_entry(yard.entries[0])["aliases"] == ["nocodb", "tables"]


def test_rescan_picks_up_added_changed_removed_without_reparsing(make_skill, skills_root):
    make_skill("keep")
    gone = make_skill("gone")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert yard.rescan() == 0
    make_skill("added")
    for p in gone.iterdir():
        p.unlink()
    gone.rmdir()
    time.sleep(0.01)
    md = skills_root / "keep" / "SKILL.md"
    md.write_text("---\nname: keep\ndescription: changed\n---\n")
    os.utime(md, ns=(time.time_ns(), time.time_ns()))
    assert yard.rescan() == 2
    assert {e.skill.name for e in yard.entries} == {"keep", "added"}
    assert yard.skill("keep").description == "changed"


def test_read_skill_file_is_confined_and_paged(make_skill, skills_root):
    make_skill("reader", files={"references/long.md": "a" * 50_000, "blob.bin": ""})
    (skills_root / "reader" / "blob.bin").write_bytes(b"\x00\x01binary")
    (skills_root / "secret.txt").write_text("outside")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    first = yard.read_skill_file("reader", "references/long.md")
    assert len(first["content"]) == 40_000 and first["next_offset"] == 40_000 and first["truncated"]
    rest = yard.read_skill_file("reader", "references/long.md", offset=40_000)
    assert len(rest["content"]) == 10_000 and rest["next_offset"] is None
    assert yard.read_skill_file("reader", "blob.bin")["binary"] is True
    assert "Instructions" in yard.read_skill_file("reader")["content"]
    with pytest.raises(SkillyardError, match="outside the folder"):
        yard.read_skill_file("reader", "../secret.txt")
    with pytest.raises(SkillyardError, match="no file"):
        yard.read_skill_file("reader", "missing.md")


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


def test_list_output_is_json_serializable(make_skill, skills_root):
    make_skill("x", frontmatter="name: x\ndescription: yes\nversion: 1.0\ncreated: 2024-01-01")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    data = json.loads(json.dumps([describe_entry(e) for e in yard.entries]))
    assert data[0]["description"] == "yes"
    required = {
        "name",
        "description",
        "dir",
        "skill_type",
        "exec_type",
        "source",
        "category",
        "trigger_type",
        "exposed",
        "tool_names",
        "available",
        "needs_config",
        "missing_bins",
        "os_supported",
        "warnings",
        "error",
        "shadowed",
    }
    assert required <= set(data[0])
    assert Path(data[0]["dir"]).is_absolute()


async def test_a_running_host_finds_dropped_in_skills(make_skill, skills_root, monkeypatch):
    import asyncio

    import skillyard.yard as yard_module

    monkeypatch.setattr(yard_module, "UNKNOWN_NAME_RESCAN", 0.0)
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        make_skill("late", files={"handler.py": OK_HANDLER})
        assert (await yard.run("late"))["ok"] is True
    monkeypatch.setenv("SKILLYARD_RESCAN_INTERVAL", "0.05")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        make_skill("later")
        for _ in range(100):
            if any(e.skill.name == "later" for e in yard.entries):
                break
            await asyncio.sleep(0.02)
        assert any(e.skill.name == "later" for e in yard.entries)


async def test_declared_python_type_without_config_uses_handler_py(make_skill, skills_root):
    make_skill(
        "typed",
        frontmatter="name: typed\ndescription: d\nexec:\n  primary:\n    type: python",
        files={"handler.py": OK_HANDLER},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert yard.skill("typed").exec.config == (skills_root / "typed" / "handler.py").resolve()
        assert (await yard.run("typed"))["ok"] is True


def test_knowledge_skills_have_no_tool_names(make_skill, skills_root):
    make_skill("kb", frontmatter="name: kb\ndescription: d\nskill_type: knowledge")
    assert describe_entry(SkillYard(skills_dirs=[skills_root], include_builtin=False).entries[0])["tool_names"] == []


def test_a_description_written_as_a_list_is_joined(make_skill, skills_root):
    """A YAML list under description (a long line split into items) reads as one text, with a warning to fix it."""
    make_skill("listed", "name: listed\ndescription:\n  - Looks up orders\n  - by customer and date")
    skill = SkillYard(skills_dirs=[skills_root], include_builtin=False).skill("listed")
    assert skill.description == "Looks up orders by customer and date"
    assert any("description is a list" in w for w in skill.warnings)
