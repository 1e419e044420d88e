"""The built-in commands about skills and the installation: list, show, run, artifacts, validate, plugins, doctor."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import SkillyardError, UnknownSkill
from .output import json_object, open_yard, print_json, print_table, run_async, skills_dir_option


@click.command(name="list")
@skills_dir_option()
@click.option("--no-builtin", is_flag=True, help="Leave out the built-in skills.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: one object per skill folder.")
def list_cmd(skills_dirs: tuple[Path, ...], no_builtin: bool, as_json: bool) -> None:
    """List every skill folder found, with warnings and errors."""
    from ..catalog.describe import describe_entry
    from ..executors.sandbox import skill_tier

    yard = open_yard(skills_dirs, not no_builtin)
    items = [
        {
            **describe_entry(e),
            "trust": "trusted" if yard.catalog.trusted(e.skill) else "untrusted",
            "sandbox": skill_tier(e.skill, yard.settings.sandbox, yard.catalog.trusted(e.skill)),
        }
        for e in yard.entries
    ]
    for note in yard.catalog.warnings:
        click.echo(f"warning {note}", err=True)
    _mcp_notes(yard)
    if as_json:
        print_json(items)
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
    print_table(rows, ["NAME", "TYPE", "EXEC", "STATE", "WARN", "DESCRIPTION"])
    for it in items:
        if it["error"]:
            click.echo(f"error   {it['name']} ({it['dir']}): {it['error']}", err=True)
        for w in it["warnings"]:
            click.echo(f"warning {it['name']}: {w}", err=True)
        for d in it["shadowed"]:
            click.echo(f"note    {it['name']} shadows {d}", err=True)


def _mcp_notes(yard: Any) -> None:
    """One line per configured MCP server on stderr: its cached tools and their age, or how to fetch them."""
    for problem in yard.mcp.problems:
        click.echo(f"warning {problem}", err=True)
    for row in yard.mcp.status():
        if not row["fetched"]:
            click.echo(
                f"note    mcp server {row['server']}: not fetched yet (skillyard mcp refresh {row['server']})", err=True
            )
            continue
        age = f"{row['age_s']:.0f} s ago"
        click.echo(f"note    mcp server {row['server']}: {len(row['tools'])} tool(s), fetched {age}", err=True)
        for missing in row["missing"]:
            click.echo(f"warning mcp server {row['server']}: {missing} is allowed but not served", err=True)


@click.command()
@click.argument("name")
@skills_dir_option()
@click.option("--manual", is_flag=True, help="Print the skill's SKILL.md (its manual), whole.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(name: str, skills_dirs: tuple[Path, ...], manual: bool, as_json: bool) -> None:
    """Show one skill: manifest, exposed input schema, tool names, warnings."""
    from ..catalog.describe import describe_skill

    yard = open_yard(skills_dirs)
    try:
        skill = yard.skill(name)
    except UnknownSkill as exc:
        raise click.UsageError(str(exc)) from None
    if manual:
        _print_file(yard, skill.name, "SKILL.md", 0, whole=True, as_json=as_json)
        return
    entry = next(e for e in yard.entries if e.skill.dir == skill.dir and e.active)
    info = describe_skill(entry)
    if as_json:
        print_json(info)
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


@click.command()
@click.argument("name")
@click.argument("path")
@click.option(
    "--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Where to start (a next_offset)."
)
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON: {path, content, offset, next_offset, …}.")
def read(name: str, path: str, offset: int, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Print a file of a skill's folder (a reference it names), 40,000 characters a page."""
    yard = open_yard(skills_dirs)
    _print_file(yard, name, path, offset, whole=False, as_json=as_json)


def _print_file(yard: Any, name: str, path: str, offset: int, *, whole: bool, as_json: bool) -> None:
    """One page of a skill's file (``whole``: every page), as read_skill_file reads it; its errors exit 2."""
    pages = []
    try:
        while True:
            page = yard.read_skill_file(name, path, offset, siblings=True)
            pages.append(page)
            if not whole or page["next_offset"] is None:
                break
            offset = page["next_offset"]
    except SkillyardError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        joined = {**pages[-1], "content": "".join(p["content"] for p in pages), "offset": pages[0]["offset"]}
        print_json(joined if whole else pages[0])
        return
    click.echo("".join(p["content"] for p in pages), nl=False)
    last = pages[-1]
    if last["next_offset"] is not None:
        click.echo(
            f"\n[{last['total_chars'] - last['next_offset']} more characters: --offset {last['next_offset']}]", err=True
        )


@click.command()
@click.option("--all", "include_all", is_flag=True, help="Include the built-in plugins.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plugins(include_all: bool, as_json: bool) -> None:
    """List loaded plugins and the hooks each implements."""
    from ..plugins import plugin_table

    rows = plugin_table(include_builtin=include_all)
    if as_json:
        print_json(rows)
        return
    if not rows:
        click.echo("no plugins installed (use --all to see the built-in ones)")
        return
    print_table([[r["name"], ", ".join(r["hooks"])] for r in rows], ["PLUGIN", "HOOKS"])


@click.command()
@click.argument("name")
@click.option("--input", "input_", help="Input as JSON, or @file.json.")
@click.option("--context", "context", help="runtime_context fields as JSON, or @file.json.")
@skills_dir_option()
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
    data = json_object(input_, "input") or {}
    ctx = json_object(context, "context") or {}
    if workspace is not None:
        try:
            workspace.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise click.UsageError(
                f"--workspace {workspace}: the folder cannot be created ({exc.strerror or exc}); give another path"
            ) from None
        ctx["workspace_dir"] = str(workspace.resolve())
    if session is not None:
        from ..invoke.run import check_session_id

        try:
            check_session_id(session)  # an empty or unsafe id is a mistake, never "no session"
        except SkillyardError as exc:
            raise click.UsageError(str(exc)) from None
        ctx["session_id"] = session
    if attach and not ctx.get("session_id"):
        raise click.UsageError("--attach needs --session ID: attachments belong to a session")
    yard = open_yard(skills_dirs)

    async def go() -> dict[str, Any]:
        async with yard:
            if attach:
                for item in await yard.attach(ctx["session_id"], list(attach)):
                    click.echo(f"attached {item['ref']}: {item['local_path']}", err=True)
            return await yard.run(name, data, context=ctx)

    envelope = run_async(go())
    click.echo(json.dumps(envelope, ensure_ascii=False))
    sys.exit(0 if envelope.get("ok") else 1)


@click.command()
@click.option("--session", "session", required=True, help="Session id.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: one object per attachment.")
def artifacts(session: str, as_json: bool) -> None:
    """List a session's attachments: uploads and the files its skills produced."""
    yard = open_yard()

    async def go() -> list[dict[str, Any]]:
        async with yard:
            from ..invoke.run import check_session_id

            check_session_id(session)
            return [a.as_dict() for a in await yard.attachments.for_session(session)]

    items = run_async(go())
    if as_json:
        print_json(items)
    elif not items:
        click.echo(f"session {session!r} has no attachments")
    else:
        print_table(
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


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--spec", is_flag=True, help="Also check the Agent Skills specification's rules (as warnings).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def validate(paths: tuple[Path, ...], spec: bool, as_json: bool) -> None:
    """Lint skill folders against the pre-release checklist; exit 1 on errors."""
    from ..catalog.validate import validate_paths

    reports = validate_paths(list(paths), spec=spec)
    if as_json:
        print_json(reports)
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


@click.command()
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help='Print JSON: {"status": worst status, "checks": [...]}.')
def doctor(skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Check the home folder, the database, the skills and each plugin; exit 1 when a check fails."""
    from ..doctor import run_checks, worst

    checks = run_async(run_checks(skills_dirs))
    status = worst(checks)
    if as_json:
        print_json({"status": status, "checks": checks})
    else:
        for c in checks:
            fix = f" — fix: {c['fix']}" if c["fix"] and c["status"] != "ok" else ""
            click.echo(f"{c['status']:<4}  {c['name']}: {c['detail']}{fix}")
        counts = {s: sum(c["status"] == s for c in checks) for s in ("ok", "warn", "fail")}
        click.echo(f"{counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail")
    sys.exit(1 if status == "fail" else 0)
