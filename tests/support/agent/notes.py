"""The notes agent (notes_agent, skill notes.keeper): saveNote/sendMemo/findNotes/lookupOwner/tagNote business
skills that append every real execution to a log, and the contract that binds them."""

from __future__ import annotations

import json
from typing import Any

from skillyard import SkillYard
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult
from support.agent.folder import AgentFolder

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}


HANDLER = """
import asyncio, json, pathlib

LOG = pathlib.Path({log!r})
NAME = {name!r}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input, "key": ctx.get("idempotency_key")}}, ensure_ascii=False))
        f.write("\\n")
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
    return {result}
"""


RESULTS = {
    "saveNote": '{"code": 200, "data": {"id": "n-" + str(input.get("title")), "title": input.get("title"), '
    '"category": input.get("category")}}',
    "sendMemo": '{"code": 200, "data": {"memo": input.get("text")}}',
    "findNotes": '{"code": 200, "data": {"records": '
    '[{"id": "n-1", "title": "季度总结"}, {"id": "n-2", "title": "周报"}]}}',
    "lookupOwner": '{"found": True, "owner": "ada"}',
    "tagNote": '{"code": 200, "tagged": input.get("noteId")}',
    "otherTool": '{"code": 200}',
}


SCHEMAS: dict[str, dict[str, Any]] = {
    "saveNote": {
        "properties": {"title": {}, "owner": {}, "category": {}, "mode": {}},
        "required": ["title"],
    },
    "sendMemo": {"properties": {"text": {}, "mode": {}}, "required": ["text"]},
    "findNotes": {"properties": {"q": {}, "mode": {}, "count": {"type": "integer"}}},
    "lookupOwner": {"properties": {"q": {}, "mode": {}}},
    "tagNote": {"properties": {"noteId": {}, "tag": {}, "budget": {"type": "integer"}, "mode": {}}},
    "otherTool": {"properties": {"q": {}}},
}


FREE = {"sources": ["MODEL"], "required": False}


CONTRACT: dict[str, Any] = {
    "outputs": {
        "noteId": {"sources": ["EVIDENCE"], "required": False, "share": "TASK"},
        "category": {"sources": ["USER"], "required": False, "share": "SESSION"},
    },
    "tools": {
        "saveNote": {
            "label": "Saving the note",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER", "EVIDENCE"], "label": "标题"},
                "owner": {"from": "platform.userId"},
                "category": {"from": "session.category", "required": False, "label": "分类"},
                "mode": FREE,
            },
            "success": {"path": "code", "op": "EQ", "value": 200},
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "note", "path": "data", "entity": {"type": "note", "name": "title"}}],
            "verify": {"tool": "findNotes", "args": {"q": {"from": "call.title"}}},
        },
        "sendMemo": {
            "label": "Sending a memo",
            "sideEffect": "WRITE",
            "args": {"text": {"sources": ["USER"], "label": "内容"}, "mode": FREE},
            "success": {"path": "code", "op": "EQ", "value": 200},
        },
        "findNotes": {
            "label": "Looking up notes",
            "args": {"q": FREE, "mode": FREE, "count": FREE},
            "success": {"path": "code", "op": "EQ", "value": 200},
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
        },
        "lookupOwner": {"args": {"q": FREE, "mode": FREE}, "success": {"path": "found", "op": "TRUTHY"}},
        "tagNote": {
            "args": {
                "noteId": {
                    "sources": ["EVIDENCE"],
                    "label": "笔记",
                    "missing": {"action": "CALL_TOOL", "tool": "findNotes"},
                },
                "tag": {"sources": ["USER"], "label": "标签"},
                "budget": {"sources": ["MODEL"], "missing": {"action": "FAIL", "message": "没有预算，无法打标签"}},
                "mode": FREE,
            },
            "success": {"path": "code", "op": "EQ", "value": 200},
        },
    },
}


TOOLS = ["saveNote", "sendMemo", "findNotes", "lookupOwner", "tagNote"]


class NotesAgent(AgentFolder):
    """An agent folder in tmp_path whose business skills append every real execution to a log."""

    FOLDER = "notes_agent"
    AGENT_MD = "---\nagent_code: notes\nskills: [notes.keeper]\n---\n# Mission\nKeep notes.\n"
    KEEPER_MD = "---\nname: keeper\nskill_key: notes.keeper\ndescription: Notes.\ntools: [{tools}]\n---\nManual.\n"
    HANDLER, RESULTS, SCHEMAS, CONTRACT, TOOLS = HANDLER, RESULTS, SCHEMAS, CONTRACT, TOOLS
    UID_LENGTH = 12
    ENSURE_ASCII = True

    def schema(self, name: str) -> dict[str, Any]:
        return {"type": "object", **SCHEMAS[name]}


async def send_once(env: NotesAgent, message: str, *turns: dict[str, Any]) -> TurnResult:
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        return await agent.send(env.sid("once"), message, identity=IDENTITY)


async def open_node(yard: SkillYard, session: str) -> str | None:
    stored = await AgentStore(yard.database).load_session(session)
    assert stored is not None
    return stored.node_id


def copy_contract() -> dict[str, Any]:
    contract: dict[str, Any] = json.loads(json.dumps(CONTRACT))
    return contract
