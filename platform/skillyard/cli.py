"""The ``skillyard`` command line. Docs: docs/cli.md.  Example: skillyard run hello --input '{"who": "Ada"}'"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from .catalog.describe import describe_entry, describe_skill
from .errors import DuplicateRegistration, SkillyardError, UnknownSkill
from .plugins import load_plugins, plugin_table

T = TypeVar("T")


def _arun(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def _json_arg(value: str | None, what: str) -> Any:
    """Parse ``--input``/``--context``: inline JSON or ``@file``; errors exit 2 with the fix."""
    if value is None:
        return None
    text = value
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            text = path.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise click.UsageError(f"--{what}: cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise click.UsageError(
                f"--{what}: {path} is not UTF-8 text (byte {exc.start}); save the JSON file as UTF-8"
            ) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise click.UsageError(
            f'--{what} is not valid JSON ({exc}); pass an object such as \'{{"key": "value"}}\' or @file.json'
        ) from None
    if not isinstance(data, dict):
        raise click.UsageError(f"--{what} must be a JSON object, not {type(data).__name__}")
    return data


def _print_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def _table(rows: list[list[str]], headers: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        click.echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


skills_dir_option = click.option(
    "--skills-dir",
    "skills_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of skills (repeatable); searched before SKILLYARD_SKILLS_PATH.",
)


def _yard(skills_dirs: tuple[Path, ...], include_builtin: bool = True) -> Any:
    from .yard import SkillYard

    try:
        return SkillYard(skills_dirs=list(skills_dirs), include_builtin=include_builtin)
    except SkillyardError as exc:
        raise click.UsageError(str(exc)) from None


class SkillyardGroup(click.Group):
    """A click group where a plugin command can never silently replace another command."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        name = name or cmd.name
        existing = self.commands.get(name or "")
        if existing is not None and existing is not cmd:
            raise DuplicateRegistration(
                f"a plugin tried to add the command {name!r}, which already exists; give the plugin's command "
                "another name"
            )
        super().add_command(cmd, name)


@click.group(cls=SkillyardGroup)
@click.version_option(package_name="skillyard", prog_name="skillyard")
@click.option("-v", "--verbose", count=True, help="Log more to stderr (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """skillyard: drop skill folders in, run them. Docs: docs/cli.md

    Example: skillyard run hello --skills-dir examples --input '{"who": "Ada"}'
    """
    logging.basicConfig(
        stream=sys.stderr,
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)],
        format="%(levelname)s %(name)s: %(message)s",
    )


@cli.command(name="list")
@skills_dir_option
@click.option("--no-builtin", is_flag=True, help="Leave out the built-in skills.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: one object per skill folder.")
def list_cmd(skills_dirs: tuple[Path, ...], no_builtin: bool, as_json: bool) -> None:
    """List every skill folder found, with warnings and errors."""
    yard = _yard(skills_dirs, not no_builtin)
    items = [describe_entry(e) for e in yard.entries]
    if as_json:
        _print_json(items)
        return
    rows = []
    for it in items:
        state = "error" if it["error"] else ("shadowed" if not it["active"] else ("ok" if it["available"] else "gated"))
        rows.append(
            [
                it["name"],
                it["skill_type"],
                it["exec_type"] or "-",
                state,
                str(len(it["warnings"])),
                (it["description"] or "")[:60],
            ]
        )
    _table(rows, ["NAME", "TYPE", "EXEC", "STATE", "WARN", "DESCRIPTION"])
    for it in items:
        if it["error"]:
            click.echo(f"error   {it['name']} ({it['dir']}): {it['error']}", err=True)
        for w in it["warnings"]:
            click.echo(f"warning {it['name']}: {w}", err=True)
        for d in it["shadowed"]:
            click.echo(f"note    {it['name']} shadows {d}", err=True)


@cli.command()
@click.argument("name")
@skills_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(name: str, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Show one skill: manifest, exposed input schema, tool names, warnings."""
    yard = _yard(skills_dirs)
    try:
        skill = yard.skill(name)
    except UnknownSkill as exc:
        raise click.UsageError(str(exc)) from None
    entry = next(e for e in yard.entries if e.skill.dir == skill.dir and e.active)
    info = describe_skill(entry)
    if as_json:
        _print_json(info)
        return
    for key in (
        "name",
        "description",
        "dir",
        "skill_type",
        "exec_type",
        "category",
        "trigger_type",
        "exposed",
        "available",
        "aliases",
    ):
        click.echo(f"{key + ':':15} {info[key]}")
    click.echo("tools:")
    for tool in info["tools"]:
        click.echo(f"  {tool['name']}: {json.dumps(tool['input_schema'], ensure_ascii=False)}")
    for w in info["warnings"]:
        click.echo(f"warning: {w}")
    if info["error"]:
        click.echo(f"error: {info['error']}")


@cli.command()
@click.option("--all", "include_all", is_flag=True, help="Include the built-in plugins.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plugins(include_all: bool, as_json: bool) -> None:
    """List loaded plugins and the hooks each implements."""
    rows = plugin_table(include_builtin=include_all)
    if as_json:
        _print_json(rows)
        return
    if not rows:
        click.echo("no plugins installed (use --all to see the built-in ones)")
        return
    _table([[r["name"], ", ".join(r["hooks"])] for r in rows], ["PLUGIN", "HOOKS"])


@cli.command()
@click.argument("name")
@click.option("--input", "input_", help="Input as JSON, or @file.json.")
@click.option("--context", "context", help="runtime_context fields as JSON, or @file.json.")
@skills_dir_option
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), help="Working folder for the run.")
@click.option("--session", "session", help="Session id: its workspace and attachments (img_1, file_1, …).")
@click.option(
    "--attach",
    "attach",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Register a file as a session attachment before the run (repeatable; needs --session).",
)
def run(
    name: str,
    input_: str | None,
    context: str | None,
    skills_dirs: tuple[Path, ...],
    workspace: Path | None,
    session: str | None,
    attach: tuple[Path, ...],
) -> None:
    """Run a skill (name, alias or tool name) and print its envelope as JSON."""
    data = _json_arg(input_, "input") or {}
    ctx = _json_arg(context, "context") or {}
    if workspace is not None:
        try:
            workspace.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise click.UsageError(
                f"--workspace {workspace}: the folder cannot be created ({exc.strerror or exc}); give another path"
            ) from None
        ctx["workspace_dir"] = str(workspace.resolve())
    if session is not None:
        from .invoke.pipeline import check_session_id

        try:
            check_session_id(session)  # an empty or unsafe id is a mistake, never "no session"
        except SkillyardError as exc:
            raise click.UsageError(str(exc)) from None
        ctx["session_id"] = session
    if attach and not ctx.get("session_id"):
        raise click.UsageError("--attach needs --session ID: attachments belong to a session")
    yard = _yard(skills_dirs)

    async def go() -> dict[str, Any]:
        async with yard:
            if attach:
                for item in await yard.attach(ctx["session_id"], list(attach)):
                    click.echo(f"attached {item['ref']}: {item['local_path']}", err=True)
            return await yard.run(name, data, context=ctx)  # type: ignore[no-any-return]

    try:
        envelope = _arun(go())
    except SkillyardError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(json.dumps(envelope, ensure_ascii=False))
    sys.exit(0 if envelope.get("ok") else 1)


@cli.command()
@click.option("--session", "session", required=True, help="Session id.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: one object per attachment.")
def artifacts(session: str, as_json: bool) -> None:
    """List a session's attachments: uploads and the files its skills produced."""
    yard = _yard(())

    async def go() -> list[dict[str, Any]]:
        async with yard:
            from .invoke.pipeline import check_session_id

            check_session_id(session)
            return [a.as_dict() for a in await yard.attachments.for_session(session)]

    try:
        items = _arun(go())
    except SkillyardError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        _print_json(items)
    elif not items:
        click.echo(f"session {session!r} has no attachments")
    else:
        _table(
            [
                [
                    i["ref"],
                    i["type"],
                    i["filename"],
                    str(i["size"] or ""),
                    i["skill"] or "(upload)",
                    i["local_path"] or i["url"] or "",
                ]
                for i in items
            ],
            ["REF", "TYPE", "FILENAME", "SIZE", "SKILL", "PATH"],
        )


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def validate(paths: tuple[Path, ...], as_json: bool) -> None:
    """Lint skill folders against the pre-release checklist; exit 1 on errors."""
    from .catalog.validate import validate_paths

    reports = validate_paths(list(paths))
    if as_json:
        _print_json(reports)
    else:
        for rep in reports:
            click.echo(
                f"{rep['name']} ({rep['dir']}): {len(rep['errors'])} error(s), {len(rep['warnings'])} warning(s)"
            )
            for e in rep["errors"]:
                click.echo(f"  error:   {e}")
            for w in rep["warnings"]:
                click.echo(f"  warning: {w}")
        if not reports:
            click.echo("no skill folders found under the given paths")
    sys.exit(1 if any(r["errors"] for r in reports) or not reports else 0)


@cli.command()
@skills_dir_option
@click.option("--json", "as_json", is_flag=True, help='Print JSON: {"status": worst status, "checks": [...]}.')
def doctor(skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Check the home folder, the database, the skills and each plugin; exit 1 when a check fails."""
    from .doctor import run_checks, worst

    try:
        checks = _arun(run_checks(skills_dirs))
    except SkillyardError as exc:
        raise click.UsageError(str(exc)) from None
    status = worst(checks)
    if as_json:
        _print_json({"status": status, "checks": checks})
    else:
        for c in checks:
            fix = f" — fix: {c['fix']}" if c["fix"] and c["status"] != "ok" else ""
            click.echo(f"{c['status']:<4}  {c['name']}: {c['detail']}{fix}")
        counts = {s: sum(c["status"] == s for c in checks) for s in ("ok", "warn", "fail")}
        click.echo(f"{counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail")
    sys.exit(1 if status == "fail" else 0)


@cli.group()
def config() -> None:
    """Per-role skill configs (secrets are encrypted at rest)."""


@config.command(name="set")
@click.argument("skill")
@click.argument("pairs", nargs=-1, required=True)
@click.option("--role", default="", envvar="SKILLYARD_ROLE", help="Role id (default: the default role '').")
def config_set(skill: str, pairs: tuple[str, ...], role: str) -> None:
    """Store KEY=VALUE configs for a skill."""
    values = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"{pair!r} is not KEY=VALUE; write e.g. api_token=abc123")
        values[key] = value
    yard = _yard(())

    async def go() -> dict[str, bool]:
        async with yard:
            return await yard.configs.set(role, skill, values)  # type: ignore[no-any-return]

    try:
        stored = _arun(go())
    except SkillyardError as exc:
        raise click.UsageError(str(exc)) from None
    for key, secret in stored.items():
        click.echo(f"set {skill}.{key}" + (" (secret, encrypted)" if secret else ""))


@config.command(name="list")
@click.argument("skill")
@click.option("--role", default="", envvar="SKILLYARD_ROLE", help="Role id.")
def config_list(skill: str, role: str) -> None:
    """Show the config keys of a skill (secret values masked)."""
    from .catalog.schema import looks_secret

    yard = _yard(())

    async def go() -> dict[str, str]:
        async with yard:
            await yard.database.engine()
            return await yard.configs.get(role, skill)  # type: ignore[no-any-return]

    for key, value in sorted(_arun(go()).items()):
        click.echo(f"{key} = {'********' if looks_secret(key) else value}")


@config.command(name="unset")
@click.argument("skill")
@click.argument("keys", nargs=-1)
@click.option("--role", default="", envvar="SKILLYARD_ROLE", help="Role id.")
def config_unset(skill: str, keys: tuple[str, ...], role: str) -> None:
    """Remove some (or all) config keys of a skill."""
    yard = _yard(())

    async def go() -> int:
        async with yard:
            return await yard.configs.unset(role, skill, list(keys))  # type: ignore[no-any-return]

    click.echo(f"removed {_arun(go())} key(s)")


def main() -> None:
    """Console-script entry: plugin commands are added before click parses."""
    pm = load_plugins()
    pm.hook.register_commands(cli=cli)
    try:
        cli(standalone_mode=True)
    except SkillyardError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
