"""npm packages the tests run (peers' software: the MCP reference server, the conformance suite), installed once
into ``tests/.cache/<folder>`` (git-ignored) and reused; a registry that cannot be reached skips the test."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CACHE = Path(__file__).parents[1] / ".cache"


def npm_package(folder: str, *specs: str, check: str) -> Path:
    """The install folder of ``specs`` (``node_modules/<check>`` must exist afterwards); skips the calling test when
    npm is missing or cannot install."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the package under test comes from the npm registry")
    root = CACHE / folder
    if not (root / "node_modules" / check).exists():
        root.mkdir(parents=True, exist_ok=True)
        if not (root / "package.json").exists():
            (root / "package.json").write_text('{"private": true}\n', encoding="utf-8")
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent", *specs],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0 or not (root / "node_modules" / check).exists():
            pytest.skip(f"npm could not install {' '.join(specs)} (registry unreachable?): {done.stderr[-300:]}")
    return root
