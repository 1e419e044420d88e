"""An OpenAI-compatible chat-completions client over httpx, with tool calling. A default plugin: ``openai:MODEL``
(base URL, key, timeout and retries from ``[agent.model]`` in settings.toml or the environment)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...hookspecs import hookimpl
from .base import ModelError, ModelReply, ToolCall

if TYPE_CHECKING:
    import httpx

    from ..settings import ModelSettings

log = logging.getLogger("skillyard.agent.models")
_ERROR_TEXT_LIMIT = 500


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
        import httpx  # here: the CLI imports this plugin to list commands, and a scripted run never needs it

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
        except (ValueError, RecursionError):
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
        except RecursionError:
            raise ModelError(f"{bad}: JSON nested too deeply to read") from None
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


def _from_spec(model: str, settings: Callable[[], ModelSettings]) -> OpenAIChatModel:
    configured = settings()
    return OpenAIChatModel(
        configured.base_url, model, configured.api_key, configured.timeout, retries=configured.retries
    )


@hookimpl
def register_models(register: Callable[..., None]) -> None:
    register("openai", _from_spec, help="openai:MODEL (an OpenAI-compatible chat API)")
