"""Default plugin of the agent runtime: the ``skillyard agent`` commands, added lazily (see :mod:`.cli`), and the
jobs that resume nodes waiting for external events (:mod:`.events`)."""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl

#: The jobs of external events (agent/events.py): a delivered event's resume, a wait's timeout.
DELIVER_JOB = "skillyard.agent_event_deliver"
TIMEOUT_JOB = "skillyard.agent_event_timeout"


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_lazy_command(
        "agent",
        "skillyard.agent.cli:agent_group",
        help="Contract-driven agents: run a session, resume its checkpoints, check a folder.",
    )


async def _deliver(yard: Any, wait_id: str) -> None:
    from .events import deliver_job

    await deliver_job(yard, wait_id)


async def _time_out(yard: Any, wait_id: str) -> None:
    from .events import timeout_job

    await timeout_job(yard, wait_id)


@hookimpl
def register_jobs(register: Any) -> None:
    register(DELIVER_JOB, _deliver)
    register(TIMEOUT_JOB, _time_out)
