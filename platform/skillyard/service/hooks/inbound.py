"""What a channel's webhook parser hands on: the message in one shape for every channel, or an answer the platform
expects at once (a URL challenge), or nothing to do (an event that is no message for the bot)."""

from __future__ import annotations

import hmac
from dataclasses import asdict, dataclass, field
from typing import Any

from fastapi.responses import JSONResponse, PlainTextResponse, Response


class HookRefused(Exception):
    """A request that is not the channel's (a forged or missing signature, an old timestamp, a bad body)."""

    def __init__(self, status: int, detail: str, fix: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.fix = fix


@dataclass(frozen=True)
class Inbound:
    """One message to the bot: who sent it (the channel's account id), where the answer goes, what it says."""

    event_id: str
    sender: str
    chat: str  # the recipient id on the channel that reaches the conversation (the reply goes there)
    text: str
    group: bool = False
    mentioned: bool = True  # in a group, only messages that mention the bot count
    sender_name: str = ""
    files: list[dict[str, Any]] = field(default_factory=list)  # channel-specific descriptors (ids, never content)
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Inbound:
        return cls(**value)


@dataclass
class Parsed:
    response: Response = field(default_factory=lambda: JSONResponse({"ok": True}))
    message: Inbound | None = None


def ok_text(text: str = "success") -> Response:
    return PlainTextResponse(text)


def secret(configs: dict[str, Any], key: str, channel: str) -> str:
    value = str(configs.get(key) or "").strip()
    if not value:
        raise HookRefused(
            403,
            f"this binding has no {key}, so no {channel} request can be verified",
            f"set it for the binding's role: skillyard config set send_message {key}=- --role ROLE",
        )
    return value


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def forged(what: str) -> HookRefused:
    return HookRefused(401, f"the {what} does not match", "send the request the channel itself signs")
