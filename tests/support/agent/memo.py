"""The memo agent (memo_agent, skill memo.keeper): business skills that log every real execution and can crash the
process mid-call, and the helpers of the probes that drive it (the recording models, the CLI)."""

from __future__ import annotations

import json
from typing import Any

from skillyard import SkillYard
from skillyard.agent.models import ScriptedModel
from skillyard.agent.turn import TurnResult
from support.agent.folder import AgentFolder
from support.agent.probes import call, say

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}


HANDLER = """
import asyncio, json, os, pathlib

LOG = pathlib.Path({log!r})
NAME = {name!r}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        seen = {{k: ctx.get(k) for k in ("user_id", "passport_id", "idempotency_key")}}
        f.write(json.dumps({{"tool": NAME, "input": input, "ctx": seen}}, ensure_ascii=False) + "\\n")
    mode = input.get("mode", "ok")
    if mode == "crash":
        os._exit(17)  # the process dies in the middle of the call
    if mode == "timeout":
        await asyncio.sleep(5)
    if mode == "io":
        raise OSError("disk gone")
    if mode == "business":
        return {{"ok": False, "code": "E42", "msg": "duplicate title"}}
    if mode == "empty":
        return {{"code": 200, "data": {{"records": []}}}}
    return {result}
"""


RESULTS = {
    "saveNote": '{"code": 200, "data": {"id": "n-" + str(input.get("title")), "title": input.get("title")}}',
    "sendMemo": '{"code": 200, "data": {"memo": input.get("text")}}',
    "findNotes": '{"code": 200, "data": {"records": '
    '[{"id": "n-1", "title": "季度总结"}, {"id": "n-2", "title": "周报"}]}}',
    "quickWrite": '{"code": 200, "data": {"id": "q-1"}}',
    "pickTool": '{"code": 200, "picked": dict(input)}',
    "plainTool": '{"code": 200, "plain": True}',
}


SCHEMAS: dict[str, dict[str, Any]] = {
    "saveNote": {
        "type": "object",
        "properties": {"title": {"type": "string"}, "owner": {}, "mode": {}},
        "required": ["title", "owner"],
    },
    "sendMemo": {"type": "object", "properties": {"text": {}, "mode": {}}, "required": ["text"]},
    "findNotes": {"type": "object", "properties": {"q": {}, "mode": {}, "count": {"type": "integer"}}},
    "quickWrite": {"type": "object", "properties": {"q": {}, "mode": {}}},
    "pickTool": {
        "type": "object",
        "properties": {k: {} for k in ("a", "b", "c", "d", "color", "noteIds", "kind", "mode", "userId")},
        "required": ["kind"],
    },
    "plainTool": {"type": "object", "properties": {"q": {"type": "string", "description": "free text"}}},
}


TOOLS = list(RESULTS)


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
            "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
        },
        "quickWrite": {
            "label": "正在快速写入",
            "sideEffect": "WRITE",
            "confirm": False,
            "args": {"q": FREE, "mode": FREE},
            "success": OK200,
        },
        "pickTool": {
            "label": "正在挑选",
            "args": {
                "kind": {"const": "fixed", "label": "类型"},
                "color": {"sources": ["MODEL"], "required": False, "enum": ["red", "blue"], "label": "颜色"},
                "mode": FREE,
            },
            "success": OK200,
        },
    },
}


class MemoAgent(AgentFolder):
    """An agent folder in tmp_path: one contract skill and business skills that log every real execution."""

    FOLDER = "memo_agent"
    AGENT_MD = (
        "---\nagent_code: memo\nagent_name: Memo keeper\nskills: [memo.keeper]\n---\n"
        "# Identity\nA careful memo keeper.\n# Mission\nKeep the user's notes.\n"
    )
    KEEPER_MD = (
        "---\nname: keeper\nskill_key: memo.keeper\ndescription: Keeps memos.\n"
        "tools: [{tools}]\n---\nThe keeper manual: save notes the user dictates.\n"
    )
    HANDLER, RESULTS, SCHEMAS, CONTRACT, TOOLS = HANDLER, RESULTS, SCHEMAS, CONTRACT, TOOLS

    @staticmethod
    def skill_md(tools: list[str], manual: str) -> str:
        return (
            "---\nname: keeper\nskill_key: memo.keeper\ndescription: Keeps memos.\n"
            f"tools: [{', '.join(tools)}]\n---\n{manual}\n"
        )

    def tools(self, tools: list[str], manual: str = "The keeper manual.") -> None:
        (self.keeper / "SKILL.md").write_text(self.skill_md(tools, manual), encoding="utf-8")


def changed(mutate: Any) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    mutate(contract)
    return contract


class Recorder:
    """A ChatModel around the scripted model that records every model call's messages and offered tools."""

    def __init__(self, spec: str) -> None:
        self.inner = ScriptedModel(spec.removeprefix("script:"))
        self.seen: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]):
        self.seen.append((json.loads(json.dumps(messages, default=str)), tools))
        return await self.inner.complete(messages, tools, state)

    def offered(self, index: int) -> list[str]:
        return [t["function"]["name"] for t in self.seen[index][1]]

    def system(self, index: int) -> str:
        return self.seen[index][0][0]["content"]


class EvModel(Recorder):
    """The scripted model, where ``$EV`` in a call's arguments is replaced by the newest evidence id the model has
    seen in a tool message (the model copies it from an observation, as a real model would)."""

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]):
        from skillyard.agent.models import ModelReply, ToolCall

        reply = await super().complete(messages, tools, state)
        seen = [
            json.loads(m["content"]).get("evidence_id")
            for m in messages
            if m.get("role") == "tool" and m.get("content", "").startswith("{")
        ]
        ids = [e for e in seen if e]
        if not ids:
            return reply
        fixed = tuple(ToolCall(c.id, c.name, c.arguments.replace("$EV", ids[-1])) for c in reply.tool_calls)
        return ModelReply(reply.text, fixed)


async def send_once(env: MemoAgent, message: str, *turns: dict[str, Any], session: str = "once") -> TurnResult:
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        return await agent.send(env.sid(session), message, identity=IDENTITY)


async def run_builtin(env: MemoAgent, name: str, arguments: Any, *before: dict[str, Any]) -> TurnResult:
    """One builtin call after the turns ``before``; the model then stops with text."""
    return await send_once(env, "保存季度总结", *before, call(name, arguments), say("stop"))


def last(turn: TurnResult) -> Any:
    return turn.observations[-1]


ARG_REJECTED = "agent_runtime.40032"


def _priority(c: dict[str, Any]) -> None:
    c["tools"]["pickTool"]["args"].update(
        {
            "a": {"sources": ["EVIDENCE"], "label": "甲"},  # a made-up value: rejected at once
            "b": {"sources": ["MODEL"], "missing": {"action": "FAIL", "message": "没有乙就做不了"}},
            "c": {"sources": ["MODEL"], "missing": {"action": "CALL_TOOL", "tool": "findNotes"}},
            "d": {"sources": ["MODEL"]},  # missing: ASK_USER (default)
        }
    )
