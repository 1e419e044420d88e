"""Subprocess exec types (PYTHON CLI, SHELL, INLINE_SHELL, NODE, RUBY, GO): argv + SKILL_INPUT in, stdout out."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..credentials import masked_logger, secret_config
from ..envelope import add_warning, failure
from ..hookspecs import hookimpl
from ..invoke.context import NAMED_FIELDS, config_value, credential_value, subprocess_context
from ..invoke.inputs import SUBCOMMAND
from ..settings import SandboxSettings
from .sandbox import (
    OFF_WARNING,
    Program,
    SandboxUnavailable,
    below_required,
    fit_tier,
    limit_failure,
    limit_hit,
    sandbox_settings,
    tier_for,
    wrap,
)
from .stdout import parse_stdout

if TYPE_CHECKING:
    from ..catalog.skill import Skill

log = masked_logger("skillyard.subprocess")
BASE_ENV = ("PATH", "HOME", "LANG", "TMPDIR")
#: `go run` compiles before it runs: it needs a build cache (GOCACHE, else $XDG_CACHE_HOME or $HOME) and must
#: honour where the host keeps its toolchain and modules. These pass through for GO skills only; they name
#: directories and toolchain choices, not credentials.
GO_TOOLCHAIN_ENV = ("GOCACHE", "GOPATH", "GOMODCACHE", "GOROOT", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN", "XDG_CACHE_HOME")
STDERR_TAIL = 2000  # of the kept stderr, what a failure envelope quotes
_CHUNK = 1 << 16

INTERPRETERS: dict[str, list[str]] = {
    "PYTHON": [sys.executable],
    "SHELL": ["bash"],
    "NODE": ["node"],
    "RUBY": ["ruby"],
    "GO": ["go", "run"],
}


def input_argv(input: Mapping[str, Any]) -> list[str]:
    """``--key value`` per field: booleans as bare flags (false omitted), lists repeated, objects as JSON.

    Keys starting with ``_`` are the platform's (§4.3; ``_subcommand`` comes first, as the subcommand): never flags,
    which an argparse CLI would refuse as unrecognized arguments."""
    argv: list[str] = []
    sub = input.get(SUBCOMMAND)
    if sub:
        argv.append(str(sub))  # argparse subparsers need it first
    for key, value in input.items():
        if key.startswith("_") or value is None:
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


def split_secret_params(skill: Skill, input: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Credential parameters (§5.2) filled from configs leave the input and travel as environment variables.

    On argv they would be readable by every local user (``ps``); ``api_token`` becomes ``$API_TOKEN``.
    """
    secrets = set(skill.schema.secret_params)
    public = {k: v for k, v in input.items() if k not in secrets}
    env = {_env_name(k): str(v) for k, v in input.items() if k in secrets and v not in (None, "")}
    return public, env


def _env_name(key: str) -> str:
    """The environment variable a credential travels in: ``api_token`` → ``API_TOKEN``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", key).upper()


def child_env(
    skill: Skill, input: Mapping[str, Any], ctx: Mapping[str, Any], secret_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A minimal environment: PATH, HOME, LANG, TMPDIR, SKILL_INPUT, SKILL_CONTEXT and the skill's credentials."""
    env = {k: os.environ[k] for k in BASE_ENV if k in os.environ}
    if skill.exec.type == "GO":
        env.update(go_toolchain_env())
    configs = ctx.get("skill_args") or {}
    declared = (*skill.requires.credential_env, *skill.schema.secret_params, *skill.secret_configs)
    for name in skill.requires.credential_env:
        value = credential_value(name, configs)
        if value:
            env[name] = str(value)
    for name, value in (secret_env or {}).items():
        env.setdefault(name, value)

    def credential(key: str) -> bool:  # declared names count whatever they look like (SERVICE_PIN, x-secret)
        return secret_config(key, declared)

    for key in skill.secret_configs:  # declared secret configs leave SKILL_CONTEXT (below): they travel as $KEY
        value = config_value(key, configs)
        if value is not None:
            env.setdefault(_env_name(key), value)

    visible = subprocess_context(ctx)
    for key in ("skill_configs", "skill_args"):  # credentials travel as environment variables only
        if isinstance(visible.get(key), dict):
            visible[key] = {k: v for k, v in visible[key].items() if not credential(k) and not isinstance(v, dict)}
    for key in list(visible):  # a credential given at the top level (by a config or by the caller) stays out too
        if key not in NAMED_FIELDS and credential(key):
            del visible[key]
    env["SKILL_INPUT"] = json.dumps(input, ensure_ascii=False)
    env["SKILL_CONTEXT"] = json.dumps(visible, ensure_ascii=False, default=str)
    return env


def go_toolchain_env() -> dict[str, str]:
    """The host's Go toolchain variables; without HOME a private cache under the temp dir keeps `go run` working."""
    env = {k: os.environ[k] for k in GO_TOOLCHAIN_ENV if os.environ.get(k)}
    if not os.environ.get("HOME"):
        base = Path(tempfile.gettempdir()) / f"skillyard-go-{getattr(os, 'getuid', lambda: 0)()}"
        if "GOCACHE" not in env and "XDG_CACHE_HOME" not in env:
            env["GOCACHE"] = str(base / "cache")
        env.setdefault("GOPATH", str(base / "path"))
    return env


def command_for(skill: Skill, python_cli: bool = False, entry: bool = False) -> tuple[list[str], str | None]:
    """The argv prefix for a skill, and the interpreter binary that must exist. ``entry``: an in-process skill's
    entry function, called inside the sandbox by ``sandbox/entry.py``."""
    if entry:
        from ..sandbox import ENTRY

        return [sys.executable, str(ENTRY), str(skill.exec.config), skill.code.entry or ""], sys.executable
    kind = "PYTHON" if python_cli or skill.exec.python_cli else (skill.exec.type or "")
    if kind == "INLINE_SHELL":
        return ["bash", "-c", skill.exec.command or "", skill.name], "bash"
    prefix = INTERPRETERS[kind]
    return [*prefix, str(skill.exec.config)], prefix[0]


def _spec_problem(skill: Skill, python_cli: bool) -> str | None:
    """A missing script or command, said as a fix to the frontmatter rather than an interpreter's exit code."""
    if skill.exec.type == "INLINE_SHELL" and not python_cli:
        if not (skill.exec.command or "").strip():
            return "exec.primary.type INLINE_SHELL needs exec.primary.command (the shell command to run)"
        return None
    if skill.exec.config is None or not skill.exec.config.is_file():
        return f"exec.config {skill.exec.config} does not exist; fix the path (relative to {skill.dir})"
    return None


@dataclass(frozen=True)
class OutputLimits:
    """How much of a subprocess's output the host holds: stdout up to a cap (more stops the run), stderr's tail."""

    stdout: int = 16 * 1024 * 1024
    stderr_tail: int = 64 * 1024

    @classmethod
    def of(cls, yard: Any) -> OutputLimits:
        settings = getattr(yard, "settings", None)
        if settings is None:
            return cls()
        return cls(settings.stdout_limit, settings.stderr_tail)


async def _read_capped(stream: asyncio.StreamReader, cap: int, overflow: Callable[[], None]) -> bytes | None:
    """Everything on ``stream``, or None (after calling ``overflow``) as soon as it passes ``cap`` bytes: never more
    than the cap and one chunk in memory."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(_CHUNK):
        size += len(chunk)
        if size > cap:
            overflow()
            while await stream.read(_CHUNK):  # drain what is left until the killed group closes the pipe
                pass
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_tail(stream: asyncio.StreamReader, keep: int) -> tuple[bytes, int]:
    """The last ``keep`` bytes of ``stream`` and how many it carried in all."""
    tail = bytearray()
    total = 0
    while chunk := await stream.read(_CHUNK):
        total += len(chunk)
        tail += chunk
        if len(tail) > keep:
            del tail[: len(tail) - keep]
    return bytes(tail), total


def _describe_bytes(size: int) -> str:
    return f"{size / 1024 / 1024:g} MB" if size >= 1024 * 1024 else f"{size / 1024:g} KB"


async def run_subprocess(
    skill: Skill,
    input: Mapping[str, Any],
    ctx: Mapping[str, Any],
    force_python_cli: bool = False,
    limits: OutputLimits | None = None,
    sandbox: SandboxSettings | None = None,
    entry: bool = False,
) -> Any:
    """Run the skill's process in the sandbox (``sandbox``: the host's settings; see executors/sandbox.py) and its
    own process group. Every process of the run ends with it: its exit, the wall clock (cancellation), the caller's
    abort signal or too much output on stdout kills whatever it left running."""
    limits = limits or OutputLimits()
    sandbox = sandbox or SandboxSettings()
    argv, binary = command_for(skill, force_python_cli, entry)
    problem = _spec_problem(skill, force_python_cli)
    if problem:
        return failure(
            skill.name, f"skill {skill.name!r} cannot run: {problem}", error_type="config", non_retriable=True
        )
    if binary and shutil.which(binary) is None and not Path(binary).is_file():
        return failure(
            skill.name,
            f"skill {skill.name!r} needs the {binary!r} interpreter, which is not on PATH; install it",
            error_type="config",
            non_retriable=True,
            missing_bins=[binary],
        )
    abort = ctx.get("abort_signal")
    abort = abort if isinstance(abort, asyncio.Event) else None
    if abort is not None and abort.is_set():
        return _aborted(skill)
    try:
        tier = tier_for(sandbox)
    except SandboxUnavailable as exc:
        return failure(
            skill.name,
            f"skill {skill.name!r} cannot run: {exc}; set SKILLYARD_SANDBOX=auto or install what the tier needs",
            error_type="config",
            non_retriable=True,
            sandbox={"tier": None, "requested": sandbox.mode},
        )
    cwd = ctx.get("workspace_dir") or None
    if cwd:  # a caller-given workspace may not exist yet; one mkdir is nothing next to a fork and exec
        os.makedirs(cwd, exist_ok=True)
        cwd = os.path.realpath(cwd)  # bound at its real path in the sandbox, so paths in input and output hold
    public, secret_env = split_secret_params(skill, input)
    program = Program.of_skill(skill, force_python_cli)
    tier, lowered = fit_tier(tier, program, cwd, sandbox)
    refusal = below_required(tier, ctx.get("role_id"), sandbox)
    if refusal is not None:
        return failure(
            skill.name,
            f"skill {skill.name!r} cannot run: {refusal}",
            error_type="config",
            non_retriable=True,
            sandbox={"tier": tier},
        )
    seen = {**ctx, "skill_config": {"sandbox": {"tier": tier, "network": skill.network, **sandbox.limits()}}}
    env = child_env(skill, public, seen, secret_env)
    nul = _nul_in(public, env)
    if nul is not None:  # the system cuts strings at NUL: a value holding one would be read as several arguments
        return failure(
            skill.name,
            f"skill {skill.name!r} cannot run: {nul} contains a NUL character, which no process argument or "
            "environment variable can hold; remove it",
            error_type="recoverable",
            non_retriable=True,
        )
    try:
        wrapped = wrap(program, tier, [*argv, *input_argv(public)], env, cwd, sandbox)
    except SandboxUnavailable as exc:
        return failure(
            skill.name,
            f"skill {skill.name!r} cannot run: {exc}",
            error_type="config",
            non_retriable=True,
            sandbox={"tier": tier},
        )
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _ExitAwareProtocol(loop),
            *wrapped.argv,
            cwd=cwd,
            env=wrapped.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            **wrapped.popen,
        )
    except OSError as exc:
        await asyncio.to_thread(wrapped.finish)
        if exc.errno != errno.E2BIG:
            raise
        # the input travels as argv and SKILL_INPUT, and the system caps each string (128 KiB on Linux): the same
        # input fails every time, so this is the caller's to change, not a transient failure
        return failure(
            skill.name,
            f"skill {skill.name!r} cannot start: its input is too large for a subprocess (the system limits each "
            "argument and environment string, 128 KiB on Linux); write large data to a file in the workspace and "
            "pass its path instead",
            error_type="recoverable",
        )
    wrapped.started()
    proc = asyncio.subprocess.Process(transport, protocol, loop)
    assert proc.stdout is not None and proc.stderr is not None
    output = asyncio.gather(
        _read_capped(proc.stdout, limits.stdout, lambda: _kill_group(proc)),
        _read_tail(proc.stderr, limits.stderr_tail),
    )
    exited = protocol.exited
    try:
        if abort is not None and not await _first_of(exited, abort):
            _kill_group(proc)  # the process cannot see the Event: the platform stops it for the caller
            await asyncio.to_thread(wrapped.finish)
            await output
            return _aborted(skill)
        await exited
        # The skill is over when its process is: what it left running in the background goes with it, instead of
        # outliving the run (or holding the output pipes open until the wall clock, when it kept them).
        _kill_group(proc)
        broken = await asyncio.to_thread(wrapped.finish)
        stdout, (stderr, stderr_size) = await output
    except asyncio.CancelledError:
        _kill_group(proc)
        with contextlib.suppress(Exception):
            wrapped.finish()  # cancelled: no awaiting any more, and the run's processes must still go
        await proc.wait()
        output.cancel()
        raise
    err_text = stderr.decode("utf-8", "replace")
    if stderr_size > len(stderr):
        log.info("[%s] (stderr: the last %d of %d bytes)", skill.name, len(stderr), stderr_size)
    for line in err_text.splitlines():
        log.info("[%s] %s", skill.name, line)
    if stdout is None:
        return failure(
            skill.name,
            f"skill {skill.name!r} was stopped: it wrote more than {_describe_bytes(limits.stdout)} to stdout "
            "(SKILLYARD_STDOUT_LIMIT); have it write large results to a file in its workspace and print the path",
            stdout_limit_exceeded=True,
            error_type="recoverable",
            non_retriable=True,
            stderr_tail=err_text[-STDERR_TAIL:],
        )
    out_text = stdout.decode("utf-8", "replace")
    if broken is not None:
        return limit_failure(skill.name, broken, err_text[-STDERR_TAIL:])
    if proc.returncode != 0:
        code, err_text = _program_exit(skill, proc.returncode, err_text)
        hit = limit_hit(proc.returncode, err_text, tier, sandbox)
        if hit is not None:
            return limit_failure(skill.name, hit, err_text[-STDERR_TAIL:])
        return failure(
            skill.name,
            f"skill {skill.name!r} exited with code {code}"
            + (f": {err_text.strip().splitlines()[-1][:300]}" if err_text.strip() else ""),
            exit_code=code,
            stderr_tail=err_text[-STDERR_TAIL:],
            error_type="transient",
        )
    result = parse_stdout(out_text, cwd)
    if tier == "off" and isinstance(result, dict):
        add_warning(result, OFF_WARNING)
    if lowered is not None and isinstance(result, dict):
        add_warning(result, lowered)
    return result


def _nul_in(public: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """Which input field or environment variable holds a NUL (named, never shown: it may be a credential)."""
    for key, value in public.items():
        if "\\u0000" in json.dumps(value, default=str) or "\x00" in key:
            return f"input field {key!r}"
    for name, value in env.items():
        if "\x00" in name or "\x00" in value:
            return f"the environment variable {name!r}"
    return None


_GO_EXIT_STATUS = re.compile(r"(?:\A|\n)exit status (\d+)\n?\Z")  # go run's own last stderr line


def _program_exit(skill: Skill, returncode: int | None, err_text: str) -> tuple[int | None, str]:
    """The skill program's own exit code and stderr. ``go run`` exits 1 whatever the program returned and reports
    the program's code as its last stderr line, ``exit status N``: that is the code, and the line is not the
    program's."""
    if skill.exec.type == "GO" and returncode == 1:
        found = _GO_EXIT_STATUS.search(err_text)
        if found:
            return int(found.group(1)), err_text[: found.start()]
    return returncode, err_text


class _ExitAwareProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol of ``create_subprocess_exec``, plus a future set when the process exits: ``Process.wait``
    also waits for the output pipes to close, which a background child of the skill can keep open."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=2**16, loop=loop)  # asyncio's default stream limit
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


async def _first_of(exited: asyncio.Future[Any], abort: asyncio.Event) -> bool:
    """Wait for the process's exit or the caller's abort signal: True when the exit came first."""
    aborted = asyncio.ensure_future(abort.wait())
    try:
        await asyncio.wait((exited, aborted), return_when=asyncio.FIRST_COMPLETED)
    finally:
        aborted.cancel()
    return exited.done()


def _aborted(skill: Skill) -> dict[str, Any]:
    return failure(
        skill.name,
        f"skill {skill.name!r} was stopped: the caller set abort_signal",
        aborted=True,
        error_type="transient",
    )


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Kill the run's process group, led by ``proc``.

    Once the leader is reaped its pid can be reused. Linux keeps a pid while any process is still in the group it
    names, so a process holding that pid again means the group is empty and the signal would hit a stranger.
    """
    if proc.returncode is not None and os.path.exists(f"/proc/{proc.pid}"):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


class SubprocessExecutor:
    """Runs one subprocess exec type."""

    async def run(self, skill: Skill, input: dict[str, Any], ctx: dict[str, Any], *, yard: Any) -> Any:
        return await run_subprocess(skill, input, ctx, limits=OutputLimits.of(yard), sandbox=sandbox_settings(yard))


@hookimpl
def register_exec_types(register: Any) -> None:
    executor = SubprocessExecutor()
    for name in ("SHELL", "INLINE_SHELL", "NODE", "RUBY", "GO"):
        register(name, executor)
