"""Input schemas: where they come from, the repairs providers need, credential stripping and fan-out (§3, §5.2)."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..credentials import looks_secret
from ..envelope import MAX_NESTING, nesting_problem
from .schema_checks import reference_problem

MAX_FANOUT = 45
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class SchemaInfo:
    """A skill's schema as declared (repaired), as exposed to models, and what the secret rule matched."""

    full: dict[str, Any]
    exposed: dict[str, Any]
    secret_params: tuple[str, ...]
    rule_matches: tuple[str, ...]
    subcommands: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    error: str | None = None


def _repair_properties(schema: dict[str, Any], where: str, warnings: list[str]) -> str | None:
    """Fix bare-string property values; return an error for shapes providers reject."""
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        return f"{where}: 'properties' must be an object mapping names to schemas"
    for name, value in list(props.items()):
        if isinstance(value, str):
            props[name] = {"type": value}
            warnings.append(f'{where}: property {name!r} was the bare string "{value}"; read as {{"type": "{value}"}}')
        elif not isinstance(value, dict):
            return f"{where}: property {name!r} must be a schema object, not {type(value).__name__}"
        else:
            err = _repair_properties(value, f"{where}.{name}", warnings)
            if err:
                return err
    for key in ("additionalProperties", "items"):
        value = schema.get(key)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, dict):
            err = _repair_properties(value, f"{where}.{key}", warnings)
            if err:
                return err
            continue
        if isinstance(value, str) and value.lower() in ("true", "false"):
            schema[key] = value.lower() == "true"
            warnings.append(f"{where}: {key} was the string {value!r}; read as a boolean")
        else:
            return f"{where}: '{key}' must be a boolean or a schema object, not {type(value).__name__}"
    return None


_TYPE_NAMES = frozenset({"string", "integer", "number", "boolean", "array", "object", "null"})
_PROP_TEXT = ("description", "title", "format", "$comment")
_PROP_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_PROP_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_PROP_KEYS = frozenset({"type", "default", "examples", "enum", "pattern", *_PROP_TEXT, *_PROP_NUMBERS, *_PROP_COUNTS})


def _plainly_valid(schema: dict[str, Any]) -> bool:
    """True for flat object schemas that are valid JSON Schema by construction.

    Checking a schema against the meta-schema costs about a millisecond, most of cold discovery; the flat shape
    most tools declare is recognised here instead, and everything else goes through ``check_schema``.
    """
    if set(schema) - {"type", "properties", "required", "additionalProperties", "title", "description"}:
        return False
    required = schema.get("required", [])
    if schema.get("type") != "object" or not isinstance(schema.get("additionalProperties", True), bool):
        return False
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return False
    if len(set(required)) != len(required) or not _texts(schema, ("title", "description")):
        return False
    return all(_plain_property(p) for p in schema["properties"].values())


def _texts(node: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return all(isinstance(node[k], str) for k in keys if k in node)


def _plain_property(prop: Any) -> bool:
    if not isinstance(prop, dict):
        return False
    if any(k not in _PROP_KEYS and not k.startswith("x-") for k in prop):
        return False
    for key in _PROP_NUMBERS:
        if key in prop and (isinstance(prop[key], bool) or not isinstance(prop[key], (int, float))):
            return False
    for key in _PROP_COUNTS:
        if key in prop and (isinstance(prop[key], bool) or not isinstance(prop[key], int) or prop[key] < 0):
            return False
    if "pattern" in prop:
        try:
            re.compile(prop["pattern"])
        except (re.error, TypeError):
            return False
    kind = prop.get("type", "string")
    kinds = [kind] if isinstance(kind, str) else kind
    if not isinstance(kinds, list) or not kinds or len(set(map(str, kinds))) != len(kinds):
        return False
    if not all(k in _TYPE_NAMES for k in kinds):
        return False
    return (
        isinstance(prop.get("examples", []), list)
        and isinstance(prop.get("enum", []), list)
        and _texts(prop, _PROP_TEXT)
    )


def _normalize(schema: Any, where: str, warnings: list[str], owned: bool = False) -> tuple[dict[str, Any], str | None]:
    """Repair and check a schema; ``owned`` says it was just read from a file, so repairs need no copy."""
    if not isinstance(schema, dict):
        return copy.deepcopy(EMPTY_SCHEMA), f"{where}: the input schema must be a JSON object"
    too_deep = nesting_problem(schema)  # before anything recursive reads it
    if too_deep:
        return copy.deepcopy(EMPTY_SCHEMA), f"{where}: {too_deep}"
    if not owned:
        schema = copy.deepcopy(schema)
    schema.setdefault("type", "object")
    if "properties" not in schema:
        schema["properties"] = {}
    error = _repair_properties(schema, where, warnings)
    if error is None and not _plainly_valid(schema):  # a flat schema has no $ref and is valid by construction
        problem = schema_problem(json.dumps(schema, sort_keys=True, default=str))
        error = f"{where}: {problem}" if problem else None
    return schema, error


@functools.lru_cache(maxsize=1024)
def schema_problem(text: str) -> str | None:
    """What is wrong with a schema (given as its JSON text): the meta-schema check, then its references. Checked once
    per distinct schema in a process: the check costs about 20 ms, and every SkillYard reads the built-in skills."""
    import jsonschema  # only here: listing skills needs it, importing the plugins does not

    schema = json.loads(text)
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        path = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return f"not a valid JSON Schema at {path}: {exc.message}"
    return reference_problem(schema)


def _secret_params(schema: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(credential parameters, every parameter the substring rule matched)."""
    secrets, matched = [], []
    for name, prop in (schema.get("properties") or {}).items():
        flag = prop.get("x-secret") if isinstance(prop, dict) else None
        if looks_secret(name):
            matched.append(name)
        if flag is True or (flag is None and looks_secret(name)):
            secrets.append(name)
    return secrets, matched


def expose(schema: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
    """The schema models see: credential parameters removed from properties and required (a new dict; the
    property schemas themselves are shared, schemas are never mutated after discovery)."""
    exposed = dict(schema)
    if secrets:
        exposed["properties"] = {k: v for k, v in (schema.get("properties") or {}).items() if k not in secrets}
        if isinstance(schema.get("required"), list):
            exposed["required"] = [r for r in schema["required"] if r not in secrets]
    return exposed


def load_schema_file(path: Path) -> tuple[Any, str | None]:
    """Read ``schema.json``; a broken file is reported, never ignored."""
    try:
        return json.loads(path.read_text(encoding="utf-8-sig")), None
    except OSError as exc:
        return None, f"cannot read {path.name}: {exc.strerror}"
    except ValueError as exc:
        return None, f"{path.name} is not valid JSON: {exc}"
    except RecursionError:
        return None, f"{path.name} is nested too deeply to read (more than {MAX_NESTING} levels); flatten it"


def build_schema_info(
    skill_dir: Path, code_schema: dict[str, Any] | None, meta: Mapping[str, Any], has_schema_file: bool | None = None
) -> SchemaInfo:
    """schema.json beats the handler's INPUT_SCHEMA, which beats frontmatter ``input_schema``."""
    warnings: list[str] = []
    errors: list[str] = []
    raw: Any = None
    schema_file = skill_dir / "schema.json"
    if has_schema_file if has_schema_file is not None else schema_file.is_file():
        raw, err = load_schema_file(schema_file)
        if err:
            errors.append(err)
    owned = raw is not None
    if raw is None:
        raw = code_schema if code_schema is not None else meta.get("input_schema")
    if raw is None and not errors and meta.get("cli_commands") is None:
        return _NO_SCHEMA  # most skill_md skills: nothing to read, repair or check
    schema, err = _normalize(raw if raw is not None else EMPTY_SCHEMA, "input schema", warnings, owned)
    if err:
        errors.append(err)
    secrets, matched = _secret_params(schema)
    subcommands: dict[str, dict[str, Any]] = {}
    commands = meta.get("cli_commands")
    if isinstance(commands, dict) and commands:
        if len(commands) > MAX_FANOUT:
            warnings.append(f"cli_commands has {len(commands)} entries (more than {MAX_FANOUT}): not fanned out")
        else:
            for sub, sub_schema in commands.items():
                normalized, sub_err = _normalize(
                    sub_schema if isinstance(sub_schema, dict) else EMPTY_SCHEMA,
                    f"cli_commands.{sub}",
                    warnings,
                )
                if sub_err:
                    errors.append(sub_err)
                sub_secrets, sub_matched = _secret_params(normalized)
                secrets += [s for s in sub_secrets if s not in secrets]
                matched += [m for m in sub_matched if m not in matched]
                subcommands[str(sub)] = normalized
    elif commands is not None and not isinstance(commands, dict):
        warnings.append("cli_commands must be a mapping of subcommand to schema; ignored")
    return SchemaInfo(
        full=schema,
        exposed=expose(schema, secrets),
        secret_params=tuple(secrets),
        rule_matches=tuple(matched),
        subcommands={k: expose(v, secrets) for k, v in subcommands.items()},
        warnings=tuple(warnings),
        error="; ".join(errors) or None,
    )


#: The schema of a skill that declares none; shared (schemas are never mutated after discovery).
_NO_SCHEMA = SchemaInfo(full=EMPTY_SCHEMA, exposed=EMPTY_SCHEMA, secret_params=(), rule_matches=())
