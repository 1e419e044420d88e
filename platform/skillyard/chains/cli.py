"""``skillyard chain``, ``skillyard schedule`` and ``skillyard worker`` (added lazily by :mod:`.plugin`).

Usage errors (a bad option, an unknown chain, run or schedule) exit 2; an invalid chain file exits 1 with each of
its problems on stderr. Nothing is stored when a command fails.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..cli.output import in_yard, json_object, print_json, print_table, skills_dir_option
from .definition import ChainInvalid

if TYPE_CHECKING:
    from ..yard import SkillYard
    from .engine import ChainEngine

T = TypeVar("T")


def _with_chains(
    skills_dirs: tuple[Path, ...], work: Callable[[ChainEngine], Coroutine[Any, Any, T]], **engine: Any
) -> T:
    async def go(yard: SkillYard) -> T:
        async with yard.chains(**engine) as chains:
            return await work(chains)

    return in_yard(skills_dirs, go)


def _when(value: str | None) -> str:
    return (value or "-")[:19].replace("T", " ")


def _print_run(run: dict[str, Any]) -> None:
    click.echo(f"run {run['id']}  chain {run['chain']} v{run['version']}  {run['status']}")
    if run["error"]:
        click.echo(f"  {run['error']}")
    rows = [[s["id"], s["skill"], s["status"], s["attempts"], (s["error"] or "")[:70]] for s in run["steps"]]
    print_table(rows, ["STEP", "SKILL", "STATUS", "ATTEMPTS", "ERROR"])


def _progress() -> Callable[[dict[str, Any]], None]:
    """A line on stderr per step whose status changed."""
    shown: dict[str, str] = {}

    def report(run: dict[str, Any]) -> None:
        for step in run["steps"]:
            if shown.get(step["id"]) != step["status"]:
                shown[step["id"]] = step["status"]
                if step["status"] != "pending":
                    click.echo(f"  step {step['id']} ({step['skill']}): {step['status']}", err=True)

    return report


@click.group(name="chain")
def chain_group() -> None:
    """Multi-step chains of skills, run by workers or here. Docs: docs/chains.md

    Example: skillyard chain add examples/chains/price_digest.yaml && skillyard chain run price_digest
    """


@chain_group.command(name="add")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def chain_add(file: Path, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Check a chain file and store it (a new version when the name exists)."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise click.UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"{file} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None

    async def work(chains: ChainEngine) -> dict[str, Any] | ChainInvalid:
        try:
            chain = chains.read(text, str(file))
        except ChainInvalid as exc:  # exit 1 with the problems, not a usage error
            return exc
        version = await chains.add(chain)
        return {"name": chain.name, "version": version, "steps": [s.id for s in chain.steps]}

    added = _with_chains(skills_dirs, work)
    if isinstance(added, ChainInvalid):
        if as_json:
            print_json({"error": str(added), "problems": added.problems})
        else:
            click.echo(f"error: {file} is not a valid chain:", err=True)
            for problem in added.problems:
                click.echo(f"  {problem}", err=True)
        sys.exit(1)
    if as_json:
        print_json(added)
    else:
        click.echo(f"stored chain {added['name']} version {added['version']} ({len(added['steps'])} steps)")


@chain_group.command(name="list")
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def chain_list(skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """List the stored chains."""
    chains = _with_chains(skills_dirs, lambda c: c.chains())
    if as_json:
        print_json(chains)
        return
    rows = [[c["name"], c["version"], len(c["steps"]), c["schedules"], (c["description"] or "")[:60]] for c in chains]
    print_table(rows, ["NAME", "VERSION", "STEPS", "SCHEDULES", "DESCRIPTION"])


@chain_group.command(name="show")
@click.argument("name")
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def chain_show(name: str, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Show a chain: its steps and schedules."""
    chain = _with_chains(skills_dirs, lambda c: c.chain(name))
    if as_json:
        print_json(chain)
        return
    click.echo(f"chain {chain['name']} v{chain['version']}  role {chain['role_id'] or '(default)'}")
    if chain["description"]:
        click.echo(f"  {chain['description']}")
    print_table([[s["id"], s["skill"], s["retry"]["max"]] for s in chain["steps"]], ["STEP", "SKILL", "RETRIES"])
    for s in chain["schedules"]:
        click.echo(f"schedule {s['id']}: {s['cron']} ({s['tz']}){' paused' if s['paused'] else ''}")


@chain_group.command(name="run")
@click.argument("name")
@click.option("--input", "input_json", help="The trigger input: a JSON object or @file.json.")
@click.option("--detach", is_flag=True, help="Queue the run for a worker and print its id; do not wait.")
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def chain_run(name: str, input_json: str | None, detach: bool, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Run a chain: here until it ends (no worker needed), or queued for a worker with --detach."""
    trigger = json_object(input_json, "input") or {}

    async def work(chains: ChainEngine) -> dict[str, Any]:
        if detach:
            return {"id": await chains.start(name, trigger), "status": "queued"}
        return await chains.run(name, trigger, progress=None if as_json else _progress())

    run = _with_chains(skills_dirs, work)
    if as_json:
        print_json(run)
    elif detach:
        click.echo(f"queued run {run['id']} (a `skillyard worker` runs it)")
    else:
        _print_run(run)
    if not detach and run["status"] != "succeeded":
        sys.exit(1)


@chain_group.command(name="runs")
@click.argument("name")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="How many, newest first.")
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def chain_runs(name: str, limit: int, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """The latest runs of a chain."""
    runs = _with_chains(skills_dirs, lambda c: c.runs(name, limit))
    if as_json:
        print_json(runs)
        return
    rows = [
        [r["id"], r["version"], r["status"], _when(r["started_at"]), _when(r["finished_at"]), (r["error"] or "")[:50]]
        for r in runs
    ]
    print_table(rows, ["RUN", "VERSION", "STATUS", "STARTED", "FINISHED", "ERROR"])


@chain_group.command(name="cancel")
@click.argument("run_id")
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def chain_cancel(run_id: str, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Cancel a run: the running step gets its abort_signal, pending steps never start."""
    run = _with_chains(skills_dirs, lambda c: c.cancel(run_id))
    if as_json:
        print_json(run)
    else:
        _print_run(run)


@chain_group.command(name="remove")
@click.argument("name")
@click.option("--force", is_flag=True, help="Remove the chain's schedules too.")
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def chain_remove(name: str, force: bool, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Remove a chain (refused while schedules use it, unless --force)."""
    removed = _with_chains(skills_dirs, lambda c: c.remove(name, force))
    if as_json:
        print_json(removed)
    else:
        extra = f" and schedule(s) {', '.join(removed['schedules_removed'])}" if removed["schedules_removed"] else ""
        click.echo(f"removed chain {name}{extra}")


@click.group(name="schedule")
def schedule_group() -> None:
    """Run chains on cron schedules in a time zone (a `skillyard worker` ticks them). Docs: docs/chains.md"""


@schedule_group.command(name="add")
@click.argument("name")
@click.option("--cron", required=True, help="Five cron fields, or six with trailing seconds.")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone of the cron fields.")
@click.option("--input", "input_json", help="The trigger input of each run: a JSON object or @file.json.")
@click.option("--overlap", type=click.Choice(["skip", "queue", "allow"]), default="skip", show_default=True)
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def schedule_add(
    name: str, cron: str, tz: str, input_json: str | None, overlap: str, skills_dirs: tuple[Path, ...], as_json: bool
) -> None:
    """Schedule a chain; prints the schedule id."""
    trigger = json_object(input_json, "input") or {}
    schedule = _with_chains(skills_dirs, lambda c: c.schedule(name, cron, tz, trigger, overlap))
    if as_json:
        print_json(schedule)
    else:
        click.echo(schedule["id"])


@schedule_group.command(name="list")
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def schedule_list(skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """List the schedules."""
    schedules = _with_chains(skills_dirs, lambda c: c.schedules())
    if as_json:
        print_json(schedules)
        return
    rows = [
        [s["id"], s["chain"], s["cron"], s["tz"], s["overlap"], "paused" if s["paused"] else _when(s["next_tick"])]
        for s in schedules
    ]
    print_table(rows, ["ID", "CHAIN", "CRON", "TZ", "OVERLAP", "NEXT"])


def _schedule_change(verb: str, work: Callable[[ChainEngine, str], Coroutine[Any, Any, None]]) -> click.Command:
    @click.command(name=verb)
    @click.argument("schedule_id")
    @skills_dir_option()
    def command(schedule_id: str, skills_dirs: tuple[Path, ...]) -> None:
        _with_chains(skills_dirs, lambda c: work(c, schedule_id))
        click.echo(f"{verb}d schedule {schedule_id}" if verb != "remove" else f"removed schedule {schedule_id}")

    command.help = f"{verb.capitalize()} a schedule."
    return command


schedule_group.add_command(_schedule_change("pause", lambda c, i: c.pause(i, True)))
schedule_group.add_command(_schedule_change("resume", lambda c, i: c.pause(i, False)))
schedule_group.add_command(_schedule_change("remove", lambda c, i: c.unschedule(i)))


@click.command(name="worker")
@click.option("--concurrency", type=click.IntRange(1, 256), default=4, show_default=True, help="Steps run at once.")
@click.option("--queue", "queues", multiple=True, help="Queue to take jobs from (repeatable; default: skillyard).")
@skills_dir_option()
def worker_cmd(concurrency: int, queues: tuple[str, ...], skills_dirs: tuple[Path, ...]) -> None:
    """Run chain steps and the schedule ticker until SIGTERM or Ctrl-C, then drain: running steps finish."""
    from .engine import QUEUE

    async def work(chains: ChainEngine) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        click.echo(f"worker started on {', '.join(queues or (QUEUE,))} (concurrency {concurrency})", err=True)
        await chains.work(queues or (QUEUE,), stop)
        click.echo("worker stopped: running steps finished", err=True)

    _with_chains(skills_dirs, work, upkeep=True, concurrency=concurrency)
