"""MCP servers whose tools become skills: ``[mcp.servers.NAME]`` in ``SKILLYARD_HOME/settings.toml``.

A server is either stdio (``command``, ``args``, ``env``) or streamable HTTP (``url``, ``headers``), never both.
``allow`` (optional) is an allow-list the server's ``tools/list`` is always intersected with; ``aliases`` keeps an
old tool name resolvable after the server renamed it (``[mcp.servers.NAME.aliases] old = "new"``); ``timeout``
bounds each call (seconds, default 60). ``${VAR}`` in ``env`` values, ``headers`` values and ``url`` comes from the
host environment; only what is listed in ``env`` reaches a stdio server. A stdio server runs in the sandbox of
subprocess skills; ``[mcp.servers.NAME.sandbox]`` gives it folders and takes its network (``read``, ``write``,
``network = false``), ``sandbox = false`` runs a trusted one on the host. A server entry with a problem is left
out and the problem is kept for ``skillyard list`` / ``doctor``; the other servers still load.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SkillyardError
from ..settings import read_settings_file

SETTINGS_FILE = "settings.toml"
DEFAULT_TIMEOUT_S = 60.0
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_KEYS = {"command", "args", "env", "url", "headers", "allow", "aliases", "timeout", "cwd", "sandbox"}
_SANDBOX_KEYS = {"network", "read", "write"}


@dataclass(frozen=True)
class SandboxProfile:
    """What the sandbox lets a stdio server have beyond its command line's folders (docs/mcp.md, Sandbox). The
    network is on unless ``network = false``: a server is mostly a client of some service, and ``npx``/``uvx``
    fetch the server's package when it starts."""

    network: bool = True
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()


@dataclass(frozen=True)
class McpServer:
    """One configured MCP server (secrets stay in ``env`` / ``headers``: never print those)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    allow: tuple[str, ...] | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT_S
    sandbox: SandboxProfile | None = field(default_factory=SandboxProfile)

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    def allows(self, tool: str) -> bool:
        return self.allow is None or tool in self.allow

    def definition(self) -> dict[str, Any]:
        """What identifies the server's tool list (its cache is refetched when this changes); no secret values."""
        return {
            "command": self.command,
            "args": list(self.args),
            "url": self.url,
            "env": sorted(self.env),
            "headers": sorted(self.headers),
            "allow": list(self.allow) if self.allow is not None else None,
        }


class McpSettingsError(SkillyardError):
    """One server entry that cannot be used; the message names the entry and the fix."""


def _expand(text: str, where: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        found = os.environ.get(name)
        if found is None:
            raise McpSettingsError(f"{where} uses ${{{name}}}, which is not set in the environment; export {name}")
        return found

    return _VARIABLE.sub(value, text)


def _strings(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise McpSettingsError(f'{where} must be a list of strings, e.g. ["server.py"]')
    return tuple(raw)


def _table(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise McpSettingsError(f'{where} must be a table of strings, e.g. {{ TOKEN = "${{TOKEN}}" }}')
    return {str(k): v for k, v in raw.items()}


def parse_server(name: str, raw: Any) -> McpServer:
    """One ``[mcp.servers.NAME]`` table; :class:`McpSettingsError` names what is wrong."""
    where = f"[mcp.servers.{name}]"
    if not _NAME.match(name) or "__" in name:
        raise McpSettingsError(
            f"{where}: a server name is letters, digits, '_' or '-' (at most 64, no '__': it separates the server "
            "from the tool in <server>__<tool>), e.g. crm"
        )
    if not isinstance(raw, dict):
        raise McpSettingsError(f"{where} must be a table with command (stdio) or url (streamable HTTP)")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise McpSettingsError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}")
    command, url = raw.get("command"), raw.get("url")
    if bool(command) == bool(url):
        raise McpSettingsError(
            f'{where} needs exactly one of command (a stdio server, e.g. command = "python") and url (streamable '
            'HTTP, e.g. url = "http://127.0.0.1:8765/mcp")'
        )
    if command is not None and not isinstance(command, str):
        raise McpSettingsError(f"{where}.command must be a string")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise McpSettingsError(f"{where}.url must be an http:// or https:// URL")
    if url is not None and "sandbox" in raw:
        raise McpSettingsError(f"{where}.sandbox applies to stdio servers (command) only; remove it")
    timeout = raw.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 3600:
        raise McpSettingsError(f"{where}.timeout must be a number of seconds between 0 and 3600")
    allow = raw.get("allow")
    aliases = _table(raw.get("aliases", {}), f"{where}.aliases")
    env = _table(raw.get("env", {}), f"{where}.env")
    headers = _table(raw.get("headers", {}), f"{where}.headers")
    return McpServer(
        name=name,
        command=command,
        args=_strings(raw.get("args", []), f"{where}.args"),
        env={k: _expand(v, f"{where}.env.{k}") for k, v in env.items()},
        cwd=str(raw["cwd"]) if raw.get("cwd") else None,
        url=_expand(url, f"{where}.url") if url else None,
        headers={k: _expand(v, f"{where}.headers.{k}") for k, v in headers.items()},
        allow=_strings(allow, f"{where}.allow") if allow is not None else None,
        aliases=aliases,
        timeout=float(timeout),
        sandbox=_sandbox(raw.get("sandbox", True), where) if command else None,
    )


def _sandbox(raw: Any, where: str) -> SandboxProfile | None:
    """``sandbox = false`` (None: the server runs on the host), ``true`` (the default profile) or a table."""
    if raw is False:
        return None
    if raw is True:
        return SandboxProfile()
    where = f"{where}.sandbox"
    if not isinstance(raw, dict):
        raise McpSettingsError(f"{where} must be true, false or a table such as {{ network = false }}")
    unknown = sorted(set(raw) - _SANDBOX_KEYS)
    if unknown:
        raise McpSettingsError(f"{where}: unknown key(s) {', '.join(unknown)}; known: network, read, write")
    network = raw.get("network", True)
    if not isinstance(network, bool):
        raise McpSettingsError(f"{where}.network must be true or false")
    folders = {}
    for key in ("read", "write"):
        paths = _strings(raw.get(key, []), f"{where}.{key}")
        relative = [p for p in paths if not os.path.isabs(p)]
        if relative:
            raise McpSettingsError(f"{where}.{key}: {relative[0]!r} is not an absolute path; write the full path")
        folders[key] = tuple(os.path.realpath(p) for p in paths)
    return SandboxProfile(network=network, read=folders["read"], write=folders["write"])


def load_servers(home: Path) -> tuple[dict[str, McpServer], list[str]]:
    """The usable servers by name and a problem per entry left out (a settings file that does not parse raises)."""
    path = home / SETTINGS_FILE
    data = read_settings_file(path)
    mcp = data.get("mcp", {})
    servers = mcp.get("servers", {}) if isinstance(mcp, dict) else None
    if not isinstance(servers, dict):
        return {}, [f"{path}: [mcp.servers] must be a table of servers, e.g. [mcp.servers.crm]"]
    found: dict[str, McpServer] = {}
    problems: list[str] = []
    for name, raw in servers.items():
        try:
            found[name] = parse_server(str(name), raw)
        except McpSettingsError as exc:
            problems.append(f"{path}: {exc}")
    return found, problems
