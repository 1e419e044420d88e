"""The scripted model: replays tool calls and texts from a YAML file, so every contract rule is tested
deterministically (docs/agent-models.md). A default plugin: ``script:FILE.yaml``."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...hookspecs import hookimpl
from .base import ModelError, ModelReply, ScriptError, ScriptExhausted, ToolCall

log = logging.getLogger("skillyard.agent.models")

SCRIPT_STATE_KEY = "script"


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
    import yaml  # here: the CLI imports this plugin to list commands

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


def absolute_spec(rest: str) -> str:
    """The spec a session stores: the script's path made absolute, so a later ``resume`` from another working
    directory finds the same script."""
    return f"script:{Path(rest).expanduser().resolve()}"


@hookimpl
def register_models(register: Callable[..., None]) -> None:
    register(
        "script",
        lambda rest, settings: ScriptedModel(Path(rest).expanduser()),
        help="script:FILE.yaml (a scripted model)",
        stored=absolute_spec,
    )
