"""What the HTTP channel adapters share: calls whose transport errors and HTTP statuses become
:class:`~.adapter.ChannelError` of the right type, and a cache of access tokens (and of the bot's own id) until they
expire."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .adapter import ChannelError

if TYPE_CHECKING:
    import httpx

#: Seconds before a token's stated expiry at which it is fetched anew (clocks and transit differ).
TOKEN_MARGIN_S = 60.0
#: How long a bot's own id (Telegram's username, Feishu's open_id) is kept: it changes only when the bot is renamed.
BOT_ID_S = 3600.0


def status_error(channel: str, status: int, detail: str) -> ChannelError:
    """The error type an HTTP status means, whatever the channel: 429 and 5xx pass, 401/403 are credentials."""
    text = f"{channel} answered HTTP {status}" + (f": {detail}" if detail else "")
    if status == 429 or status >= 500:
        return ChannelError(f"{text}; try again later", "transient")
    if status in (401, 403):
        return ChannelError.bad_credentials(f"{text}; check the {channel} credentials and the app's permissions")
    return ChannelError.bad_recipient(f"{text}; check the recipient and the message")


async def request_json(channel: str, call: Awaitable[httpx.Response]) -> tuple[int, dict[str, Any]]:
    """Await one HTTP call and read its JSON body (``{}`` for a 2xx without one); a connection failure is
    ``transient``, an error status without a JSON body is judged by the status alone."""
    import httpx  # here: the CLI imports the channel plugins to list commands, without the HTTP stack

    try:
        response = await call
    except httpx.TimeoutException:
        raise ChannelError(f"{channel} did not answer in time; try again later", "transient") from None
    except httpx.HTTPError as exc:
        raise ChannelError(f"{channel} could not be reached ({exc.__class__.__name__}); try again later") from None
    try:
        body = response.json()
    except (ValueError, RecursionError):  # not JSON, or nested past what json reads
        body = None
    if not isinstance(body, dict):
        if response.status_code >= 400:
            raise status_error(channel, response.status_code, "")
        body = {}
    return response.status_code, body


class TokenCache:
    """Access tokens (or another value a credential fetches, such as the bot's own id) by credential, kept until
    shortly before they expire (one fetch at a time per credential)."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, ...], tuple[str, float]] = {}
        self._locks: dict[tuple[str, ...], asyncio.Lock] = {}

    async def get(self, key: tuple[str, ...], fetch: Callable[[], Awaitable[tuple[str, float]]]) -> str:
        """The cached token of ``key``, or a new one from ``fetch() -> (token, seconds valid)``; sends to several
        recipients at once wait for one fetch (a second fetch would make some vendors drop the first token)."""
        async with self._locks.setdefault(key, asyncio.Lock()):
            cached = self._tokens.get(key)
            if cached is not None and cached[1] > time.monotonic():
                return cached[0]
            token, seconds = await fetch()
            self._tokens[key] = (token, time.monotonic() + max(float(seconds) - TOKEN_MARGIN_S, 1.0))
            return token

    def forget(self, key: tuple[str, ...], token: str) -> None:
        """Drop ``token`` when the channel called it expired or invalid, so the next ``get`` fetches a new one
        (unless another send has already replaced it)."""
        cached = self._tokens.get(key)
        if cached is not None and cached[0] == token:
            del self._tokens[key]
