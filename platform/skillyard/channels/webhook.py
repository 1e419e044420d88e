"""Default plugin: named webhooks: one JSON POST per message to the URL in the config ``webhook_url_<name>``.

The body is ``{"text", "format", "files": [{"filename", "media", "size", "content_base64"}]}``; any 2xx is
delivered (with or without a JSON answer). The URL holds a token more often than not, so it is a secret config
and never shown.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from ..hookspecs import hookimpl
from .adapter import MB, ChannelError, OutgoingMessage, SendContext, WholeMessageChannel
from .http_api import request_json, status_error

URL_PREFIX = "url_"


class WebhookChannel(WholeMessageChannel):
    name = "webhook"
    max_file_bytes = 5 * MB  # base64 inside JSON: larger bodies are refused by most receivers
    max_text_chars = 100_000
    recipient_pattern = re.compile(r"\A[A-Za-z0-9_-]{1,100}\Z")
    recipient_help = "<name> (a webhook configured as webhook_url_<name>)"

    async def send(self, recipient: str, message: OutgoingMessage, ctx: SendContext) -> str | None:
        url = ctx.config(URL_PREFIX + recipient)
        if not url:
            names = sorted(k[len("webhook_url_") :] for k in ctx.configs if k.startswith("webhook_url_"))
            role = f" --role {ctx.role_id}" if ctx.role_id else ""
            raise ChannelError.bad_recipient(
                f"webhook:{recipient} is not configured (configured: {', '.join(names) or 'none'}); an admin adds it "
                f"with 'skillyard config set send_message webhook_url_{recipient}=-{role}'"
            )
        files = [
            {
                "filename": item.filename,
                "media": item.media,
                "size": item.size,
                "content_base64": base64.b64encode(await item.content()).decode("ascii"),
            }
            for item in message.files
        ]
        body = {"text": message.text, "format": message.format, "files": files}
        status, answer = await request_json(f"webhook:{recipient}", ctx.http.post(url, json=body))
        if status >= 400:
            raise status_error(f"webhook:{recipient}", status, str(answer.get("error") or answer.get("message") or ""))
        return str(answer["id"]) if isinstance(answer.get("id"), (str, int)) else None


@hookimpl
def register_channels(register: Any) -> None:
    register("webhook", WebhookChannel())
