"""What one node's tool calls can see and change: :class:`NodeContext`, and the store protocol behind it.

The tool-call chain (chain/), the builtin tools (builtins.py) and the runner (runner.py) all take a NodeContext.
It holds the loaded contract skill, the session / task / node state, the task's evidence, the caller's identity
mapped onto the §11 platform fields, the settings, and an :class:`EvidenceStore` that persists evidence the moment
it changes (a write is registered ``STARTED`` before its call, §14). :class:`MemoryEvidenceStore` keeps it in
memory for unit tests; the PostgreSQL store (store.py) is the real one.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .expressions import HIDDEN_PLATFORM_FIELDS
from .state import Evidence, NodeState, SessionState, TaskState

if TYPE_CHECKING:
    from ..catalog.skill import Skill
    from ..yard import SkillYard
    from .contract import ToolContract
    from .loader import ContractSkill

log = logging.getLogger("skillyard.agent")

#: The progress label of a tool whose contract has none (§4: the MCP title comes next, and skills have none).
TOOL_LABEL_FALLBACK = "正在处理"
#: runtime_context identity key → §11 platform field. Ids stay strings (the spec's Long ids are opaque here).
PLATFORM_FROM_CONTEXT: dict[str, str] = {
    "user_id": "userId",
    "actor_id": "memberId",
    "actor_name": "name",
    "org_id": "organId",
    "org_name": "organName",
    "org_type": "organType",
    "actor_department_path": "deptPath",
    # closed by default ([agent] platform_hidden); present when a deployment opens them
    "passport_id": "passportId",
    "client_id": "clientId",
    "session_type": "sessionType",
    "admin_user": "adminUser",
    "admin_company": "adminCompany",
}


def platform_fields(identity: Mapping[str, Any], hidden: Iterable[str] = HIDDEN_PLATFORM_FIELDS) -> dict[str, str]:
    """The §11 platform fields from the caller's identity (only the ones with a value, never the hidden ones)."""
    closed = frozenset(hidden)
    fields: dict[str, str] = {}
    for key, name in PLATFORM_FROM_CONTEXT.items():
        value = identity.get(key)
        if value is not None and value != "" and name not in closed:
            fields[name] = str(value)
    return fields


class EvidenceStore(Protocol):
    """Where evidence lives; every change is saved at once so a crash never loses a started write."""

    def new_evidence_id(self) -> str:
        """A new unique id, made here (not by the database): a plain call on every business-tool call."""
        ...

    async def save_evidence(self, evidence: Evidence) -> None: ...


@dataclass
class MemoryEvidenceStore:
    """An in-memory EvidenceStore for unit tests of the chain and builtins."""

    saved: dict[str, Evidence] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def new_evidence_id(self) -> str:
        return f"ev_{next(self._ids)}"

    async def save_evidence(self, evidence: Evidence) -> None:
        self.saved[evidence.id] = evidence


@dataclass
class NodeContext:
    """One node's view of the world while it runs (see the module docstring)."""

    yard: SkillYard
    skill: ContractSkill
    session: SessionState
    task: TaskState
    node: NodeState
    store: EvidenceStore
    settings: Any  # agent.settings.AgentSettings
    evidence: list[Evidence] = field(default_factory=list)  # the task's evidence, oldest first
    upstream_node_ids: list[str] = field(default_factory=list)  # dependency / delegation ancestors, nearest first
    events: list[dict[str, Any]] = field(default_factory=list)  # progress events of this turn (tool labels, …)
    approvals: list[dict[str, Any]] = field(default_factory=list)  # approvals answered in this turn (their records)
    model: Any = None  # the node's ChatModel: skill_md business tools run as sub-agents on it
    #: Runs a skill_md business tool as an isolated sub-agent; passed in by the node runner (the chain never
    #: imports the runner back).
    sub_agent: Callable[[NodeContext, Skill, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
    #: The task's nodes by id (this one included): delegation adds to it, outputs and evidence read along it.
    graph: dict[str, NodeState] = field(default_factory=dict)
    #: The task's contract skills by key (pinned where the task pinned them): what delegation may insert.
    skills: Mapping[str, ContractSkill] = field(default_factory=dict)

    @property
    def platform(self) -> dict[str, str]:
        return platform_fields(self.session.identity, self.settings.platform_hidden)

    def tool_contract(self, name: str) -> ToolContract | None:
        """The contract of a business tool, or None (configured tools only, §1.3)."""
        return self.skill.contract.tools.get(name)

    def tool_started(self, name: str, contract: ToolContract | None) -> None:
        """§4: a business tool starts: its progress event carries the label of its contract (the caller has it at
        hand), else (skills have no MCP title) ``TOOL_LABEL_FALLBACK`` — never the bare tool name."""
        label = (contract.label if contract else None) or TOOL_LABEL_FALLBACK
        self.events.append({"type": "tool", "tool": name, "label": label})

    def report_missing(self, tool: str) -> None:
        """A business tool of ``toolNames`` that no catalog skill answers to: reported once per task (an event of
        the turn and a log line), and not offered (orchestration §2: only ``toolNames ∩ catalog`` is offered)."""
        key = f"{self.skill.skill_key}:{tool}"
        if key in self.task.reported_missing:
            return
        self.task.reported_missing.append(key)
        message = (
            f"tool {tool!r} of skill {self.skill.skill_key!r} is not installed, so it is not offered; install its "
            "skill folder, or give the renamed skill the old name in its aliases"
        )
        log.warning(message)
        self.events.append({"type": "tool_missing", "skill": self.skill.skill_key, "tool": tool, "message": message})

    def is_business_tool(self, name: str) -> bool:
        return name in self.skill.tool_names

    def goal_evidence(self) -> list[Evidence]:
        """This node's evidence and that of the nodes it delegated to (§15: their success counts for its goal)."""
        delegated = {n.id for n in self.graph.values() if self._delegated_by_me(n)}
        return [e for e in self.evidence if e.node_id == self.node.id or e.node_id in delegated]

    def _delegated_by_me(self, node: NodeState) -> bool:
        seen: set[str] = set()
        while node.parent_id is not None and node.parent_id not in seen:
            if node.parent_id == self.node.id:
                return True
            seen.add(node.parent_id)
            parent = self.graph.get(node.parent_id)
            if parent is None:
                return False
            node = parent
        return False

    def node_evidence(self, node_id: str | None = None) -> list[Evidence]:
        wanted = node_id or self.node.id
        return [e for e in self.evidence if e.node_id == wanted]

    def visible_evidence(self) -> list[Evidence]:
        """This node's evidence, newest first, then each upstream node's, nearest first (§9 evidence.*)."""
        ordered = sorted(self.node_evidence(), key=lambda e: e.seq, reverse=True)
        for node_id in self.upstream_node_ids:
            ordered.extend(sorted(self.node_evidence(node_id), key=lambda e: e.seq, reverse=True))
        return ordered

    def record(self, evidence: Evidence) -> Awaitable[None]:
        """Add or update an evidence record and save it at once: await the result (the store's save, returned as
        it is rather than awaited in a coroutine of its own, on every business-tool call)."""
        if evidence.seq == 0:  # not registered yet: registration numbers it (loaded records already have a seq)
            evidence.seq = (self.evidence[-1].seq if self.evidence else 0) + 1
            self.evidence.append(evidence)
        return self.store.save_evidence(evidence)
