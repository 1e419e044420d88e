"""Default plugin: the Slack channel through the official ``slack_sdk`` (async client; the ``channels`` extra).

``slack_bot_token`` authenticates; ``slack_api_base`` replaces ``https://slack.com/api`` (the SDK's ``base_url``).
Recipients are channel ids (``C…``, ``G…``) or user ids (``U…``, ``W…``: a direct message is opened first).
Files go through ``files_upload_v2`` (upload URL, upload, complete). Slack answers ``{ok: false, error: "…"}``.
An inbound message's file is its ``url_private_download``, fetched with the bot token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..credentials import masked_logger
from ..hookspecs import hookimpl
from .adapter import MB, ChannelError, ChatChannel, FileDownload, OutgoingFile, SendContext

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

DEFAULT_BASE = "https://slack.com/api"
masked_logger("slack_sdk.web.async_base_client")  # the SDK logs its requests at debug level
_CREDENTIAL_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "missing_scope",
        "no_permission",
    }
)
_RECIPIENT_ERRORS = frozenset(
    {"channel_not_found", "user_not_found", "not_in_channel", "is_archived", "cannot_dm_bot", "user_disabled"}
)
_TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


def _error(status: int, code: str) -> ChannelError:
    text = f"slack answered {code or f'HTTP {status}'}"
    if status == 429 or status >= 500 or code in _TRANSIENT_ERRORS:
        return ChannelError(f"{text}; try again later", "transient")
    if code in _CREDENTIAL_ERRORS:
        return ChannelError.bad_credentials(f"{text}; check slack_bot_token and the app's scopes")
    if code in _RECIPIENT_ERRORS:
        return ChannelError.bad_recipient(f"{text}; check the channel or user id and that the bot is in the channel")
    return ChannelError.bad_recipient(text)


class SlackChannel(ChatChannel):
    name = "slack"
    max_file_bytes = 1024 * MB
    max_text_chars = 40000
    recipient_pattern = re.compile(r"\A[CGDUW][A-Z0-9]{2,}\Z")
    recipient_help = "C… (a channel id) or U… (a user id)"

    def _client(self, ctx: SendContext) -> AsyncWebClient:
        try:
            from slack_sdk.web.async_client import AsyncWebClient
        except ImportError:
            raise ChannelError.bad_credentials(
                "the slack channel needs the Slack SDK: pip install 'skillyard[channels]'"
            ) from None
        return AsyncWebClient(token=ctx.require("bot_token"), base_url=ctx.api_base(DEFAULT_BASE) + "/", timeout=30)

    async def _call(self, ctx: SendContext, method: str, **kwargs: Any) -> dict[str, Any]:
        import aiohttp
        from slack_sdk.errors import SlackApiError, SlackRequestError

        client = self._client(ctx)
        try:
            response = await getattr(client, method)(**kwargs)
        except SlackApiError as exc:
            raise _error(int(exc.response.status_code), str(exc.response.get("error") or "")) from None
        except (aiohttp.ClientError, TimeoutError, SlackRequestError) as exc:
            raise ChannelError(f"slack could not be reached ({exc.__class__.__name__}); try again later") from None
        return dict(response.data) if isinstance(response.data, dict) else {}

    async def _conversation(self, recipient: str, ctx: SendContext) -> str:
        """A user id's direct-message channel (opened if need be); a channel id as it is."""
        if recipient[0] not in "UW":
            return recipient
        answer = await self._call(ctx, "conversations_open", users=recipient)
        return str((answer.get("channel") or {}).get("id") or recipient)

    async def send_text(self, recipient: str, text: str, format: str, ctx: SendContext) -> str | None:
        channel = await self._conversation(recipient, ctx)
        answer = await self._call(ctx, "chat_postMessage", channel=channel, text=text, mrkdwn=format == "markdown")
        return str(answer["ts"]) if answer.get("ts") else None

    async def send_file(self, recipient: str, item: OutgoingFile, ctx: SendContext) -> str | None:
        channel = await self._conversation(recipient, ctx)
        content = await item.content()
        answer = await self._call(ctx, "files_upload_v2", channel=channel, file=content, filename=item.filename)
        uploaded = answer.get("files") or [answer.get("file") or {}]
        return str(uploaded[0].get("id")) if uploaded and uploaded[0].get("id") else None

    async def inbound_file(self, item: Mapping[str, Any], ctx: SendContext) -> FileDownload:
        headers = {"Authorization": f"Bearer {ctx.require('bot_token')}"}
        return FileDownload(str(item.get("url") or ""), headers, follow_redirects=True)


@hookimpl
def register_channels(register: Any) -> None:
    register("slack", SlackChannel())
