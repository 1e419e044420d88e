"""The note keeper agent (notes_agent, skill notes.keeper) with ten business skills: failure modes of every §14.4
class (timeouts, refused connections, OSError subclasses), platform-field readers, confirm:false writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from skillyard import SkillYard
from skillyard.agent.models import ScriptedModel
from skillyard.agent.turn import TurnResult
from skillyard.cli import cli
from support.agent.folder import AgentFolder

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}


HANDLER = """
import asyncio, json, pathlib, urllib.error, http.client

LOG = pathlib.Path({log!r})
NAME = {name!r}


class DiskFull(OSError):
    pass


class NobodyHome(ConnectionRefusedError):
    pass


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input, "key": ctx.get("idempotency_key"),
                            "user": ctx.get("user_id")}}, ensure_ascii=False) + "\\n")
    mode = input.get("mode", "ok")
    if mode == "timeout":
        await asyncio.sleep(5)
    if mode == "io":
        raise OSError("disk gone")
    if mode == "refused":
        raise ConnectionRefusedError("nobody listens")
    if mode == "boom":
        raise ValueError("boom")
    if mode == "urlerror":
        raise urllib.error.URLError("name resolution failed")
    if mode == "custom_oserror":
        raise DiskFull("the disk is full")
    if mode == "custom_refused":
        raise NobodyHome("nobody home")
    if mode == "remote_disconnected":
        raise http.client.RemoteDisconnected("peer closed the connection")
    if mode == "business":
        return {{"ok": False, "code": "E42", "msg": "duplicate title"}}
    if mode == "successfalse":
        return {{"success": False, "msg": "nope"}}
    if mode == "none_found":
        return {{"code": 200, "data": {{"records": []}}}}
    if mode == "blank":
        return {{"code": 200, "data": {{"records": {{"id": None, "title": ""}}}}}}
    return {result}
"""


RESULTS = {
    "saveNote": '{"code": 200, "data": {"id": "n-" + str(input.get("title")), "title": input.get("title")}}',
    "sendMemo": '{"code": 200, "data": {"memo": input.get("text")}}',
    "findNotes": '{"code": 200, "data": {"records": '
    '[{"id": "n-1", "title": "季度总结"}, {"id": "n-2", "title": "周报"}]}}',
    "lookupOwner": '{"found": True, "owner": "ada"}',
    "tagNote": '{"code": 200, "tagged": input.get("noteId"), "tag": input.get("tag")}',
    "openNote": '{"code": 200, "opened": input.get("noteId")}',
    "riskyWrite": '{"code": 200, "data": {"id": "r-1"}}',
    "stampNote": '{"code": 200, "data": "s-" + str(input.get("title"))}',
    "whoAmI": "dict(input)",
    "plainTool": '{"code": 200, "plain": True}',
}


ANY = {"type": "object", "properties": {"q": {}, "mode": {}}}


SCHEMAS: dict[str, dict[str, Any]] = {
    "saveNote": {
        "type": "object",
        "properties": {"title": {}, "owner": {}, "category": {}, "pin": {}, "mode": {}},
        "required": ["title"],
    },
    "sendMemo": {"type": "object", "properties": {"text": {}, "mode": {}}, "required": ["text"]},
    "findNotes": {"type": "object", "properties": {"q": {}, "mode": {}, "count": {"type": "integer"}}},
    "lookupOwner": ANY,
    "tagNote": {"type": "object", "properties": {"noteId": {}, "tag": {}, "mode": {}}},
    "openNote": {"type": "object", "properties": {"noteId": {}, "mode": {}}},
    "riskyWrite": {"type": "object", "properties": {"q": {}, "mode": {}}},
    "stampNote": {"type": "object", "properties": {"title": {}, "owner": {}, "mode": {}}},
    "whoAmI": {
        "type": "object",
        "properties": {
            k: {} for k in ("userId", "memberId", "name", "organId", "organName", "organType", "deptPath", "mode")
        },
    },
    "plainTool": ANY,
}


FREE = {"sources": ["MODEL"], "required": False}


OK200 = {"path": "code", "op": "EQ", "value": 200}


CONTRACT: dict[str, Any] = {
    "outputs": {
        "noteId": {"sources": ["EVIDENCE"], "required": False, "share": "TASK"},
        "category": {"sources": ["USER"], "required": False, "share": "SESSION"},
    },
    "tools": {
        "saveNote": {
            "label": "正在保存笔记",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER", "EVIDENCE"], "label": "标题"},
                "owner": {"from": "platform.userId", "label": "所有者"},
                "category": {"from": "session.category", "required": False, "label": "分类"},
                "pin": {"sources": ["MODEL"], "required": False, "sensitive": True, "label": "口令"},
                "mode": FREE,
            },
            "success": OK200,
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "note", "path": "data", "entity": {"type": "note", "name": "title"}}],
            "verify": {"tool": "findNotes", "args": {"q": {"from": "call.title"}}},
        },
        "sendMemo": {
            "label": "正在发送备忘",
            "sideEffect": "WRITE",
            "args": {"text": {"sources": ["USER"], "label": "内容"}, "mode": FREE},
            "success": OK200,
        },
        "findNotes": {
            "label": "正在查找笔记",
            "args": {"q": FREE, "mode": FREE, "count": FREE},
            "success": OK200,
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
        },
        "lookupOwner": {"args": {"q": FREE, "mode": FREE}, "success": {"path": "found", "op": "TRUTHY"}},
        "tagNote": {
            "args": {"noteId": {"sources": ["PRIOR_TASK"]}, "tag": {"sources": ["SESSION"]}, "mode": FREE},
            "success": OK200,
        },
        "openNote": {"args": {"noteId": {"from": "prior.note.id"}, "mode": FREE}, "success": OK200},
        "riskyWrite": {
            "sideEffect": "WRITE",
            "confirm": False,
            "args": {"q": FREE, "mode": FREE},
            "success": OK200,
        },
        "stampNote": {
            "sideEffect": "WRITE",
            "confirm": False,
            "args": {"title": FREE, "owner": {"from": "platform.userId"}, "mode": FREE},
            "success": OK200,
            "extracts": [
                {"key": "stamp", "path": "data", "entity": {"type": "stamp", "scalar": "id", "name": "title"}}
            ],
        },
        "whoAmI": {
            "args": {
                field: {"from": f"platform.{field}", "required": False}
                for field in ("userId", "memberId", "name", "organId", "organName", "organType", "deptPath")
            }
        },
    },
}


TOOLS = list(RESULTS)


class KeeperAgent(AgentFolder):
    """An agent folder in tmp_path: a contract skill and business skills that log every real execution."""

    FOLDER = "notes_agent"
    AGENT_MD = (
        "---\nagent_code: notes\nagent_name: Note keeper\nskills: [notes.keeper]\n---\n"
        "# Identity\nA careful note keeper.\n# Mission\nKeep the user's notes.\n"
    )
    KEEPER_MD = (
        "---\nname: keeper\nskill_key: notes.keeper\ndescription: Keeps notes.\n"
        "tools: [{tools}]\n---\nThe keeper manual: save notes the user dictates.\n"
    )
    HANDLER, RESULTS, SCHEMAS, CONTRACT, TOOLS = HANDLER, RESULTS, SCHEMAS, CONTRACT, TOOLS

    def agent_md(self, text: str) -> None:
        (self.dir / "AGENT.md").write_text(text, encoding="utf-8")


def modified(**changes: Any) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    contract.update(changes)
    return contract


async def send_once(env: KeeperAgent, message: str, *turns: dict[str, Any], session: str = "once") -> TurnResult:
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        return await agent.send(env.sid(session), message, identity=IDENTITY)


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["agent", "check", *args])
    return result.exit_code, result.output


def check_rows(agent_dir: Path) -> tuple[int, list[dict[str, Any]]]:
    code, output = check(str(agent_dir), "--json")
    return code, json.loads(output)


class Recorder:
    """A ChatModel wrapping the scripted model that records what each model call was offered."""

    def __init__(self, spec: str) -> None:
        self.inner = ScriptedModel(spec.removeprefix("script:"))
        self.seen: list[tuple[list[dict[str, Any]], list[str]]] = []

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]):
        self.seen.append((messages, [t["function"]["name"] for t in tools]))
        return await self.inner.complete(messages, tools, state)
