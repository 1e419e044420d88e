"""Default plugin of the chain engine: the ``chain``, ``schedule`` and ``worker`` commands, added lazily."""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_lazy_command(
        "chain", "skillyard.chains.cli:chain_group", help="Multi-step chains of skills: add, run, list, cancel."
    )
    cli.add_lazy_command("schedule", "skillyard.chains.cli:schedule_group", help="Run chains on cron schedules.")
    cli.add_lazy_command("worker", "skillyard.chains.cli:worker_cmd", help="Run chain steps and the schedule ticker.")
