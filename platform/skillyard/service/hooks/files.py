"""The files of an inbound message, fetched into the session's workspace to become its §4.7 attachments.

The channel's adapter turns each descriptor the webhook parser kept into one download (its API base, its cached
token: :meth:`~skillyard.channels.adapter.ChatChannel.inbound_file`); every download here is bounded in size
(``SKILLYARD_MAX_DOWNLOAD_MB``, the limit of URL materialization) and in time; a URL the message itself carried
(WeCom's ``PicUrl``) is fetched from public addresses only. A file that cannot be fetched becomes
a note to the agent naming the file and the reason, never its URL (a Telegram or WeCom URL holds a token).
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from ...channels.adapter import ChannelError, ChatChannel, FileDownload, SendContext
from ...credentials import current_masker, mask_secrets, masked_logger
from ...outputs.address_guard import GuardedTransport, RefusedDestination, private_hosts_allowed
from ...outputs.materialize import safe_basename
from ...outputs.safe_write import TooLarge, describe_size, safe_stream
from .inbound import Inbound

if TYPE_CHECKING:
    from collections.abc import Mapping

log = masked_logger("skillyard.service.hooks")
#: The files of one message that are fetched (a message carries one on most channels, an album a few).
MAX_FILES = 10
#: Seconds one file may take, from resolving its descriptor to the last byte.
DOWNLOAD_TIMEOUT_S = 60.0
#: How much of a JSON error answer is read (WeCom's are a few dozen bytes).
_ERROR_BYTES = 4096


class DownloadRefused(Exception):
    """The platform answered something other than the file; the message says what, without the URL."""


@dataclass(frozen=True)
class InboundFiles:
    """The files saved, and a note for each one that was not (the agent reads them with the message)."""

    paths: list[Path]
    notes: list[str]


async def fetch_inbound_files(
    adapter: ChatChannel, message: Inbound, ctx: SendContext, workspace: Path, max_bytes: int
) -> InboundFiles:
    """Fetch the message's files, one after another, into ``inbound/`` of the session's workspace."""
    paths: list[Path] = []
    notes: list[str] = []
    for item in message.files[:MAX_FILES]:
        name = safe_basename(str(item.get("filename") or "")) or "file"
        saved_as = safe_basename(f"{message.event_id[:40]}-{name}")
        outcome = await _fetch(adapter, item, ctx, workspace, saved_as, max_bytes)
        if isinstance(outcome, Path):
            paths.append(outcome)
            continue
        log.warning("file %s of a %s message was not fetched: %s", name, ctx.channel, outcome)
        notes.append(_masked(f"[The file {name} sent with this message could not be fetched: {outcome}.]"))
    if len(message.files) > MAX_FILES:
        more = len(message.files) - MAX_FILES
        notes.append(f"[{more} more files sent with this message were not fetched: at most {MAX_FILES} are.]")
    return InboundFiles(paths, notes)


async def _fetch(
    adapter: ChatChannel, item: Mapping[str, Any], ctx: SendContext, workspace: Path, name: str, max_bytes: int
) -> Path | str:
    """The saved file, or why it is not there (phrased for the agent, without URLs or tokens)."""
    try:
        async with asyncio.timeout(DOWNLOAD_TIMEOUT_S):
            download = await adapter.inbound_file(item, ctx)
            with mask_secrets(download.secrets):
                return await _save(ctx, download, workspace, name, max_bytes)
    except (ChannelError, DownloadRefused) as exc:
        return str(exc)
    except RefusedDestination as exc:  # a URL the message carried, pointing inside the network
        return f"its address was refused: {exc}"
    except (TimeoutError, httpx.TimeoutException):
        return f"{ctx.channel} sent no complete file within {DOWNLOAD_TIMEOUT_S:g} s"
    except TooLarge:
        return f"it is larger than the limit of {describe_size(max_bytes)}"
    except httpx.HTTPError as exc:  # its text may hold the URL: the class says enough
        return f"{ctx.channel} could not be reached ({type(exc).__name__})"
    except OSError as exc:
        return f"it could not be saved ({exc.strerror or type(exc).__name__})"
    except Exception as exc:  # an adapter's bug: the message still reaches the agent, the trace the log
        log.exception("fetching a file of a %s message failed", ctx.channel)
        return f"the download failed ({type(exc).__name__})"


async def _save(ctx: SendContext, download: FileDownload, workspace: Path, name: str, max_bytes: int) -> Path:
    if not download.public_only:
        return await _stream(ctx, ctx.http, download, workspace, name, max_bytes)
    guarded = GuardedTransport(private_hosts_allowed())
    async with httpx.AsyncClient(transport=guarded, timeout=DOWNLOAD_TIMEOUT_S) as http:
        return await _stream(ctx, http, download, workspace, name, max_bytes)


async def _stream(
    ctx: SendContext, http: httpx.AsyncClient, download: FileDownload, workspace: Path, name: str, max_bytes: int
) -> Path:
    headers = dict(download.headers)
    async with http.stream(
        "GET", download.url, headers=headers, follow_redirects=download.follow_redirects
    ) as response:
        if not response.is_success:
            raise DownloadRefused(f"{ctx.channel} answered HTTP {response.status_code}")
        content_type = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if download.json_is_error and content_type in ("application/json", "text/plain"):
            raise DownloadRefused(f"{ctx.channel} refused it ({await _error_text(response)})")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise TooLarge(declared)
        if not Path(name).suffix:  # the parser knew no name (a DingTalk picture): the type gives the extension
            name += mimetypes.guess_extension(content_type) or ""
        path, _, _ = await safe_stream(workspace, f"inbound/{name}", response.aiter_bytes(), max_bytes=max_bytes)
        return path


async def _error_text(response: httpx.Response) -> str:
    """``errcode …: errmsg`` of a JSON error answer, read up to a few KB."""
    head = b""
    async for chunk in response.aiter_bytes():
        head += chunk
        if len(head) >= _ERROR_BYTES:
            break
    try:
        body = json.loads(head[:_ERROR_BYTES])
    except (ValueError, RecursionError):
        return "an answer that is not the file"
    if not isinstance(body, dict):
        return "an answer that is not the file"
    code, text = body.get("errcode", body.get("code")), body.get("errmsg", body.get("msg"))
    return f"errcode {code}: {text}" if text else f"errcode {code}"


def _masked(note: str) -> str:
    """The running job's credentials masked, should a platform's error text ever echo one."""
    masker = current_masker.get()
    return masker.text(note) if masker is not None else note
