"""Fixtures of the service tests: a served app on 127.0.0.1 over the session's PostgreSQL, with an echo skill."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skillyard import SkillYard
from support.service import Served, serving, write_echo

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
async def served(db_env: str, skills_root: Path) -> AsyncIterator[Served]:
    write_echo(skills_root)
    yard = SkillYard([skills_root])
    async with serving(
        yard, agent_dirs=[EXAMPLES / "agents" / "notes"], model=f"script:{EXAMPLES}/agents/notes/demo.yaml"
    ) as s:
        yield s
