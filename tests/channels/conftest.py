"""Fixtures of the channel tests: the shared ``host`` (support/channels/host.py) and a fake Telegram Bot API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.channels.host import host
from support.channels.vendors import FakeTelegram

__all__ = ["host", "telegram"]


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    """The Telegram Bot API on 127.0.0.1 (``telegram_api_base`` points the adapter at it)."""
    api = FakeTelegram()
    with api.serving():
        yield api
