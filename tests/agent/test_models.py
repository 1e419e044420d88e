"""Chat models (models.py): the scripted model (YAML replay) and the OpenAI-compatible client against a real
chat-completions server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
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
from skillyard.errors import SkillyardError
from support.agent import models as models_kit
from support.agent.desk import API_KEY, IDENTITY, DeskAgent, completion, free_port, tool_calls_message
from support.agent.models import ChatServer

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


MESSAGES_MODELS = [{"role": "system", "content": "You help."}, {"role": "user", "content": "find milk"}]


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


@pytest.fixture(autouse=True)
def capture_all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log line of every logger (httpx and httpcore included) is captured, so tests can look for the key."""
    with caplog.at_level(logging.DEBUG):
        yield caplog
    assert models_kit.API_KEY not in caplog.text


def client(url: str, name: str, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(url, name, models_kit.API_KEY, kwargs.pop("timeout", 5.0), **kwargs)


def free_port_models() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


@pytest.mark.parametrize("status", [200, 503])
async def test_openai_a_reply_nested_past_what_json_reads_is_a_model_error(chat, status):
    """A provider (or whatever answers at the base URL) may send anything: never the host's RecursionError."""
    plan, url = chat
    plan.actions = [(status, "[" * 5000 + "]" * 5000)]
    with pytest.raises(ModelError) as info:
        await oa(url).complete(MESSAGES, [], {})
    assert ("nested too deeply" in str(info.value)) if status == 200 else ("503" in str(info.value))


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


async def test_yard_agent_rejects_a_malformed_script_with_a_script_error(desk_agent: DeskAgent):
    path = desk_agent.raw_script("turns:\n  - {tool_calls: []}\n")
    async with SkillYard() as yard:
        with pytest.raises(ScriptError) as info:
            agent = await yard.agent(desk_agent.dir, model=f"script:{path}")
            await agent.send(desk_agent.sid("malformed"), "x", identity=IDENTITY)
    assert "turns[0].tool_calls" in str(info.value) and str(path) in str(info.value)
    assert isinstance(info.value, SkillyardError)


@pytest.mark.parametrize("model", ["gpt-4o", "anthropic:claude"], ids=["bare", "other"])
async def test_api_a_bad_model_spec_lists_the_two_forms(desk_agent: DeskAgent, model: str):
    async with SkillYard() as yard:
        with pytest.raises(SkillyardError) as info:
            await yard.agent(desk_agent.dir, model=model)
    assert "script:FILE.yaml" in str(info.value) and "openai:MODEL" in str(info.value)


async def test_scripted_model_consumes_turns_in_order(tmp_path: Path) -> None:
    model = ScriptedModel(write_script(tmp_path, SCRIPT))
    assert isinstance(model, ChatModel)
    state: dict[str, Any] = {}
    first = await model.complete(MESSAGES_MODELS, TOOLS, state)
    assert first.text is None
    assert [c.name for c in first.tool_calls] == ["notes_search", "notes_read"]
    assert json.loads(first.tool_calls[0].arguments) == {"q": "milk", "limit": 2}
    assert first.tool_calls[1].arguments == '{"id": 7'  # a string is passed through verbatim, invalid JSON and all
    second = await model.complete(MESSAGES_MODELS, TOOLS, state)
    assert second == ModelReply(text="Found it.", tool_calls=())
    assert state == {"script": {"position": 2}}


async def test_scripted_model_exhaustion_says_which_turn_and_how_many(tmp_path: Path) -> None:
    path = write_script(tmp_path, SCRIPT)
    model = ScriptedModel(path)
    state: dict[str, Any] = {}
    await model.complete(MESSAGES_MODELS, TOOLS, state)
    await model.complete(MESSAGES_MODELS, TOOLS, state)
    with pytest.raises(ScriptExhausted) as info:
        await model.complete(MESSAGES_MODELS, TOOLS, state)
    assert "turn 3" in str(info.value)
    assert "only 2 turns" in str(info.value)
    assert str(path) in str(info.value)
    assert (info.value.turn, info.value.available) == (3, 2)
    assert state["script"]["position"] == 2  # a failed ask does not move the position


async def test_scripted_position_survives_a_new_model_instance(tmp_path: Path) -> None:
    path = write_script(tmp_path, SCRIPT)
    state: dict[str, Any] = {}
    await ScriptedModel(path).complete(MESSAGES_MODELS, TOOLS, state)
    persisted = json.loads(json.dumps(state))  # the runtime stores state as JSON with the session
    reply = await ScriptedModel(path).complete(MESSAGES_MODELS, TOOLS, persisted)
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


def test_model_from_spec_script(tmp_path: Path) -> None:
    path = write_script(tmp_path, SCRIPT)
    model = model_from_spec(f"script:{path}")
    assert isinstance(model, ScriptedModel)
    assert model.path == path


def test_model_from_spec_openai_takes_settings(home: Path) -> None:
    (home / "settings.toml").write_text(
        f'[agent.model]\nbase_url = "http://127.0.0.1:1/v1"\napi_key = "{models_kit.API_KEY}"\n'
        "timeout = 7\nretries = 1\n"
    )
    settings = AgentSettings.load(home, environ={})
    model = model_from_spec("openai:gpt-4o-mini", settings)
    assert isinstance(model, OpenAIChatModel)
    assert (model.base_url, model.model, model.timeout, model.retries) == ("http://127.0.0.1:1/v1", "gpt-4o-mini", 7, 1)
    assert models_kit.API_KEY not in repr(model)
    assert "api_key=<set>" in repr(model)
    assert model_from_spec("openai:m", settings.model).base_url == "http://127.0.0.1:1/v1"


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "script:", "anthropic:claude", "", "scripts:x.yaml"])
def test_bad_model_spec_lists_the_accepted_forms(spec: str) -> None:
    with pytest.raises(ModelError) as info:
        model_from_spec(spec, ModelSettings())
    assert "script:FILE.yaml" in str(info.value)
    assert "openai:MODEL" in str(info.value)


async def test_openai_text_reply_and_request_shape(chat_url: str) -> None:
    reply = await client(chat_url + "/", "text-model").complete(MESSAGES_MODELS, [], {})
    assert reply == ModelReply(text="Hello there.", tool_calls=())
    (seen,) = ChatServer.requests
    assert seen["path"] == "/v1/chat/completions"
    assert seen["headers"]["Authorization"] == f"Bearer {models_kit.API_KEY}"
    assert seen["body"] == {"model": "text-model", "messages": MESSAGES_MODELS}  # no tools, no tool_choice


async def test_openai_tool_calls(chat_url: str) -> None:
    reply = await client(chat_url, "tool-model").complete(MESSAGES_MODELS, TOOLS, {})
    assert reply.text is None
    assert reply.tool_calls == (
        ToolCall(id="call_abc", name="notes_search", arguments='{"q":'),  # raw text, invalid JSON kept as is
        ToolCall(id="call_def", name="notes_read", arguments='{"id": 1}'),  # an object is turned into JSON text
    )
    (seen,) = ChatServer.requests
    assert seen["body"]["tools"] == TOOLS
    assert seen["body"]["tool_choice"] == "auto"


async def test_openai_without_a_key_sends_no_authorization(chat_url: str) -> None:
    reply = await OpenAIChatModel(chat_url, "text-model", None, 5.0).complete(MESSAGES_MODELS, [], {})
    assert reply.text == "Hello there."
    assert "Authorization" not in ChatServer.requests[0]["headers"]
    assert "api_key=<unset>" in repr(OpenAIChatModel(chat_url, "m"))


async def test_openai_401_names_the_status_but_never_the_key(chat_url: str) -> None:
    m = client(chat_url, "unauthorized")
    with pytest.raises(ModelError) as info:
        await m.complete(MESSAGES_MODELS, TOOLS, {})
    message = str(info.value)
    assert "HTTP 401" in message
    assert "Incorrect API key provided" in message
    assert "SKILLYARD_MODEL_API_KEY" in message
    assert models_kit.API_KEY not in message
    assert models_kit.API_KEY not in repr(m)
    assert models_kit.API_KEY not in repr(info.value)


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
        await client(chat_url, name, retries=3).complete(MESSAGES_MODELS, [], {})
    for fragment in fragments:
        assert fragment in str(info.value)
    assert models_kit.API_KEY not in str(info.value)
    assert len(ChatServer.requests) == 1


async def test_openai_wrong_base_url_404(chat_url: str) -> None:
    with pytest.raises(ModelError, match=r"HTTP 404.*check the base URL"):
        await client(chat_url.removesuffix("/v1"), "text-model").complete(MESSAGES_MODELS, [], {})


async def test_openai_non_json_reply(chat_url: str) -> None:
    with pytest.raises(ModelError, match="not JSON"):
        await client(chat_url, "not-json").complete(MESSAGES_MODELS, [], {})


async def test_openai_timeout_says_to_raise_the_timeout(chat_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        await client(chat_url, "slow", timeout=0.2, retries=3).complete(MESSAGES_MODELS, [], {})
    assert time.monotonic() - started < 0.9
    assert "timed out after 0.2s" in str(info.value)
    assert "raise the timeout" in str(info.value)
    assert "SKILLYARD_MODEL_TIMEOUT" in str(info.value)
    assert models_kit.API_KEY not in str(info.value)
    assert len(ChatServer.requests) == 1  # a read timeout is never retried: the request was sent


async def test_openai_refused_connection_fails_fast_without_retries() -> None:
    url = f"http://127.0.0.1:{free_port_models()}/v1"
    with pytest.raises(ModelError) as info:
        await client(url, "text-model", retries=0).complete(MESSAGES_MODELS, [], {})
    message = str(info.value)
    assert "cannot reach" in message
    assert "1 attempt(s)" in message
    assert "SKILLYARD_MODEL_BASE_URL" in message
    assert models_kit.API_KEY not in message


async def test_openai_retries_a_refused_connection_until_the_server_is_up() -> None:
    """httpx's transport retries connect failures (backoff 0s, 0.5s, 1s): a server starting late is reached."""
    ChatServer.requests.clear()
    port = free_port_models()
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
        reply = await client(f"http://127.0.0.1:{port}/v1", "text-model", retries=3).complete(MESSAGES_MODELS, [], {})
    finally:
        thread.join(timeout=0.01)
        for httpd in servers:
            httpd.shutdown()
            httpd.server_close()
    assert reply.text == "Hello there."
    assert len(ChatServer.requests) == 1
