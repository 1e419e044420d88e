"""``skillyard config``: per-role skill configs (secrets encrypted at rest, masked when listed)."""

from __future__ import annotations

import click

from .output import open_yard, run_async


@click.group()
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
    yard = open_yard()

    async def go() -> dict[str, bool]:
        async with yard:
            return await yard.configs.set(role, skill, values)

    stored = run_async(go())
    for key, secret in stored.items():
        click.echo(f"set {skill}.{key}" + (" (secret, encrypted)" if secret else ""))


@config.command(name="list")
@click.argument("skill")
@click.option("--role", default="", envvar="SKILLYARD_ROLE", help="Role id.")
def config_list(skill: str, role: str) -> None:
    """Show the config keys of a skill (secret values masked)."""
    from ..secret_names import looks_secret

    yard = open_yard()

    async def go() -> dict[str, str]:
        async with yard:
            await yard.database.engine()
            return await yard.configs.get(role, skill)

    for key, value in sorted(run_async(go()).items()):
        click.echo(f"{key} = {'********' if looks_secret(key) else value}")


@config.command(name="unset")
@click.argument("skill")
@click.argument("keys", nargs=-1)
@click.option("--role", default="", envvar="SKILLYARD_ROLE", help="Role id.")
def config_unset(skill: str, keys: tuple[str, ...], role: str) -> None:
    """Remove some (or all) config keys of a skill."""
    yard = open_yard()

    async def go() -> int:
        async with yard:
            return await yard.configs.unset(role, skill, list(keys))

    click.echo(f"removed {run_async(go())} key(s)")
