"""``/api/agents/{code}/sessions/{id}``: messages, resumes, the stored session and its progress stream (SSE);
``/api/agent-events``."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, ConfigDict, Field

from ...errors import SkillyardError
from ..errors import bad_request, not_found
from ..sessions import check_session
from .deps import AdminDep, CallerDep, service_of

router = APIRouter(prefix="/api", tags=["agents"])
CHANNEL = "api"
#: A stream ends after this long without any event (a client reconnects with Last-Event-ID).
STREAM_IDLE_S = 300.0
#: An event id: a row id of the turn events (PostgreSQL bigint), in ASCII digits.
EVENT_ID = re.compile("[0-9]{1,18}")
PING_S = 15.0


class MessageBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(min_length=1, max_length=100_000, description="The user's message.")


class ResumeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: str = Field(description="REPLY, CONFIRM, REJECT, CANCEL or CHOOSE.")
    text: str | None = Field(default=None, max_length=100_000, description="The answer (REPLY, CHOOSE).")
    edit: dict[str, Any] | None = Field(default=None, description="CONFIRM: argument values changed before it runs.")
    only: list[str] | None = Field(default=None, description="CONFIRM of a batch: the call ids to run.")


class EventBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    event: str = Field(min_length=1, max_length=200)
    key: str = Field(min_length=1, max_length=200)
    payload: dict[str, Any] = Field(default_factory=dict)


@router.post("/agents/{code}/sessions/{session_id}/messages", summary="Send a message; answers the TurnResult")
async def send_message(
    request: Request, code: str, session_id: str, body: MessageBody, principal: CallerDep
) -> dict[str, Any]:
    service = service_of(request)
    check_session(session_id)
    turn = await service.agents.send(code, session_id, principal, body.message, {"channel": CHANNEL})
    return turn.as_dict()


@router.post("/agents/{code}/sessions/{session_id}/resume", summary="Answer the open checkpoint")
async def resume(
    request: Request, code: str, session_id: str, body: ResumeBody, principal: CallerDep
) -> dict[str, Any]:
    service = service_of(request)
    check_session(session_id)
    await service.owners.check(session_id, principal)
    turn = await service.agents.resume(code, session_id, principal, body.action, body.text, body.edit, body.only)
    return turn.as_dict()


@router.get("/agents/{code}/sessions/{session_id}", summary="A session: graph, checkpoint, history, approvals")
async def session_view(request: Request, code: str, session_id: str, principal: CallerDep) -> dict[str, Any]:
    service = service_of(request)
    await service.owners.check(session_id, principal)
    view = await service.agents.session_view(session_id)
    if view is None or view["agent_code"] != code:
        raise not_found(f"agent {code!r} has no session {session_id!r}", "send a message to start it")
    return view


async def stream_start(request: Request, session_id: str, principal: CallerDep) -> int:
    """Checked before the stream starts: the caller may read the session; the event id to stream after."""
    service = service_of(request)
    check_session(session_id)
    # Streaming is a use: a session nobody used yet becomes the caller's, so nobody else's turn streams to it.
    await service.owners.claim(session_id, principal)
    last = request.headers.get("last-event-id") or request.query_params.get("after")
    if last is not None and not EVENT_ID.fullmatch(last):
        raise bad_request(f"Last-Event-ID {last[:40]!r} is not an event id", "send the id of the last event you got")
    return int(last) if last is not None else await service.events.start_of_open_turn(session_id)


@router.get(
    "/agents/{code}/sessions/{session_id}/stream",
    response_class=EventSourceResponse,
    summary="The progress events of the session's running (or next) turn, as Server-Sent Events",
)
async def stream(
    request: Request, code: str, session_id: str, after: Annotated[int, Depends(stream_start)]
) -> AsyncIterator[ServerSentEvent]:
    """``started``, ``tool`` … and ``finished`` of one turn (then the stream ends); ``?after=ID`` or Last-Event-ID
    resumes after an event."""
    async for row in turn_rows(request, session_id, after):
        if row is None:
            yield ServerSentEvent(comment="ping")
        else:
            data = {**row["event"], "turn_id": row["turn_id"]}
            yield ServerSentEvent(data=data, event=row["kind"], id=str(row["id"]))


async def turn_rows(request: Request, session_id: str, after: int) -> AsyncIterator[dict[str, Any] | None]:
    """The session's turn events after ``after`` as they are written (by any process), until the turn followed
    finishes, the client leaves or nothing happens for STREAM_IDLE_S; None every PING_S without an event."""
    service = service_of(request)
    loop = asyncio.get_running_loop()
    idle_since = loop.time()
    following: str | None = None
    with service.bus.turn_waiter(session_id) as woken:
        while loop.time() - idle_since < STREAM_IDLE_S:
            woken.clear()
            for row in await service.events.after(session_id, after):
                after = row["id"]
                idle_since = loop.time()
                if row["kind"] == "started":
                    following = following or row["turn_id"]
                yield row
                if row["kind"] == "finished" and following in (None, row["turn_id"]):
                    return
            if await request.is_disconnected():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), PING_S)
            if not woken.is_set():
                yield None


@router.post("/agent-events", summary="An external event for the nodes of your organisation waiting for it (admin)")
async def agent_event(request: Request, body: EventBody, principal: AdminDep) -> dict[str, Any]:
    """Only an admin token delivers events, and only to its own organisation's waiting nodes (docs/agents.md
    "External events"); each resume runs as a queued job of this process, not inside the request."""
    if not principal.org_id:
        raise bad_request("the token names no organisation", "use a token made with --org")
    try:
        return await service_of(request).yard.agent_event(body.event, body.key, body.payload, org_id=principal.org_id)
    except SkillyardError as exc:
        raise bad_request(str(exc)) from None
