"""Fixtures of the outputs tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace
