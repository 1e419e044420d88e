"""Telegram Bot API webhooks: an ``Update`` as JSON, verified by the ``X-Telegram-Bot-Api-Secret-Token`` header
(``setWebhook``'s ``secret_token``, the config ``telegram_secret_token``); de-duplicated by ``update_id``."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from .inbound import HookRefused, Inbound, Parsed, forged, same, secret

HEADER = "x-telegram-bot-api-secret-token"


async def parse(request: Request, body: bytes, configs: dict[str, Any]) -> Parsed:
    expected = secret(configs, "telegram_secret_token", "telegram")
    if not same(request.headers.get(HEADER, ""), expected):
        raise forged("X-Telegram-Bot-Api-Secret-Token header")
    try:
        update = json.loads(body)
    except ValueError:
        raise HookRefused(400, "the body is not JSON", "send a Telegram Update") from None
    message = update.get("message") if isinstance(update, dict) else None
    if not isinstance(message, dict) or "update_id" not in update:
        return Parsed()  # edits, channel posts, member updates …: nothing to answer
    sender = message.get("from") or {}
    chat = message.get("chat") or {}
    if sender.get("is_bot") or "id" not in chat:
        return Parsed()
    text = str(message.get("text") or message.get("caption") or "")
    entities = message.get("entities") or message.get("caption_entities") or []
    mentions = [text[e["offset"] : e["offset"] + e["length"]] for e in entities if e.get("type") == "mention"]
    files = []
    if message.get("photo"):
        biggest = message["photo"][-1]
        files.append({"file_id": biggest["file_id"], "filename": f"photo_{message.get('message_id')}.jpg"})
    for kind in ("document", "video", "audio", "voice"):
        item = message.get(kind)
        if isinstance(item, dict) and item.get("file_id"):
            files.append(
                {"file_id": item["file_id"], "filename": item.get("file_name") or f"{kind}_{item['file_id'][:8]}"}
            )
    group = chat.get("type") in ("group", "supergroup")
    name = " ".join(p for p in (sender.get("first_name"), sender.get("last_name")) if p) or sender.get("username", "")
    return Parsed(
        message=Inbound(
            event_id=str(update["update_id"]),
            sender=str(sender.get("id", "")),
            chat=str(chat["id"]),
            text=text,
            group=group,
            mentioned=not group or bool(mentions),  # the job checks a mention names this bot (getMe)
            sender_name=str(name),
            files=files,
            extra={"mentions": mentions},
        )
    )
