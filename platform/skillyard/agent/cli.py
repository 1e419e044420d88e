"""The ``skillyard agent`` command group: ``check``, ``run``, ``import``, ``resume`` and ``event`` (added by
:mod:`.plugin`)."""

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
from .state import ResumeAction

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


def _check(agent_dir: Path, skills_dirs: tuple[Path, ...]) -> tuple[list[dict[str, Any]], Any, Any, dict[str, str]]:
    """Load the agent and run preflight: every finding as a dict (kind, severity, skill, tool, rule, path, message),
    the yard, the loaded agent and the skills' content hashes."""
    from ..yard import SkillYard
    from .baseline import skill_hashes
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
    return rows, yard, agent, skill_hashes(yard, agent)


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
@click.option(
    "--baseline",
    "baseline_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Problems of skills unchanged since this baseline are warnings; only new or changed skills fail.",
)
@click.option(
    "--write-baseline",
    "write_baseline_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Record the skills' hashes and problems in this file (for a later --baseline).",
)
@click.option("--defaults", is_flag=True, help="Also print each contract as the runtime reads it (defaults filled).")
def check_cmd(
    agent_dir: Path,
    skills_dirs: tuple[Path, ...],
    as_json: bool,
    baseline_file: Path | None,
    write_baseline_file: Path | None,
    defaults: bool,
) -> None:
    """Check an agent folder: load, validate and preflight every skill together (exit 1 on errors).

    Every load error and preflight problem is listed with its skill, tool, rule, JSON path and fix. With
    --baseline, problems of skills unchanged since the baseline are reported as warnings (exit 0).
    """
    from .baseline import BaselineError, contract_view, grade, read_baseline, write_baseline

    try:
        read_baseline(baseline_file) if baseline_file is not None else None  # a bad file is refused before loading
        rows, _yard, agent, hashes = _check(agent_dir, skills_dirs)
        baseline = read_baseline(baseline_file, agent.profile.agent_code) if baseline_file is not None else None
    except BaselineError as exc:
        raise click.BadParameter(str(exc), param_hint="--baseline") from None
    except SkillyardError as exc:
        raise click.ClickException(str(exc)) from None
    if write_baseline_file is not None:  # the problems as they are, not as graded by an older baseline
        write_baseline(write_baseline_file, agent, hashes, rows)
    if baseline is not None:
        rows = grade(rows, hashes, baseline)
    failed = any(r["severity"] == "error" for r in rows)
    if as_json:
        if defaults:
            contracts = {key: contract_view(skill.contract) for key, skill in agent.skills.items()}
            click.echo(json.dumps({"findings": rows, "contracts": contracts}, ensure_ascii=False, indent=2))
        else:
            click.echo(json.dumps(rows, ensure_ascii=False, indent=2))
    else:
        if rows:
            headers = ["severity", "skill", "tool", "rule", "path", "message"]
            print_table([[r[h] for h in headers] for r in rows], headers)
        if defaults:
            for key, skill in agent.skills.items():
                click.echo(f"\n{key}:\n" + json.dumps(contract_view(skill.contract), ensure_ascii=False, indent=2))
        errors = sum(r["severity"] == "error" for r in rows)
        click.echo(f"{agent_dir}: {errors} error(s), {len(rows) - errors} warning(s)", err=failed)
        if write_baseline_file is not None:
            click.echo(f"baseline written to {write_baseline_file} ({len(hashes)} skill(s))")
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
        for candidate in checkpoint.get("candidates", []):
            click.echo(f"  {candidate['id']}: {candidate['label']}")
        for gated in checkpoint.get("calls", []):
            click.echo(f"  [{gated['call_id']}] {gated['summary']}")
        if checkpoint["type"] == "EVENT":
            click.echo(f"  waiting for {checkpoint['event']} ({checkpoint['key']}) until {checkpoint['deadline']}")
    refusal = turn.get("refusal")
    if refusal:
        click.echo(f"refused: {refusal['name']} ({refusal['code']}): {refusal['message']}", err=True)
        click.echo(f"  {refusal['next_step']}", err=True)
    elif turn["reply"]:
        click.echo(turn["reply"])


def _report_turn(go: Callable[[], Coroutine[Any, Any, dict[str, Any]]], as_json: bool) -> None:
    """Run one send / resume, print the turn; a clean error for what the runtime refuses, exit 1 when FAILED or when
    the answer was refused."""
    try:
        turn = asyncio.run(go())
    except SkillyardError as exc:
        raise click.ClickException(str(exc)) from None
    _print_turn(turn, as_json)
    if turn["status"] == "FAILED" or turn.get("refusal"):
        raise SystemExit(1)


@agent_group.command(name="run")
@click.argument("agent_dir", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--agents-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A folder of agent folders: a new session is routed to one by its mission (instead of AGENT_DIR).",
)
@click.option("--agent-code", default=None, help="Run the agent stored in the database (skillyard agent import).")
@click.option("--session", "session_id", required=True, help="Session id; later runs and resumes continue it.")
@click.option("--message", required=True, help="The user's message.")
@click.option("--model", "model", default=None, help="script:FILE.yaml or openai:MODEL (default: the session's).")
@click.option("--context", "context", default=None, help="The caller's identity as JSON (user_id, org_id, …).")
@click.option("--skill", "skill_key", default=None, help="Run this contract skill's node without planning.")
@_skills_dirs_option("Skill roots.")
@click.option("--json", "as_json", is_flag=True, help="Print the turn as JSON.")
def run_cmd(
    agent_dir: Path | None,
    agents_dir: Path | None,
    agent_code: str | None,
    session_id: str,
    message: str,
    model: str | None,
    context: str | None,
    skill_key: str | None,
    skills_dirs: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Send a message to an agent in a session (exit 1 when the task failed).

    Give exactly one of AGENT_DIR, --agents-dir (routed) and --agent-code (stored).

    Example: skillyard agent run agents/cms --session s1 --message "发布文章《季度总结》" --model script:turns.yaml
    """
    from ..yard import SkillYard
    from .router import AgentRouter
    from .runner import Agent
    from .store import AgentStore

    given = [name for name, value in (("AGENT_DIR", agent_dir), ("--agents-dir", agents_dir),
                                       ("--agent-code", agent_code)) if value is not None]  # fmt: skip
    if len(given) != 1:
        what = "none" if not given else " and ".join(given)
        raise click.UsageError(f"give exactly one of AGENT_DIR, --agents-dir and --agent-code (got {what})")
    identity = json_object(context, "context") or {}

    async def go() -> dict[str, Any]:
        async with SkillYard(skills_dirs=list(skills_dirs)) as yard:
            spec = model
            if spec is None:
                stored = await AgentStore(yard.database).load_session(session_id)
                spec = stored.model_spec if stored is not None else None
            agent: Agent | AgentRouter
            if agents_dir is not None:
                agent = await yard.agents(agents_dir, model=spec)
            elif agent_code is not None:
                agent = await yard.agent_from_db(agent_code, model=spec)
            else:
                assert agent_dir is not None  # exactly one of the three was given
                agent = await yard.agent(agent_dir, model=spec)
            return (await agent.send(session_id, message, identity=identity, skill_key=skill_key)).as_dict()

    _report_turn(go, as_json)


@agent_group.command(name="import")
@click.argument("agent_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@_skills_dirs_option("Skill roots (where the agent's business tools are).")
@click.option("--json", "as_json", is_flag=True, help="Print what was stored as JSON.")
def import_cmd(agent_dir: Path, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Store a folder agent in the database (§1.1 tables; upsert by agent_code / skill_key).

    Skills that fail to load are left out and listed. Run it afterwards with `agent run --agent-code CODE`.
    """
    from ..yard import SkillYard
    from .stored import import_agent

    async def go() -> dict[str, Any]:
        async with SkillYard(skills_dirs=list(skills_dirs)) as yard:
            return (await import_agent(yard, agent_dir)).as_dict()

    try:
        report = asyncio.run(go())
    except SkillyardError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
    else:
        click.echo(
            f"stored agent {report['agent_code']}: {len(report['skills'])} skill(s): {', '.join(report['skills'])}"
        )
        for skipped in report["skipped"]:
            click.echo(f"  left out {skipped['skill'] or '(agent)'}: {skipped['message']}", err=True)
    if not report["skills"]:
        raise SystemExit(1)


@agent_group.command(name="resume")
@click.option("--session", "session_id", required=True, help="The suspended session.")
@click.option(
    "--action",
    type=click.Choice([a.value for a in ResumeAction], case_sensitive=False),
    required=True,
    help="How the user answered the checkpoint.",
)
@click.option("--text", default=None, help="The user's answer (REPLY), or the chosen candidate id (CHOOSE).")
@click.option(
    "--edit", "edit", default=None, help="CONFIRM with edited arguments: a JSON object such as '{\"qty\": 2}'."
)
@click.option("--only", "only", default=None, help="CONFIRM of a batch approval: the call ids to run, comma-separated.")
@click.option("--approver", "approver", default=None, help="Who approves, as identity JSON (default: the session's).")
@click.option("--model", "model", default=None, help="Override the session's model spec.")
@_skills_dirs_option("Skill roots.")
@click.option("--json", "as_json", is_flag=True, help="Print the turn as JSON.")
def resume_cmd(
    session_id: str,
    action: str,
    text: str | None,
    edit: str | None,
    only: str | None,
    approver: str | None,
    model: str | None,
    skills_dirs: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Answer a suspended session's checkpoint (FOLLOW_UP, CHOICE, APPROVAL, VERIFY, EVENT).

    Exits 1 when the task failed or the answer was refused (the checkpoint then stays open).

    Examples: skillyard agent resume --session s1 --action CONFIRM;
    skillyard agent resume --session s1 --action CHOOSE --text n-2;
    skillyard agent resume --session s1 --action CONFIRM --edit '{"title": "周报"}'
    """
    from ..yard import SkillYard
    from .runner import resume_session

    edits = json_object(edit, "edit")
    approved_by = json_object(approver, "approver")
    calls = only.split(",") if only is not None else None

    async def go() -> dict[str, Any]:
        async with SkillYard(skills_dirs=list(skills_dirs)) as yard:
            turn = await resume_session(
                yard, session_id, action, text, model, edit=edits, only=calls, approver=approved_by
            )
            return turn.as_dict()

    _report_turn(go, as_json)


@agent_group.command(name="event")
@click.option("--org", "org_id", required=True, help="The org whose waiting nodes the event is for.")
@click.option("--event", "name", required=True, help="The event name, e.g. order.paid.")
@click.option("--key", required=True, help="The correlation key the nodes wait with, e.g. the order number.")
@click.option("--payload", default=None, help="The event's payload: a JSON object or @file.json.")
@click.option("--detach", is_flag=True, help="Queue the resumes for a `skillyard worker`; do not wait for them.")
@_skills_dirs_option("Skill roots.")
@click.option("--json", "as_json", is_flag=True, help="Print the delivery as JSON.")
def event_cmd(
    org_id: str, name: str, key: str, payload: str | None, detach: bool, skills_dirs: tuple[Path, ...], as_json: bool
) -> None:
    """Deliver an external event to the nodes of an org waiting for it (builtin_node_wait_event).

    Each resume runs as a queued job; without --detach this command runs them and prints where each session
    stands. An event nobody waits for is kept 24 hours for the first node that waits for it later.

    Example: skillyard agent event --org 7 --event order.paid --key SO-1 --payload '{"amount": 12}'
    """
    from ..yard import SkillYard
    from .events import EventError

    body = json_object(payload, "payload") or {}

    async def go() -> dict[str, Any]:
        async with SkillYard(skills_dirs=list(skills_dirs)) as yard:
            return await yard.agent_event(name, key, body, org_id=org_id, detach=detach, wait=not detach)

    try:
        delivery = asyncio.run(go())
    except EventError as exc:  # a bad name, key or payload: the option is wrong
        raise click.UsageError(str(exc)) from None
    except SkillyardError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(delivery, ensure_ascii=False, default=str))
        return
    if delivery["stored"]:
        click.echo(f"event {delivery['event_id']}: no node waits for it; kept 24 hours for a later wait")
        return
    rows = [
        [d["session_id"], d["node_id"], d.get("status") or "queued", d.get("checkpoint") or ""]
        for d in delivery["deliveries"]
    ]
    print_table(rows, ["session", "node", "status", "checkpoint"])
