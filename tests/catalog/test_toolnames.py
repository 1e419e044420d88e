"""Provider-safe tool names (catalog/toolnames.py): derived deterministically, capped, collisions resolved and
reported."""

from __future__ import annotations

import pytest

from skillyard import SkillYard
from skillyard.catalog.describe import describe_entry
from skillyard.catalog.toolnames import TOOL_NAME_RX, safe_tool_name
from support.catalog import TOOL_RX
from support.cli import listing, one
from support.skills import write_raw


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


def test_knowledge_skills_have_no_tool_names(make_skill, skills_root):
    make_skill("kb", frontmatter="name: kb\ndescription: d\nskill_type: knowledge")
    assert describe_entry(SkillYard(skills_dirs=[skills_root], include_builtin=False).entries[0])["tool_names"] == []


@pytest.mark.parametrize("name", ["数据-技能", "here.now", "2048"])
def test_tool_names_provider_safe(skills_root, name):
    """Issue: 'Tool names are provider-safe (`^[A-Za-z0-9_-]{1,64}$` ...), derived deterministically from the name
    (`数据-技能`, `here.now` and `2048` all get usable ones)'."""
    write_raw(skills_root, "folder", f'---\nname: "{name}"\ndescription: d\n---\n')
    first = one(listing(skills_root), name)["tool_names"]
    again = one(listing(skills_root), name)["tool_names"]
    assert first and first == again and all(TOOL_RX.match(t) for t in first)


def test_tool_name_collision_resolved_and_reported(skills_root):
    """Issue: 'collisions are resolved deterministically and reported'."""
    write_raw(skills_root, "a", "---\nname: here.now\ndescription: d\n---\n")
    write_raw(skills_root, "b", "---\nname: here_now\ndescription: d\n---\n")
    items = listing(skills_root)
    t1, t2 = one(items, "here.now")["tool_names"], one(items, "here_now")["tool_names"]
    assert set(t1).isdisjoint(t2)
    assert one(items, "here.now")["warnings"] or one(items, "here_now")["warnings"]


def test_long_name_tool_name_capped(skills_root):
    """Issue: tool names match `^[A-Za-z0-9_-]{1,64}$` (docs: 'names over 64 characters are cut and end in a hash')."""
    long = "x" * 100
    write_raw(skills_root, "long", f"---\nname: {long}\ndescription: d\n---\n")
    tools = one(listing(skills_root), long)["tool_names"]
    assert tools and all(TOOL_RX.match(t) for t in tools)
