"""Feishu (Lark) event callbacks: ``{"encrypt": …}`` decrypted with the encrypt key (AES-256-CBC) and checked by
``X-Lark-Signature`` when one is set, the verification token checked, ``url_verification`` answered with its
challenge; ``im.message.receive_v1`` de-duplicated by the header's ``event_id``. An image, file, audio or video
message keeps its key for the job to fetch, a rich-text (``post``) message its text and the keys of its images and
videos; a group message keeps the open_ids it mentions."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from .crypto import Undecryptable, feishu_decrypt, feishu_signature
from .inbound import HookRefused, Inbound, Parsed, forged, same, secret

#: By message_type: the content's key that names the file, and the resource type it is fetched as.
_FILE_KEYS = {
    "image": ("image_key", "image"),
    "file": ("file_key", "file"),
    "audio": ("file_key", "file"),
    "media": ("file_key", "file"),
}


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
    if not isinstance(content, dict):
        content = {}
    post = _post_body(content) if message.get("message_type") == "post" else None
    text = _post_text(post) if post is not None else str(content.get("text") or "")
    mentions = [m for m in message.get("mentions") or [] if isinstance(m, dict)]
    for mention in mentions:
        text = text.replace(str(mention.get("key", "")), "").strip()
    group = message.get("chat_type") == "group"
    return Parsed(
        message=Inbound(
            event_id=str(header.get("event_id") or message.get("message_id", "")),
            sender=open_id,
            chat=str(message.get("chat_id", "")) if group else open_id,
            text=text,
            group=group,
            # Feishu delivers a group's messages only when they @ the bot unless the app may read them all, and
            # an @ may name anyone: the job checks that one of the mentioned open_ids is the bot's
            mentioned=not group or bool(mentions),
            files=_post_files(message, post) if post is not None else _files(message, content),
            extra={"mentions": [str((m.get("id") or {}).get("open_id") or "") for m in mentions]},
        )
    )


def _post_body(content: dict[str, Any]) -> dict[str, Any]:
    """A rich-text (``post``) message's ``{title, content}``: the content itself, or under its one locale
    (``{"zh_cn": {"title", "content"}}``, as Feishu sends some)."""
    if isinstance(content.get("content"), list):
        return content
    return next((v for v in content.values() if isinstance(v, dict) and isinstance(v.get("content"), list)), {})


def _post_paragraphs(body: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The paragraphs of a rich-text body, each a list of its elements."""
    paragraphs = body.get("content") or []
    return [[e for e in line if isinstance(e, dict)] for line in paragraphs if isinstance(line, list)]


def _post_text(body: dict[str, Any]) -> str:
    """The title and each paragraph's text (text, links and mentions, whose keys the caller strips), a line each."""
    lines = [str(body.get("title") or "")]
    for line in _post_paragraphs(body):
        words = [str(e.get("text") or e.get("user_name") or "") for e in line if e.get("tag") in ("text", "a", "at")]
        lines.append("".join(words))
    return "\n".join(line for line in lines if line.strip())


def _post_files(message: dict[str, Any], body: dict[str, Any]) -> list[dict[str, Any]]:
    """The images (``img``) and videos (``media``) inside a rich-text message, fetched as its resources."""
    files = []
    message_id = str(message.get("message_id") or "")
    for element in (e for line in _post_paragraphs(body) for e in line):
        tag = element.get("tag")
        key = element.get("image_key") if tag == "img" else element.get("file_key") if tag == "media" else None
        if key:
            kind = "image" if tag == "img" else "file"
            files.append({"type": kind, "key": str(key), "message_id": message_id, "filename": str(key)})
    return files


def _files(message: dict[str, Any], content: dict[str, Any]) -> list[dict[str, Any]]:
    """The descriptor of a message's image or file (the key and the resource type that fetch it from the
    message's resources: ``FeishuChannel.inbound_file``)."""
    field, kind = _FILE_KEYS.get(str(message.get("message_type")), ("", ""))
    key = content.get(field) if field else None
    if not key:
        return []
    name = str(content.get("file_name") or key)  # an image has no name: its type gives the extension
    return [{"type": kind, "key": str(key), "message_id": str(message.get("message_id") or ""), "filename": name}]
