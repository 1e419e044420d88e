"""WeCom (企业微信) application callbacks: ``msg_signature`` (SHA-1 over the token, timestamp, nonce and the
ciphertext) checked, the message decrypted with the EncodingAESKey (WXBizMsgCrypt), the URL check (GET with
``echostr``) answered with the decrypted echo; de-duplicated by ``MsgId``. Application messages are one-to-one; an
image, file, voice or video keeps its ``MediaId`` (an image its ``PicUrl`` too) for the job to fetch, a voice its
transcript (``Recognition``) as the text when WeCom made one."""

from __future__ import annotations

from typing import Any

import defusedxml.ElementTree as defused
from defusedxml import DefusedXmlException
from fastapi import Request

from .crypto import Undecryptable, wecom_decrypt, wecom_signature
from .inbound import HookRefused, Inbound, Parsed, forged, ok_text, same, secret

#: The largest callback XML read (a text message is a few hundred bytes).
MAX_XML = 64 * 1024


def _xml(raw: bytes) -> dict[str, str]:
    if len(raw) > MAX_XML:
        raise HookRefused(400, f"the callback XML is larger than {MAX_XML} bytes", "send WeCom's own callback")
    try:
        root = defused.fromstring(raw, forbid_dtd=True)  # no DTD, so no entity expansion, in any encoding
    except DefusedXmlException:
        raise HookRefused(400, "the callback XML has a DTD", "send WeCom's own callback") from None
    except defused.ParseError:
        raise HookRefused(400, "the body is not XML", "send WeCom's callback XML") from None
    return {child.tag: (child.text or "") for child in root}


def _open(request: Request, configs: dict[str, Any], encrypted: str) -> bytes:
    token = secret(configs, "wecom_token", "wecom")
    aes_key = secret(configs, "wecom_aes_key", "wecom")
    query = request.query_params
    expected = wecom_signature(token, query.get("timestamp", ""), query.get("nonce", ""), encrypted)
    if not same(query.get("msg_signature", ""), expected):
        raise forged("msg_signature")
    try:
        message, receiver = wecom_decrypt(aes_key, encrypted)
    except Undecryptable as exc:
        raise HookRefused(401, f"the message cannot be decrypted ({exc})", "check wecom_aes_key") from None
    corp = str(configs.get("wecom_corp_id") or "").strip()
    if corp and receiver != corp:
        raise HookRefused(401, "the message was encrypted for another corp id", "check wecom_corp_id")
    return message


async def parse(request: Request, body: bytes, configs: dict[str, Any]) -> Parsed:
    if request.method == "GET":  # the URL check when the callback is configured
        return Parsed(ok_text(_open(request, configs, request.query_params.get("echostr", "")).decode()))
    outer = _xml(body)
    inner = _xml(_open(request, configs, outer.get("Encrypt", "")))
    kind = inner.get("MsgType")
    if kind not in ("text", "image", "file", "voice", "video"):
        return Parsed(ok_text(""))
    sender = inner.get("FromUserName", "")
    files = []
    if inner.get("MediaId") or inner.get("PicUrl"):  # fetched by WecomChannel.inbound_file
        name = inner.get("FileName") or f"{kind}_{inner.get('MsgId') or inner.get('MediaId', '')[:12]}"
        if kind == "voice" and inner.get("Format", "").isalnum():  # amr or speex: no Content-Type names them
            name += "." + inner["Format"].lower()
        files.append({"media_id": inner.get("MediaId", ""), "url": inner.get("PicUrl", ""), "filename": name})
    return Parsed(
        ok_text(""),
        Inbound(
            event_id=inner.get("MsgId") or f"{sender}:{inner.get('CreateTime', '')}",
            sender=sender,
            chat=sender,
            text=inner.get("Content") or inner.get("Recognition", ""),  # a voice's transcript, when WeCom made one
            files=files,
        ),
    )
