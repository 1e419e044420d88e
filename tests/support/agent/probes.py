"""What the agent runtime's tests share (tests/agent/**): the scripted model's turns — a tool call, several calls, a
text reply, a finish — the codes of a turn's observations, the marker of a test that needs the database, writing an
agent folder, and ``skillyard …`` on the command line (in-process, or in a real process)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

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


def skillyard_cli(
    *args: str, extra_env: dict[str, str] | None = None, cwd: Path | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``skillyard ARGS``: its exit code, stdout and stderr.

    In-process on the click group, as ``skillyard.cli.main()`` runs it (the group turns a ``SkillyardError`` into
    ``Error: …`` and exit 2); any other exception is its traceback on stderr and exit 1 (as Python prints it).
    ``extra_env`` is added to the environment and ``cwd`` is the working directory for the call only. From a
    running event loop (an async test) the command runs in a worker thread, because the agent commands start
    their own loop.

    ``process=True`` runs ``python -m skillyard`` in a real process instead: for the probes whose subject is the
    process itself (a skill that kills it mid-call, logging to stderr, the entry point's exit code)."""
    if process:
        environ = {**os.environ, **(extra_env or {})}
        command = [sys.executable, "-m", "skillyard", *args]
        return subprocess.run(command, capture_output=True, text=True, env=environ, cwd=cwd, timeout=120)

    def invoke() -> subprocess.CompletedProcess[str]:
        from skillyard.cli import cli

        with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
            result = CliRunner().invoke(cli, list(args), env=extra_env)
        code, stderr, error = result.exit_code, result.stderr, result.exception
        if error is not None and not isinstance(error, SystemExit):
            code, stderr = 1, stderr + "".join(traceback.format_exception(error))
        return subprocess.CompletedProcess(["skillyard", *args], code, result.stdout, stderr)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return invoke()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(invoke).result()


def no_traceback(result: subprocess.CompletedProcess[str]) -> bool:
    """No Python traceback anywhere in the output."""
    return "Traceback" not in result.stdout + result.stderr
