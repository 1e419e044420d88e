"""Default plugin of the notify skill: the ``skillyard notify alias`` commands (added lazily: ``cli.py``)."""

from __future__ import annotations

from typing import Any

from skillyard import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_lazy_command(
        "notify", "skillyard.builtin_skills.notify.cli:notify_group", help="Notify aliases: set, list, remove."
    )
