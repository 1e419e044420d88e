"""How a stdio MCP server starts: through the subprocess skills' sandbox (executors/sandbox.py), at the host's tier.

A server lives for many calls, so it gets the sandbox's limits except the per-run CPU seconds, and no workspace:
at tier A it sees the system folders, its working folder (``cwd``) and the folders its command line names,
read-only, plus what ``[mcp.servers.NAME.sandbox]`` adds (``read``, ``write``), and the network unless that says
``network = false``. ``sandbox = false`` starts it on the host as before (a server the admin trusts with the host).
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass

from ..executors.sandbox import (
    Program,
    SandboxUnavailable,
    Wrapped,
    fit_tier,
    machine,
    permits,
    tier_for,
    wrap,
)
from ..executors.subprocess import BASE_ENV
from ..settings import SandboxSettings
from .settings import McpServer


@dataclass
class Launch:
    """One start of a server: the command the SDK spawns, and the sandbox's clean-up when it ends."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str | None
    tier: str
    wrapped: Wrapped | None = None
    warning: str | None = None

    def started(self) -> None:
        """The server answered: what it inherited is its own now."""
        if self.wrapped is not None:
            self.wrapped.started()

    def finish(self) -> None:
        """Kill what the server left behind and remove its scratch folders (blocking: call it in a thread)."""
        if self.wrapped is not None:
            self.wrapped.finish()


def _system(path: str) -> bool:
    return path == "/usr" or path.startswith("/usr/")


def package_root(path: str) -> str:
    """The folder a program at ``path`` needs: the one holding the outermost ``node_modules`` above it (a Node
    package's dependencies), else the version manager whose ``shims`` it is in (pyenv, rbenv, asdf: a shim runs the
    manager, which runs the version it picks), else the Python virtual environment it lives in (``pyvenv.cfg``),
    else its own folder."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    if os.path.basename(folder) == "shims" and os.path.dirname(folder) != os.sep:
        return os.path.dirname(folder)
    parts = folder.split(os.sep)
    if "node_modules" in parts[2:]:  # never / itself
        return os.sep.join(parts[: parts.index("node_modules", 2)])
    above = folder
    while above != os.path.dirname(above):
        if os.path.isfile(os.path.join(above, "pyvenv.cfg")):
            return above
        above = os.path.dirname(above)
    return folder


def program(server: McpServer, command: str) -> Program:
    """The server's sandbox: its cwd, the package roots of its command and of each path among its arguments that
    exists (relative ones from its cwd, else the host's working folder; :func:`package_root`), and its profile's
    folders and network."""
    assert server.sandbox is not None
    cwd = os.path.realpath(server.cwd) if server.cwd else None
    here = cwd or os.getcwd()  # where the server starts, and what its relative paths mean
    named = [os.path.join(here, a) for a in server.args if a and os.path.exists(os.path.join(here, a))]
    read: list[str] = []
    for path in [command, *named]:
        read += [package_root(found) for found in dict.fromkeys((path, os.path.realpath(path)))]
    read = [*([cwd] if cwd else []), *read, *server.sandbox.read]
    kept = tuple(dict.fromkeys(f for f in read if f and not _system(f) and f not in server.sandbox.write))
    return Program(
        kept,
        write=server.sandbox.write,
        network=server.sandbox.network,
        memory="data",  # Node and Go servers reserve large virtual ranges
        cpu_limit=False,
        workdir=here if here in read else None,
    )


def _unreadable(sandboxed: Program, settings: SandboxSettings) -> str | None:
    """Why the sandbox user cannot read one of the server's folders (a root host runs the server as that user, and
    a folder from ``mkdtemp`` is 0700), or None."""
    found = machine(settings.user)
    user = found.user if found.root else None
    if user is None:
        return None
    for folder in sandboxed.read:
        try:
            st = os.stat(folder)
        except OSError:
            continue  # bubblewrap reports a folder that vanished
        if not permits(st, user, 0o5):
            return f"the sandbox user {user.pw_name!r} cannot read {folder} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def launch(server: McpServer, settings: SandboxSettings) -> Launch:
    """The start of a stdio server at the host's sandbox tier (raises :class:`SandboxUnavailable` when the tier
    named in the settings cannot run here or cannot reach the server's folders)."""
    assert server.command is not None
    env = {k: os.environ[k] for k in BASE_ENV if k in os.environ} | dict(server.env)
    cwd = server.cwd
    if server.sandbox is None:
        return Launch(server.command, list(server.args), env, cwd, "host")
    found = shutil.which(server.command, path=env.get("PATH"))
    if found is None and os.sep in server.command:
        raise SandboxUnavailable(
            f"command {server.command!r} is not an executable file; fix the path in [mcp.servers.{server.name}]"
        )
    if found is None:
        raise SandboxUnavailable(
            f"command {server.command!r} is not on PATH; give its absolute path in [mcp.servers.{server.name}]"
        )
    command = os.path.abspath(found)
    sandboxed = program(server, command)
    tier, lowered = fit_tier(tier_for(settings), sandboxed, None, settings)
    closed = _unreadable(sandboxed, settings) if tier in ("A", "B") else None
    if closed is not None and settings.mode == "auto":  # as fit_tier does: auto is the best tier that can run it
        tier, lowered = "C", f"runs at sandbox tier C: {closed}; make it readable for other users (chmod o+rx)"
    elif closed is not None:
        raise SandboxUnavailable(
            f"{closed}; make it readable for other users (chmod o+rx), or set sandbox = false in "
            f"[mcp.servers.{server.name}]"
        )
    wrapped = wrap(sandboxed, tier, [command, *server.args], env, None, settings, plain_spawn=True)
    return Launch(wrapped.argv[0], wrapped.argv[1:], wrapped.env, cwd, tier, wrapped, lowered)
