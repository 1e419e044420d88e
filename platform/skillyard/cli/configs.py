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
    """Store KEY=VALUE configs for a skill (KEY=- reads the value from stdin: the way for secrets)."""
    values = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"{pair!r} is not KEY=VALUE; write e.g. api_token=abc123, or api_token=- to type it")
        values[key] = value
    if "-" in values.values():
        if len(values) > 1:
            raise click.UsageError("KEY=- reads one value from stdin: set one key per call when you use it")
        [key] = values
        values[key] = _secret_from_stdin(key)
    yard = open_yard()

    async def go() -> dict[str, bool]:
        async with yard:
            return await yard.configs.set(role, skill, values)

    stored = run_async(go())
    for key, secret in stored.items():
        click.echo(f"set {skill}.{key}" + (" (secret, encrypted)" if secret else ""))


def _secret_from_stdin(key: str) -> str:
    """The value for ``KEY=-``: a prompt without echo on a terminal, else stdin (one trailing newline dropped).
    Off the command line, a secret never shows in the process list or the shell's history."""
    stdin = click.get_text_stream("stdin")
    if stdin.isatty():
        return str(click.prompt(f"value of {key}", hide_input=True, confirmation_prompt=False))
    text = stdin.read()
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


@config.command(name="list")
@click.argument("skill")
@click.option("--role", default="", envvar="SKILLYARD_ROLE", help="Role id.")
def config_list(skill: str, role: str) -> None:
    """Show the config keys of a skill (secret values masked)."""
    yard = open_yard()

    async def go() -> dict[str, tuple[str, bool]]:
        async with yard:
            await yard.database.engine()
            return await yard.configs.listing(role, skill)

    for key, (value, secret) in sorted(run_async(go()).items()):
        click.echo(f"{key} = {'********' if secret else value}")


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
