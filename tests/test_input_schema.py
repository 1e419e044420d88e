"""Input schemas (§3.1, §3.2, §5.2): sources, repairs, credentials, required-means-non-empty, fan-out."""

from __future__ import annotations

import json

import pytest

from skillyard.catalog.describe import describe_skill
from support.skills import INPUT_ECHO, schema_json, yard_of


def test_schema_json_beats_input_schema_constant(make_skill, skills_root):
    make_skill(
        "s",
        files={
            "handler.py": "INPUT_SCHEMA = {'type': 'object', 'properties': {'from_code': {'type': 'string'}}}\n"
            + INPUT_ECHO,
            "schema.json": schema_json({"from_file": {"type": "string"}}),
        },
    )
    make_skill(
        "c",
        files={
            "handler.py": "INPUT_SCHEMA = {'type': 'object', 'properties': {'from_code': {'type': 'string'}}}\n"
            + INPUT_ECHO,
        },
    )
    yard = yard_of(skills_root)
    assert list(yard.skill("s").schema.exposed["properties"]) == ["from_file"]
    assert list(yard.skill("c").schema.exposed["properties"]) == ["from_code"]


def test_bare_string_properties_are_repaired_with_a_warning(make_skill, skills_root):
    make_skill("s", files={"handler.py": INPUT_ECHO, "schema.json": schema_json({"symbol": "string"})})
    skill = yard_of(skills_root).skill("s")
    assert skill.schema.exposed["properties"]["symbol"] == {"type": "string"}
    assert any("bare string" in w for w in skill.warnings)
    assert skill.error is None


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "properties": {"x": 5}}, "must be a schema object"),
        ({"type": "object", "properties": {}, "additionalProperties": 3}, "boolean or a schema object"),
        (
            {"type": "object", "properties": {"x": {"type": "array", "items": "yes"}}},
            "boolean or a schema object",
        ),
        ({"type": "object", "properties": {"x": {"type": "strnig"}}}, "not a valid JSON Schema"),
    ],
)
def test_schemas_providers_reject_are_the_skills_error(make_skill, skills_root, schema, message):
    make_skill("s", files={"handler.py": INPUT_ECHO, "schema.json": json.dumps(schema)})
    skill = yard_of(skills_root).skill("s")
    assert skill.error and message in skill.error


def test_broken_schema_json_is_reported(make_skill, skills_root):
    make_skill("s", files={"handler.py": INPUT_ECHO, "schema.json": "{not json"})
    skill = yard_of(skills_root).skill("s")
    assert "schema.json is not valid JSON" in skill.error


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


async def test_credentials_are_hidden_ignored_and_filled_from_configs(make_skill, skills_root):
    make_skill(
        "s",
        files={
            "handler.py": INPUT_ECHO,
            "schema.json": schema_json(
                {
                    "api_key": {"type": "string"},
                    "AuthHeader": {"type": "string"},
                    "keyword": {"type": "string", "x-secret": False},
                    "max_tokens": {"type": "integer", "x-secret": False},
                    "region": {"type": "string", "x-secret": True},
                    "query": {"type": "string"},
                },
                ["api_key", "query"],
            ),
        },
    )
    async with yard_of(skills_root) as yard:
        skill = yard.skill("s")
        exposed = skill.schema.exposed
        assert set(exposed["properties"]) == {"keyword", "max_tokens", "query"}
        assert exposed["required"] == ["query"]
        assert set(skill.schema.secret_params) == {"api_key", "AuthHeader", "region"}
        info = describe_skill(next(e for e in yard.entries))
        assert set(info["input_schema"]["properties"]) == {"keyword", "max_tokens", "query"}
        env = await yard.run(
            "s",
            {"query": "q", "api_key": "from-model", "keyword": "k"},
            context={"skill_args": {"api_key": "from-config"}},
        )
    assert env["input"] == {"query": "q", "keyword": "k", "api_key": "from-config"}


def test_validate_lists_every_property_the_secret_rule_matched(make_skill, skills_root):
    from skillyard.catalog.validate import validate_paths

    make_skill(
        "s",
        files={
            "handler.py": INPUT_ECHO,
            "schema.json": schema_json(
                {
                    "confirm_token": {"type": "string", "x-secret": False},
                    "author": {"type": "string"},
                    "key_fields": {"type": "array"},
                    "plain": {"type": "string"},
                }
            ),
        },
    )
    report = validate_paths([skills_root])[0]
    matched = [w for w in report["warnings"] if "matches the credential rule" in w]
    assert len(matched) == 3
    assert any("confirm_token" in w and "ordinary parameter" in w for w in matched)
    assert any("author" in w and "treated as a credential" in w for w in matched)


async def test_cli_commands_fan_out_and_restore(make_skill, skills_root):
    make_skill(
        "git",
        frontmatter="""
        name: git
        description: git helper
        cli_commands:
          status: {type: object, properties: {short: {type: boolean}}}
          log:
            type: object
            properties: {n: {type: integer}}
            required: [n]
    """,
        files={"handler.py": INPUT_ECHO},
    )
    async with yard_of(skills_root) as yard:
        skill = yard.skill("git")
        assert set(skill.tool_names) == {"git__status", "git__log"}
        env = await yard.run("git__log", {"n": 3})
        assert env["input"] == {"n": 3, "_subcommand": "log"}
        bad = await yard.run("git__log", {})
        assert bad["need_param"] == "n"
        assert (await yard.run("git", {"_subcommand": "status"}))["ok"] is True
        none = await yard.run("git", {})
        assert none["need_param"] == "_subcommand" and "log" in none["error"]
        info = describe_skill(next(e for e in yard.entries))
        assert {t["name"]: t["subcommand"] for t in info["tools"]} == {
            "git__status": "status",
            "git__log": "log",
        }


def test_more_than_45_subcommands_do_not_fan_out(make_skill, skills_root):
    subs = "\n".join(f"  c{i}: {{type: object}}" for i in range(46))
    make_skill("big", frontmatter=f"name: big\ndescription: d\ncli_commands:\n{subs}", files={"handler.py": INPUT_ECHO})
    skill = yard_of(skills_root).skill("big")
    assert list(skill.tool_names) == ["big"]
    assert any("more than 45" in w for w in skill.warnings)


def test_plain_schema_shortcut_agrees_with_the_meta_schema():
    """Every schema the discovery shortcut accepts must pass jsonschema's own check_schema."""
    import itertools

    import jsonschema

    from skillyard.catalog.schema import _plainly_valid

    props = [
        {"type": "string"},
        {"type": ["string", "null"]},
        {"type": "strnig"},
        {"type": []},
        {"type": ["string", "string"]},
        {"description": 3},
        {"enum": "a"},
        {"enum": [1, 2]},
        {"x-secret": True},
        {"examples": "x"},
        {"default": {"a": 1}},
        {"format": "date"},
        {"items": {"type": "string"}},
        "string",
        5,
        {"minimum": 1, "maximum": 2.5},
        {"minimum": "1"},
        {"maximum": True},
        {"minLength": -1},
        {"maxItems": 1.5},
        {"minLength": 2},
        {"pattern": "^a+$"},
        {"pattern": "("},
        {"pattern": 5},
        {"exclusiveMinimum": 0},
    ]
    tops = [
        {},
        {"required": ["a"]},
        {"required": "a"},
        {"required": ["a", "a"]},
        {"additionalProperties": False},
        {"additionalProperties": "no"},
        {"description": 5},
        {"$schema": "x"},
    ]
    for prop, top in itertools.product(props, tops):
        schema = {"type": "object", "properties": {"a": prop}, **top}
        if _plainly_valid(schema):
            jsonschema.validators.validator_for(schema).check_schema(schema)
    assert _plainly_valid({"type": "object", "properties": {"a": {"type": "string", "description": "d"}}})
