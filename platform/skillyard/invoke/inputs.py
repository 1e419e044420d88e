"""Preparing a skill's input: subcommand restore, credential handling and schema validation (§3.1, §3.2, §5.2)."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..envelope import input_rejected, is_empty
from .fastcheck import FastCheck, compile_fast_check

if TYPE_CHECKING:
    from ..catalog.skill import Skill

SUBCOMMAND = "_subcommand"
_validators: weakref.WeakKeyDictionary[Skill, dict[str | None, tuple[Any, FastCheck | None]]] = (
    weakref.WeakKeyDictionary()
)


def _validator(skill: Skill, sub: str | None) -> tuple[Any, FastCheck | None]:
    """The jsonschema validator of a skill (or subcommand) and its fast path, built once per Skill."""
    per_skill = _validators.setdefault(skill, {})
    if sub not in per_skill:
        from .validation import input_validator  # here, once per skill: the CLI imports this module's importers

        schema = skill.schema.subcommands[sub] if sub else skill.schema.exposed
        per_skill[sub] = (input_validator(schema), compile_fast_check(schema))
    return per_skill[sub]


def _describe(schema: Mapping[str, Any], name: str) -> str:
    prop = (schema.get("properties") or {}).get(name)
    desc = prop.get("description") if isinstance(prop, dict) else None
    return f" ({desc})" if isinstance(desc, str) and desc else ""


def prepare_input(
    skill: Skill, sub: str | None, input: Mapping[str, Any], configs: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The input the skill will get, or a recoverable failure envelope that says what to fix."""
    data = dict(input)
    subs = skill.schema.subcommands
    if subs:
        sub = sub or data.get(SUBCOMMAND)
        if sub not in subs:
            return data, input_rejected(
                skill.name,
                f"skill {skill.name!r} needs a subcommand: pass {SUBCOMMAND} as one of "
                f"{', '.join(sorted(subs))} (or call the tool {skill.name}__<subcommand>)",
                SUBCOMMAND,
            )
        data[SUBCOMMAND] = sub
    schema = subs[sub] if subs and sub else skill.schema.exposed
    for name in skill.schema.secret_params:
        data.pop(name, None)  # credentials come from configs, never from the caller
    for name in schema.get("required") or []:
        if is_empty(data.get(name)):
            return data, input_rejected(
                skill.name,
                f"input field {name!r} is required and was missing or empty{_describe(schema, name)}; "
                f"call {skill.name!r} again with a value for {name!r}",
                name,
            )
    validator, fast = _validator(skill, sub if subs else None)
    checked = {k: v for k, v in data.items() if k != SUBCOMMAND} if SUBCOMMAND in data else data
    if fast is not None and fast(checked):
        error = None
    else:
        from .validation import first_error  # loaded with the validator

        error, problem = first_error(validator, checked)
        if problem:
            return data, input_rejected(skill.name, problem, "")
    if error is not None:
        field = next((str(p) for p in error.absolute_path), None)
        if field is None and error.validator in ("required", "additionalProperties") and "'" in error.message:
            field = str(error.message).split("'")[1]  # the missing or unexpected property
        where = f"input field {field!r}" if field else "the input"
        return data, input_rejected(
            skill.name,
            f"{where} is invalid: {error.message}{_describe(schema, field or '')}; fix it and call again",
            field or "",
        )
    for name in skill.schema.secret_params:
        if name in configs and not is_empty(configs[name]):
            data[name] = configs[name]
    return data, None
