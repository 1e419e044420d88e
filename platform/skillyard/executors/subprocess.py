"""Subprocess exec types (PYTHON CLI, SHELL, INLINE_SHELL, NODE, RUBY, GO): argv + SKILL_INPUT in, stdout out."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..catalog.schema import looks_secret
from ..catalog.skill import Skill
from ..hookspecs import hookimpl
from ..invoke.context import subprocess_context
from ..invoke.envelope import failure
from ..invoke.inputs import SUBCOMMAND
from .stdout import parse_stdout

log = logging.getLogger("skillyard.subprocess")
BASE_ENV = ("PATH", "HOME", "LANG", "TMPDIR")
STDERR_TAIL = 2000

INTERPRETERS: dict[str, list[str]] = {
    "PYTHON": [sys.executable],
    "SHELL": ["bash"],
    "NODE": ["node"],
    "RUBY": ["ruby"],
    "GO": ["go", "run"],
}


def input_argv(input: Mapping[str, Any]) -> list[str]:
    """``--key value`` per field: booleans as bare flags (false omitted), lists repeated, objects as JSON."""
    argv: list[str] = []
    sub = input.get(SUBCOMMAND)
    if sub:
        argv.append(str(sub))  # argparse subparsers need it first
    for key, value in input.items():
        if key == SUBCOMMAND or value is None:
            continue
        flag = f"--{key}"
        if isinstance(value, bool):
            if value:
                argv.append(flag)
        elif isinstance(value, list):
            for item in value:
                argv += [flag, item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)]
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value, ensure_ascii=False)]
        else:
            argv += [flag, str(value)]
    return argv


def child_env(skill: Skill, input: Mapping[str, Any], ctx: Mapping[str, Any]) -> dict[str, str]:
    """A minimal environment: PATH, HOME, LANG, TMPDIR, SKILL_INPUT, SKILL_CONTEXT and declared credentials."""
    env = {k: os.environ[k] for k in BASE_ENV if k in os.environ}
    configs = ctx.get("skill_args") or {}
    for name in skill.requires.credential_env:
        value = configs.get(name) or configs.get(name.lower()) or os.environ.get(name)
        if value:
            env[name] = str(value)
    visible = subprocess_context(ctx)
    for key in ("skill_configs", "skill_args"):  # credentials travel as environment variables only
        if isinstance(visible.get(key), dict):
            visible[key] = {k: v for k, v in visible[key].items() if not looks_secret(k) and not isinstance(v, dict)}
    for key in list(visible):
        if key in configs and looks_secret(key):
            del visible[key]
    env["SKILL_INPUT"] = json.dumps(input, ensure_ascii=False)
    env["SKILL_CONTEXT"] = json.dumps(visible, ensure_ascii=False, default=str)
    return env


def command_for(skill: Skill, python_cli: bool = False) -> tuple[list[str], str | None]:
    """The argv prefix for a skill, and the interpreter binary that must exist."""
    kind = "PYTHON" if python_cli or skill.exec.python_cli else (skill.exec.type or "")
    if kind == "INLINE_SHELL":
        return ["bash", "-c", skill.exec.command or "", skill.name], "bash"
    prefix = INTERPRETERS[kind]
    return [*prefix, str(skill.exec.config)], prefix[0]


async def run_subprocess(
    skill: Skill, input: Mapping[str, Any], ctx: Mapping[str, Any], force_python_cli: bool = False
) -> dict[str, Any]:
    """Run the skill's process in its own process group; cancellation (the wall clock) kills the whole group."""
    argv, binary = command_for(skill, force_python_cli)
    if binary and shutil.which(binary) is None and not Path(binary).is_file():
        return failure(
            skill.name, f"skill {skill.name!r} needs the {binary!r} interpreter, which is not on PATH; install it",
            error_type="config", non_retriable=True, missing_bins=[binary],
        )
    cwd = ctx.get("workspace_dir") or None
    proc = await asyncio.create_subprocess_exec(
        *argv, *input_argv(input), cwd=cwd, env=child_env(skill, input, ctx),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = await proc.communicate()
    except asyncio.CancelledError:
        _kill_group(proc)
        await proc.wait()
        raise
    err_text = stderr.decode("utf-8", "replace")
    for line in err_text.splitlines():
        log.info("[%s] %s", skill.name, line)
    out_text = stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        return failure(
            skill.name, f"skill {skill.name!r} exited with code {proc.returncode}"
            + (f": {err_text.strip().splitlines()[-1][:300]}" if err_text.strip() else ""),
            exit_code=proc.returncode, stderr_tail=err_text[-STDERR_TAIL:], error_type="transient",
        )
    return parse_stdout(out_text, cwd)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class SubprocessExecutor:
    """Runs one subprocess exec type."""

    async def run(self, skill: Skill, input: dict[str, Any], ctx: dict[str, Any], *, yard: Any) -> Any:
        return await run_subprocess(skill, input, ctx)


@hookimpl
def register_exec_types(register: Any) -> None:
    executor = SubprocessExecutor()
    for name in ("SHELL", "INLINE_SHELL", "NODE", "RUBY", "GO"):
        register(name, executor)
