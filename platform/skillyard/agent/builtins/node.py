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

from ..codes import ErrorCode
from ..context import NodeContext
from ..contract import ArgContract, MissingAction, SourceType
from ..expressions import Prefix
from ..graph import MAX_TASK_NODES
from ..planner import write_target
from ..state import Checkpoint, CheckpointType, EvidenceStatus, NodeKind, NodeState, NodeStatus, Observation
from ..store import new_id
from .outputs import completion_refusal, publish
from .tool import Builtin, Call, JsonObject, params, text_arg

FOLLOW_UP = "builtin_node_follow_up"
APPROVAL = "builtin_node_approval"
FINISH = "builtin_node_finish"
FAIL = "builtin_node_fail"
DELEGATE = "builtin_node_delegate"


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
    problem = _ungrounded(ctx, fields)
    if problem is not None:
        return call.refuse(ErrorCode.FOLLOW_UP_UNGROUNDED, *problem)
    suggestions = [str(s) for s in args.get("suggestions") or [] if str(s).strip()]
    ctx.node.checkpoint = Checkpoint(CheckpointType.FOLLOW_UP, question, fields, suggestions)
    ctx.node.status = NodeStatus.SUSPENDED
    return call.ok({"status": NodeStatus.SUSPENDED.value, "checkpoint": CheckpointType.FOLLOW_UP.value})


async def approval(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    gated = ctx.node.gated
    if gated is None:
        return call.refuse(
            ErrorCode.APPROVAL_NOT_GATED,
            "no write call of this node is waiting for approval",
            "call the write tool first; ask for approval only after it answers APPROVAL_REQUIRED",
        )
    tool_name = text_arg(args, "toolName")
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
    question = f"{summary}\n{gated.summary}" if summary else gated.summary
    ctx.node.checkpoint = Checkpoint(
        CheckpointType.APPROVAL, question, tool=gated.tool, args=dict(gated.args), summary=gated.summary
    )
    ctx.node.status = NodeStatus.SUSPENDED
    return call.ok({"status": NodeStatus.SUSPENDED.value, "checkpoint": CheckpointType.APPROVAL.value})


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
    "expectedFields (their answers count as USER); without expectedFields only after an empty or failed query.",
    params(
        {
            "question": {"type": "string"},
            "expectedFields": {"type": "array", "items": {"type": "string"}, "description": "argument paths"},
            "suggestions": {"type": "array", "items": {"type": "string"}, "description": "options to offer"},
        },
        ("question",),
    ),
    follow_up,
)
APPROVAL_TOOL = Builtin(
    APPROVAL,
    "Ask the user to confirm the write call the runtime stopped with APPROVAL_REQUIRED; suspends this node.",
    params(
        {
            "summary": {"type": "string", "description": "one sentence: what will be done"},
            "toolName": {"type": "string", "description": "the write tool that was stopped"},
        },
        ("summary", "toolName"),
    ),
    approval,
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
