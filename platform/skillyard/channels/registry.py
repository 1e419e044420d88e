"""The channel registry: adapters by channel name, filled through the ``register_channels`` hook."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import pluggy

from ..errors import DuplicateRegistration
from ..registry import call_per_plugin

log = logging.getLogger("skillyard.channels")


class Channel(Protocol):
    """What a channel adapter implements: deliver text and files to one recipient."""

    async def send(self, recipient: Mapping[str, Any], text: str, attachments: list[dict[str, Any]]) -> None: ...


class ChannelRegistry:
    """Channel adapters by name (``web``, ``telegram``, …)."""

    def __init__(self) -> None:
        self._channels: dict[str, Channel] = {}
        self._owners: dict[str, str] = {}

    @classmethod
    def from_plugins(cls, pm: pluggy.PluginManager) -> ChannelRegistry:
        registry = cls()

        def channels_register(plugin: str) -> dict[str, Any]:
            return {"register": lambda name, channel: registry.register(name, channel, plugin)}

        call_per_plugin(pm, "register_channels", channels_register)
        return registry

    def register(self, name: str, channel: Channel, plugin: str = "") -> None:
        if name in self._channels:
            raise DuplicateRegistration(
                f"channel {name!r} is registered by both {self._owners[name]!r} and {plugin!r}; unregister one"
            )
        self._channels[name] = channel
        self._owners[name] = plugin

    def get(self, name: str) -> Channel | None:
        return self._channels.get(name)

    def names(self) -> list[str]:
        return sorted(self._channels)

    async def deliver(self, context: Mapping[str, Any], text: str, attachments: list[dict[str, Any]]) -> bool:
        """Send to the conversation a run came from; False (and a log line) when its channel is unknown."""
        name = str(context.get("channel") or "")
        channel = self._channels.get(name)
        if channel is None:
            log.warning("no channel adapter named %r: a background result was not delivered", name)
            return False
        recipient = {k: context.get(k) for k in ("channel", "session_id", "user_id", "actor_id", "reply_to")}
        await channel.send(recipient, text, attachments)
        return True
