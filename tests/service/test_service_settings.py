"""``[service]`` of settings.toml (service/settings.py): ``mcp_stateless`` from the file or the environment, and
its bad values named."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillyard.errors import SkillyardError
from skillyard.service.settings import ServiceSettings


def test_mcp_stateless_from_the_file_and_the_environment(home: Path, monkeypatch: pytest.MonkeyPatch):
    assert ServiceSettings.load(home).mcp_stateless is False
    (home / "settings.toml").write_text("[service]\nmcp_stateless = true\n", "utf-8")
    assert ServiceSettings.load(home).mcp_stateless is True
    monkeypatch.setenv("SKILLYARD_SERVICE_MCP_STATELESS", "0")
    assert ServiceSettings.load(home).mcp_stateless is False
    monkeypatch.setenv("SKILLYARD_SERVICE_MCP_STATELESS", "yes")
    (home / "settings.toml").write_text("", "utf-8")
    assert ServiceSettings.load(home).mcp_stateless is True


def test_a_bad_mcp_stateless_is_named(home: Path):
    (home / "settings.toml").write_text('[service]\nmcp_stateless = "sometimes"\n', "utf-8")
    with pytest.raises(SkillyardError, match=r"mcp_stateless = 'sometimes' is invalid; write true or false"):
        ServiceSettings.load(home)
