"""Default plugin of MCP: the ``skillyard mcp`` commands, added lazily (see :mod:`.cli`)."""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_lazy_command(
        "mcp",
        "skillyard.mcp.cli:mcp_group",
        help="MCP: serve skills as tools to MCP clients; refresh MCP servers' tools.",
    )
