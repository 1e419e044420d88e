"""The job side of an async skill's background run (§8): run it detached, push the result to its conversation.

Whichever process runs the job: the one that accepted it (with the configs it fetched before dispatch, its
overlay) or a worker that recovered it after that process died (configs read now).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..credentials import masked_logger
from ..envelope import failure
from ..errors import SkillyardError
from ..invoke import pipeline
from ..invoke.background import PULLED_CHANNELS, deliver_result
from ..invoke.policy import DETACHED
from . import background_runs

if TYPE_CHECKING:
    from ..yard import SkillYard

log = masked_logger("skillyard.background")


async def run_background_job(
    yard: SkillYard, name: str, input: dict[str, Any], context: dict[str, Any], token: str, run_id: str = ""
) -> None:
    """Run one background job, record its envelope under its run id and push its result to the conversation it
    came from (a job deferred before run ids existed has none)."""
    overlay = yard.background.overlay(token)
    if overlay is None:
        log.info("background run of %r recovered from another process: configs are read now", name)
    ctx = {**context, **(overlay or {})}
    try:
        envelope = await pipeline.execute(yard, name, input, ctx, policy=DETACHED)
    except SkillyardError as exc:  # refused before it ran here (a skill this worker does not have, bad input)
        envelope = failure(name, str(exc))
    except Exception:  # the acknowledgement was sent long ago; make sure the failure is seen
        log.exception("background run of %r crashed", name)
        envelope = failure(name, f"{name} crashed in the background")
    finally:
        yard.background.forget(token)
    if run_id:
        await background_runs.finished(yard, run_id, envelope)
    if ctx.get("channel") in PULLED_CHANNELS:
        return
    resolved = yard.resolve(name)
    try:
        await deliver_result(yard, resolved[0].name if resolved else name, envelope, ctx)
    except Exception:  # a channel adapter's failure: the run itself is over and recorded
        log.exception("the result of background run %r could not be delivered", name)
