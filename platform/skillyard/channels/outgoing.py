"""Files to send: ``attach`` values checked against the run's workspace, artifact items made sendable."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..outputs.media import media_type
from .adapter import OutgoingFile

MAX_ATTACHMENTS = 20


class AttachError(ValueError):
    """An ``attach`` value that cannot be sent; the message names it and the fix."""


def attach_files(value: Any, workspace: str | os.PathLike[str]) -> list[OutgoingFile]:
    """``attach`` (a path or a list of them: absolute paths inside the workspace, or attachment refs the platform
    has already turned into paths) as files to send. Anything else is refused before anything is sent."""
    if value is None or value == "" or value == []:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise AttachError("attach must be a file path or a list of paths (or attachment refs such as file_1)")
    if len(items) > MAX_ATTACHMENTS:
        raise AttachError(f"attach has {len(items)} files; send at most {MAX_ATTACHMENTS} in one message")
    root = Path(workspace).resolve()
    files = []
    for raw in dict.fromkeys(items):
        if "\x00" in raw or not os.path.isabs(raw):
            raise AttachError(
                f"attach: {raw!r} is neither an absolute path in the workspace nor an attachment ref of this "
                f"session; write the file into {root} and pass its absolute path"
            )
        path = Path(raw).resolve()
        if not path.is_relative_to(root):
            raise AttachError(f"attach: {raw} is outside the session's workspace {root}; only workspace files are sent")
        if not path.is_file():
            raise AttachError(f"attach: {raw} does not exist (or is not a file); check the path")
        files.append(OutgoingFile(path, path.name, media_type(path.name), path.stat().st_size))
    return files


def outgoing_files(items: Iterable[Mapping[str, Any]]) -> list[OutgoingFile]:
    """Artifact items (``local_path``, ``filename``, ``media``, ``ref``) whose file exists, as files to send."""
    files = []
    for item in items:
        local = item.get("local_path")
        if not isinstance(local, str) or not os.path.isfile(local):
            continue
        path = Path(local)
        media = item.get("media") if item.get("media") in ("image", "video", "audio", "file") else media_type(local)
        name = item.get("filename") if isinstance(item.get("filename"), str) and item.get("filename") else path.name
        files.append(OutgoingFile(path, str(name), str(media), path.stat().st_size, str(item.get("ref") or "")))
    return files
