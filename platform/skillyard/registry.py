"""Registries filled through the registration hooks: exec types, result processors, commands, model providers.

The host owns the ``register`` callbacks, so it can validate names, reject duplicates with a message that
names both plugins, and remember which plugin registered what.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pluggy

from .errors import DuplicateRegistration, UnknownExecType


class Executor(Protocol):
    """What an exec-type plugin registers."""

    async def run(self, skill: Any, input: dict[str, Any], ctx: dict[str, Any], *, yard: Any) -> Any: ...


@dataclass(frozen=True)
class ResultProcessor:
    """One step of the result post-processing chain."""

    order: int
    name: str
    plugin: str
    func: Callable[..., Any]


@dataclass(frozen=True)
class ModelProvider:
    """A chat-model provider: the spec prefix it answers, its factory and how a session stores its specs."""

    prefix: str
    factory: Callable[[str, Callable[[], Any]], Any]  # (rest of the spec, settings getter) -> ChatModel
    help: str
    plugin: str
    stored: Callable[[str], str] | None = None


@dataclass
class Registries:
    """Exec types and result processors, as registered by the loaded plugins."""

    exec_types: dict[str, Executor] = field(default_factory=dict)
    exec_type_plugins: dict[str, str] = field(default_factory=dict)
    processors: list[ResultProcessor] = field(default_factory=list)
    has_extra_context: bool = False

    def executor(self, exec_type: str, where: str) -> Executor:
        """The executor for ``exec_type``; ``where`` names the skill for the error message."""
        try:
            return self.exec_types[exec_type]
        except KeyError:
            known = ", ".join(sorted(self.exec_types))
            raise UnknownExecType(
                f"{where} declares exec type {exec_type!r}; known: {known}. "
                "Fix exec.primary.type in its frontmatter or install the plugin that provides it."
            ) from None


def call_per_plugin(pm: pluggy.PluginManager, hook_name: str, make_kwargs: Callable[[str], dict[str, Any]]) -> None:
    """Call a hook through pluggy once per implementing plugin, so each call knows its plugin's name."""
    caller = getattr(pm.hook, hook_name)
    plugins = [impl.plugin for impl in caller.get_hookimpls()]
    for impl in reversed(caller.get_hookimpls()):  # pluggy calls last-registered first; keep that order
        others = [p for p in plugins if p is not impl.plugin]
        pm.subset_hook_caller(hook_name, remove_plugins=others)(**make_kwargs(impl.plugin_name))


def collect_registries(pm: pluggy.PluginManager) -> Registries:
    """Ask every plugin for its exec types and result processors; fail on duplicates."""
    reg = Registries()
    processor_at: dict[int, ResultProcessor] = {}

    def exec_register(plugin: str) -> dict[str, Any]:
        def register(name: str, executor: Executor) -> None:
            key = name.upper()
            if key in reg.exec_types:
                raise DuplicateRegistration(
                    f"exec type {key!r} is registered by both {reg.exec_type_plugins[key]!r} and {plugin!r}; "
                    "unregister one of them (SKILLYARD_LOAD_PLUGINS restricts which plugins load)."
                )
            reg.exec_types[key] = executor
            reg.exec_type_plugins[key] = plugin

        return {"register": register}

    def processor_register(plugin: str) -> dict[str, Any]:
        def register(order: int, name: str, processor: Callable[..., Any]) -> None:
            if order in processor_at:
                first = processor_at[order]
                raise DuplicateRegistration(
                    f"result processors {first.name!r} ({first.plugin}) and {name!r} ({plugin}) both use order "
                    f"{order}; give one of them a free order number."
                )
            processor_at[order] = ResultProcessor(order, name, plugin, processor)

        return {"register": register}

    call_per_plugin(pm, "register_exec_types", exec_register)
    call_per_plugin(pm, "register_result_processors", processor_register)
    reg.processors = [processor_at[k] for k in sorted(processor_at)]
    reg.has_extra_context = bool(pm.hook.extra_context.get_hookimpls())
    return reg


def collect_commands(pm: pluggy.PluginManager, make_kwargs: Callable[[str], dict[str, Any]]) -> None:
    """Ask every plugin for its CLI commands, one plugin at a time, so a clash names the plugin that caused it."""
    call_per_plugin(pm, "register_commands", make_kwargs)


def collect_models(pm: pluggy.PluginManager) -> dict[str, ModelProvider]:
    """Ask every plugin for its chat-model providers; a prefix registered twice fails naming both plugins."""
    found: dict[str, ModelProvider] = {}

    def models_register(plugin: str) -> dict[str, Any]:
        def register(
            prefix: str,
            factory: Callable[[str, Callable[[], Any]], Any],
            *,
            help: str = "",
            stored: Callable[[str], str] | None = None,
        ) -> None:
            if not isinstance(prefix, str) or not prefix or ":" in prefix:
                raise DuplicateRegistration(
                    f"plugin {plugin!r} registered the model prefix {prefix!r}; a prefix is a word without ':' "
                    "(specs are PREFIX:REST)"
                )
            if prefix in found:
                raise DuplicateRegistration(
                    f"model prefix {prefix!r} is registered by both {found[prefix].plugin!r} and {plugin!r}; "
                    "unregister one of them (SKILLYARD_LOAD_PLUGINS restricts which plugins load)."
                )
            found[prefix] = ModelProvider(prefix, factory, help, plugin, stored)

        return {"register": register}

    call_per_plugin(pm, "register_models", models_register)
    return found


#: A background job handler (``register_jobs``): ``async def (yard, **arguments) -> None``.
JobHandler = Callable[..., Awaitable[None]]


def collect_jobs(pm: pluggy.PluginManager) -> dict[str, JobHandler]:
    """Ask every plugin for its background job kinds; a name registered twice fails naming both plugins."""
    found: dict[str, tuple[str, JobHandler]] = {}

    def jobs_register(plugin: str) -> dict[str, Any]:
        def register(name: str, handler: JobHandler) -> None:
            if not isinstance(name, str) or not name or not callable(handler):
                raise DuplicateRegistration(f"plugin {plugin!r} registered job {name!r}: give a name and a handler")
            if name in found:
                raise DuplicateRegistration(
                    f"job {name!r} is registered by both {found[name][0]!r} and {plugin!r}; unregister one of them"
                )
            found[name] = (plugin, handler)

        return {"register": register}

    call_per_plugin(pm, "register_jobs", jobs_register)
    return {name: handler for name, (_plugin, handler) in found.items()}
