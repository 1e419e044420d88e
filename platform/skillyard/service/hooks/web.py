"""The ``web`` channel's inbound messages: JSON ``{message, session?, event_id?}`` from a front end holding a token
(the token is the sender; there is no third-party signature to check). The reply is a web message of the session
(``skillyard messages --session S``, the console's chat)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..auth import Principal
from ..errors import validation_detail
from ..sessions import check_session, default_session
from .inbound import HookRefused, Inbound, Parsed

SHAPE = 'send {"message": "…", "session": "…"} (session and event_id optional)'


class WebMessage(BaseModel):
    """A web message's fields: who sends it is the token's, never the body's, so any other field is refused."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(pattern=r"\S", description="the text to the agent, not blank")
    session: str | None = None
    event_id: str | int | None = None


async def parse(request: Request, body: bytes, principal: Principal) -> Parsed:
    try:
        payload = WebMessage.model_validate_json(body)
    except ValidationError as exc:
        if exc.errors()[0]["type"] == "json_invalid":
            raise HookRefused(400, "the body is not JSON", SHAPE) from None
        raise HookRefused(422, validation_detail(exc)[0], SHAPE) from None
    session = payload.session or default_session(principal)
    try:
        check_session(session)
    except Exception:
        raise HookRefused(
            400, f"session {session!r} is not a session id", "use letters, digits, '_', '-', '.'"
        ) from None
    event_id = str(payload.event_id or uuid.uuid4().hex)[:200]
    identity: dict[str, Any] = principal.context
    inbound = Inbound(
        event_id=event_id,
        sender=principal.owner,
        chat=session,
        text=payload.message,
        extra={"identity": identity, "owner": principal.owner, "org_id": principal.org_id},
    )
    return Parsed(JSONResponse({"accepted": True, "session": session, "event_id": event_id}, status_code=202), inbound)
