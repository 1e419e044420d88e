"""Default plugin of the channels: the artifact-delivery result processor and the ``messages`` / ``pending``
commands (added lazily, so ``skillyard --help`` loads none of them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..hookspecs import hookimpl

if TYPE_CHECKING:
    from ..invoke.run import Run


async def deliver_artifacts(envelope: dict[str, Any], run: Run) -> dict[str, Any]:
    """Send a run's artifacts to its conversation (:mod:`.artifacts`)."""
    return await run.yard.channels.artifacts.after_run(envelope, run)


@hookimpl
def register_result_processors(register: Any) -> None:
    from .artifacts import DELIVER

    register(DELIVER, "deliver_artifacts", deliver_artifacts)


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_lazy_command(
        "messages", "skillyard.channels.cli:messages_cmd", help="Read the web channel's messages of a session."
    )
    cli.add_lazy_command(
        "pending", "skillyard.channels.cli:pending_group", help="Messages waiting for a reply: list, reply."
    )
