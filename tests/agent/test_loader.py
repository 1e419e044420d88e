"""Loading an agent folder (loader.py): AGENT.md status, contract skills and business tools through the skill roots
(--skills-dir, SKILLYARD_SKILLS_PATH, the agent folder ranked first), broken and duplicate skills."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.agent import Mode, SideEffect, load_agent
from skillyard.agent.runner import AgentError
from support.agent.contract_probes import (
    BASE,
    SKILL,
    TOOLS,
    business_tool,
    check,
    contract_skill,
    contract_with,
    errors,
    load_errors,
    loaded,
    make_agent,
)
from support.agent.keeper import CONTRACT, HANDLER, RESULTS, KeeperAgent, check_rows, send_once
from support.agent.loader import write
from support.agent.probes import call, codes, needs_db, say

GOOD_CONTRACT = {"tools": {"queryArticle": {"success": {"path": "code", "op": "EQ", "value": 200}}}}


def contract_skill_loader(
    folder: Path, key: str, *, contract: object = None, extra: str = "", tools: str = "[queryArticle]"
) -> Path:
    """A contract skill folder; ``contract`` as a dict goes to contract.json, as text inline."""
    name = key.replace(".", "_")
    front = f"name: {name}\nskill_key: {key}\ndescription: Test skill {key}\ntools: {tools}\n{extra}"
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "SKILL.md").write_text(f"---\n{front}---\nManual of {key}.\n", encoding="utf-8")
    if isinstance(contract, dict):
        (folder / name / "contract.json").write_text(json.dumps(contract), encoding="utf-8")
    return folder / name


def agent_md(folder: Path, skills: str, extra: str = "") -> None:
    write(folder / "AGENT.md", f"---\nagent_code: test\nskills: {skills}\n{extra}---\n# Mission\nTest things.\n")


@pytest.mark.spec("§1.1")
async def test_inactive_agent_does_not_load_through_yard_agent(keeper_agent: KeeperAgent):
    """§1.1 / docs: `status` other than ACTIVE → the agent does not load (an error)."""
    keeper_agent.agent_md("---\nagent_code: notes\nstatus: INACTIVE\nskills: [notes.keeper]\n---\n# Mission\nx\n")
    async with SkillYard() as yard:
        with pytest.raises(AgentError):
            await yard.agent(keeper_agent.dir, model=keeper_agent.script(say("hi")))


def test_inactive_agent_fails_agent_check(keeper_agent: KeeperAgent):
    keeper_agent.agent_md("---\nagent_code: notes\nstatus: DISABLED\nskills: [notes.keeper]\n---\n# Mission\nx\n")
    code, rows = check_rows(keeper_agent.dir)
    assert code == 1 and any(r["severity"] == "error" and "status" in r["rule"] for r in rows), rows


async def test_contract_skill_from_skillyard_skills_path_and_tools_from_the_agent_folder(
    tmp_path: Path, keeper_agent: KeeperAgent, monkeypatch: pytest.MonkeyPatch
):
    """Contract skills are found by skill_key through the usual roots plus the agent's skills/ folder."""
    outside = tmp_path / "elsewhere"
    (outside / "keeper2").mkdir(parents=True)
    (outside / "keeper2" / "SKILL.md").write_text(
        "---\nname: keeper2\nskill_key: notes.reader\ndescription: Reads notes.\ntools: [findNotes]\n---\nRead.\n",
        encoding="utf-8",
    )
    (outside / "keeper2" / "contract.json").write_text(
        json.dumps({"tools": {"findNotes": CONTRACT["tools"]["findNotes"]}}), encoding="utf-8"
    )
    monkeypatch.setenv("SKILLYARD_SKILLS_PATH", str(outside))
    keeper_agent.agent_md("---\nagent_code: notes\nskills: [notes.reader, notes.keeper]\n---\n# Mission\nx\n")
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=keeper_agent.script(say("x")))
    assert list(agent.loaded.skills) == ["notes.reader", "notes.keeper"], agent.loaded.errors


@needs_db
async def test_business_tools_resolve_through_the_usual_roots_and_the_agent_folder_wins(
    tmp_path: Path, keeper_agent: KeeperAgent, monkeypatch: pytest.MonkeyPatch
):
    outside = tmp_path / "outside"
    other_log = tmp_path / "outside.jsonl"
    for name, result in (("findNotes", RESULTS["findNotes"]), ("lookupOwner", RESULTS["lookupOwner"])):
        folder = outside / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: outside {name}\n---\n", "utf-8")
        handler = textwrap.dedent(HANDLER).format(log=str(other_log), name=name, result=result)
        (folder / "handler.py").write_text(handler, "utf-8")
    # lookupOwner exists only outside the agent folder
    import shutil

    shutil.rmtree(keeper_agent.dir / "skills" / "lookupOwner")
    monkeypatch.setenv("SKILLYARD_SKILLS_PATH", str(outside))
    result = await send_once(
        keeper_agent, "找", call("findNotes", {"q": "a"}), call("lookupOwner", {"q": "b"}), say("ok")
    )
    assert codes(result) == [None, None]
    assert [r["tool"] for r in keeper_agent.calls()] == ["findNotes"]  # the agent's bundled findNotes
    assert [json.loads(x)["tool"] for x in other_log.read_text("utf-8").splitlines()] == ["lookupOwner"]


@pytest.mark.spec("§16")
async def test_a_dropped_skill_does_not_take_the_other_skills_down(tmp_path: Path):
    """§16: "任一规则不满足，该 Skill 被丢弃" — only that skill; docs: "the other skills still load"."""
    agent = make_agent(tmp_path, contract_with(lambda c: c.update(mode="react")), skills="[notes.keeper, notes.reader]")
    contract_skill(agent / "skills", "reader", "notes.reader", {"tools": {"findNotes": {}}}, tools="[findNotes]")
    result = await loaded(agent)
    assert list(result.skills) == ["notes.reader"]
    assert ("notes.keeper", "§16.13", "mode") in {(e.skill, e.rule, e.path) for e in result.errors}
    code, rows = check(agent)
    assert code == 1 and {r["skill"] for r in errors(rows)} == {SKILL}, rows


@pytest.mark.spec("§19")
async def test_an_empty_skill_status_defaults_to_active(tmp_path: Path):
    """Issue: "`status` defaults to ACTIVE"; §19: an empty string is not configured → the skill loads."""
    result = await loaded(make_agent(tmp_path, front='status: ""\n'))
    assert list(result.skills) == [SKILL], (result.errors, result.warnings)


def test_an_empty_agent_status_defaults_to_active(tmp_path: Path):
    """docs: AGENT.md `status` "default ACTIVE"; an empty value is not configured."""
    code, rows = check(make_agent(tmp_path, agent_front='status: ""\n'))
    assert (code, errors(rows)) == (0, []), rows


@pytest.mark.spec("§1.1")
@pytest.mark.parametrize("value", ["active", "Active", "INACTIVE", "DISABLED"])
async def test_a_skill_status_other_than_active_does_not_load(tmp_path: Path, value: str):
    """§1.1: "只有 status=ACTIVE 的 Skill … 会被加载"; docs: "other values: not loaded (a warning)" (the
    comparison is the exact value ACTIVE)."""
    agent = make_agent(tmp_path, front=f"status: {value}\n", skills="[notes.keeper, notes.reader]")
    contract_skill(agent / "skills", "reader", "notes.reader", {"tools": {"findNotes": {}}}, tools="[findNotes]")
    result = await loaded(agent)
    assert SKILL not in result.skills and "notes.reader" in result.skills
    assert any(w.skill == SKILL and w.rule == "status" for w in result.warnings), result.warnings


@pytest.mark.spec("§1.1")
async def test_enabled_flag_zero_does_not_load(tmp_path: Path):
    """§1.1: only bindings with enabled_flag=1 load; `enabled: 0` is the flag off."""
    agent = make_agent(tmp_path, front="enabled: 0\n", skills="[notes.keeper, notes.reader]")
    contract_skill(agent / "skills", "reader", "notes.reader", {"tools": {"findNotes": {}}}, tools="[findNotes]")
    result = await loaded(agent)
    assert SKILL not in result.skills and "notes.reader" in result.skills


def test_a_skipped_inactive_skill_is_a_warning_and_check_still_passes_with_another_skill(tmp_path: Path):
    """docs: non-ACTIVE → warning `status`; "warnings alone pass" (exit 0)."""
    agent = make_agent(tmp_path, front="status: INACTIVE\n", skills="[notes.keeper, notes.reader]")
    contract_skill(agent / "skills", "reader", "notes.reader", {"tools": {"findNotes": {}}}, tools="[findNotes]")
    code, rows = check(agent)
    assert code == 0, rows
    assert any(r["severity"] == "warning" and r["skill"] == SKILL and r["rule"] == "status" for r in rows), rows


def test_contract_skill_and_tools_through_skills_dir(tmp_path: Path):
    """Issue: contract skills and business tools "are found … through the same skill roots as every other skill
    (`--skills-dir`, …)"."""
    agent = make_agent(tmp_path, with_skill=False, with_tools=False)
    shared = tmp_path / "shared"
    for name in TOOLS:
        business_tool(shared, name)
    contract_skill(shared, contract=BASE)
    code, rows = check(agent, "--skills-dir", str(shared))
    assert (code, rows) == (0, []), rows


def test_contract_skill_and_tools_through_skillyard_skills_path_with_two_roots(tmp_path: Path):
    """docs/configuration.md: SKILLYARD_SKILLS_PATH holds roots "separated by `:`"."""
    agent = make_agent(tmp_path, with_skill=False, with_tools=False)
    one, two = tmp_path / "one", tmp_path / "two"
    for name in TOOLS:
        business_tool(one, name)
    contract_skill(two, contract=BASE)
    code, rows = check(agent, extra_env={"SKILLYARD_SKILLS_PATH": f"{one}{os.pathsep}{two}"})
    assert (code, rows) == (0, []), rows


@pytest.mark.spec("§16")
def test_a_contract_skill_outside_the_agent_is_validated_like_any_other(tmp_path: Path):
    """§16 applies wherever the skill was found: a broken contract in --skills-dir fails check with its path."""
    agent = make_agent(tmp_path, with_skill=False)
    shared = tmp_path / "shared"
    contract_skill(shared, contract=contract_with(lambda c: c["tools"]["saveNote"].pop("success")))
    code, rows = check(agent, "--skills-dir", str(shared))
    assert code == 1 and ("§16.6", "tools.saveNote.success") in load_errors(rows), rows


def test_the_agents_own_skill_wins_over_a_duplicate_key_in_skills_dir(tmp_path: Path):
    """docs: the agent's skills/ folder ranks above every root; "a key declared twice is a warning; the
    higher-ranked skill wins" — the broken duplicate in --skills-dir is not what loads."""
    agent = make_agent(tmp_path)
    shared = tmp_path / "shared"
    contract_skill(shared, "keeper_shared", contract=contract_with(lambda c: c.update(mode="react")))
    code, rows = check(agent, "--skills-dir", str(shared))
    assert code == 0, rows
    assert any(r["severity"] == "warning" and r["skill"] == SKILL and "skill_key" in r["rule"] for r in rows), rows


def test_skills_dir_outranks_skillyard_skills_path_for_a_duplicate_key(tmp_path: Path):
    """docs/decisions.md: roots rank `--skills-dir` > `SKILLYARD_SKILLS_PATH`; the higher-ranked key wins."""
    agent = make_agent(tmp_path, with_skill=False)
    good, bad = tmp_path / "good", tmp_path / "bad"
    contract_skill(good, "keeper_good", contract=BASE)
    contract_skill(bad, "keeper_bad", contract=contract_with(lambda c: c.update(mode="react")))
    code, rows = check(agent, "--skills-dir", str(good), extra_env={"SKILLYARD_SKILLS_PATH": str(bad)})
    assert code == 0 and load_errors(errors(rows)) == set(), rows


def test_a_duplicate_key_in_the_agent_folder_is_reported(tmp_path: Path):
    """docs: "a key declared twice is a warning" — two folders of the agent declaring one skill_key."""
    agent = make_agent(tmp_path)
    contract_skill(agent / "skills", "keeper_copy", SKILL, BASE)
    _, rows = check(agent)
    assert any(r["skill"] == SKILL and "skill_key" in r["rule"] for r in rows), rows


def test_tool_names_as_a_comma_separated_string(tmp_path: Path):
    """docs: `tools` is "a list (or comma-separated string) of names"."""
    code, rows = check(make_agent(tmp_path, tools="saveNote, findNotes, plainTool"))
    assert (code, rows) == (0, []), rows


async def test_fixture_agent_loads(cms):
    yard = SkillYard(include_builtin=False)
    agent = await load_agent(yard, cms)
    assert agent.errors == [] and agent.warnings == []
    profile = agent.profile
    assert (profile.agent_code, profile.agent_name, profile.status) == ("cms", "CMS editor", "ACTIVE")
    assert profile.skills == ("cms.article.lifecycle",)
    assert profile.identity.startswith("An editor") and profile.mission.startswith("Create articles")
    assert profile.boundary == "Never deletes articles." and profile.principles == "Ask before every write."
    assert profile.style == "Short, factual answers." and profile.routing_text == profile.mission
    skill = agent.skills["cms.article.lifecycle"]
    assert skill.name == "article_lifecycle" and skill.tool_names == ("createArticle", "queryArticle")
    assert skill.description.startswith("Creates and finds CMS articles")
    assert skill.manual.startswith("# Goal") and "Query first" in skill.manual
    assert skill.skill.dir == (cms / "skills" / "article_lifecycle").resolve()
    contract = skill.contract
    assert contract.mode is Mode.REACT and contract.target == "createArticle"
    assert contract.tools["createArticle"].side_effect is SideEffect.WRITE
    # the agent's skills/ folder is now a root of the yard, ranked first: the business tools resolve
    assert yard.skill("createArticle").dir == (cms / "skills" / "createArticle").resolve()
    assert yard.catalog.roots[0].source == "agent"
    again = await load_agent(yard, cms)  # loading twice adds the root once
    assert sum(r.source == "agent" for r in yard.catalog.roots) == 1 and list(again.skills) == list(agent.skills)


async def test_inline_contract_mapping_and_json_text(cms):
    skills = cms / "skills"
    inline_map = "contract:\n  mode: PLAN\n  tools:\n    queryArticle: {label: Look up}\n"
    contract_skill_loader(skills, "cms.inline.map", extra=inline_map)
    inline_text = 'contract: |\n  // JSON text with a comment\n  {"delegatable": true, "tools": {"queryArticle": {}}}\n'
    contract_skill_loader(skills, "cms.inline.text", extra=inline_text)
    agent_md(cms, "[cms.article.lifecycle, cms.inline.map, cms.inline.text]")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert agent.errors == []
    assert agent.skills["cms.inline.map"].contract.mode is Mode.PLAN
    assert agent.skills["cms.inline.map"].contract.tools["queryArticle"].label == "Look up"
    assert agent.skills["cms.inline.text"].contract.delegatable is True


async def test_inline_contract_wins_over_contract_json_with_a_warning(cms):
    folder = contract_skill_loader(cms / "skills", "cms.both", contract=GOOD_CONTRACT, extra="contract: {mode: PLAN}\n")
    agent_md(cms, "[cms.both]")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert agent.skills["cms.both"].contract.mode is Mode.PLAN
    assert [(w.skill, w.rule) for w in agent.warnings] == [("cms.both", "contract")]
    assert str(folder / "contract.json") in agent.warnings[0].message


async def test_status_filtering(cms):
    skills = cms / "skills"
    contract_skill_loader(skills, "cms.old", contract=GOOD_CONTRACT, extra="status: INACTIVE\n")
    contract_skill_loader(skills, "cms.new", contract=GOOD_CONTRACT, extra="status: ACTIVE\n")
    contract_skill_loader(skills, "cms.off", contract=GOOD_CONTRACT, extra="enabled: false\n")
    agent_md(cms, "[cms.old, cms.new, cms.off]")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert list(agent.skills) == ["cms.new"] and agent.errors == []
    assert [(w.skill, w.rule) for w in agent.warnings] == [("cms.old", "status"), ("cms.off", "enabled")]
    agent_md(cms, "[cms.new]", extra="status: DISABLED\n")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert [(e.rule, e.path) for e in agent.errors] == [("agent.status", "status")]


async def test_skills_from_the_yard_roots_and_the_agent_folder(tmp_path, skills_root):
    agent = tmp_path / "agent"
    contract_skill_loader(agent / "skills", "local.one", contract=GOOD_CONTRACT)
    contract_skill_loader(skills_root, "shared.two", contract=GOOD_CONTRACT)
    write(skills_root / "queryArticle" / "SKILL.md", "---\nname: queryArticle\ndescription: Look up\n---\nx\n")
    agent_md(agent, "[local.one, shared.two]")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    loaded = await load_agent(yard, agent)
    assert sorted(loaded.skills) == ["local.one", "shared.two"] and loaded.errors == []
    assert loaded.skills["shared.two"].skill.root == skills_root.resolve()


async def test_a_broken_skill_is_dropped_and_the_others_load(cms):
    skills = cms / "skills"
    broken = {
        "target": "queryArticle",
        "tools": {"queryArticle": {"confirm": True}, "createArticle": {"sideEffect": "WRITE"}},
    }
    contract_skill_loader(skills, "cms.broken", contract=broken)
    contract_skill_loader(skills, "cms.bad.json", extra="contract: '{oops'\n")
    contract_skill_loader(skills, "cms.nocontract")
    agent_md(cms, "[cms.article.lifecycle, cms.broken, cms.bad.json, cms.nocontract, cms.unknown]")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert list(agent.skills) == ["cms.article.lifecycle"]
    found = {(e.skill, e.rule, e.path) for e in agent.errors}
    assert found == {
        ("cms.broken", "§16.3", "target"),
        ("cms.broken", "§16.7", "tools.queryArticle.confirm"),
        ("cms.broken", "§16.6", "tools.createArticle.success"),
        ("cms.bad.json", "§16.1", ""),
        ("cms.nocontract", "§16.1", "contract"),
        ("cms.unknown", "agent.skills", ""),
    }
    assert all(e.message for e in agent.errors)


async def test_no_usable_skill_is_an_error(cms):
    contract_skill_loader(cms / "skills", "cms.broken", contract={"mode": "nope"})
    agent_md(cms, "[cms.broken]")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert agent.skills == {}
    assert [e.rule for e in agent.errors] == ["§16.13", "§16"]


async def test_duplicate_skill_key_warns(cms, skills_root):
    contract_skill_loader(skills_root, "cms.article.lifecycle", contract=GOOD_CONTRACT)
    agent = await load_agent(SkillYard(skills_dirs=[skills_root], include_builtin=False), cms)
    assert agent.skills["cms.article.lifecycle"].skill.root == (cms / "skills").resolve()
    assert [(w.skill, w.rule) for w in agent.warnings] == [("cms.article.lifecycle", "skill_key")]
