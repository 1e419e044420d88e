"""Agent models: the scripted model (YAML replay) and the OpenAI-compatible client against a real 127.0.0.1 server."""

from __future__ import annotations

import json
import logging
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from support.local_http import serve
from skillyard.agent.models import (
    ChatModel,
    ModelError,
    ModelReply,
    OpenAIChatModel,
    ScriptedModel,
    ScriptError,
    ScriptExhausted,
    ToolCall,
    model_from_spec,
)
from skillyard.agent.settings import AgentSettings, ModelSettings

API_KEY = "sk-test-0123456789-secret"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "notes_search",
            "description": "Search notes",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]
MESSAGES = [{"role": "system", "content": "You help."}, {"role": "user", "content": "find milk"}]


def write_script(tmp_path: Path, text: str, name: str = "script.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


SCRIPT = """
turns:
  - tool_calls:
      - name: notes_search
        arguments: {q: milk, limit: 2}
      - name: notes_read
        arguments: '{"id": 7'
  - text: Found it.
"""


# ------------------------------------------------------------------------------------------------- scripted model


async def test_scripted_model_consumes_turns_in_order(tmp_path: Path) -> None:
    model = ScriptedModel(write_script(tmp_path, SCRIPT))
    assert isinstance(model, ChatModel)
    state: dict[str, Any] = {}
    first = await model.complete(MESSAGES, TOOLS, state)
    assert first.text is None
    assert [c.name for c in first.tool_calls] == ["notes_search", "notes_read"]
    assert json.loads(first.tool_calls[0].arguments) == {"q": "milk", "limit": 2}
    assert first.tool_calls[1].arguments == '{"id": 7'  # a string is passed through verbatim, invalid JSON and all
    second = await model.complete(MESSAGES, TOOLS, state)
    assert second == ModelReply(text="Found it.", tool_calls=())
    assert state == {"script": {"position": 2}}


async def test_scripted_model_exhaustion_says_which_turn_and_how_many(tmp_path: Path) -> None:
    path = write_script(tmp_path, SCRIPT)
    model = ScriptedModel(path)
    state: dict[str, Any] = {}
    await model.complete(MESSAGES, TOOLS, state)
    await model.complete(MESSAGES, TOOLS, state)
    with pytest.raises(ScriptExhausted) as info:
        await model.complete(MESSAGES, TOOLS, state)
    assert "turn 3" in str(info.value)
    assert "only 2 turns" in str(info.value)
    assert str(path) in str(info.value)
    assert (info.value.turn, info.value.available) == (3, 2)
    assert state["script"]["position"] == 2  # a failed ask does not move the position


async def test_scripted_position_survives_a_new_model_instance(tmp_path: Path) -> None:
    path = write_script(tmp_path, SCRIPT)
    state: dict[str, Any] = {}
    await ScriptedModel(path).complete(MESSAGES, TOOLS, state)
    persisted = json.loads(json.dumps(state))  # the runtime stores state as JSON with the session
    reply = await ScriptedModel(path).complete(MESSAGES, TOOLS, persisted)
    assert reply.text == "Found it."


async def test_scripted_tool_call_ids_are_stable(tmp_path: Path) -> None:
    path = write_script(
        tmp_path,
        """
        turns:
          - tool_calls: [{name: a}, {name: b, id: my-id}]
          - tool_calls: [{name: c, arguments: {}}]
        """,
    )
    ids = []
    for _ in range(2):
        scripted, state = ScriptedModel(path), {}
        first, second = await scripted.complete([], [], state), await scripted.complete([], [], state)
        ids.append([c.id for c in first.tool_calls + second.tool_calls])
    assert ids[0] == ids[1] == ["call_1_1", "my-id", "call_2_1"]
    first = ScriptedModel(path).turns[0]
    assert first.tool_calls[0] == ToolCall(id="call_1_1", name="a", arguments="{}")


def test_reply_as_assistant_message() -> None:
    reply = ModelReply(text="ok", tool_calls=(ToolCall("c1", "notes_search", '{"q": "x"}'),))
    assert reply.to_message() == {
        "role": "assistant",
        "content": "ok",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "notes_search", "arguments": '{"q": "x"}'}}
        ],
    }
    assert ModelReply(text="hi").to_message() == {"role": "assistant", "content": "hi"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("turns:\n  - {text: hi}\n  - {answer: 42}\n", "turns[1] "),
        ("turns:\n  - just text\n", "turns[0] must be a mapping"),
        ("turns:\n  - {text: hi, tool_call: []}\n", "turns[0] has unknown key(s) tool_call"),
        ("turns:\n  - {text: [1]}\n", "turns[0].text must be a string"),
        ("turns:\n  - {tool_calls: []}\n", "turns[0].tool_calls must be a non-empty list"),
        ("turns:\n  - {text: a}\n  - tool_calls: [{arguments: {}}]\n", "turns[1].tool_calls[0] has no 'name'"),
        ("turns:\n  - tool_calls: [{name: x, arguments: [1, 2]}]\n", "turns[0].tool_calls[0].arguments must be"),
        ("turns:\n  - tool_calls: [{name: x, arguments: 5}]\n", "not int"),
        ("turns:\n  - tool_calls: [notes_search]\n", "turns[0].tool_calls[0] must be a mapping"),
        ("turns:\n  - tool_calls: [{name: x, args: {}}]\n", "unknown key(s) args"),
        ("- {text: hi}\n", "'turns' list"),
        ("turns: {text: hi}\n", "'turns' list"),
        ("turns: []\nextra: 1\n", "unknown top-level key(s) extra"),
        ("turns: [\n", "invalid YAML"),
    ],
)
def test_malformed_scripts_are_rejected_with_the_item_index(tmp_path: Path, text: str, fragment: str) -> None:
    path = write_script(tmp_path, text)
    with pytest.raises(ScriptError) as info:
        ScriptedModel(path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="no such file"):
        ScriptedModel(tmp_path / "nope.yaml")


async def test_empty_script_is_exhausted_on_the_first_turn(tmp_path: Path) -> None:
    model = ScriptedModel(write_script(tmp_path, "turns: []\n"))
    with pytest.raises(ScriptExhausted, match="turn 1 but the script has only 0 turns"):
        await model.complete([], [], {})


# ---------------------------------------------------------------------------------------------------- model specs


def test_model_from_spec_script(tmp_path: Path) -> None:
    path = write_script(tmp_path, SCRIPT)
    model = model_from_spec(f"script:{path}")
    assert isinstance(model, ScriptedModel)
    assert model.path == path


def test_model_from_spec_openai_takes_settings(home: Path) -> None:
    (home / "settings.toml").write_text(
        f'[agent.model]\nbase_url = "http://127.0.0.1:1/v1"\napi_key = "{API_KEY}"\ntimeout = 7\nretries = 1\n'
    )
    settings = AgentSettings.load(home, environ={})
    model = model_from_spec("openai:gpt-4o-mini", settings)
    assert isinstance(model, OpenAIChatModel)
    assert (model.base_url, model.model, model.timeout, model.retries) == ("http://127.0.0.1:1/v1", "gpt-4o-mini", 7, 1)
    assert API_KEY not in repr(model)
    assert "api_key=<set>" in repr(model)
    assert model_from_spec("openai:m", settings.model).base_url == "http://127.0.0.1:1/v1"


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "script:", "anthropic:claude", "", "scripts:x.yaml"])
def test_bad_model_spec_lists_the_accepted_forms(spec: str) -> None:
    with pytest.raises(ModelError) as info:
        model_from_spec(spec, ModelSettings())
    assert "script:FILE.yaml" in str(info.value)
    assert "openai:MODEL" in str(info.value)


# ------------------------------------------------------------------------------------------- OpenAI-compatible model


class ChatServer(BaseHTTPRequestHandler):
    """Speaks /v1/chat/completions; the requested model name picks the behaviour."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.requests.append({"path": self.path, "headers": dict(self.headers.items()), "body": body})
        if self.path != "/v1/chat/completions":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        model = body.get("model")
        if model == "text-model":
            return self._send(200, {"choices": [{"message": {"role": "assistant", "content": "Hello there."}}]})
        if model == "tool-model":
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_abc", "type": "function", "function": {"name": "notes_search", "arguments": '{"q":'}},
                    {"id": "call_def", "type": "function", "function": {"name": "notes_read", "arguments": {"id": 1}}},
                ],
            }
            return self._send(200, {"choices": [{"message": message, "finish_reason": "tool_calls"}]})
        if model == "unauthorized":
            auth = self.headers.get("Authorization", "")
            message = f"Incorrect API key provided: {auth.removeprefix('Bearer ')}."
            return self._send(401, {"error": {"message": message, "type": "invalid_request_error"}})
        if model == "broken":
            return self._send(500, {"error": {"message": "the engine overheated"}})
        if model == "plain-500":
            return self._send(502, "Bad Gateway from the proxy", "text/plain")
        if model == "not-json":
            return self._send(200, "<html>welcome</html>", "text/html")
        if model == "slow":
            time.sleep(1.0)
            return self._send(200, {"choices": [{"message": {"content": "late"}}]})
        return self._send(400, {"error": {"message": f"unknown model {model}"}})

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = (json.dumps(payload) if content_type == "application/json" else payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def chat_server() -> Iterator[str]:
    with serve(ChatServer) as url:  # one server for the module: shutting one down takes half a second
        yield f"{url}/v1"


@pytest.fixture
def chat_url(chat_server: str) -> str:
    ChatServer.requests.clear()
    return chat_server


@pytest.fixture(autouse=True)
def capture_all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log line of every logger (httpx and httpcore included) is captured, so tests can look for the key."""
    with caplog.at_level(logging.DEBUG):
        yield caplog
    assert API_KEY not in caplog.text


def client(url: str, name: str, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(url, name, API_KEY, kwargs.pop("timeout", 5.0), **kwargs)


async def test_openai_text_reply_and_request_shape(chat_url: str) -> None:
    reply = await client(chat_url + "/", "text-model").complete(MESSAGES, [], {})
    assert reply == ModelReply(text="Hello there.", tool_calls=())
    (seen,) = ChatServer.requests
    assert seen["path"] == "/v1/chat/completions"
    assert seen["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert seen["body"] == {"model": "text-model", "messages": MESSAGES}  # no tools, no tool_choice


async def test_openai_tool_calls(chat_url: str) -> None:
    reply = await client(chat_url, "tool-model").complete(MESSAGES, TOOLS, {})
    assert reply.text is None
    assert reply.tool_calls == (
        ToolCall(id="call_abc", name="notes_search", arguments='{"q":'),  # raw text, invalid JSON kept as is
        ToolCall(id="call_def", name="notes_read", arguments='{"id": 1}'),  # an object is turned into JSON text
    )
    (seen,) = ChatServer.requests
    assert seen["body"]["tools"] == TOOLS
    assert seen["body"]["tool_choice"] == "auto"


async def test_openai_without_a_key_sends_no_authorization(chat_url: str) -> None:
    reply = await OpenAIChatModel(chat_url, "text-model", None, 5.0).complete(MESSAGES, [], {})
    assert reply.text == "Hello there."
    assert "Authorization" not in ChatServer.requests[0]["headers"]
    assert "api_key=<unset>" in repr(OpenAIChatModel(chat_url, "m"))


async def test_openai_401_names_the_status_but_never_the_key(chat_url: str) -> None:
    m = client(chat_url, "unauthorized")
    with pytest.raises(ModelError) as info:
        await m.complete(MESSAGES, TOOLS, {})
    message = str(info.value)
    assert "HTTP 401" in message
    assert "Incorrect API key provided" in message
    assert "SKILLYARD_MODEL_API_KEY" in message
    assert API_KEY not in message
    assert API_KEY not in repr(m)
    assert API_KEY not in repr(info.value)


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("broken", ["HTTP 500", "the engine overheated", "try again later"]),
        ("plain-500", ["HTTP 502", "Bad Gateway from the proxy"]),
        ("nobody", ["HTTP 400", "unknown model nobody"]),
    ],
)
async def test_openai_http_errors_are_not_retried(chat_url: str, name: str, fragments: list[str]) -> None:
    with pytest.raises(ModelError) as info:
        await client(chat_url, name, retries=3).complete(MESSAGES, [], {})
    for fragment in fragments:
        assert fragment in str(info.value)
    assert API_KEY not in str(info.value)
    assert len(ChatServer.requests) == 1


async def test_openai_wrong_base_url_404(chat_url: str) -> None:
    with pytest.raises(ModelError, match=r"HTTP 404.*check the base URL"):
        await client(chat_url.removesuffix("/v1"), "text-model").complete(MESSAGES, [], {})


async def test_openai_non_json_reply(chat_url: str) -> None:
    with pytest.raises(ModelError, match="not JSON"):
        await client(chat_url, "not-json").complete(MESSAGES, [], {})


async def test_openai_timeout_says_to_raise_the_timeout(chat_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        await client(chat_url, "slow", timeout=0.2, retries=3).complete(MESSAGES, [], {})
    assert time.monotonic() - started < 0.9
    assert "timed out after 0.2s" in str(info.value)
    assert "raise the timeout" in str(info.value)
    assert "SKILLYARD_MODEL_TIMEOUT" in str(info.value)
    assert API_KEY not in str(info.value)
    assert len(ChatServer.requests) == 1  # a read timeout is never retried: the request was sent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_openai_refused_connection_fails_fast_without_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ModelError) as info:
        await client(url, "text-model", retries=0).complete(MESSAGES, [], {})
    message = str(info.value)
    assert "cannot reach" in message
    assert "1 attempt(s)" in message
    assert "SKILLYARD_MODEL_BASE_URL" in message
    assert API_KEY not in message


async def test_openai_retries_a_refused_connection_until_the_server_is_up() -> None:
    """httpx's transport retries connect failures (backoff 0s, 0.5s, 1s): a server starting late is reached."""
    ChatServer.requests.clear()
    port = free_port()
    servers: list[ThreadingHTTPServer] = []

    def start_late() -> None:
        time.sleep(0.15)
        httpd = ThreadingHTTPServer(("127.0.0.1", port), ChatServer)
        httpd.daemon_threads = True
        servers.append(httpd)
        httpd.serve_forever()

    thread = threading.Thread(target=start_late, daemon=True)
    thread.start()
    try:
        reply = await client(f"http://127.0.0.1:{port}/v1", "text-model", retries=3).complete(MESSAGES, [], {})
    finally:
        thread.join(timeout=0.01)
        for httpd in servers:
            httpd.shutdown()
            httpd.server_close()
    assert reply.text == "Hello there."
    assert len(ChatServer.requests) == 1
