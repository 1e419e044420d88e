"""Loading agent folders: AGENT.md, contract skills (inline or contract.json), status, roots, broken skills."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.agent import AgentProfileError, Mode, SideEffect, load_agent, read_agent_profile

FIXTURE = Path(__file__).parent / "fixtures" / "agents" / "cms"
GOOD_CONTRACT = {"tools": {"queryArticle": {"success": {"path": "code", "op": "EQ", "value": 200}}}}


@pytest.fixture
def cms(tmp_path: Path) -> Path:
    """A copy of the fixture agent ``cms`` (AGENT.md, skills/ with the contract skill and two real tools)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "cms"))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def contract_skill(
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


def test_profile_headings_in_chinese_and_unknown_sections(tmp_path):
    write(
        tmp_path / "AGENT.md",
        """
        ---
        agent_code: sales
        skills: "a.b, c.d"
        ---
        ## 身份
        销售助理
        ## 职责：
        跟进订单
        ## Boundaries
        不报价
        ## 风格
        简洁
        ## Principle
        先查后写
        ## Notes
        ignored
        """,
    )
    profile = read_agent_profile(tmp_path)
    assert profile.agent_name == "sales" and profile.skills == ("a.b", "c.d")
    assert (profile.identity, profile.mission, profile.boundary, profile.style, profile.principles) == (
        "销售助理",
        "跟进订单",
        "不报价",
        "简洁",
        "先查后写",
    )
    assert any("Notes" in w for w in profile.warnings)


def test_agent_md_problems_are_clear(tmp_path):
    with pytest.raises(AgentProfileError, match=r"no AGENT\.md in"):
        read_agent_profile(tmp_path)
    write(tmp_path / "AGENT.md", "---\nagent_name: x\n---\n")
    with pytest.raises(AgentProfileError, match="needs 'agent_code'"):
        read_agent_profile(tmp_path)
    write(tmp_path / "AGENT.md", "---\nagent_code: x\nskills: {a: 1}\n---\n")
    with pytest.raises(AgentProfileError, match="'skills' must be a list"):
        read_agent_profile(tmp_path)


async def test_inline_contract_mapping_and_json_text(cms):
    skills = cms / "skills"
    inline_map = "contract:\n  mode: PLAN\n  tools:\n    queryArticle: {label: Look up}\n"
    contract_skill(skills, "cms.inline.map", extra=inline_map)
    inline_text = 'contract: |\n  // JSON text with a comment\n  {"delegatable": true, "tools": {"queryArticle": {}}}\n'
    contract_skill(skills, "cms.inline.text", extra=inline_text)
    agent_md(cms, "[cms.article.lifecycle, cms.inline.map, cms.inline.text]")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert agent.errors == []
    assert agent.skills["cms.inline.map"].contract.mode is Mode.PLAN
    assert agent.skills["cms.inline.map"].contract.tools["queryArticle"].label == "Look up"
    assert agent.skills["cms.inline.text"].contract.delegatable is True


async def test_inline_contract_wins_over_contract_json_with_a_warning(cms):
    folder = contract_skill(cms / "skills", "cms.both", contract=GOOD_CONTRACT, extra="contract: {mode: PLAN}\n")
    agent_md(cms, "[cms.both]")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert agent.skills["cms.both"].contract.mode is Mode.PLAN
    assert [(w.skill, w.rule) for w in agent.warnings] == [("cms.both", "contract")]
    assert str(folder / "contract.json") in agent.warnings[0].message


async def test_status_filtering(cms):
    skills = cms / "skills"
    contract_skill(skills, "cms.old", contract=GOOD_CONTRACT, extra="status: INACTIVE\n")
    contract_skill(skills, "cms.new", contract=GOOD_CONTRACT, extra="status: ACTIVE\n")
    contract_skill(skills, "cms.off", contract=GOOD_CONTRACT, extra="enabled: false\n")
    agent_md(cms, "[cms.old, cms.new, cms.off]")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert list(agent.skills) == ["cms.new"] and agent.errors == []
    assert [(w.skill, w.rule) for w in agent.warnings] == [("cms.old", "status"), ("cms.off", "enabled")]
    agent_md(cms, "[cms.new]", extra="status: DISABLED\n")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert [(e.rule, e.path) for e in agent.errors] == [("agent.status", "status")]


async def test_skills_from_the_yard_roots_and_the_agent_folder(tmp_path, skills_root):
    agent = tmp_path / "agent"
    contract_skill(agent / "skills", "local.one", contract=GOOD_CONTRACT)
    contract_skill(skills_root, "shared.two", contract=GOOD_CONTRACT)
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
    contract_skill(skills, "cms.broken", contract=broken)
    contract_skill(skills, "cms.bad.json", extra="contract: '{oops'\n")
    contract_skill(skills, "cms.nocontract")
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
    contract_skill(cms / "skills", "cms.broken", contract={"mode": "nope"})
    agent_md(cms, "[cms.broken]")
    agent = await load_agent(SkillYard(include_builtin=False), cms)
    assert agent.skills == {}
    assert [e.rule for e in agent.errors] == ["§16.13", "§16"]


async def test_duplicate_skill_key_warns(cms, skills_root):
    contract_skill(skills_root, "cms.article.lifecycle", contract=GOOD_CONTRACT)
    agent = await load_agent(SkillYard(skills_dirs=[skills_root], include_builtin=False), cms)
    assert agent.skills["cms.article.lifecycle"].skill.root == (cms / "skills").resolve()
    assert [(w.skill, w.rule) for w in agent.warnings] == [("cms.article.lifecycle", "skill_key")]
