"""``skillyard config``: per-role skill configs (secrets encrypted at rest, masked when listed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from .output import open_yard, print_json, print_table, run_async

if TYPE_CHECKING:
    from ..configs.store import Rotation


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


@config.command(name="rotate-key")
@click.option("--json", "as_json", is_flag=True, help='Print JSON: {"rotated": N, "key_source": ..., ...}.')
def config_rotate_key(as_json: bool) -> None:
    """Re-encrypt every stored secret with the newest key (a new key is added to the key file first)."""
    yard = open_yard()

    async def go() -> Rotation:
        async with yard:
            return await yard.configs.rotate_key()

    report = _rotation_report(run_async(go()))
    if as_json:
        print_json(report)
        return
    added = "yes" if report["key_added"] else "no"
    row = [report["rotated"], report["keys"], added, report["key_file"] or report["key_source"]]
    print_table([row], ["ROTATED", "KEYS", "NEW KEY", "KEY SOURCE"])
    if report["note"]:
        click.echo(report["note"])


def _rotation_report(rotation: Rotation) -> dict[str, Any]:
    """What ``rotate-key`` prints; with keys from the environment, a note that it could not add a key there."""
    from ..configs.crypto import KEY_ENV, KEYS_ENV  # here: importing the CLI costs nothing of the host

    ring = rotation.ring
    note = None
    if ring.source == KEYS_ENV:
        note = (
            f"keys come from {KEYS_ENV}, which rotate-key cannot edit: the secrets were re-encrypted with its first "
            f"(newest) key. To rotate, put a new key first in {KEYS_ENV} (the old ones after it) on every host, "
            "then run rotate-key again"
        )
    elif ring.source == KEY_ENV:
        note = (
            f"the key comes from {KEY_ENV}, which rotate-key cannot edit: the secrets were re-encrypted with that "
            f"key. To rotate, set {KEYS_ENV}=NEW_KEY,OLD_KEY on every host, then run rotate-key again"
        )
    return {
        "rotated": rotation.rotated,
        "key_source": ring.source,
        "key_file": None if ring.file is None else str(ring.file),
        "key_added": rotation.key_added,
        "keys": len(ring.keys),
        "note": note,
    }
