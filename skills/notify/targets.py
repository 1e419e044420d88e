"""From ``target`` to Apprise objects: aliases looked up, raw URLs allowed only by the role's policy, every URL
checked by Apprise itself, and every host a target connects to resolved and refused when it is not public.

Apprise opens its own connections (and speaks non-HTTP schemes), so the address guard runs here, before notifying:
a plugin whose URL names a server (``json://host``, ``mailto://…?smtp=host``, ``ntfy://host``) has that host
checked; plugins that talk only to their vendor's fixed API (``tgram://``, ``slack://``) name no host of their own.
HTTP redirects are never followed. The window left is DNS rebinding between this check and Apprise's connection.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import apprise

from skillyard import RefusedDestination, checked_addresses

from .aliases import DEFAULT_ALIAS, Alias, AliasError, aliases_of

RAW_URL_POLICY = "allow_raw_urls"
#: Targets (and their secrets) are built once per URL or stored alias: Apprise objects are reusable and safe to
#: notify concurrently, and building one per call was most of notify's own cost.
TARGETS_CACHED = 256
_TRUE = frozenset({"1", "true", "yes", "on"})


class TargetError(ValueError):
    """A target that cannot be notified; ``error_type`` is ``recoverable`` (the caller can change the target) or
    ``config`` (an admin must: no usable target at all, a broken alias)."""

    def __init__(self, message: str, error_type: str = "recoverable") -> None:
        super().__init__(message)
        self.error_type = error_type


@dataclass(frozen=True)
class Target:
    """One entry of ``target``: its label (the alias name, or the URL with its secrets hidden) and what to notify."""

    label: str
    notifier: apprise.Apprise
    tags: tuple[str, ...]
    secrets: tuple[str, ...]  # the parts of its URLs to mask wherever text could show them


def asset() -> apprise.AppriseAsset:
    """Apprise's settings for every target: no redirects, no persistent storage, no local plugin paths."""
    return apprise.AppriseAsset(http_redirects=False, plugin_paths=[], storage_mode="memory")


def url_secrets(url: str) -> list[str]:
    """The parts of an Apprise URL that may be credentials: the whole URL, the password or token in its userinfo,
    path segments and query values."""
    parts = urlsplit(url)
    found = [url, parts.password or "", parts.username or "" if parts.password is None else ""]
    found += [segment for segment in parts.path.split("/") if segment]
    found += [pair.partition("=")[2] for pair in parts.query.split("&")]
    return [item for item in found if item]


def candidate_secrets(target: Any, configs: Mapping[str, Any]) -> list[str]:
    """Every credential part a call may handle, known before any URL is loaded: the role's aliases and the raw
    URLs of ``target``."""
    found = [part for name, text in aliases_of(configs).items() for part in _alias_secrets(name, text)]
    entries = [target] if isinstance(target, str) else target if isinstance(target, list) else []
    found += [part for entry in entries if isinstance(entry, str) and "://" in entry for part in url_secrets(entry)]
    return found


@functools.lru_cache(maxsize=TARGETS_CACHED)
def _alias_secrets(name: str, text: str) -> tuple[str, ...]:
    try:
        alias = Alias.from_json(name, text)
    except AliasError:
        return ()
    return (*(part for url in alias.urls for part in url_secrets(url)), *([alias.config] if alias.config else []))


def allows_raw_urls(configs: Mapping[str, Any]) -> bool:
    return str(configs.get(RAW_URL_POLICY) or "").strip().lower() in _TRUE


def resolve_targets(target: Any, configs: Mapping[str, Any]) -> list[Target]:
    """``target`` (an alias, a raw URL, or a list of them; none: the ``default`` alias) as Targets."""
    stored = aliases_of(configs)
    if target is None or target == "" or target == []:
        if DEFAULT_ALIAS not in stored:
            raise TargetError(_no_target(stored), "config" if not stored else "recoverable")
        entries = [DEFAULT_ALIAS]
    elif isinstance(target, str):
        entries = [target]
    elif isinstance(target, list) and target and all(isinstance(t, str) and t.strip() for t in target):
        entries = list(dict.fromkeys(target))
    else:
        raise TargetError("target must be an alias (such as ops), a list of aliases or an Apprise URL")
    return [_target(entry.strip(), stored, configs) for entry in entries]


def _no_target(stored: Mapping[str, str]) -> str:
    if stored:
        return f"no target given and no alias named {DEFAULT_ALIAS!r}; pass target, one of: {', '.join(sorted(stored))}"
    return (
        "no notify target is configured for this role: an admin adds one with "
        "'skillyard notify alias set NAME URL --role ROLE'"
    )


def _target(entry: str, stored: Mapping[str, str], configs: Mapping[str, Any]) -> Target:
    if "://" in entry:
        if not allows_raw_urls(configs):
            known = ", ".join(sorted(stored))
            hint = f"use an alias ({known})" if known else "ask an admin to set an alias"
            raise TargetError(
                f"raw Apprise URLs are not allowed for this role: {hint}; an admin may allow them with "
                "'skillyard config set notify allow_raw_urls=true --role ROLE'",
                "recoverable" if known else "config",
            )
        return _raw(entry)
    name = entry.lower()
    if name not in stored:
        known = ", ".join(sorted(stored)) or "none (an admin adds them with skillyard notify alias set)"
        raise TargetError(f"target {entry!r} is not a notify alias of this role; known aliases: {known}")
    return _alias(name, stored[name])


@functools.lru_cache(maxsize=TARGETS_CACHED)
def _raw(url: str) -> Target:
    server = apprise.Apprise.instantiate(url, asset=asset())
    if server is None:
        scheme = urlsplit(url).scheme or url.split("://", 1)[0]
        raise TargetError(
            f"target {mask(url)} is not a usable Apprise URL (unknown scheme {scheme!r} or a malformed URL); "
            "check it against https://github.com/caronc/apprise/wiki"
        )
    notifier = apprise.Apprise(asset=asset())
    notifier.add(server)
    label = str(server.url(privacy=True))  # type: ignore[no-untyped-call]  # Apprise's privacy form: no secret
    return Target(label, notifier, (), tuple(url_secrets(url)))


@functools.lru_cache(maxsize=TARGETS_CACHED)
def _alias(name: str, text: str) -> Target:
    try:
        alias = Alias.from_json(name, text)
    except AliasError as exc:
        raise TargetError(str(exc), "config") from None
    notifier = apprise.Apprise(asset=asset())
    secrets: list[str] = []
    for url in alias.urls:
        server = apprise.Apprise.instantiate(url, asset=asset())
        if server is None:
            raise TargetError(
                f"alias {alias.name!r} holds a URL Apprise cannot use; an admin must set the alias again", "config"
            )
        notifier.add(server)
        secrets += url_secrets(url)
    if alias.config:
        config = apprise.AppriseConfig(asset=asset(), recursion=0)  # no include: of other (remote) configs
        if not config.add_config(alias.config):
            raise TargetError(f"alias {alias.name!r} holds a config Apprise cannot read; set it again", "config")
        notifier.add(config)
        secrets.append(alias.config)
    return Target(alias.name, notifier, alias.tags, tuple(secrets))


def mask(url: str) -> str:
    """A raw URL as errors show it: scheme and host only."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}/…"


def servers(target: Target) -> list[Any]:
    """The Apprise plugin objects a target notifies (a config's loaded too), redirects switched off on each."""
    found = [server for server in target.notifier if not target.tags or server.tags & set(target.tags)]
    for server in found:
        server.redirects = False  # a URL's own ?redirect=yes does not override the platform
    return found


async def guard_hosts(target: Target, allow_private: bool) -> None:
    """Refuse a target that would connect to a host that is not public (see the module docstring)."""
    for server in servers(target):
        if "host" not in getattr(server, "template_tokens", {}):
            continue
        hosts = dict.fromkeys((getattr(server, "host", None), getattr(server, "smtp_host", None)))
        for host in [h for h in hosts if h]:
            try:
                await checked_addresses(str(host), getattr(server, "port", None), allow_private, "notified")
            except RefusedDestination as exc:
                raise TargetError(f"target {target.label}: {exc}") from None
