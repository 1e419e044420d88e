"""The directory's default plugin: the ``skillyard directory`` commands."""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_lazy_command(
        "directory", "skillyard.directory.cli:directory_group", help="People, departments and channel accounts."
    )
