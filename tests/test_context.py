"""runtime_context (§4, §5.1): fixed fields, platform segment, admin fill, configs in four places, gating."""

from __future__ import annotations

import os
import sys

import pytest

from skillyard import SkillYard, department_path, identity_org_id
from skillyard.invoke.context import ACTOR_KEYS, FIXED_FIELDS
from support.skills import OK_HANDLER

DUMP = """
async def execute(input, ctx):
    plain = (str, int, float, bool, list, dict, type(None))
    return {"ctx": {k: v for k, v in ctx.items() if isinstance(v, plain) and not k.startswith("_")}}
"""


@pytest.fixture
def dump_yard(make_skill, skills_root):
    make_skill("dump", files={"handler.py": DUMP})
    return SkillYard(skills_dirs=[skills_root], include_builtin=False)


async def test_fixed_fields_always_present_with_typed_empties(dump_yard):
    async with dump_yard as yard:
        ctx = (await yard.run("dump"))["ctx"]
    for key, empty in FIXED_FIELDS.items():
        assert key in ctx
        if key not in ("triggered_at", "triggered_at_str"):
            assert ctx[key] == empty and type(ctx[key]) is type(empty), key
    assert isinstance(ctx["triggered_at"], float) and ctx["triggered_at"] > 0
    assert len(ctx["triggered_at_str"]) == 16 and ctx["triggered_at_str"][4] == "-"
    for key in ("org_id", "role_id", "session_id", "user_id", "team_id", "team_role"):
        assert ctx[key] == ""
    assert ctx["allow_sql"] is True and ctx["is_admin"] is False
    assert os.path.isdir(ctx["workspace_dir"])


async def test_given_context_is_typed_and_normalized(dump_yard):
    async with dump_yard as yard:
        ctx = (
            await yard.run(
                "dump",
                context={
                    "triggered_at": "1700000000",
                    "actor_tags": "a, b",
                    "is_admin": "yes",
                    "session_id": "s1",
                    "actor_department_path": "总部/销售中心//销售一部",
                    "org_name": "Acme",
                },
            )
        )["ctx"]
    assert ctx["triggered_at"] == 1700000000.0 and ctx["triggered_at_str"] == "2023-11-14 22:13"
    assert ctx["actor_tags"] == ["a", "b"] and ctx["is_admin"] is True
    assert ctx["actor_department_path"] == "/总部/销售中心/销售一部/"
    assert ctx["org_name"] == "Acme"
    assert ctx["workspace_dir"].endswith(os.path.join("workspaces", "s1"))


async def test_admin_fill_clears_identity_but_keeps_audit_fields(dump_yard):
    given = {k: "v" for k in ACTOR_KEYS} | {"actor_tags": ["t"], "actor_id": "42", "actor_is_admin": True}
    async with dump_yard as yard:
        ctx = (await yard.run("dump", context=given))["ctx"]
    for key in (
        "actor_title",
        "actor_department",
        "actor_department_path",
        "actor_position",
        "actor_key",
        "actor_id",
        "actor_emp_no",
    ):
        assert ctx[key] == "", key
    assert ctx["actor_tags"] == []
    assert (ctx["actor_name"], ctx["actor_phone"], ctx["actor_email"]) == ("v", "v", "v")


async def test_bad_session_id_is_refused(dump_yard):
    from skillyard import InvalidInput

    async with dump_yard as yard:
        with pytest.raises(InvalidInput, match="not a safe name"):
            await yard.run("dump", context={"session_id": "../etc"})


async def test_configs_in_four_places_with_cli_style_keys(dump_yard):
    async with dump_yard as yard:
        ctx = (await yard.run("dump", context={"skill_args": {"--api-token": "t0k", "region": "eu"}, "role_id": "r1"}))[
            "ctx"
        ]
    assert ctx["skill_configs"]["dump"]["api_token"] == "t0k"
    assert ctx["skill_configs"]["api_token"] == "t0k"
    assert ctx["skill_args"]["api_token"] == "t0k"
    assert ctx["api_token"] == "t0k" and ctx["region"] == "eu"


async def test_configs_never_replace_platform_fields(dump_yard):
    async with dump_yard as yard:
        ctx = (await yard.run("dump", context={"skill_args": {"org_id": "evil"}, "org_id": "o1"}))["ctx"]
    assert ctx["org_id"] == "o1" and ctx["skill_args"]["org_id"] == "evil"


def test_department_path_helper():
    assert department_path("") == ""
    assert department_path("/a/b/") == "/a/b/"
    assert department_path(["a", "b"]) == "/a/b/"
    deep = department_path("/" + "/".join(f"d{i}" for i in range(25)) + "/")
    assert deep.count("/") == 21 and deep.startswith("/d5/") and deep.endswith("/d24/")


def test_identity_org_id_helper():
    assert identity_org_id({"org_id": " o1 ", "role_id": "r"}) == "o1"
    assert identity_org_id({"org_id": "", "role_id": "r9"}) == "r_r9"


async def test_missing_env_gives_needs_config_and_does_not_run(make_skill, skills_root, monkeypatch):
    monkeypatch.delenv("PRICE_API_KEY", raising=False)
    make_skill(
        "price",
        frontmatter="""
        name: price
        description: d
        metadata:
          openclaw:
            primaryEnv: PRICE_API_KEY
            requires:
              env: [PRICE_API_KEY, {name: OPTIONAL_X, required: false}]
    """,
        files={"handler.py": OK_HANDLER},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("price")
        assert env["ok"] is False and env["needs_config"] == ["PRICE_API_KEY"] and env["error_type"] == "config"
        configured = await yard.run("price", context={"skill_args": {"PRICE_API_KEY": "k"}})
        assert configured["ok"] is True
        monkeypatch.setenv("PRICE_API_KEY", "from-env")
        assert (await yard.run("price"))["ok"] is True


async def test_missing_bins_gate_except_for_container_skills(make_skill, skills_root):
    make_skill(
        "needs_bin",
        frontmatter="""
        name: needs_bin
        description: d
        metadata: {"openclaw": {"requires": {"bins": ["definitely-not-installed-xyz"]}}}
    """,
        files={"handler.py": OK_HANDLER},
    )
    make_skill(
        "container",
        frontmatter="""
        name: container
        description: d
        exec_mode: shell
        metadata: {"openclaw": {"requires": {"bins": ["definitely-not-installed-xyz"]}}}
    """,
        files={"handler.py": OK_HANDLER},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("needs_bin")
        assert env["ok"] is False and env["missing_bins"] == ["definitely-not-installed-xyz"]
        assert (await yard.run("container"))["ok"] is True


async def test_os_gate_is_not_bypassed_by_always(make_skill, skills_root):
    other = "win32" if sys.platform != "win32" else "linux"
    make_skill(
        "elsewhere",
        frontmatter=f"""
        name: elsewhere
        description: d
        metadata: {{"openclaw": {{"os": ["{other}"], "always": true}}}}
    """,
        files={"handler.py": OK_HANDLER},
    )
    make_skill(
        "always",
        frontmatter="""
        name: always
        description: d
        metadata: {"openclaw": {"always": true, "requires": {"env": ["NOPE_NOT_SET_ANYWHERE"]}}}
    """,
        files={"handler.py": OK_HANDLER},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("elsewhere")
        assert env["ok"] is False and env["os_supported"] is False
        assert (await yard.run("always"))["ok"] is True


async def test_skill_md_and_broken_skills_are_not_run(make_skill, skills_root):
    make_skill("doc")
    (skills_root / "broken").mkdir()
    (skills_root / "broken" / "SKILL.md").write_text("---\nname: broken\n")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        doc = await yard.run("doc")
        assert doc["ok"] is False and "skill_md" in doc["error"]
        broken = await yard.run("broken")
        assert broken["ok"] is False and "not terminated" in broken["error"]
