"""The jobs of external events (events.py), registered through ``register_jobs`` by the agent plugin: a delivered
event resumes its waiting node, a deadline resumes it with EVENT_TIMEOUT. Each loads the session's agent as
``resume_session`` does and resumes under the session's lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .events import TIMED_OUT, delivered, log, settle_wait
from .runner import agent_for_session

if TYPE_CHECKING:
    from ..yard import SkillYard


async def deliver_job(yard: SkillYard, wait_id: str) -> None:
    """Resume the node of a DELIVERED wait with its event's payload."""
    found = await delivered(yard, wait_id)
    if found is None:
        log.info("wait %s is no longer delivered (cancelled meanwhile): nothing to resume", wait_id)
        return
    wait, event = found
    agent = await agent_for_session(yard, wait["session_id"])
    turn = await agent.event_arrived(wait["session_id"], wait_id, event["payload"], event["id"])
    log.info("event %s resumed session %s: %s", event["id"], wait["session_id"], turn.status if turn else "not waiting")


async def timeout_job(yard: SkillYard, wait_id: str) -> None:
    """At a wait's deadline: resume its node with EVENT_TIMEOUT, unless the event came first."""
    wait = await settle_wait(yard, wait_id, TIMED_OUT)
    if wait is None:
        return  # delivered or cancelled before its deadline
    agent = await agent_for_session(yard, wait["session_id"])
    turn = await agent.event_arrived(wait["session_id"], wait_id, None)
    log.info("wait %s timed out: session %s %s", wait_id, wait["session_id"], turn.status if turn else "not waiting")
