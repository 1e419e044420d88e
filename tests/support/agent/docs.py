"""The document agent (docs_agent, skill docs.keeper): business skills that log every real execution and share a small
"database" file, so a write can commit and then time out and the verify tool (checkDoc) really looks for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillyard import SkillYard
from skillyard.agent import ErrorCode
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult
from support.agent.folder import AgentFolder
from support.agent.probes import call

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}


APPROVAL_REQUIRED = "agent_runtime.42221"


PENDING_VERIFY = "agent_runtime.40030"


TIMEOUT = "agent_runtime.40016"


OPEN_EVIDENCE = "agent_runtime.42251"


ALL_CODES = {str(code) for code in ErrorCode}


HANDLER = """
import asyncio, json, pathlib

LOG = pathlib.Path({log!r})
DB = pathlib.Path({db!r})
FAULT = pathlib.Path({fault!r})
NAME = {name!r}


def rows():
    if not DB.exists():
        return []
    return [json.loads(x) for x in DB.read_text(encoding="utf-8").splitlines()]


def commit(row):
    with DB.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\\n")


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input, "key": ctx.get("idempotency_key"),
                            "user": ctx.get("user_id")}}, ensure_ascii=False) + "\\n")
    mode = input.get("mode", "ok")
    if NAME == "checkDoc":
        if FAULT.exists():
            raise OSError("the lookup service is down")
        hits = [r for r in rows() if r.get("title") == input.get("title")]
        return {{"found": bool(hits), "hits": hits}}
    if mode == "refused":
        raise ConnectionRefusedError("nobody listens")
    if mode == "io":
        raise OSError("disk gone before the commit")
    if mode == "business":
        return {{"ok": False, "code": "E42", "msg": "duplicate"}}
    if mode == "lost":  # the request never reaches the business system, the call hangs
        await asyncio.sleep(5)
    commit({{"tool": NAME, **{{k: v for k, v in input.items() if k != "mode"}}}})
    if mode == "timeout":  # commit, then the answer never comes back
        await asyncio.sleep(5)
    return {result}
"""


RESULTS = {
    "saveDoc": '{"code": 200, "data": {"id": "d-" + str(input.get("title")), "title": input.get("title")}}',
    "delDoc": '{"code": 200, "data": {"deleted": input.get("title")}}',
    "sendMemo": '{"code": 200, "data": {"memo": input.get("text")}}',
    "bumpDoc": '{"code": 200, "data": {"bumped": input.get("q")}}',
    "findDocs": '{"code": 200, "data": {"records": [r for r in rows()]}}',
    "checkDoc": "None",
}


SCHEMAS: dict[str, dict[str, Any]] = {
    "saveDoc": {
        "type": "object",
        "properties": {"title": {}, "owner": {}, "folder": {}, "kind": {}, "mode": {}},
        "required": ["title"],
    },
    "delDoc": {"type": "object", "properties": {"title": {}, "mode": {}}, "required": ["title"]},
    "sendMemo": {"type": "object", "properties": {"text": {}, "mode": {}}, "required": ["text"]},
    "bumpDoc": {"type": "object", "properties": {"q": {}, "mode": {}}},
    "findDocs": {"type": "object", "properties": {"q": {}, "mode": {}}},
    "checkDoc": {"type": "object", "properties": {"title": {}, "mode": {}}},
}


TOOLS = list(RESULTS)


FREE = {"sources": ["MODEL"], "required": False}


OK200 = {"path": "code", "op": "EQ", "value": 200}


CONTRACT: dict[str, Any] = {
    "tools": {
        "saveDoc": {
            "label": "正在保存文档",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER"], "label": "标题"},
                "owner": {"from": "platform.userId", "label": "所有者"},
                "folder": {"from": "session.folder", "required": False, "label": "目录"},
                "mode": FREE,
            },
            "success": OK200,
            "extracts": [{"key": "doc", "path": "data"}],
            "verify": {"tool": "checkDoc", "args": {"title": {"from": "call.title"}}},
        },
        "delDoc": {
            "label": "正在删除文档",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {"title": {"sources": ["USER"], "label": "标题"}, "mode": FREE},
            "success": OK200,
        },
        "sendMemo": {
            "label": "正在发送备忘",
            "sideEffect": "WRITE",
            "args": {"text": {"sources": ["USER"], "label": "内容"}, "mode": FREE},
            "success": OK200,
        },
        "bumpDoc": {
            "label": "正在刷新",
            "sideEffect": "WRITE",
            "confirm": False,
            "args": {"q": FREE, "mode": FREE},
            "success": OK200,
        },
        "findDocs": {
            "label": "正在查找文档",
            "args": {"q": FREE, "mode": FREE},
            "success": OK200,
            "extracts": [{"key": "docs", "path": "data.records"}],
        },
        "checkDoc": {
            "label": "正在核实文档",
            "args": {"title": FREE, "mode": FREE},
            "success": {"path": "found", "op": "TRUTHY"},
        },
    },
}


class DocsAgent(AgentFolder):
    """An agent folder in tmp_path; its business skills log every real execution and share a small database."""

    FOLDER = "docs_agent"
    AGENT_MD = (
        "---\nagent_code: docs\nagent_name: Doc keeper\nskills: [docs.keeper]\n---\n"
        "# Identity\nA careful document keeper.\n# Mission\nKeep the user's documents.\n"
    )
    KEEPER_MD = (
        "---\nname: keeper\nskill_key: docs.keeper\ndescription: Keeps docs.\n"
        "tools: [{tools}]\n---\nThe keeper manual: save what the user dictates.\n"
    )
    HANDLER, RESULTS, SCHEMAS, CONTRACT, TOOLS = HANDLER, RESULTS, SCHEMAS, CONTRACT, TOOLS

    def __init__(self, root: Path) -> None:
        self.db = root / "docs.jsonl"
        self.fault = root / "checkDoc.down"
        super().__init__(root)

    def handler_values(self) -> dict[str, str]:
        return {"log": str(self.log), "db": str(self.db), "fault": str(self.fault)}

    def committed(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.db.exists():
            return []
        rows = [json.loads(x) for x in self.db.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]


def changed(mutate: Any) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    mutate(contract)
    return contract


def approve(tool: str, summary: str = "请确认") -> dict[str, Any]:
    return call("builtin_node_approval", {"summary": summary, "toolName": tool})


def codes(turn: TurnResult) -> list[str | None]:
    """The codes of the turn's calls except the automatic verify calls (the model never calls checkDoc itself)."""
    return [o.code for o in turn.observations if o.tool != "checkDoc"]


def statuses(turn: TurnResult, tool: str) -> list[str]:
    return [e["status"] for e in turn.evidence if e["tool"] == tool]


def assert_coded(*turns: TurnResult) -> None:
    """Issue: "Every observation the model sees carries the spec's error code (§17) and a next step"."""
    for turn in turns:
        for o in turn.observations:
            if o.ok:
                continue
            assert o.code in ALL_CODES or o.code == "E42", (o.tool, o.code, o.content)
            assert o.next_step and str(o.next_step).strip(), (o.tool, o.code, o.content)


async def store_of(yard: SkillYard) -> AgentStore:
    return AgentStore(yard.database)


SAVE = {"title": "季度总结"}


ASK_SAVE = "请保存文档《季度总结》"


async def _send(env: DocsAgent, message: str, *turns: dict[str, Any], session: str) -> TurnResult:
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        return await agent.send(env.sid(session), message, identity=IDENTITY)
