"""Fixtures of the notify tests: a host with the built-in skills on the session's PostgreSQL, a role of the test's
own, a local JSON receiver (for ``json://``) and a local SMTP server (aiosmtpd, for ``mailto://``), both on
127.0.0.1 only; private addresses are allowed (SKILLYARD_ALLOW_PRIVATE_URLS=1) unless a test says otherwise."""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from skillyard.builtin_skills.notify.aliases import PREFIX, SKILL, Alias

from skillyard import SkillYard
from support.channels.vendors import WebhookReceiver


@dataclass
class NotifyHost:
    yard: SkillYard
    role: str
    session: str

    @property
    def workspace(self) -> Path:
        return Path(self.yard.workspace(self.session))

    async def alias(self, name: str, *urls: str) -> None:
        await self.yard.configs.set(self.role, SKILL, {PREFIX + name: Alias(name, urls).to_json()})

    async def notify(self, **input: Any) -> dict[str, Any]:
        return await self.yard.run("notify", input, {"role_id": self.role, "session_id": self.session})


@pytest.fixture
def allow_private(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLYARD_ALLOW_PRIVATE_URLS", "1")


@pytest.fixture
async def host(db_env: str, allow_private: None) -> AsyncIterator[NotifyHost]:
    async with SkillYard() as yard:
        yield NotifyHost(yard, "nrole-" + uuid.uuid4().hex[:10], "ns-" + uuid.uuid4().hex[:10])


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    api = WebhookReceiver()
    with api.serving():
        yield api


class Mailbox:
    """What the local SMTP server received."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(envelope)
        return "250 OK"


@pytest.fixture
def smtp() -> Iterator[tuple[Mailbox, int]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=port, ready_timeout=10)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()
