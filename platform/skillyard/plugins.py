"""The plugin manager: built-in plugins, entry points and the SKILLYARD_LOAD_PLUGINS allow-list."""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Awaitable, Callable
from importlib.metadata import entry_points
from typing import Any, TypeVar

import pluggy

from . import hookspecs

T = TypeVar("T")

#: Built-in behaviour, registered through the same manager and hooks as any third-party plugin.
DEFAULT_PLUGINS = (
    "skillyard.executors.inprocess",
    "skillyard.executors.subprocess",
    "skillyard.executors.sandbox",
    "skillyard.executors.http",
    "skillyard.executors.mcp",
    "skillyard.executors.unsupported",
    "skillyard.catalog.builtin_root",
    "skillyard.outputs.processors",
    "skillyard.builtin_skills.datatable.plugin",
    "skillyard.agent.plugin",
    "skillyard.chains.plugin",
    "skillyard.directory.plugin",
    "skillyard.mcp.plugin",
    "skillyard.tokens.plugin",
    "skillyard.service.plugin",
    "skillyard.channels.plugin",
    "skillyard.channels.feishu",
    "skillyard.channels.wecom",
    "skillyard.channels.dingtalk",
    "skillyard.channels.telegram",
    "skillyard.channels.slack",
    "skillyard.channels.webhook",
    "skillyard.channels.web",
    "skillyard.builtin_skills.notify.plugin",
    "skillyard.agent.models.scripted",
    "skillyard.agent.models.openai",
)

pm = pluggy.PluginManager("skillyard")
pm.add_hookspecs(hookspecs)

_loaded = False
_versions: dict[str, str] = {}


def load_plugins() -> pluggy.PluginManager:
    """Register the default plugins and the allowed entry-point plugins once (idempotent, lazy)."""
    global _loaded
    if _loaded:
        return pm
    _loaded = True
    for module_name in DEFAULT_PLUGINS:
        module = importlib.import_module(module_name)
        if not pm.is_registered(module):
            pm.register(module, name=module_name)
    allowed = os.environ.get("SKILLYARD_LOAD_PLUGINS")
    allow = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
    for ep in entry_points(group="skillyard"):
        if allow is not None and ep.name not in allow:
            continue
        if pm.get_plugin(ep.name) is None:
            pm.register(ep.load(), name=ep.name)
            if ep.dist is not None:
                _versions[ep.name] = ep.dist.version
    return pm


def is_builtin(plugin_name: str) -> bool:
    """True for the modules in DEFAULT_PLUGINS."""
    return plugin_name in DEFAULT_PLUGINS


async def await_me_maybe(value: T | Callable[[], Any] | Awaitable[T]) -> Any:
    """Resolve what a hook returned: a value, a callable (called) or an awaitable (awaited)."""
    if callable(value):
        value = value()
    if inspect.isawaitable(value):
        value = await value
    return value


def plugin_table(include_builtin: bool = False) -> list[dict[str, Any]]:
    """Describe the loaded plugins and the hooks each implements, for ``skillyard plugins``."""
    load_plugins()
    rows = []
    for name, plugin in pm.list_name_plugin():
        if not include_builtin and is_builtin(name):
            continue
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])
        rows.append({"name": name, "hooks": hooks, "builtin": is_builtin(name), "version": _versions.get(name)})
    return rows
