"""The runtime state of an agent session: session → task → node, evidence, checkpoints, entities.

Everything here is plain data that round-trips through JSON (``to_json`` / ``from_json``), so the store can keep it
in PostgreSQL and a new process can resume a suspended node exactly where the old one stopped. The tool-call chain
(chain/), the builtin tools (builtins.py) and the node runner (runner.py) read and change these objects; only the
store (store.py) persists them.

Vocabulary (contract spec):

* an **evidence** record is one real business-tool execution (§6.3, §13 stage 7); before-phase rejections never
  create one. A write is pre-registered as ``STARTED`` before the call (§14), so a crash mid-call leaves a record
  that reopening turns into ``UNKNOWN`` and verifies (§14.3);
* a **checkpoint** suspends the node: FOLLOW_UP (a question to the user), CHOICE (a follow-up with candidates),
  APPROVAL (one gated write, or a batch of them), VERIFY (an uncertain write without a verify tool), EVENT (waiting
  for an external event);
* an **observation** is what the model sees after one tool call: the result or the refusal with its §17 code and a
  next step.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

T = TypeVar("T")


class EvidenceStatus(StrEnum):
    STARTED = "STARTED"  # a write registered before its call
    SUCCESS = "SUCCESS"  # the call returned (business success or business failure: see business_ok)
    FAILED = "FAILED"  # the call failed (reads: any failure; writes: the classes of §14.4 that are certain)
    UNKNOWN = "UNKNOWN"  # a write whose effect is uncertain (timeout, IO error, unknown error)
    UNKNOWN_PRE_CALL = "UNKNOWN_PRE_CALL"  # a write found STARTED when its node reopened (the process died)


#: The members every business-tool call reads, as plain names: on Python 3.11 an enum class attribute goes through
#: ``EnumType.__getattr__``, which costs about as much as a function call.
_STARTED, _SUCCESS = EvidenceStatus.STARTED, EvidenceStatus.SUCCESS
#: The pseudo-tool name of an external event's evidence: ``event:<NAME>`` (builtin_node_wait_event).
EVENT_TOOL_PREFIX = "event:"
#: Statuses of a write that is not settled: no identical call, no finish (§10.2 step 2, §14.2).
OPEN_STATUSES = frozenset({EvidenceStatus.STARTED, EvidenceStatus.UNKNOWN, EvidenceStatus.UNKNOWN_PRE_CALL})


class CheckpointType(StrEnum):
    FOLLOW_UP = "FOLLOW_UP"
    APPROVAL = "APPROVAL"
    VERIFY = "VERIFY"
    CHOICE = "CHOICE"  # a follow-up with candidates: CHOOSE answers it with one listed id
    EVENT = "EVENT"  # waiting for an external event (builtin_node_wait_event)


class NodeStatus(StrEnum):
    PENDING = "PENDING"  # planned, not started yet
    RUNNING = "RUNNING"
    WAITING = "WAITING"  # waiting for a node it delegated to (§15)
    SUSPENDED = "SUSPENDED"
    DONE = "DONE"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"


class NodeKind(StrEnum):
    """Why a node is in the task graph (docs/agents.md "The task graph")."""

    PLANNED = "PLANNED"  # from the plan (or the one node of a single REACT candidate / an explicit skill)
    PROVIDER = "PROVIDER"  # inserted before a node for one of its inputs.<name>.provider (§7)
    DELEGATED = "DELEGATED"  # inserted by builtin_node_delegate (§15)
    FALLBACK = "FALLBACK"  # the first candidate, after the model did not plan validly


class EdgeType(StrEnum):
    NORMAL = "NORMAL"  # the upstream node must be DONE or SKIPPED first
    DELEGATE = "DELEGATE"  # a delegated node before the node that delegated it
    CONDITIONAL = "CONDITIONAL"  # a dependsOn entry with a ``when`` condition on its upstream node
    FAILURE = "FAILURE"  # an ``onFailure`` edge: the target runs when the source fails


class PlanSource(StrEnum):
    SINGLE_REACT = "SINGLE_REACT"  # one candidate in mode REACT: no model call
    EXPLICIT = "EXPLICIT"  # the caller named the skill (send(skill_key=…), --skill)
    MODEL = "MODEL"  # the model's builtin_plan
    FALLBACK = "FALLBACK"  # no valid plan: the first candidate


#: A node in one of these statuses never runs again.
FINAL_NODE_STATUSES = frozenset({NodeStatus.DONE, NodeStatus.FAILED, NodeStatus.CANCELLED, NodeStatus.SKIPPED})


class ResumeAction(StrEnum):
    REPLY = "REPLY"
    CONFIRM = "CONFIRM"
    REJECT = "REJECT"
    CANCEL = "CANCEL"
    CHOOSE = "CHOOSE"  # answer a CHOICE checkpoint with one of its candidate ids


#: Seconds since the epoch: ``time.time`` itself, so a record's default ``created_at`` costs no Python call.
now = time.time


@dataclass(slots=True)
class Evidence:
    """One business-tool execution and what it proved."""

    id: str
    task_id: str
    node_id: str
    tool: str
    args: dict[str, Any]
    write: bool
    status: EvidenceStatus
    idempotency_key: str | None = None
    business_ok: bool | None = None  # None until the call returned; False = business failure (§6.1)
    empty: bool = False  # every extract counted 0 (or, without extracts, an empty response)
    response: Any = None  # the skill's normalized envelope
    extracts: dict[str, Any] = field(default_factory=dict)  # extract key (or path) → the value at its path
    counts: dict[str, int] = field(default_factory=dict)  # extract key (or path) → items counted
    error_code: str | None = None  # the §17 code (full "agent_runtime.NNNNN") or the business error code
    error_message: str | None = None
    seq: int = 0  # order within the task (newest = highest)
    created_at: float = field(default_factory=now)

    @classmethod
    def started(
        cls,
        id: str,
        task_id: str,
        node_id: str,
        tool: str,
        args: dict[str, Any],
        write: bool,
        idempotency_key: str | None = None,
    ) -> Evidence:
        """The record of a call about to run (``STARTED``, §14). Built positionally, in field order: called with
        keywords, this class costs twice as much, once per business-tool call."""
        return cls(id, task_id, node_id, tool, args, write, _STARTED, idempotency_key)

    @property
    def succeeded(self) -> bool:
        """ "Completed" in the sense of §10.2: the call returned and the business did not fail (empty counts)."""
        return self.status == _SUCCESS and self.business_ok is not False

    @property
    def open(self) -> bool:
        return self.status in OPEN_STATUSES

    @property
    def from_event(self) -> bool:
        """The payload of an external event (``event:<NAME>``), not a business-tool call."""
        return self.tool.startswith(EVENT_TOOL_PREFIX)


@dataclass
class Checkpoint:
    """Why a node is suspended and what the user is asked."""

    type: CheckpointType
    question: str
    expected_fields: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    tool: str | None = None  # APPROVAL / VERIFY: the write tool
    args: dict[str, Any] | None = None  # APPROVAL: the bound arguments awaiting approval
    summary: str | None = None  # APPROVAL: the "标签：值" summary shown with the question
    evidence_id: str | None = None  # VERIFY: the uncertain write
    created_at: float = field(default_factory=now)
    candidates: list[dict[str, str]] = field(default_factory=list)  # CHOICE: the offered [{id, label}]
    event: str | None = None  # EVENT: the event name waited for
    key: str | None = None  # EVENT: its correlation key
    deadline: float | None = None  # EVENT: when the wait times out (seconds since the epoch)
    wait_id: str | None = None  # EVENT: the stored wait (agent_event_waits) a delivery or timeout names
    calls: list[GatedWrite] = field(default_factory=list)  # a batch APPROVAL: the gated writes, in order


@dataclass
class GatedWrite:
    """A write the write gate stopped for approval (§14.1 step 1); builtin_node_approval turns it into APPROVAL."""

    tool: str
    args: dict[str, Any]  # after binding: what will be executed on CONFIRM
    sources: dict[str, str]
    summary: str
    idempotency_key: str
    gated_at: float = field(default_factory=now)
    call_id: str | None = None  # the model's tool-call id of the gated call (what a batch approval's callIds name)


@dataclass
class OutputValue:
    """One builtin_output_set value with its declared source (§8)."""

    value: Any
    source_type: str
    source_ref: str | None = None
    source_path: str | None = None


@dataclass(slots=True)
class Observation:
    """What the model sees after one tool call (and what a turn reports)."""

    tool: str
    arguments: Any  # the arguments as the model sent them (dict, or the raw text when it was not JSON)
    ok: bool
    content: Any  # the result (success) or the refusal text (failure) the model reads
    code: str | None = None  # the full "agent_runtime.NNNNN" code, or a business error code
    next_step: str | None = None
    sources: dict[str, str] = field(default_factory=dict)  # argument path → source type after the param contract
    evidence_id: str | None = None
    call_id: str | None = None  # the model's tool-call id

    def for_model(self) -> dict[str, Any]:
        """The tool message content: the result, or the refusal with its code and next step."""
        if self.ok:
            done: dict[str, Any] = {"ok": True, "result": self.content}
            if self.evidence_id:
                done["evidence_id"] = self.evidence_id
            return done
        body: dict[str, Any] = {"ok": False, "code": self.code, "error": self.content}
        if self.next_step:
            body["next_step"] = self.next_step
        return body


@dataclass
class NodeState:
    """One node of a task: a contract skill working toward its goal."""

    id: str
    task_id: str
    skill_key: str
    goal: str
    status: NodeStatus = NodeStatus.RUNNING
    target: str | None = None  # the write tool that completes the node (§10.1)
    target_claimed: bool = False  # the target came from the first write call (§10.1 row 3)
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, OutputValue] = field(default_factory=dict)
    scratch: dict[str, Any] = field(default_factory=dict)  # builtin_state_set
    messages: list[dict[str, Any]] = field(default_factory=list)  # the model conversation of this node
    checkpoint: Checkpoint | None = None
    gated: GatedWrite | None = None
    #: Every write of this node stopped for approval and not yet approved, rejected or dropped, oldest first (a
    #: batch approval names them by call id); ``gated`` is the latest of them.
    pending_writes: list[GatedWrite] = field(default_factory=list)
    #: What approvers decided: ``{at, action, approver, calls: [{call_id, tool, ran, edit?}]}`` per answer.
    approvals: list[dict[str, Any]] = field(default_factory=list)
    user_fields: dict[str, Any] = field(default_factory=dict)  # expectedFields answered by the user → USER
    chosen: dict[str, str] = field(default_factory=dict)  # CHOICE answers: expected field → the chosen id (USER)
    answered: list[dict[str, Any]] = field(default_factory=list)  # follow-ups answered in this turn
    fingerprint: str | None = None  # the last successful call's (tool, arguments) fingerprint (§13.4)
    fingerprint_count: int = 0
    approved_keys: list[str] = field(default_factory=list)  # idempotency keys confirmed by the user
    steps: int = 0
    reply: str | None = None  # the final text (finish output / fail reason / model text)
    parent_id: str | None = None  # the node that delegated this one (§15)
    kind: NodeKind = NodeKind.PLANNED
    plan_id: str | None = None  # the node's id in the model's plan (``n1``); None for inserted nodes
    depends_on: list[str] = field(default_factory=list)  # node ids that must be DONE / SKIPPED first (NORMAL)
    skipped_reason: str | None = None  # why a SKIPPED node did not run, or why a node was not run at all
    depth: int = 0  # delegation depth: 0 for planned nodes, parent's + 1 for a delegated one


@dataclass
class TaskState:
    id: str
    session_id: str
    status: NodeStatus = NodeStatus.RUNNING
    shared: dict[str, Any] = field(default_factory=dict)  # shared.<key> (share: TASK)
    node_ids: list[str] = field(default_factory=list)  # in run order: every node after the nodes it depends on
    created_at: float = field(default_factory=now)
    message: str = ""  # the user message that started the task: each later node's conversation opens with it
    plan_source: PlanSource = PlanSource.EXPLICIT
    plan_notes: list[str] = field(default_factory=list)  # why the plan fell back, targets dropped, …
    #: The pinned execution binding (binding.py): what every turn and resume of this task runs with.
    binding: dict[str, Any] = field(default_factory=dict)
    reported_missing: list[str] = field(default_factory=list)  # pinned tools found missing (reported once)


@dataclass
class Entity:
    """An entity of the session's index (§6.3 extracts and §8 outputs with ``entity``), used by ``prior.*``."""

    type: str
    id: str
    name: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    task_id: str | None = None
    created_at: float = field(default_factory=now)


@dataclass
class SessionState:
    """One conversation with an agent: session values, the entity index, the model's state, recent user text."""

    id: str
    agent_code: str
    values: dict[str, Any] = field(default_factory=dict)  # session.<key> (share: SESSION)
    entities: list[Entity] = field(default_factory=list)
    model_state: dict[str, Any] = field(default_factory=dict)  # e.g. the scripted model's position
    user_messages: list[str] = field(default_factory=list)  # recent user messages, oldest first (USER provenance)
    identity: dict[str, Any] = field(default_factory=dict)  # the caller's runtime_context identity fields
    task_id: str | None = None  # the open task, if any
    node_id: str | None = None  # the open node, if any
    agent_dir: str | None = None  # where the agent was loaded from (so ``resume`` can reload it)
    model_spec: str | None = None  # the model spec the session runs on (``script:…`` / ``openai:…``), if given as one
    agent_source: str = "folder"  # ``folder`` (agent_dir) or ``db`` (the stored agent agent_code), for resume
    routing: dict[str, Any] | None = None  # how a router chose the agent: {agent_code, source, reason}


def to_json(value: Any) -> Any:
    """A state object (or a container of them) as JSON values; enums become their strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    return value


def from_json(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a state dataclass from :func:`to_json` output (nested state objects included)."""
    kwargs: dict[str, Any] = {}
    hints = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for name, value in data.items():
        if name not in hints:
            continue  # written by a newer version: ignored
        kwargs[name] = _decode(cls, name, value)
    return cls(**kwargs)


def _decode(cls: type, name: str, value: Any) -> Any:
    if value is None:
        return None
    if cls is Evidence and name == "status":
        return EvidenceStatus(value)
    if cls in (NodeState, TaskState) and name == "status":
        return NodeStatus(value)
    if cls is NodeState and name == "kind":
        return NodeKind(value)
    if cls is TaskState and name == "plan_source":
        return PlanSource(value)
    if cls is Checkpoint and name == "type":
        return CheckpointType(value)
    if cls is NodeState and name == "checkpoint":
        return from_json(Checkpoint, value)
    if cls is NodeState and name == "gated":
        return from_json(GatedWrite, value)
    if (cls is NodeState and name == "pending_writes") or (cls is Checkpoint and name == "calls"):
        return [from_json(GatedWrite, v) for v in value]
    if cls is SessionState and name == "entities":
        return [from_json(Entity, v) for v in value]
    if cls is NodeState and name == "outputs":
        return {k: from_json(OutputValue, v) for k, v in value.items()}
    return value
