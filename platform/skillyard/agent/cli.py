"""Default plugin: the ``skillyard agent`` command group (``check`` now; ``run`` and ``resume`` join it later)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import click

from ..errors import SkillyardError
from ..hookspecs import hookimpl

_TOOL_IN_PATH = re.compile(r'^tools(?:\.([A-Za-z_][A-Za-z0-9_]*)|\["([^"]+)"\])')


def _tool_of(path: str) -> str:
    """The tool a contract JSON path points into (``tools.createArticle.success`` → ``createArticle``)."""
    match = _TOOL_IN_PATH.match(path)
    return (match.group(1) or match.group(2)) if match else ""


@click.group(name="agent")
def agent_group() -> None:
    """Contract-driven agents: check an agent folder before publishing it. Docs: docs/agents.md

    Example: skillyard agent check agents/cms --skills-dir skills
    """


def _problem_rows(agent_dir: Path, skills_dirs: tuple[Path, ...]) -> list[dict[str, Any]]:
    """Load the agent and run preflight; every finding as a dict (kind, severity, skill, tool, rule, path, message)."""
    from ..yard import SkillYard
    from .loader import load_agent
    from .preflight import preflight_agent

    yard = SkillYard(skills_dirs=list(skills_dirs))
    agent = asyncio.run(load_agent(yard, agent_dir))
    rows = [
        {
            "kind": "load",
            "severity": issue.severity,
            "skill": issue.skill,
            "tool": _tool_of(issue.path),
            "rule": issue.rule,
            "path": issue.path,
            "message": issue.message,
        }
        for issue in [*agent.errors, *agent.warnings]
    ]
    for problem in preflight_agent(yard, agent):
        rows.append(
            {
                "kind": "preflight",
                "severity": problem.severity,
                "skill": problem.skill,
                "tool": problem.tool,
                "rule": problem.rule,
                "path": problem.arg,
                "message": problem.message,
            }
        )
    return rows


@agent_group.command(name="check")
@click.argument("agent_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--skills-dir",
    "skills_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of skills (repeatable); the agent's own skills/ folder is always searched first.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of every problem.")
def check_cmd(agent_dir: Path, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Check an agent folder: load, validate and preflight (exit 1 on errors).

    Every load error and preflight problem is listed with its skill, tool, rule and JSON path.
    """
    try:
        rows = _problem_rows(agent_dir, skills_dirs)
    except SkillyardError as exc:
        raise click.ClickException(str(exc)) from None
    failed = any(r["severity"] == "error" for r in rows)
    if as_json:
        click.echo(json.dumps(rows, ensure_ascii=False, indent=2))
    elif rows:
        headers = ["severity", "skill", "tool", "rule", "path", "message"]
        table = [[str(r[h]) for h in headers] for r in rows]
        widths = [max(len(line[i]) for line in [headers, *table]) for i in range(len(headers) - 1)]
        for line in [headers, *table]:
            cells = [c.ljust(w) for c, w in zip(line, widths, strict=False)]
            click.echo("  ".join([*cells, line[-1]]).rstrip())
    if not as_json:
        errors = sum(r["severity"] == "error" for r in rows)
        click.echo(f"{agent_dir}: {errors} error(s), {len(rows) - errors} warning(s)", err=failed)
    if failed:
        raise SystemExit(1)


@hookimpl
def register_commands(cli: click.Group) -> None:
    """Add the ``agent`` group (the same group object every time, so registering twice is harmless)."""
    cli.add_command(agent_group)
