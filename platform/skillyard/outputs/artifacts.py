"""Artifacts (§6.3): files a skill returns are registered as session attachments; files it only wrote to the
workspace root are collected as a fallback. Intermediate files belong in subdirectories and are left alone."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..storage.attachments import NewAttachment, describe_file
from .media import media_type

if TYPE_CHECKING:
    from ..invoke.pipeline import Run

#: Artifact arrays and the media type of their items.
ARRAYS = {"images": "image", "videos": "video", "audios": "audio", "files": "file"}
MEDIA_ARRAY = {media: array for array, media in ARRAYS.items()}
#: Never collected as a fallback artifact (unless the user asked for a script this turn).
NOT_ARTIFACTS = frozenset({".py", ".js", ".sh", ".log", ".tmp", ".srt", ".pyc"})
_ASKED_FOR_CODE = re.compile(r"script|脚本|代码|源码|\bcode\b|python|javascript|bash|shell|\.(py|js|sh)\b", re.I)


def _existing_file(value: Any, workspace: Path) -> Path | None:
    if not isinstance(value, str) or not value or "\x00" in value:
        return None
    path = Path(value) if os.path.isabs(value) else workspace / value
    try:
        return path if path.is_file() else None
    except OSError:
        return None


def declared_artifacts(envelope: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(item, default media) for every artifact the result declares: top level and the four arrays."""
    items: list[tuple[dict[str, Any], str]] = []
    if envelope.get("local_path") or envelope.get("filename"):
        items.append((envelope, "file"))
    for array, media in ARRAYS.items():
        value = envelope.get(array)
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, str):  # a bare path: promote it to an item so it can carry its ref
                    item = value[i] = {"local_path": item}
                if isinstance(item, dict):
                    items.append((item, media))
    return items


def _describe(path: Path, media: str, skill: str, url: str | None, item: dict[str, Any]) -> NewAttachment:
    """A file to register; a size and sha256 the download step already measured are reused, not recomputed."""
    known, size = item.get("sha256"), item.get("size")
    if isinstance(known, str) and len(known) == 64 and isinstance(size, int) and path.stat().st_size == size:
        return NewAttachment(media, path.name, str(path), url, size, known, skill)
    return describe_file(path, media, skill, url)


async def register_artifacts(envelope: dict[str, Any], run: Run) -> dict[str, Any]:
    """Register every declared artifact that exists as a file; each item gets its ``ref`` (img_1, file_2…)."""
    declared = declared_artifacts(envelope)
    if not declared:
        return envelope
    workspace = Path(run.context["workspace_dir"])
    pending: list[tuple[dict[str, Any], NewAttachment]] = []
    for item, default_media in declared:
        path = _existing_file(item.get("local_path"), workspace)
        if path is None and item is envelope:
            path = _existing_file(item.get("filename"), workspace)
        if path is None:
            continue
        stated = item.get("media")
        media = (
            stated if stated in MEDIA_ARRAY else (default_media if default_media != "file" else media_type(str(path)))
        )
        url = item.get("url") if isinstance(item.get("url"), str) else None
        pending.append((item, _describe(path.resolve(), media, run.skill.name, url, item)))
    if pending:
        stored = await run.yard.attachments.register(run.session_id, [new for _, new in pending])
        for (item, _), attachment in zip(pending, stored, strict=True):
            item["ref"] = attachment.ref
            item.setdefault("local_path", attachment.local_path)
            item.setdefault("filename", attachment.filename)
            item.setdefault("media", attachment.type)
            run.record_artifact(attachment.as_context_item())
    return envelope


async def collect_artifacts(envelope: dict[str, Any], run: Run) -> dict[str, Any]:
    """Files created or modified in the workspace root during the run, not declared, become artifacts too."""
    workspace = run.context["workspace_dir"]
    scripts_ok: bool | None = None
    found: list[Path] = []
    try:
        with os.scandir(workspace) as it:
            for entry in it:
                if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
                    continue
                if entry.stat().st_mtime_ns < run.started_ns:
                    continue
                if os.path.splitext(entry.name)[1].lower() in NOT_ARTIFACTS:
                    if scripts_ok is None:
                        scripts_ok = bool(_ASKED_FOR_CODE.search(str(run.context.get("raw_input") or "")))
                    if not scripts_ok:
                        continue
                found.append(Path(entry.path).resolve())
    except OSError:
        return envelope
    declared = {
        str(Path(str(i["local_path"])).resolve()) for i, _ in declared_artifacts(envelope) if i.get("local_path")
    }
    found = sorted(p for p in found if str(p) not in declared)
    if not found:
        return envelope
    stored = await run.yard.attachments.register(
        run.session_id, [describe_file(p, media_type(str(p)), run.skill.name) for p in found]
    )
    for attachment in stored:
        item = {
            "filename": attachment.filename,
            "local_path": attachment.local_path,
            "media": attachment.type,
            "ref": attachment.ref,
            "collected": True,
        }
        envelope.setdefault(MEDIA_ARRAY[attachment.type], []).append(item)
        run.record_artifact(attachment.as_context_item())
    return envelope
