"""Preparing a skill's input (§3.1, §3.2, §5.2, invoke/inputs.py): required means present and non-empty, type
errors name the field, credentials come from configs, fan-out subcommands are restored and validated."""

from __future__ import annotations

import json

import pytest

from skillyard import SkillYard
from support.skills import (
    CRED_SCHEMA,
    ECHO,
    INPUT_ECHO,
    NOTES_FM,
    SCHEMA_WHO,
    assert_failure,
    run_or_error,
    run_skill,
    schema_json,
    yard_of,
)


async def test_required_means_present_and_non_empty(make_skill, skills_root):
    make_skill(
        "s",
        files={
            "handler.py": INPUT_ECHO,
            "schema.json": schema_json(
                {
                    "q": {
                        "type": ["string", "array", "object", "integer", "boolean"],
                        "description": "what to look up",
                    }
                },
                ["q"],
            ),
        },
    )
    async with yard_of(skills_root) as yard:
        for empty in ("", "   ", [], {}, None):
            env = await yard.run("s", {"q": empty})
            assert env["ok"] is False and env["need_param"] == "q", empty
            assert env["error_type"] == "recoverable"
            assert "what to look up" in env["error"]
        missing = await yard.run("s", {})
        assert missing["need_param"] == "q"
        for value in (0, False, "x", [1]):
            assert (await yard.run("s", {"q": value}))["ok"] is True, value


async def test_type_errors_name_the_field_and_do_not_run(make_skill, skills_root, tmp_path):
    marker = tmp_path / "ran"
    make_skill(
        "s",
        files={
            "handler.py": (
                f"async def execute(input, ctx):\n    open({str(marker)!r}, 'w').write('x')\n    return {{}}\n"
            ),
            "schema.json": schema_json({"limit": {"type": "integer", "maximum": 10}}),
        },
    )
    async with yard_of(skills_root) as yard:
        env = await yard.run("s", {"limit": 50})
    assert env["ok"] is False and env["need_param"] == "limit"
    assert "50" in env["error"] and "maximum" in env["error"]
    assert not marker.exists()


@pytest.mark.parametrize("value", ["", "   ", [], {}, None])
async def test_required_empty_counts_as_missing(make_skill, skills_root, value):
    """Issue: 'Required means present and non-empty: `""`, `[]`, `{}` and whitespace count as missing' ...
    'A failed validation returns a recoverable failure envelope with `need_param` set to the field and an `error` that
    says the fix, without running the skill.'"""
    marker = skills_root / "ran"
    make_skill(
        "req",
        files={
            "schema.json": json.dumps({"type": "object", "properties": {"who": {}}, "required": ["who"]}),
            "handler.py": f"async def execute(i, c):\n    open({str(marker)!r}, 'w').write('x')\n    return {{}}\n",
        },
    )
    env = await run_skill(skills_root, "req", {"who": value})
    assert env["ok"] is False and env["need_param"] == "who" and env["error_type"] == "recoverable"
    assert "who" in env["error"] and not marker.exists()


@pytest.mark.parametrize("value", [0, False])
async def test_zero_and_false_are_values(make_skill, skills_root, value):
    """Issue: '`0` and `false` are values.'"""
    make_skill(
        "req0",
        files={
            "schema.json": json.dumps({"type": "object", "properties": {"n": {}}, "required": ["n"]}),
            "handler.py": ECHO,
        },
    )
    env = await run_skill(skills_root, "req0", {"n": value})
    assert env["ok"] is True and env["got"]["n"] == value


@pytest.mark.spec("§3.1")
async def test_missing_required_key(make_skill, skills_root):
    """Spec §3.1: '缺字段 ... 都判为未提供'."""
    make_skill("req1", files={"schema.json": json.dumps(SCHEMA_WHO), "handler.py": ECHO})
    env = await run_skill(skills_root, "req1", {})
    assert env["ok"] is False and env["need_param"] == "who"
    assert "Who to greet" in env["error"]  # docs: 'it names the field and quotes its `description`'


async def test_type_error_names_field(make_skill, skills_root):
    """Issue: 'A failed validation returns a recoverable failure envelope with `need_param` set to the field'."""
    make_skill(
        "typ",
        files={
            "schema.json": json.dumps({"type": "object", "properties": {"count": {"type": "integer"}}}),
            "handler.py": ECHO,
        },
    )
    env = await run_skill(skills_root, "typ", {"count": "abc"})
    assert env["ok"] is False and env["need_param"] == "count" and env["error_type"] == "recoverable"
    assert "count" in env["error"]


async def test_nested_type_error_names_field(make_skill, skills_root):
    """Issue: '`need_param` set to the field'."""
    schema = {
        "type": "object",
        "properties": {"opts": {"type": "object", "properties": {"depth": {"type": "integer"}}}},
    }
    make_skill("nest", files={"schema.json": json.dumps(schema), "handler.py": ECHO})
    env = await run_skill(skills_root, "nest", {"opts": {"depth": "deep"}})
    assert env["ok"] is False and env["need_param"] in ("opts", "opts.depth", "depth")


@pytest.mark.spec("§3.1")
async def test_defaults_not_filled_in(make_skill, skills_root):
    """docs/authoring.md: 'Defaults are not filled in.' Spec §3.1: '不会静默补默认值'."""
    make_skill(
        "dflt",
        files={
            "schema.json": json.dumps({"type": "object", "properties": {"limit": {"type": "integer", "default": 100}}}),
            "handler.py": ECHO,
        },
    )
    env = await run_skill(skills_root, "dflt", {})
    assert env["got"] == {}


async def test_credential_input_ignored_and_filled_from_configs(make_skill, skills_root):
    """Issue: 'filled from configs at run time, and a value passed in the input for them is ignored'."""
    # the key comes back reversed: the platform masks the run's credentials in its result
    reversed_key = "async def execute(i, ctx):\n    return {'got': {**i, 'api_key': i['api_key'][::-1]}}\n"
    make_skill("cred2", files={"schema.json": json.dumps(CRED_SCHEMA), "handler.py": reversed_key})
    env = await run_skill(
        skills_root,
        "cred2",
        {"q": "x", "api_key": "from-model", "plain": "model"},
        skill_configs={"api_key": "from-config"},
    )
    assert env["ok"] is True
    assert env["got"]["api_key"][::-1] == "from-config" and env["got"].get("plain") != "model"


async def test_fan_out_call_restores_subcommand_and_validates(make_skill, skills_root):
    """Issue: 'a call is restored to the skill with `input["_subcommand"]` and validated against that subcommand's
    schema'."""
    make_skill("notes", frontmatter=NOTES_FM, files={"handler.py": ECHO})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        ok = await yard.run("notes__add", {"text": "hi"})
        bad = await yard.run("notes__add", {})
        lst = await yard.run("notes__list", {})
    assert ok["ok"] is True and ok["got"] == {"text": "hi", "_subcommand": "add"}
    assert bad["ok"] is False and bad["need_param"] == "text"
    assert lst["ok"] is True and lst["got"]["_subcommand"] == "list"


@pytest.mark.parametrize("bad_input", [[1, 2], "text", 7, b"bytes"])
async def test_run_non_mapping_input_is_clear(echo_root, bad_input):
    """Issue: 'A failed validation returns a recoverable failure envelope ... without running the skill.' A
    non-object input is not a valid input."""
    async with yard_of(echo_root) as yard:
        out = await run_or_error(yard.run("echo", bad_input))
    if isinstance(out, dict):
        assert out.get("error_type") in ("recoverable", None, "config")


async def test_run_fanout_validates_subcommand_schema(echo_root):
    """Issue: 'a call is restored to the skill with `input["_subcommand"]` and validated against that subcommand's
    schema'."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("notes__add", {})
    assert_failure(env)
    assert env["need_param"] == "text" and env["error_type"] == "recoverable"
