"""The desk agent (desk_agent, skill desk.keeper), the CLI in-process, and a scripted chat-completions server on
127.0.0.1 for the OpenAI-compatible client."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from support.agent.folder import AgentFolder
from support.agent.probes import skillyard_cli

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}


API_KEY = "sk-probe5-" + "9f8e7d6c5b4a"


FINGERPRINT_TRIP = "agent_runtime.40026"


APPROVAL_REQUIRED = "agent_runtime.42221"


HANDLER = """
import json, pathlib

LOG = pathlib.Path({log!r})
NAME = {name!r}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        seen = {{k: ctx.get(k) for k in ("user_id", "passport_id", "idempotency_key")}}
        f.write(json.dumps({{"tool": NAME, "input": input, "ctx": seen}}, ensure_ascii=False) + "\\n")
    if input.get("mode") == "business":
        return {{"ok": False, "code": "E42", "msg": "duplicate title"}}
    return {result}
"""


RESULTS = {
    "saveNote": '{"code": 200, "data": {"id": "n-" + str(input.get("title")), "title": input.get("title")}}',
    "findNotes": '{"code": 200, "data": {"records": [{"id": "n-1", "title": "季度总结"}]}}',
    "quickWrite": '{"code": 200, "data": {"id": "q-1"}}',
    "pickTool": '{"code": 200, "picked": dict(input)}',
}


TOOLS = list(RESULTS)
SCHEMAS: dict[str, dict[str, Any]] = {
    "saveNote": {
        "type": "object",
        "properties": {"title": {"type": "string"}, "owner": {}, "mode": {}},
        "required": ["title", "owner"],
    },
    "findNotes": {
        "type": "object",
        "properties": {"q": {"type": "string", "description": "words to look for"}, "count": {"type": "integer"}},
    },
    "quickWrite": {"type": "object", "properties": {"q": {}, "mode": {}}},
    "pickTool": {"type": "object", "properties": {"a": {}, "d": {}}},
}


FREE = {"sources": ["MODEL"], "required": False}


OK200 = {"path": "code", "op": "EQ", "value": 200}


CONTRACT: dict[str, Any] = {
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
        },
        "findNotes": {
            "label": "正在查找笔记",
            "args": {"q": FREE, "count": FREE},
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
        "pickTool": {"label": "正在挑选", "args": {"a": FREE}, "success": OK200},
    },
}


class DeskAgent(AgentFolder):
    """An agent folder in tmp_path: one contract skill and business skills that log every real execution."""

    FOLDER = "desk_agent"
    AGENT_MD = (
        "---\nagent_code: desk\nagent_name: Desk clerk\nskills: [desk.keeper]\n---\n"
        "# Identity\nA careful clerk.\n# Mission\nKeep the user's notes.\n"
    )
    KEEPER_MD = (
        "---\nname: keeper\nskill_key: desk.keeper\ndescription: Keeps notes.\n"
        "tools: [{tools}]\n---\nThe keeper manual: save notes the user dictates.\n"
    )
    HANDLER, RESULTS, SCHEMAS, CONTRACT, TOOLS = HANDLER, RESULTS, SCHEMAS, CONTRACT, TOOLS
    TOOL_FRONT = ""

    def raw_script(self, text: str, name: str = "raw.yaml") -> Path:
        path = self.root / name
        path.write_text(text, encoding="utf-8")
        return path


def changed(mutate: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    mutate(contract)
    return contract


def run_cli(
    env: DeskAgent,
    session: str,
    message: str,
    *extra: str,
    extra_env: dict[str, str] | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``skillyard agent run`` of this agent (in-process unless ``process``)."""
    run = ("agent", "run", str(env.dir), "--session", env.sid(session), "--message", message)
    return skillyard_cli(*run, *extra, extra_env=extra_env, process=process)


def tool_calls_message(*calls: tuple[str, str, Any], content: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}} for cid, name, args in calls
        ],
    }


def completion(message: dict[str, Any]) -> dict[str, Any]:
    return {"id": "cmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}


class Plan:
    """What the server answers, one action per request: ``(status, payload)``, ``("sleep", seconds, payload)`` or
    ``("close",)`` (drop the connection without an answer). The last action repeats."""

    def __init__(self) -> None:
        self.actions: list[tuple[Any, ...]] = []
        self.seen: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def next(self) -> tuple[Any, ...]:
        with self.lock:
            index = min(len(self.seen) - 1, len(self.actions) - 1)
            return self.actions[index]


def make_handler(plan: Plan) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with plan.lock:
                plan.seen.append(
                    {"path": self.path, "headers": dict(self.headers.items()), "body": json.loads(raw or b"{}")}
                )
            action = plan.next()
            if action[0] == "close":
                self.close_connection = True
                return
            if action[0] == "sleep":
                time.sleep(action[1])
                action = (200, action[2])
            status, payload = action
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if not isinstance(payload, str) else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def openai_env(url: str, **more: str) -> dict[str, str]:
    return {"SKILLYARD_MODEL_BASE_URL": url, "SKILLYARD_MODEL_API_KEY": API_KEY, **more}
