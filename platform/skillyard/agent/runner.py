"""The ReAct node runner and the agent API: ``send`` a message, ``resume`` a checkpoint (contract spec §10, §12–§14).

One turn: load the session (PostgreSQL), open or reopen its node, settle uncertain writes first (§14.3: a write
still ``STARTED`` from a process that died becomes ``UNKNOWN_PRE_CALL``; with a verify tool it is checked
automatically, without one the node suspends at VERIFY), then loop: the model sees the system prompt (prompt.py)
and the node's conversation, and its tool calls go through the builtins or the business tool chain (chain/). The
loop ends when the node finishes or fails, suspends at a checkpoint, answers with text and no tool call (the node
stays open for the session's next message), or uses up its step budget. Everything is saved before the turn
returns, so a new SkillYard on the same database resumes where this one stopped.

A new task is planned first (planner.py: the named skill, a single REACT candidate, or the model's
``builtin_plan``), its graph built with provider nodes (graph.py), and its execution binding pinned (binding.py):
every later turn and resume of the task runs the pinned manuals, contracts and tool schemas. Nodes then run one at
a time in dependency order within the turn; a node that delegates (§15) waits while its delegated node runs, then
continues with a note of the result. The turn's status is the task's: RUNNING while a node is open, SUSPENDED at a
checkpoint, else DONE, FAILED or CANCELLED.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Awaitable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from ..invoke.run import check_session_id
from . import graph as task_graph
from .answers import Answer, apply_edit, resume_action
from .binding import PinnedSkills, pin, skill_pin
from .binding import summary as binding_summary
from .branches import recovered
from .builtins import BUILTIN_NAMES, call_builtin, offered_builtins
from .builtins.node import batch_approval
from .chain import call_tool, can_verify, idempotency_key, preview_binding, verify_write
from .chain.summary import build_summary
from .codes import ErrorCode
from .context import NodeContext
from .errors import AgentError
from .evaluate import resolve
from .events import CANCELLED, TIMED_OUT, event_record, settle_wait
from .expressions import ExpressionError, Prefix, open_platform_fields, parse_expression
from .loader import ContractSkill, LoadedAgent
from .models import ChatModel
from .paths import get_path
from .planner import Plan, PlannedNode, plan_task
from .prompt import business_tool_functions, system_prompt
from .settings import AgentSettings
from .state import (
    EVENT_TOOL_PREFIX,
    Checkpoint,
    CheckpointType,
    Evidence,
    EvidenceStatus,
    GatedWrite,
    NodeKind,
    NodeState,
    NodeStatus,
    Observation,
    PlanSource,
    ResumeAction,
    SessionState,
    TaskState,
    now,
)
from .store import AgentStore, MemoryAgentStore, new_id
from .sub_agent import run_skill_md
from .turn import TurnResult

if TYPE_CHECKING:
    from ..catalog.skill import Skill
    from ..yard import SkillYard

#: Model calls per node and turn before the node fails (a runaway loop guard; FINGERPRINT_TRIP catches repeats).
STEP_BUDGET = 24
#: Recent user messages kept for USER provenance (§5.3).
USER_MESSAGES_KEPT = 20


def _checked_session_id(session_id: str) -> str:
    """The session id, refused before anything runs when it cannot be used (its workspace and attachments are
    named by it; the tools would all fail with it)."""
    if not isinstance(session_id, str):
        raise AgentError(f"the session id must be text such as 's1', not {type(session_id).__name__}")
    try:
        return check_session_id(session_id)
    except InvalidInput as exc:
        raise AgentError(str(exc)) from None


def _not_run(tool: str, arguments: Any, call_id: str | None, status: NodeStatus) -> Observation:
    """A later tool call of a reply whose earlier call suspended or ended the node: nothing is offered any more."""
    if status is NodeStatus.SUSPENDED:
        step = "wait for the user's answer; call the tool again after the node resumes if it is still needed"
    elif status is NodeStatus.WAITING:
        step = "wait for the delegated node; call the tool again after this node continues if it is still needed"
    else:
        step = "the node has ended; do not call tools again — reply with the results you already have"
    return Observation(
        tool,
        arguments,
        False,
        f"not run: an earlier call of the same reply left the node {status.value}",
        code=str(ErrorCode.CATALOG_DENIED),
        next_step=step,
        call_id=call_id,
    )


def check_message(message: Any, identity: Any) -> None:
    """Refuse a message that is not text and an identity that is not a mapping, before anything is stored."""
    if not isinstance(message, str):
        raise AgentError(f"the message must be text, not {type(message).__name__}")
    if identity is not None and not isinstance(identity, Mapping):
        raise AgentError(
            f"identity must be a mapping such as {{'user_id': '42', 'org_id': '7'}}, not {type(identity).__name__}"
        )


class Agent:
    """A loaded agent bound to a model: ``await agent.send(session, message)``, ``await agent.resume(…)``."""

    def __init__(
        self,
        yard: SkillYard,
        loaded: LoadedAgent,
        model: ChatModel,
        settings: AgentSettings,
        model_spec: str | None = None,
        store: AgentStore | MemoryAgentStore | None = None,
    ) -> None:
        self.yard = yard
        self.loaded = loaded
        self.model = model
        self.settings = settings
        self.model_spec = model_spec
        self.store = store if store is not None else AgentStore(yard.database)
        self._pins = PinnedSkills(open_platform_fields(settings.platform_hidden))

    @property
    def profile(self) -> Any:
        return self.loaded.profile

    # -- public API --------------------------------------------------------------------------------------------

    async def send(
        self,
        session_id: str,
        message: str,
        identity: Mapping[str, Any] | None = None,
        skill_key: str | None = None,
        *,
        wait: bool | float = True,
    ) -> TurnResult:
        """A user message: reopen the session's node (a suspended one takes it as its REPLY) or start a task.

        Turns of one session never run at once (its lock, store.py): ``wait=False`` raises
        :class:`~.store.SessionBusy` at once instead of waiting for a running turn to end."""
        check_message(message, identity)
        self.check_skill(skill_key)
        session_id = _checked_session_id(session_id)
        async with self.store.lock(session_id, wait=wait):
            session = await self._session(session_id, identity)
            if session.node_id is not None:
                ctx = await self._reopen(session)
                if ctx.node.status == NodeStatus.SUSPENDED and ctx.node.checkpoint is not None:
                    return await self._resume(ctx, ResumeAction.REPLY, message, Answer())
                ctx.node.answered = []  # a new turn: no follow-up answered in it yet
                self._user_says(ctx, message)
                return await self._turn(ctx, settle=True)
            return await self._new_task(session, message, skill_key)

    async def run_isolated(self, session: SessionState, goal: str, skill_key: str) -> TurnResult:
        """One turn of a fresh task in ``session`` (a sub-agent's own session, usually on a MemoryAgentStore)."""
        return await self._new_task(session, goal, skill_key)

    async def resume(
        self,
        session_id: str,
        action: str | ResumeAction,
        text: str | None = None,
        *,
        edit: Mapping[str, Any] | None = None,
        only: list[str] | None = None,
        approver: Mapping[str, Any] | None = None,
        wait: bool | float = True,
    ) -> TurnResult:
        """Answer the open checkpoint: REPLY (with text), CONFIRM, REJECT, CANCEL, or CHOOSE (text: a candidate id).

        At an APPROVAL, CONFIRM takes ``edit`` (argument path → value, approved as the approver's own values; a
        batch approval's edits are keyed by call id) and, for a batch, ``only`` (the call ids to run; the others
        are dropped). ``approver`` (an identity mapping, default the session's) is recorded with the approval."""
        chosen = resume_action(action)
        if text is not None and not isinstance(text, str):
            raise AgentError(f"the resume text must be text (or None), not {type(text).__name__}")
        answer = Answer.checked(chosen, edit, only, approver)
        session_id = _checked_session_id(session_id)
        async with self.store.lock(session_id, wait=wait):
            session = await self.store.load_session(session_id)
            if session is None or session.node_id is None:
                raise AgentError(f"session {session_id!r} has no open node to resume; start one with send / agent run")
            session.model_spec = self.model_spec or session.model_spec
            ctx = await self._reopen(session)
            if ctx.node.status != NodeStatus.SUSPENDED or ctx.node.checkpoint is None:
                raise AgentError(
                    f"the node of session {session_id!r} is {ctx.node.status.value}, not suspended at a checkpoint; "
                    "send a message instead"
                )
            return await self._resume(ctx, chosen, text, answer)

    async def event_arrived(
        self, session_id: str, wait_id: str, payload: dict[str, Any] | None, event_id: str | None = None
    ) -> TurnResult | None:
        """Resume the node waiting as ``wait_id`` with its event's payload (None: the wait timed out); None when
        the session's node no longer waits there (cancelled, resumed already)."""
        async with self.store.lock(session_id):
            session = await self.store.load_session(session_id)
            if session is None or session.node_id is None:
                return None
            session.model_spec = self.model_spec or session.model_spec
            ctx = await self._reopen(session)
            checkpoint = ctx.node.checkpoint
            if ctx.node.status != NodeStatus.SUSPENDED or checkpoint is None or checkpoint.wait_id != wait_id:
                return None
            return await self._event_resume(ctx, checkpoint, payload, event_id)

    def check_skill(self, skill_key: str | None) -> None:
        """Refuse a ``skill_key`` this agent has not loaded (None: the task is planned)."""
        if skill_key is not None and skill_key not in self.loaded.skills:
            known = ", ".join(self.loaded.skills) or "none"
            raise AgentError(f"no contract skill {skill_key!r} in agent {self.profile.agent_code!r} (loaded: {known})")

    # -- sessions and nodes ------------------------------------------------------------------------------------

    async def _session(self, session_id: str, identity: Mapping[str, Any] | None) -> SessionState:
        session = await self.store.load_session(_checked_session_id(session_id))
        if session is None:
            session = SessionState(id=session_id, agent_code=self.profile.agent_code)
        elif session.agent_code != self.profile.agent_code:
            raise AgentError(
                f"session {session_id!r} belongs to agent {session.agent_code!r}, not {self.profile.agent_code!r}; "
                "use another session id"
            )
        if identity:
            session.identity.update(identity)
        if self.loaded.source == "db":
            session.agent_source, session.agent_dir = "db", None
        else:
            session.agent_dir = str(self.loaded.dir.resolve())  # resume may run from another working directory
        session.model_spec = self.model_spec or session.model_spec
        return session

    def _skills(self, task: TaskState) -> dict[str, ContractSkill]:
        """The task's contract skills: the pinned ones where the task pinned them, else the loaded ones (a skill
        first used later, e.g. a delegatable skill of an older task, is pinned on first use)."""
        pinned = task.binding.setdefault("skills", {})
        skills = {key: self._skill(task, key) for key in pinned}
        return {**self.loaded.skills, **skills}

    def _skill(self, task: TaskState, key: str) -> ContractSkill:
        pinned = task.binding.setdefault("skills", {})
        current = self.loaded.skills.get(key)
        if key not in pinned:
            if current is None:
                raise AgentError(f"skill {key!r} of the open node is no longer loaded; check the agent folder")
            pinned[key] = skill_pin(self.yard, current)
        return self._pins.get(key, pinned[key], current)

    def _context(
        self,
        session: SessionState,
        task: TaskState,
        node: NodeState,
        graph: dict[str, NodeState],
        evidence: list[Evidence],
    ) -> NodeContext:
        return NodeContext(
            self.yard,
            self._skill(task, node.skill_key),
            session,
            task,
            node,
            self.store,
            self.settings,
            evidence=evidence,
            upstream_node_ids=task_graph.upstream_ids(node, graph),
            model=self.model,
            sub_agent=self._run_sub_agent,
            graph=graph,
            skills=self._skills(task),
        )

    def _run_sub_agent(self, ctx: NodeContext, skill: Skill, args: dict[str, Any]) -> Awaitable[dict[str, Any]]:
        """A skill_md business tool as an isolated sub-agent on this node's model and settings."""

        def make_agent(loaded: LoadedAgent, store: MemoryAgentStore) -> Agent:
            return Agent(self.yard, loaded, ctx.model, ctx.settings, store=store)

        return run_skill_md(ctx, skill, args, make_agent)

    # -- planning a task ---------------------------------------------------------------------------------------

    async def _plan(self, session: SessionState, message: str, skill_key: str | None) -> Plan:
        candidates = self.loaded.skills
        if skill_key is not None:
            return Plan([PlannedNode(None, skill_key, message)], PlanSource.EXPLICIT)
        first = next(iter(candidates))
        if len(candidates) == 1 and candidates[first].contract.mode.value == "REACT":
            return Plan([PlannedNode(None, first, message)], PlanSource.SINGLE_REACT)
        return await plan_task(self.model, self.profile, candidates, message, session.model_state)

    async def _new_task(self, session: SessionState, message: str, skill_key: str | None) -> TurnResult:
        """Plan a task, build its graph, pin its binding, and run its first node (or report why it cannot run)."""
        plan = await self._plan(session, message, skill_key)
        task = TaskState(id=new_id("task"), session_id=session.id, message=message, plan_source=plan.source)
        task.plan_notes += plan.notes
        try:
            nodes = task_graph.build_graph(plan, self.loaded.skills, task, session, self.profile.agent_code)
        except task_graph.PlanningFailed as exc:
            task.status = NodeStatus.FAILED
            task.plan_notes.append(str(exc))
            await self.store.save_task(task)
            result = TurnResult(session.id, NodeStatus.FAILED.value, reply=str(exc), task_id=task.id)
            result.graph, result.binding = task_graph.view(task, {}), binding_summary(task.binding)
            return result
        graph = {node.id: node for node in nodes}
        task.node_ids = [node.id for node in nodes]
        pinned = {node.skill_key for node in nodes}
        pinned |= {k for k, s in self.loaded.skills.items() if s.contract.delegatable}
        task.binding = pin(self.yard, [s for k, s in self.loaded.skills.items() if k in pinned])
        result = TurnResult(session.id, NodeStatus.RUNNING.value)
        result.touched += task.node_ids  # the turn saves every node: one still PENDING must survive a restart
        ctx, last = self._next_runnable(session, task, graph, [], result)
        if ctx is None:  # every node was skipped: nothing to run, nothing to say
            assert last is not None  # a new graph has a node without upstream nodes
            return await self._finish_turn(last, result)
        _heard(session, message)  # the node's conversation opened with it already
        return await self._turn(ctx, result=result)

    def _next_runnable(
        self,
        session: SessionState,
        task: TaskState,
        graph: dict[str, NodeState],
        evidence: list[Evidence],
        result: TurnResult,
    ) -> tuple[NodeContext | None, NodeContext | None]:
        """Start the next node that can run, skipping provider nodes whose shared outputs exist (§7): its context
        (None when no node can run) and the last node started (for a turn that ends on a skipped one). Branch
        decisions are made first (graph.settle); the nodes they skip are saved with the turn."""
        last = None
        while True:
            skipped = task_graph.settle(task, graph, evidence)
            result.touched += [n.id for n in skipped if n.id not in result.touched]
            node = task_graph.next_node(task, graph)
            if node is None:
                return None, last
            last = self._start_node(session, task, node, graph, evidence, result)
            reason = self._skip_reason(last)
            if reason is None:
                self._opening(last)
                return last, last
            node.status, node.skipped_reason = NodeStatus.SKIPPED, reason

    def _start_node(
        self,
        session: SessionState,
        task: TaskState,
        node: NodeState,
        graph: dict[str, NodeState],
        evidence: list[Evidence],
        result: TurnResult,
    ) -> NodeContext:
        """Make ``node`` the session's running node: bind its inputs (§7)."""
        node.status = NodeStatus.RUNNING
        session.task_id, session.node_id = task.id, node.id
        ctx = self._context(session, task, node, graph, evidence)
        self._bind_inputs(ctx)
        if node.id not in result.touched:
            result.touched.append(node.id)
        return ctx

    def _skip_reason(self, ctx: NodeContext) -> str | None:
        """§7: a provider node whose declared shared outputs all exist already is SKIPPED."""
        if ctx.node.kind is not NodeKind.PROVIDER:
            return None
        shared = [(k, o.share) for k, o in ctx.skill.contract.outputs.items() if o.share is not None]
        if not shared:
            return None
        for key, scope in shared:
            values = ctx.task.shared if scope.value == "TASK" else ctx.session.values
            if key not in values:
                return None
        return "its shared outputs already exist: " + ", ".join(k for k, _ in shared)

    def _bind_inputs(self, ctx: NodeContext) -> None:
        """§7: bind declared inputs at node start (fill only, never overwrite). ``outputs.<key>``, and a ``from``
        with no §9 prefix (or none at all), read the nearest DONE upstream node's output of that name."""
        for name, spec in ctx.skill.contract.inputs.items():
            if name in ctx.node.inputs:
                continue
            try:
                expr = parse_expression(spec.from_expr) if spec.from_expr else None
            except ExpressionError:
                expr = None
            if expr is None:
                found, value = self._upstream_output(ctx, name, "")
            elif expr.prefix is Prefix.OUTPUTS:
                found, value = self._upstream_output(ctx, expr.head, ".".join(expr.parts[1:]))
            else:
                found, value, _source = resolve(ctx, expr)
            if found:
                ctx.node.inputs[name] = value

    def _upstream_output(self, ctx: NodeContext, key: str, path: str) -> tuple[bool, Any]:
        for node_id in ctx.upstream_node_ids:
            node = ctx.graph[node_id]
            written = node.outputs.get(key) if node.status is NodeStatus.DONE else None
            if written is not None:
                return get_path(written.value, path)
        return False, None

    async def _reopen(self, session: SessionState) -> NodeContext:
        assert session.node_id is not None and session.task_id is not None
        task = await self.store.load_task(session.task_id)
        nodes = await self.store.load_nodes(session.task_id)
        graph = {node.id: node for node in nodes}
        node = graph.get(session.node_id)
        if node is None or task is None:
            raise AgentError(f"the open node of session {session.id!r} is missing from the database")
        evidence = await self.store.load_evidence(task.id)
        ctx = self._context(session, task, node, graph, evidence)
        for record in ctx.node_evidence():
            if record.status == EvidenceStatus.STARTED:  # its call never came back: the process stopped mid-call
                record.status = EvidenceStatus.UNKNOWN_PRE_CALL
                await ctx.record(record)
        return ctx

    def _user_says(self, ctx: NodeContext, message: str, shown: str | None = None) -> None:
        """``message`` joins the user messages (USER provenance); ``shown`` (default: the message) the node's
        conversation."""
        _heard(ctx.session, message)
        ctx.node.messages.append({"role": "user", "content": message if shown is None else shown})

    # -- a turn ------------------------------------------------------------------------------------------------

    async def _turn(
        self,
        ctx: NodeContext,
        observations: list[Observation] | None = None,
        *,
        settle: bool = False,
        not_yet: Collection[str] = (),
        result: TurnResult | None = None,
    ) -> TurnResult:
        """Run nodes until the turn stops; ``settle``: the node was reopened, so uncertain writes come first (§14.3),
        except the evidence ids ``not_yet`` (writes that have just run: they are checked when the node next reopens).

        The turn stops when a node suspends, when a node answers with text and no tool call (it stays open for the
        session's next message), or when no node of the task can run any more."""
        if result is None:
            result = TurnResult(ctx.session.id, ctx.node.status.value)
        result.observations += observations or []
        if ctx.node.id not in result.touched:
            result.touched.append(ctx.node.id)
        if settle:
            await self._settle_open_writes(ctx, result, not_yet)
        looped: set[str] = set()
        while True:
            if ctx.node.status == NodeStatus.RUNNING:
                if ctx.node.id not in looped:  # the budget is per node and turn, not per reactivation
                    ctx.node.steps = 0
                    looped.add(ctx.node.id)
                await self._loop(ctx, result)
                if ctx.node.status == NodeStatus.RUNNING:
                    break  # text without a tool call: the node stays open
            if ctx.node.status == NodeStatus.SUSPENDED:
                break
            following = self._advance(ctx, result)
            if following is None:
                break
            result.events += ctx.events
            result.approvals += ctx.approvals
            ctx = following
        return await self._finish_turn(ctx, result)

    def _advance(self, ctx: NodeContext, result: TurnResult) -> NodeContext | None:
        """The node to continue with after ``ctx.node`` ended or started waiting, or None when none can run."""
        node, task, graph = ctx.node, ctx.task, ctx.graph
        if node.status == NodeStatus.WAITING:  # it delegated: its delegated node runs now
            pending = [graph[i] for i in task.node_ids if graph[i].status is NodeStatus.PENDING]
            child = next(n for n in pending if n.parent_id == node.id)
            following = self._start_node(ctx.session, task, child, graph, ctx.evidence, result)
            self._opening(following)
            return following
        if node.parent_id is not None and node.parent_id in graph:  # a delegated node ended: its delegator goes on
            parent = graph[node.parent_id]
            parent.status = NodeStatus.RUNNING
            parent.messages.append({"role": "user", "content": _delegation_note(node)})
            ctx.session.node_id = parent.id
            return self._context(ctx.session, task, parent, graph, ctx.evidence)
        return self._next_runnable(ctx.session, task, graph, ctx.evidence, result)[0]

    def _opening(self, ctx: NodeContext) -> None:
        """A node started inside a turn opens with the task's message (a delegated one with its objective as the
        delegator wrote it: model text, so it never counts as something the user said)."""
        if ctx.node.kind is NodeKind.DELEGATED:
            ctx.node.messages.append({"role": "user", "content": f"(delegated) {ctx.node.goal}"})
        else:
            ctx.node.messages.append({"role": "user", "content": ctx.task.message})

    async def _settle_open_writes(self, ctx: NodeContext, result: TurnResult, not_yet: Collection[str] = ()) -> None:
        """§14.3: an uncertain write is verified (verify tool) or asked about (VERIFY) before anything else."""
        for record in ctx.node_evidence():
            if record.status not in (EvidenceStatus.UNKNOWN, EvidenceStatus.UNKNOWN_PRE_CALL) or record.id in not_yet:
                continue
            contract = ctx.tool_contract(record.tool)
            if can_verify(ctx, record):  # a verify tool, or an asynchronous write's task to poll
                observation = await verify_write(ctx, record)
                result.observations.append(observation)
                ctx.node.messages.append({"role": "user", "content": _note("verify", observation)})
                continue
            label = (contract.label if contract else None) or record.tool
            summary = build_summary(contract, record.args, {})  # which write: two alike must read differently
            ctx.node.checkpoint = Checkpoint(
                CheckpointType.VERIFY,
                f"不确定「{label}」是否已经生效（调用没有返回结果）：\n{summary}\n请确认它是否已完成。",
                tool=record.tool,
                args=record.args,
                evidence_id=record.id,
            )
            ctx.node.status = NodeStatus.SUSPENDED
            return

    async def _loop(self, ctx: NodeContext, result: TurnResult) -> None:
        while ctx.node.status == NodeStatus.RUNNING:
            if ctx.node.steps >= STEP_BUDGET:
                ctx.node.status = NodeStatus.FAILED
                ctx.node.reply = f"stopped after {STEP_BUDGET} model steps without finishing"
                return
            ctx.node.steps += 1
            messages = [{"role": "system", "content": system_prompt(ctx, self.profile)}, *ctx.node.messages]
            tools = [*business_tool_functions(ctx), *offered_builtins(ctx)]
            reply = await self.model.complete(messages, tools, ctx.session.model_state)
            ctx.node.messages.append(reply.to_message())
            if not reply.tool_calls:
                result.reply = reply.text
                return  # text without a tool call ends the turn; the node stays open
            for call in reply.tool_calls:
                if ctx.node.status != NodeStatus.RUNNING:
                    observation = _not_run(call.name, call.arguments, call.id, ctx.node.status)
                elif call.name in BUILTIN_NAMES:
                    observation = await call_builtin(ctx, call.name, call.arguments, call_id=call.id)
                else:
                    observation = await call_tool(ctx, call.name, call.arguments, call_id=call.id)
                result.observations.append(observation)
                ctx.node.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": json.dumps(observation.for_model(), ensure_ascii=False, default=str),
                    }
                )
            await self._save(ctx)

    async def _finish_turn(self, ctx: NodeContext, result: TurnResult) -> TurnResult:
        node, task, session, graph = ctx.node, ctx.task, ctx.session, ctx.graph
        if node.id not in result.touched:
            result.touched.append(node.id)
        if node.status == NodeStatus.SUSPENDED:
            task.status = NodeStatus.SUSPENDED
        elif node.status == NodeStatus.RUNNING:
            task.status = NodeStatus.RUNNING
        else:
            task.status = task_graph.verdict(task, graph)
            session.task_id = session.node_id = None
            result.reply = _task_reply(task, graph, node) or result.reply
        checkpoint = node.checkpoint if node.status == NodeStatus.SUSPENDED else None
        if checkpoint is not None:
            result.checkpoint = checkpoint_view(checkpoint)
            result.reply = result.reply or checkpoint.question
        result.status = task.status.value
        result.task_id, result.node_id = task.id, node.id
        result.events += ctx.events
        result.approvals += ctx.approvals
        touched = set(result.touched)
        result.evidence = [
            {"id": e.id, "tool": e.tool, "status": e.status.value, "business_ok": e.business_ok}
            for e in ctx.evidence
            if e.node_id in touched
        ]
        result.graph = task_graph.view(task, graph)
        result.binding = binding_summary(task.binding)
        await self._save(ctx, [graph[i] for i in result.touched if i in graph] + [node])
        for node_id in dict.fromkeys([*result.touched, node.id]):  # §6.3 step 3: the turn's artifacts, sent once
            await self.yard.channels.artifacts.flush(node_id)
        return result

    async def _save(self, ctx: NodeContext, nodes: list[NodeState] | None = None) -> None:
        await self.store.save_graph(nodes or [ctx.node], ctx.task, ctx.session)

    # -- checkpoints -------------------------------------------------------------------------------------------

    async def _resume(self, ctx: NodeContext, action: ResumeAction, text: str | None, answer: Answer) -> TurnResult:
        checkpoint = ctx.node.checkpoint
        assert checkpoint is not None
        kind = checkpoint.type
        answer.fits(kind, action, ctx.session.id)
        if kind is CheckpointType.EVENT and action is not ResumeAction.CANCEL and action is not ResumeAction.REJECT:
            return await self._at_event(ctx, checkpoint, text)
        if action == ResumeAction.CANCEL or (action == ResumeAction.REJECT and kind != CheckpointType.VERIFY):
            return await self._cancel(ctx, checkpoint, answer)
        if kind == CheckpointType.VERIFY and action == ResumeAction.REPLY:
            # only CONFIRM (took effect) / REJECT (did not) settle an uncertain write; a message leaves it open
            return await self._finish_turn(ctx, TurnResult(ctx.session.id, NodeStatus.SUSPENDED.value))
        ctx.node.answered = []
        observations: list[Observation] = []
        # §14.3: the reopened node settles its uncertain writes first — all but a confirmed write that has just run
        # (a write that has just become uncertain is checked when the node next reopens, not at once)
        just_ran: set[str] = set()
        if kind == CheckpointType.CHOICE and action == ResumeAction.CHOOSE:
            refused = self._choose(ctx, checkpoint, text)
            if refused is not None:
                return await self._refused(ctx, *refused)
        elif kind in (CheckpointType.FOLLOW_UP, CheckpointType.CHOICE):
            answer_text = text if text is not None else ("确认" if action == ResumeAction.CONFIRM else "")
            if not answer_text.strip():
                raise AgentError("REPLY needs the user's answer: pass text")
            for name in checkpoint.expected_fields:
                ctx.node.user_fields[name] = answer_text
            # §12: the answer enters the history with its question and the arguments it answers
            fields = "、".join(checkpoint.expected_fields)
            about = f"（回答追问「{checkpoint.question}」" + (f"；对应参数：{fields}" if fields else "") + "）"
            self._answered(ctx, checkpoint, answer_text, about)
        elif kind == CheckpointType.APPROVAL:
            if action == ResumeAction.REPLY:
                ctx.node.gated = None
                ctx.node.pending_writes = []
                self._reopen_node(ctx)
                self._user_says(ctx, text or "")
            else:
                ran = await self._approve(ctx, checkpoint, answer)
                if isinstance(ran, TurnResult):
                    return ran
                observations = ran
                just_ran = {o.evidence_id for o in observations if o.evidence_id}
        else:  # VERIFY: CONFIRM = it took effect, REJECT = it did not; the node continues either way
            record = next((e for e in ctx.evidence if e.id == checkpoint.evidence_id), None)
            if record is not None:
                took_effect = action == ResumeAction.CONFIRM
                record.status = EvidenceStatus.SUCCESS if took_effect else EvidenceStatus.FAILED
                record.business_ok = took_effect
                await ctx.record(record)
            self._reopen_node(ctx)
            verdict = "已生效" if action == ResumeAction.CONFIRM else "未生效"
            ctx.node.messages.append(
                {"role": "user", "content": f"用户确认：写操作 {checkpoint.tool} {verdict}。" + (text or "")}
            )
        return await self._turn(ctx, observations or None, settle=True, not_yet=just_ran)

    def _choose(self, ctx: NodeContext, checkpoint: Checkpoint, text: str | None) -> tuple[ErrorCode, str, str] | None:
        """CHOOSE at a CHOICE: the listed id becomes the USER value of the expected field; else the refusal."""
        chosen = (text or "").strip()
        offered = {c["id"]: c for c in checkpoint.candidates}
        if chosen not in offered:
            valid = ", ".join(offered)
            return (
                ErrorCode.CHOICE_INVALID,
                f"{chosen or '(nothing)'!r} is not one of the offered ids: {valid}",
                f"resume with CHOOSE and one of {valid}, REPLY with free text, or CANCEL",
            )
        field = checkpoint.expected_fields[0]
        ctx.node.user_fields[field] = ctx.node.chosen[field] = chosen
        label = offered[chosen]["label"]
        self._answered(
            ctx, checkpoint, chosen, f"（选择追问「{checkpoint.question}」的候选项：{label}；对应参数：{field}）"
        )
        return None

    def _answered(self, ctx: NodeContext, checkpoint: Checkpoint, answer: str, about: str) -> None:
        """A follow-up or choice answered: remembered for this turn (FOLLOW_UP_ANSWERED), the node running again,
        the answer heard (USER provenance) and shown to the model with what it answers."""
        ctx.node.answered.append({"question": checkpoint.question, "expected_fields": checkpoint.expected_fields})
        self._reopen_node(ctx)
        self._user_says(ctx, answer, shown=f"{answer}\n{about}")

    async def _approve(
        self, ctx: NodeContext, checkpoint: Checkpoint, answer: Answer
    ) -> list[Observation] | TurnResult:
        """CONFIRM at an APPROVAL: run the approved write(s) — the whole batch or ``only`` — with the approver's
        edits; a changed or expired approval raises a fresh one instead (fail closed, §14.1)."""
        calls = checkpoint.calls or [_single(ctx, checkpoint)]
        by_id = {c.call_id: c for c in calls}
        if answer.only is not None:
            unknown = [i for i in answer.only if i not in by_id]
            if not checkpoint.calls or unknown:
                listed = ", ".join(str(i) for i in by_id if i) or "none (this approval is not a batch)"
                return await self._refused(
                    ctx,
                    ErrorCode.APPROVAL_BATCH_UNKNOWN_CALL,
                    f"--only names calls this approval does not list: {', '.join(unknown) or ', '.join(answer.only)}",
                    f"confirm with --only naming listed call ids ({listed}), or confirm without --only",
                )
        if self._approval_expired_or_changed(ctx, checkpoint, calls):
            return await self._finish_turn(ctx, TurnResult(ctx.session.id, NodeStatus.SUSPENDED.value))
        edits = answer.edits_for(calls, bool(checkpoint.calls))
        if isinstance(edits, tuple):
            return await self._refused(ctx, *edits)
        edited: dict[int, dict[str, Any]] = {}
        for index, gated in enumerate(calls):
            if edits.get(index):
                result = apply_edit(ctx, gated, edits[index])
                if isinstance(result, tuple):
                    return await self._refused(ctx, *result)
                edited[index] = result
        self._reopen_node(ctx)
        ctx.node.gated = None
        run = [i for i, c in enumerate(calls) if answer.only is None or c.call_id in answer.only]
        done_keys = {c.idempotency_key for c in calls}
        ctx.node.pending_writes = [g for g in ctx.node.pending_writes if g.idempotency_key not in done_keys]
        observations: list[Observation] = []
        record: list[dict[str, Any]] = []
        for index, gated in enumerate(calls):
            entry: dict[str, Any] = {"call_id": gated.call_id, "tool": gated.tool, "summary": gated.summary}
            if index not in run:
                record.append({**entry, "ran": False})
                continue
            args = edited.get(index, gated.args)
            for path, value in edits.get(index, {}).items():  # the approver's values count as USER (§5.3)
                ctx.node.user_fields[path] = value
            observation = await call_tool(ctx, gated.tool, args, call_id=gated.call_id, approved=True)
            observations.append(observation)
            record.append(
                {**entry, "ran": True, "ok": observation.ok, **({"edit": edits[index]} if edits.get(index) else {})}
            )
            ctx.node.messages.append({"role": "user", "content": _note("confirmed", observation)})
        dropped = [f"{c.tool} ({c.call_id})" for i, c in enumerate(calls) if i not in run]
        if dropped:
            ctx.node.messages.append(
                {"role": "user", "content": "用户没有批准这些写操作，它们没有执行：" + "、".join(dropped) + "。"}
            )
        self._record_approval(ctx, "CONFIRM", answer, record)
        return observations

    def _record_approval(self, ctx: NodeContext, action: str, answer: Answer, calls: list[dict[str, Any]]) -> None:
        """The approval record: who answered, when, and what each listed write became (with any edit)."""
        approver = dict(answer.approver) if answer.approver is not None else dict(ctx.session.identity)
        entry = {"at": now(), "action": action, "approver": approver, "calls": calls}
        ctx.node.approvals.append(entry)
        ctx.approvals.append(entry)

    async def _refused(self, ctx: NodeContext, code: ErrorCode, message: str, next_step: str) -> TurnResult:
        """A resume the runtime does not take: the checkpoint stays as it was, and the turn says why."""
        result = TurnResult(ctx.session.id, NodeStatus.SUSPENDED.value, reply=f"{message}\n{next_step}")
        result.refusal = {"code": code.value, "name": code.name, "message": message, "next_step": next_step}
        return await self._finish_turn(ctx, result)

    async def _at_event(self, ctx: NodeContext, checkpoint: Checkpoint, text: str | None) -> TurnResult:
        """A message (REPLY) at an EVENT checkpoint: past the deadline the wait times out now; before it, the node
        keeps waiting (the message is heard, for USER provenance later)."""
        if checkpoint.deadline is not None and now() >= checkpoint.deadline and checkpoint.wait_id:
            await settle_wait(self.yard, checkpoint.wait_id, TIMED_OUT)
            return await self._event_resume(ctx, checkpoint, None, None)
        if text:
            _heard(ctx.session, text)
            ctx.node.messages.append({"role": "user", "content": text})
        waiting = f"仍在等待外部事件 {checkpoint.event}（{checkpoint.key}），截止 {_iso(checkpoint.deadline)}。"
        return await self._finish_turn(ctx, TurnResult(ctx.session.id, NodeStatus.SUSPENDED.value, reply=waiting))

    async def _event_resume(
        self, ctx: NodeContext, checkpoint: Checkpoint, payload: dict[str, Any] | None, event_id: str | None
    ) -> TurnResult:
        """The node goes on with the event's payload as evidence of ``event:<NAME>``, or with EVENT_TIMEOUT."""
        name, key = checkpoint.event or "", checkpoint.key or ""
        self._reopen_node(ctx)
        ctx.node.answered = []
        if payload is None:
            observation = Observation(
                f"{EVENT_TOOL_PREFIX}{name}",
                {"event": name, "correlationKey": key},
                False,
                f"the wait for event {name} (key {key}) reached its deadline {_iso(checkpoint.deadline)}",
                code=ErrorCode.EVENT_TIMEOUT.value,
                next_step="wait again with builtin_node_wait_event, ask the user with builtin_node_follow_up, or "
                "call builtin_node_fail with the reason",
            )
        else:
            record = event_record(ctx, name, key, payload, event_id)
            await ctx.record(record)
            observation = Observation(
                record.tool, {"event": name, "correlationKey": key}, True, payload, evidence_id=record.id
            )
        body = json.dumps(observation.for_model(), ensure_ascii=False, default=str)
        ctx.node.messages.append({"role": "user", "content": f"外部事件 {name}（{key}）：{body}"})
        return await self._turn(ctx, [observation], settle=True)

    def _reopen_node(self, ctx: NodeContext) -> None:
        ctx.node.checkpoint = None
        ctx.node.status = NodeStatus.RUNNING

    def _approval_expired_or_changed(self, ctx: NodeContext, checkpoint: Checkpoint, calls: list[GatedWrite]) -> bool:
        """False when the approved writes may run; else a new APPROVAL checkpoint is raised (fail closed, §14.1)."""
        expired = now() - checkpoint.created_at > self.settings.reconfirm_after.total_seconds()
        previews = [preview_binding(ctx, c.tool, c.args) for c in calls]
        if not checkpoint.calls:
            args, summary = previews[0]
            if not expired and args == checkpoint.args and summary == checkpoint.summary:
                return False
        elif not expired and all(p == (c.args, c.summary) for p, c in zip(previews, calls, strict=True)):
            return False
        reason = (
            "这次确认已超过有效期，请重新确认。"
            if expired
            else "待执行的参数在等待确认期间发生了变化，请按新参数重新确认。"
        )
        if not checkpoint.calls:
            args, summary = previews[0]
            ctx.node.checkpoint = Checkpoint(
                CheckpointType.APPROVAL, reason + "\n" + summary, tool=checkpoint.tool, args=args, summary=summary
            )
            return True
        fresh = [
            dataclasses.replace(c, args=args, summary=summary)
            for c, (args, summary) in zip(calls, previews, strict=True)
        ]
        ctx.node.checkpoint = batch_approval(reason, fresh)
        return True

    async def _cancel(self, ctx: NodeContext, checkpoint: Checkpoint, answer: Answer) -> TurnResult:
        ctx.node.status = NodeStatus.CANCELLED
        ctx.node.checkpoint = None
        ctx.node.gated = None
        ctx.node.pending_writes = []
        if checkpoint.type == CheckpointType.APPROVAL and checkpoint.tool:
            tools = "、".join(dict.fromkeys(c.tool for c in checkpoint.calls)) or checkpoint.tool
            ctx.node.reply = f"已取消：写操作 {tools} 没有执行。"
            calls = checkpoint.calls or [_single(ctx, checkpoint)]
            self._record_approval(
                ctx, "REJECT", answer, [{"call_id": c.call_id, "tool": c.tool, "summary": c.summary, "ran": False}
                                         for c in calls]
            )  # fmt: skip
        else:
            ctx.node.reply = "已取消。"
        if checkpoint.type == CheckpointType.EVENT and checkpoint.wait_id:
            await settle_wait(self.yard, checkpoint.wait_id, CANCELLED)
        return await self._turn(ctx)


def _heard(session: SessionState, message: str) -> None:
    """The user said ``message``: it joins the recent user messages USER provenance reads (§5.3)."""
    session.user_messages = [*session.user_messages, message][-USER_MESSAGES_KEPT:]


def _delegation_note(node: NodeState) -> str:
    """What the delegating node reads when its delegated node has ended (§15)."""
    if node.status is NodeStatus.DONE:
        return (
            f"The delegated skill {node.skill_key} finished ({node.id}): {node.reply or ''}\n"
            "Its evidence is available to you through evidence.* and counts for your goal. Continue your task."
        )
    reason = node.skipped_reason or node.reply or "no reason given"
    return (
        f"The delegated skill {node.skill_key} did not finish ({node.id} is {node.status.value}): {reason}\n"
        "Decide how to go on: do the work with your own tools, ask the user, or call builtin_node_fail."
    )


def _task_reply(task: TaskState, graph: dict[str, NodeState], last: NodeState) -> str | None:
    """The reply of a turn that ended its task: the last node's finish output, or why the task failed."""
    if task.status is not NodeStatus.FAILED:
        return last.reply
    counted = [graph[i] for i in task.node_ids if graph[i].kind is not NodeKind.DELEGATED]
    failed = next(
        (n for n in counted if n.status in task_graph.STOPPED and n.skipped_reason is None and not recovered(n, graph)),
        last,
    )
    reply = failed.reply or ""
    not_run = [n for n in counted if n.skipped_reason is not None and n.status is NodeStatus.CANCELLED]
    if not_run:
        listed = ", ".join(f"{n.skill_key} ({n.id})" for n in not_run)
        reply += f"\n(not run because node {failed.id} ({failed.skill_key}) {failed.status.value}: {listed})"
    return reply


def _note(kind: str, observation: Observation) -> str:
    body = json.dumps(observation.for_model(), ensure_ascii=False, default=str)
    if kind == "confirmed":
        return f"用户已确认，写操作 {observation.tool} 已按确认的参数执行，结果：{body}。请继续完成任务。"
    return f"平台已回查不确定的写操作 {observation.tool}，结果：{body}。"


def checkpoint_view(checkpoint: Checkpoint) -> dict[str, Any]:
    """A checkpoint in a turn's JSON: the part-1 keys, and what a CHOICE, an EVENT or a batch APPROVAL adds."""
    view: dict[str, Any] = {
        "type": checkpoint.type.value,
        "question": checkpoint.question,
        "expected_fields": checkpoint.expected_fields,
        "suggestions": checkpoint.suggestions,
        "tool": checkpoint.tool,
    }
    if checkpoint.type is CheckpointType.CHOICE:
        view["candidates"] = [dict(c) for c in checkpoint.candidates]
    elif checkpoint.type is CheckpointType.EVENT:
        view.update(event=checkpoint.event, key=checkpoint.key, deadline=_iso(checkpoint.deadline))
    if checkpoint.calls:
        view["calls"] = [{"call_id": c.call_id, "tool": c.tool, "summary": c.summary} for c in checkpoint.calls]
    return view


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds")


def _single(ctx: NodeContext, checkpoint: Checkpoint) -> GatedWrite:
    """The one write of a part-1 APPROVAL checkpoint, as the gated write a batch lists."""
    assert checkpoint.tool is not None and checkpoint.args is not None
    gated = ctx.node.gated
    if gated is not None and gated.tool == checkpoint.tool:
        key, call_id, sources = gated.idempotency_key, gated.call_id, dict(gated.sources)
    else:
        key, call_id, sources = (
            idempotency_key(checkpoint.tool, ctx.tool_contract(checkpoint.tool), checkpoint.args),
            None,
            {},
        )
    return GatedWrite(checkpoint.tool, dict(checkpoint.args), sources, checkpoint.summary or "", key, call_id=call_id)


async def agent_for_session(yard: SkillYard, session_id: str, model: Any = None) -> Agent:
    """The agent a stored session runs with: its folder (or stored agent) and model spec, read from the session."""
    session = await AgentStore(yard.database).load_session(_checked_session_id(session_id))
    if session is None:
        raise AgentError(f"no agent session {session_id!r}; start it with `skillyard agent run`")
    spec = model if model is not None else session.model_spec
    if session.agent_source == "db":
        return await yard.agent_from_db(session.agent_code, model=spec)
    if session.agent_dir:
        return await yard.agent(session.agent_dir, model=spec)
    raise AgentError(f"session {session_id!r} does not record its agent folder; resume it through the Python API")


async def resume_session(
    yard: SkillYard,
    session_id: str,
    action: str,
    text: str | None = None,
    model: Any = None,
    *,
    edit: Mapping[str, Any] | None = None,
    only: list[str] | None = None,
    approver: Mapping[str, Any] | None = None,
) -> TurnResult:
    """Resume a session by id alone: the agent folder and model spec are read from the stored session."""
    agent = await agent_for_session(yard, session_id, model)
    return await agent.resume(session_id, action, text, edit=edit, only=only, approver=approver)
