"""``skillyard sandbox``: the tier out-of-process skills run at, and ``setup`` of the dedicated sandbox user."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess

import click

from ..errors import SkillyardError
from ..settings import SANDBOX_TIERS, SandboxSettings, Settings
from .output import print_json, print_table


@click.group(name="sandbox")
def sandbox_group() -> None:
    """The sandbox of out-of-process skills (docs/sandbox.md)."""


def _settings() -> SandboxSettings:
    try:
        return Settings.from_env().sandbox
    except SkillyardError as exc:
        raise click.UsageError(str(exc)) from None


@sandbox_group.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_cmd(as_json: bool) -> None:
    """Which tier runs get, which tiers this machine offers and why the others are missing."""
    from ..executors.sandbox import PROMISES, describe, machine

    settings = _settings()
    found = machine(settings.user)
    info = describe(settings)
    info["tiers"] = {
        tier: {"available": tier in found.available, "promise": PROMISES[tier], "missing": found.reasons.get(tier)}
        for tier in SANDBOX_TIERS
    }
    info["user"] = settings.user
    if as_json:
        print_json(info)
        return
    click.echo(f"tier in use: {info['tier'] or '-'} (SKILLYARD_SANDBOX={settings.mode})")
    if info.get("problem"):
        click.echo(f"problem: {info['problem']}", err=True)
    rows = [[t, "yes" if v["available"] else "no", v["missing"] or v["promise"]] for t, v in info["tiers"].items()]
    print_table(rows, ["TIER", "AVAILABLE", "WHAT IT IS / WHAT IS MISSING"])


@sandbox_group.command(name="setup")
@click.option("--user", "user_name", default=None, help="The sandbox user's name (default: SKILLYARD_SANDBOX_USER).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def setup_cmd(user_name: str | None, as_json: bool) -> None:
    """Create the dedicated unprivileged user that a root host starts sandboxes as (tiers A and B). Idempotent."""
    from ..executors.sandbox import machine

    name = user_name or _settings().user
    if os.geteuid() != 0:
        raise click.UsageError(
            "skillyard sandbox setup creates a system user and must run as root (sudo skillyard sandbox setup); "
            "an ordinary user needs no setup: tier A runs as that user"
        )
    if not name.replace("-", "").replace("_", "").isalnum() or name[0] == "-" or len(name) > 32:
        raise click.UsageError(f"{name!r} is not a user name: use letters, digits, - and _ (at most 32)")
    created = False
    try:
        pwd.getpwnam(name)
    except KeyError:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise click.ClickException("useradd is not installed (Debian: apt-get install passwd)") from None
        argv = [useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin"]
        done = subprocess.run([*argv, name], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise click.ClickException(f"useradd {name} failed: {done.stderr.strip()}") from None
        created = True
    machine.cache_clear()
    found = machine(name)
    result = {"user": name, "created": created, "available": list(found.available), "missing": dict(found.reasons)}
    if as_json:
        print_json(result)
        return
    click.echo(
        f"user {name}: {'created' if created else 'already there'}; tiers available: {', '.join(found.available)}"
    )
    for tier, reason in found.reasons.items():
        click.echo(f"tier {tier} missing: {reason}", err=True)
