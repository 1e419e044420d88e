"""Recipient addresses ``"<channel>:<recipient id>"`` (``feishu:ou_…``, ``wecom:party:7``, ``web:s1``)."""

from __future__ import annotations

from dataclasses import dataclass


class AddressError(ValueError):
    """An address that names no channel or no recipient; the message says what to write instead."""


@dataclass(frozen=True)
class Address:
    channel: str
    recipient: str

    def __str__(self) -> str:
        return f"{self.channel}:{self.recipient}"


def parse_address(value: object, known: list[str]) -> Address:
    """One ``"<channel>:<recipient id>"``; the channel must be one of ``known``."""
    if not isinstance(value, str) or not value.strip():
        raise AddressError(f"a recipient must be text such as 'telegram:12345', not {value!r}")
    text = value.strip()
    channel, sep, recipient = text.partition(":")
    if not sep or not channel:
        raise AddressError(
            f"{text!r} has no channel prefix: write '<channel>:<recipient id>', e.g. 'feishu:ou_…' "
            f"(channels: {', '.join(known)})"
        )
    if channel not in known:
        raise AddressError(f"{text!r} names the channel {channel!r}, which is unknown; known: {', '.join(known)}")
    if not recipient.strip():
        raise AddressError(f"{text!r} has no recipient id after '{channel}:'; write '{channel}:<recipient id>'")
    return Address(channel, recipient.strip())


def conversation_address(reply_to: object, channel: object, known: list[str]) -> Address | None:
    """Where a run's results go: ``reply_to`` (``"<channel>:<id>"``, set by the caller); a bare id is a recipient
    on the run's own channel. None when there is nowhere to send."""
    if not isinstance(reply_to, str) or not reply_to.strip():
        return None
    text = reply_to.strip()
    prefix, sep, rest = text.partition(":")
    if sep and prefix in known and rest.strip():
        return Address(prefix, rest.strip())
    if isinstance(channel, str) and channel in known:
        return Address(channel, text)
    return None
