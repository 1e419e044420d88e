"""A NodeContext without the runner: a yard with a contract skill (cms.article) and MemoryEvidenceStore, for the
builtins called directly (call_builtin)."""

from __future__ import annotations

from typing import Any

from skillyard.agent.codes import ErrorCode
from skillyard.agent.context import NodeContext
from skillyard.agent.state import (
    Evidence,
    EvidenceStatus,
    Observation,
)

OK = {"path": "code", "op": "EQ", "value": 200}


CONTRACT: dict[str, Any] = {
    "target": "createArticle",
    "tools": {
        "queryArticle": {
            "success": OK,
            "args": {"keyword": {"sources": ["USER", "MODEL"]}},
            "extracts": [{"key": "articles", "path": "data.records"}],
        },
        "createArticle": {
            "sideEffect": "WRITE",
            "success": OK,
            "args": {
                "title": {"sources": ["USER"]},
                "note": {},  # required, no from/const, missing ASK_USER by default
                "memo": {"required": False},
                "category": {"enum": ["news", "blog"], "sources": ["MODEL"]},
                "channel": {"const": "web"},
                "author": {"from": "platform.name"},
                "orderInfo.taxNo": {"sources": ["USER"]},
                "tags": {"sources": ["EVIDENCE"], "missing": {"action": "CALL_TOOL", "tool": "queryArticle"}},
                "spaceId": {"from": "evidence.articles.0.spaceId", "missing": {"action": "FAIL"}},
            },
        },
        "notInToolNames": {"args": {"secret": {"sources": ["USER"]}}},
    },
    "outputs": {
        "articleId": {"sources": ["EVIDENCE"], "entity": {"type": "article", "scalar": "id"}},
        "status": {"sources": ["CONTRACT"], "constant": "PUBLISHED", "share": "TASK"},
        "space": {"required": False, "share": "SESSION", "entity": {"type": "space", "name": "label"}},
    },
}


TOOLS = ("queryArticle", "createArticle")


def refused(obs: Observation, code: ErrorCode) -> str:
    """Assert a refusal with the full code and a concrete next step; return message + next step for checks."""
    assert not obs.ok, obs.content
    assert obs.code == code.value and obs.code.startswith("agent_runtime.")
    assert obs.next_step and len(obs.next_step) > 10
    assert obs.for_model()["code"] == code.value
    return f"{obs.content} | {obs.next_step}"


async def add_evidence(ctx: NodeContext, tool: str = "queryArticle", **kw: Any) -> Evidence:
    fields: dict[str, Any] = {
        "node_id": "n1",
        "args": {},
        "write": tool == "createArticle",
        "status": EvidenceStatus.SUCCESS,
        "business_ok": True,
        "response": {"code": 200, "data": {"records": [{"id": "a1", "spaceId": "s9"}], "id": "a42"}},
    }
    fields.update(kw)
    evidence = Evidence(id=ctx.store.new_evidence_id(), task_id="t1", tool=tool, **fields)
    await ctx.record(evidence)
    return evidence
