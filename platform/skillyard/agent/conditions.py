"""The conditions of CONDITIONAL edges (orchestration P2): ``when: {output: KEY | evidence: KEY[.path], op, value?}``
on a plan node's ``dependsOn`` entry.

A condition reads a verified fact of its upstream node, never model text: ``output: KEY`` is the DONE node's
``outputs[KEY]`` (written through ``builtin_output_set``, sources checked), ``evidence: KEY[.path]`` is the upstream
node's newest succeeded evidence whose tool declares the extract ``KEY`` (the ``path`` read in its subtree, as §9
``evidence.*`` reads it). :func:`check_depends_on` validates a node's ``dependsOn`` when the plan is validated, each
condition against the upstream skill's contract (:func:`check_condition`); :func:`evaluate_condition` decides one
once the upstream node is final. The comparisons are §6.1's
(``EQ`` numeric when both sides are numbers, else text; ``TRUTHY``); ``EMPTY`` / ``NOT_EMPTY`` read the extract's
count (§6.3) when no path is given, else whether the value has content.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from .chain.response import OP_TESTS
from .contract import SuccessOp
from .loader import ContractSkill
from .paths import get_path, has_value
from .state import Evidence, NodeState

#: Characters of a condition's ``evidence`` path and of its ``value`` as JSON: plan text, stored and shown.
MAX_PATH_CHARS = 200
MAX_VALUE_CHARS = 500
#: Characters of a value quoted in a decision's reason.
SHOWN_CHARS = 80


class ConditionOp(StrEnum):
    """What a condition tests about the value it reads."""

    EXISTS = "EXISTS"  # the output was written / the path exists (null included), as §6.1 EXISTS
    EMPTY = "EMPTY"  # nothing there: a count of 0, no value, an empty text / list / object
    NOT_EMPTY = "NOT_EMPTY"
    EQ = "EQ"  # §6.1 EQ: numerically when both sides are numbers, else as text
    NE = "NE"
    TRUTHY = "TRUTHY"  # §6.1 TRUTHY


#: The ops that compare with ``value`` (and need it).
VALUE_OPS = frozenset({ConditionOp.EQ, ConditionOp.NE})
OPS = ", ".join(ConditionOp)

#: The JSON Schema of a ``dependsOn`` entry with a condition, in ``builtin_plan``.
EDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "node": {"type": "string", "description": "the id of the upstream node"},
        "when": {
            "type": "object",
            "description": "read exactly one of output (a declared output) or evidence (KEY or KEY.path) of that node",
            "properties": {
                "output": {"type": "string"},
                "evidence": {"type": "string"},
                "op": {"type": "string", "enum": [op.value for op in ConditionOp]},
                "value": {"description": "EQ / NE only: the value to compare with"},
            },
            "required": ["op"],
        },
    },
    "required": ["node"],
}


def _split_evidence(ref: str) -> tuple[str, str]:
    """``lots.0.id`` → ``("lots", "0.id")``; ``lots[].id`` → ``("lots", "[].id")`` (the key ends at the first dot)."""
    key, _, path = ref.partition(".")
    if key.endswith("[]"):
        key, path = key[:-2], ".".join(p for p in ("[]", path) if p)
    return key, path


def extract_keys(skill: ContractSkill) -> list[str]:
    """The extract keys the skill's tools (those in its ``toolNames``) declare: what ``evidence:`` may name."""
    keys = [
        extract.key
        for name, tool in skill.contract.tools.items()
        if name in skill.tool_names
        for extract in tool.extracts
        if extract.key
    ]
    return list(dict.fromkeys(keys))


def condition_keys(skill: ContractSkill) -> str:
    """``outputs: a, b; evidence: x`` — what conditions on a node of ``skill`` may read ("" when nothing)."""
    parts = []
    if skill.contract.outputs:
        parts.append("outputs: " + ", ".join(skill.contract.outputs))
    keys = extract_keys(skill)
    if keys:
        parts.append("evidence: " + ", ".join(keys))
    return "; ".join(parts)


def check_condition(raw: Any, upstream: ContractSkill, where: str) -> tuple[dict[str, Any] | None, list[str]]:
    """``(the condition as stored, problems)``; every problem names ``where`` (``nodes[2].dependsOn[0].when``), the
    field and the fix. The stored form keeps only ``output`` or ``evidence``, ``op`` and (EQ / NE) ``value``."""
    if not isinstance(raw, Mapping):
        return None, [f"{where} must be an object {{output | evidence, op, value?}}, not {type(raw).__name__}"]
    problems: list[str] = []
    reads = [name for name in ("output", "evidence") if name in raw]
    if len(reads) != 1:
        given = " and ".join(reads) if reads else "neither"
        problems.append(f"{where} needs exactly one of output or evidence (given: {given})")
    op = raw.get("op")
    if not isinstance(op, str) or op not in ConditionOp.__members__:
        problems.append(f"{where}.op {op!r} is not a condition op (ops: {OPS})")
    elif ConditionOp(op) in VALUE_OPS and "value" not in raw:
        problems.append(f"{where}.value is required for op {op}: the value to compare with")
    elif ConditionOp(op) not in VALUE_OPS and "value" in raw:
        problems.append(f"{where}.value is only read by EQ and NE; remove it, or use op EQ")
    if "value" in raw and len(json.dumps(raw["value"], ensure_ascii=False, default=str)) > MAX_VALUE_CHARS:
        problems.append(f"{where}.value is longer than {MAX_VALUE_CHARS} characters as JSON; compare a short value")
    if len(reads) == 1:
        problems += _check_read(reads[0], raw[reads[0]], upstream, where)
    if problems:
        return None, problems
    stored: dict[str, Any] = {reads[0]: raw[reads[0]].strip(), "op": op}
    if op in VALUE_OPS:
        stored["value"] = raw["value"]
    return stored, []


def check_depends_on(
    depends: Any, where: str, plan_id: str, ids: list[str], skill_of: Mapping[str, ContractSkill]
) -> tuple[tuple[str, ...], dict[str, Mapping[str, Any]], list[str]]:
    """``(upstream ids, conditions by upstream id, problems)`` of a node's ``dependsOn``: plain ids (a repeated id
    counts once, as in part 2) and ``{node, when?}`` entries whose conditions are checked against the upstream
    node's skill."""
    if depends is None:
        depends = []
    if not isinstance(depends, list) or not all(isinstance(d, str | dict) for d in depends):
        return (), {}, [f"{where}.dependsOn must be a list of node ids such as ['n1'] (or {{node, when}} objects)"]
    order: list[str] = []
    when: dict[str, Mapping[str, Any]] = {}
    problems: list[str] = []
    for position, entry in enumerate(depends):
        place = f"{where}.dependsOn[{position}]"
        condition = None
        if isinstance(entry, dict):
            upstream = entry.get("node")
            if not isinstance(upstream, str) or not upstream.strip():
                problems.append(f"{place}.node must be the id of a node of the plan, such as 'n1'")
                continue
            condition = entry.get("when")
        else:
            upstream = entry
        upstream = upstream.strip()
        if upstream in order:
            if condition is not None or upstream in when:
                problems.append(f"{place} names {upstream!r} again; give each upstream node one entry")
            continue
        order.append(upstream)
        if condition is not None and upstream in skill_of and upstream != plan_id:
            stored, trouble = check_condition(condition, skill_of[upstream], f"{place}.when")
            problems += trouble
            if stored is not None:
                when[upstream] = stored
    if plan_id in order:
        return (), {}, [f"{where} ({plan_id}) depends on itself; remove {plan_id!r} from its dependsOn"]
    unknown = [d for d in order if d not in ids]
    if unknown:
        return (), {}, [f"{where}.dependsOn names no node of the plan: {', '.join(unknown)} (ids: {', '.join(ids)})"]
    return tuple(order), when, problems


def _check_read(name: str, ref: Any, upstream: ContractSkill, where: str) -> list[str]:
    """The problems of ``output`` / ``evidence`` against the upstream skill's declared outputs and extract keys."""
    if not isinstance(ref, str) or not ref.strip():
        return [f"{where}.{name} must be a non-empty string such as {'inStock' if name == 'output' else 'lots.0.id'!r}"]
    ref = ref.strip()
    if name == "output":
        outputs = list(upstream.contract.outputs)
        if ref not in outputs:
            listed = ", ".join(outputs) or "none"
            return [f"{where}.output {ref!r} is not an output of skill {upstream.skill_key} (outputs: {listed})"]
        return []
    if len(ref) > MAX_PATH_CHARS or not all(ref.split(".")):
        return [f"{where}.evidence {ref!r} must be KEY or KEY.path (no empty segment, at most {MAX_PATH_CHARS} chars)"]
    key, _path = _split_evidence(ref)
    keys = extract_keys(upstream)
    if key not in keys:
        listed = ", ".join(keys) or "none"
        return [
            f"{where}.evidence {ref!r}: {key!r} is not an extract key of the tools of skill {upstream.skill_key} "
            f"(keys: {listed})"
        ]
    return []


def describe(condition: Mapping[str, Any]) -> str:
    """``output inStock TRUTHY`` / ``evidence lots NOT_EMPTY`` / ``output status EQ "paid"``."""
    name = "output" if "output" in condition else "evidence"
    text = f"{name} {condition[name]} {condition['op']}"
    if "value" in condition:
        text += " " + _shown(condition["value"])
    return text


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _read(condition: Mapping[str, Any], node: NodeState, evidence: Iterable[Evidence]) -> tuple[bool, Any, int | None]:
    """``(found, value, count)`` of what the condition reads on ``node``; ``count`` only for a bare evidence key."""
    if "output" in condition:
        written = node.outputs.get(condition["output"])
        return (False, None, None) if written is None else (True, written.value, None)
    key, path = _split_evidence(condition["evidence"])
    newest = None
    for record in evidence:  # the task's evidence, oldest first: the last match is the newest
        if record.node_id == node.id and record.succeeded and (key in record.extracts or key in record.counts):
            newest = record
    if newest is None:
        return False, None, None
    count = None if path else newest.counts.get(key)
    if key not in newest.extracts:  # the extract's path was not in the response: nothing was found (count 0)
        return False, None, count
    found, value = get_path(newest.extracts[key], path)
    return found, value, count


def evaluate_condition(condition: Mapping[str, Any], node: NodeState, evidence: Iterable[Evidence]) -> tuple[bool, str]:
    """``(holds, what was read)`` of ``condition`` on the final upstream ``node`` (see the module docstring)."""
    found, value, count = _read(condition, node, evidence)
    op = ConditionOp(condition["op"])
    empty = count == 0 if count is not None else not (found and has_value(value))
    if op is ConditionOp.EMPTY:
        holds = empty
    elif op is ConditionOp.NOT_EMPTY:
        holds = not empty
    else:
        holds = OP_TESTS[SuccessOp(op.value)](found, value, condition.get("value"))
    if count is not None:
        return holds, f"{count} item{'s' if count != 1 else ''}"
    return holds, _shown(value) if found else "not found"
