"""Default plugin of the token store: the ``skillyard token`` commands, added lazily (see :mod:`.cli`)."""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_lazy_command(
        "token",
        "skillyard.tokens.cli:token_group",
        help="Access tokens of MCP and HTTP callers: add, list, revoke.",
    )
