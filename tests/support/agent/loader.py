"""Agent folders for the loader: a copy of the fixture agent cms, contract skills inline or in contract.json,
AGENT.md."""

from __future__ import annotations

import textwrap
from pathlib import Path

from support import FIXTURES

FIXTURE = FIXTURES / "agents" / "cms"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path
