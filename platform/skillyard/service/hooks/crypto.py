"""The channels' callback cryptography, on the ``cryptography`` package (never hand-rolled ciphers): AES-256-CBC of
Feishu's encrypt key and of WeCom's EncodingAESKey (WXBizMsgCrypt's framing), HMAC-SHA256 of Slack and DingTalk."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


class Undecryptable(ValueError):
    pass


def _cbc_decrypt(key: bytes, iv: bytes, data: bytes, block_bits: int) -> bytes:
    if not data or len(data) % 16:
        raise Undecryptable("the ciphertext is not whole AES blocks")
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    plain = decryptor.update(data) + decryptor.finalize()
    unpadder = padding.PKCS7(block_bits).unpadder()
    try:
        return unpadder.update(plain) + unpadder.finalize()
    except ValueError:
        raise Undecryptable("the padding is wrong: another key encrypted it") from None


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise Undecryptable("not base64") from None


def feishu_decrypt(encrypt_key: str, encrypted: str) -> bytes:
    """Feishu's ``{"encrypt": …}``: AES-256-CBC, key SHA-256(encrypt key), the IV the first 16 bytes."""
    raw = _b64(encrypted)
    key = hashlib.sha256(encrypt_key.encode()).digest()
    return _cbc_decrypt(key, raw[:16], raw[16:], 128)


def feishu_signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def wecom_key(aes_key: str) -> bytes:
    key = _b64(aes_key + "=")
    if len(key) != 32:
        raise Undecryptable("an EncodingAESKey is 43 characters of base64 (32 bytes)")
    return key


def wecom_signature(token: str, timestamp: str, nonce: str, encrypted: str) -> str:
    return hashlib.sha1("".join(sorted([token, timestamp, nonce, encrypted])).encode()).hexdigest()


def wecom_decrypt(aes_key: str, encrypted: str) -> tuple[bytes, str]:
    """WXBizMsgCrypt: 16 random bytes, the message length (4 bytes, big-endian), the message, the receiver id."""
    key = wecom_key(aes_key)
    plain = _cbc_decrypt(key, key[:16], _b64(encrypted), 256)
    if len(plain) < 20:
        raise Undecryptable("the plaintext is too short")
    (length,) = struct.unpack(">I", plain[16:20])
    message = plain[20 : 20 + length]
    if len(message) != length:
        raise Undecryptable("the length prefix is wrong")
    return message, plain[20 + length :].decode("utf-8", "replace")


def slack_signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return "v0=" + digest


def dingtalk_signature(secret: str, timestamp: str) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()
