"""The ``skillyard`` command line. Docs: docs/cli.md.  Example: skillyard run hello --input '{"who": "Ada"}'

The root group carries the built-in commands; plugins add theirs through ``register_commands`` when the group is
first used (see :mod:`.group`). Importing this package costs click and nothing of the host behind the commands.
"""

from __future__ import annotations

import logging
import sys

import click

from .commands import artifacts, doctor, list_cmd, plugins, read, run, show, validate
from .configs import config
from .database import db
from .group import SkillyardGroup


@click.group(cls=SkillyardGroup)
@click.version_option(package_name="skillyard", prog_name="skillyard")
@click.option("-v", "--verbose", count=True, help="Log more to stderr (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """skillyard: drop skill folders in, run them. Docs: docs/cli.md

    Example: skillyard run hello --skills-dir examples --input '{"who": "Ada"}'
    """
    logging.basicConfig(
        stream=sys.stderr,
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)],
        format="%(levelname)s %(name)s: %(message)s",
    )


for _command in (list_cmd, show, read, plugins, run, artifacts, validate, doctor, config, db):
    cli.add_command(_command)
cli.seal_builtin()


def main() -> None:
    """Console-script entry (``skillyard``, ``python -m skillyard``)."""
    cli(standalone_mode=True)


__all__ = ["cli", "main"]
