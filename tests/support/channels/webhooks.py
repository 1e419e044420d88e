"""The chat platforms' webhooks as they send them, for tests of ``/hooks/{channel}/{binding}``: each platform's
encryption and signature with the binding's secrets (``SECRETS``), ready-made message events, and waiting for
what the bot sent back to a fake platform."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from .fake_api import FakeApi, Request
from .vendors import FakeDingtalk, FakeWecom

#: The inbound secrets of the bindings' role (send_message configs), matching the fake vendors' credentials.
SECRETS = {
    "telegram_secret_token": "tg-secret-1",
    "slack_signing_secret": "slack-signing-1",
    "feishu_verification_token": "fs-verify-1",
    "feishu_encrypt_key": "fs-encrypt-key-1",
    "wecom_token": "wecomtoken1",
    "wecom_aes_key": "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C",
    "wecom_corp_id": FakeWecom.CORP_ID,  # WeCom encrypts callbacks for the corp id the API knows
    "dingtalk_app_secret": FakeDingtalk.APP_SECRET,  # DingTalk signs callbacks with the app secret
}


def aes_cbc(key: bytes, iv: bytes, data: bytes, block_bits: int) -> bytes:
    padder = padding.PKCS7(block_bits).padder()
    padded = padder.update(data) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return encryptor.update(padded) + encryptor.finalize()


def slack_headers(body: bytes, secret: str = SECRETS["slack_signing_secret"], at: int | None = None) -> dict:
    ts = str(at or int(time.time()))
    sig = "v0=" + hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig, "Content-Type": "application/json"}


def feishu_encrypted(payload: dict, key: str = SECRETS["feishu_encrypt_key"]) -> bytes:
    iv = os.urandom(16)
    data = aes_cbc(hashlib.sha256(key.encode()).digest(), iv, json.dumps(payload).encode(), 128)
    return json.dumps({"encrypt": base64.b64encode(iv + data).decode()}).encode()


def feishu_headers(body: bytes) -> dict:
    ts, nonce = str(int(time.time())), uuid.uuid4().hex
    sig = hashlib.sha256((ts + nonce + SECRETS["feishu_encrypt_key"]).encode() + body).hexdigest()
    return {"X-Lark-Request-Timestamp": ts, "X-Lark-Request-Nonce": nonce, "X-Lark-Signature": sig,
            "Content-Type": "application/json"}  # fmt: skip


def feishu_message(sender: str, chat: str, message_type: str, content: dict, *, group: bool = False,
                   mentions: list[dict] | None = None, message_id: str | None = None) -> dict:  # fmt: skip
    """An ``im.message.receive_v1`` event (plain: encrypt it with :func:`feishu_encrypted`)."""
    message = {"message_id": message_id or "om_" + uuid.uuid4().hex[:12], "chat_id": chat,
               "chat_type": "group" if group else "p2p", "message_type": message_type,
               "content": json.dumps(content, ensure_ascii=False), "mentions": mentions or []}  # fmt: skip
    return {
        "schema": "2.0",
        "header": {
            "event_id": uuid.uuid4().hex,
            "event_type": "im.message.receive_v1",
            "token": SECRETS["feishu_verification_token"],
        },
        "event": {"sender": {"sender_id": {"open_id": sender}, "sender_type": "user"}, "message": message},
    }


def wecom_encrypt(message: bytes, corp: str = SECRETS["wecom_corp_id"]) -> str:
    key = base64.b64decode(SECRETS["wecom_aes_key"] + "=")
    plain = os.urandom(16) + struct.pack(">I", len(message)) + message + corp.encode()
    return base64.b64encode(aes_cbc(key, key[:16], plain, 256)).decode()


def wecom_query(encrypted: str, token: str = SECRETS["wecom_token"]) -> dict:
    ts, nonce = str(int(time.time())), "n1"
    sig = hashlib.sha1("".join(sorted([token, ts, nonce, encrypted])).encode()).hexdigest()
    return {"msg_signature": sig, "timestamp": ts, "nonce": nonce}


def wecom_callback(fields: dict[str, str]) -> tuple[dict, str]:
    """The query and body of an application message callback whose inner XML holds ``fields``."""
    inner = "".join(f"<{k}><![CDATA[{v}]]></{k}>" for k, v in fields.items())
    encrypted = wecom_encrypt(f"<xml><ToUserName>{SECRETS['wecom_corp_id']}</ToUserName>{inner}</xml>".encode())
    return wecom_query(encrypted), f"<xml><ToUserName>ww</ToUserName><Encrypt>{encrypted}</Encrypt></xml>"


def dingtalk_headers(secret: str = SECRETS["dingtalk_app_secret"], at: int | None = None) -> dict:
    ts = str(at or int(time.time() * 1000))
    sign = base64.b64encode(hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), hashlib.sha256).digest()).decode()
    return {"timestamp": ts, "sign": sign}


async def sent(api: FakeApi, path_end: str, match: Callable[[Request], Any], *, count: int = 1,
               timeout: float = 30.0) -> list[Request]:  # fmt: skip
    """The requests to ``api`` whose path ends with ``path_end`` and that ``match``, once there are ``count``."""
    found: list[Request] = []
    for _ in range(int(timeout * 10)):
        found = [r for r in api.sent(path_end) if match(r)]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(found)} of {count} requests to …{path_end}; seen: {[r.path for r in api.requests]}")
