"""Model-given paths into SKILLYARD_HOME (outside the run's workspace) are refused, whatever the field's name."""

from __future__ import annotations

import pytest

from skillyard import SkillYard

ECHO = {"handler.py": "async def execute(input, ctx):\n    return {'got': input}\n"}


@pytest.fixture
def echo(make_skill):
    make_skill("echo", files=ECHO)


@pytest.mark.parametrize(
    "value",
    [
        "{home}/secret.key",
        "{home}/pg/postgresql.conf",
        "{home}/workspaces/victim/private.pdf",
        "file://{home}/secret.key",
        "{home}/workspaces/s-own/../../secret.key",
        "{link}/secret.key",
    ],
)
async def test_a_path_into_skillyards_home_is_refused_under_any_field(echo, skills_root, home, tmp_path, value):
    (tmp_path / "link").symlink_to(home)
    text = value.format(home=home, link=tmp_path / "link")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        flat = await yard.run("echo", {"config_location": text}, context={"session_id": "s-own"})
        nested = await yard.run("echo", {"options": {"list": ["x", text]}}, context={"session_id": "s-own"})
    for envelope, field in ((flat, "config_location"), (nested, "list")):
        assert envelope["ok"] is False and envelope["invalid_input"] is True and envelope["need_param"] == field
        assert "inside skillyard's own folder (SKILLYARD_HOME" in envelope["error"]


async def test_paths_in_the_runs_workspace_and_elsewhere_pass(echo, skills_root, home, tmp_path):
    inside = home / "workspaces" / "s-ok" / "a.csv"
    values = {"data": str(inside), "other": str(tmp_path / "elsewhere.txt"), "text": "see ../notes and ~ later"}
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        envelope = await yard.run("echo", values, context={"session_id": "s-ok"})
    assert envelope["ok"] is True and envelope["got"] == values
