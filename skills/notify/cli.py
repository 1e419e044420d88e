"""``skillyard notify alias set | list | remove``: the named Apprise targets of a role (docs/delivery.md).

skillyard notify alias set NAME URL [URL…] [--role R]
skillyard notify alias set NAME --config FILE [--tag TAG]… [--role R]
skillyard notify alias list [--role R] [--json]        (URLs masked)
skillyard notify alias remove NAME [--role R]
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from skillyard.cli.output import in_yard, print_json, print_table

from .aliases import PREFIX, SKILL, Alias, AliasError, aliases_of, check_name

if TYPE_CHECKING:
    from skillyard import SkillYard

ROLE_HELP = "The role the alias belongs to (default: the default role '')."


@click.group(name="notify")
def notify_group() -> None:
    """Administer the built-in notify skill. Docs: docs/cli.md#skillyard-notify"""


@notify_group.group(name="alias")
def alias_group() -> None:
    """Named notify targets (Apprise URLs or an Apprise config file), stored encrypted per role."""


def _checked(name: str, urls: tuple[str, ...], config_file: Path | None, tags: tuple[str, ...]) -> Alias:
    """The alias to store, every URL and the config file read by Apprise first: nothing unusable is stored."""
    import apprise

    from .targets import asset

    try:
        alias_name = check_name(name)
    except AliasError as exc:
        raise click.UsageError(f"NAME: {exc}") from None
    if not urls and config_file is None:
        raise click.UsageError("give one or more Apprise URLs, or --config FILE (an Apprise YAML or TEXT config)")
    if tags and config_file is None:
        raise click.UsageError("--tag selects URLs of an Apprise config file: give --config FILE too")
    for position, url in enumerate(urls, 1):
        if apprise.Apprise.instantiate(url, asset=asset()) is None:
            raise click.UsageError(
                f"URL {position} is not a usable Apprise URL (unknown scheme or malformed); check it against "
                "https://github.com/caronc/apprise/wiki"
            )
    text = None
    if config_file is not None:
        try:
            text = config_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise click.UsageError(f"--config: cannot read {config_file} as UTF-8 text ({exc})") from None
        config = apprise.AppriseConfig(asset=asset(), recursion=0)
        notifier = apprise.Apprise(asset=asset())
        if not config.add_config(text) or not notifier.add(config) or not len(notifier):
            raise click.UsageError(f"--config: {config_file} holds no URL Apprise can use (YAML or TEXT format)")
        if tags and not [s for s in notifier if s.tags & set(tags)]:
            raise click.UsageError(f"--tag: no URL of {config_file} has the tag(s) {', '.join(tags)}")
    return Alias(alias_name, tuple(urls), text, tuple(dict.fromkeys(tags)))


@alias_group.command(name="set")
@click.argument("name")
@click.argument("urls", nargs=-1)
@click.option("--role", default="", help=ROLE_HELP)
@click.option(
    "--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), help="An Apprise config file."
)
@click.option("--tag", "tags", multiple=True, help="Notify only the config's URLs with this tag (repeatable).")
def alias_set(name: str, urls: tuple[str, ...], role: str, config_file: Path | None, tags: tuple[str, ...]) -> None:
    """Set (or replace) an alias: its URLs, or an Apprise config file and tags."""
    alias = _checked(name, urls, config_file, tags)

    async def work(yard: SkillYard) -> None:
        await yard.configs.set(role, SKILL, {PREFIX + alias.name: alias.to_json()})

    in_yard((), work)
    where = f"{len(urls)} URL(s)" if urls else f"the config {config_file}"
    click.echo(f"notify alias {alias.name!r} of role {role!r} set ({where}, stored encrypted)")


async def _aliases(yard: SkillYard, role: str) -> list[Alias]:
    stored = aliases_of(await yard.configs.get(role, SKILL))
    found = []
    for name, text in sorted(stored.items()):
        try:
            found.append(Alias.from_json(name, text))
        except AliasError:
            found.append(Alias(name))
    return found


@alias_group.command(name="list")
@click.option("--role", default="", help=ROLE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list (URLs masked).")
def alias_list(role: str, as_json: bool) -> None:
    """List a role's aliases; URLs show their scheme and host only."""
    aliases: list[Alias] = in_yard((), lambda yard: _aliases(yard, role))
    items: list[dict[str, Any]] = [a.masked() for a in aliases]
    if as_json:
        print_json(items)
        return
    if not items:
        click.echo(f"role {role!r} has no notify aliases (add one with `skillyard notify alias set NAME URL`)")
        return
    rows = [[i["name"], ", ".join(i["urls"]) or "-", i["config"] or "-", ", ".join(i["tags"]) or "-"] for i in items]
    print_table(rows, ["NAME", "URLS", "CONFIG", "TAGS"])


@alias_group.command(name="remove")
@click.argument("name")
@click.option("--role", default="", help=ROLE_HELP)
def alias_remove(name: str, role: str) -> None:
    """Remove an alias of a role."""
    try:
        alias_name = check_name(name)
    except AliasError as exc:
        raise click.UsageError(f"NAME: {exc}") from None

    async def work(yard: SkillYard) -> int:
        return await yard.configs.unset(role, SKILL, [PREFIX + alias_name])

    removed = in_yard((), work)
    if removed:
        click.echo(f"notify alias {alias_name!r} of role {role!r} removed")
    else:
        click.echo(f"role {role!r} has no notify alias {alias_name!r}; nothing changed")
