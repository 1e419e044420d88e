"""What one ``send`` / ``resume`` of an agent did: :class:`TurnResult` (the CLI's ``--json`` shape)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .state import Observation, to_json


@dataclass
class TurnResult:
    """What one send / resume did: status, checkpoint, reply, observations, evidence."""

    session_id: str
    status: str
    reply: str | None = None
    checkpoint: dict[str, Any] | None = None
    observations: list[Observation] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    task_id: str | None = None
    node_id: str | None = None
    #: The task graph (graph.py ``view``): nodes, edges, plan source.
    graph: dict[str, Any] | None = None
    #: The task's pinned binding: ``{pinned_at, skills: {key: hash}}``.
    binding: dict[str, Any] | None = None
    #: How a router chose the agent (the routed first turn only): ``{agent_code, source, reason}``.
    routing: dict[str, Any] | None = None
    #: Ids of the nodes this turn ran, in order (what ``evidence`` covers).
    touched: list[str] = field(default_factory=list)
    #: A resume the runtime did not take (the checkpoint stays): ``{code, name, message, next_step}``.
    refusal: dict[str, Any] | None = None
    #: The approvals answered in this turn: ``{at, action, approver, calls: [{call_id, tool, summary, ran, …}]}``.
    approvals: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "status": self.status,
            "reply": self.reply,
            "checkpoint": self.checkpoint,
            "observations": [
                {
                    "tool": o.tool,
                    "arguments": o.arguments,
                    "ok": o.ok,
                    "code": o.code,
                    "next_step": o.next_step,
                    "sources": o.sources,
                    "evidence_id": o.evidence_id,
                    "content": to_json(o.content),
                }
                for o in self.observations
            ],
            "evidence": self.evidence,
            "events": self.events,
            "task_id": self.task_id,
            "node_id": self.node_id,
            "graph": self.graph,
            "binding": self.binding,
            **({"routing": self.routing} if self.routing is not None else {}),
            **({"refusal": self.refusal} if self.refusal is not None else {}),
            **({"approvals": self.approvals} if self.approvals else {}),
        }
