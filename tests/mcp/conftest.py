"""Fixtures of the MCP server tests: the skills served and a server on 127.0.0.1 that requires tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from support.mcp_server import Running, serving, write_mcp_skills


@pytest.fixture
def mcp_skills(skills_root: Path) -> Path:
    return write_mcp_skills(skills_root)


@pytest.fixture
async def served(mcp_skills: Path, db_env: str) -> AsyncIterator[Running]:
    async with serving(mcp_skills, None) as running:
        yield running
