"""What every ``skillyard`` command shares: JSON options, tables for people, JSON for programs, a host to run in.

Plugin commands may use these too (docs/hooks.md, ``register_commands``): their output then looks like ours.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import wcwidth

from ..errors import SkillyardError

if TYPE_CHECKING:
    from ..yard import SkillYard

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run one command's async work; a SkillyardError becomes a usage error (exit 2) with its message."""
    import asyncio  # here: --help and --version need no event loop

    try:
        return asyncio.run(coro)
    except SkillyardError as exc:
        raise click.UsageError(str(exc)) from None


def json_object(value: str | None, option: str) -> dict[str, Any] | None:
    """Parse a JSON-object option (``--input``, ``--context``): inline JSON or ``@file``; errors exit 2 with the fix."""
    if value is None:
        return None
    text = value
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            text = path.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise click.UsageError(f"--{option}: cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise click.UsageError(
                f"--{option}: {path} is not UTF-8 text (byte {exc.start}); save the JSON file as UTF-8"
            ) from None
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise click.UsageError(
            f'--{option} is not valid JSON ({exc}); pass an object such as \'{{"key": "value"}}\' or @file.json'
        ) from None
    except RecursionError:
        raise click.UsageError(f"--{option} is nested too deeply to read; send flatter JSON") from None
    if not isinstance(data, dict):
        raise click.UsageError(f"--{option} must be a JSON object, not {type(data).__name__}")
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise click.UsageError(
            f"--{option} contains {exc.object[exc.start : exc.end]!r}, half of a surrogate pair that is no text; "
            "send valid Unicode (escape the whole character, e.g. \\ud83d\\ude00)"
        ) from None
    except RecursionError:  # parsed, yet deeper than the encoder goes
        raise click.UsageError(f"--{option} is nested too deeply to read; send flatter JSON") from None
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def print_json(value: Any) -> None:
    """JSON for programs: indented, non-ASCII kept."""
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def print_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], *, err: bool = False) -> None:
    """A table for people, its columns aligned by display width (a Chinese name takes two columns a character)."""
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(wcwidth.width(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        line = "  ".join(wcwidth.ljust(c, w) for c, w in zip(row, widths, strict=True))
        click.echo(line.rstrip(), err=err)


UNTRUSTED_DIRS = "skillyard.untrusted_skills_dirs"  # click context meta: the --untrusted-skills-dir folders


def _keep_untrusted(ctx: click.Context, _param: click.Parameter, value: tuple[Path, ...]) -> None:
    ctx.meta[UNTRUSTED_DIRS] = value


def skills_dir_option(
    help: str = "Folder of skills (repeatable); searched before SKILLYARD_SKILLS_PATH.",
) -> Callable[[F], F]:
    """``--skills-dir DIR`` and ``--untrusted-skills-dir DIR`` (both repeatable), as every command that reads skills
    spells them. The untrusted folders reach :func:`open_yard` through the click context."""
    trusted = click.option(
        "--skills-dir",
        "skills_dirs",
        multiple=True,
        type=click.Path(file_okay=False, path_type=Path),
        help=help,
    )
    untrusted = click.option(
        "--untrusted-skills-dir",
        multiple=True,
        type=click.Path(file_okay=False, path_type=Path),
        expose_value=False,
        callback=_keep_untrusted,
        help="Folder of skills from elsewhere (repeatable): its in-process Python skills run in the sandbox.",
    )

    def apply(f: F) -> F:
        return trusted(untrusted(f))

    return apply


def open_yard(skills_dirs: Sequence[Path] = (), include_builtin: bool = True) -> SkillYard:
    """A host over the given roots (and the command's ``--untrusted-skills-dir`` folders); a root that is not a
    folder is a usage error."""
    from ..yard import SkillYard

    ctx = click.get_current_context(silent=True)
    untrusted = list(ctx.meta.get(UNTRUSTED_DIRS, ())) if ctx is not None else []
    try:
        return SkillYard(
            skills_dirs=list(skills_dirs), untrusted_skills_dirs=untrusted, include_builtin=include_builtin
        )
    except SkillyardError as exc:
        raise click.UsageError(str(exc)) from None


def in_yard(skills_dirs: Sequence[Path], work: Callable[[SkillYard], Coroutine[Any, Any, T]]) -> T:
    """Open a host, run ``work(yard)`` inside it and close it: the shape of every command that touches storage."""
    yard = open_yard(skills_dirs)

    async def go() -> T:
        async with yard:
            return await work(yard)

    return run_async(go())
