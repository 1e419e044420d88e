"""Default plugin: the Telegram channel over the Bot API with httpx (``telegram_bot_token``).

Recipients are chat ids (``12345``, ``-100…`` for groups) or ``@channelusername``. The Bot API answers
``{ok: false, error_code, description}``; a 429 carries ``parameters.retry_after``.
"""

from __future__ import annotations

import re
from typing import Any

from ..hookspecs import hookimpl
from .adapter import MB, ChannelError, ChatChannel, OutgoingFile, SendContext
from .http_api import request_json, status_error

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


@hookimpl
def register_channels(register: Any) -> None:
    register("telegram", TelegramChannel())
