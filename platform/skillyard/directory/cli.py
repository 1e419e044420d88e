"""``skillyard directory``: import, show and link the people, departments and channel accounts of an organisation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..cli.output import in_yard, print_json, print_table
from ..errors import SkillyardError
from .directory import check_org
from .importer import ImportProblems, Plan
from .paths import path_for

ORG = click.option("--org", "org", required=True, help="The organisation id.")
JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group(name="directory")
def directory_group() -> None:
    """The identity directory (docs/identity.md)."""


def _org(org: str) -> str:
    try:
        return check_org(org)
    except SkillyardError as exc:
        raise click.UsageError(str(exc)) from None


def _plan_json(plan: Plan, applied: bool) -> dict[str, Any]:
    return {
        "applied": applied,
        "counts": plan.counts(),
        "changes": [{"action": c.action, "kind": c.kind, "key": c.key, "fields": list(c.fields)} for c in plan.changes],
        "warnings": plan.warnings,
    }


@directory_group.command(name="import")
@ORG
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--kind", type=click.Choice(["department", "person", "account"]), help="The kind of every record.")
@click.option("--apply", "apply_", is_flag=True, help="Write the changes (without it: a dry run that prints them).")
@JSON
def import_cmd(org: str, file: Path, kind: str | None, apply_: bool, as_json: bool) -> None:
    """Import departments, people and channel accounts from CSV or JSON Lines; all or nothing."""
    org = _org(org)

    async def work(yard: Any) -> Plan | ImportProblems:
        try:
            plan: Plan = await yard.directory.plan_import(org, file, kind)
        except ImportProblems as exc:  # reported line by line below, not as one usage error
            return exc
        if apply_:
            await yard.directory.apply(org, plan)
        return plan

    plan = in_yard((), work)
    if isinstance(plan, ImportProblems):
        exc = plan
        if as_json:
            print_json({"applied": False, "problems": exc.problems})
        else:
            for problem in exc.problems:
                click.echo(f"error   {problem}", err=True)
            click.echo(f"{len(exc.problems)} problem(s); nothing was written", err=True)
        raise SystemExit(1) from None
    if as_json:
        print_json(_plan_json(plan, apply_))
        return
    rows = [[c.action, c.kind, c.key, ", ".join(c.fields)] for c in plan.changes if c.action != "same"]
    if rows:
        print_table(rows, ["ACTION", "KIND", "KEY", "CHANGES"])
    for warning in plan.warnings:
        click.echo(f"warning {warning}", err=True)
    counts = plan.counts()
    done = "written" if apply_ else "a dry run: pass --apply to write"
    click.echo(f"{counts['add']} to add, {counts['update']} to update, {counts['same']} unchanged ({done})")


@directory_group.command(name="show")
@ORG
@click.option("--person", "emp_no", default=None, help="One person's context fields, by emp_no.")
@JSON
def show_cmd(org: str, emp_no: str | None, as_json: bool) -> None:
    """The organisation's departments (with their paths) and people, or one person's context fields."""
    org = _org(org)

    async def work(yard: Any) -> Any:
        if emp_no is not None:
            return await yard.directory.person(org, emp_no=emp_no)
        return await yard.directory.snapshot(org)

    found = in_yard((), work)
    if emp_no is not None:
        if found is None:
            raise click.ClickException(f"no active person {emp_no!r} in the directory of {org!r}")
        if as_json:
            print_json(found)
        else:
            rows = [[k, ", ".join(v) if isinstance(v, list) else v] for k, v in found.items()]
            print_table(rows, ["FIELD", "VALUE"])
        return
    tree = found.departments
    departments = [
        {"id": d, "name": dept.name, "parent": dept.parent, "disabled": dept.disabled, "path": path_for(d, tree)[1]}
        for d, dept in sorted(tree.items())
    ]
    people = [{**p, "department_path": path_for(p["department"], tree)[1]} for _, p in sorted(found.people.items())]
    accounts = [{"channel": c, "account": a, "emp_no": e} for (c, a), e in sorted(found.accounts.items())]
    if as_json:
        print_json({"org": org, "departments": departments, "people": people, "accounts": accounts})
        return
    print_table([[d["id"], d["path"], "disabled" if d["disabled"] else ""] for d in departments], ["ID", "PATH", ""])
    print_table(
        [[p["emp_no"], p["name"], p["department_path"], p["title"], "" if p["active"] else "inactive"] for p in people],
        ["EMP_NO", "NAME", "DEPARTMENT", "TITLE", ""],
    )
    print_table([[a["channel"], a["account"], a["emp_no"]] for a in accounts], ["CHANNEL", "ACCOUNT", "EMP_NO"])


@directory_group.command(name="link")
@ORG
@click.option("--channel", required=True, help="The channel (telegram, feishu, …).")
@click.option("--account", required=True, help="The account id on that channel (a Telegram user id, a Feishu open_id).")
@click.option("--person", "emp_no", required=True, help="The person's emp_no.")
@JSON
def link_cmd(org: str, channel: str, account: str, emp_no: str, as_json: bool) -> None:
    """Map a channel account to a person, so runs from that account carry the person's fields."""
    org = _org(org)
    in_yard((), lambda yard: yard.directory.link(org, channel, account, emp_no))
    result = {"org": org, "channel": channel, "account": account, "emp_no": emp_no}
    if as_json:
        print_json(result)
    else:
        click.echo(f"{channel}/{account} → {emp_no} in {org}")
