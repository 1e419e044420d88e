"""A chat channel that records what the platform sends (background pushes of async skills, §8), registered through
the same pluggy hook a real channel plugin uses; the ``recording_channel`` fixture is shared by every test file
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
    """The recorder, answering as the telegram and dingtalk channels for the test."""
    channel = RecordingChannel()

    class Plugin:
        @hookimpl
        def register_channels(self, register: Any) -> None:
            register("telegram", channel)
            register("dingtalk", channel)

    plugin = Plugin()
    pm.register(plugin, name="test-recording-channel")
    try:
        yield channel
    finally:
        pm.unregister(plugin)
