"""Stage 7 (§13 Evidence, §6.3): extracts with counts, the empty flag, and entities for the session index."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..context import NodeContext
from ..contract import EntitySpec, Extract
from ..paths import get_path, has_value
from ..state import Entity, Evidence
from .plan import ToolPlan
from .response import is_empty_response


def count(extract: Extract, value: Any) -> int:
    """§6.3: a list counts its items; an object 1 when any of ``fields`` (or, without fields, anything) has a
    value; a scalar 1 when it has a value."""
    if isinstance(value, list):
        return len(value)
    if type(value) is dict or isinstance(value, Mapping):
        if extract.fields:
            return int(any(has_value(get_path(value, f)[1]) for f in extract.fields))
        return int(has_value(dict(value)))
    return int(has_value(value))


def _simple(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def make_entities(spec: EntitySpec, value: Any, base: Mapping[str, Any] | None, task_id: str) -> list[Entity]:
    """One entity per object (or list item); a scalar becomes ``{scalar: value}`` when ``scalar`` is set.
    ``base`` (a write's arguments) is merged under the returned object: the result wins."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, Mapping):
            record = dict(item)
        elif _simple(item) and spec.scalar and has_value(item):
            record = {spec.scalar: item}
        else:
            continue
        if base is not None:
            record = {**base, **record}
        ident = record.get(spec.id)
        if not has_value(ident) or not _simple(ident):
            continue
        name = record.get(spec.name)
        attrs = {k: v for k, v in record.items() if _simple(v) and k not in (spec.id,)}
        out.append(
            Entity(
                type=spec.type,
                id=str(ident),
                name=None if name is None else str(name),
                attrs=attrs,
                task_id=task_id,
            )
        )
    return out


def remember(ctx: NodeContext, entities: list[Entity]) -> None:
    """Add entities to the session index; a known (type, id) moves to the newest place with the new values."""
    for entity in entities:
        ctx.session.entities[:] = [e for e in ctx.session.entities if not (e.type == entity.type and e.id == entity.id)]
        ctx.session.entities.append(entity)


def fill(ctx: NodeContext, plan: ToolPlan, evidence: Evidence, root: Any = None) -> None:
    """Extracts, counts, ``empty`` and entities of a call whose business succeeded; ``root`` is the view the paths
    read (an MCP tool's, :func:`~.invoke.result_root`), else the whole response."""
    response = evidence.response if root is None else root
    extracts = plan.extracts
    for key, extract in extracts:  # key: extract.key or extract.path
        found, value = get_path(response, extract.path)
        evidence.counts[key] = count(extract, value) if found else 0
        if found:
            evidence.extracts[key] = value
            if extract.entity is not None:
                base = evidence.args if evidence.write else None
                remember(ctx, make_entities(extract.entity, value, base, evidence.task_id))
    if extracts:
        evidence.empty = not any(evidence.counts.values())  # every count 0
    else:
        evidence.empty = is_empty_response(response)
