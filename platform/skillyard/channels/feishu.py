"""Default plugin: the Feishu (Lark) channel over its Open API with httpx.

A tenant access token is fetched from ``feishu_app_id`` / ``feishu_app_secret``, cached until it expires and fetched
once more when Feishu calls it expired or invalid. Recipients: ``ou_…`` (open_id), ``oc_…`` (chat_id), ``on_…``
(union_id). Images go through ``/im/v1/images``, other files through ``/im/v1/files``. An inbound message's image or
file is fetched from the message's resources (``/im/v1/messages/{id}/resources/{key}``); a group message counts when
it mentions the bot's own open_id (``feishu_bot_open_id``, else ``/bot/v3/info``, cached per app).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ..hookspecs import hookimpl
from .adapter import MB, ChannelError, ChatChannel, FileDownload, OutgoingFile, SendContext
from .http_api import BOT_ID_S, TokenCache, request_json, status_error

DEFAULT_BASE = "https://open.feishu.cn"
_ID_TYPES = {"ou_": "open_id", "oc_": "chat_id", "on_": "union_id"}
#: Codes Feishu answers for a tenant token that expired or is not valid: fetch a new one, once.
_TOKEN_CODES = frozenset({99991661, 99991663, 99991668, 99991677})
_CREDENTIAL_CODES = frozenset({10003, 10014, 99991664, 99991665, 99991672, 99991679})
_RECIPIENT_CODES = frozenset({230001, 230002, 230006, 230013, 230017, 99992351, 99992361})
_RATE_CODES = frozenset({99991400, 11232, 230020})
#: Feishu's file types for /im/v1/files by extension (anything else is "stream").
_FILE_TYPES = {".pdf": "pdf", ".doc": "doc", ".docx": "doc", ".xls": "xls", ".xlsx": "xls", ".ppt": "ppt"}
_FILE_TYPES |= {".pptx": "ppt", ".mp4": "mp4", ".opus": "opus"}


def _error(code: int, msg: str, status: int) -> ChannelError:
    text = f"feishu answered code {code}: {msg}"
    if code in _RATE_CODES or status == 429:
        return ChannelError(f"{text}; the app is rate limited, try again later", "transient")
    if code in _CREDENTIAL_CODES:
        return ChannelError.bad_credentials(f"{text}; check feishu_app_id, feishu_app_secret and the app's scopes")
    if code in _RECIPIENT_CODES:
        return ChannelError.bad_recipient(f"{text}; check the recipient id (ou_…, oc_…, on_…) and the bot's reach")
    if status >= 400 and code == 0:
        return status_error("feishu", status, msg)
    return ChannelError(f"{text}; try again later", "transient") if status >= 500 else ChannelError.bad_recipient(text)


class FeishuChannel(ChatChannel):
    name = "feishu"
    max_file_bytes = 30 * MB
    max_image_bytes = 10 * MB
    max_text_chars = 30000
    recipient_pattern = re.compile(r"\A(ou|oc|on)_[A-Za-z0-9_-]+\Z")
    recipient_help = "ou_… (open_id), oc_… (chat_id) or on_… (union_id)"

    def __init__(self) -> None:
        self.tokens = TokenCache()
        self.bot_open_ids = TokenCache()

    def _token_key(self, ctx: SendContext) -> tuple[str, ...]:
        return (ctx.api_base(DEFAULT_BASE), ctx.require("app_id"), ctx.require("app_secret"))

    async def _fetch_token(self, ctx: SendContext) -> tuple[str, float]:
        base = ctx.api_base(DEFAULT_BASE)
        body = {"app_id": ctx.require("app_id"), "app_secret": ctx.require("app_secret")}
        status, answer = await request_json(
            "feishu", ctx.http.post(f"{base}/open-apis/auth/v3/tenant_access_token/internal", json=body)
        )
        if answer.get("code") != 0 or not answer.get("tenant_access_token"):
            raise _error(int(answer.get("code") or 0), str(answer.get("msg") or "no token"), status)
        return str(answer["tenant_access_token"]), float(answer.get("expire") or 7200)

    async def _token(self, ctx: SendContext) -> str:
        return await self.tokens.get(self._token_key(ctx), lambda: self._fetch_token(ctx))

    async def _call(self, ctx: SendContext, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """One Open API call's ``data``."""
        data = (await self._answer(ctx, method, path, **kwargs)).get("data")
        return data if isinstance(data, dict) else {}

    async def _answer(self, ctx: SendContext, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """One Open API call with the tenant token, its whole answer; an expired token is fetched anew and the call
        made once more."""
        key = self._token_key(ctx)
        for attempt in range(2):
            token = await self._token(ctx)
            headers = {"Authorization": f"Bearer {token}"}
            url = f"{ctx.api_base(DEFAULT_BASE)}/open-apis{path}"
            status, answer = await request_json("feishu", ctx.http.request(method, url, headers=headers, **kwargs))
            code = int(answer.get("code") or 0)
            if code in _TOKEN_CODES and attempt == 0:
                self.tokens.forget(key, token)
                continue
            if code != 0 or status >= 400:
                raise _error(code, str(answer.get("msg") or ""), status)
            return answer
        raise ChannelError.bad_credentials("feishu refused a freshly fetched tenant token; check the app's status")

    async def _message(self, recipient: str, ctx: SendContext, msg_type: str, content: dict[str, Any]) -> str | None:
        params = {"receive_id_type": _ID_TYPES[recipient[:3]]}
        body = {"receive_id": recipient, "msg_type": msg_type, "content": json.dumps(content, ensure_ascii=False)}
        data = await self._call(ctx, "POST", "/im/v1/messages", params=params, json=body)
        return str(data["message_id"]) if data.get("message_id") else None

    async def send_text(self, recipient: str, text: str, format: str, ctx: SendContext) -> str | None:
        if format == "text":
            return await self._message(recipient, ctx, "text", {"text": text})
        # markdown (and html, which Feishu does not render) goes as a post with one md element
        return await self._message(recipient, ctx, "post", {"zh_cn": {"content": [[{"tag": "md", "text": text}]]}})

    async def send_image(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        if item.size > self.max_image_bytes:
            return await self.send_file(recipient, item, ctx)
        content = await item.content()
        data = await self._call(
            ctx, "POST", "/im/v1/images", data={"image_type": "message"}, files={"image": (item.filename, content)}
        )
        return await self._message(recipient, ctx, "image", {"image_key": data.get("image_key")})

    async def send_file(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        file_type = _FILE_TYPES.get(item.path.suffix.lower(), "stream")
        content = await item.content()
        data = await self._call(
            ctx,
            "POST",
            "/im/v1/files",
            data={"file_type": file_type, "file_name": item.filename},
            files={"file": (item.filename, content)},
        )
        msg_type = "media" if file_type == "mp4" else "file"
        return await self._message(recipient, ctx, msg_type, {"file_key": data.get("file_key")})

    async def inbound_file(self, item: Mapping[str, Any], ctx: SendContext) -> FileDownload:
        """A message's own image or file, from its resources with the tenant token (``/im/v1/images`` serves only
        images the bot uploaded)."""
        message_id, key = (quote(str(item.get(k) or ""), safe="") for k in ("message_id", "key"))
        kind = "image" if item.get("type") == "image" else "file"
        url = f"{ctx.api_base(DEFAULT_BASE)}/open-apis/im/v1/messages/{message_id}/resources/{key}?type={kind}"
        token = await self._token(ctx)
        return FileDownload(url, {"Authorization": f"Bearer {token}"}, secrets=(token,))

    async def mentions_bot(self, mentions: Sequence[str], ctx: SendContext) -> bool:
        """One of the open_ids a group message mentions is the bot's: ``feishu_bot_open_id`` when set (no call),
        else the bot's open_id from ``/bot/v3/info``."""
        own = ctx.config("bot_open_id") or await self.bot_open_ids.get(
            self._token_key(ctx), lambda: self._bot_open_id(ctx)
        )
        return own in mentions

    async def _bot_open_id(self, ctx: SendContext) -> tuple[str, float]:
        bot = (await self._answer(ctx, "GET", "/bot/v3/info")).get("bot")  # beside data, not in it
        open_id = bot.get("open_id") if isinstance(bot, dict) else None
        if not open_id:
            raise ChannelError.bad_credentials(
                "feishu's /bot/v3/info named no open_id: enable the app's bot ability, or set feishu_bot_open_id"
            )
        return str(open_id), BOT_ID_S


@hookimpl
def register_channels(register: Any) -> None:
    register("feishu", FeishuChannel())
