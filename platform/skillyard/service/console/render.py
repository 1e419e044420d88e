"""What the console's templates need: markdown rendered safely (raw HTML off, markdown-it's link check), and the
fields of a run form read from a skill's input schema."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def markdown(text: Any) -> Markup:
    """``display_md`` as HTML: raw HTML in it is shown as text, javascript: links are not links."""
    return Markup(_MD.render(str(text or "")))


@dataclass(frozen=True)
class FormField:
    name: str
    kind: str  # text | textarea | number | integer | checkbox | select | json
    label: str
    description: str = ""
    required: bool = False
    choices: list[str] = field(default_factory=list)
    default: str = ""


def form_fields(schema: dict[str, Any]) -> list[FormField]:
    """One field per top-level property of an object schema (nested objects and arrays as JSON text)."""
    required = set(schema.get("required") or [])
    fields = []
    for name, spec in (schema.get("properties") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        kind_of = spec.get("type")
        kind = {"string": "text", "number": "number", "integer": "integer", "boolean": "checkbox"}.get(
            kind_of if isinstance(kind_of, str) else "", "json"
        )
        if spec.get("enum"):
            kind = "select"
        if kind == "text" and (spec.get("format") == "textarea" or spec.get("maxLength", 0) > 200):
            kind = "textarea"
        default = spec.get("default")
        fields.append(
            FormField(
                name=name,
                kind=kind,
                label=str(spec.get("title") or name),
                description=str(spec.get("description") or ""),
                required=name in required,
                choices=[str(c) for c in spec.get("enum") or []],
                default="" if default is None else (default if isinstance(default, str) else json.dumps(default)),
            )
        )
    return fields


class FormError(ValueError):
    pass


def input_from_form(fields: list[FormField], form: dict[str, str]) -> dict[str, Any]:
    """The skill's input from a submitted form, typed by the schema; FormError naming the field otherwise."""
    value: dict[str, Any] = {}
    for item in fields:
        raw = form.get(item.name, "")
        if item.kind == "checkbox":
            if item.name in form:
                value[item.name] = raw not in ("", "off", "false")
            continue
        if raw == "":
            continue
        if item.kind in ("number", "integer"):
            try:
                value[item.name] = int(raw) if item.kind == "integer" else float(raw)
            except ValueError:
                raise FormError(f"{item.label}: {raw!r} is not a number") from None
        elif item.kind == "json":
            try:
                value[item.name] = json.loads(raw)
            except ValueError:
                raise FormError(f"{item.label}: not JSON ({raw[:40]!r})") from None
            except RecursionError:
                raise FormError(f"{item.label}: JSON nested too deeply to read; send flatter JSON") from None
        else:
            value[item.name] = raw
    return value
