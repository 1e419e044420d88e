"""The tool-call chain harness: a yard with business tools that count their real executions, a contract skill, and a
NodeContext over an in-memory store that remembers every status an evidence record was saved with."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillyard import SkillYard
from skillyard.agent.chain import call_tool
from skillyard.agent.context import MemoryEvidenceStore, NodeContext
from skillyard.agent.state import (
    Evidence,
)

HANDLER = """
import asyncio, json, pathlib

LOG = pathlib.Path({log!r})
NAME = {name!r}
RESULT = {result}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input, "key": ctx.get("idempotency_key"),
                            "user": ctx.get("user_id"), "session": ctx.get("session_id")}}) + "\\n")
    mode = input.get("mode", "ok")
    if mode == "timeout":
        await asyncio.sleep(5)
    if mode == "io":
        raise OSError("disk gone")
    if mode == "refused":
        raise ConnectionRefusedError("nobody listens")
    if mode == "boom":
        raise ValueError("boom")
    if mode == "business":
        return {{"ok": False, "code": "E42", "msg": "duplicate title"}}
    if mode == "structured":
        return {{"ok": False, "error": {{"code": "E77", "message": "库存不足"}}}}
    if mode == "empty":
        return None
    if mode == "none_found":
        return {{"code": 200, "data": {{"records": []}}}}
    if mode == "code_text":
        return {{"code": "200", "data": {{"id": "n-9", "title": input.get("title")}}}}
    return RESULT(input)
"""


SAVE = 'lambda i: {"code": 200, "data": {"id": "n-1", "title": i.get("title")}}'


FIND = (
    'lambda i: {"code": 200, "data": {"records": [{"id": "n-1", "title": "季度总结"}, {"id": "n-2", "title": "周报"}]}}'
)


SCHEMA_SAVE = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "owner": {"type": "string"},
        "secret": {"type": "string"},
        "mode": {"type": "string"},
        "lines": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["title", "owner"],
}


SCHEMA_ANY = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "mode": {"type": "string"}, "count": {"type": "integer"}},
}


FREE = {"sources": ["MODEL"], "required": False}


BASE_CONTRACT: dict[str, Any] = {
    "tools": {
        "saveNote": {
            "label": "Saving the note",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER", "EVIDENCE"], "label": "标题"},
                "owner": {"from": "platform.userId"},
                "secret": {"sources": ["MODEL"], "required": False, "sensitive": True, "label": "口令"},
                "mode": FREE,
            },
            "success": {"path": "code", "op": "EQ", "value": 200},
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "note", "path": "data", "entity": {"type": "note", "name": "title"}}],
            "verify": {"tool": "findNotes", "args": {"q": {"from": "call.title"}}},
        },
        "findNotes": {
            "label": "Looking up notes",
            "args": {"q": FREE, "mode": FREE, "count": FREE},
            "success": {"path": "code", "op": "EQ", "value": 200},
            "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
        },
    }
}


class Harness:
    """A yard with the business tools, a contract skill, and a NodeContext over MemoryEvidenceStore."""

    def __init__(self, root: Path, log: Path, yard: SkillYard, ctx: NodeContext) -> None:
        self.root, self.log, self.yard, self.ctx = root, log, yard, ctx

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """Every real execution the business skills recorded (optionally of one tool)."""
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    async def call(self, name: str, arguments: Any, **kw: Any) -> Any:
        return await call_tool(self.ctx, name, arguments, **kw)


class RecordingStore(MemoryEvidenceStore):
    """The in-memory store, also remembering every status an evidence record was saved with (in order)."""

    def __init__(self) -> None:
        super().__init__()
        self.history: list[tuple[str, str]] = []

    async def save_evidence(self, evidence: Evidence) -> None:
        self.history.append((evidence.id, evidence.status.value))
        await super().save_evidence(evidence)


def tool_skill(root: Path, log: Path, name: str, result: str, schema: dict[str, Any], extra: str = "") -> None:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: tool {name}\n{extra}---\nBody.\n", "utf-8")
    (folder / "schema.json").write_text(json.dumps(schema), "utf-8")
    (folder / "handler.py").write_text(textwrap.dedent(HANDLER).format(log=str(log), name=name, result=result), "utf-8")


def contract_skill(root: Path, contract: dict[str, Any], tools: list[str]) -> None:
    folder = root / "notes_skill"
    folder.mkdir(parents=True, exist_ok=True)
    front = f"name: notes_skill\nskill_key: test.notes\ndescription: Notes.\ntools: [{', '.join(tools)}]\n"
    (folder / "SKILL.md").write_text(f"---\n{front}---\nManual.\n", "utf-8")
    (folder / "contract.json").write_text(json.dumps(contract), "utf-8")


Build = Callable[..., Any]


def with_tool(contract: dict[str, Any], tool: str, **changes: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(contract))
    copy["tools"][tool].update(changes)
    return copy


def _save_args(**args: Any) -> dict[str, Any]:
    return {"owner": {"from": "platform.userId"}, **args}
