"""Async skills (§8): on non-web channels an ``async: true`` skill answers at once and runs in the background;
its result and files are pushed to the conversation it came from when it finishes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..credentials import masked_logger
from ..outputs.display import RICH_CHANNELS

if TYPE_CHECKING:
    from ..catalog.skill import Skill
    from ..yard import SkillYard
    from .run import Run

log = masked_logger("skillyard.background")


class BackgroundRuns:
    """The background runs of one host (asyncio tasks in the embedded setup)."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()

    def start(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def drain(self) -> None:
        """Wait for the runs still going (a host that closes finishes what it promised)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


def runs_in_background(skill: Skill, ctx: dict[str, Any]) -> bool:
    """``async: true`` skills go to the background on channels other than web (§8); without a channel (CLI,
    scripts) nobody could receive the result later, so they run in the foreground."""
    return skill.is_async and bool(ctx["channel"]) and ctx["channel"] not in RICH_CHANNELS


def _summary(envelope: dict[str, Any], skill: str) -> str:
    if envelope.get("ok"):
        detail = envelope.get("user_message") or envelope.get("message") or envelope.get("output") or ""
        return f"{skill} finished." + (f" {detail}" if isinstance(detail, str) and detail.strip() else "")
    reason = envelope.get("user_message") or envelope.get("error") or "unknown error"
    return f"{skill} failed: {reason}"


def dispatch_background(
    yard: SkillYard, run: Run, configs: dict[str, Any], finish: Callable[[SkillYard, Run], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """Start the run in the background and return the immediate acknowledgement; ``finish`` is the pipeline's
    last steps (execute, process, record), passed in so this module never imports the pipeline back."""
    ctx = run.context
    run.background = True  # no default wall clock (§8)
    ctx.update(request=None, channel_registry=None, abort_signal=None)  # §8: nothing of the live request
    ctx["skill_configs"] = {**configs, run.skill.name: dict(configs)}  # pre-fetched before dispatch
    ctx["skill_args"] = dict(configs)

    async def background() -> None:
        try:
            envelope = await finish(yard, run)
        except Exception:  # the acknowledgement is already sent; make sure the failure is seen
            log.exception("background run of %r crashed", run.skill.name)
            envelope = {"ok": False, "error": f"{run.skill.name} crashed in the background"}
        files = _artifact_items(envelope, Path(ctx["workspace_dir"]))
        delivered = await yard.channels.deliver(ctx, _summary(envelope, run.skill.name), files)
        log.info("background run of %r finished (ok=%s, delivered=%s)", run.skill.name, envelope.get("ok"), delivered)

    yard.background.start(background())
    return {
        "ok": True,
        "success": True,
        "async": True,
        "message": f"{run.skill.name} is running in the background; its results will be sent to this "
        f"{ctx['channel']} conversation when it finishes.",
    }


def _artifact_items(envelope: dict[str, Any], workspace: Path) -> list[dict[str, Any]]:
    """The declared artifacts whose file exists, read as registration reads them: a channel is never handed a path
    to nothing, nor to a file outside the run's workspace."""
    from ..outputs.artifacts import declared_artifacts, existing_file

    return [
        dict(item)
        for item, _ in declared_artifacts(envelope)
        if existing_file(item.get("local_path"), workspace) is not None
    ]
