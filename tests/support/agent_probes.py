"""What the agent runtime's probe files share (tests/test_agent_conformance*.py, tests/test_agent_scripted.py): the
scripted model's turns — a tool call, several calls, a text reply, a finish — the codes of a turn's observations and
the marker of a test that needs the database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillyard.agent.turn import TurnResult

needs_db = pytest.mark.usefixtures("db_env")


def call(name: str, arguments: dict[str, Any] | str | None = None) -> dict[str, Any]:
    """A model turn with one tool call; a string ``arguments`` is sent verbatim (it may be invalid JSON)."""
    return {"tool_calls": [{"name": name, "arguments": {} if arguments is None else arguments}]}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A model turn with several tool calls, in order."""
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


def say(text: str) -> dict[str, Any]:
    """A model turn with text and no tool call (it ends the turn)."""
    return {"text": text}


def finish(output: str = "好了") -> dict[str, Any]:
    return call("builtin_node_finish", {"output": output})


def codes(turn: TurnResult) -> list[str | None]:
    """The §17 (or business) code of each observation of the turn, in order."""
    return [o.code for o in turn.observations]


def write_files(files: dict[Path, str]) -> None:
    """Write an agent folder's files (AGENT.md, SKILL.md, handlers, schemas …), making their folders."""
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
