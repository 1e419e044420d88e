"""Chat models for the agent runtime: the ``ChatModel`` protocol, a scripted model and an OpenAI-compatible client.

Messages and tools are OpenAI chat-completions shaped. ``state`` is a JSON-serialisable dict the runtime persists
per session; the scripted model keeps its position there so ``resume`` and later ``run`` calls continue the script.
Model specs (``--model``): ``script:PATH`` and ``openai:MODEL`` (see :func:`model_from_spec`, docs/agent-models.md).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
import yaml

from ..errors import SkillyardError
from .settings import AgentSettings, ModelSettings

log = logging.getLogger("skillyard.agent.models")

SCRIPT_STATE_KEY = "script"
_ERROR_TEXT_LIMIT = 500


class ModelError(SkillyardError):
    """The model could not answer (transport, HTTP status, bad reply, bad spec or script); the message says why."""


class ScriptError(ModelError):
    """A malformed scripted-model YAML file; the message names the file and the item index."""


class ScriptExhausted(ModelError):
    """The runtime asked a scripted model for a turn the script does not have."""

    def __init__(self, path: Path, turn: int, available: int) -> None:
        super().__init__(
            f"scripted model {path}: the runtime asked for turn {turn} but the script has only {available} "
            f"turn{'s' if available != 1 else ''}; add turns to the script or check why the agent did not stop"
        )
        self.path = path
        self.turn = turn
        self.available = available


@dataclass(frozen=True)
class ToolCall:
    """One tool call; ``arguments`` is the raw JSON text the model produced (it may be invalid JSON)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelReply:
    """A model turn: text, tool calls, or both."""

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()

    def to_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation (chat-completions shape)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers one chat-completions turn."""

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]
    ) -> ModelReply:
        """Answer the conversation so far; ``state`` is per-session, mutable and JSON-serialisable."""
        ...


# --------------------------------------------------------------------------------------------------- scripted model


class ScriptedModel:
    """Replays ``{turns: [...]}`` from a YAML file: each call consumes the next item.

    Items are ``{tool_calls: [{name, arguments, id?}, ...]}`` or ``{text: ...}`` (both keys together give a reply
    with text and tool calls). ``arguments`` given as a mapping is sent as JSON text; given as a string it is passed
    through verbatim (so a script can feed invalid JSON). The position lives in ``state["script"]["position"]``.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.turns: tuple[ModelReply, ...] = _load_script(self.path)

    def __repr__(self) -> str:
        return f"ScriptedModel({str(self.path)!r}, turns={len(self.turns)})"

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]
    ) -> ModelReply:
        slot = state.setdefault(SCRIPT_STATE_KEY, {})
        if not isinstance(slot, dict):
            raise ModelError(f"scripted model {self.path}: session state {SCRIPT_STATE_KEY!r} is not an object")
        position = slot.get("position", 0)
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ModelError(f"scripted model {self.path}: session state position {position!r} is not a turn index")
        if position >= len(self.turns):
            raise ScriptExhausted(self.path, position + 1, len(self.turns))
        slot["position"] = position + 1
        log.debug("scripted model %s: turn %d of %d", self.path, position + 1, len(self.turns))
        return self.turns[position]


def _load_script(path: Path) -> tuple[ModelReply, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScriptError(f"scripted model {path}: no such file; pass script:PATH with an existing YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScriptError(f"scripted model {path}: cannot read the file ({exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScriptError(f"scripted model {path}: invalid YAML ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("turns"), list):
        raise ScriptError(f"scripted model {path}: expected a mapping with a 'turns' list, e.g. turns: [{{text: hi}}]")
    extra = sorted(str(k) for k in data if k != "turns")
    if extra:
        raise ScriptError(
            f"scripted model {path}: unknown top-level key(s) {', '.join(extra)}; only 'turns' is allowed"
        )
    return tuple(_parse_item(path, index, item) for index, item in enumerate(data["turns"]))


def _parse_item(path: Path, index: int, item: Any) -> ModelReply:
    where = f"scripted model {path}: turns[{index}]"
    if not isinstance(item, dict) or not ({"tool_calls", "text"} & set(item)):
        raise ScriptError(f"{where} must be a mapping with 'tool_calls' (a list) or 'text' (a string)")
    extra = sorted(str(k) for k in item if k not in ("tool_calls", "text"))
    if extra:
        raise ScriptError(f"{where} has unknown key(s) {', '.join(extra)}; use 'tool_calls' or 'text'")
    text = item.get("text")
    if "text" in item and not isinstance(text, str):
        raise ScriptError(f"{where}.text must be a string")
    calls: list[ToolCall] = []
    if "tool_calls" in item:
        raw_calls = item["tool_calls"]
        if not isinstance(raw_calls, list) or not raw_calls:
            raise ScriptError(f"{where}.tool_calls must be a non-empty list of {{name, arguments}}")
        for n, call in enumerate(raw_calls):
            calls.append(_parse_call(f"{where}.tool_calls[{n}]", call, f"call_{index + 1}_{n + 1}"))
    return ModelReply(text=text, tool_calls=tuple(calls))


def _parse_call(where: str, call: Any, default_id: str) -> ToolCall:
    if not isinstance(call, dict):
        raise ScriptError(f"{where} must be a mapping with 'name' and 'arguments'")
    extra = sorted(str(k) for k in call if k not in ("name", "arguments", "id"))
    if extra:
        raise ScriptError(f"{where} has unknown key(s) {', '.join(extra)}; use 'name', 'arguments' and optional 'id'")
    name = call.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ScriptError(f"{where} has no 'name'; every tool call names the tool it calls")
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        raw = arguments
    elif isinstance(arguments, dict):
        try:
            raw = json.dumps(arguments, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise ScriptError(f"{where}.arguments cannot be written as JSON ({exc})") from None
    else:
        raise ScriptError(
            f"{where}.arguments must be a mapping (sent as JSON) or a string (sent verbatim), "
            f"not {type(arguments).__name__}"
        )
    call_id = call.get("id", default_id)
    if not isinstance(call_id, str) or not call_id:
        raise ScriptError(f"{where}.id must be a non-empty string")
    return ToolCall(id=call_id, name=name, arguments=raw)


# ------------------------------------------------------------------------------------------- OpenAI-compatible model


class OpenAIChatModel:
    """An OpenAI-compatible chat-completions client over httpx with tool calling.

    Only connection failures (refused, DNS, connect timeout) are retried, by httpx's own
    ``AsyncHTTPTransport(retries=...)``: nothing was sent, so nothing can have run twice. A read timeout or an HTTP
    error is never retried. The API key is sent in the Authorization header only and never appears in repr, logs
    or errors. One httpx client per call, so a model object is not bound to an event loop.
    """

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0, *, retries: int = 2
    ) -> None:
        if not model:
            raise ModelError("openai model: no model name given; use --model openai:MODEL, e.g. openai:gpt-4o-mini")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.retries = retries
        self._api_key = api_key or None

    def __repr__(self) -> str:
        key = "set" if self._api_key else "unset"
        return (
            f"OpenAIChatModel(base_url={self.base_url!r}, model={self.model!r}, timeout={self.timeout:g}, "
            f"retries={self.retries}, api_key=<{key}>)"
        )

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]
    ) -> ModelReply:
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        transport = httpx.AsyncHTTPTransport(retries=self.retries)
        log.debug("model %s: POST %s (%d messages, %d tools)", self.model, self.endpoint, len(messages), len(tools))
        try:
            async with httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(self.timeout)) as client:
                response = await client.post(self.endpoint, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            phase = "connecting to" if isinstance(exc, httpx.ConnectTimeout) else "waiting for"
            raise ModelError(
                f"model {self.model}: timed out after {self.timeout:g}s {phase} {self.endpoint}; raise the timeout "
                "([agent.model] timeout in settings.toml or SKILLYARD_MODEL_TIMEOUT)"
            ) from None
        except httpx.TransportError as exc:
            raise ModelError(
                f"model {self.model}: cannot reach {self.endpoint} after {self.retries + 1} attempt(s) "
                f"({type(exc).__name__}: {self._scrub(str(exc)) or 'connection failed'}); check the base URL "
                "([agent.model] base_url or SKILLYARD_MODEL_BASE_URL) and that the server is up"
            ) from None
        log.debug("model %s: HTTP %d from %s", self.model, response.status_code, self.endpoint)
        if response.status_code >= 400:
            raise ModelError(self._status_message(response))
        return self._parse(response)

    def _scrub(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "<api key>")
        return text

    def _status_message(self, response: httpx.Response) -> str:
        status = response.status_code
        detail = ""
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if isinstance(payload, dict):
            error = payload.get("error")
            if isinstance(error, dict) and error.get("message"):
                detail = str(error["message"])
            elif isinstance(error, str):
                detail = error
            elif payload.get("message"):
                detail = str(payload["message"])
        if not detail:
            detail = response.text.strip()
        detail = self._scrub(detail)[:_ERROR_TEXT_LIMIT] or response.reason_phrase
        if status in (401, 403):
            hint = "check the API key (SKILLYARD_MODEL_API_KEY, [agent.model] api_key or OPENAI_API_KEY)"
        elif status == 404:
            hint = "check the base URL and the model name"
        elif status == 429:
            hint = "the provider is rate limiting; wait and run again"
        elif status >= 500:
            hint = "the provider failed; try again later"
        else:
            hint = "the provider rejected the request"
        return f"model {self.model}: HTTP {status} from {self.endpoint}: {detail}; {hint}"

    def _parse(self, response: httpx.Response) -> ModelReply:
        bad = f"model {self.model}: unexpected reply from {self.endpoint}"
        try:
            payload = response.json()
        except ValueError:
            snippet = self._scrub(response.text.strip())[:200]
            raise ModelError(f"{bad}: not JSON ({snippet!r}); is the base URL an OpenAI-compatible API?") from None
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ModelError(f"{bad}: no 'choices'; is the base URL an OpenAI-compatible API?")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise ModelError(f"{bad}: choices[0] has no 'message'")
        content = message.get("content")
        if isinstance(content, list):  # content parts: keep the text parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict)) or None
        elif content is not None and not isinstance(content, str):
            raise ModelError(f"{bad}: message content is {type(content).__name__}, not text")
        calls: list[ToolCall] = []
        for n, raw in enumerate(message.get("tool_calls") or []):
            function = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise ModelError(f"{bad}: tool_calls[{n}] has no function name")
            arguments = function.get("arguments")
            if arguments is None:
                arguments = "{}"
            elif not isinstance(arguments, str):  # some servers send an object; the runtime wants the JSON text
                arguments = json.dumps(arguments, ensure_ascii=False)
            call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else f"call_{n + 1}"
            calls.append(ToolCall(id=str(call_id), name=function["name"], arguments=arguments))
        return ModelReply(text=content or None, tool_calls=tuple(calls))


# ------------------------------------------------------------------------------------------------------ model specs

SPEC_FORMS = "script:FILE.yaml (a scripted model) or openai:MODEL (an OpenAI-compatible chat API)"


def stored_spec(spec: str) -> str:
    """A model spec as a session stores it: a ``script:`` path made absolute, so a later ``resume`` from another
    working directory finds the same script."""
    kind, sep, rest = spec.strip().partition(":")
    if kind == "script" and sep and rest.strip():
        return f"script:{Path(rest.strip()).expanduser().resolve()}"
    return spec


def model_from_spec(spec: str, settings: AgentSettings | ModelSettings | None = None) -> ChatModel:
    """Build the model named by ``--model``: ``script:PATH`` or ``openai:MODEL``.

    ``openai:`` takes the base URL, key, timeout and retries from ``settings`` (``AgentSettings.model``, or
    :meth:`AgentSettings.load` when None). Raises :class:`ModelError` for a bad spec, naming the accepted forms.
    """
    kind, sep, rest = spec.strip().partition(":")
    rest = rest.strip()
    if not sep or not rest or kind not in ("script", "openai"):
        raise ModelError(f"unknown model spec {spec!r}; use {SPEC_FORMS}")
    if kind == "script":
        return ScriptedModel(Path(rest).expanduser())
    if settings is None:
        settings = AgentSettings.load()
    model_settings = settings.model if isinstance(settings, AgentSettings) else settings
    return OpenAIChatModel(
        model_settings.base_url,
        rest,
        model_settings.api_key,
        model_settings.timeout,
        retries=model_settings.retries,
    )
