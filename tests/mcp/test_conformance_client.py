"""The official MCP conformance suite's client scenarios drive skillyard's MCP client (conformance_client.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.npm_cache import npm_package

CLIENT = Path(__file__).with_name("conformance_client.py")
VERSION = "0.1.16"


@pytest.mark.parametrize("scenario", ["initialize", "tools_call"])
def test_the_conformance_suites_client_scenarios_pass(scenario: str) -> None:
    root = npm_package(
        "conformance",
        "node@22",
        f"@modelcontextprotocol/conformance@{VERSION}",
        check="@modelcontextprotocol/conformance",
    )
    bin_dir = root / "node_modules" / ".bin"
    done = subprocess.run(
        [str(bin_dir / "node"), str(bin_dir / "conformance"), "client", "--command", f"{sys.executable} {CLIENT}",
         "--scenario", scenario],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "OVERALL: PASSED" in done.stdout + done.stderr, done.stdout + done.stderr
