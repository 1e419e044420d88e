"""The node-control builtins of §12: follow-up, approval, finish, fail and delegate.

Delegation (§15): ``builtin_node_delegate(skillKey, objective)`` inserts a node of a ``delegatable: true`` skill of
the agent before this one, which waits (``WAITING``) and continues once the delegated node has ended. It is offered
only while a delegatable skill other than this node's own exists and the delegated node would stay within
``[agent] delegate_max_depth``. Refusals: an unknown key → ``SKILL_NOT_FOUND``; a skill that is not delegatable (or
this node's own) → ``DELEGATE_FORBIDDEN``; the same skill and objective after an attempt of this node that failed,
was cancelled or skipped → ``DELEGATE_REPEATED``.

Follow-up grounding (``FOLLOW_UP_UNGROUNDED``), as implemented here:

* with ``expectedFields``: every field must be an argument path (exactly as written in ``args``, e.g.
  ``orderInfo.taxNo``) of a configured business tool of this skill (in ``contract.tools`` and ``toolNames``)
  without ``const``, and either

  - *USER-askable*: its ``sources`` contain ``USER``; or it has no ``from`` and is required with
    ``missing.action: ASK_USER`` (the default) — the parameter contract itself answers such a missing value with
    ``PARAM_PROVENANCE_ASK_USER`` and "call builtin_node_follow_up", so that advice must be followable; or it has an
    ``enum`` (a value outside it is turned into a follow-up, §5.3 step 5);
  - *EVIDENCE choice*: its ``sources`` contain ``EVIDENCE`` (or its ``from`` reads ``evidence.*``) and this node
    already has a succeeded, non-empty read call, so the user chooses among the results;

* without ``expectedFields`` (a clarification): this node's latest business call returned empty or failed on the
  business level (``business_ok`` false). A call that failed technically does not ground a question.

``FOLLOW_UP_ANSWERED`` is checked first: ``ctx.node.answered`` holds the follow-ups answered in this turn as
``{"question", "expected_fields"}``; the same question (whitespace-normalized) with the same set of expected fields
is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..chain.provenance import walk
from ..codes import ErrorCode
from ..context import NodeContext
from ..contract import ArgContract, MissingAction, SourceType
from ..events import Claimed, EventError, check_key, check_name, check_org, check_timeout, event_record, start_wait
from ..expressions import Prefix
from ..graph import MAX_TASK_NODES
from ..planner import write_target
from ..state import (
    Checkpoint,
    CheckpointType,
    EvidenceStatus,
    GatedWrite,
    NodeKind,
    NodeState,
    NodeStatus,
    Observation,
)
from ..store import new_id
from .outputs import completion_refusal, publish
from .tool import Builtin, Call, JsonObject, params, text_arg

FOLLOW_UP = "builtin_node_follow_up"
APPROVAL = "builtin_node_approval"
FINISH = "builtin_node_finish"
FAIL = "builtin_node_fail"
DELEGATE = "builtin_node_delegate"
WAIT_EVENT = "builtin_node_wait_event"

#: Candidates one CHOICE may offer, and the characters of an id and of a label (model text shown to the user).
MAX_CANDIDATES = 50
MAX_CANDIDATE_ID = 200
MAX_CANDIDATE_LABEL = 500


def _configured_args(ctx: NodeContext) -> tuple[dict[str, list[ArgContract]], dict[str, list[ArgContract]]]:
    """``(by path, lookup)`` over the configured tools this skill may call: argument path → the contracts of every
    tool with that path (several tools may share a path, e.g. ``title``), and the same map where a nested path is
    also found by its leaf (``taxNo`` for ``orderInfo.taxNo``), as the USER provenance check accepts either; a full
    path wins over another's leaf.
    """
    found: dict[str, list[ArgContract]] = {}
    leaves: dict[str, list[ArgContract]] = {}
    for name, tool in ctx.skill.contract.tools.items():
        if name not in ctx.skill.tool_names:
            continue
        for path, arg in tool.args.items():
            found.setdefault(path, []).append(arg)
            leaves.setdefault(arg.leaf, []).append(arg)
    return found, {**leaves, **found}


def user_askable(arg: ArgContract) -> bool:
    """An argument whose value the user may give (see the module docstring)."""
    if arg.has_const:
        return False
    if SourceType.USER in arg.sources or arg.enum:
        return True
    return arg.from_expr is None and arg.required and arg.missing.action is MissingAction.ASK_USER


def evidence_choice(arg: ArgContract) -> bool:
    """An argument whose value comes from a tool result (the user may pick one of the results)."""
    if arg.has_const:
        return False
    from_evidence = arg.from_expr is not None and arg.from_expr.prefix is Prefix.EVIDENCE
    return SourceType.EVIDENCE in arg.sources or from_evidence


def _normalized(question: str) -> str:
    return " ".join(question.split())


def _ungrounded(ctx: NodeContext, fields: list[str]) -> tuple[str, str] | None:
    """Why a follow-up has no grounding (message, next step), or None."""
    evidence = sorted(ctx.node_evidence(), key=lambda e: e.seq)
    if not fields:
        latest = evidence[-1] if evidence else None
        settled = latest is not None and latest.status is EvidenceStatus.SUCCESS
        if latest is not None and settled and (latest.empty or latest.business_ok is False):
            return None
        what = "no business call yet" if latest is None else f"the latest call ({latest.tool}) was not empty or failed"
        return (
            f"a clarifying question without expectedFields needs an empty or business-failed query first ({what})",
            "query with the tool first, or name the argument you need as expectedFields; "
            "if the goal cannot be reached, call builtin_node_fail",
        )
    args, lookup = _configured_args(ctx)
    has_results = any(not e.write and e.succeeded and not e.empty for e in evidence)
    bad = []
    for field in fields:
        # grounded when any tool's argument of that path may be asked (§12: "本技能工具中允许来自 USER 的参数")
        if not any(user_askable(a) or (evidence_choice(a) and has_results) for a in lookup.get(field, [])):
            bad.append(field)
    if not bad:
        return None
    askable = [p for p, group in args.items() if any(user_askable(a) for a in group)]
    choosable = [p for p, group in args.items() if p not in askable and any(evidence_choice(a) for a in group)]
    hint = f"askable arguments: {', '.join(askable) or 'none'}"
    if choosable:
        state = "now" if has_results else "after a non-empty query"
        hint += f"; choosable from query results {state}: {', '.join(choosable)}"
    return (
        f"expectedFields {', '.join(bad)} cannot be asked of the user: each must be an argument path of this "
        "skill's tools that allows USER, or an EVIDENCE argument after a non-empty query",
        f"{hint}. Query the tool for values the runtime can find, or fix expectedFields",
    )


def grounded_ids(ctx: NodeContext) -> set[str]:
    """The values (as text) a candidate id may take: everything in the extracts of this node's succeeded,
    non-empty business calls (the whole result of a call whose tool has no extracts)."""
    found: set[str] = set()
    for record in ctx.node_evidence():
        if record.succeeded and not record.empty and not record.from_event:
            values = walk(record.extracts if record.extracts else record.response)
            found.update(str(v) for v in values if isinstance(v, str | int | float) and not isinstance(v, bool))
    return found


def _candidates(raw: Any) -> list[dict[str, str]] | str:
    """The candidates as ``[{id, label}]``, or what is wrong with them."""
    if not isinstance(raw, list) or not raw:
        return "'candidates' must be a non-empty list of {id, label}"
    if len(raw) > MAX_CANDIDATES:
        return f"'candidates' holds {len(raw)} items; offer at most {MAX_CANDIDATES}"
    out: list[dict[str, str]] = []
    for index, item in enumerate(raw):
        ident = item.get("id") if isinstance(item, dict) else None
        label = item.get("label") if isinstance(item, dict) else None
        if isinstance(ident, int | float) and not isinstance(ident, bool):
            ident = str(ident)
        if not isinstance(ident, str) or not ident.strip() or len(ident) > MAX_CANDIDATE_ID:
            return f"candidates[{index}].id must be a non-empty string of at most {MAX_CANDIDATE_ID} characters"
        if label is not None and (not isinstance(label, str) or len(label) > MAX_CANDIDATE_LABEL):
            return f"candidates[{index}].label must be a string of at most {MAX_CANDIDATE_LABEL} characters"
        if any(c["id"] == ident.strip() for c in out):
            return f"candidates[{index}].id {ident.strip()!r} is listed twice"
        out.append({"id": ident.strip(), "label": (label or "").strip() or ident.strip()})
    return out


def _choice(args: JsonObject, fields: list[str], call: Call) -> Observation | list[dict[str, str]]:
    """The well-formed candidates of a structured choice, or the refusal (grounding is checked after the field)."""
    candidates = _candidates(args.get("candidates"))
    if isinstance(candidates, str):
        return call.refuse(
            ErrorCode.ARG_REJECTED,
            candidates,
            f"call {FOLLOW_UP} again with candidates [{{id, label}}, …] taken from your query results",
        )
    if len(fields) != 1:
        return call.refuse(
            ErrorCode.ARG_REJECTED,
            f"a choice fills exactly one argument, but expectedFields names {len(fields)}",
            f"call {FOLLOW_UP} again with expectedFields naming the one argument the chosen id fills",
        )
    return candidates


def _invented(ctx: NodeContext, candidates: list[dict[str, str]], call: Call) -> Observation | None:
    """FOLLOW_UP_UNGROUNDED when a candidate id is not in this node's query results (the model cannot invent one)."""
    grounded = grounded_ids(ctx)
    invented = [c["id"] for c in candidates if c["id"] not in grounded]
    if invented:
        return call.refuse(
            ErrorCode.FOLLOW_UP_UNGROUNDED,
            "candidate ids must come from this node's successful, non-empty query results; not found there: "
            + ", ".join(invented),
            "query with the tool first and offer the ids its results hold, or ask without candidates",
        )
    return None


async def follow_up(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    question = text_arg(args, "question")
    if not question:
        return call.refuse(
            ErrorCode.ARG_REJECTED,
            "the follow-up question is empty",
            f"call {FOLLOW_UP} with 'question': one short question for the user",
        )
    fields = list(dict.fromkeys(f.strip() for f in args.get("expectedFields") or [] if f.strip()))
    for done in ctx.node.answered:
        same_fields = sorted(done.get("expected_fields") or []) == sorted(fields)
        if _normalized(str(done.get("question", ""))) == _normalized(question) and same_fields:
            return call.refuse(
                ErrorCode.FOLLOW_UP_ANSWERED,
                "the user has just answered this exact question in this turn",
                "use the answer in the conversation (answered fields count as USER) and continue; do not ask again",
            )
    candidates = None if args.get("candidates") is None else _choice(args, fields, call)
    if isinstance(candidates, Observation):
        return candidates
    problem = _ungrounded(ctx, fields)
    if problem is not None:
        return call.refuse(ErrorCode.FOLLOW_UP_UNGROUNDED, *problem)
    suggestions = [str(s) for s in args.get("suggestions") or [] if str(s).strip()]
    if candidates is None:
        ctx.node.checkpoint = Checkpoint(CheckpointType.FOLLOW_UP, question, fields, suggestions)
    else:
        invented = _invented(ctx, candidates, call)
        if invented is not None:
            return invented
        ctx.node.checkpoint = Checkpoint(CheckpointType.CHOICE, question, fields, suggestions, candidates=candidates)
    ctx.node.status = NodeStatus.SUSPENDED
    return call.ok({"status": NodeStatus.SUSPENDED.value, "checkpoint": ctx.node.checkpoint.type.value})


def _batch(ctx: NodeContext, raw: list[Any], tool_name: str, call: Call) -> list[GatedWrite] | Observation:
    """The pending writes a batch approval names, in the order given, or the refusal."""
    pending = {g.call_id: g for g in ctx.node.pending_writes if g.call_id}
    listed = ", ".join(f"{i} ({g.tool})" for i, g in pending.items()) or "none"
    ids = list(dict.fromkeys(str(i).strip() for i in raw if str(i).strip()))
    unknown = [i for i in ids if i not in pending]
    if not ids or unknown:
        return call.refuse(
            ErrorCode.APPROVAL_BATCH_UNKNOWN_CALL,
            f"callIds names no pending write: {', '.join(unknown) or '(empty)'}",
            f"call {APPROVAL} with callIds of the writes that answered APPROVAL_REQUIRED (pending: {listed})",
        )
    others = [f"{i} ({pending[i].tool})" for i in ids if pending[i].tool != tool_name]
    if others:
        return call.refuse(
            ErrorCode.APPROVAL_TOOL_MISMATCH,
            f"callIds names writes of another tool than {tool_name!r}: {', '.join(others)}",
            f"approve the writes of one tool per call; toolName is the tool of every listed call (pending: {listed})",
        )
    return [pending[i] for i in ids]


async def approval(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    gated = ctx.node.gated
    if gated is None:
        return call.refuse(
            ErrorCode.APPROVAL_NOT_GATED,
            "no write call of this node is waiting for approval",
            "call the write tool first; ask for approval only after it answers APPROVAL_REQUIRED",
        )
    tool_name = text_arg(args, "toolName")
    batch: list[GatedWrite] = []
    if args.get("callIds") is not None:
        found = _batch(ctx, args["callIds"], tool_name, call)
        if isinstance(found, Observation):
            return found
        batch, gated = found, found[-1]
    if tool_name != gated.tool:
        return call.refuse(
            ErrorCode.APPROVAL_TOOL_MISMATCH,
            f"the write waiting for approval is {gated.tool!r}, not {tool_name!r}",
            f"call {APPROVAL} with toolName {gated.tool!r}",
        )
    contract = ctx.tool_contract(gated.tool)
    if contract is None or not contract.is_write:
        return call.refuse(
            ErrorCode.WRITE_CONTRACT_INCOMPLETE,
            f"{gated.tool!r} is not a WRITE tool of this skill's contract, so it cannot be approved",
            "call builtin_node_fail with the reason; the contract must declare the tool as sideEffect WRITE",
        )
    summary = text_arg(args, "summary")
    if batch:  # callIds: the checkpoint lists each write; CONFIRM runs them in this order
        ctx.node.checkpoint = batch_approval(summary, batch)
    else:
        question = f"{summary}\n{gated.summary}" if summary else gated.summary
        ctx.node.checkpoint = Checkpoint(
            CheckpointType.APPROVAL, question, tool=gated.tool, args=dict(gated.args), summary=gated.summary
        )
    ctx.node.status = NodeStatus.SUSPENDED
    return call.ok({"status": NodeStatus.SUSPENDED.value, "checkpoint": CheckpointType.APPROVAL.value})


def batch_approval(lead: str, calls: list[GatedWrite]) -> Checkpoint:
    """A batch APPROVAL: ``lead`` (the model's summary, or why a fresh approval is needed), then each write's
    numbered summary with its call id; the writes are copied, so the checkpoint keeps what the user saw."""
    listed = "\n".join(f"{n}. [{g.call_id}] {g.summary}" for n, g in enumerate(calls, 1))
    copies = [dataclasses.replace(g, args=dict(g.args), sources=dict(g.sources)) for g in calls]
    return Checkpoint(
        CheckpointType.APPROVAL,
        f"{lead}\n{listed}" if lead else listed,
        tool=calls[-1].tool,
        args=dict(copies[0].args) if len(copies) == 1 else None,
        summary=listed,
        calls=copies,
    )


async def finish(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    output = args.get("output")
    text = output if isinstance(output, str) else ""
    refusal = completion_refusal(ctx, text)
    if refusal is not None:
        return call.refuse(*refusal)
    ctx.node.status = NodeStatus.DONE
    ctx.node.reply = text.strip()
    shared, entities = publish(ctx)
    return call.ok(
        {
            "status": NodeStatus.DONE.value,
            "shared": shared,
            "entities": [f"{e.type}:{e.id}" for e in entities],
        }
    )


async def fail(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    reason = text_arg(args, "reason")
    if not reason:
        return call.refuse(
            ErrorCode.ARG_REJECTED,
            "the failure reason is empty",
            f"call {FAIL} with 'reason': why the goal cannot be reached, for the user",
        )
    ctx.node.status = NodeStatus.FAILED
    ctx.node.reply = reason
    return call.ok({"status": NodeStatus.FAILED.value})


def wait_offered(ctx: NodeContext) -> bool:
    """A node can wait for an event only where its state outlives the process (not in an isolated sub-agent)."""
    return bool(getattr(ctx.store, "persistent", False))


async def wait_event(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    try:
        name = check_name(text_arg(args, "event"))
        key = check_key(args.get("correlationKey"))
        timeout = check_timeout(args.get("timeoutSeconds"))
        org = check_org(ctx.session.identity.get("org_id") or "")
    except EventError as exc:
        return call.refuse(ErrorCode.ARG_REJECTED, str(exc), f"call {WAIT_EVENT} again with a valid event and key")
    found = await start_wait(
        ctx.yard,
        org_id=org,
        event=name,
        key=key,
        session_id=ctx.session.id,
        task_id=ctx.task.id,
        node_id=ctx.node.id,
        timeout_s=timeout,
    )
    if isinstance(found, Claimed):  # it arrived before the wait: the node has it at once
        record = event_record(ctx, name, key, found.payload, found.event_id)
        await ctx.record(record)
        return Observation(call.name, call.arguments, True, found.payload, evidence_id=record.id, call_id=call.call_id)
    spec = ctx.skill.contract.events.get(name)
    label = (spec.label if spec is not None else None) or name
    ctx.node.checkpoint = Checkpoint(
        CheckpointType.EVENT,
        f"等待外部事件「{label}」（{key}）",
        event=name,
        key=key,
        deadline=found.deadline,
        wait_id=found.wait_id,
    )
    ctx.node.status = NodeStatus.SUSPENDED
    return call.ok({"status": NodeStatus.SUSPENDED.value, "checkpoint": CheckpointType.EVENT.value})


#: Nodes one node may delegate to in a task: each delegation costs a model step, so this bounds the graph.
MAX_DELEGATIONS = 8


def delegatable_keys(ctx: NodeContext) -> list[str]:
    """The skills this node may delegate to (the task's delegatable skills but its own)."""
    return [k for k, s in ctx.skills.items() if s.contract.delegatable and k != ctx.node.skill_key]


def delegation_offered(ctx: NodeContext) -> bool:
    return ctx.node.depth + 1 <= ctx.settings.delegate_max_depth and bool(delegatable_keys(ctx))


async def delegate(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    key = text_arg(args, "skillKey")
    objective = text_arg(args, "objective") or ctx.node.goal
    allowed = ", ".join(delegatable_keys(ctx)) or "none"
    if key not in ctx.skills:
        return call.refuse(
            ErrorCode.SKILL_NOT_FOUND,
            f"no skill {key!r} in this agent",
            f"delegate one of the delegatable skills ({allowed}), or do the work with this skill's own tools",
        )
    if not ctx.skills[key].contract.delegatable or key == ctx.node.skill_key:
        why = "is this node's own skill" if key == ctx.node.skill_key else "is not delegatable (delegatable: false)"
        return call.refuse(
            ErrorCode.DELEGATE_FORBIDDEN,
            f"skill {key!r} {why}",
            f"delegate one of the delegatable skills ({allowed}), or do the work with this skill's own tools",
        )
    mine = [n for n in ctx.graph.values() if n.parent_id == ctx.node.id]
    repeated = [n for n in mine if n.skill_key == key and n.goal == objective and n.status in _NOT_DONE]
    if repeated:
        return call.refuse(
            ErrorCode.DELEGATE_REPEATED,
            f"{key!r} with this objective was already delegated and {repeated[-1].status.value} "
            f"({repeated[-1].skipped_reason or repeated[-1].reply or 'no reason given'})",
            "do not delegate it again the same way: change the objective, use your own tools, or call "
            "builtin_node_fail with the reason",
        )
    if len(mine) >= MAX_DELEGATIONS or len(ctx.task.node_ids) >= MAX_TASK_NODES:
        return call.refuse(
            ErrorCode.DELEGATE_FORBIDDEN,
            f"this node has delegated {len(mine)} times; the task holds {len(ctx.task.node_ids)} nodes",
            "finish with what the delegated nodes found, or call builtin_node_fail with the reason",
        )
    skill = ctx.skills[key]
    child = NodeState(
        id=new_id("node"),
        task_id=ctx.task.id,
        skill_key=key,
        goal=objective,
        status=NodeStatus.PENDING,
        target=write_target(skill, skill.contract.target),
        parent_id=ctx.node.id,
        kind=NodeKind.DELEGATED,
        depth=ctx.node.depth + 1,
    )
    ctx.graph[child.id] = child
    ctx.task.node_ids.insert(ctx.task.node_ids.index(ctx.node.id), child.id)
    ctx.node.status = NodeStatus.WAITING
    return call.ok({"status": NodeStatus.WAITING.value, "delegated_node": child.id, "skillKey": key})


_NOT_DONE = frozenset({NodeStatus.FAILED, NodeStatus.CANCELLED, NodeStatus.SKIPPED})


FOLLOW_UP_TOOL = Builtin(
    FOLLOW_UP,
    "Ask the user one question and suspend this node until they answer. Name the arguments you need in "
    "expectedFields (their answers count as USER); without expectedFields only after an empty or failed query. "
    "With candidates (ids from your query results) the user chooses one, which fills the one expected field.",
    params(
        {
            "question": {"type": "string"},
            "expectedFields": {"type": "array", "items": {"type": "string"}, "description": "argument paths"},
            "suggestions": {"type": "array", "items": {"type": "string"}, "description": "options to offer"},
            "candidates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "label": {"type": "string"}},
                    "required": ["id", "label"],
                },
                "description": "a structured choice: [{id, label}], ids found in this node's query results",
            },
        },
        ("question",),
    ),
    follow_up,
)
APPROVAL_TOOL = Builtin(
    APPROVAL,
    "Ask the user to confirm the write call the runtime stopped with APPROVAL_REQUIRED; suspends this node. "
    "Several stopped writes of one tool are approved together by listing their call ids in callIds.",
    params(
        {
            "summary": {"type": "string", "description": "one sentence: what will be done"},
            "toolName": {"type": "string", "description": "the write tool that was stopped"},
            "callIds": {
                "type": "array",
                "items": {"type": "string"},
                "description": "optional: the call ids of the stopped writes to approve as one batch",
            },
        },
        ("summary", "toolName"),
    ),
    approval,
)
WAIT_EVENT_TOOL = Builtin(
    WAIT_EVENT,
    "Suspend this node until an external event (e.g. a payment callback) with this correlation key arrives; "
    "its payload becomes evidence of event:<NAME>. Without it by timeoutSeconds, you get EVENT_TIMEOUT.",
    params(
        {
            "event": {"type": "string", "description": "the event name, e.g. order.paid"},
            "correlationKey": {"type": "string", "description": "what the event is about, e.g. the order number"},
            "timeoutSeconds": {"type": "number", "description": "optional: how long to wait (default one day)"},
        },
        ("event", "correlationKey"),
    ),
    wait_event,
)
FINISH_TOOL = Builtin(
    FINISH,
    "Declare this node done. Refused while the goal write, required outputs or an unsettled write are missing.",
    params({"output": {"type": "string", "description": "the answer for the user"}}),
    finish,
)
FAIL_TOOL = Builtin(
    FAIL,
    "Declare that this node cannot reach its goal.",
    params({"reason": {"type": "string", "description": "why, for the user"}}, ("reason",)),
    fail,
)
DELEGATE_TOOL = Builtin(
    DELEGATE,
    "Delegate a read-only skill of this agent as a preceding node: it runs first, then this node continues with "
    "its result (its evidence counts for this node).",
    params({"skillKey": {"type": "string"}, "objective": {"type": "string"}}, ("skillKey",)),
    delegate,
)
