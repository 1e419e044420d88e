"""Resolving a §9 value expression against a running node: ``(found, value, source_type)``.

* ``inputs.<path>`` / ``outputs.<path>`` — the node's bound inputs / written outputs → ``NODE_OUTPUT``;
* ``shared.<path>`` / ``session.<path>`` — task / session shared values → ``SHARED`` / ``SESSION``;
* ``prior.<type>.<attr>`` / ``prior.<type:id>.<attr>`` — the newest entity of that type (or exactly that one);
  ``attr`` is ``id``, ``displayName`` (also ``name``) or an entity attribute → ``PRIOR_TASK``;
* ``platform.<field>`` — the caller's identity (§11) → ``PLATFORM``;
* ``evidence.<key>[.<path>]`` — the visible evidence that succeeded (empty results included), this node first and
  newest first, then upstream nodes nearest first; the first one whose tool has an extract ``key`` decides, and
  ``<path>`` is read in that extract's subtree → ``EVIDENCE``. The key ends at the first ``.``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .expressions import PREFIX_SOURCE, Expression, Prefix, parse_expression
from .paths import get_path
from .state import Entity, Evidence

if TYPE_CHECKING:
    from .context import NodeContext

Resolved = tuple[bool, Any, str | None]
NOT_FOUND: Resolved = (False, None, None)


def resolve(ctx: NodeContext, expression: Expression | str) -> Resolved:
    """``(found, value, source_type)`` of ``expression``; ``(False, None, None)`` when it has no value."""
    expr = parse_expression(expression) if isinstance(expression, str) else expression
    source = PREFIX_SOURCE.get(expr.prefix)
    found, value = _lookup(ctx, expr)
    return (True, value, source) if found else NOT_FOUND


def _lookup(ctx: NodeContext, expr: Expression) -> tuple[bool, Any]:
    if expr.prefix is Prefix.INPUTS:
        return get_path(ctx.node.inputs, expr.path)
    if expr.prefix is Prefix.OUTPUTS:
        key, rest = _key_and_rest(expr)
        written = ctx.node.outputs.get(key)
        if written is None:
            return False, None
        return get_path(written.value, rest)
    if expr.prefix is Prefix.SHARED:
        return get_path(ctx.task.shared, expr.path)
    if expr.prefix is Prefix.SESSION:
        return get_path(ctx.session.values, expr.path)
    if expr.prefix is Prefix.PLATFORM:
        platform = ctx.platform
        return (True, platform[expr.head]) if expr.head in platform else (False, None)
    if expr.prefix is Prefix.PRIOR:
        return prior_value(ctx.session.entities, expr.head, ".".join(expr.parts[1:]))
    if expr.prefix is Prefix.EVIDENCE:
        return evidence_value(ctx, *_key_and_rest(expr))
    return False, None  # call.* only exists inside verify.args


def _key_and_rest(expr: Expression) -> tuple[str, str]:
    """The key an ``outputs.`` / ``evidence.`` expression names and the path inside its value:
    ``evidence.tags[].id`` is the key ``tags`` and every item's ``id``."""
    key, rest = expr.head, ".".join(expr.parts[1:])
    if key.endswith("[]"):
        key, rest = key[:-2], ".".join(p for p in ("[]", rest) if p)
    return key, rest


def find_entity(entities: list[Entity], ref: str) -> Entity | None:
    """The newest entity of type ``ref``, or exactly ``type:id``."""
    kind, colon, wanted = ref.partition(":")
    for entity in reversed(entities):
        if entity.type == kind and (not colon or entity.id == wanted):
            return entity
    return None


def prior_value(entities: list[Entity], ref: str, attr: str) -> tuple[bool, Any]:
    """``prior.<ref>.<attr>``; an empty ``attr`` gives the display name (the §7 ``prior.<type>`` form)."""
    entity = find_entity(entities, ref)
    if entity is None:
        return False, None
    if attr in ("", "displayName"):
        return (entity.name is not None, entity.name)
    if attr == "id":
        return True, entity.id
    found, value = get_path(entity.attrs, attr)
    if not found and attr == "name" and entity.name is not None:
        return True, entity.name
    return found, value


def extract_keys(ctx: NodeContext, evidence: Evidence) -> set[str] | None:
    """The extract keys of the evidence's tool in this node's contract, or None when this contract has no such tool
    (upstream evidence of another skill: its stored extracts are trusted as they are)."""
    tool = ctx.tool_contract(evidence.tool)
    if tool is None:
        return None
    return {extract.key for extract in tool.extracts if extract.key}


def evidence_value(ctx: NodeContext, key: str, path: str) -> tuple[bool, Any]:
    """``evidence.<key>[.<path>]`` (see the module docstring)."""
    for evidence in ctx.visible_evidence():
        if not evidence.succeeded or key not in evidence.extracts:
            continue
        keys = extract_keys(ctx, evidence)
        if keys is not None and key not in keys:
            continue
        return get_path(evidence.extracts[key], path)
    return False, None
