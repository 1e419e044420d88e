"""Feishu (Lark) event callbacks: ``{"encrypt": …}`` decrypted with the encrypt key (AES-256-CBC) and checked by
``X-Lark-Signature`` when one is set, the verification token checked, ``url_verification`` answered with its
challenge; ``im.message.receive_v1`` de-duplicated by the header's ``event_id``."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from .crypto import Undecryptable, feishu_decrypt, feishu_signature
from .inbound import HookRefused, Inbound, Parsed, forged, same, secret


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        raise HookRefused(400, "the body is not JSON", "send a Feishu event callback") from None
    if not isinstance(value, dict):
        raise HookRefused(400, "the body is not a JSON object", "send a Feishu event callback")
    return value


async def parse(request: Request, body: bytes, configs: dict[str, Any]) -> Parsed:
    token = secret(configs, "feishu_verification_token", "feishu")
    encrypt_key = str(configs.get("feishu_encrypt_key") or "").strip()
    payload = _json(body)
    if "encrypt" in payload:
        if not encrypt_key:
            raise HookRefused(403, "the event is encrypted and the binding has no feishu_encrypt_key", "set it")
        signature = request.headers.get("x-lark-signature")
        if signature is not None:
            expected = feishu_signature(
                request.headers.get("x-lark-request-timestamp", ""),
                request.headers.get("x-lark-request-nonce", ""),
                encrypt_key,
                body,
            )
            if not same(signature, expected):
                raise forged("X-Lark-Signature")
        try:
            payload = _json(feishu_decrypt(encrypt_key, str(payload["encrypt"])))
        except Undecryptable as exc:
            raise HookRefused(401, f"the event cannot be decrypted ({exc})", "check feishu_encrypt_key") from None
    elif encrypt_key:
        raise HookRefused(401, "the event is not encrypted although an encrypt key is set", "send it encrypted")
    header = payload.get("header") or {}
    given = payload.get("token") if payload.get("type") == "url_verification" else header.get("token")
    if not same(str(given or ""), token):
        raise forged("verification token")
    if payload.get("type") == "url_verification":
        return Parsed(JSONResponse({"challenge": str(payload.get("challenge", ""))}))
    if header.get("event_type") != "im.message.receive_v1":
        return Parsed()
    event = payload.get("event") or {}
    sender = event.get("sender") or {}
    if sender.get("sender_type") not in (None, "user"):
        return Parsed()
    message = event.get("message") or {}
    open_id = str((sender.get("sender_id") or {}).get("open_id", ""))
    try:
        content = json.loads(message.get("content") or "{}")
    except ValueError:
        content = {}
    text = str(content.get("text") or "")
    mentions = message.get("mentions") or []
    for mention in mentions:
        text = text.replace(str(mention.get("key", "")), "").strip()
    files = []
    for kind, field in (("image", "image_key"), ("file", "file_key")):
        if content.get(field):
            name = content.get("file_name") or f"{content[field]}.{'png' if kind == 'image' else 'bin'}"
            files.append(
                {"type": kind, "key": content[field], "message_id": message.get("message_id"), "filename": name}
            )
    group = message.get("chat_type") == "group"
    return Parsed(
        message=Inbound(
            event_id=str(header.get("event_id") or message.get("message_id", "")),
            sender=open_id,
            chat=str(message.get("chat_id", "")) if group else open_id,
            text=text,
            group=group,
            # Feishu delivers a group's messages only when they @ the bot (unless the app may read them all):
            # a group message counts when it mentions someone.
            mentioned=not group or bool(mentions),
            files=files,
        )
    )
