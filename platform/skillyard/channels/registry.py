"""The channel registry: adapters by channel name, filled through the ``register_channels`` hook, and the one place
that sends through them (recipients and files checked first, credentials read per role, secrets masked)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pluggy

from ..credentials import mask_secrets, masked_logger, secret_config
from ..errors import DuplicateRegistration, SkillyardError
from ..registry import call_per_plugin
from .adapter import (
    CONVERSATION_FIELDS,
    CREDENTIALS_SKILL,
    ChannelError,
    ChatChannel,
    OutgoingMessage,
    SendContext,
    SendOnlyAdapter,
)
from .address import Address, conversation_address
from .outgoing import outgoing_files

if TYPE_CHECKING:
    import httpx

    from ..yard import SkillYard
    from .artifacts import ArtifactDelivery
    from .pending import PendingReplies

log = masked_logger("skillyard.channels")
masked_logger("httpx")  # httpx logs request URLs, and a Telegram URL holds the bot token
#: Seconds one channel call may take (connect, each read and write).
HTTP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SendOutcome:
    """One recipient's result: the channel's message id when it has one, or the error."""

    address: Address
    message_id: str | None = None
    error: ChannelError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class ChannelRegistry:
    """Channel adapters by name (``web``, ``telegram``, …) and sending through them."""

    def __init__(self, yard: SkillYard | None = None) -> None:
        self._yard = yard
        self._channels: dict[str, Any] = {}
        self._adapters: dict[str, ChatChannel] = {}
        self._owners: dict[str, str] = {}
        self._http: httpx.AsyncClient | None = None
        self._artifacts: ArtifactDelivery | None = None
        self._pending: PendingReplies | None = None

    @classmethod
    def from_plugins(cls, pm: pluggy.PluginManager, yard: SkillYard | None = None) -> ChannelRegistry:
        registry = cls(yard)

        def channels_register(plugin: str) -> dict[str, Any]:
            return {"register": lambda name, channel: registry.register(name, channel, plugin)}

        call_per_plugin(pm, "register_channels", channels_register)
        return registry

    def register(self, name: str, channel: Any, plugin: str = "") -> None:
        """Add an adapter: a :class:`ChatChannel`, or an object with only ``send(recipient, text, attachments)``."""
        if name in self._channels:
            raise DuplicateRegistration(
                f"channel {name!r} is registered by both {self._owners[name]!r} and {plugin!r}; unregister one"
            )
        if isinstance(channel, ChatChannel):
            adapter = channel
        elif callable(getattr(channel, "send", None)):
            adapter = SendOnlyAdapter(name, channel)
        else:
            raise SkillyardError(
                f"plugin {plugin!r} registered the channel {name!r} as {type(channel).__name__}, which has no "
                "send method; register a skillyard.channels.adapter.ChatChannel or an object with "
                "async send(recipient, text, attachments)"
            )
        self._channels[name] = channel
        self._adapters[name] = adapter
        self._owners[name] = plugin

    def get(self, name: str) -> Any:
        """The object registered under ``name`` (as the plugin gave it), or None."""
        return self._channels.get(name)

    def adapter(self, name: str) -> ChatChannel | None:
        """The adapter that sends for ``name`` (a send-only channel wrapped), or None."""
        return self._adapters.get(name)

    def names(self) -> list[str]:
        return sorted(self._channels)

    @property
    def yard(self) -> SkillYard:
        if self._yard is None:
            raise RuntimeError("this channel registry belongs to no SkillYard; make it with from_plugins(pm, yard)")
        return self._yard

    @property
    def artifacts(self) -> ArtifactDelivery:
        """Delivery of runs' artifacts to their conversations (§6.3 step 3)."""
        if self._artifacts is None:
            from .artifacts import ArtifactDelivery

            self._artifacts = ArtifactDelivery(self)
        return self._artifacts

    @property
    def pending(self) -> PendingReplies:
        """The pending records of messages waiting for a reply (§9.2)."""
        if self._pending is None:
            from .pending import PendingReplies

            self._pending = PendingReplies(self.yard)
        return self._pending

    def http(self) -> httpx.AsyncClient:
        """The HTTP client every adapter shares (redirects are not followed), made on first use."""
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, follow_redirects=False)
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def problems(self, addresses: Sequence[Address], message: OutgoingMessage) -> list[tuple[str, str]]:
        """What stops a message before anything is sent, as (field, message): a recipient id of the wrong form, a
        text or file larger than a channel takes."""
        found: list[tuple[str, str]] = []
        for address in addresses:
            adapter = self._adapters[address.channel]
            wrong = adapter.check_recipient(address.recipient)
            if wrong:
                found.append(("to", wrong))
            if len(message.text) > adapter.max_text_chars:
                found.append(
                    (
                        "message",
                        f"the message has {len(message.text)} characters; {address.channel} takes at most "
                        f"{adapter.max_text_chars}: shorten it or send the text as a file in attach",
                    )
                )
            for item in message.files:
                if item.size > adapter.max_file_bytes:
                    found.append(
                        (
                            "attach",
                            f"{item.filename} is {item.size / 2**20:.1f} MB; {address.channel} takes files up to "
                            f"{adapter.max_file_bytes / 2**20:.0f} MB: send a smaller file (or a link to it)",
                        )
                    )
        return list(dict.fromkeys(found))

    async def send(
        self,
        addresses: Sequence[Address],
        message: OutgoingMessage,
        *,
        role_id: str = "",
        org_id: str = "",
        configs: Mapping[str, Any] | None = None,
        conversation: Mapping[str, Any] | None = None,
    ) -> list[SendOutcome]:
        """Send ``message`` to every address at once; ``configs`` are the role's ``send_message`` configs (read
        from the store when not given). Every channel's credentials are masked in log lines meanwhile."""
        if configs is None:
            configs = await self.yard.configs.get(role_id, CREDENTIALS_SKILL) if addresses else {}
        secrets = [str(v) for k, v in configs.items() if v and secret_config(k, self._declared())]
        with mask_secrets(secrets):
            return list(
                await asyncio.gather(
                    *(self._send_one(a, message, role_id, org_id, configs, conversation or {}) for a in addresses)
                )
            )

    def _declared(self) -> tuple[str, ...]:
        found = self._yard.catalog.resolve(CREDENTIALS_SKILL) if self._yard is not None else None
        return found[0].secret_configs if found is not None else ()

    async def _send_one(
        self,
        address: Address,
        message: OutgoingMessage,
        role_id: str,
        org_id: str,
        configs: Mapping[str, Any],
        conversation: Mapping[str, Any],
    ) -> SendOutcome:
        adapter = self._adapters[address.channel]
        ctx = SendContext(address.channel, configs, self.http(), self.yard, org_id, role_id, dict(conversation))
        try:
            message_id = await adapter.send(address.recipient, message, ctx)
        except ChannelError as exc:
            log.warning("sending to %s failed (%s): %s", address, exc.error_type, exc)
            return SendOutcome(address, error=exc)
        except Exception as exc:  # an adapter's bug: reported for this recipient, the others still get theirs
            log.exception("the %s channel adapter crashed sending to %s", address.channel, address)
            return SendOutcome(address, error=ChannelError(f"the {address.channel} adapter failed ({exc})"))
        return SendOutcome(address, message_id)

    def conversation(self, context: Mapping[str, Any]) -> Address | None:
        """Where a run's results go (``reply_to``; a bare id is a recipient on the run's channel), if anywhere."""
        return conversation_address(context.get("reply_to"), context.get("channel"), self.names())

    async def deliver(self, context: Mapping[str, Any], text: str, attachments: list[dict[str, Any]]) -> bool:
        """Send a background result to the conversation a run came from; False (and a log line) when there is
        none or it failed. A send-only channel is called even without ``reply_to``, with the run's fields."""
        address = self.conversation(context)
        if address is None:
            name = str(context.get("channel") or "")
            if not isinstance(self._adapters.get(name), SendOnlyAdapter):
                log.warning("a background result was not delivered: the run has no reply_to on a known channel")
                return False
            address = Address(name, "")
        message = OutgoingMessage(text, "text", tuple(outgoing_files(attachments)))
        [outcome] = await self.send(
            [address],
            message,
            role_id=str(context.get("role_id") or ""),
            org_id=str(context.get("org_id") or ""),
            conversation={k: context.get(k) for k in CONVERSATION_FIELDS},
        )
        return outcome.ok
