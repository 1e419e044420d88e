"""The ``skillyard`` command line run in the test's own process (click's CliRunner), and what its output is read with.

``invoke`` runs the same group the console script runs, plugin commands included, with stdout and stderr apart; an
exception that escapes a command fails the test with its traceback instead of becoming an exit code. Environment
variables for one call go in ``env``; a working directory is the test's (``monkeypatch.chdir``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from skillyard.cli import cli

TRACEBACK = "Traceback (most recent call last)"


def invoke(*args: str | Path, env: Mapping[str, str | None] | None = None, input: str | None = None) -> Result:
    """``skillyard ARGS`` in this process: ``exit_code``, ``stdout``, ``stderr`` (and ``output``, the two mixed)."""
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, env=env, catch_exceptions=False)


def no_traceback(result: Result) -> bool:
    """Nothing escaped the command and neither stream shows a traceback."""
    escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
    return not escaped and TRACEBACK not in result.stdout and TRACEBACK not in result.stderr


def usage_error(result: Result, *needles: str) -> None:
    """Exit 2 without a traceback, the message naming each of ``needles``."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert no_traceback(result), result.output
    for needle in needles:
        assert needle in result.output, (needle, result.output)


def list_json(*args: str | Path, env: Mapping[str, str | None] | None = None) -> list[dict[str, Any]]:
    """``skillyard list --json ARGS``, which must exit 0."""
    result = invoke("list", "--json", *args, env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def listing(*roots: Path, env: Mapping[str, str | None] | None = None) -> list[dict[str, Any]]:
    """Every skill folder of ``roots`` (and SKILLYARD_SKILLS_PATH) as ``list --json --no-builtin`` prints it."""
    return list_json("--no-builtin", *(arg for root in roots for arg in ("--skills-dir", root)), env=env)


def show_json(root: Path, name: str) -> dict[str, Any]:
    """``skillyard show NAME --json --skills-dir ROOT``, which must exit 0."""
    result = invoke("show", name, "--json", "--skills-dir", root)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def named(items: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The listed folders of that name."""
    return [i for i in items if i["name"] == name]


def one(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The only listed folder of that name."""
    found = named(items, name)
    assert len(found) == 1, [(i["name"], i["dir"]) for i in items]
    return found[0]


def by_name(items: list[dict[str, Any]], name: str, active: bool = True) -> dict[str, Any]:
    """The listed folder of that name that wins (``active``) or is shadowed."""
    return next(i for i in items if i["name"] == name and i.get("active", True) is active)


def cli_popen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A real ``skillyard`` process, for tests where several processes race on one database."""
    return subprocess.Popen(
        [sys.executable, "-m", "skillyard", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
