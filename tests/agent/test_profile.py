"""AGENT.md (profile.py): the frontmatter and the five body sections, English and Chinese headings."""

from __future__ import annotations

import pytest

from skillyard.agent import AgentProfileError, read_agent_profile
from support.agent.loader import write


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
