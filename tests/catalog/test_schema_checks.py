"""Unsafe input schemas are that skill's load error, never the host's problem (catalog/schema_checks.py)."""

from __future__ import annotations

import json
import time

import pytest

from skillyard import SkillYard
from skillyard.catalog.validate import validate_paths

HANDLER = {"handler.py": "async def execute(input, ctx):\n    return {'got': input}\n"}


def schema_skill(make_skill, name: str, schema: object, raw: str | None = None) -> None:
    make_skill(name, files={**HANDLER, "schema.json": raw if raw is not None else json.dumps(schema)})


def deep_schema(levels: int) -> str:
    """schema.json text of objects nested ``levels`` deep (built as text: json.dumps would recurse too deep)."""
    return '{"type": "object", "properties": {"x": ' * levels + "{}" + "}}" * levels


async def _loaded(skills_root, name: str):
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        entries = {e.skill.name: e for e in yard.entries}
        good = await yard.run("good", {"text": "hi"})
        bad = await yard.run(name, {})
    return entries, good, bad


@pytest.mark.parametrize(
    ("schema", "raw", "message"),
    [
        (None, deep_schema(40), "nested more than 64 levels deep"),
        (None, deep_schema(3000), "nested too deeply to read"),
        (None, "[" * 100_000 + "]" * 100_000, "nested too deeply to read"),
        ({"type": "object", "properties": {"p": {"$ref": "file:///etc/passwd"}}}, None, "leads outside the schema"),
        ({"type": "object", "properties": {"p": {"$ref": "http://127.0.0.1:9/s.json"}}}, None, "files, URLs"),
        ({"type": "object", "properties": {"p": {"$ref": "other.json#/x"}}}, None, "leads outside the schema"),
        ({"type": "object", "properties": {"p": {"$ref": "#/$defs/missing"}}}, None, "names nothing"),
        ({"$ref": "#"}, None, "$ref loop"),
        (
            {
                "type": "object",
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
                "properties": {"p": {"$ref": "#/$defs/a"}},
            },
            None,
            "$ref loop",
        ),
    ],
    ids=["deep", "deeper", "deep-json", "file-ref", "http-ref", "other-doc", "dangling", "self-loop", "mutual-loop"],
)
async def test_an_unsafe_schema_is_that_skills_load_error_only(make_skill, skills_root, schema, raw, message):
    schema_skill(make_skill, "good", {"type": "object", "properties": {"text": {"type": "string"}}})
    schema_skill(make_skill, "bad", schema, raw)
    entries, good, bad = await _loaded(skills_root, "bad")
    assert message in (entries["bad"].skill.error or "")
    assert good["ok"] is True and good["got"] == {"text": "hi"}
    assert bad["ok"] is False and bad["error_type"] == "config" and message in bad["error"]
    [report] = [r for r in validate_paths([skills_root / "bad"])]
    assert any(message in e for e in report["errors"])


async def test_a_recursive_schema_that_descends_is_fine(make_skill, skills_root):
    tree = {
        "type": "object",
        "$defs": {
            "node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
        },
        "properties": {
            "root": {"$ref": "#/$defs/node"},
            "tag": {"$anchor": "tagged", "type": "string"},
            "t2": {"$ref": "#tagged"},
        },
    }
    schema_skill(make_skill, "tree", tree)
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert yard.skill("tree").error is None
        ok = await yard.run("tree", {"root": {"children": [{"children": []}]}, "t2": "x"})
        refused = await yard.run("tree", {"root": {"children": [1]}})
    assert ok["ok"] is True
    assert refused["ok"] is False and refused["invalid_input"] is True


async def test_a_catastrophic_pattern_is_stopped_and_the_input_refused(make_skill, skills_root):
    pattern = {"type": "string", "pattern": "^(a|a)*$"}
    schema_skill(make_skill, "redos", {"type": "object", "properties": {"s": pattern}})
    evil = "a" * 40 + "!"
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        started = time.monotonic()
        envelope = await yard.run("redos", {"s": evil})
        elapsed = time.monotonic() - started
        fine = await yard.run("redos", {"s": "aaa"})
    assert envelope["ok"] is False and envelope["invalid_input"] is True
    assert "took longer than 0.25 s" in envelope["error"] and "^(a|a)*$" in envelope["error"]
    assert elapsed < 5  # 33 s before (40 a's: far more)
    assert fine["ok"] is True


async def test_pattern_properties_and_additional_properties_are_time_limited_too(make_skill, skills_root):
    schema = {"type": "object", "patternProperties": {"^(b|b)*$": {"type": "string"}}, "additionalProperties": False}
    schema_skill(make_skill, "keys", schema)
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        slow = await yard.run("keys", {"b" * 40 + "!": "x"})
        extra = await yard.run("keys", {"zzz": "x"})
        matched = await yard.run("keys", {"bbb": "x"})
    assert slow["ok"] is False and "took longer than" in slow["error"]
    assert (extra["ok"] is False and "do not match any of the regexes" in extra["error"]) or "does not match" in extra[
        "error"
    ]
    assert matched["ok"] is True


async def test_an_input_nested_too_deeply_is_refused_before_any_step_reads_it(make_skill, skills_root):
    schema_skill(make_skill, "open", {"type": "object", "properties": {"data": {}}})
    deep: dict = {}
    node = deep
    for _ in range(100_000):
        node["a"] = {}
        node = node["a"]
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        envelope = await yard.run("open", {"data": deep})
        fine = await yard.run("open", {"data": {"a": {"b": [1, [2, [3]]]}}})
    assert envelope["ok"] is False and envelope["invalid_input"] is True
    assert "nested more than 64 levels deep" in envelope["error"]
    assert fine["ok"] is True
