"""Channels: where results and messages are delivered (web, chat apps, webhooks), registered by plugins.

The names below are the public surface for channel plugins and for skills that send (the built-in ``notify`` and
``send_message`` use them); they load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .adapter import (
        ChannelError,
        ChatChannel,
        FileDownload,
        OutgoingFile,
        OutgoingMessage,
        SendContext,
        WholeMessageChannel,
    )
    from .address import Address, AddressError, parse_address
    from .outgoing import AttachError, attach_files
    from .pending import ExpectReply, ExpectReplyError

_EXPORTS = {
    "Address": ".address",
    "AddressError": ".address",
    "AttachError": ".outgoing",
    "ChannelError": ".adapter",
    "ChatChannel": ".adapter",
    "WholeMessageChannel": ".adapter",
    "ExpectReply": ".pending",
    "FileDownload": ".adapter",
    "ExpectReplyError": ".pending",
    "OutgoingFile": ".adapter",
    "OutgoingMessage": ".adapter",
    "SendContext": ".adapter",
    "attach_files": ".outgoing",
    "parse_address": ".address",
}
__all__ = [
    "Address",
    "AddressError",
    "AttachError",
    "ChannelError",
    "ChatChannel",
    "ExpectReply",
    "ExpectReplyError",
    "FileDownload",
    "OutgoingFile",
    "OutgoingMessage",
    "SendContext",
    "WholeMessageChannel",
    "attach_files",
    "parse_address",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
