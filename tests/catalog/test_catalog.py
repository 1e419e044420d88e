"""The catalog (catalog/catalog.py): every folder of every root listed (errors included, never dropped), the winner
per name, aliases, rescans."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.catalog.describe import describe_entry
from skillyard.errors import UnknownSkill
from support.catalog import entries, entries_by_name
from support.cli import listing, one
from support.skills import ECHO, OK_HANDLER, assert_failure, run_skill, write_raw, yard_of


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


def test_same_name_twice_in_one_root_keeps_both_usable(make_skill, skills_root):
    """Issue 18 (4): the first by folder path keeps the name, the later one gets `<name>_<hash of its folder>`
    (stable across restarts) and a warning naming both; both run."""
    make_skill("one", frontmatter="name: same\ndescription: a", files={"handler.py": OK_HANDLER})
    make_skill("two", frontmatter="name: same\ndescription: b", files={"handler.py": OK_HANDLER})
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert yard.skill("same").description == "a"
    [renamed] = [n for n in entries_by_name(yard) if n.startswith("same_")]
    assert yard.skill(renamed).description == "b" and yard.skill(renamed).error is None
    listed = entries_by_name(yard)[renamed][0]
    assert listed["active"] and any("keeps the name" in w and str(skills_root / "one") in w for w in listed["warnings"])
    again = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert again.skill(renamed).dir == yard.skill(renamed).dir  # the same name after a restart


def test_a_skill_in_error_claims_no_name(make_skill, skills_root):
    """Issue 18 (4): a folder whose frontmatter is broken falls back to its folder name; it must not knock out the
    valid skill of that name, here or in a lower root."""
    broken_dir = skills_root / "report"  # its broken frontmatter falls back to the folder's name: report
    broken_dir.mkdir()
    (broken_dir / "SKILL.md").write_text("---\nname: [unclosed\ndescription: x\n---\n")
    make_skill("zz_real", frontmatter="name: report\ndescription: the real one", files={"handler.py": OK_HANDLER})
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert yard.skill("report").description == "the real one"
    broken = [e for e in yard.entries if e.skill.dir == broken_dir]
    assert broken and broken[0].skill.error and not broken[0].active


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


def test_unterminated_frontmatter_is_listed_with_its_error(make_skill, skills_root):
    write_raw(skills_root, "open", b"---\nname: open\ndescription: never closed\n\n# Body\n")
    make_skill("fine")
    found = entries(skills_root)
    assert set(found) == {"open", "fine"}
    listing = describe_entry(found["open"])
    assert listing["name"] == "open" and not listing["exposed"]
    assert listing["error"] == (
        "the frontmatter block is not terminated: add a line '---' after the last frontmatter field"
    )
    json.dumps(listing)


def test_unparseable_metadata_skill_is_listed_with_its_error(make_skill, skills_root):
    make_skill("badmeta", frontmatter="name: badmeta\ndescription: d\nmetadata: { openclaw: [ }")
    listing = describe_entry(entries(skills_root)["badmeta"])
    assert listing["error"].startswith("the frontmatter is not valid YAML") and not listing["exposed"]
    assert "frontmatter line 3" in listing["error"]


def test_quirky_files_all_load_through_the_catalog(skills_root):
    write_raw(skills_root, "bom", "\ufeff---\r\nname: bom\r\ndescription: Use when: x\r\n---".encode())
    write_raw(skills_root, "wip", b"---\nname: wip\ndescription: [WIP] a skill\nversion: 1.10\n---\nBody\n")
    found = entries(skills_root)
    assert found["bom"].skill.description == "Use when: x" and found["bom"].skill.error is None
    assert any("repaired 'description'" in w for w in found["bom"].skill.warnings)
    assert found["wip"].skill.description == "[WIP] a skill" and found["wip"].skill.meta["version"] == "1.10"
    for entry in found.values():
        json.dumps(describe_entry(entry))


def test_unterminated_frontmatter_is_listed_with_error(skills_root):
    """Issue: 'An unterminated frontmatter block ... → the skill is listed with its error, not dropped'."""
    write_raw(skills_root, "unterm", "---\nname: unterm\ndescription: never closed\n\nbody\n")
    items = listing(skills_root)
    found = [i for i in items if i["dir"].endswith("unterm")]
    assert len(found) == 1 and found[0]["error"], items


def test_unparseable_metadata_is_listed_with_error(skills_root):
    """Issue: 'unparseable metadata → the skill is listed with its error, not dropped'."""
    write_raw(
        skills_root, "badmeta", '---\nname: badmeta\ndescription: d\nmetadata: {"openclaw": {"requires": [[[\n---\n'
    )
    items = listing(skills_root)
    found = [i for i in items if i["dir"].endswith("badmeta")]
    assert len(found) == 1 and found[0]["error"], items
    assert found[0]["available"] is False and found[0]["exposed"] is False


def test_hopeless_yaml_is_listed_with_error_not_dropped(skills_root):
    """Issue: 'skillyard must list every real skill folder ... with a per-skill diagnostic for anything it ... could not
    read'."""
    write_raw(skills_root, "garbage", "---\nname: [unclosed\ndescription: {{{{\n  - : : -\n\t\tx: [\n---\nbody\n")
    items = listing(skills_root)
    found = [i for i in items if i["dir"].endswith("garbage")]
    assert len(found) == 1
    assert found[0]["error"] or found[0]["warnings"]


def test_two_skills_same_name_in_one_root_both_reported(make_skill, skills_root):
    """Issue: 'two skills of the same name in one root are both reported, never one silently dropped'; since issue
    18 (4) both stay usable, the later under a qualified name."""
    make_skill("x1", frontmatter="name: twin\ndescription: one")
    make_skill("x2", frontmatter="name: twin\ndescription: two")
    items = listing(skills_root)
    twins = [i for i in items if i["name"] == "twin" or i["name"].startswith("twin_")]
    assert len(twins) == 2 and not any(t["error"] for t in twins)


def test_rescan_picks_up_added_changed_removed(make_skill, skills_root):
    """Issue: '`rescan()` ... picks up folders dropped in, changed or removed without a restart'."""
    make_skill("keep")
    gone = make_skill("gone")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    make_skill("added")
    (skills_root / "keep" / "SKILL.md").write_text("---\nname: keep\ndescription: changed text\n---\n")
    shutil.rmtree(gone)
    yard.rescan()
    names = {e.name for e in [yard.skill("keep"), yard.skill("added")]}
    assert names == {"keep", "added"}
    assert yard.skill("keep").description == "changed text"
    from skillyard import UnknownSkill

    with pytest.raises(UnknownSkill):
        yard.skill("gone")


async def test_running_host_finds_dropped_in_skill_by_name(make_skill, skills_root):
    """Issue: 'a long-running host picks up folders dropped in ... without a restart'. decisions: 'an unknown name
    triggers one rescan'."""
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        make_skill("late", files={"handler.py": OK_HANDLER})
        await asyncio.sleep(1.1)  # decisions.md: 'an unknown name triggers one rescan at most once a second'
        env = await yard.run("late", {})
        assert env["ok"] is True


def test_aliases_reported_and_runnable(make_skill, skills_root):
    """Issue: 'Frontmatter `aliases: [..]` makes a skill callable under other names too ..., reported by `list`.'"""
    make_skill("al", frontmatter="name: al\ndescription: d\naliases: [nocodb_probe, other]", files={"handler.py": ECHO})
    assert one(listing(skills_root), "al")["aliases"] == ["nocodb_probe", "other"]
    env = asyncio.run(run_skill(skills_root, "nocodb_probe", {"a": 1}))
    assert env["ok"] is True and env["got"] == {"a": 1}


def test_rescan_returns_int_and_finds_new(echo_root, make_skill):
    """Issue: '`rescan()` ... picks up folders dropped in, changed or removed without a restart'."""
    yard = yard_of(echo_root)
    assert yard.resolve("later") is None
    make_skill("later", files={"handler.py": OK_HANDLER})
    n = yard.rescan()
    assert isinstance(n, int)
    assert yard.resolve("later") is not None


async def test_rescan_removed_skill_then_run(echo_root):
    """Issue: 'rescan() ... picks up folders ... removed'; a run of a removed skill is an unknown skill."""
    import shutil

    async with yard_of(echo_root) as yard:
        assert (await yard.run("ret", {}))["ok"] is True
        shutil.rmtree(echo_root / "ret")
        yard.rescan()
        try:
            env = await yard.run("ret", {})
        except UnknownSkill:
            return
    assert_failure(env)
