"""Fixtures of the builtin tool tests."""

from __future__ import annotations

import pytest

from skillyard.agent.context import NodeContext


@pytest.fixture
def shanghai(monkeypatch: pytest.MonkeyPatch):
    import time

    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def ctx(make_ctx) -> NodeContext:
    return make_ctx()
