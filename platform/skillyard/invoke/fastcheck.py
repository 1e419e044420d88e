"""A conservative fast path in front of jsonschema for the flat object schemas most tools declare.

Validating ``{"text": "hi"}`` with jsonschema costs more than the rest of an in-process run. For schemas made only
of ``type``/``properties``/``required``/``additionalProperties`` and annotations, a precompiled check answers
"valid" exactly when jsonschema would; whenever it cannot be sure it answers "ask jsonschema", which then decides
and builds the error message. It never declares invalid input valid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

ANNOTATIONS = frozenset(
    {"description", "title", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "$schema", "$id"}
)
_SIMPLE_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}

FastCheck = Callable[[Mapping[str, Any]], bool]


def _only_annotations(schema: Mapping[str, Any], also: frozenset[str]) -> bool:
    return all(k in ANNOTATIONS or k in also or k.startswith("x-") for k in schema)


def _type_test(prop: Any) -> Callable[[Any], bool] | None:
    if not isinstance(prop, Mapping) or not _only_annotations(prop, frozenset({"type"})):
        return None
    declared = prop.get("type")
    if declared is None:
        return lambda v: True
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list) or not names or any(n not in _SIMPLE_TYPES for n in names):
        return None
    tests = [_SIMPLE_TYPES[n] for n in names]
    return tests[0] if len(tests) == 1 else (lambda v: any(t(v) for t in tests))


def compile_fast_check(schema: Mapping[str, Any]) -> FastCheck | None:
    """A check for ``schema`` when it is simple enough, else None (always use jsonschema)."""
    if schema.get("type") != "object" or not _only_annotations(
        schema, frozenset({"type", "properties", "required", "additionalProperties"})
    ):
        return None
    extra = schema.get("additionalProperties", True)
    required = schema.get("required", [])
    props = schema.get("properties", {})
    if not isinstance(extra, bool) or not isinstance(required, list) or not isinstance(props, Mapping):
        return None
    tests = {}
    for name, prop in props.items():
        test = _type_test(prop)
        if test is None:
            return None
        tests[name] = test
    needed = tuple(required)

    def check(data: Mapping[str, Any]) -> bool:
        for name in needed:
            if name not in data:
                return False
        for key, value in data.items():
            test = tests.get(key)
            if test is None:
                if not extra:
                    return False
            elif not test(value):
                return False
        return True

    return check
