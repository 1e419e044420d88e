"""Slack Events API: verified by the signing secret (``X-Slack-Signature``: v0, HMAC-SHA256 of ``v0:ts:body``,
timestamps within 5 minutes); ``url_verification`` answered with its challenge; de-duplicated by ``event_id``."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from .crypto import slack_signature
from .inbound import HookRefused, Inbound, Parsed, forged, same, secret

WINDOW_S = 300
_MENTION = re.compile(r"<@([A-Z0-9]+)>")


async def parse(request: Request, body: bytes, configs: dict[str, Any]) -> Parsed:
    signing = secret(configs, "slack_signing_secret", "slack")
    timestamp = request.headers.get("x-slack-request-timestamp", "")
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > WINDOW_S:
        raise HookRefused(401, "X-Slack-Request-Timestamp is missing or more than 5 minutes off", "send it fresh")
    if not same(request.headers.get("x-slack-signature", ""), slack_signature(signing, timestamp, body)):
        raise forged("X-Slack-Signature")
    try:
        payload = json.loads(body)
    except ValueError:
        raise HookRefused(400, "the body is not JSON", "send a Slack event") from None
    if payload.get("type") == "url_verification":
        return Parsed(JSONResponse({"challenge": str(payload.get("challenge", ""))}))
    event = payload.get("event") or {}
    if payload.get("type") != "event_callback" or event.get("bot_id") or event.get("subtype"):
        return Parsed()
    kind = event.get("type")
    direct = event.get("channel_type") == "im"
    # In channels Slack sends an app_mention for a message that mentions the bot (and a message event too when the
    # app subscribes to both): only the app_mention counts there; in direct messages the message event does.
    if (direct and kind != "message") or (not direct and kind != "app_mention"):
        return Parsed()
    bots = {str(a.get("user_id")) for a in payload.get("authorizations") or [] if a.get("user_id")}
    text = str(event.get("text") or "")
    files = [
        {"url": f["url_private_download"], "filename": f.get("name") or f.get("id", "file")}
        for f in event.get("files") or []
        if isinstance(f, dict) and f.get("url_private_download")
    ]
    return Parsed(
        message=Inbound(
            event_id=str(payload.get("event_id") or f"{event.get('channel')}:{event.get('ts')}"),
            sender=str(event.get("user", "")),
            chat=str(event.get("channel", "")),
            text=_MENTION.sub(lambda m: "" if m.group(1) in bots else m.group(0), text).strip(),
            group=not direct,
            mentioned=direct or kind == "app_mention",
            files=files,
        )
    )
