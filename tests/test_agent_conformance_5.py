"""Review probes, round 5, for issue 5 (the contract-driven agent runtime, part 1): the model clients, the CLI and
the Python interface, written black-box from the issue text ("Models", "Interfaces", "One node, end to end" and the
settings list) and docs/agents.md, docs/cli.md, docs/agent-models.md and README.md — not from the platform source.

Covered here (what tests/test_agent_models.py and tests/test_agent_conformance*.py leave out):

* the OpenAI-compatible chat-completions client against a real HTTP server on 127.0.0.1: request shape, several
  tool calls in one reply, text-only replies, replies without choices, HTTP error hints, error-body truncation, the
  key never echoed, no retry after a request was sent, and the client driving the runner (a model error after a
  tool ran does not run the tool again, the key stays out of logs, turns, stored sessions and CLI output);
* the scripted model through the runtime: the position per session across `run`, new tasks and new instances,
  exhaustion in the middle of a turn and at resume, malformed script files through the CLI and ``yard.agent``;
* the CLI (``python -m skillyard agent run/resume``, real subprocesses): the ``--json`` turn fields for RUNNING,
  FAILED and refusals, argument sources, evidence ids, exit codes and usage errors without tracebacks;
* the Python API (``yard.agent``, ``send``, ``resume``, ``resume_session``): bad arguments are SkillyardErrors;
* ``[agent]`` / ``[agent.model]`` settings from ``SKILLYARD_HOME/settings.toml`` and the environment, end to end.

Real parts only: in-process business skills that log every real execution, real PostgreSQL (``db_env``), scripted
models, a real local HTTP server and ``python -m skillyard`` subprocesses.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.agent_probes import call, codes, needs_db, say, write_files
from support.local_http import serve
from skillyard import SkillYard
from skillyard.agent.models import ModelError, ModelReply, OpenAIChatModel, ScriptError, ScriptExhausted, ToolCall
from skillyard.agent.runner import AgentError, resume_session
from skillyard.agent.settings import AgentSettingsError
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult
from skillyard.errors import SkillyardError

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}
API_KEY = "sk-probe5-" + "9f8e7d6c5b4a"
CODE_RE = re.compile(r"^agent_runtime\.\d{5}$")

ARG_JSON_INVALID = "agent_runtime.40020"
CATALOG_DENIED = "agent_runtime.40027"
FINGERPRINT_TRIP = "agent_runtime.40026"
APPROVAL_REQUIRED = "agent_runtime.42221"

# ---------------------------------------------------------------------------------------------------------------------
# An agent folder with real business skills
# ---------------------------------------------------------------------------------------------------------------------

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


class Env:
    """An agent folder in tmp_path: one contract skill and business skills that log every real execution."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "calls.jsonl"
        self.dir = root / "desk_agent"
        self.scripts = 0
        self.uid = uuid.uuid4().hex[:10]
        skills = self.dir / "skills"
        self.keeper = skills / "keeper"
        files = {
            self.dir / "AGENT.md": "---\nagent_code: desk\nagent_name: Desk clerk\nskills: [desk.keeper]\n---\n"
            "# Identity\nA careful clerk.\n# Mission\nKeep the user's notes.\n",
            self.keeper / "SKILL.md": "---\nname: keeper\nskill_key: desk.keeper\ndescription: Keeps notes.\n"
            f"tools: [{', '.join(RESULTS)}]\n---\nThe keeper manual: save notes the user dictates.\n",
        }
        for name, result in RESULTS.items():
            folder = skills / name
            files[folder / "SKILL.md"] = f"---\nname: {name}\ndescription: tool {name}\n---\n"
            files[folder / "handler.py"] = textwrap.dedent(HANDLER).format(log=str(self.log), name=name, result=result)
            files[folder / "schema.json"] = json.dumps(SCHEMAS[name])
        write_files(files)
        self.contract(CONTRACT)

    def sid(self, name: str) -> str:
        return f"{name}-{self.uid}"

    def contract(self, contract: dict[str, Any]) -> None:
        (self.keeper / "contract.json").write_text(json.dumps(contract, ensure_ascii=False), encoding="utf-8")

    def script(self, *turns: dict[str, Any]) -> str:
        self.scripts += 1
        path = self.root / f"turns{self.scripts}.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
        return f"script:{path}"

    def raw_script(self, text: str, name: str = "raw.yaml") -> Path:
        path = self.root / name
        path.write_text(text, encoding="utf-8")
        return path

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(x) for x in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]


def changed(mutate: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    mutate(contract)
    return contract


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    for name in list(os.environ):
        if name.startswith(("SKILLYARD_AGENT_", "SKILLYARD_MODEL")) or name.startswith("OPENAI_"):
            monkeypatch.delenv(name)
    return Env(tmp_path)


async def send_once(env: Env, message: str, *turns: dict[str, Any], session: str = "once") -> TurnResult:
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        return await agent.send(env.sid(session), message, identity=IDENTITY)


def cli(*args: str, extra_env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "skillyard", *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=cwd,
        timeout=120,
    )


def clean(result: subprocess.CompletedProcess) -> bool:
    """No Python traceback anywhere in the output."""
    return "Traceback" not in result.stdout + result.stderr


def run_cli(env: Env, session: str, message: str, *extra: str, extra_env: dict[str, str] | None = None):
    return cli(
        "agent", "run", str(env.dir), "--session", env.sid(session), "--message", message, *extra, extra_env=extra_env
    )


# ---------------------------------------------------------------------------------------------------------------------
# A real chat-completions server on 127.0.0.1
# ---------------------------------------------------------------------------------------------------------------------


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


@pytest.fixture
def chat() -> Iterator[tuple[Plan, str]]:
    plan = Plan()
    with serve(make_handler(plan)) as url:
        yield plan, f"{url}/v1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


MESSAGES = [{"role": "system", "content": "You help."}, {"role": "user", "content": "find milk"}]
NESTED_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "orders_create",
            "description": "Create an order",
            "parameters": {
                "type": "object",
                "properties": {
                    "lines": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
                            "required": ["sku"],
                        },
                    },
                    "note": {"type": ["string", "null"], "enum": ["a", "b", None]},
                },
                "required": ["lines"],
            },
        },
    }
]


def oa(url: str, name: str = "m", **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(url, name, API_KEY, kwargs.pop("timeout", 5.0), **kwargs)


# =====================================================================================================================
# 1. The OpenAI-compatible client on its own
# =====================================================================================================================


async def test_openai_request_forwards_the_whole_conversation_and_nested_tool_schemas(chat):
    plan, url = chat
    plan.actions = [(200, completion({"role": "assistant", "content": "ok"}))]
    history = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "orders_create", "arguments": '{"lines": []}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
    ]
    reply = await oa(url, "shape-model").complete(history, NESTED_TOOLS, {})
    assert reply == ModelReply(text="ok", tool_calls=())
    (seen,) = plan.seen
    assert seen["path"] == "/v1/chat/completions"
    assert seen["headers"]["Content-Type"].startswith("application/json")
    assert seen["body"]["model"] == "shape-model"
    assert seen["body"]["messages"] == history
    assert seen["body"]["tools"] == NESTED_TOOLS
    assert seen["body"]["tool_choice"] == "auto"


async def test_openai_several_tool_calls_in_one_reply_keep_order_ids_and_text(chat):
    plan, url = chat
    message = tool_calls_message(
        ("c-a", "alpha", '{"x": 1}'),
        ("c-b", "beta", "{}"),
        ("c-c", "gamma", '{"s": "中文"}'),
        content="Working on it.",
    )
    plan.actions = [(200, completion(message))]
    reply = await oa(url).complete(MESSAGES, NESTED_TOOLS, {})
    assert reply.text == "Working on it."
    assert reply.tool_calls == (
        ToolCall("c-a", "alpha", '{"x": 1}'),
        ToolCall("c-b", "beta", "{}"),
        ToolCall("c-c", "gamma", '{"s": "中文"}'),
    )


async def test_openai_a_text_reply_with_an_empty_tool_call_list_is_text_only(chat):
    plan, url = chat
    plan.actions = [(200, completion({"role": "assistant", "content": "Just text.", "tool_calls": []}))]
    reply = await oa(url).complete(MESSAGES, [], {})
    assert reply == ModelReply(text="Just text.", tool_calls=())


async def test_openai_the_reply_message_round_trips_into_the_next_request(chat):
    plan, url = chat
    plan.actions = [(200, completion(tool_calls_message(("c9", "alpha", '{"x": 2}'))))]
    reply = await oa(url).complete(MESSAGES, [], {})
    message = reply.to_message()
    assert message["role"] == "assistant"
    assert message["tool_calls"] == [
        {"id": "c9", "type": "function", "function": {"name": "alpha", "arguments": '{"x": 2}'}}
    ]


@pytest.mark.parametrize(
    "payload",
    [{"id": "x", "object": "chat.completion"}, {"choices": []}, {"choices": "nope"}],
    ids=["no-choices", "empty-choices", "choices-not-a-list"],
)
async def test_openai_a_reply_without_choices_is_reported_as_such(chat, payload):
    """agent-models.md: "A reply without `choices` or that is not JSON is reported as such" (a ModelError)."""
    plan, url = chat
    plan.actions = [(200, payload)]
    with pytest.raises(ModelError) as info:
        await oa(url).complete(MESSAGES, [], {})
    assert "choices" in str(info.value)
    assert API_KEY not in str(info.value)


async def test_openai_a_choice_without_a_message_is_a_model_error_not_a_key_error(chat):
    plan, url = chat
    plan.actions = [(200, {"choices": [{"index": 0, "finish_reason": "stop"}]})]
    with pytest.raises(ModelError):
        await oa(url).complete(MESSAGES, [], {})


@pytest.mark.parametrize(
    ("status", "message", "hint"),
    [
        (403, "forbidden for this project", "key"),
        (404, "The model `nope` does not exist", "model"),
        (429, "Rate limit reached for requests", "rate limit"),
        (503, "overloaded", "later"),
    ],
    ids=["403", "404", "429", "503"],
)
async def test_openai_http_errors_give_status_provider_message_and_hint(chat, status, message, hint):
    plan, url = chat
    plan.actions = [(status, {"error": {"message": message, "type": "x"}})]
    with pytest.raises(ModelError) as info:
        await oa(url, retries=3).complete(MESSAGES, [], {})
    text = str(info.value)
    assert f"HTTP {status}" in text and message in text, text
    assert hint in text.lower(), text
    assert len(plan.seen) == 1  # an HTTP error is never retried


@pytest.mark.parametrize(
    "payload",
    [[{"message": {"content": "x"}}], "just a string", {"choices": [{"message": "hello"}]}],
    ids=["list-body", "string-body", "message-not-object"],
)
async def test_openai_an_oddly_shaped_json_reply_is_a_model_error(chat, payload):
    plan, url = chat
    plan.actions = [(200, json.dumps(payload))]
    with pytest.raises(ModelError):
        await oa(url).complete(MESSAGES, [], {})


@pytest.mark.parametrize(
    "function",
    [{"name": "alpha"}, {"name": "alpha", "arguments": None}],
    ids=["arguments-missing", "arguments-null"],
)
async def test_openai_a_tool_call_without_arguments_text_does_not_crash(chat, function):
    """Some servers leave `arguments` out for a call without parameters: the client answers a ToolCall whose
    arguments are text (the chain then judges them) or a ModelError — never a TypeError."""
    plan, url = chat
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": function}],
    }
    plan.actions = [(200, completion(message))]
    try:
        reply = await oa(url).complete(MESSAGES, [], {})
    except ModelError:
        return
    (only,) = reply.tool_calls
    assert only.name == "alpha" and isinstance(only.arguments, str)


async def test_openai_a_tool_call_without_an_id_still_gets_a_usable_id(chat):
    """Some servers (Ollama) send tool calls without ids; the runtime answers each call with a tool message that
    names its id, so the client must not hand back a missing one."""
    plan, url = chat
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"type": "function", "function": {"name": "alpha", "arguments": "{}"}},
            {"type": "function", "function": {"name": "beta", "arguments": "{}"}},
        ],
    }
    plan.actions = [(200, completion(message))]
    try:
        reply = await oa(url).complete(MESSAGES, [], {})
    except ModelError:
        return
    ids = [c.id for c in reply.tool_calls]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == 2, ids


async def test_openai_the_providers_error_message_is_cut_to_500_characters(chat):
    plan, url = chat
    plan.actions = [(500, {"error": {"message": "A" * 300 + "B" * 4000}})]
    with pytest.raises(ModelError) as info:
        await oa(url).complete(MESSAGES, [], {})
    text = str(info.value)
    assert "A" * 300 in text
    assert "B" * 501 not in text and len(text) < 1500, len(text)


async def test_openai_a_key_echoed_by_the_provider_is_replaced(chat):
    plan, url = chat
    plan.actions = [(500, {"error": {"message": f"internal error while handling key {API_KEY} (sorry)"}})]
    with pytest.raises(ModelError) as info:
        await oa(url).complete(MESSAGES, [], {})
    assert API_KEY not in str(info.value)
    assert "<api key>" in str(info.value)


async def test_openai_a_key_echoed_in_a_plain_text_error_body_is_replaced(chat):
    plan, url = chat
    plan.actions = [(502, f"upstream said: bad token Bearer {API_KEY}")]
    with pytest.raises(ModelError) as info:
        await oa(url).complete(MESSAGES, [], {})
    assert "HTTP 502" in str(info.value)
    assert API_KEY not in str(info.value) and API_KEY not in repr(info.value)


async def test_openai_a_dropped_connection_after_the_request_was_sent_is_not_retried(chat):
    """Retries are for connection failures only: once the request went out it may have been processed."""
    plan, url = chat
    plan.actions = [("close",)]
    with pytest.raises(ModelError) as info:
        await oa(url, retries=3).complete(MESSAGES, [], {})
    assert len(plan.seen) == 1
    assert API_KEY not in str(info.value)


async def test_openai_unreachable_names_the_url_and_every_attempt():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ModelError) as info:
        await oa(url, retries=1).complete(MESSAGES, [], {})
    text = str(info.value)
    assert "127.0.0.1" in text and "2 attempt(s)" in text, text
    assert API_KEY not in text


async def test_openai_the_key_is_never_logged_even_at_debug(chat, caplog: pytest.LogCaptureFixture):
    plan, url = chat
    plan.actions = [(200, completion({"content": "fine"})), (401, {"error": {"message": f"bad key {API_KEY}"}})]
    with caplog.at_level(logging.DEBUG):
        await oa(url).complete(MESSAGES, NESTED_TOOLS, {})
        with pytest.raises(ModelError):
            await oa(url).complete(MESSAGES, NESTED_TOOLS, {})
    assert caplog.records, "debug logging captured nothing"
    assert API_KEY not in caplog.text
    assert plan.seen[0]["headers"]["Authorization"] == f"Bearer {API_KEY}"


async def test_openai_leaves_the_model_state_json_serialisable_and_keyless(chat):
    plan, url = chat
    plan.actions = [(200, completion({"content": "fine"}))]
    state: dict[str, Any] = {}
    await oa(url).complete(MESSAGES, [], state)
    assert API_KEY not in json.dumps(state)


# =====================================================================================================================
# 1b. The OpenAI-compatible client driving the runner
# =====================================================================================================================


def openai_env(url: str, **more: str) -> dict[str, str]:
    return {"SKILLYARD_MODEL_BASE_URL": url, "SKILLYARD_MODEL_API_KEY": API_KEY, **more}


@needs_db
async def test_runner_a_model_http_error_is_a_model_error_and_runs_nothing(env: Env, chat, monkeypatch):
    plan, url = chat
    for k, v in openai_env(url).items():
        monkeypatch.setenv(k, v)
    plan.actions = [(500, {"error": {"message": "engine down"}})]
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model="openai:probe")
        with pytest.raises(ModelError) as info:
            await agent.send(env.sid("m500"), "找周报", identity=IDENTITY)
    assert "HTTP 500" in str(info.value) and API_KEY not in str(info.value)
    assert len(plan.seen) == 1 and env.calls() == []


@needs_db
async def test_runner_a_model_error_after_a_tool_ran_never_runs_the_tool_again(env: Env, chat, monkeypatch):
    """Models: retry only for transport errors before any tool runs. The read ran once; the failing model call is
    not retried; the next message continues the node with the tool result in the conversation, and the tool is
    not run again."""
    plan, url = chat
    for k, v in openai_env(url).items():
        monkeypatch.setenv(k, v)
    plan.actions = [
        (200, completion(tool_calls_message(("c-1", "findNotes", '{"q": "周报"}')))),
        (500, {"error": {"message": "engine down"}}),
        (200, completion({"role": "assistant", "content": "找到一篇。"})),
    ]
    session = env.sid("after-tool")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model="openai:probe")
        with pytest.raises(ModelError):
            await agent.send(session, "找周报", identity=IDENTITY)
    assert len(plan.seen) == 2 and len(env.calls("findNotes")) == 1
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model="openai:probe")
        turn = await agent.send(session, "然后呢？", identity=IDENTITY)
    assert turn.reply == "找到一篇。"
    assert len(env.calls("findNotes")) == 1
    messages = plan.seen[2]["body"]["messages"]
    assert any(m.get("role") == "tool" and m.get("tool_call_id") == "c-1" for m in messages), messages
    assert [m["content"] for m in messages if m["role"] == "user"][-1] == "然后呢？"


@needs_db
async def test_runner_a_read_timeout_after_a_tool_ran_is_not_retried(env: Env, chat, monkeypatch):
    plan, url = chat
    for k, v in openai_env(url, SKILLYARD_MODEL_TIMEOUT="0.3", SKILLYARD_MODEL_RETRIES="3").items():
        monkeypatch.setenv(k, v)
    plan.actions = [
        (200, completion(tool_calls_message(("c-1", "findNotes", '{"q": "周报"}')))),
        ("sleep", 1.0, completion({"content": "late"})),
    ]
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model="openai:probe")
        with pytest.raises(ModelError) as info:
            await agent.send(env.sid("slow"), "找周报", identity=IDENTITY)
    assert "timed out" in str(info.value) and "SKILLYARD_MODEL_TIMEOUT" in str(info.value)
    assert len(plan.seen) == 2 and len(env.calls("findNotes")) == 1


@needs_db
async def test_runner_offers_business_tools_with_their_json_schemas(env: Env, chat, monkeypatch):
    plan, url = chat
    for k, v in openai_env(url).items():
        monkeypatch.setenv(k, v)
    plan.actions = [(200, completion({"content": "好的"}))]
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model="openai:probe")
        turn = await agent.send(env.sid("schema"), "hi", identity=IDENTITY)
    assert turn.status == "RUNNING" and turn.reply == "好的"
    tools = plan.seen[0]["body"]["tools"]
    assert all(t["type"] == "function" and set(t["function"]) >= {"name", "parameters"} for t in tools), tools
    by_name = {t["function"]["name"]: t["function"] for t in tools}
    params = by_name["findNotes"]["parameters"]
    assert params["type"] == "object"
    assert params["properties"]["count"]["type"] == "integer"
    assert by_name["builtin_node_finish"]["parameters"]["type"] == "object"


@needs_db
async def test_runner_keeps_the_key_out_of_logs_turns_and_the_stored_session(env: Env, chat, monkeypatch, caplog):
    plan, url = chat
    for k, v in openai_env(url).items():
        monkeypatch.setenv(k, v)
    plan.actions = [
        (200, completion(tool_calls_message(("c-1", "findNotes", '{"q": "周报"}')))),
        (200, completion({"content": "找到。"})),
    ]
    session = env.sid("nokey")
    with caplog.at_level(logging.DEBUG):
        async with SkillYard() as yard:
            agent = await yard.agent(env.dir, model="openai:probe")
            turn = await agent.send(session, "找周报", identity=IDENTITY)
            stored = await AgentStore(yard.database).load_session(session)
    assert turn.reply == "找到。"
    assert API_KEY not in caplog.text
    assert API_KEY not in json.dumps(turn.as_dict(), ensure_ascii=False, default=str)
    assert API_KEY not in repr(stored) and API_KEY not in json.dumps(vars(stored), default=str)


@needs_db
def test_cli_openai_401_is_one_clean_error_without_the_key(env: Env, chat):
    plan, url = chat
    plan.actions = [(401, {"error": {"message": f"Incorrect API key provided: {API_KEY}"}})]
    result = run_cli(env, "c401", "hi", "--model", "openai:probe", "--json", extra_env=openai_env(url))
    assert result.returncode == 1 and clean(result), result.stderr
    assert "401" in result.stderr
    assert API_KEY not in result.stdout + result.stderr


@needs_db
def test_cli_openai_debug_logging_never_shows_the_key_and_stdout_stays_json(env: Env, chat):
    plan, url = chat
    plan.actions = [
        (200, completion(tool_calls_message(("c-1", "findNotes", '{"q": "周报"}')))),
        (200, completion({"content": "找到。"})),
    ]
    result = cli(
        "-vv",
        "agent",
        "run",
        str(env.dir),
        "--session",
        env.sid("vv"),
        "--message",
        "找周报",
        "--model",
        "openai:probe",
        "--json",
        extra_env=openai_env(url),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["reply"] == "找到。"
    assert API_KEY not in result.stdout + result.stderr


@needs_db
def test_cli_openai_unreachable_server_names_the_url_and_attempts(env: Env):
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = run_cli(
        env, "unreach", "hi", "--model", "openai:probe", extra_env=openai_env(url, SKILLYARD_MODEL_RETRIES="0")
    )
    assert result.returncode == 1 and clean(result), result.stderr
    assert "127.0.0.1" in result.stderr and "1 attempt(s)" in result.stderr
    assert API_KEY not in result.stdout + result.stderr


@needs_db
def test_cli_openai_takes_base_url_and_key_from_settings_toml(env: Env, chat, home: Path):
    plan, url = chat
    (home / "settings.toml").write_text(f'[agent.model]\nbase_url = "{url}/"\napi_key = "{API_KEY}"\n')
    plan.actions = [(200, completion({"content": "来自文件"}))]
    result = run_cli(env, "filecfg", "hi", "--model", "openai:file-model", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "来自文件"
    assert plan.seen[0]["path"] == "/v1/chat/completions"
    assert plan.seen[0]["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert plan.seen[0]["body"]["model"] == "file-model"


@needs_db
def test_cli_openai_environment_base_url_beats_the_file(env: Env, chat, home: Path):
    plan, url = chat
    dead = f"http://127.0.0.1:{free_port()}/v1"
    (home / "settings.toml").write_text(f'[agent.model]\nbase_url = "{dead}"\nretries = 0\n')
    plan.actions = [(200, completion({"content": "env wins"}))]
    result = run_cli(env, "envcfg", "hi", "--model", "openai:m", "--json", extra_env=openai_env(url))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "env wins"


@needs_db
def test_cli_openai_generic_openai_variables_are_the_fallback(env: Env, chat):
    plan, url = chat
    plan.actions = [(200, completion({"content": "fallback"}))]
    result = run_cli(
        env,
        "generic",
        "hi",
        "--model",
        "openai:m",
        "--json",
        extra_env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": API_KEY},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "fallback"
    assert plan.seen[0]["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert API_KEY not in result.stdout + result.stderr


# =====================================================================================================================
# 2. The scripted model through the runtime
# =====================================================================================================================


@needs_db
def test_script_position_continues_when_a_later_run_passes_the_same_script_again(env: Env):
    """Models: the position is stored with the session, so later `run` calls continue the script — also when the
    second run names the same script file again (a new ScriptedModel instance)."""
    model = env.script(say("第一句"), say("第二句"), say("第三句"))
    first = run_cli(env, "again", "一", "--model", model, "--json")
    second = run_cli(env, "again", "二", "--model", model, "--json")
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert json.loads(first.stdout)["reply"] == "第一句"
    assert json.loads(second.stdout)["reply"] == "第二句"


@needs_db
async def test_script_position_continues_into_the_next_task_of_the_session(env: Env):
    model = env.script(
        call("findNotes", {"q": "a"}),
        call("builtin_node_finish", {"output": "第一件事完成"}),
        say("第二个任务的回答"),
    )
    session = env.sid("tasks")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        done = await agent.send(session, "找一下", identity=IDENTITY)
    assert done.status == "DONE" and done.reply == "第一件事完成"
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        nxt = await agent.send(session, "再来", identity=IDENTITY)
    assert nxt.reply == "第二个任务的回答" and nxt.task_id != done.task_id


@needs_db
async def test_script_position_is_per_session(env: Env):
    model = env.script(say("甲"), say("乙"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        a1 = await agent.send(env.sid("sa"), "x", identity=IDENTITY)
        b1 = await agent.send(env.sid("sb"), "x", identity=IDENTITY)
        a2 = await agent.send(env.sid("sa"), "y", identity=IDENTITY)
    assert (a1.reply, b1.reply, a2.reply) == ("甲", "甲", "乙")


@needs_db
async def test_script_several_tool_calls_in_one_item_run_in_order_with_stable_ids(env: Env):
    model = env.script(
        {
            "tool_calls": [
                {"name": "findNotes", "arguments": {"q": "a"}},
                {"name": "pickTool", "arguments": {"a": "x"}},
                {"name": "findNotes", "arguments": {"q": "b"}, "id": "mine"},
            ]
        },
        say("三个都做了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.send(env.sid("multi"), "做三件事", identity=IDENTITY)
    assert [o.tool for o in turn.observations] == ["findNotes", "pickTool", "findNotes"]
    assert [o.call_id for o in turn.observations] == ["call_1_1", "call_1_2", "mine"]
    assert [c["tool"] for c in env.calls()] == ["findNotes", "pickTool", "findNotes"]
    assert turn.reply == "三个都做了"


@needs_db
def test_script_exhausted_mid_turn_after_a_tool_ran_is_one_clean_error(env: Env):
    model = env.script(call("findNotes", {"q": "a"}))
    result = run_cli(env, "short", "找", "--model", model, "--json")
    assert result.returncode == 1 and clean(result), result.stderr
    assert "turn 2" in result.stderr and "only 1 turn" in result.stderr, result.stderr
    assert len(env.calls("findNotes")) == 1


@needs_db
def test_script_exhausted_at_resume_is_one_clean_error(env: Env):
    model = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
    )
    first = run_cli(env, "rx", "保存季度总结", "--model", model, "--context", json.dumps(IDENTITY))
    assert first.returncode == 0, first.stderr
    resumed = cli("agent", "resume", "--session", env.sid("rx"), "--action", "CONFIRM")
    assert resumed.returncode == 1 and clean(resumed), resumed.stderr
    assert "turn 3" in resumed.stderr and "only 2 turns" in resumed.stderr, resumed.stderr
    assert len(env.calls("saveNote")) == 1  # the confirmed write ran once before the model was asked again


@needs_db
async def test_script_exhaustion_through_the_python_api_is_a_skillyard_error(env: Env):
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(call("findNotes", {"q": "a"})))
        with pytest.raises(ScriptExhausted) as info:
            await agent.send(env.sid("pyx"), "找", identity=IDENTITY)
    assert isinstance(info.value, SkillyardError)
    assert "turn 2" in str(info.value)


@needs_db
def test_script_a_session_continues_after_the_script_was_extended(env: Env):
    """The script ran out mid-turn (a loud error); the author appends turns and runs again: the session's stored
    position and node continue — the read that already ran is not run again."""
    path = Path(env.script(call("findNotes", {"q": "a"})).removeprefix("script:"))
    first = run_cli(env, "extend", "找", "--model", f"script:{path}")
    assert first.returncode == 1 and clean(first), first.stderr
    path.write_text(
        yaml.safe_dump({"turns": [call("findNotes", {"q": "a"}), say("补上了")]}, allow_unicode=True), encoding="utf-8"
    )
    again = run_cli(env, "extend", "继续", "--model", f"script:{path}", "--json")
    assert again.returncode == 0 and clean(again), again.stderr
    assert json.loads(again.stdout)["reply"] == "补上了"
    assert len(env.calls("findNotes")) == 1


BAD_SCRIPTS = [
    ("turns: [\n  - {text: hi\n", "invalid YAML"),
    ("turns:\n  - {tool_calls: [{arguments: {}}]}\n", "turns[0].tool_calls[0] has no 'name'"),
    ("turns:\n  - {say: hi}\n", "turns[0]"),
    ("steps:\n  - {text: hi}\n", "turns"),
]


@pytest.mark.parametrize(("text", "fragment"), BAD_SCRIPTS, ids=["bad-yaml", "no-name", "unknown-key", "no-turns"])
@needs_db
def test_cli_malformed_script_names_the_file_and_the_problem(env: Env, text: str, fragment: str):
    path = env.raw_script(text)
    result = run_cli(env, "bad", "x", "--model", f"script:{path}")
    assert result.returncode == 1 and clean(result), result.stderr
    assert fragment in result.stderr and str(path) in result.stderr, result.stderr
    assert env.calls() == []


@needs_db
def test_cli_a_script_path_that_is_a_folder_is_a_clean_error(env: Env):
    folder = env.root / "scripts_dir"
    folder.mkdir()
    result = run_cli(env, "dir", "x", "--model", f"script:{folder}")
    assert result.returncode == 1 and clean(result), result.stderr
    assert str(folder) in result.stderr


@needs_db
def test_cli_a_script_that_is_not_utf8_is_a_clean_error(env: Env):
    path = env.root / "latin1.yaml"
    path.write_bytes("turns:\n  - {text: caf\xe9}\n".encode("latin-1"))
    result = run_cli(env, "latin", "x", "--model", f"script:{path}")
    assert result.returncode == 1 and clean(result), result.stderr
    assert str(path) in result.stderr


async def test_yard_agent_rejects_a_malformed_script_with_a_script_error(env: Env):
    path = env.raw_script("turns:\n  - {tool_calls: []}\n")
    async with SkillYard() as yard:
        with pytest.raises(ScriptError) as info:
            agent = await yard.agent(env.dir, model=f"script:{path}")
            await agent.send(env.sid("malformed"), "x", identity=IDENTITY)
    assert "turns[0].tool_calls" in str(info.value) and str(path) in str(info.value)
    assert isinstance(info.value, SkillyardError)


@needs_db
def test_cli_script_arguments_as_invalid_json_text_reach_the_chain_verbatim(env: Env):
    model = env.script(call("findNotes", '{"q": "a"'), say("stop"))
    result = run_cli(env, "badjson", "找", "--model", model, "--json")
    assert result.returncode == 0, result.stderr
    obs = json.loads(result.stdout)["observations"][0]
    assert obs["code"] == ARG_JSON_INVALID and obs["arguments"] == '{"q": "a"' and obs["next_step"]
    assert env.calls() == []


# =====================================================================================================================
# 3. CLI: `agent run` / `agent resume`
# =====================================================================================================================


@needs_db
def test_cli_json_running_turn_fields(env: Env):
    model = env.script(call("findNotes", {"q": "周报"}), say("找到一篇。"))
    result = run_cli(env, "running", "找周报", "--model", model, "--context", json.dumps(IDENTITY), "--json")
    assert result.returncode == 0, result.stderr
    turn = json.loads(result.stdout)
    assert turn["session_id"] == env.sid("running")
    assert turn["status"] == "RUNNING" and turn["checkpoint"] is None and turn["reply"] == "找到一篇。"
    assert turn["task_id"] and turn["node_id"]
    (obs,) = turn["observations"]
    assert obs["tool"] == "findNotes" and obs["ok"] is True and obs["code"] is None
    assert json.loads(obs["arguments"]) == {"q": "周报"}
    assert obs["sources"] == {"q": "MODEL"}
    (ev,) = turn["evidence"]
    assert set(ev) == {"id", "tool", "status", "business_ok"}
    assert ev["id"] == obs["evidence_id"] and ev["tool"] == "findNotes"
    assert ev["status"] == "SUCCESS" and ev["business_ok"] is True
    assert turn["events"] == [{"type": "tool", "tool": "findNotes", "label": "正在查找笔记"}]


@needs_db
def test_cli_json_stdout_is_exactly_one_json_object_even_with_verbose_logging(env: Env):
    model = env.script(call("findNotes", {"q": "a"}), say("ok"))
    result = cli(
        "-v", "agent", "run", str(env.dir), "--session", env.sid("v"), "--message", "x", "--model", model, "--json"
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip().splitlines()) == 1
    assert json.loads(result.stdout)["status"] == "RUNNING"


@needs_db
def test_cli_a_failed_node_exits_1_and_still_prints_the_turn(env: Env):
    model = env.script(call("builtin_node_fail", {"reason": "资料不全，无法继续"}))
    result = run_cli(env, "failed", "x", "--model", model, "--json")
    assert result.returncode == 1 and clean(result), result.stderr
    turn = json.loads(result.stdout)
    assert turn["status"] == "FAILED" and turn["reply"] == "资料不全，无法继续" and turn["checkpoint"] is None


@needs_db
def test_cli_a_fingerprint_trip_fails_the_node_with_the_full_code(env: Env):
    same = call("findNotes", {"q": "a"})
    result = run_cli(env, "trip", "x", "--model", env.script(same, same, same, same, say("never")), "--json")
    assert result.returncode == 1 and clean(result), result.stderr
    turn = json.loads(result.stdout)
    assert turn["status"] == "FAILED"
    assert [o["code"] for o in turn["observations"]] == [None, None, None, FINGERPRINT_TRIP]
    assert len(turn["evidence"]) == 3 and len(env.calls("findNotes")) == 3


@needs_db
def test_cli_refusals_carry_the_full_code_and_a_next_step(env: Env):
    model = env.script(
        call("deleteEverything", {}),
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_finish", {"output": ""}),
        say("stop"),
    )
    result = run_cli(env, "refuse", "保存季度总结", "--model", model, "--context", json.dumps(IDENTITY), "--json")
    assert result.returncode == 0, result.stderr
    turn = json.loads(result.stdout)
    obs = turn["observations"]
    assert [o["code"] for o in obs] == [CATALOG_DENIED, APPROVAL_REQUIRED, "agent_runtime.42250"]
    for o in obs:
        assert CODE_RE.match(o["code"]) and o["ok"] is False and o["next_step"], o
        assert o["evidence_id"] is None
    assert turn["evidence"] == [] and env.calls() == []


@needs_db
def test_cli_sources_per_argument_show_evidence_and_platform(env: Env):
    model = env.script(
        call("findNotes", {"q": "总结"}),
        call("saveNote", {"title": "季度总结"}),
        say("stop"),
    )
    result = run_cli(env, "src", "把找到的那篇存一下", "--model", model, "--context", json.dumps(IDENTITY), "--json")
    assert result.returncode == 0, result.stderr
    gated = json.loads(result.stdout)["observations"][1]
    assert gated["code"] == APPROVAL_REQUIRED
    assert gated["sources"] == {"title": "EVIDENCE", "owner": "PLATFORM"}


@needs_db
def test_cli_follow_up_checkpoint_json_and_reply_by_resume(env: Env):
    model = env.script(
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
        call("saveNote", {"title": "月报"}),
        say("stop"),
    )
    first = run_cli(env, "fu", "存笔记", "--model", model, "--context", json.dumps(IDENTITY), "--json")
    assert first.returncode == 0, first.stderr
    turn = json.loads(first.stdout)
    assert turn["status"] == "SUSPENDED"
    assert turn["checkpoint"]["type"] == "FOLLOW_UP"
    assert turn["checkpoint"]["question"] == "标题是什么？" and turn["checkpoint"]["expected_fields"] == ["title"]
    answered = cli("agent", "resume", "--session", env.sid("fu"), "--action", "REPLY", "--text", "月报", "--json")
    assert answered.returncode == 0, answered.stderr
    after = json.loads(answered.stdout)
    assert after["observations"][0]["sources"]["title"] == "USER"
    assert after["observations"][0]["code"] == APPROVAL_REQUIRED


@needs_db
def test_cli_context_ids_reach_platform_fields_as_strings(env: Env):
    """Issue §11 mapping: userId←user_id, organId←org_id …; ids stay strings (also when the caller sends numbers)."""
    env.contract(
        changed(
            lambda c: c["tools"]["pickTool"]["args"].update(
                a={"from": "platform.userId"}, d={"from": "platform.organId"}
            )
        )
    )
    model = env.script(call("pickTool", {}), say("ok"))
    result = run_cli(
        env, "ids", "x", "--model", model, "--context", json.dumps({"user_id": 42, "org_id": "007"}), "--json"
    )
    assert result.returncode == 0, result.stderr
    obs = json.loads(result.stdout)["observations"][0]
    assert obs["ok"] and obs["sources"] == {"a": "PLATFORM", "d": "PLATFORM"}, obs
    assert env.calls("pickTool")[0]["input"] == {"a": "42", "d": "007"}


@needs_db
def test_cli_text_output_of_a_running_turn(env: Env):
    model = env.script(call("findNotes", {"q": "a"}), say("这是回答"))
    result = run_cli(env, "text", "x", "--model", model)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "status: RUNNING"
    assert "  findNotes: ok" in lines and "这是回答" in lines


@needs_db
def test_cli_resume_of_a_running_node_is_a_clean_error(env: Env):
    first = run_cli(env, "notsusp", "x", "--model", env.script(say("在的")))
    assert first.returncode == 0, first.stderr
    result = cli("agent", "resume", "--session", env.sid("notsusp"), "--action", "CONFIRM", "--json")
    assert result.returncode == 1 and clean(result), result.stderr
    assert result.stderr.strip()


@needs_db
def test_cli_resume_of_an_unknown_session_names_it_in_one_line(env: Env):
    result = cli("agent", "resume", "--session", env.sid("ghost"), "--action", "REJECT", "--json")
    assert result.returncode == 1 and clean(result), result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and env.sid("ghost") in lines[0], result.stderr


@pytest.mark.parametrize("context", ["null", "42", '"text"'], ids=["null", "number", "string"])
def test_cli_run_context_that_is_not_an_object_is_a_usage_error(env: Env, context: str):
    result = run_cli(env, "ctx", "x", "--model", env.script(say("x")), "--context", context)
    assert result.returncode == 2 and clean(result), result.stderr
    assert "--context" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["agent", "run", "--session", "s", "--message", "x"],
        ["agent", "resume", "--action", "CONFIRM"],
        ["agent", "resume", "--session", "s", "--action", ""],
        ["agent", "resume", "--session", "s", "--action", "OK"],
        ["agent", "run", "DIR", "--session", "s", "--message", "x", "--bogus"],
    ],
    ids=["no-agent-dir", "resume-no-session", "empty-action", "unknown-action", "unknown-option"],
)
def test_cli_usage_errors_exit_2_without_a_traceback(env: Env, args: list[str]):
    args = [str(env.dir) if a == "DIR" else a for a in args]
    result = cli(*args)
    assert result.returncode == 2 and clean(result), result.stderr
    assert result.stderr.strip()


@needs_db
def test_cli_unknown_action_lists_the_accepted_actions(env: Env):
    result = cli("agent", "resume", "--session", env.sid("x"), "--action", "APPROVE")
    assert result.returncode == 2 and clean(result)
    for action in ("confirm", "reject", "reply", "cancel"):  # --action is case-insensitive (docs/cli.md)
        assert action in result.stderr.lower(), result.stderr


@needs_db
def test_cli_missing_model_says_how_to_give_one(env: Env):
    result = run_cli(env, "nomodel", "x")
    assert result.returncode == 1 and clean(result), result.stderr
    assert "--model" in result.stderr or "SKILLYARD_MODEL" in result.stderr, result.stderr


@needs_db
def test_cli_resume_with_a_model_override(env: Env):
    model = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
    )
    first = run_cli(env, "ovr", "保存季度总结", "--model", model, "--context", json.dumps(IDENTITY))
    assert first.returncode == 0, first.stderr
    bad = cli("agent", "resume", "--session", env.sid("ovr"), "--action", "CONFIRM", "--model", "gpt-4o")
    assert bad.returncode == 1 and clean(bad) and "script:" in bad.stderr, bad.stderr
    assert env.calls() == []


# =====================================================================================================================
# 4. Python API
# =====================================================================================================================


@pytest.mark.parametrize("session", ["", "s" * 129], ids=["empty", "129-chars"])
@needs_db
async def test_api_send_refuses_a_bad_session_id_with_agent_error(env: Env, session: str):
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(call("findNotes", {"q": "a"}), say("x")))
        with pytest.raises(AgentError):
            await agent.send(session, "x", identity=IDENTITY)
    assert env.calls() == []


@pytest.mark.parametrize("identity", [["user_id", "42"], "user_id=42"], ids=["list", "string"])
@needs_db
async def test_api_send_identity_not_a_mapping_is_a_skillyard_error(env: Env, identity: Any):
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(call("findNotes", {"q": "a"}), say("x")))
        with pytest.raises(SkillyardError) as info:
            await agent.send(env.sid("idn"), "x", identity=identity)
    assert "identity" in str(info.value)
    assert env.calls() == []


@needs_db
async def test_api_send_message_not_text_is_a_skillyard_error(env: Env):
    message: Any = 42
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(say("x")))
        with pytest.raises(SkillyardError):
            await agent.send(env.sid("msg"), message, identity=IDENTITY)


@pytest.mark.parametrize("session", [None, 42], ids=["none", "int"])
@needs_db
async def test_api_send_session_id_not_text_is_an_agent_error(env: Env, session: Any):
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(say("x")))
        with pytest.raises(AgentError):
            await agent.send(session, "x", identity=IDENTITY)


async def _suspend_at_approval(env: Env, session: str, *after: dict[str, Any]) -> str:
    model = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        *after,
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.send(session, "保存季度总结", identity=IDENTITY)
    assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "APPROVAL", turn
    return model


@pytest.mark.parametrize("action", ["APPROVE", "", None, 1], ids=["approve", "empty", "none", "int"])
@needs_db
async def test_api_resume_bad_action_is_an_agent_error_and_runs_nothing(env: Env, action: Any):
    session = env.sid("badact")
    model = await _suspend_at_approval(env, session, call("builtin_node_finish", {"output": "ok"}))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        with pytest.raises(SkillyardError) as info:
            await agent.resume(session, action)
        assert not isinstance(info.value, ScriptExhausted)
        for word in ("CONFIRM", "REJECT", "REPLY", "CANCEL"):
            assert word in str(info.value), str(info.value)
        still = await agent.resume(session, "CANCEL")
    assert still.status == "CANCELLED"
    assert env.calls() == []


@needs_db
async def test_api_resume_accepts_a_lower_case_action(env: Env):
    session = env.sid("lower")
    model = await _suspend_at_approval(env, session, call("builtin_node_finish", {"output": "已保存"}))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.resume(session, "confirm")
    assert turn.status == "DONE" and turn.reply == "已保存" and len(env.calls("saveNote")) == 1


@needs_db
async def test_api_turn_reports_reply_status_checkpoint_and_observation_codes(env: Env):
    session = env.sid("report")
    model = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存笔记", "toolName": "saveNote"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.send(session, "保存季度总结", identity=IDENTITY)
    assert isinstance(turn, TurnResult)
    assert turn.status == "SUSPENDED" and turn.session_id == session
    assert turn.checkpoint is not None
    assert turn.checkpoint["type"] == "APPROVAL" and turn.checkpoint["tool"] == "saveNote"
    assert turn.checkpoint["question"].startswith("保存笔记\n") and "标题：季度总结" in turn.checkpoint["question"]
    assert "42" not in turn.checkpoint["question"]  # the platform-injected owner is hidden
    assert turn.checkpoint["expected_fields"] == []
    assert turn.reply == turn.checkpoint["question"]
    assert codes(turn) == [APPROVAL_REQUIRED, None]
    json.dumps(turn.as_dict(), ensure_ascii=False)


@needs_db
async def test_api_resume_reply_with_empty_text_at_follow_up_is_an_agent_error(env: Env):
    session = env.sid("empty-reply")
    model = env.script(call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]}), say("好"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        await agent.send(session, "存", identity=IDENTITY)
        for text in (None, "", "   "):
            with pytest.raises(AgentError):
                await agent.resume(session, "REPLY", text=text)
        turn = await agent.resume(session, "REPLY", text="周报")
    assert turn.status == "RUNNING" and turn.reply == "好"


@needs_db
async def test_api_resume_reply_text_not_a_string_is_a_skillyard_error(env: Env):
    session = env.sid("int-reply")
    model = env.script(call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]}), say("好"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        await agent.send(session, "存", identity=IDENTITY)
        with pytest.raises(SkillyardError):
            await agent.resume(session, "REPLY", text=42)  # type: ignore[arg-type]


@needs_db
async def test_api_missing_model_is_an_agent_error(env: Env):
    async with SkillYard() as yard:
        with pytest.raises(AgentError) as info:
            agent = await yard.agent(env.dir)
            await agent.send(env.sid("nomodel"), "x", identity=IDENTITY)
    assert "model" in str(info.value).lower()


@pytest.mark.parametrize("model", ["gpt-4o", "anthropic:claude"], ids=["bare", "other"])
async def test_api_a_bad_model_spec_lists_the_two_forms(env: Env, model: str):
    async with SkillYard() as yard:
        with pytest.raises(SkillyardError) as info:
            await yard.agent(env.dir, model=model)
    assert "script:FILE.yaml" in str(info.value) and "openai:MODEL" in str(info.value)


@pytest.mark.parametrize("model", [42, object()], ids=["int", "object"])
async def test_api_a_model_without_complete_is_a_skillyard_error(env: Env, model: Any):
    async with SkillYard() as yard:
        with pytest.raises(SkillyardError):
            agent = await yard.agent(env.dir, model=model)
            await agent.send(env.sid("nocomplete"), "x", identity=IDENTITY)


async def test_api_a_missing_agent_folder_is_a_skillyard_error(env: Env):
    async with SkillYard() as yard:
        with pytest.raises(SkillyardError) as info:
            await yard.agent(env.root / "nowhere", model=env.script(say("x")))
    assert "nowhere" in str(info.value)


@needs_db
async def test_api_resume_session_of_a_chat_model_object_needs_model(env: Env):
    session = env.sid("objmodel")
    from skillyard.agent.models import ScriptedModel

    path = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "好了"}),
    ).removeprefix("script:")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=ScriptedModel(path))
        await agent.send(session, "保存季度总结", identity=IDENTITY)
    async with SkillYard() as yard:
        with pytest.raises(AgentError) as info:
            await resume_session(yard, session, "CONFIRM")
        assert "model" in str(info.value)
        turn = await resume_session(yard, session, "CONFIRM", model=ScriptedModel(path))
    assert turn.status == "DONE" and len(env.calls("saveNote")) == 1


@needs_db
async def test_api_resume_session_of_an_unknown_session_names_it(env: Env):
    async with SkillYard() as yard:
        with pytest.raises(AgentError) as info:
            await resume_session(yard, env.sid("nobody"), "CONFIRM")
    assert env.sid("nobody") in str(info.value)


@needs_db
async def test_api_resume_with_no_open_node_is_an_agent_error(env: Env):
    session = env.sid("closed")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(call("builtin_node_fail", {"reason": "no"})))
        failed = await agent.send(session, "x", identity=IDENTITY)
        assert failed.status == "FAILED"
        with pytest.raises(AgentError):
            await agent.resume(session, "CONFIRM")


# =====================================================================================================================
# 5. Settings: settings.toml and environment overrides, end to end
# =====================================================================================================================


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[agent]\nfingerprint_limit = -1\n", "fingerprint_limit"),
        ('[agent]\nreconfirm_after = "soon"\n', "reconfirm_after"),
        ("[agent]\ndelegate_max_depth = -1\n", "delegate_max_depth"),
        ("[agent]\nplatform_hidden = 5\n", "platform_hidden"),
        ("[agent]\nwrite_confirm_bypass_tools = 3\n", "write_confirm_bypass_tools"),
        ('[agent.model]\nbase_url = "ftp://example.invalid"\n', "base_url"),
        ("[agent.model]\ntimeout = 0\n", "timeout"),
    ],
    ids=lambda v: v if "=" not in str(v) else str(v).split("\n")[1].split("=")[0].strip(),
)
async def test_settings_bad_file_value_stops_yard_agent_naming_file_and_key(env: Env, home: Path, toml: str, key: str):
    (home / "settings.toml").write_text(toml, encoding="utf-8")
    async with SkillYard() as yard:
        with pytest.raises(AgentSettingsError) as info:
            await yard.agent(env.dir, model=env.script(say("x")))
    assert key in str(info.value) and "settings.toml" in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("toml", "variable"),
    [
        ("[agent]\nreconfirm_after = inf\n", None),
        ("[agent]\nreconfirm_after = nan\n", None),
        pytest.param(
            '[agent]\nreconfirm_after = "99999999999d"\n',
            None,
        ),
        ("", "inf"),
        ("", "nan"),
    ],
    ids=["file-inf", "file-nan", "file-huge", "env-inf", "env-nan"],
)
async def test_settings_a_non_finite_or_huge_reconfirm_after_is_a_clear_error(
    env: Env, home: Path, monkeypatch: pytest.MonkeyPatch, toml: str, variable: str | None
):
    if toml:
        (home / "settings.toml").write_text(toml, encoding="utf-8")
    if variable:
        monkeypatch.setenv("SKILLYARD_AGENT_RECONFIRM_AFTER", variable)
    async with SkillYard() as yard:
        with pytest.raises(AgentSettingsError) as info:
            await yard.agent(env.dir, model=env.script(say("x")))
    assert ("SKILLYARD_AGENT_RECONFIRM_AFTER" if variable else "reconfirm_after") in str(info.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "-2"),
        ("SKILLYARD_AGENT_RECONFIRM_AFTER", "soon"),
        ("SKILLYARD_AGENT_DELEGATE_MAX_DEPTH", "two"),
        pytest.param(
            "SKILLYARD_AGENT_RECONFIRM_AFTER",
            "99999999999d",
        ),
        ("SKILLYARD_MODEL_TIMEOUT", "abc"),
    ],
)
@needs_db
def test_settings_bad_environment_value_is_a_clean_cli_error_naming_the_variable(env: Env, name: str, value: str):
    result = run_cli(env, "badenv", "x", "--model", env.script(say("x")), extra_env={name: value})
    assert result.returncode == 1 and clean(result), result.stderr
    assert name in result.stderr, result.stderr
    assert env.calls() == []


@needs_db
def test_settings_invalid_toml_is_a_clean_cli_error_with_the_line(env: Env, home: Path):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 3\nreconfirm_after = \n", encoding="utf-8")
    result = run_cli(env, "badtoml", "x", "--model", env.script(say("x")))
    assert result.returncode == 1 and clean(result), result.stderr
    assert "settings.toml" in result.stderr and "line 3" in result.stderr, result.stderr


@needs_db
def test_settings_bad_value_also_stops_resume_cleanly(env: Env, home: Path):
    model = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
    )
    first = run_cli(env, "resbad", "保存季度总结", "--model", model, "--context", json.dumps(IDENTITY))
    assert first.returncode == 0, first.stderr
    (Path(os.environ["SKILLYARD_HOME"]) / "settings.toml").write_text('[agent]\nreconfirm_after = "soon"\n')
    result = cli("agent", "resume", "--session", env.sid("resbad"), "--action", "CONFIRM")
    assert result.returncode == 1 and clean(result) and "reconfirm_after" in result.stderr, result.stderr
    assert env.calls() == []


@needs_db
async def test_settings_environment_fingerprint_limit_beats_the_file(env: Env, home: Path, monkeypatch):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 5\n", encoding="utf-8")
    monkeypatch.setenv("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "1")
    same = call("findNotes", {"q": "a"})
    turn = await send_once(env, "找", same, same, say("never"))
    assert codes(turn) == [None, FINGERPRINT_TRIP] and turn.status == "FAILED"


@needs_db
async def test_settings_an_empty_environment_variable_leaves_the_file_value(env: Env, home: Path, monkeypatch):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 1\n", encoding="utf-8")
    monkeypatch.setenv("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "")
    same = call("findNotes", {"q": "a"})
    turn = await send_once(env, "找", same, same, say("never"))
    assert codes(turn) == [None, FINGERPRINT_TRIP]


@needs_db
async def test_settings_fingerprint_limit_in_the_file_allows_that_many_identical_calls(env: Env, home: Path):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 5\n", encoding="utf-8")
    same = call("findNotes", {"q": "a"})
    turn = await send_once(env, "找", *[same] * 6, say("never"))
    assert codes(turn) == [None] * 5 + [FINGERPRINT_TRIP] and len(env.calls()) == 5


@needs_db
async def test_settings_bypass_tools_from_the_environment_are_comma_separated(env: Env, monkeypatch):
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "otherTool, quickWrite")
    turn = await send_once(env, "写", call("quickWrite", {"q": "x"}), say("ok"))
    assert codes(turn) == [None] and len(env.calls("quickWrite")) == 1


@needs_db
async def test_settings_without_the_bypass_setting_a_confirm_false_write_needs_approval(env: Env):
    turn = await send_once(env, "写", call("quickWrite", {"q": "x"}), say("ok"))
    assert codes(turn) == [APPROVAL_REQUIRED] and env.calls() == []


@needs_db
async def test_settings_platform_hidden_from_the_environment_opens_passport_id(env: Env, monkeypatch):
    monkeypatch.setenv("SKILLYARD_AGENT_PLATFORM_HIDDEN", "clientId,sessionType")
    env.contract(changed(lambda c: c["tools"]["pickTool"]["args"].update(d={"from": "platform.passportId"})))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(call("pickTool", {"a": "x"}), say("ok")))
        assert agent.loaded.errors == []
        turn = await agent.send(env.sid("pp"), "挑", identity={**IDENTITY, "passport_id": "P-9"})
    assert turn.observations[0].sources["d"] == "PLATFORM"
    assert env.calls("pickTool")[0]["input"]["d"] == "P-9"


@needs_db
async def test_settings_by_default_a_hidden_field_fails_the_skill_at_load(env: Env):
    env.contract(changed(lambda c: c["tools"]["pickTool"]["args"].update(d={"from": "platform.passportId"})))
    async with SkillYard() as yard:
        with pytest.raises(AgentError):
            await yard.agent(env.dir, model=env.script(say("x")))


def test_settings_platform_hidden_can_close_an_open_field(env: Env):
    result = cli("agent", "check", str(env.dir), "--json", extra_env={"SKILLYARD_AGENT_PLATFORM_HIDDEN": "userId"})
    assert result.returncode == 1, result.stdout + result.stderr
    rows = json.loads(result.stdout)
    assert any(r["rule"] == "§16.10" and "owner" in r["path"] for r in rows), rows


@needs_db
def test_settings_model_spec_in_the_file_is_the_default_model(env: Env, home: Path):
    model = env.script(say("文件里的模型"))
    (home / "settings.toml").write_text(f"[agent.model]\nspec = {json.dumps(model)}\n", encoding="utf-8")
    result = run_cli(env, "specfile", "x", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "文件里的模型"


@needs_db
def test_settings_skillyard_model_beats_the_file_spec(env: Env, home: Path):
    (home / "settings.toml").write_text(
        f"[agent.model]\nspec = {json.dumps(env.script(say('文件')))}\n", encoding="utf-8"
    )
    result = run_cli(env, "specenv", "x", "--json", extra_env={"SKILLYARD_MODEL": env.script(say("环境"))})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "环境"


@needs_db
def test_settings_an_api_key_of_the_wrong_type_is_never_echoed_by_the_cli(env: Env, home: Path):
    (home / "settings.toml").write_text("[agent.model]\napi_key = 123456789987654321\n", encoding="utf-8")
    result = run_cli(env, "keytype", "x", "--model", env.script(say("x")))
    assert result.returncode == 1 and clean(result), result.stderr
    assert "api_key" in result.stderr and "123456789987654321" not in result.stdout + result.stderr
