"""Gating: what a skill needs before it may run, merged from ours, OpenClaw's and Hermes' vocabularies (§2.2)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

_OS_ALIASES = {"macos": "darwin", "mac": "darwin", "osx": "darwin", "windows": "win32", "win": "win32"}
_TRUE = {"true", "yes", "on", "1", "y"}


def as_bool(value: Any) -> bool:
    """Frontmatter booleans as authors write them (``true``, ``yes``, ``on``, 1)."""
    if isinstance(value, str):
        return value.strip().lower() in _TRUE
    return bool(value)


@dataclass(frozen=True)
class Requirements:
    """Everything a skill declares it needs; each tuple is de-duplicated and keeps declaration order."""

    env: tuple[str, ...] = ()
    optional_env: tuple[str, ...] = ()
    bins: tuple[str, ...] = ()
    any_bins: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    os: tuple[str, ...] = ()
    always: bool = False
    primary_env: str | None = None
    exec_mode: str | None = None

    @property
    def gates(self) -> bool:
        """Whether anything must be checked before a run."""
        return bool(self.env or self.config or self.bins or self.any_bins or self.os)

    @property
    def credential_env(self) -> tuple[str, ...]:
        """Environment variables a subprocess skill receives: declared env plus the primary one."""
        names = [*self.env, *self.optional_env]
        if self.primary_env:
            names.append(self.primary_env)
        return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class GateResult:
    """The outcome of checking requirements against one environment."""

    missing_env: tuple[str, ...] = ()
    missing_bins: tuple[str, ...] = ()
    os_supported: bool = True

    @property
    def passed(self) -> bool:
        return self.os_supported and not self.missing_env and not self.missing_bins


def _names(value: Any, *keys: str) -> list[tuple[str, bool]]:
    """Names from a list of strings or ``{name, required}`` objects (also ``env_var``/``key``), with required.

    An object is optional when it says ``required: false`` or, as Hermes writes it, ``optional: true``.
    """
    if value is None:
        return []
    if isinstance(value, (str, dict)):
        value = [value]
    out: list[tuple[str, bool]] = []
    for item in value if isinstance(value, (list, tuple)) else []:  # frontmatter holds plain JSON values
        if isinstance(item, str):
            out.extend((part.strip(), True) for part in item.split(",") if part.strip())
        elif isinstance(item, dict):
            name = next((item[k] for k in (*keys, "name", "env_var", "env", "key") if item.get(k)), None)
            if isinstance(name, str) and name.strip():
                required = as_bool(item.get("required", True)) and not as_bool(item.get("optional", False))
                out.append((name.strip(), required))
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


#: ``metadata.<block>`` vocabularies read for requirements: OpenClaw's and its earlier names (clawdbot, moltbot,
#: clawdis, clawdhub: real collections still carry them), and ours.
GATING_BLOCKS = ("openclaw", "clawdbot", "moltbot", "clawdis", "clawdhub", "skillyard")


def parse_requirements(meta: Mapping[str, Any]) -> Requirements:
    """Merge every gating vocabulary found in a skill's frontmatter."""
    metadata = _mapping(meta.get("metadata"))
    blocks: list[Mapping[str, Any]] = [_mapping(metadata.get(k)) for k in GATING_BLOCKS]
    blocks += [metadata, meta]
    env: list[tuple[str, bool]] = []
    bins: list[str] = []
    any_bins: list[str] = []
    config: list[str] = []
    os_list: list[str] = []
    always = False
    primary = None
    for block in blocks:
        if not block:
            continue
        req = block.get("requires")
        if isinstance(req, dict) and req:
            env += _names(req.get("env"))
            bins += [n for n, _ in _names(req.get("bins"))]
            any_bins += [n for n, _ in _names(req.get("anyBins") or req.get("any_bins"))]
            config += [n for n, _ in _names(req.get("config"))]
        if "os" in block:
            os_list += [n for n, _ in _names(block["os"])]
        if "always" in block:
            always = always or as_bool(block["always"])
        if primary is None and isinstance(block.get("primaryEnv"), str):
            primary = block["primaryEnv"]
    # Hermes Agent's vocabulary
    if "platforms" in meta:
        os_list += [n for n, _ in _names(meta["platforms"])]
    if "required_environment_variables" in meta:
        env += _names(meta["required_environment_variables"])
    if "setup" in meta:
        env += _names(_mapping(meta["setup"]).get("collect_secrets"))
    if "prerequisites" in meta:
        env += _names(_mapping(meta["prerequisites"]).get("env_vars"))
    required = [n for n, req in env if req]
    optional = [n for n, req in env if not req and n not in required]
    exec_mode = meta.get("exec_mode")
    return Requirements(
        env=tuple(dict.fromkeys(required)),
        optional_env=tuple(dict.fromkeys(optional)),
        bins=tuple(dict.fromkeys(bins)),
        any_bins=tuple(dict.fromkeys(any_bins)),
        config=tuple(dict.fromkeys(config)),
        os=tuple(dict.fromkeys(_OS_ALIASES.get(o.lower(), o.lower()) for o in os_list)),
        always=always,
        primary_env=primary,
        exec_mode=exec_mode if isinstance(exec_mode, str) else None,
    )


def check_requirements(
    req: Requirements,
    has_value: Callable[[str], bool] | None = None,
    which: Callable[[str], str | None] = shutil.which,
    platform: str = sys.platform,
) -> GateResult:
    """Check requirements; ``has_value(name)`` says whether configs or the environment provide a variable.

    ``always: true`` bypasses requires but never ``os``; ``exec_mode: shell``/``runtime`` skills run in a
    container, so host binaries are not checked for them.
    """
    lookup = has_value or (lambda name: bool(os.environ.get(name, "").strip()))
    os_ok = not req.os or any(platform.startswith(o) for o in req.os)
    if req.always:
        return GateResult(os_supported=os_ok)
    missing_env = tuple(n for n in (*req.env, *req.config) if not lookup(n))
    missing_bins: tuple[str, ...] = ()
    if req.exec_mode not in ("shell", "runtime"):
        missing_bins = tuple(b for b in req.bins if which(b) is None)
        if req.any_bins and not any(which(b) for b in req.any_bins):
            missing_bins += (" | ".join(req.any_bins),)
    return GateResult(missing_env=missing_env, missing_bins=missing_bins, os_supported=os_ok)
