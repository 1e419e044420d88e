"""DingTalk robot callbacks: the ``timestamp`` and ``sign`` headers checked (HMAC-SHA256 of ``timestamp\\nsecret``
with the app secret, within an hour, as DingTalk signs them); de-duplicated by ``msgId``. In a group only a
message that @-mentions the robot (``isInAtList``) counts, and is answered in the group (``group:<conversationId>``,
the robot's group send). A picture, a file or the pictures of a rich text keep
their ``downloadCode`` for the job to fetch."""

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
    content: dict[str, Any] = payload["content"] if isinstance(payload.get("content"), dict) else {}
    parts = [content, *(p for p in content.get("richText") or [] if isinstance(p, dict))]
    coded = [part for part in parts if part.get("downloadCode")]
    files = [  # fetched by DingtalkChannel.inbound_file; a picture has no name: its type gives the extension
        {"download_code": str(part["downloadCode"]), "filename": str(part.get("fileName") or f"picture_{number}")}
        for number, part in enumerate(coded, 1)
    ]
    text = (payload.get("text") or {}).get("content") or "".join(str(p.get("text") or "") for p in parts[1:])
    return Parsed(
        message=Inbound(
            event_id=str(payload.get("msgId") or ""),
            sender=sender,
            chat=f"group:{payload.get('conversationId') or ''}" if group else sender,  # where the answer goes
            text=str(text).strip(),
            group=group,
            mentioned=not group or bool(payload.get("isInAtList")),
            sender_name=str(payload.get("senderNick") or ""),
            files=files,
        )
    )
