"""The jsonschema fast path (invoke/fastcheck.py) never accepts what jsonschema rejects (checked on a generated
corpus)."""

from __future__ import annotations

import itertools

import jsonschema
import pytest

from skillyard.invoke.fastcheck import compile_fast_check

SCHEMAS = [
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}},
    {"type": "object", "properties": {"b": {"type": "boolean", "description": "d"}}, "additionalProperties": False},
    {"type": "object", "properties": {"v": {"type": ["string", "null"]}, "l": {"type": "array"}, "o": {}}},
]

VALUES = ["s", "", 0, 1, -5, 1.5, 2.0, True, False, None, [], [1], {}, {"a": 1}]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_fast_valid_implies_jsonschema_valid(schema):
    check = compile_fast_check(schema)
    assert check is not None
    validator = jsonschema.Draft202012Validator(schema)
    keys = [*schema["properties"], "other"]
    for size in range(3):
        for names in itertools.combinations(keys, size):
            for values in itertools.product(VALUES, repeat=size):
                data = dict(zip(names, values, strict=True))
                if check(data):
                    assert validator.is_valid(data), (schema, data)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}},
        {"type": "object", "properties": {"e": {"enum": [1, 2]}}},
        {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": []},
        {"type": "array"},
    ],
)
def test_anything_richer_is_left_to_jsonschema(schema):
    assert compile_fast_check(schema) is None
