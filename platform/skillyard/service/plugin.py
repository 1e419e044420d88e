"""Default plugin of the service: the ``skillyard serve`` command (added lazily) and the job that processes an
inbound chat message (``register_jobs``: any worker can run it, also one that recovered it from a dead process)."""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl

INBOUND_JOB = "skillyard.service.inbound_message"


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_lazy_command(
        "serve",
        "skillyard.service.cli:serve_cmd",
        help="Serve the HTTP API, inbound chat hooks, the web console and MCP on one port.",
    )


@hookimpl
def register_jobs(register: Any) -> None:
    async def inbound_message(
        yard: Any, binding: str, event_id: str, agent: str | None = None, model: str | None = None
    ) -> None:
        from .hooks.job import process_inbound

        await process_inbound(yard, binding, event_id, agent, model)

    register(INBOUND_JOB, inbound_message)
