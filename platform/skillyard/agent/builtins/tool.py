"""A builtin tool: its definition, the call it answers (refusals with their §17 code) and its argument shapes.

A builtin handler receives the parsed arguments (a JSON object) and a :class:`Call`, and returns an
:class:`~skillyard.agent.state.Observation` made by ``call.ok(...)`` or ``call.refuse(code, message, next_step)``.
Every refusal carries the full ``agent_runtime.NNNNN`` code and a concrete next step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..codes import ErrorCode
from ..context import NodeContext
from ..state import Observation

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """One builtin call: the tool name, the arguments as the model sent them, and the model's call id."""

    name: str
    arguments: Any
    call_id: str | None = None

    def ok(self, content: Any) -> Observation:
        return Observation(tool=self.name, arguments=self.arguments, ok=True, content=content, call_id=self.call_id)

    def refuse(self, code: ErrorCode, message: str, next_step: str) -> Observation:
        return Observation(
            tool=self.name,
            arguments=self.arguments,
            ok=False,
            content=message,
            code=code.value,
            next_step=next_step,
            call_id=self.call_id,
        )


Handler = Callable[[NodeContext, JsonObject, Call], Awaitable[Observation]]


@dataclass(frozen=True)
class Builtin:
    """A builtin tool: its OpenAI function definition parts and its handler."""

    name: str
    description: str
    parameters: JsonObject
    handler: Handler

    def definition(self) -> JsonObject:
        """The OpenAI function definition (``{"type": "function", "function": {...}}``)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def params(properties: JsonObject | None = None, required: tuple[str, ...] = ()) -> JsonObject:
    """A JSON-schema object for a builtin's parameters."""
    schema: JsonObject = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = list(required)
    return schema


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def shape_problems(schema: JsonObject, args: JsonObject) -> list[str]:
    """What is wrong with ``args`` against a builtin's parameter schema (required keys, JSON types, enums).

    ``null`` counts as absent. Unknown keys are ignored. A property without ``type`` takes any JSON value.
    """
    problems = []
    properties: JsonObject = schema.get("properties", {})
    for key in schema.get("required", []):
        if args.get(key) is None:
            problems.append(f"'{key}' is required")
    for key, spec in properties.items():
        value = args.get(key)
        if value is None:
            continue
        kind = spec.get("type")
        if kind is not None and not _JSON_TYPES[kind](value):
            problems.append(f"'{key}' must be a JSON {kind}, not {type(value).__name__}")
            continue
        if "enum" in spec and value not in spec["enum"]:
            problems.append(f"'{key}' must be one of {', '.join(map(str, spec['enum']))}, not {value!r}")
        items = spec.get("items", {}).get("type")
        if kind == "array" and items is not None and not all(_JSON_TYPES[items](v) for v in value):
            problems.append(f"every item of '{key}' must be a JSON {items}")
    return problems


def text_arg(args: JsonObject, key: str) -> str:
    """A string argument, stripped; absent or null → ``""``."""
    value = args.get(key)
    return value.strip() if isinstance(value, str) else ""
