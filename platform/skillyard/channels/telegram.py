"""Default plugin: the Telegram channel over the Bot API with httpx (``telegram_bot_token``).

Recipients are chat ids (``12345``, ``-100…`` for groups) or ``@channelusername``. The Bot API answers
``{ok: false, error_code, description}``; a 429 carries ``parameters.retry_after``. An inbound message's file is
fetched through ``getFile``; a group message counts when it mentions the bot's username (``getMe``, cached).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..hookspecs import hookimpl
from .adapter import MB, ChannelError, ChatChannel, FileDownload, OutgoingFile, SendContext
from .http_api import BOT_ID_S, TokenCache, request_json, status_error

DEFAULT_BASE = "https://api.telegram.org"
#: Bot API descriptions that mean the recipient, not the bot, is the problem (Telegram answers them with 400/403).
_RECIPIENT_HINTS = ("chat not found", "user not found", "bot was blocked", "bot is not a member", "user is deactivated")


class TelegramChannel(ChatChannel):
    name = "telegram"
    max_file_bytes = 50 * MB
    max_image_bytes = 10 * MB
    max_text_chars = 4096
    recipient_pattern = re.compile(r"\A(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})\Z")
    recipient_help = "<chat id> (digits, -100… for groups) or @channelusername"

    def __init__(self) -> None:
        self.usernames = TokenCache()

    async def _call(self, ctx: SendContext, method: str, **kwargs: Any) -> dict[str, Any]:
        token = ctx.require("bot_token")
        url = f"{ctx.api_base(DEFAULT_BASE)}/bot{token}/{method}"
        status, answer = await request_json("telegram", ctx.http.post(url, **kwargs))
        if answer.get("ok") is True:
            result = answer.get("result")
            return result if isinstance(result, dict) else {}
        code = int(answer.get("error_code") or status)
        description = str(answer.get("description") or "")
        if code == 429:
            retry = (answer.get("parameters") or {}).get("retry_after")
            wait = f" (Telegram asks to wait {retry} s)" if retry else ""
            raise ChannelError(f"telegram rate limited the bot{wait}; try again later", "transient")
        if code == 401 or description.startswith("Unauthorized"):
            raise ChannelError.bad_credentials(
                "telegram refused the bot token (401 Unauthorized); check telegram_bot_token"
            )
        if any(hint in description.lower() for hint in _RECIPIENT_HINTS):
            raise ChannelError.bad_recipient(f"telegram answered {code}: {description}; check the chat id")
        raise status_error("telegram", code, description)

    @staticmethod
    def _id(result: dict[str, Any]) -> str | None:
        return str(result["message_id"]) if result.get("message_id") is not None else None

    async def send_text(self, recipient: str, text: str, format: str, ctx: SendContext) -> str | None:
        body: dict[str, Any] = {"chat_id": recipient, "text": text}
        if format == "html":
            body["parse_mode"] = "HTML"
        return self._id(await self._call(ctx, "sendMessage", json=body))

    async def _upload(
        self, recipient: str, item: OutgoingFile, ctx: SendContext, method: str, field: str
    ) -> str | None:
        content = await item.content()
        result = await self._call(ctx, method, data={"chat_id": recipient}, files={field: (item.filename, content)})
        return self._id(result)

    async def send_image(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        if item.size > self.max_image_bytes:
            return await self.send_file(recipient, item, ctx)
        return await self._upload(recipient, item, ctx, "sendPhoto", "photo")

    async def send_video(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        return await self._upload(recipient, item, ctx, "sendVideo", "video")

    async def send_audio(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        return await self._upload(recipient, item, ctx, "sendAudio", "audio")

    async def send_file(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        return await self._upload(recipient, item, ctx, "sendDocument", "document")

    async def inbound_file(self, item: Mapping[str, Any], ctx: SendContext) -> FileDownload:
        """``getFile`` names the file's path; the file itself is under ``/file/bot<token>/``."""
        result = await self._call(ctx, "getFile", params={"file_id": str(item.get("file_id") or "")})
        if not result.get("file_path"):
            raise ChannelError.bad_recipient("telegram's getFile named no file_path (bots get files up to 20 MB)")
        base, token = ctx.api_base(DEFAULT_BASE), ctx.require("bot_token")
        return FileDownload(f"{base}/file/bot{token}/{result['file_path']}")

    async def mentions_bot(self, mentions: Sequence[str], ctx: SendContext) -> bool:
        """A ``@username`` mention of this bot (``getMe``'s username, cached per bot token)."""
        key = (ctx.api_base(DEFAULT_BASE), ctx.require("bot_token"))
        username = await self.usernames.get(key, lambda: self._username(ctx))
        return f"@{username.lower()}" in {m.lower() for m in mentions}

    async def _username(self, ctx: SendContext) -> tuple[str, float]:
        username = str((await self._call(ctx, "getMe")).get("username") or "")
        if not username:
            raise ChannelError.bad_credentials("telegram's getMe named no username for the bot")
        return username, BOT_ID_S


@hookimpl
def register_channels(register: Any) -> None:
    register("telegram", TelegramChannel())
