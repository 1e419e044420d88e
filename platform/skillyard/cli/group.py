"""The root click group: built-in commands, plus every plugin's, added when the group is first used.

Plugins add commands through ``register_commands(cli)`` (docs/hooks.md) in two forms: a click command object
(``cli.add_command``), or a name and an import path (``cli.add_lazy_command``, click's lazy-group pattern), whose
module is imported only when that command runs, so ``skillyard --help`` lists every command without importing
them. The group collects the plugins' commands whenever the set of registered plugins has changed, so a
``CliRunner().invoke(cli, …)`` sees the same commands as the console script.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import click
from click.utils import make_default_short_help

from ..errors import DuplicateRegistration, SkillyardError


class CommandProblem(click.ClickException):
    """A library error at the CLI's edge: ``Error: …`` on stderr and exit 2, never a traceback."""

    exit_code = 2


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a SkillyardError raised while parsing or running a command into a CommandProblem."""
    try:
        yield
    except SkillyardError as exc:
        raise CommandProblem(str(exc)) from None


@dataclass(frozen=True)
class LazyCommand:
    """A command known by name and import path (``package.module:attribute``) until it runs."""

    name: str
    import_path: str
    help: str
    plugin: str | None

    def load(self) -> click.Command:
        module_name, _, attribute = self.import_path.partition(":")
        who = f"plugin {self.plugin!r}" if self.plugin else "a plugin"
        try:
            command = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise CommandProblem(
                f"the command {self.name!r} of {who} cannot be loaded from {self.import_path!r} ({exc}); "
                "fix the plugin or uninstall it"
            ) from None
        if not isinstance(command, click.Command):
            raise CommandProblem(
                f"{who} registered {self.import_path!r} as the command {self.name!r}, but it is a "
                f"{type(command).__name__}, not a click command; fix the plugin"
            )
        return command


class SkillyardGroup(click.Group):
    """A click group where a plugin command can never silently replace another command."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, LazyCommand] = {}
        self.owners: dict[str, str] = {}  # command name -> the plugin whose register_commands added it
        self._builtin: frozenset[str] | None = None  # None until seal_builtin: no plugin is asked before
        self._plugins_seen: frozenset[object] | None = None
        self._registering: str | None = None
        self._collecting = False

    def seal_builtin(self) -> None:
        """Mark the commands added so far as the built-in ones (they survive every re-collection)."""
        self._builtin = frozenset(self.commands)

    # registration -------------------------------------------------------------------------------------
    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        name = name or cmd.name or ""
        self.collect_plugin_commands()
        existing = self.commands.get(name)
        if name in self.lazy or (existing is not None and not _same_definition(existing, cmd)):
            raise DuplicateRegistration(self._clash(name))
        super().add_command(cmd, name)
        if self._registering:
            self.owners[name] = self._registering

    def add_lazy_command(self, name: str, import_path: str, help: str = "") -> None:
        """Add a command by name and ``module:attribute`` path; its module is imported when the command runs."""
        if not name or ":" not in import_path:
            raise SkillyardError(
                f"add_lazy_command needs a name and a 'package.module:attribute' path, got {name!r} and "
                f"{import_path!r}; fix the plugin"
            )
        self.collect_plugin_commands()
        known = self.lazy.get(name)
        if known is not None and known.import_path == import_path:
            return  # the same registration again (a hook called twice)
        if known is not None or name in self.commands:
            raise DuplicateRegistration(self._clash(name))
        self.lazy[name] = LazyCommand(name, import_path, help, self._registering)
        if self._registering:
            self.owners[name] = self._registering

    def _clash(self, name: str) -> str:
        owner = self.owners.get(name) or ("skillyard" if name in (self._builtin or ()) else "another plugin")
        who = f"the plugin {self._registering!r}" if self._registering else "a plugin"
        return (
            f"{who} tried to add the command {name!r}, which already exists (added by {owner}); give the plugin's "
            "command another name"
        )

    def collect_plugin_commands(self) -> None:
        """Ask every plugin for its commands again when plugins were registered or removed since the last time."""
        if self._collecting or self._builtin is None:
            return
        from ..plugins import load_plugins
        from ..registry import collect_commands

        pm = load_plugins()
        plugins = frozenset(pm.get_plugins())
        if plugins == self._plugins_seen:
            return
        self._collecting = True
        try:
            for name in list(self.owners):
                self.commands.pop(name, None)
                self.lazy.pop(name, None)
            self.owners.clear()
            self._plugins_seen = plugins

            def registering(plugin: str) -> dict[str, Any]:
                self._registering = plugin
                return {"cli": self}

            collect_commands(pm, registering)
        except BaseException:
            self._plugins_seen = None  # a failed collection is tried again on the next use
            raise
        finally:
            self._registering = None
            self._collecting = False

    # lookup -------------------------------------------------------------------------------------------
    def list_commands(self, ctx: click.Context) -> list[str]:
        self.collect_plugin_commands()
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self.collect_plugin_commands()
        lazy = self.lazy.get(cmd_name)
        if lazy is not None and cmd_name not in self.commands:
            self.commands[cmd_name] = lazy.load()
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, with a lazy command's registered help (its module stays unimported)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:
                rows.append((name, make_default_short_help(self.lazy[name].help, limit)))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    # errors at the edge -------------------------------------------------------------------------------
    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with user_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with user_errors():
            return super().invoke(ctx)


def _same_definition(old: click.Command, new: click.Command) -> bool:
    """The same command object, or the same code defining it again (a plugin whose hook ran twice)."""
    if old is new:
        return True
    old_code = getattr(old.callback, "__code__", None)
    return old_code is not None and old_code is getattr(new.callback, "__code__", None)
