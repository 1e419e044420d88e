"""Input schemas (§3.1, §3.2, §5.2, catalog/schema.py): where they come from, the repairs providers need,
credentials removed from what models see, fan-out into subcommand tools."""

from __future__ import annotations

import json

import pytest

from skillyard.catalog.describe import describe_skill
from support.catalog import TOOL_RX
from support.cli import listing, one, show_json
from support.skills import CRED_SCHEMA, ECHO, INPUT_ECHO, NOTES_FM, OK_HANDLER, schema_json, yard_of


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


async def test_credentials_are_hidden_ignored_and_filled_from_configs(make_skill, skills_root):
    make_skill(
        "s",
        files={
            # the key comes back reversed: the platform masks the run's credentials in its result
            "handler.py": "async def execute(i, ctx):\n    return {'input': {**i, 'api_key': i['api_key'][::-1]}}\n",
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
    assert env["input"] == {"query": "q", "keyword": "k", "api_key": "from-config"[::-1]}


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


def test_schema_json_beats_the_input_schema_constant(make_skill, skills_root):
    """Issue: '`schema.json` beats a schema constant in the handler (`INPUT_SCHEMA`)'."""
    make_skill(
        "sj",
        files={
            "schema.json": json.dumps({"type": "object", "properties": {"from_file": {"type": "string"}}}),
            "handler.py": "INPUT_SCHEMA = {'type': 'object', 'properties': {'from_code': {'type': 'string'}}}\n"
            + OK_HANDLER,
        },
    )
    assert set(show_json(skills_root, "sj")["input_schema"]["properties"]) == {"from_file"}


@pytest.mark.spec("§3.1")
def test_input_schema_constant_used(make_skill, skills_root):
    """Spec §3.1: '放 schema.json 或代码内常量'."""
    make_skill(
        "isc",
        files={
            "handler.py": "INPUT_SCHEMA = {'type': 'object', 'properties': {'c': {'type': 'integer'}}}\n" + OK_HANDLER
        },
    )
    assert set(show_json(skills_root, "isc")["input_schema"]["properties"]) == {"c"}


def test_bare_string_property_repaired_with_warning(make_skill, skills_root):
    """Issue: 'bare-string property values are repaired (`"symbol": "string"` → `{"type": "string"}`) with a
    warning'."""
    make_skill(
        "bare",
        files={"schema.json": json.dumps({"type": "object", "properties": {"symbol": "string"}}), "handler.py": ECHO},
    )
    info = show_json(skills_root, "bare")
    assert info["input_schema"]["properties"]["symbol"] == {"type": "string"} and info["warnings"]
    assert info["error"] is None


def test_broken_schema_json_is_an_error(make_skill, skills_root):
    """docs/authoring.md: 'A broken `schema.json` is an error, never silently ignored.'"""
    make_skill("brk", files={"schema.json": "{not json", "handler.py": OK_HANDLER})
    assert one(listing(skills_root), "brk")["error"]


@pytest.mark.spec("§3.1")
@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": 5}},
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": "maybe"},
        {"type": "object", "properties": {"a": {"type": "array", "items": 3}}},
        {"type": "object", "properties": {"a": {"type": "strng"}}},
    ],
)
def test_invalid_schema_shapes_repaired_or_error(make_skill, skills_root, schema):
    """Issue: 'Schemas are checked against the JSON Schema meta-schema; shapes that providers reject (`properties`
    values that are not objects, `additionalProperties`/`items` that are neither boolean nor object) are repaired
    with a warning or reported as the skill's error (§3.1).'"""
    make_skill("shape", files={"schema.json": json.dumps(schema), "handler.py": OK_HANDLER})
    info = show_json(skills_root, "shape")
    if info["error"] is None:
        assert info["warnings"]
        from jsonschema.validators import Draft202012Validator

        Draft202012Validator.check_schema(info["input_schema"])
        exposed = info["input_schema"]
        for prop in exposed.get("properties", {}).values():
            assert isinstance(prop, dict)
            assert isinstance(prop.get("items", {}), (dict, bool))
        assert isinstance(exposed.get("additionalProperties", True), (dict, bool))


def test_schema_not_object_is_error(make_skill, skills_root):
    """Issue: 'Schemas are checked against the JSON Schema meta-schema'."""
    make_skill("arr", files={"schema.json": json.dumps([1, 2]), "handler.py": OK_HANDLER})
    assert one(listing(skills_root), "arr")["error"]


@pytest.mark.spec("§5.2")
def test_credentials_removed_from_exposed_schema(make_skill, skills_root):
    """Issue: 'Parameters whose name contains key/token/secret/password/credential/auth (substring, case-insensitive,
    §5.2) are credentials: removed from the schema exposed to models (`skillyard show --json` prints the exposed
    schema)' and '`"x-secret": false` to stay an ordinary parameter (or `true` to force credential treatment)'."""
    make_skill("cred", files={"schema.json": json.dumps(CRED_SCHEMA), "handler.py": ECHO})
    info = show_json(skills_root, "cred")
    props = set(info["input_schema"]["properties"])
    assert props == {"q", "author", "max_tokens"}
    assert info["input_schema"].get("required") == ["q"]
    assert set(info["secret_params"]) == {"api_key", "Password", "keyword", "plain"}
    assert set(info["tools"][0]["input_schema"]["properties"]) == props


def test_fan_out_tool_names_and_subschemas(make_skill, skills_root):
    """Issue: '`cli_commands` with 1–45 entries fan out into tools `<skill>__<sub>`'; show: '`tool_names` (with fan-out
    and each subcommand's schema)'."""
    make_skill("notes", frontmatter=NOTES_FM, files={"handler.py": ECHO})
    info = show_json(skills_root, "notes")
    assert sorted(info["tool_names"]) == ["notes__add", "notes__list"]
    tools = {t["name"]: t for t in info["tools"]}
    assert tools["notes__add"]["input_schema"]["required"] == ["text"]
    assert all(TOOL_RX.match(t) for t in info["tool_names"])


def test_more_than_45_subcommands_not_fanned_out(make_skill, skills_root):
    """Issue: '`cli_commands` with 1–45 entries fan out'; decisions: 'more are not fanned out (warning)'."""
    subs = "\n".join(f"  s{i}: {{}}" for i in range(46))
    make_skill("many", frontmatter=f"name: many\ndescription: d\ncli_commands:\n{subs}", files={"handler.py": ECHO})
    item = one(listing(skills_root), "many")
    assert item["tool_names"] == ["many"] and item["warnings"]


def test_exactly_45_subcommands_fan_out(make_skill, skills_root):
    """Issue: '`cli_commands` with 1–45 entries fan out into tools'."""
    subs = "\n".join(f"  s{i}: {{}}" for i in range(45))
    make_skill("many45", frontmatter=f"name: many45\ndescription: d\ncli_commands:\n{subs}", files={"handler.py": ECHO})
    assert len(one(listing(skills_root), "many45")["tool_names"]) == 45
