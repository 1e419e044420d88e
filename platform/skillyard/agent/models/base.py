"""What every chat model shares: the ``ChatModel`` protocol, its reply values and its errors.

Messages and tools are OpenAI chat-completions shaped. ``state`` is a JSON-serialisable dict the runtime persists
per session (the scripted model keeps its position there).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ...errors import SkillyardError


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
