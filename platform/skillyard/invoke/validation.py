"""The jsonschema validator of a skill's input, made safe for untrusted schemas and untrusted input.

jsonschema matches ``pattern``, ``patternProperties`` (and ``additionalProperties`` next to them) with Python's
backtracking ``re``: one catastrophic pattern in a dropped-in schema, fed a crafted string by a model, held the event
loop, and so every other run, for half a minute. Here those keywords match with the ``regex`` package under a
time limit (same syntax and semantics as ``re``, which jsonschema uses): a match that takes longer stops the whole
validation with :class:`PatternTimeout`, so a large input cannot add one limit per field. References never leave the
schema (the catalog refuses any other at load time; the registry here retrieves nothing either).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
import regex
from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.exceptions import NoSuchResource

#: Seconds one pattern may take to match one value.
PATTERN_TIMEOUT = 0.25


class PatternTimeout(Exception):
    """A schema pattern took longer than PATTERN_TIMEOUT on a value: the input is refused, not validated further."""

    def __init__(self, pattern: str) -> None:
        super().__init__(pattern)
        self.pattern = pattern


def _search(pattern: str, text: str) -> bool:
    try:
        return regex.search(pattern, text, timeout=PATTERN_TIMEOUT) is not None
    except TimeoutError:
        raise PatternTimeout(pattern) from None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in properties and not any(_search(p, k) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        names = ", ".join(repr(e) for e in sorted(extras, key=str))
        if patterns:
            yield ValidationError(f"{names} do{'es' if len(extras) == 1 else ''} not match any of the regexes")
        else:
            yield ValidationError(
                f"Additional properties are not allowed ({names} {'was' if len(extras) == 1 else 'were'} unexpected)"
            )


def _retrieve_nothing(uri: str) -> Any:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class mypy reads without its fields


_REGISTRY: Registry[Any] = Registry(retrieve=_retrieve_nothing)  # type: ignore[call-arg]
_SAFE_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}
_classes: dict[type[Any], type[Any]] = {}


def first_error(validator: Any, data: Any) -> tuple[ValidationError | None, str | None]:
    """The most telling validation error of ``data`` (None when valid), or why it could not be validated at all."""
    try:
        if validator.is_valid(data):
            return None, None
        return jsonschema.exceptions.best_match(validator.iter_errors(data)), None
    except RecursionError:
        return None, "the input is nested too deeply to validate; send flatter data"
    except PatternTimeout as exc:
        return None, (
            f"the input could not be validated: matching the schema's pattern {exc.pattern!r} took longer than "
            f"{PATTERN_TIMEOUT:g} s on one of its values; send a shorter or simpler value"
        )


def input_validator(schema: Mapping[str, Any]) -> Any:
    """A validator for ``schema`` of the draft it declares, with the time-limited regex keywords."""
    base = jsonschema.validators.validator_for(schema)
    safe = _classes.get(base)
    if safe is None:
        safe = _classes[base] = jsonschema.validators.extend(base, _SAFE_KEYWORDS)  # type: ignore[no-untyped-call]
    return safe(schema, registry=_REGISTRY)
