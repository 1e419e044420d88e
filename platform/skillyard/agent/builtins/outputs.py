"""Node outputs (§8): ``builtin_output_set``, the completion checks of §10.2, and what a DONE node publishes.

* :func:`source_problem` is the one source check, used when an output is written and again at finish;
* :func:`completion_refusal` runs the §10.2 checks in order and returns the first failure (or None), with the two
  gates of doc-runtime-contracts: a target write that is ``partial_success`` and an incomplete listing the user
  asked for in full;
* :func:`publish` writes the shares (``share: TASK`` → ``shared.<key>``, ``SESSION`` → ``session.<key>``) and the
  entities of outputs with ``entity`` once the node is DONE.
"""

from __future__ import annotations

from typing import Any

from ..chain import paging
from ..chain.evidence import make_entities, remember
from ..chain.provenance import same
from ..chain.receipt import short
from ..codes import ErrorCode
from ..context import NodeContext
from ..contract import UNSET, OutputSpec, ShareScope, SourceType
from ..expressions import HIDDEN_PLATFORM_FIELDS, PLATFORM_FIELDS
from ..paths import get_path, has_value
from ..state import Entity, Evidence, Observation, OutputValue
from .tool import Builtin, Call, JsonObject, params, text_arg

OUTPUT_SET = "builtin_output_set"

#: §11: output (and share) keys that are reserved platform field names.
RESERVED_OUTPUT_KEYS = frozenset(PLATFORM_FIELDS) | frozenset(HIDDEN_PLATFORM_FIELDS)

_ALL_BUT_MODEL = tuple(s for s in SourceType if s is not SourceType.MODEL)


def outputs_used(ctx: NodeContext) -> bool:
    """Whether anyone uses this node's outputs, so ``builtin_output_set`` is offered (§12): a node of the task
    depends on this one, or the contract has an output that is required, shared or produces an entity."""
    if any(ctx.node.id in other.depends_on for other in ctx.graph.values()):
        return True
    return any(o.required or o.share is not None or o.entity is not None for o in ctx.skill.contract.outputs.values())


def allowed_sources(spec: OutputSpec | None) -> tuple[SourceType, ...]:
    """The sources an output accepts: its ``sources`` without MODEL; empty (or undeclared) → all but MODEL."""
    if spec is None or not spec.sources:
        return _ALL_BUT_MODEL
    return tuple(s for s in spec.sources if s is not SourceType.MODEL)


def source_problem(ctx: NodeContext, key: str, written: OutputValue) -> tuple[ErrorCode, str, str] | None:
    """Why the declared source of an output value is not legal (code, message, next step), or None.

    MODEL is never legal; the type must be in the output's sources; EVIDENCE (EVENT) must name a visible,
    succeeded evidence of a business call (of an external event) whose response holds the same value at
    ``sourcePath``; CONTRACT must equal the output's constant.
    """
    spec = ctx.skill.contract.outputs.get(key)
    allowed = allowed_sources(spec)
    names = ", ".join(allowed)
    if written.source_type == SourceType.MODEL:
        return (
            ErrorCode.SOURCE_REJECT,
            f"output {key!r} cannot come from MODEL: a node output must be backed by a real source",
            f"write {key!r} again with the source it really came from ({names}); for a tool result use "
            "sourceType EVIDENCE with the evidenceId as sourceRef and the response path as sourcePath",
        )
    if written.source_type not in allowed:
        return (
            ErrorCode.SOURCE_REJECT,
            f"output {key!r} does not accept source {written.source_type}; allowed: {names}",
            f"write {key!r} with one of the allowed sources ({names})",
        )
    if written.source_type in (SourceType.EVIDENCE, SourceType.EVENT):
        return _evidence_problem(ctx, key, written)
    if written.source_type == SourceType.CONTRACT:
        constant = spec.constant if spec is not None else UNSET
        if constant is UNSET:
            return (
                ErrorCode.SOURCE_REJECT,
                f"output {key!r} has no contract constant, so sourceType CONTRACT cannot be used",
                f"write {key!r} with another allowed source ({names})",
            )
        if not same(written.value, constant):
            return (
                ErrorCode.SOURCE_REJECT,
                f"output {key!r} with source CONTRACT must equal the contract constant {constant!r}, "
                f"not {written.value!r}",
                f"write {key!r} again with value {constant!r}",
            )
    return None


def _evidence_problem(ctx: NodeContext, key: str, written: OutputValue) -> tuple[ErrorCode, str, str] | None:
    """EVIDENCE names a business call's evidence, EVENT an external event's (``event:<NAME>``)."""
    events = written.source_type == SourceType.EVENT
    visible = {e.id: e for e in ctx.visible_evidence() if e.from_event is events}
    listing = ", ".join(f"{e.id} ({e.tool})" for e in visible.values() if e.succeeded) or "none yet"
    if not written.source_ref:
        return (
            ErrorCode.EVIDENCE_PATH_INVALID,
            f"output {key!r} has sourceType {written.source_type} but an empty sourceRef (evidence id)",
            f"set sourceRef to the evidence_id of the tool result the value came from (visible: {listing})",
        )
    evidence = visible.get(written.source_ref)
    if evidence is None or not evidence.succeeded:
        why = "is not visible to this node" if evidence is None else "is not a succeeded call"
        return (
            ErrorCode.SOURCE_REJECT,
            f"evidence {written.source_ref!r} {why}",
            f"use the evidence_id of a succeeded tool result of this node (visible: {listing}), "
            "or call the query tool first",
        )
    found, value = get_path(evidence.response, written.source_path)
    if not found or not same(value, written.value):  # JSON equality: true is not 1
        at = written.source_path or "(the whole response)"
        seen = repr(value) if found else "nothing"
        return (
            ErrorCode.SOURCE_REJECT,
            f"output {key!r}: evidence {evidence.id} holds {seen} at {at}, not {written.value!r}",
            f"read the response with builtin_evidence_get({evidence.id!r}) and write the exact value at the path "
            "you give as sourcePath",
        )
    return None


async def output_set(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    key = text_arg(args, "key")
    declared = ctx.skill.contract.outputs
    keys = ", ".join(declared) or "none"
    if not key:
        return call.refuse(
            ErrorCode.OUTPUT_PATH_INVALID,
            "the output key is empty",
            f"call {OUTPUT_SET} with the key of a declared output ({keys})",
        )
    if key in RESERVED_OUTPUT_KEYS:
        return call.refuse(
            ErrorCode.PLATFORM_FIELD_FORBIDDEN,
            f"{key!r} is a reserved platform field name and cannot be an output key",
            f"write one of the declared outputs instead ({keys})",
        )
    if declared and key not in declared:
        return call.refuse(
            ErrorCode.OUTPUT_WRITE_FORBIDDEN,
            f"output {key!r} is not declared by this skill's contract",
            f"write one of the declared outputs: {keys}",
        )
    source_path = text_arg(args, "sourcePath") or None
    written = OutputValue(args.get("value"), str(args["sourceType"]), text_arg(args, "sourceRef") or None, source_path)
    problem = source_problem(ctx, key, written)
    if problem is not None:
        return call.refuse(*problem)
    ctx.node.outputs[key] = written
    return call.ok({"key": key, "written": True, "sourceType": written.source_type})


OUTPUT_SET_TOOL = Builtin(
    OUTPUT_SET,
    "Write one output of this node. Never invent a value: name where it came from. For a tool result use "
    "sourceType EVIDENCE, sourceRef = the evidence_id, sourcePath = the path in that response.",
    params(
        {
            "key": {"type": "string", "description": "the declared output key"},
            "value": {"description": "the value (any JSON)"},
            "sourceType": {"type": "string", "enum": [s.value for s in SourceType], "description": "never MODEL"},
            "sourceRef": {"type": "string", "description": "EVIDENCE: the evidence_id; otherwise a short reference"},
            "sourcePath": {"type": "string", "description": "EVIDENCE: the dotted path of the value in the response"},
        },
        ("key", "value", "sourceType", "sourceRef"),
    ),
    output_set,
)


# the §10.2 completion checks -----------------------------------------------------------------------------------
def completion_refusal(ctx: NodeContext, output: str) -> tuple[ErrorCode, str, str] | None:
    """The first failing §10.2 check (code, message, next step), or None when the node may finish."""
    if not output.strip():
        return (
            ErrorCode.FINISH_MISSING_OUTPUT,
            "builtin_node_finish needs a non-empty 'output'",
            "call builtin_node_finish again with 'output': the answer for the user, in one or two sentences",
        )
    open_writes = [e for e in ctx.node_evidence() if e.write and e.open]
    if open_writes:
        listed = ", ".join(f"{e.id} ({e.tool}, {e.status})" for e in open_writes)
        return (
            ErrorCode.FINISH_OPEN_EVIDENCE,
            f"a write of this node is not settled: {listed}",
            "wait until the write is verified (the runtime checks it or asks the user); do not repeat the write",
        )
    declared = ctx.skill.contract.outputs
    missing = [k for k, o in declared.items() if o.required and not has_value(_value(ctx, k))]
    if missing:
        return (
            ErrorCode.FINISH_OUTPUT_MISSING,
            f"required output(s) not written or empty: {', '.join(missing)}",
            f"write each with {OUTPUT_SET} (key, value, sourceType, sourceRef), then call builtin_node_finish",
        )
    for key, written in ctx.node.outputs.items():
        problem = source_problem(ctx, key, written)
        if problem is not None:
            return (
                ErrorCode.FINISH_OUTPUT_SOURCE,
                f"output {key!r} has no legal source: {problem[1]}",
                f"fix it with {OUTPUT_SET}: {problem[2]}",
            )
    target = ctx.node.target
    goal_evidence = ctx.goal_evidence()  # this node's and its delegated nodes' (§15)
    if target:
        partial = [e for e in goal_evidence if e.tool == target and e.write and e.partial is not None]
        if partial:
            return _partial_write(target, partial)
        if not any(e.tool == target and e.succeeded for e in goal_evidence):
            return (
                ErrorCode.FINISH_NEED_TARGET,
                f"the goal of this node is the write {target!r}, and it has not completed",
                f"call {target} (ask for approval with builtin_node_approval when the runtime requires it); "
                "if it cannot be done, call builtin_node_fail with the reason",
            )
    elif not declared and ctx.skill.tool_names and not any(e.succeeded for e in goal_evidence):
        return (
            ErrorCode.FINISH_NEED_BUSINESS,
            "this node has not completed any business tool call, so its answer has no basis",
            f"call one of {', '.join(ctx.skill.tool_names)} first; if the goal cannot be reached, "
            "call builtin_node_fail with the reason",
        )
    return _incomplete_listing(ctx)


def _partial_write(target: str, partial: list[Evidence]) -> tuple[ErrorCode, str, str]:
    """doc-runtime-contracts: a target write that partly happened (``partial_success``) never completes the node."""
    facts = [(e.id, e.partial or {}) for e in partial]
    listed = "; ".join(
        f"{ident}: steps {short(p.get('steps'))}, compensation {short(p.get('compensation'))}" for ident, p in facts
    )
    return (
        ErrorCode.FINISH_PARTIAL_WRITE,
        f"the target write {target!r} only partly happened (partial_success), so this node cannot finish: {listed}",
        f"do not call {target} again (its succeeded steps must not be replayed); tell the user which steps ran and the "
        "compensation, then call builtin_node_fail with them",
    )


def _incomplete_listing(ctx: NodeContext) -> tuple[ErrorCode, str, str] | None:
    """doc-runtime-contracts: the user asked for everything, and the last read of a paged query is incomplete."""
    word = paging.everything_asked(ctx)
    if word is None:
        return None
    incomplete = paging.incomplete_listings(ctx)
    if not incomplete:
        return None
    last = max(incomplete, key=lambda e: e.seq)
    contract = ctx.tool_contract(last.tool)
    spec = contract.paging if contract is not None else None
    listed = ", ".join(f"{e.tool} ({e.id}, next cursor {e.next_cursor!r})" for e in incomplete)
    return (
        ErrorCode.FINISH_INCOMPLETE_LISTING,
        f"the user asked for everything ({word!r}), but the last read of this query is not complete: {listed}",
        paging.continue_step(ctx, last.tool, last.next_cursor, spec, word)
        + "; if it cannot be completed, call builtin_node_fail with the reason",
    )


def _value(ctx: NodeContext, key: str) -> Any:
    written = ctx.node.outputs.get(key)
    return None if written is None else written.value


# publishing a DONE node --------------------------------------------------------------------------------------
def publish(ctx: NodeContext) -> tuple[list[str], list[Entity]]:
    """Write the shares and entities of a DONE node's outputs; return the shared keys and the new entities."""
    shared: list[str] = []
    entities: list[Entity] = []
    for key, spec in ctx.skill.contract.outputs.items():
        written = ctx.node.outputs.get(key)
        if written is None or not has_value(written.value):
            continue
        if spec.share is ShareScope.TASK:
            ctx.task.shared[key] = written.value
            shared.append(f"shared.{key}")
        elif spec.share is ShareScope.SESSION:
            ctx.session.values[key] = written.value
            shared.append(f"session.{key}")
        if spec.entity is not None:  # the same entity rules as an extract's (§6.3), without call arguments
            entities += make_entities(spec.entity, written.value, None, ctx.task.id)
    remember(ctx, entities)
    return shared, entities
