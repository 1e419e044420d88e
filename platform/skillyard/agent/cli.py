"""The ``skillyard agent`` command group: ``check``, ``run`` and ``resume`` (added by :mod:`.plugin`)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import click

from ..cli.output import json_object, print_table
from ..errors import SkillyardError

_TOOL_IN_PATH = re.compile(r'^tools(?:\.([A-Za-z_][A-Za-z0-9_]*)|\["([^"]+)"\])')


def _tool_of(path: str) -> str:
    """The tool a contract JSON path points into (``tools.createArticle.success`` → ``createArticle``)."""
    match = _TOOL_IN_PATH.match(path)
    return (match.group(1) or match.group(2)) if match else ""


@click.group(name="agent")
def agent_group() -> None:
    """Contract-driven agents: run a session, resume its checkpoints, check a folder. Docs: docs/agents.md

    Example: skillyard agent run examples/agents/notes --session s1 --message "…" --model script:demo.yaml
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


def _skills_dirs_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--skills-dir`` (repeatable); a folder that does not exist is a usage error (exit 2), as in the main CLI."""
    return click.option(
        "--skills-dir",
        "skills_dirs",
        multiple=True,
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help=help,
    )


@agent_group.command(name="check")
@click.argument("agent_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@_skills_dirs_option("Folder of skills (repeatable); the agent's own skills/ folder is always searched first.")
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
        print_table([[r[h] for h in headers] for r in rows], headers)
    if not as_json:
        errors = sum(r["severity"] == "error" for r in rows)
        click.echo(f"{agent_dir}: {errors} error(s), {len(rows) - errors} warning(s)", err=failed)
    if failed:
        raise SystemExit(1)


def _print_turn(turn: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(turn, ensure_ascii=False, default=str))
        return
    click.echo(f"status: {turn['status']}")
    for event in turn["events"]:
        click.echo(f"  … {event.get('label')}")
    for obs in turn["observations"]:
        mark = "ok" if obs["ok"] else (obs["code"] or "failed")
        click.echo(f"  {obs['tool']}: {mark}")
    checkpoint = turn["checkpoint"]
    if checkpoint:
        fields = ", ".join(checkpoint["expected_fields"])
        click.echo(f"checkpoint: {checkpoint['type']}" + (f" (expects {fields})" if fields else ""))
    if turn["reply"]:
        click.echo(turn["reply"])


def _report_turn(go: Callable[[], Coroutine[Any, Any, dict[str, Any]]], as_json: bool) -> None:
    """Run one send / resume, print the turn; a clean error for what the runtime refuses, exit 1 when FAILED."""
    try:
        turn = asyncio.run(go())
    except SkillyardError as exc:
        raise click.ClickException(str(exc)) from None
    _print_turn(turn, as_json)
    if turn["status"] == "FAILED":
        raise SystemExit(1)


@agent_group.command(name="run")
@click.argument("agent_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--session", "session_id", required=True, help="Session id; later runs and resumes continue it.")
@click.option("--message", required=True, help="The user's message.")
@click.option("--model", "model", default=None, help="script:FILE.yaml or openai:MODEL (default: the session's).")
@click.option("--context", "context", default=None, help="The caller's identity as JSON (user_id, org_id, …).")
@click.option("--skill", "skill_key", default=None, help="The contract skill to run (default: the agent's first).")
@_skills_dirs_option("Skill roots.")
@click.option("--json", "as_json", is_flag=True, help="Print the turn as JSON.")
def run_cmd(
    agent_dir: Path,
    session_id: str,
    message: str,
    model: str | None,
    context: str | None,
    skill_key: str | None,
    skills_dirs: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Send a message to an agent in a session (exit 1 when the node failed).

    Example: skillyard agent run agents/cms --session s1 --message "发布文章《季度总结》" --model script:turns.yaml
    """
    from ..yard import SkillYard
    from .store import AgentStore

    identity = json_object(context, "context") or {}

    async def go() -> dict[str, Any]:
        async with SkillYard(skills_dirs=list(skills_dirs)) as yard:
            spec = model
            if spec is None:
                stored = await AgentStore(yard.database).load_session(session_id)
                spec = stored.model_spec if stored is not None else None
            agent = await yard.agent(agent_dir, model=spec)
            return (await agent.send(session_id, message, identity=identity, skill_key=skill_key)).as_dict()

    _report_turn(go, as_json)


@agent_group.command(name="resume")
@click.option("--session", "session_id", required=True, help="The suspended session.")
@click.option(
    "--action",
    type=click.Choice(["CONFIRM", "REJECT", "REPLY", "CANCEL"], case_sensitive=False),
    required=True,
    help="How the user answered the checkpoint.",
)
@click.option("--text", default=None, help="The user's answer (REPLY).")
@click.option("--model", "model", default=None, help="Override the session's model spec.")
@_skills_dirs_option("Skill roots.")
@click.option("--json", "as_json", is_flag=True, help="Print the turn as JSON.")
def resume_cmd(
    session_id: str, action: str, text: str | None, model: str | None, skills_dirs: tuple[Path, ...], as_json: bool
) -> None:
    """Answer a suspended session's checkpoint (FOLLOW_UP, APPROVAL, VERIFY).

    Example: skillyard agent resume --session s1 --action CONFIRM
    """
    from ..yard import SkillYard
    from .runner import resume_session

    async def go() -> dict[str, Any]:
        async with SkillYard(skills_dirs=list(skills_dirs)) as yard:
            return (await resume_session(yard, session_id, action, text, model)).as_dict()

    _report_turn(go, as_json)
