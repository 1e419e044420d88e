"""DingTalk robot callbacks: the ``timestamp`` and ``sign`` headers checked (HMAC-SHA256 of ``timestamp\\nsecret``
with the app secret, within an hour, as DingTalk signs them); de-duplicated by ``msgId``. In a group only a
message that @-mentions the robot (``isInAtList``) counts."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import Request

from .crypto import dingtalk_signature
from .inbound import HookRefused, Inbound, Parsed, forged, same, secret

WINDOW_S = 3600


async def parse(request: Request, body: bytes, configs: dict[str, Any]) -> Parsed:
    app_secret = secret(configs, "dingtalk_app_secret", "dingtalk")
    timestamp = request.headers.get("timestamp", "")
    if not timestamp.isdigit() or abs(time.time() * 1000 - int(timestamp)) > WINDOW_S * 1000:
        raise HookRefused(401, "the timestamp header is missing or more than an hour off", "send it fresh")
    if not same(request.headers.get("sign", ""), dingtalk_signature(app_secret, timestamp)):
        raise forged("sign header")
    try:
        payload = json.loads(body)
    except ValueError:
        raise HookRefused(400, "the body is not JSON", "send DingTalk's robot callback") from None
    if not isinstance(payload, dict) or payload.get("msgtype") not in ("text", "picture", "file", "richText"):
        return Parsed()
    group = str(payload.get("conversationType")) == "2"
    sender = str(payload.get("senderStaffId") or payload.get("senderId") or "")
    files = []
    content = payload.get("content") or {}
    if isinstance(content, dict) and content.get("downloadCode"):
        files.append({"download_code": content["downloadCode"], "filename": content.get("fileName") or "file"})
    return Parsed(
        message=Inbound(
            event_id=str(payload.get("msgId") or ""),
            sender=sender,
            chat=sender,  # the adapter sends to users: a group's message is answered to its sender
            text=str((payload.get("text") or {}).get("content") or "").strip(),
            group=group,
            mentioned=not group or bool(payload.get("isInAtList")),
            sender_name=str(payload.get("senderNick") or ""),
            files=files,
            extra={"conversation_id": payload.get("conversationId")},
        )
    )
