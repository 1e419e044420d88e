"""Remote URL materialization (§6.3 step 1): links in a skill result are downloaded into the session workspace and
recorded as artifact items, so channels deliver files rather than links that expire."""

from __future__ import annotations

import asyncio
import email.message
import email.utils
import mimetypes
import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from ..envelope import add_warning
from .address_guard import GuardedTransport, RefusedDestination
from .media import media_type
from .safe_write import TooLarge, describe_size, safe_stream

# Always downloaded (§6.3): the name says the value is a file.
EXPLICIT_FIELDS = (
    "urls", "image_url", "image_urls", "video_url", "video_urls", "audio_url", "audio_urls", "file_url",
    "file_urls", "output_url", "result_url", "oss_url", "cdn_url", "download_url", "abs_url",
)  # fmt: skip
# Downloaded only when the server says the link is not a web page or JSON; at most ``max_probed`` per result.
AMBIGUOUS_FIELDS = ("url", "link", "href", "src", "image", "video", "audio", "file")
ARRAY_FOR_MEDIA = {"image": "images", "video": "videos", "audio": "audios", "file": "files"}
MAX_REDIRECTS = 5
CONCURRENCY = 4
USER_AGENT = "skillyard (result materialization)"
_URL_FIELDS = frozenset(EXPLICIT_FIELDS + AMBIGUOUS_FIELDS)
#: The fields that name one file (a list field such as ``image_urls`` names others, even beside a top-level file).
_SINGLE_URL_FIELDS = tuple(name for name in EXPLICIT_FIELDS + AMBIGUOUS_FIELDS if not name.endswith("urls"))
_SKIP_TEXT_FIELDS = _URL_FIELDS | frozenset(ARRAY_FOR_MEDIA.values()) | {"local_path", "filename", "warnings"}
# Links in free text: ASCII URL characters only, so a link runs up to adjacent CJK text or punctuation.
_LINK = re.compile(r"https?://[A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]+", re.IGNORECASE)
_HEAD_BYTES = 512  # what a probe looks at to catch a page served under a media type
_NAME_BYTES = 150


@dataclass
class _Target:
    """One URL to download, and the artifact items it fills in place (none: a new item is appended)."""

    url: str
    explicit: bool
    #: (item, the media type of the array it is in)
    items: list[tuple[dict[str, Any], str]] = field(default_factory=list)


class _Failed(Exception):
    """A download failed for a reason already phrased for the warning."""


async def materialize_urls(
    envelope: dict[str, Any],
    workspace: Path,
    *,
    allow_private: bool,
    max_bytes: int = 200 * 1024 * 1024,
    max_probed: int = 8,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Download the remote files an envelope links to into ``workspace`` and record them as artifact items.

    Explicit URL fields are always downloaded; ambiguous fields and links in text only when the server does not
    answer with a web page or JSON, at most ``max_probed`` of them. Each file is capped at ``max_bytes`` and
    ``timeout`` seconds. Unless ``allow_private``, hosts that resolve to private, loopback, link-local or other
    non-public addresses are refused, on every redirect too. A failed download leaves its URL in place and adds a
    line to ``envelope["warnings"]``; nothing raises. Running it again downloads nothing new.
    """
    targets = _collect_targets(envelope, max_probed, workspace)
    if not targets:
        return envelope
    limit = asyncio.Semaphore(CONCURRENCY)

    async def attempt(client: httpx.AsyncClient, target: _Target) -> dict[str, Any] | str | None:
        async with _Slot(limit) as slot:
            return await _attempt(client, target, workspace, max_bytes, timeout, slot)

    async with httpx.AsyncClient(
        transport=GuardedTransport(allow_private),
        timeout=httpx.Timeout(timeout),
        headers={"User-Agent": USER_AGENT, "Accept": "*/*"},
        trust_env=False,  # no proxies from the environment: the guard must see the real destination
    ) as client:
        outcomes = await asyncio.gather(*(attempt(client, target) for target in targets))
    for target, outcome in zip(targets, outcomes, strict=True):
        if isinstance(outcome, dict):
            _record(envelope, target, outcome)
        elif isinstance(outcome, str):
            add_warning(envelope, f"could not download {_display_url(target.url)}: {outcome}")
    return envelope


# --- finding the URLs ------------------------------------------------------------------------------------------


def _collect_targets(envelope: dict[str, Any], max_probed: int, workspace: Path) -> list[_Target]:
    """Every URL to try, in envelope order: artifact items first, then top-level fields, then links in text."""
    done: set[str] = set()
    if _has_local_file(
        envelope, workspace
    ):  # a single artifact returned at the top level, already on disk: its own links
        done.update(url for name in _SINGLE_URL_FIELDS for url in _field_urls(envelope.get(name), explicit=True))
    pending: list[tuple[dict[str, Any], str]] = []
    for item, media in _artifact_items(envelope):
        if _has_local_file(item, workspace):
            done.update(url for url, _ in _item_urls(item))
        else:
            pending.append((item, media))

    targets: dict[str, _Target] = {}

    def add(url: str, explicit: bool, item: tuple[dict[str, Any], str] | None = None) -> None:
        if url in done:
            return
        target = targets.setdefault(url, _Target(url, explicit))
        target.explicit = target.explicit or explicit
        if item is not None:
            target.items.append(item)

    for item, media in pending:
        for index, (url, explicit) in enumerate(_item_urls(item)):
            add(url, explicit, (item, media) if index == 0 else None)  # an item is one artifact: its first URL
    for name in EXPLICIT_FIELDS:
        for url in _field_urls(envelope.get(name), explicit=True):
            add(url, True)
    for name in AMBIGUOUS_FIELDS:
        for url in _field_urls(envelope.get(name), explicit=False):
            add(url, False)
    for key, value in envelope.items():
        if key not in _SKIP_TEXT_FIELDS and isinstance(value, str) and "://" in value:
            for match in _LINK.finditer(value):
                add(_trim_link(match.group()), False)

    chosen: list[_Target] = []
    probed = 0
    for target in targets.values():
        if not target.explicit:
            if probed >= max_probed:
                continue
            probed += 1
        chosen.append(target)
    return chosen


def _artifact_items(envelope: dict[str, Any]) -> Iterable[tuple[dict[str, Any], str]]:
    """Every artifact item of the four arrays, with the media type of its array."""
    for media, name in ARRAY_FOR_MEDIA.items():
        array = envelope.get(name)
        if isinstance(array, list):
            yield from ((item, media) for item in array if isinstance(item, dict))


def _has_local_file(item: dict[str, Any], workspace: Path) -> bool:
    """The item names a file that exists (a relative ``local_path`` is read in the workspace)."""
    local = item.get("local_path")
    try:
        return isinstance(local, str) and bool(local) and (workspace / local).exists()
    except (OSError, ValueError):
        return False


def _item_urls(item: dict[str, Any]) -> list[tuple[str, bool]]:
    found = [(url, True) for name in EXPLICIT_FIELDS for url in _field_urls(item.get(name), explicit=True)]
    found += [(url, False) for name in AMBIGUOUS_FIELDS for url in _field_urls(item.get(name), explicit=False)]
    return list(dict.fromkeys(found))


def _field_urls(value: Any, *, explicit: bool) -> list[str]:
    """The remote URLs in a field value (a string or a list of strings).

    Explicit fields keep any ``scheme://`` value, so an ``ftp:`` or ``file:`` link gets a warning; ambiguous
    fields keep only http(s) links. Local paths are not remote and are left alone.
    """
    values = value if isinstance(value, list) else [value]
    urls = [v.strip() for v in values if isinstance(v, str)]
    if explicit:
        return [u for u in urls if "://" in u]
    return [u for u in urls if u[:8].lower().startswith(("http://", "https://"))]


def _trim_link(link: str) -> str:
    """Drop sentence punctuation and unbalanced closing brackets a link picked up from the text around it."""
    while link:
        last = link[-1]
        opening = {")": "(", "]": "["}.get(last)
        if last in ".,;:!?*" or (opening and link.count(last) > link.count(opening)):
            link = link[:-1]
        else:
            break
    return link


# --- downloading -----------------------------------------------------------------------------------------------


class _Slot:
    """One of the ``CONCURRENCY`` download slots. A download gives it back as soon as its body has arrived, so the
    next one starts while this one is still fsynced and published."""

    def __init__(self, limit: asyncio.Semaphore) -> None:
        self._limit = limit
        self._held = False

    async def __aenter__(self) -> _Slot:
        await self._limit.acquire()
        self._held = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        if self._held:
            self._held = False
            self._limit.release()


async def _attempt(
    client: httpx.AsyncClient, target: _Target, workspace: Path, max_bytes: int, timeout: float, slot: _Slot
) -> dict[str, Any] | str | None:
    """The artifact item, None when a probe found a page, or the reason the download failed."""
    hop_url = target.url
    try:
        async with asyncio.timeout(timeout):  # a whole download, every hop, not just one read
            for _ in range(MAX_REDIRECTS + 1):
                hop_url_parsed = httpx.URL(hop_url)
                if hop_url_parsed.scheme not in ("http", "https"):
                    scheme = hop_url_parsed.scheme or urlsplit(hop_url).scheme or "?"
                    raise _Failed(f"only http and https links are downloaded, not {scheme}:")
                async with client.stream("GET", hop_url_parsed) as response:
                    if response.is_redirect:
                        hop_url = str(response.url.join(response.headers["location"]))
                        continue
                    if not response.is_success:
                        raise _Failed(f"the server answered HTTP {response.status_code} {response.reason_phrase}")
                    return await _save(response, target, workspace, max_bytes, slot)
            last_hop, hop_url = hop_url, target.url  # the reason names the last hop itself
            raise _Failed(f"more than {MAX_REDIRECTS} redirects (the last one to {_display_url(last_hop)})")
    except (TimeoutError, httpx.TimeoutException, httpcore.TimeoutException):
        reason = f"no complete answer within {timeout:g} s"
    except TooLarge:
        reason = f"it is larger than the limit of {describe_size(max_bytes)}"
    except (_Failed, RefusedDestination) as exc:
        reason = str(exc)
    except (httpcore.RemoteProtocolError, httpx.RemoteProtocolError) as exc:
        reason = f"the connection broke off ({exc})"
    except OSError as exc:
        reason = f"the file could not be saved ({exc.strerror or exc})"
    except Exception as exc:  # a download must never fail the run; the reason goes into the warning
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if hop_url != target.url:
        reason = f"after a redirect to {_display_url(hop_url)}, {reason}"
    return reason


async def _save(
    response: httpx.Response, target: _Target, workspace: Path, max_bytes: int, slot: _Slot
) -> dict[str, Any] | None:
    mime = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _Failed(f"it is {describe_size(int(declared))}, over the limit of {describe_size(max_bytes)}")
    chunks = response.aiter_bytes()
    head = b""
    async for chunk in chunks:
        head += chunk
        if len(head) >= _HEAD_BYTES:
            break
    if not target.explicit and (_is_page_type(mime) or _looks_like_page(head)):
        return None  # a web page or an API answer, not a file: leaving the block closes the connection unread
    name = _filename(response.headers.get("content-disposition"), [response.url, httpx.URL(target.url)], mime)
    path, size, digest = await safe_stream(workspace, name, _body(head, chunks, slot), max_bytes=max_bytes)
    content_type = mime or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return {
        "url": target.url,
        "local_path": str(path),
        "filename": path.name,
        "media": media_type(path.name, content_type),
        "size": size,
        "sha256": digest,
        "content_type": content_type,
    }


async def _body(head: bytes, rest: AsyncIterator[bytes], slot: _Slot) -> AsyncIterator[bytes]:
    """The whole body again (the probed head first); the slot is given back once the last chunk has arrived."""
    if head:
        yield head
    async for chunk in rest:
        yield chunk
    slot.release()


def _is_page_type(mime: str) -> bool:
    return mime in ("text/html", "application/xhtml+xml", "application/json", "text/json") or mime.endswith("+json")


def _looks_like_page(head: bytes) -> bool:
    """HTML or JSON under whatever Content-Type the server claimed."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return True
    return re.match(rb'\{\s*["}]|\[\s*[\[{"\d\-\]]', text) is not None


def _filename(disposition: str | None, urls: list[httpx.URL], mime: str) -> str:
    """Content-Disposition, else the URL's last path segment (the final URL, else the original), else
    ``download.<ext>``; always a plain, visible file name."""
    name = ""
    if disposition:
        message = email.message.Message()
        message["content-disposition"] = disposition
        try:  # RFC 6266 §4.3: filename* (RFC 5987, any charset) wins over the plain ASCII fallback filename
            params = message.get_params(header="content-disposition") or []
            encoded = [value for key, value in params if key == "filename" and isinstance(value, tuple)]
            raw = email.utils.collapse_rfc2231_value(encoded[0]) if encoded else message.get_filename()
            name = safe_basename(raw or "")
        except (TypeError, ValueError, LookupError):
            name = ""
    if not name:
        from_urls = [safe_basename(url.path.rsplit("/", 1)[-1]) for url in urls]
        name = next((n for n in from_urls if Path(n).suffix), "") or next((n for n in from_urls if n), "")
    generic = mime in ("", "application/octet-stream", "binary/octet-stream")
    ext = "" if generic else (mimetypes.guess_extension(mime) or "")
    if not name:
        return f"download{ext or '.bin'}"
    return name + ext if ext and not Path(name).suffix else name


def safe_basename(raw: str) -> str:
    """The last segment of ``raw`` without control characters, leading dots or characters shells and other
    systems trip over, cut to a length every filesystem takes."""
    base = raw.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join("_" if ord(c) < 32 or c in '<>:"|?*\x7f' else c for c in base).strip().lstrip(".").strip()
    if len(base.encode("utf-8")) <= _NAME_BYTES:
        return base
    path = Path(base)
    ext = path.suffix if len(path.suffix) <= 16 else ""
    room = _NAME_BYTES - len(ext.encode("utf-8"))
    return base[: len(base) - len(ext)].encode("utf-8")[:room].decode("utf-8", "ignore") + ext


# --- recording the outcome -------------------------------------------------------------------------------------


def _record(envelope: dict[str, Any], target: _Target, artifact: dict[str, Any]) -> None:
    if target.items:
        # an item keeps what it states: its url and its media type; else an images / videos / audios item is of its
        # array's type, and only a files item takes the type the download found (Content-Type or extension)
        for item, media in target.items:
            item.update({k: v for k, v in artifact.items() if k != "media" and not (k == "url" and "url" in item)})
            item.setdefault("media", media if media != "file" else artifact["media"])
        return
    name = ARRAY_FOR_MEDIA[artifact["media"]]
    array = envelope.setdefault(name, [])
    if isinstance(array, list):
        array.append(artifact)
    else:
        shown = _display_url(target.url)
        add_warning(envelope, f"downloaded {shown} to {artifact['local_path']}, but the field {name!r} is not a list")


def _display_url(url: str) -> str:
    """The URL without credentials, query string or fragment, which may carry tokens."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("?", 1)[0].split("#", 1)[0]
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{host}{parts.path}" if parts.scheme else url.split("?", 1)[0].split("#", 1)[0]
