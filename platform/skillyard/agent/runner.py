"""The ReAct node runner and the agent API: ``send`` a message, ``resume`` a checkpoint (contract spec §10, §12–§14).

One turn: load the session (PostgreSQL), open or reopen its node, settle uncertain writes first (§14.3: a write
still ``STARTED`` from a process that died becomes ``UNKNOWN_PRE_CALL``; with a verify tool it is checked
automatically, without one the node suspends at VERIFY), then loop: the model sees the system prompt (prompt.py)
and the node's conversation, and its tool calls go through the builtins or the business tool chain (chain/). The
loop ends when the node finishes or fails, suspends at a checkpoint, answers with text and no tool call (the node
stays open for the session's next message), or uses up its step budget. Everything is saved before the turn
returns, so a new SkillYard on the same database resumes where this one stopped.

Part 1 runs one node per task: the contract skill is the one named in ``send(skill_key=…)``, else the agent's first
loaded skill (the planner that picks among several is part 2).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput, SkillyardError
from ..invoke.run import check_session_id
from .builtins import BUILTIN_NAMES, call_builtin, offered_builtins
from .chain import call_tool, preview_binding, verify_write
from .chain.summary import build_summary
from .codes import ErrorCode
from .context import NodeContext
from .evaluate import resolve
from .expressions import ExpressionError
from .loader import LoadedAgent
from .models import ChatModel
from .prompt import business_tool_functions, system_prompt
from .settings import AgentSettings
from .state import (
    Checkpoint,
    CheckpointType,
    EvidenceStatus,
    NodeState,
    NodeStatus,
    Observation,
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


class AgentError(SkillyardError):
    """A send / resume that cannot be carried out (no open checkpoint, unknown skill …); the message says why."""


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

    @property
    def profile(self) -> Any:
        return self.loaded.profile

    # -- public API --------------------------------------------------------------------------------------------

    async def send(
        self, session_id: str, message: str, identity: Mapping[str, Any] | None = None, skill_key: str | None = None
    ) -> TurnResult:
        """A user message: reopen the session's node (a suspended one takes it as its REPLY) or start a task."""
        if not isinstance(message, str):
            raise AgentError(f"the message must be text, not {type(message).__name__}")
        if identity is not None and not isinstance(identity, Mapping):
            raise AgentError(
                f"identity must be a mapping such as {{'user_id': '42', 'org_id': '7'}}, not {type(identity).__name__}"
            )
        session = await self._session(session_id, identity)
        if session.node_id is not None:
            ctx = await self._reopen(session)
            if ctx.node.status == NodeStatus.SUSPENDED and ctx.node.checkpoint is not None:
                return await self._resume(ctx, ResumeAction.REPLY, message)
            ctx.node.answered = []  # a new turn: no follow-up answered in it yet
            self._user_says(ctx, message)
            return await self._turn(ctx, settle=True)
        ctx = await self._start(session, message, skill_key)
        self._user_says(ctx, message)
        return await self._turn(ctx)

    async def run_isolated(self, session: SessionState, goal: str, skill_key: str) -> TurnResult:
        """One turn of a fresh task in ``session`` (a sub-agent's own session, usually on a MemoryAgentStore)."""
        ctx = await self._start(session, goal, skill_key)
        self._user_says(ctx, goal)
        return await self._turn(ctx)

    async def resume(self, session_id: str, action: str | ResumeAction, text: str | None = None) -> TurnResult:
        """Answer the open checkpoint: REPLY (with text), CONFIRM, REJECT or CANCEL."""
        try:
            chosen = ResumeAction(str(action).upper())
        except ValueError:
            raise AgentError(f"unknown resume action {action!r}: use REPLY, CONFIRM, REJECT or CANCEL") from None
        if text is not None and not isinstance(text, str):
            raise AgentError(f"the resume text must be text (or None), not {type(text).__name__}")
        session = await self.store.load_session(_checked_session_id(session_id))
        if session is None or session.node_id is None:
            raise AgentError(f"session {session_id!r} has no open node to resume; start one with send / agent run")
        session.model_spec = self.model_spec or session.model_spec
        ctx = await self._reopen(session)
        if ctx.node.status != NodeStatus.SUSPENDED or ctx.node.checkpoint is None:
            raise AgentError(
                f"the node of session {session_id!r} is {ctx.node.status.value}, not suspended at a checkpoint; "
                "send a message instead"
            )
        return await self._resume(ctx, chosen, text)

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
        session.agent_dir = str(self.loaded.dir.resolve())  # resume may run from another working directory
        session.model_spec = self.model_spec or session.model_spec
        return session

    def _context(self, session: SessionState, task: TaskState, node: NodeState, evidence: list[Any]) -> NodeContext:
        skill = self.loaded.skills.get(node.skill_key)
        if skill is None:
            raise AgentError(f"skill {node.skill_key!r} of the open node is no longer loaded; check the agent folder")
        return NodeContext(
            self.yard,
            skill,
            session,
            task,
            node,
            self.store,
            self.settings,
            evidence=evidence,
            model=self.model,
            sub_agent=self._run_sub_agent,
        )

    def _run_sub_agent(self, ctx: NodeContext, skill: Skill, args: dict[str, Any]) -> Awaitable[dict[str, Any]]:
        """A skill_md business tool as an isolated sub-agent on this node's model and settings."""

        def make_agent(loaded: LoadedAgent, store: MemoryAgentStore) -> Agent:
            return Agent(self.yard, loaded, ctx.model, ctx.settings, store=store)

        return run_skill_md(ctx, skill, args, make_agent)

    async def _start(self, session: SessionState, message: str, skill_key: str | None) -> NodeContext:
        key = skill_key or next(iter(self.loaded.skills), None)
        if key is None or key not in self.loaded.skills:
            known = ", ".join(self.loaded.skills) or "none"
            raise AgentError(f"no contract skill {key!r} in agent {self.profile.agent_code!r} (loaded: {known})")
        task = TaskState(id=new_id("task"), session_id=session.id)
        node = NodeState(id=new_id("node"), task_id=task.id, skill_key=key, goal=message)
        node.target = self._target(key)
        task.node_ids.append(node.id)
        session.task_id, session.node_id = task.id, node.id
        ctx = self._context(session, task, node, [])
        self._bind_inputs(ctx)
        return ctx

    def _target(self, skill_key: str) -> str | None:
        """§10.1 row 2: the contract's target when it is a write tool of the skill (else none yet)."""
        skill = self.loaded.skills[skill_key]
        target = skill.contract.target
        tool = skill.contract.tools.get(target) if target else None
        return target if tool is not None and tool.is_write and target in skill.tool_names else None

    def _bind_inputs(self, ctx: NodeContext) -> None:
        """§7: bind declared inputs at node start (fill only). An input whose ``from`` has no §9 prefix names an
        upstream node's output of the same name, which part 1 (one node per task) does not have."""
        for name, spec in ctx.skill.contract.inputs.items():
            if name in ctx.node.inputs or not spec.from_expr:
                continue
            try:
                found, value, _source = resolve(ctx, spec.from_expr)
            except ExpressionError:
                continue
            if found:
                ctx.node.inputs[name] = value

    async def _reopen(self, session: SessionState) -> NodeContext:
        assert session.node_id is not None and session.task_id is not None
        node = await self.store.load_node(session.node_id)
        task = await self.store.load_task(session.task_id)
        if node is None or task is None:
            raise AgentError(f"the open node of session {session.id!r} is missing from the database")
        evidence = await self.store.load_evidence(task.id)
        ctx = self._context(session, task, node, evidence)
        for record in ctx.node_evidence():
            if record.status == EvidenceStatus.STARTED:  # its call never came back: the process stopped mid-call
                record.status = EvidenceStatus.UNKNOWN_PRE_CALL
                await ctx.record(record)
        return ctx

    def _user_says(self, ctx: NodeContext, message: str, shown: str | None = None) -> None:
        """``message`` joins the user messages (USER provenance); ``shown`` (default: the message) the node's
        conversation."""
        ctx.session.user_messages = [*ctx.session.user_messages, message][-USER_MESSAGES_KEPT:]
        ctx.node.messages.append({"role": "user", "content": message if shown is None else shown})

    # -- a turn ------------------------------------------------------------------------------------------------

    async def _turn(
        self,
        ctx: NodeContext,
        observations: list[Observation] | None = None,
        *,
        settle: bool = False,
        not_yet: str | None = None,
    ) -> TurnResult:
        """Run the node until it stops; ``settle``: the node was reopened, so uncertain writes come first (§14.3),
        except the evidence ``not_yet`` (a write that has just run: it is checked when the node next reopens)."""
        result = TurnResult(ctx.session.id, ctx.node.status.value, observations=list(observations or []))
        if settle:
            await self._settle_open_writes(ctx, result, not_yet)
        if ctx.node.status == NodeStatus.RUNNING:
            await self._loop(ctx, result)
        return await self._finish_turn(ctx, result)

    async def _settle_open_writes(self, ctx: NodeContext, result: TurnResult, not_yet: str | None = None) -> None:
        """§14.3: an uncertain write is verified (verify tool) or asked about (VERIFY) before anything else."""
        for record in ctx.node_evidence():
            if record.status not in (EvidenceStatus.UNKNOWN, EvidenceStatus.UNKNOWN_PRE_CALL) or record.id == not_yet:
                continue
            contract = ctx.tool_contract(record.tool)
            if contract is not None and contract.verify is not None:
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
        ctx.node.steps = 0  # the budget is per node and turn: a long conversation is not a runaway loop
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
        node, task, session = ctx.node, ctx.task, ctx.session
        if node.status in (NodeStatus.DONE, NodeStatus.FAILED, NodeStatus.CANCELLED):
            task.status = node.status
            session.task_id = session.node_id = None
            result.reply = node.reply if node.reply is not None else result.reply
        checkpoint = node.checkpoint if node.status == NodeStatus.SUSPENDED else None
        if checkpoint is not None:
            result.checkpoint = {
                "type": checkpoint.type.value,
                "question": checkpoint.question,
                "expected_fields": checkpoint.expected_fields,
                "suggestions": checkpoint.suggestions,
                "tool": checkpoint.tool,
            }
            result.reply = result.reply or checkpoint.question
        result.status = node.status.value
        result.task_id, result.node_id = task.id, node.id
        result.events = list(ctx.events)
        result.evidence = [
            {"id": e.id, "tool": e.tool, "status": e.status.value, "business_ok": e.business_ok}
            for e in ctx.node_evidence()
        ]
        await self._save(ctx)
        return result

    async def _save(self, ctx: NodeContext) -> None:
        await self.store.save_turn(ctx.node, ctx.task, ctx.session)

    # -- checkpoints -------------------------------------------------------------------------------------------

    async def _resume(self, ctx: NodeContext, action: ResumeAction, text: str | None) -> TurnResult:
        checkpoint = ctx.node.checkpoint
        assert checkpoint is not None
        if action == ResumeAction.CANCEL or (
            action == ResumeAction.REJECT and checkpoint.type != CheckpointType.VERIFY
        ):
            return await self._cancel(ctx, checkpoint)
        if checkpoint.type == CheckpointType.VERIFY and action == ResumeAction.REPLY:
            # only CONFIRM (took effect) / REJECT (did not) settle an uncertain write; a message leaves it open
            return await self._finish_turn(ctx, TurnResult(ctx.session.id, NodeStatus.SUSPENDED.value))
        ctx.node.answered = []
        observations: list[Observation] = []
        # §14.3: the reopened node settles its uncertain writes first — all but a confirmed write that has just run
        # (a write that has just become uncertain is checked when the node next reopens, not at once)
        just_ran: str | None = None
        if checkpoint.type == CheckpointType.FOLLOW_UP:
            answer = text if text is not None else ("确认" if action == ResumeAction.CONFIRM else "")
            if not answer.strip():
                raise AgentError("REPLY needs the user's answer: pass text")
            ctx.node.answered.append({"question": checkpoint.question, "expected_fields": checkpoint.expected_fields})
            for name in checkpoint.expected_fields:
                ctx.node.user_fields[name] = answer
            self._reopen_node(ctx)
            # §12: the answer enters the history with its question and the arguments it answers
            fields = "、".join(checkpoint.expected_fields)
            about = f"（回答追问「{checkpoint.question}」" + (f"；对应参数：{fields}" if fields else "") + "）"
            self._user_says(ctx, answer, shown=f"{answer}\n{about}")
        elif checkpoint.type == CheckpointType.APPROVAL:
            if action == ResumeAction.REPLY:
                ctx.node.gated = None
                self._reopen_node(ctx)
                self._user_says(ctx, text or "")
            else:
                if self._approval_expired_or_changed(ctx, checkpoint):
                    return await self._finish_turn(ctx, TurnResult(ctx.session.id, NodeStatus.SUSPENDED.value))
                assert checkpoint.tool is not None and checkpoint.args is not None
                self._reopen_node(ctx)
                ctx.node.gated = None
                observation = await call_tool(ctx, checkpoint.tool, checkpoint.args, approved=True)
                just_ran = observation.evidence_id
                observations.append(observation)
                ctx.node.messages.append({"role": "user", "content": _note("confirmed", observation)})
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

    def _reopen_node(self, ctx: NodeContext) -> None:
        ctx.node.checkpoint = None
        ctx.node.status = NodeStatus.RUNNING

    def _approval_expired_or_changed(self, ctx: NodeContext, checkpoint: Checkpoint) -> bool:
        """False when the approved write may run; else a new APPROVAL checkpoint is raised (fail closed, §14.1)."""
        assert checkpoint.tool is not None and checkpoint.args is not None
        expired = now() - checkpoint.created_at > self.settings.reconfirm_after.total_seconds()
        args, summary = preview_binding(ctx, checkpoint.tool, checkpoint.args)
        if not expired and args == checkpoint.args and summary == checkpoint.summary:
            return False
        reason = (
            "这次确认已超过有效期，请重新确认。"
            if expired
            else "待执行的参数在等待确认期间发生了变化，请按新参数重新确认。"
        )
        ctx.node.checkpoint = Checkpoint(
            CheckpointType.APPROVAL, reason + "\n" + summary, tool=checkpoint.tool, args=args, summary=summary
        )
        return True

    async def _cancel(self, ctx: NodeContext, checkpoint: Checkpoint) -> TurnResult:
        ctx.node.status = NodeStatus.CANCELLED
        ctx.node.checkpoint = None
        ctx.node.gated = None
        if checkpoint.type == CheckpointType.APPROVAL and checkpoint.tool:
            ctx.node.reply = f"已取消：写操作 {checkpoint.tool} 没有执行。"
        else:
            ctx.node.reply = "已取消。"
        return await self._finish_turn(ctx, TurnResult(ctx.session.id, NodeStatus.CANCELLED.value))


def _note(kind: str, observation: Observation) -> str:
    body = json.dumps(observation.for_model(), ensure_ascii=False, default=str)
    if kind == "confirmed":
        return f"用户已确认，写操作 {observation.tool} 已按确认的参数执行，结果：{body}。请继续完成任务。"
    return f"平台已回查不确定的写操作 {observation.tool}，结果：{body}。"


async def resume_session(
    yard: SkillYard, session_id: str, action: str, text: str | None = None, model: Any = None
) -> TurnResult:
    """Resume a session by id alone: the agent folder and model spec are read from the stored session."""
    session = await AgentStore(yard.database).load_session(session_id)
    if session is None:
        raise AgentError(f"no agent session {session_id!r}; start it with `skillyard agent run`")
    if not session.agent_dir:
        raise AgentError(f"session {session_id!r} does not record its agent folder; resume it through the Python API")
    spec = model if model is not None else session.model_spec
    agent = await yard.agent(session.agent_dir, model=spec)
    return await agent.resume(session_id, action, text)
