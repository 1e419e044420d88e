"""PYTHON exec type: the entry function called in-process (async awaited, sync in a worker thread)."""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..catalog.code import ENTRY_NAMES
from ..credentials import masked_logger
from ..envelope import failure
from ..hookspecs import hookimpl
from .loader import load_entry_module
from .sandbox import sandbox_settings
from .subprocess import OutputLimits, run_subprocess

if TYPE_CHECKING:
    from ..catalog.skill import Skill

log = masked_logger("skillyard.inprocess")


def entry_function(skill: Skill) -> Callable[..., Any]:
    """The skill's entry function, importing its module on first use (per version of its files)."""
    assert skill.exec.config is not None
    module = load_entry_module(skill.dir, skill.exec.config, skill.version)
    for name in ENTRY_NAMES:
        fn = getattr(module, name, None)
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    raise AttributeError(f"{skill.exec.config} has no entry function ({', '.join(ENTRY_NAMES)})")


def required_positional(fn: Callable[..., Any]) -> int:
    """How many positional parameters have no default (§2.3 binds by this count)."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = inspect.signature(fn).parameters.values()
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


@dataclass(frozen=True)
class _Entry:
    fn: Callable[..., Any]
    arity: int
    is_async: bool


#: Per Skill object (a new object per version of its files), so the hot path is one dictionary lookup.
_entries: weakref.WeakKeyDictionary[Skill, _Entry] = weakref.WeakKeyDictionary()


def _entry(skill: Skill) -> _Entry:
    found = _entries.get(skill)
    if found is None:
        fn = entry_function(skill)
        found = _entries[skill] = _Entry(fn, required_positional(fn), inspect.iscoroutinefunction(fn))
    return found


async def _run_untrusted(skill: Skill, input: dict[str, Any], ctx: dict[str, Any], yard: Any) -> Any:
    """An in-process skill of an untrusted root never runs in the host process: its entry function is called in
    the sandbox, without ``db``, ``db_factory`` or ``call_skill`` (docs/sandbox.md)."""
    if skill.code.uses_db:
        return failure(
            skill.name,
            f"skill {skill.name!r} uses the database (ctx['db']), but its root {skill.root} is untrusted: an untrusted "
            "root's Python code runs in the sandbox, where there is no db, db_factory or call_skill; move the skill "
            "to a trusted root (--skills-dir) if you trust its author",
            error_type="config",
            non_retriable=True,
        )
    limits, sandbox = OutputLimits.of(yard), sandbox_settings(yard)
    entry = not skill.exec.python_cli and skill.code.entry is not None
    return await run_subprocess(
        skill, input, ctx, force_python_cli=not entry, limits=limits, sandbox=sandbox, entry=entry
    )


class InProcessExecutor:
    """Calls ``execute``/``run``/``handler``/``main``/``handle``: f(), f(input) or f(input, ctx)."""

    async def run(self, skill: Skill, input: dict[str, Any], ctx: dict[str, Any], *, yard: Any) -> Any:
        catalog = getattr(yard, "catalog", None)
        if catalog is not None and not catalog.trusted(skill):
            return await _run_untrusted(skill, input, ctx, yard)
        if skill.exec.python_cli:
            return await run_subprocess(skill, input, ctx, limits=OutputLimits.of(yard), sandbox=sandbox_settings(yard))
        try:
            return await self._call(skill, input, ctx)
        except SystemExit:  # also from importing: module-level argparse exits before any entry runs
            log.info("skill %r raised SystemExit in-process; running it as a CLI subprocess", skill.name)
            return await run_subprocess(
                skill, input, ctx, force_python_cli=True, limits=OutputLimits.of(yard), sandbox=sandbox_settings(yard)
            )

    async def _call(self, skill: Skill, input: dict[str, Any], ctx: dict[str, Any]) -> Any:
        entry = _entry(skill)
        fn, arity = entry.fn, entry.arity
        args = () if arity == 0 else (input,) if arity == 1 else (input, ctx)
        if entry.is_async:
            return await fn(*args)
        ctx["db"] = None  # a live session cannot cross into a worker thread
        result = await asyncio.to_thread(fn, *args)
        return await result if inspect.isawaitable(result) else result


@hookimpl
def register_exec_types(register: Any) -> None:
    register("PYTHON", InProcessExecutor())
