"""Default plugin of the agent runtime: the ``skillyard agent`` commands, added lazily (see :mod:`.cli`)."""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_lazy_command(
        "agent",
        "skillyard.agent.cli:agent_group",
        help="Contract-driven agents: run a session, resume its checkpoints, check a folder.",
    )
