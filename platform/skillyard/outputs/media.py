"""The media kind of a file (image / video / audio / file), as artifact items and channel delivery use it (§6.3)."""

from __future__ import annotations

import mimetypes

MEDIA_KINDS = ("image", "video", "audio")
# Types that say nothing about the content: the file name decides instead (object stores often serve these).
_GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/x-download"})


def media_type(path_or_name: str, content_type: str | None = None) -> str:
    """``image``, ``video``, ``audio`` or ``file``: from the MIME type when one is given, else from the extension.

    A generic type such as ``application/octet-stream`` counts as not given.
    """
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime in _GENERIC_TYPES:
        mime = (mimetypes.guess_type(path_or_name)[0] or "").lower()
    major = mime.split("/", 1)[0]
    return major if major in MEDIA_KINDS else "file"
