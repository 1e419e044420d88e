"""Default plugin: the WeCom (WeChat Work) channel: application messages over its server API with httpx.

``wecom_corp_id`` / ``wecom_corp_secret`` give an access token (cached until it expires, fetched once more on an
expired-token answer), ``wecom_agent_id`` names the application. Recipients: ``<userid>`` or ``party:<id>``.
Files are uploaded as temporary media first. WeCom answers HTTP 200 with ``errcode``; a send that reaches nobody
lists the ids in ``invaliduser`` / ``invalidparty``. An inbound message's image or file is fetched from
``/cgi-bin/media/get`` by its ``MediaId`` (an image without one from its ``PicUrl``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from ..credentials import mask_secrets
from ..hookspecs import hookimpl
from .adapter import MB, ChannelError, ChatChannel, FileDownload, OutgoingFile, SendContext
from .http_api import TokenCache, request_json

DEFAULT_BASE = "https://qyapi.weixin.qq.com"
_TOKEN_CODES = frozenset({40014, 42001})
_CREDENTIAL_CODES = frozenset({40001, 40013, 40056, 41004, 48002, 60011, 60020, 301002})
_RECIPIENT_CODES = frozenset({40003, 81013, 60111, 60123, 86001})
_RATE_CODES = frozenset({-1, 45009, 45033, 45047})
_MEDIA = {"image": "image", "video": "video", "audio": "voice", "file": "file"}


def _error(code: int, msg: str) -> ChannelError:
    text = f"wecom answered errcode {code}: {msg}"
    if code in _RATE_CODES:
        return ChannelError(f"{text}; try again later", "transient")
    if code in _CREDENTIAL_CODES:
        return ChannelError.bad_credentials(f"{text}; check wecom_corp_id, wecom_corp_secret, wecom_agent_id")
    if code in _RECIPIENT_CODES:
        return ChannelError.bad_recipient(f"{text}; check the userid or party id")
    return ChannelError.bad_recipient(text)


class WecomChannel(ChatChannel):
    name = "wecom"
    max_file_bytes = 20 * MB
    max_text_chars = 2048
    recipient_pattern = re.compile(r"\A(party:\d+|[A-Za-z0-9_.@-]{1,64})\Z")
    recipient_help = "<userid> or party:<department id>"

    def __init__(self) -> None:
        self.tokens = TokenCache()

    async def _fetch_token(self, ctx: SendContext) -> tuple[str, float]:
        params = {"corpid": ctx.require("corp_id"), "corpsecret": ctx.require("corp_secret")}
        _, answer = await request_json(
            "wecom", ctx.http.get(f"{ctx.api_base(DEFAULT_BASE)}/cgi-bin/gettoken", params=params)
        )
        if answer.get("errcode") not in (0, None) or not answer.get("access_token"):
            raise _error(int(answer.get("errcode") or 0), str(answer.get("errmsg") or "no token"))
        return str(answer["access_token"]), float(answer.get("expires_in") or 7200)

    def _key(self, ctx: SendContext) -> tuple[str, ...]:
        return (ctx.api_base(DEFAULT_BASE), ctx.require("corp_id"), ctx.require("corp_secret"))

    async def _call(self, ctx: SendContext, path: str, **kwargs: Any) -> dict[str, Any]:
        key = self._key(ctx)
        params = dict(kwargs.pop("params", {}))
        for attempt in range(2):
            params["access_token"] = await self.tokens.get(key, lambda: self._fetch_token(ctx))
            url = f"{ctx.api_base(DEFAULT_BASE)}/cgi-bin{path}"
            with mask_secrets([params["access_token"]]):  # httpx logs the URL, and the token is in its query
                _, answer = await request_json("wecom", ctx.http.post(url, params=params, **kwargs))
            code = int(answer.get("errcode") or 0)
            if code in _TOKEN_CODES and attempt == 0:
                self.tokens.forget(key, params["access_token"])
                continue
            if code != 0:
                raise _error(code, str(answer.get("errmsg") or ""))
            return answer
        raise ChannelError.bad_credentials("wecom refused a freshly fetched access token; check the application")

    async def _message(self, recipient: str, ctx: SendContext, msgtype: str, content: dict[str, Any]) -> str | None:
        party = recipient.startswith("party:")
        target = {"toparty": recipient[6:]} if party else {"touser": recipient}
        body = {**target, "msgtype": msgtype, "agentid": int(ctx.require("agent_id")), msgtype: content}
        answer = await self._call(ctx, "/message/send", json=body)
        invalid = answer.get("invalidparty" if party else "invaliduser")
        if invalid:
            raise ChannelError.bad_recipient(f"wecom:{recipient} is not reachable by the application ({invalid})")
        return str(answer["msgid"]) if answer.get("msgid") else None

    async def send_text(self, recipient: str, text: str, format: str, ctx: SendContext) -> str | None:
        msgtype = "markdown" if format == "markdown" else "text"
        return await self._message(recipient, ctx, msgtype, {"content": text})

    async def _media(self, recipient: str, item: OutgoingFile, ctx: SendContext, kind: str) -> str | None:
        content = await item.content()
        answer = await self._call(
            ctx, "/media/upload", params={"type": kind}, files={"media": (item.filename, content)}
        )
        return await self._message(recipient, ctx, kind, {"media_id": answer.get("media_id")})

    async def send_image(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        return await self._media(recipient, item, ctx, "image")

    async def send_video(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        return await self._media(recipient, item, ctx, "video")

    async def send_audio(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        return await self._media(recipient, item, ctx, "voice")

    async def send_file(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        return await self._media(recipient, item, ctx, "file")

    async def inbound_file(self, item: Mapping[str, Any], ctx: SendContext) -> FileDownload:
        """Temporary media by id with the access token (WeCom answers a refusal with HTTP 200 and an errcode);
        an image that came with only a ``PicUrl`` from that URL, which takes no token, and only from a public
        address."""
        if not item.get("media_id"):
            return FileDownload(str(item.get("url") or ""), public_only=True)
        token = await self.tokens.get(self._key(ctx), lambda: self._fetch_token(ctx))
        query = urlencode({"access_token": token, "media_id": str(item["media_id"])})
        url = f"{ctx.api_base(DEFAULT_BASE)}/cgi-bin/media/get?{query}"
        return FileDownload(url, json_is_error=True, secrets=(token,))


@hookimpl
def register_channels(register: Any) -> None:
    register("wecom", WecomChannel())
