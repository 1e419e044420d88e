"""Default plugin: the DingTalk channel: robot messages to people (``oToMessages/batchSend``) and to group chats
(``groupMessages/send``) with httpx.

``dingtalk_app_key`` / ``dingtalk_app_secret`` give an access token (cached until it expires, fetched once more
when DingTalk calls it invalid), ``dingtalk_robot_code`` names the robot. Files are uploaded to the media API first
(``oapi.dingtalk.com``; with ``dingtalk_api_base`` set, both APIs are under that base). Recipients: ``<userid>``
or ``group:<openConversationId>`` (a group the robot is in: the ``conversationId`` of its callbacks).
DingTalk answers errors with an HTTP status and ``{code, message}``; a send that reaches nobody lists the ids in
``invalidStaffIdList`` (or ``flowControlledStaffIdList`` when rate limited). An inbound message's picture or file
is fetched through the robot's ``messageFiles/download`` (its ``downloadCode`` → a ``downloadUrl``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..credentials import mask_secrets
from ..hookspecs import hookimpl
from .adapter import MB, ChannelError, ChatChannel, FileDownload, OutgoingFile, SendContext
from .http_api import TokenCache, request_json, status_error

DEFAULT_BASE = "https://api.dingtalk.com"
DEFAULT_MEDIA_BASE = "https://oapi.dingtalk.com"
_TOKEN_CODES = frozenset({"InvalidAuthentication", "Unauthorized", "InvalidAccessToken"})


class DingtalkChannel(ChatChannel):
    name = "dingtalk"
    max_file_bytes = 20 * MB
    max_text_chars = 5000
    recipient_pattern = re.compile(r"\A([A-Za-z0-9_.-]{1,64}|group:[A-Za-z0-9+/=_.-]{1,128})\Z")
    recipient_help = "<userid> or group:<openConversationId>"

    def __init__(self) -> None:
        self.tokens = TokenCache()

    def _error(self, status: int, answer: dict[str, Any]) -> ChannelError:
        code, message = str(answer.get("code") or ""), str(answer.get("message") or answer.get("errmsg") or "")
        detail = f"{code}: {message}" if code else message
        if code.startswith("Forbidden") or code in ("invalidClientId", "invalidClientSecret", "robotNotExist"):
            return ChannelError.bad_credentials(
                f"dingtalk answered HTTP {status} {detail}; check dingtalk_app_key, dingtalk_app_secret, "
                "dingtalk_robot_code and the app's permissions"
            )
        return status_error("dingtalk", status, detail)

    async def _fetch_token(self, ctx: SendContext) -> tuple[str, float]:
        body = {"appKey": ctx.require("app_key"), "appSecret": ctx.require("app_secret")}
        status, answer = await request_json(
            "dingtalk", ctx.http.post(f"{ctx.api_base(DEFAULT_BASE)}/v1.0/oauth2/accessToken", json=body)
        )
        if status >= 400 or not answer.get("accessToken"):
            error = self._error(status, answer)
            raise ChannelError.bad_credentials(str(error)) if status < 500 and status != 429 else error
        return str(answer["accessToken"]), float(answer.get("expireIn") or 7200)

    def _key(self, ctx: SendContext) -> tuple[str, ...]:
        return (ctx.api_base(DEFAULT_BASE), ctx.require("app_key"), ctx.require("app_secret"))

    async def _robot_call(self, ctx: SendContext, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One robot API call with the access token; refused as invalid, the token is fetched anew once."""
        url = f"{ctx.api_base(DEFAULT_BASE)}{path}"
        for attempt in range(2):
            token = await self.tokens.get(self._key(ctx), lambda: self._fetch_token(ctx))
            headers = {"x-acs-dingtalk-access-token": token}
            status, answer = await request_json("dingtalk", ctx.http.post(url, json=body, headers=headers))
            if status == 401 or str(answer.get("code") or "") in _TOKEN_CODES:
                if attempt == 0:
                    self.tokens.forget(self._key(ctx), token)
                    continue
                break
            if status >= 400:
                raise self._error(status, answer)
            return answer
        raise ChannelError.bad_credentials("dingtalk refused a freshly fetched access token; check the app")

    async def _robot_send(self, recipient: str, ctx: SendContext, msg_key: str, param: dict[str, Any]) -> str | None:
        """One robot message: to a group chat (``group:…``) or to one user."""
        body = {
            "robotCode": ctx.require("robot_code"),
            "msgKey": msg_key,
            "msgParam": json.dumps(param, ensure_ascii=False),
        }
        if recipient.startswith("group:"):
            body["openConversationId"] = recipient[6:]
            answer = await self._robot_call(ctx, "/v1.0/robot/groupMessages/send", body)
            return str(answer["processQueryKey"]) if answer.get("processQueryKey") else None
        answer = await self._robot_call(ctx, "/v1.0/robot/oToMessages/batchSend", {**body, "userIds": [recipient]})
        if recipient in (answer.get("flowControlledStaffIdList") or []):
            raise ChannelError(f"dingtalk rate limited the messages to {recipient}; try again later", "transient")
        if recipient in (answer.get("invalidStaffIdList") or []):
            raise ChannelError.bad_recipient(f"dingtalk:{recipient} is not a user the robot can reach")
        return str(answer["processQueryKey"]) if answer.get("processQueryKey") else None

    async def send_text(self, recipient: str, text: str, format: str, ctx: SendContext) -> str | None:
        if format == "markdown":
            title = text.strip().splitlines()[0][:30] if text.strip() else "message"
            return await self._robot_send(recipient, ctx, "sampleMarkdown", {"title": title, "text": text})
        return await self._robot_send(recipient, ctx, "sampleText", {"content": text})

    async def _upload(self, item: OutgoingFile, ctx: SendContext, kind: str) -> str:
        """Upload a file to the media API (its own, older error shape: ``errcode``); an expired token once more."""
        base = (ctx.config("api_base") or DEFAULT_MEDIA_BASE).rstrip("/")
        content = await item.content()
        for attempt in range(2):
            token = await self.tokens.get(self._key(ctx), lambda: self._fetch_token(ctx))
            with mask_secrets([token]):  # httpx logs the URL, and the token is in its query
                status, answer = await request_json(
                    "dingtalk",
                    ctx.http.post(
                        f"{base}/media/upload",
                        params={"access_token": token, "type": kind},
                        files={"media": (item.filename, content)},
                    ),
                )
            code = int(answer.get("errcode") or 0)
            if code in (40014, 42001) and attempt == 0:
                self.tokens.forget(self._key(ctx), token)
                continue
            if status >= 400 or code != 0 or not answer.get("media_id"):
                raise self._error(status, answer)
            return str(answer["media_id"])
        raise ChannelError.bad_credentials("dingtalk refused a freshly fetched access token; check the app")

    async def send_image(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        media_id = await self._upload(item, ctx, "image")
        return await self._robot_send(recipient, ctx, "sampleImageMsg", {"photoURL": media_id})

    async def send_file(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        media_id = await self._upload(item, ctx, "file")
        extension = item.path.suffix.lstrip(".").lower() or "file"
        param = {"mediaId": media_id, "fileName": item.filename, "fileType": extension}
        return await self._robot_send(recipient, ctx, "sampleFile", param)

    async def inbound_file(self, item: Mapping[str, Any], ctx: SendContext) -> FileDownload:
        """A callback's ``downloadCode`` becomes a short-lived ``downloadUrl`` (the robot's messageFiles API),
        which takes no token."""
        body = {"downloadCode": str(item.get("download_code") or ""), "robotCode": ctx.require("robot_code")}
        answer = await self._robot_call(ctx, "/v1.0/robot/messageFiles/download", body)
        if not answer.get("downloadUrl"):
            raise ChannelError.bad_recipient("dingtalk's messageFiles/download named no downloadUrl")
        return FileDownload(str(answer["downloadUrl"]))


@hookimpl
def register_channels(register: Any) -> None:
    register("dingtalk", DingtalkChannel())
