"""Third-party plugins for one test: ``plugin_reg(plugin, name)`` registers a plugin with the host's plugin manager
and unregisters it when the test ends (the ``plugin_reg`` fixture is shared through the root conftest)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from skillyard.plugins import pm


@pytest.fixture
def plugin_reg() -> Iterator[Callable[[Any, str], None]]:
    registered: list[Any] = []

    def reg(plugin: Any, name: str) -> None:
        pm.register(plugin, name=name)
        registered.append(plugin)

    yield reg
    for plugin in registered:
        pm.unregister(plugin)
