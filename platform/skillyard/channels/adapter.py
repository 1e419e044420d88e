"""What a channel adapter implements and what it is handed: the message, its files, the sender's configs.

Adapters subclass :class:`ChatChannel` and implement ``send_text`` plus the media they support; the base class sends
one message (its text, then each file by media: §6.3's ``send_image`` / ``send_video`` / ``send_file``) to one
recipient. Channels with inbound webhooks also say where an inbound message's file is fetched
(:meth:`ChatChannel.inbound_file`) and whether a group message mentions the bot (:meth:`ChatChannel.mentions_bot`),
with the same API base and cached tokens as their sends. Every failure an adapter reports is a
:class:`ChannelError` carrying the envelope's ``error_type``.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import httpx

    from ..yard import SkillYard

FORMATS = ("text", "markdown", "html")
MB = 1024 * 1024
#: The fields of the conversation a send comes from (a send-only channel's ``recipient`` mapping carries them).
CONVERSATION_FIELDS = ("session_id", "user_id", "actor_id", "reply_to")
#: The skill whose configs (per role) hold every channel's credentials: ``<channel>_<name>``.
CREDENTIALS_SKILL = "send_message"


class ChannelError(Exception):
    """A channel refused or failed a send. ``error_type`` is the envelope's (§6.1): ``transient`` (rate limits,
    5xx, timeouts), ``recoverable`` (a bad recipient or file: change the input) or ``config`` (credentials,
    permissions: ``non_retriable``). The message never holds a credential."""

    def __init__(self, message: str, error_type: str = "transient", *, non_retriable: bool = False) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.non_retriable = non_retriable or error_type == "config"

    @classmethod
    def bad_recipient(cls, message: str) -> ChannelError:
        return cls(message, "recoverable")

    @classmethod
    def bad_credentials(cls, message: str) -> ChannelError:
        return cls(message, "config", non_retriable=True)


@dataclass(frozen=True)
class OutgoingFile:
    """A workspace file to send, with the media kind that picks the adapter's method."""

    path: Path
    filename: str
    media: str  # image / video / audio / file
    size: int
    ref: str = ""

    async def content(self) -> bytes:
        """The file's bytes, read off the event loop."""
        return await asyncio.to_thread(self.path.read_bytes)


@dataclass(frozen=True)
class OutgoingMessage:
    """Text in a format (``text``, ``markdown``, ``html``) and files; either may be empty, not both."""

    text: str = ""
    format: str = "text"
    files: tuple[OutgoingFile, ...] = ()


@dataclass(frozen=True)
class FileDownload:
    """The one GET that fetches a file of an inbound message, as the adapter resolved the channel's descriptor
    (its URL or headers may hold a token: they are never logged or shown)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The API answers a refused download with a 2xx JSON error body instead of the file (WeCom's media/get).
    json_is_error: bool = False
    #: Credentials in the URL or headers that are no config (a fetched access token): masked in log lines meanwhile.
    secrets: tuple[str, ...] = ()
    #: The URL came inside the message rather than from the channel's own API: it is fetched only from a public
    #: address (the SSRF guard of URL materialization, ``SKILLYARD_ALLOW_PRIVATE_URLS`` lifts it).
    public_only: bool = False
    #: The platform answers with a redirect to where the file is (Slack's ``url_private_download``); httpx drops the
    #: ``Authorization`` header on a redirect to another host.
    follow_redirects: bool = False


@dataclass
class SendContext:
    """What an adapter may use for one send (or one inbound file or bot lookup): the role's channel configs, the
    shared HTTP client, the host."""

    channel: str
    configs: Mapping[str, Any]
    http: httpx.AsyncClient
    yard: SkillYard
    org_id: str = ""
    role_id: str = ""
    conversation: dict[str, Any] = field(default_factory=dict)  # the run's session_id, user_id, actor_id, reply_to

    def config(self, name: str) -> str:
        """The config ``<channel>_<name>`` ("" when unset)."""
        value = self.configs.get(f"{self.channel}_{name}")
        return str(value).strip() if value is not None else ""

    def require(self, name: str) -> str:
        """A config the adapter cannot work without; missing, it is a config failure naming the fix."""
        value = self.config(name)
        if not value:
            role = f" --role {self.role_id}" if self.role_id else ""
            raise ChannelError.bad_credentials(
                f"the {self.channel} channel needs the config {self.channel}_{name}: set it with "
                f"'skillyard config set {CREDENTIALS_SKILL} {self.channel}_{name}=-{role}'"
            )
        return value

    def api_base(self, default: str) -> str:
        """``<channel>_api_base`` (a proxy, a private deployment, a test server), else the vendor's own base."""
        return (self.config("api_base") or default).rstrip("/")


class ChatChannel(ABC):
    """Base of the built-in adapters (and of third-party ones that want per-media sends).

    Subclasses set ``name``, the limits, and implement :meth:`send_text` and the media methods the channel has;
    an image, video or audio the channel cannot send as such is sent with :meth:`send_file`.
    """

    name = ""
    #: The largest file the channel takes, in bytes; checked before anything is sent.
    max_file_bytes = 20 * MB
    #: The longest text the channel takes in one message, in characters.
    max_text_chars = 4000
    #: What a recipient id of this channel looks like, and the message naming the expected form.
    recipient_pattern: re.Pattern[str] = re.compile(r"\A\S+\Z")
    recipient_help = "a recipient id"

    def check_recipient(self, recipient: str) -> str | None:
        """Why ``recipient`` cannot be an id of this channel (None: it can)."""
        if self.recipient_pattern.match(recipient):
            return None
        return f"{self.name}:{recipient} is not a {self.name} recipient: use {self.name}:{self.recipient_help}"

    async def send(self, recipient: str, message: OutgoingMessage, ctx: SendContext) -> str | None:
        """Send the text and then each file; returns the channel's id of the first message sent, if it has one."""
        first: str | None = None
        if message.text:
            first = await self.send_text(recipient, message.text, message.format, ctx)
        for item in message.files:
            sender = {"image": self.send_image, "video": self.send_video, "audio": self.send_audio}.get(
                item.media, self.send_file
            )
            sent = await sender(recipient, item, ctx)
            first = first or sent
        return first

    @abstractmethod
    async def send_text(self, recipient: str, text: str, format: str, ctx: SendContext) -> str | None:
        """Send one text message in ``format`` (text, markdown or html); the channel's message id, if it has one."""

    async def send_image(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        return await self.send_file(recipient, item, ctx)

    async def send_video(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        return await self.send_file(recipient, item, ctx)

    async def send_audio(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        return await self.send_file(recipient, item, ctx)

    async def send_file(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        raise ChannelError.bad_recipient(f"the {self.name} channel cannot send files; send text only")

    async def inbound_file(self, item: Mapping[str, Any], ctx: SendContext) -> FileDownload:
        """Where a file of an inbound message is fetched; ``item`` is the descriptor the channel's webhook parser
        kept (ids and a file name, never content)."""
        raise ChannelError.bad_recipient(f"the {self.name} channel does not fetch the files of inbound messages")

    async def mentions_bot(self, mentions: Sequence[str], ctx: SendContext) -> bool:
        """Whether a group message's ``mentions`` (as its webhook parser kept them) include this bot. By default
        the parser has decided already (Slack's ``app_mention``, DingTalk's ``isInAtList`` say it is the bot)."""
        return True


class WholeMessageChannel(ChatChannel):
    """A channel that takes a whole message (text and files) in one delivery: it implements :meth:`send`, and a
    text alone goes the same way."""

    @abstractmethod
    async def send(self, recipient: str, message: OutgoingMessage, ctx: SendContext) -> str | None: ...

    async def send_text(self, recipient: str, text: str, format: str, ctx: SendContext) -> str | None:
        return await self.send(recipient, OutgoingMessage(text=text, format=format), ctx)


class SendOnlyChannel(Protocol):
    """The first channel protocol (still accepted): one call per delivery to a conversation."""

    async def send(self, recipient: Mapping[str, Any], text: str, attachments: list[dict[str, Any]]) -> None: ...


class SendOnlyAdapter(WholeMessageChannel):
    """Adapts a channel that implements only ``send(recipient, text, attachments)`` to :class:`ChatChannel`: the
    whole message goes in one call, the recipient mapping carrying the conversation's fields and the ``id``."""

    def __init__(self, name: str, channel: SendOnlyChannel) -> None:
        self.name = name
        self.inner = channel
        self.max_file_bytes = 1 << 62  # the wrapped channel checks its own limits
        self.max_text_chars = 1 << 62

    async def send(self, recipient: str, message: OutgoingMessage, ctx: SendContext) -> str | None:
        conversation = {k: ctx.conversation.get(k) for k in CONVERSATION_FIELDS}
        mapping = {**conversation, "channel": self.name, "id": recipient}
        attachments = [
            {"local_path": str(f.path), "filename": f.filename, "media": f.media, "ref": f.ref} for f in message.files
        ]
        await self.inner.send(mapping, message.text, attachments)
        return None
