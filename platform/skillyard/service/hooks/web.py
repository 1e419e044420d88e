"""The ``web`` channel's inbound messages: JSON ``{message, session?, event_id?}`` from a front end holding a token
(the token is the sender; there is no third-party signature to check). The reply is a web message of the session
(``skillyard messages --session S``, the console's chat)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from ..auth import Principal
from ..sessions import check_session, default_session
from .inbound import HookRefused, Inbound, Parsed

#: A web message's fields: who sends it is the token's, never the body's.
FIELDS = frozenset({"message", "session", "event_id"})


async def parse(request: Request, body: bytes, principal: Principal) -> Parsed:
    try:
        payload = json.loads(body)
    except ValueError:
        raise HookRefused(400, "the body is not JSON", 'send {"message": "…", "session": "…"}') from None
    if not isinstance(payload, dict):
        raise HookRefused(422, "the body is not a JSON object", 'send {"message": "…", "session": "…"}')
    unknown = sorted(set(payload) - FIELDS)
    if unknown:
        raise HookRefused(
            422, f"{', '.join(unknown)}: not a field of a web message", f"send only {', '.join(sorted(FIELDS))}"
        )
    message = payload.get("message")
    if not isinstance(message, str) or not message.strip():
        raise HookRefused(422, "message: a non-empty text is required", 'send {"message": "…"}')
    session = payload.get("session") or default_session(principal)
    try:
        check_session(session)
    except Exception:
        raise HookRefused(
            400, f"session {session!r} is not a session id", "use letters, digits, '_', '-', '.'"
        ) from None
    event_id = str(payload.get("event_id") or uuid.uuid4().hex)[:200]
    identity: dict[str, Any] = principal.context
    inbound = Inbound(
        event_id=event_id,
        sender=principal.owner,
        chat=session,
        text=message,
        extra={"identity": identity, "owner": principal.owner, "org_id": principal.org_id},
    )
    return Parsed(JSONResponse({"accepted": True, "session": session, "event_id": event_id}, status_code=202), inbound)
