"""Async skills (§8): on non-web channels an ``async: true`` skill answers at once and runs in the background;
its result and files are pushed to the conversation it came from when it finishes.

This module is the host's side: which runs go to the background, what their job carries, the acknowledgement and
the delivery. The job queue that runs them is :mod:`skillyard.chains.background`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..credentials import masked_logger
from ..outputs.display import RICH_CHANNELS
from .context import CONFIG_KEYS, IN_PROCESS_ONLY

if TYPE_CHECKING:
    from ..catalog.skill import Skill
    from ..yard import SkillYard
    from .run import Run

log = masked_logger("skillyard.background")
#: Channels whose clients ask for a background run's outcome by its run id (MCP's ``skillyard_run_status``) instead
#: of having it pushed to a conversation.
PULLED_CHANNELS = frozenset({"mcp"})


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


#: Never in a background job's arguments: live objects, configs (the worker fetches those), the user's message.
_NOT_PORTABLE = frozenset({*IN_PROCESS_ONLY, *CONFIG_KEYS, "raw_input", "_call_depth"})


def background_job(name: str, input: Mapping[str, Any], run: Run, configs: Mapping[str, Any]) -> BackgroundJob:
    """What a background run needs to run anywhere, split in two: ``payload`` for the job's arguments (JSON, no
    secret: configs are fetched by whoever runs it) and ``overlay`` for the process that accepted it (the configs
    fetched before dispatch, §8, and the user's message), which a worker recovering the job after a crash lacks."""
    ctx = run.context
    portable = {k: v for k, v in ctx.items() if k not in _NOT_PORTABLE and k not in configs and _is_json(v)}
    run_id = uuid.uuid4().hex
    payload = {"name": name, "input": dict(input), "context": portable, "run_id": run_id}
    overlay = {"skill_args": dict(configs), "raw_input": ctx.get("raw_input", "")}
    return BackgroundJob(payload, overlay)


def _is_json(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, list, dict))


@dataclass(frozen=True)
class BackgroundJob:
    payload: dict[str, Any]
    overlay: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.payload["run_id"])


def acknowledgement(skill: str, channel: str, run_id: str) -> dict[str, Any]:
    """The immediate answer of an async skill (§8), with the id its outcome is recorded under."""
    return {
        "ok": True,
        "success": True,
        "async": True,
        "run_id": run_id,
        "message": f"{skill} is running in the background; its results will be sent to this {channel} conversation "
        "when it finishes.",
    }


async def deliver_result(yard: SkillYard, skill: str, envelope: dict[str, Any], ctx: Mapping[str, Any]) -> bool:
    """Push a finished background run's summary and files to the conversation it came from (§8)."""
    files = _artifact_items(envelope, Path(ctx["workspace_dir"])) if ctx.get("workspace_dir") else []
    delivered = await yard.channels.deliver(dict(ctx), _summary(envelope, skill), files)
    log.info("background run of %r finished (ok=%s, delivered=%s)", skill, envelope.get("ok"), delivered)
    return bool(delivered)


def _artifact_items(envelope: dict[str, Any], workspace: Path) -> list[dict[str, Any]]:
    """The declared artifacts whose file exists, read as registration reads them: a channel is never handed a path
    to nothing, nor to a file outside the run's workspace."""
    from ..outputs.artifacts import declared_artifacts, existing_file

    return [
        dict(item)
        for item, _ in declared_artifacts(envelope)
        if existing_file(item.get("local_path"), workspace) is not None
    ]
