"""The cached ``tools/list`` of each MCP server, as skill folders the catalog reads like any other.

``SKILLYARD_HOME/cache/mcp/<server>/`` holds ``tools.json`` (when it was fetched, the server definition it was
fetched with, a hash of the tools, the tools, what was left out and why) and one folder per allowed tool with a
``SKILL.md`` (``exec: {type: MCP, server, tool}``, ``source: mcp:<server>``, ``read_only`` from the tool's
``readOnlyHint``) and its ``schema.json`` (the tool's input schema). Listing reads only these files, so it never
starts a server; the cache is filled on first use or by ``skillyard mcp refresh``.

The server's list is always intersected with the configured ``allow`` list (the runtime never trusts the server's
list alone); an allowed tool the server does not list is reported as missing, a tool whose input schema is not a
valid JSON Schema is left out with the reason.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ..catalog.schema_checks import reference_problem
from ..envelope import nesting_problem
from .settings import McpServer

TOOLS_FILE = "tools.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
#: The longest tool name kept (MCP 2025-11-25 asks for at most 128 characters).
MAX_TOOL_NAME = 128
#: Seconds a cached tool's wall clock adds to the server's call timeout.
TIMEOUT_MARGIN_S = 5.0


def cache_root(home: Path) -> Path:
    return home / "cache" / "mcp"


def skill_name(server: str, tool: str) -> str:
    """The catalog name of an MCP tool: ``<server>__<tool>``."""
    return f"{server}__{tool}"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


@dataclass
class Refresh:
    """What a refresh found: the tools kept, those left out (with why), missing allowed tools, changed tools."""

    server: str
    tools: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "tools": self.tools,
            "left_out": self.left_out,
            "missing": self.missing,
            "changed": self.changed,
            "added": self.added,
            "removed": self.removed,
        }


def read_state(home: Path, server: str) -> dict[str, Any] | None:
    """The cached ``tools.json`` of a server, or None when it was never fetched (or the file is unreadable)."""
    try:
        data = json.loads((cache_root(home) / server / TOOLS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _schema_problem(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return "its inputSchema is not an object"
    too_deep = nesting_problem(schema)  # before the recursive schema check
    if too_deep:
        return f"its inputSchema cannot be used: {too_deep}"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"its inputSchema is not a valid JSON Schema ({exc.message})"
    problem = reference_problem(schema)  # what the catalog would refuse the folder for, said at refresh
    return f"its inputSchema cannot be used: {problem}" if problem else None


def safe_stem(name: str) -> str:
    """A tool's name as a file or folder name: no separator, no leading dot, bounded (a server names its tools)."""
    return _UNSAFE.sub("_", name).lstrip(".")[:80] or "tool"


def _folder_name(tool: str) -> str:
    return f"{safe_stem(tool)}-{hashlib.sha256(tool.encode()).hexdigest()[:8]}"


def _skill_md(server: McpServer, tool: dict[str, Any], old_names: list[str]) -> str:
    name = tool["name"]
    annotations = tool.get("annotations") or {}
    description = tool.get("description") or annotations.get("title") or tool.get("title") or f"MCP tool {name}"
    front: dict[str, Any] = {
        "name": skill_name(server.name, name),
        "description": " ".join(str(description).split())[:1000],
        "source": f"mcp:{server.name}",
        # the run's wall clock leaves the call's own timeout room to answer first (as mcp_error "timeout")
        "exec": {"type": "MCP", "server": server.name, "tool": name, "timeout": server.timeout + TIMEOUT_MARGIN_S},
    }
    if annotations.get("readOnlyHint") is True:
        front["read_only"] = True
    if old_names:
        front["aliases"] = [skill_name(server.name, old) for old in old_names]
    title = tool.get("title") or annotations.get("title")
    body = f"# {title or name}\n\n{description}\n\nA tool of the MCP server `{server.name}` (`{name}`).\n"
    return "---\n" + yaml.safe_dump(front, allow_unicode=True, sort_keys=False) + "---\n" + body


def write_cache(home: Path, server: McpServer, tools: list[dict[str, Any]]) -> Refresh:
    """Replace the server's cache with ``tools`` (raw tool dicts as the server listed them)."""
    report = Refresh(server.name)
    listed: dict[str, dict[str, Any]] = {t["name"]: t for t in tools if isinstance(t.get("name"), str) and t["name"]}
    kept: dict[str, dict[str, Any]] = {}
    for name, tool in listed.items():
        if len(name) > MAX_TOOL_NAME or any(unicodedata.category(c).startswith("C") for c in name):
            report.left_out[name[:MAX_TOOL_NAME].encode("unicode_escape").decode("ascii")] = (
                f"its name is longer than {MAX_TOOL_NAME} characters or holds control characters"
            )
            continue
        if not server.allows(name):
            report.left_out[name] = "not in the server's allow list"
            continue
        problem = _schema_problem(tool.get("inputSchema", {"type": "object"}))
        if problem is not None:
            report.left_out[name] = problem
            continue
        kept[name] = tool
    report.missing = [name for name in server.allow or () if name not in listed]
    report.missing += [f"{new} (alias {old})" for old, new in server.aliases.items() if new not in kept]
    previous = read_state(home, server.name) or {}
    before = {t["name"]: _digest(t) for t in previous.get("tools", []) if isinstance(t, dict) and "name" in t}
    report.tools = sorted(kept)
    report.added = [n for n in report.tools if n not in before]
    report.removed = sorted(n for n in before if n not in kept)
    report.changed = [n for n in report.tools if n in before and before[n] != _digest(kept[n])]
    folder = cache_root(home) / server.name
    staging = folder.with_name(f".{server.name}.new")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    renamed: dict[str, list[str]] = {}
    for old, new in server.aliases.items():
        renamed.setdefault(new, []).append(old)
    for name, tool in kept.items():
        skill = staging / _folder_name(name)
        skill.mkdir()
        (skill / "SKILL.md").write_text(_skill_md(server, tool, renamed.get(name, [])), encoding="utf-8")
        schema = tool.get("inputSchema") or {"type": "object"}
        (skill / "schema.json").write_text(json.dumps(schema, ensure_ascii=False), encoding="utf-8")
    state = {
        "server": server.name,
        "fetched_at": time.time(),
        "definition": _digest(server.definition()),
        "hash": _digest([kept[n] for n in sorted(kept)]),
        "tools": [kept[n] for n in sorted(kept)],
        "left_out": report.left_out,
        "missing": report.missing,
    }
    (staging / TOOLS_FILE).write_text(json.dumps(state, ensure_ascii=False, indent=1), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return report


def stale(home: Path, server: McpServer) -> bool:
    """Whether the server has no cache, or one fetched with another definition (command, url, allow list …)."""
    state = read_state(home, server.name)
    return state is None or state.get("definition") != _digest(server.definition())


def drop_unconfigured(home: Path, configured: set[str]) -> None:
    """Remove the caches of servers no longer configured (their tools must not stay in the catalog)."""
    root = cache_root(home)
    if not root.is_dir():
        return
    for folder in root.iterdir():
        if folder.is_dir() and not folder.name.startswith(".") and folder.name not in configured:
            shutil.rmtree(folder, ignore_errors=True)
