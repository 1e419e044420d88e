"""A chat channel that records what the platform sends (background pushes of async skills, §8), registered through
the same pluggy hook a real channel plugin uses, in the first channel protocol (``send(recipient, text,
attachments)`` only), which the registry adapts; the ``recording_channel`` fixture is shared by every test file
through the root conftest."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from skillyard import hookimpl
from skillyard.plugins import pm


class RecordingChannel:
    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, Any], str, list[Any]]] = []

    async def send(self, recipient: Any, text: str, attachments: Any) -> None:
        self.sent.append((dict(recipient), text, list(attachments)))


@pytest.fixture
def recording_channel() -> Iterator[RecordingChannel]:
    """The recorder, answering as the channels ``chat-t`` and ``chat-d`` for the test (non-web chat channels; the
    built-in adapters own the vendors' names)."""
    channel = RecordingChannel()

    class Plugin:
        @hookimpl
        def register_channels(self, register: Any) -> None:
            register("chat-t", channel)
            register("chat-d", channel)

    plugin = Plugin()
    pm.register(plugin, name="test-recording-channel")
    try:
        yield channel
    finally:
        pm.unregister(plugin)
