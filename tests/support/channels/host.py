"""The ``host`` fixture of the channel and send_message tests: a host on the session's PostgreSQL with the built-in
skills, a role of the test's own (tests share the database), and the workspace of its session."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard


@dataclass
class Host:
    yard: SkillYard
    role: str
    session: str

    @property
    def workspace(self) -> Path:
        return Path(self.yard.workspace(self.session))

    async def configure(self, **values: str) -> None:
        await self.yard.configs.set(self.role, "send_message", values)

    async def send(self, **input: Any) -> dict[str, Any]:
        return await self.yard.run("send_message", input, {"role_id": self.role, "session_id": self.session})


@pytest.fixture
async def host(db_env: str) -> AsyncIterator[Host]:
    async with SkillYard() as yard:
        yield Host(yard, "role-" + uuid.uuid4().hex[:10], "s-" + uuid.uuid4().hex[:10])
