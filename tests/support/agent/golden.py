"""Golden traces of the part-1 agent runner (tests/agent/test_golden.py, tests/agent/golden/*.json).

Why: the runner is about to learn task graphs of several nodes. The single-node ("part 1") behaviour must not
change for single-skill agents, so a few scenarios are recorded as JSON traces before the change and replayed after
it. A trace holds what a caller can observe through public surfaces only — the TurnResult, the stored node, task
and session (``AgentStore``) and the real executions the business skills logged — and every field is selected
explicitly: keys a multi-node runner may legitimately add (a new ``as_dict()`` key, new node state) never enter a
trace, so they cannot break the replay.

Generated values are replaced by stable placeholders numbered in order of first appearance (``<task:1>``,
``<node:1>``, ``<ev:1>``, ``<session:1>``) and the test's tmp folder by ``<tmp>``; timestamps are never selected.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "agent" / "golden"

#: ``SKILLYARD_GOLDEN_RECORD=1`` rewrites the golden files instead of comparing.
RECORD_ENV = "SKILLYARD_GOLDEN_RECORD"

#: A business tool's result enters the trace only up to this size (as compact JSON): small results are the ones a
#: reader can check by eye, and a large one is already pinned down by the executions and the evidence.
SMALL_CONTENT = 400

#: The ids the runtime generates (store.new_id: a prefix and 16 hex digits).
_GENERATED = re.compile(r"\b(task|node|ev)_[0-9a-f]{16}\b")

#: Returns the real executions so far, oldest first, as ``{"tool": …, "input": {…}}`` rows (``AgentFolder.calls``).
Executions = Callable[[], list[dict[str, Any]]]


def _checkpoint(checkpoint: dict[str, Any] | None) -> dict[str, Any] | None:
    if checkpoint is None:
        return None
    return {key: checkpoint.get(key) for key in ("type", "question", "expected_fields", "tool")}


def _observation(o: dict[str, Any]) -> dict[str, Any]:
    """Tool, decision and bound sources; the content only of a business tool's small result (builtin contents and
    refusal texts are wording, their ``code`` is the decision)."""
    view = {"tool": o["tool"], "ok": o["ok"], "code": o["code"], "sources": dict(o.get("sources") or {})}
    if o["ok"] and not str(o["tool"]).startswith("builtin_"):
        text = json.dumps(o.get("content"), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        if len(text) <= SMALL_CONTENT:
            view["content"] = o.get("content")
    return view


def turn_view(turn: dict[str, Any]) -> dict[str, Any]:
    """The selected fields of ``TurnResult.as_dict()`` (or of the CLI's ``--json`` object, the same shape)."""
    return {
        "session_id": turn["session_id"],
        "task_id": turn.get("task_id"),
        "node_id": turn.get("node_id"),
        "status": turn["status"],
        "reply": turn.get("reply"),
        "checkpoint": _checkpoint(turn.get("checkpoint")),
        "observations": [_observation(o) for o in turn.get("observations") or []],
        "evidence": [
            {"tool": e["tool"], "status": e["status"], "business_ok": e.get("business_ok")}
            for e in turn.get("evidence") or []
        ],
    }


async def store_view(yard: SkillYard, turn: dict[str, Any]) -> dict[str, Any]:
    """The node, task and session of the turn as stored (what a new process would load), selected field by field."""
    store = AgentStore(yard.database)
    node = await store.load_node(turn["node_id"]) if turn.get("node_id") else None
    task = await store.load_task(turn["task_id"]) if turn.get("task_id") else None
    session = await store.load_session(turn["session_id"])
    return {
        "node": None
        if node is None
        else {
            "skill_key": node.skill_key,
            "status": node.status.value,
            "target": node.target,
            "target_claimed": node.target_claimed,
            "inputs": node.inputs,
            "outputs": {k: {"value": v.value, "source_type": v.source_type} for k, v in node.outputs.items()},
        },
        "task": None if task is None else {"shared": task.shared},
        "session": None
        if session is None
        else {
            "values": session.values,
            "entities": [{"type": e.type, "id": e.id, "name": e.name} for e in session.entities],
        },
    }


class Trace:
    """The turns of one scenario. ``send`` / ``resume`` drive an agent and record the turn; ``record`` takes a turn
    produced elsewhere (``resume_session``, the CLI). ``executions`` reads the business skills' log; each turn
    records the executions it caused."""

    def __init__(self, executions: Executions, tmp: Path) -> None:
        self.executions = executions
        self.tmp = tmp
        self.turns: list[dict[str, Any]] = []
        self.sessions: list[str] = []
        self._ran = 0

    def session(self, session_id: str) -> str:
        """Register a session id (it carries a random suffix) so that it is replaced by ``<session:N>``."""
        self.sessions.append(session_id)
        return session_id

    async def send(self, agent: Any, session_id: str, message: str, **kwargs: Any) -> TurnResult:
        turn = await agent.send(session_id, message, **kwargs)
        action: dict[str, Any] = {"send": message}
        if kwargs.get("skill_key"):
            action["skill_key"] = kwargs["skill_key"]
        await self.record(action, turn, agent.yard)
        return turn

    async def resume(self, agent: Any, session_id: str, action: str, text: str | None = None) -> TurnResult:
        turn = await agent.resume(session_id, action, text)
        await self.record({"resume": action, "text": text}, turn, agent.yard)
        return turn

    async def record(
        self, action: dict[str, Any], turn: TurnResult | dict[str, Any], yard: SkillYard | None = None
    ) -> None:
        data = json.loads(json.dumps(turn.as_dict() if isinstance(turn, TurnResult) else turn, ensure_ascii=False))
        if yard is None:
            async with SkillYard() as own:
                stored = await store_view(own, data)
        else:
            stored = await store_view(yard, data)
        rows = self.executions()
        ran, self._ran = rows[self._ran :], len(rows)
        self.turns.append(
            {
                "action": action,
                "turn": turn_view(data),
                "store": stored,
                "executions": [{"tool": r["tool"], "arguments": r["input"]} for r in ran],
            }
        )

    def normalized(self) -> list[dict[str, Any]]:
        """The trace as JSON values with placeholders for generated ids, session ids and the tmp folder."""
        numbers: dict[str, dict[str, int]] = {}

        def placeholder(kind: str, value: str) -> str:
            seen = numbers.setdefault(kind, {})
            return f"<{kind}:{seen.setdefault(value, len(seen) + 1)}>"

        def text(value: str) -> str:
            value = value.replace(str(self.tmp), "<tmp>")
            for session_id in sorted(set(self.sessions), key=len, reverse=True):
                if session_id in value:
                    value = value.replace(session_id, placeholder("session", session_id))
            return _GENERATED.sub(lambda m: placeholder(m.group(1), m.group(0)), value)

        def walk(value: Any) -> Any:
            if isinstance(value, str):
                return text(value)
            if isinstance(value, dict):
                return {walk(k): walk(v) for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v) for v in value]
            return value

        return walk(json.loads(json.dumps(self.turns, ensure_ascii=False)))


def dump(trace: list[dict[str, Any]]) -> str:
    """The golden file's text: pretty-printed, sorted keys, UTF-8 characters as they are."""
    return json.dumps(trace, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def check_golden(name: str, trace: Trace) -> None:
    """Compare the trace with ``golden/<name>.json`` (a unified diff on mismatch); with SKILLYARD_GOLDEN_RECORD=1
    write it instead."""
    path = GOLDEN_DIR / f"{name}.json"
    actual = dump(trace.normalized())
    if os.environ.get(RECORD_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no golden trace {path}; record it with {RECORD_ENV}=1 (and say why in the commit message)")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"golden/{name}.json",
            tofile=f"{name} (this run)",
        )
        pytest.fail(f"the {name} trace differs from its golden file:\n{''.join(diff)}", pytrace=False)
