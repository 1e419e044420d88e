"""``skillyard db``: the database the platform uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .output import in_yard

if TYPE_CHECKING:
    from ..yard import SkillYard


@click.group(name="db")
def db() -> None:
    """The platform's database (the embedded PostgreSQL unless SKILLYARD_DATABASE_URL is set)."""


@db.command(name="url")
@click.option("--show-password", is_flag=True, help="Print the password too (it is masked as *** otherwise).")
def db_url(show_password: bool) -> None:
    """Print the database URL in use (starts the embedded server if needed)."""
    from sqlalchemy.engine import make_url

    async def go(yard: SkillYard) -> str:
        return await yard.database.url()

    url = in_yard((), go)
    click.echo(url if show_password else make_url(url).render_as_string(hide_password=True))
