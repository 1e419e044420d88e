"""The media kind of a file (outputs/media.py)."""

from __future__ import annotations

import pytest

from skillyard.outputs.media import media_type


@pytest.mark.parametrize(
    ("name", "content_type", "media"),
    [
        ("a.png", None, "image"),
        ("a.MP4", None, "video"),
        ("a.mp3", None, "audio"),
        ("a.pdf", None, "file"),
        ("noext", None, "file"),
        ("a.pdf", "image/png", "image"),  # the server's type wins over the name
        ("a.png", "text/html; charset=utf-8", "file"),
        ("a.wav", "application/octet-stream", "audio"),  # a generic type says nothing: the name decides
        ("a.bin", "Video/MP4", "video"),
    ],
)
def test_media_type(name: str, content_type: str | None, media: str) -> None:
    assert media_type(name, content_type) == media
