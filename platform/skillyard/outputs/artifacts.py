"""Artifacts (§6.3): files a skill returns are registered as session attachments; files it only wrote to the
workspace root are collected as a fallback. Intermediate files belong in subdirectories and are left alone."""

from __future__ import annotations

import asyncio
import filecmp
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..envelope import add_warning
from ..storage.attachments import NewAttachment, describe_file
from .media import media_type
from .safe_write import resolve_in_workspace, safe_copy

if TYPE_CHECKING:
    from ..invoke.run import Run

#: Artifact arrays and the media type of their items.
ARRAYS = {"images": "image", "videos": "video", "audios": "audio", "files": "file"}
MEDIA_ARRAY = {media: array for array, media in ARRAYS.items()}
#: Never collected as a fallback artifact (unless the user asked for a script this turn).
NOT_ARTIFACTS = frozenset({".py", ".js", ".sh", ".log", ".tmp", ".srt", ".pyc"})
_ASKED_FOR_CODE = re.compile(
    r"(?<![a-z])(?:scripts?|code|python|javascript|bash|shell)(?![a-z])|脚本|代码|源码|\.(?:py|js|sh)(?![a-z0-9])", re.I
)  # whole English words ("description" or "transcript" asks for no script), also right next to Chinese text


def existing_file(value: Any, workspace: Path) -> Path | None:
    """The resolved file inside ``workspace`` a declared ``local_path``/``filename`` names, or None.

    A relative value is read inside the workspace and must stay there (no ``..`` or symlink out of it); an absolute
    value must lie in the workspace too: a result can name any path, and a registered file is served to the session.
    """
    if not _names_a_path(value) or not _is_utf8(value):
        return None
    try:
        if os.path.isabs(value):
            path = Path(value).resolve()
            if not path.is_relative_to(workspace.resolve()):
                return None
        else:
            path = resolve_in_workspace(workspace, value)
        return path if path.is_file() else None
    except (OSError, ValueError):  # UnsafePath is a ValueError
        return None


def _outside_file(value: Any, workspace: Path) -> Path | None:
    """A file a declared absolute path names outside the workspace (None: no such file, or it is inside)."""
    if not _names_a_path(value) or not _is_utf8(value) or not os.path.isabs(value):
        return None
    try:
        path = Path(value).resolve()
        return path if path.is_file() and not path.is_relative_to(workspace.resolve()) else None
    except (OSError, ValueError):
        return None


def _copy_of_skill_file(source: Path, workspace: Path) -> Path:
    """The file of the skill's own folder, copied into the workspace (an identical earlier copy is reused)."""
    existing = workspace / source.name
    if existing.is_file() and filecmp.cmp(existing, source, shallow=False):
        return existing.resolve()
    return safe_copy(workspace, source.name, source)


async def _declared_file(item: dict[str, Any], key: str, workspace: Path, skill_dir: Path) -> tuple[Path | None, str]:
    """The workspace file a declared path names, or why none is registered: a file inside the skill's own folder
    is copied into the workspace; any other file outside the workspace is refused ("" when nothing was named)."""
    value = item.get(key)
    path = existing_file(value, workspace)
    if path is not None:
        return path, ""
    outside = _outside_file(value, workspace)
    if outside is None:
        return None, ""
    if outside.is_relative_to(skill_dir.resolve()):
        try:
            copy = await asyncio.to_thread(_copy_of_skill_file, outside, workspace)
        except (OSError, ValueError) as exc:
            return None, f"{value} was not registered: copying it from the skill's folder failed ({exc})"
        item[key] = str(copy)  # the item now names the copy it is registered as
        return copy, ""
    return None, (
        f"{value} was not registered as an artifact: it is outside the session's workspace; write result files "
        "into runtime_context['workspace_dir']"
    )


def _is_utf8(name: str) -> bool:
    """Whether a file name is text (a name of undecodable bytes arrives with surrogates, which no record can hold)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _names_a_path(value: Any) -> bool:
    """Whether a declared ``local_path`` / ``filename`` can name a file at all: non-empty text without a NUL."""
    return isinstance(value, str) and bool(value) and "\x00" not in value


def _declared_path(workspace: str, value: Any) -> str | None:
    """The real path a declared ``local_path`` names, as registration reads it; None for one that names nothing."""
    return os.path.realpath(os.path.join(workspace, value)) if _names_a_path(value) else None


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
        path, refused = await _declared_file(item, "local_path", workspace, run.skill.dir)
        if path is None and not refused and item is envelope:
            path, refused = await _declared_file(item, "filename", workspace, run.skill.dir)
        if refused:
            add_warning(envelope, refused)
        if path is None:
            continue
        stated = item.get("media")
        media = (
            stated if stated in MEDIA_ARRAY else (default_media if default_media != "file" else media_type(str(path)))
        )
        url = item.get("url") if isinstance(item.get("url"), str) else None
        pending.append((item, _describe(path, media, run.skill.name, url, item)))
    if pending:
        stored = await run.yard.attachments.register(run.session_id, [new for _, new in pending])
        for (item, _), attachment in zip(pending, stored, strict=True):
            item["ref"] = attachment.ref
            if not os.path.isabs(str(item.get("local_path") or "")):  # a relative path becomes the real one
                item["local_path"] = attachment.local_path
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
                if not _is_utf8(entry.name):
                    shown = entry.name.encode("utf-8", "backslashreplace").decode()
                    add_warning(envelope, f"{shown} was not collected: its name is not UTF-8 text; rename it")
                    continue
                if os.path.splitext(entry.name)[1].lower() in NOT_ARTIFACTS:
                    if scripts_ok is None:
                        scripts_ok = bool(_ASKED_FOR_CODE.search(str(run.context.get("raw_input") or "")))
                    if not scripts_ok:
                        continue
                found.append(Path(entry.path).resolve())
    except OSError:
        return envelope
    # registration made every registered path absolute; others are read as the registration reads them
    declared = {_declared_path(workspace, i.get("local_path")) for i, _ in declared_artifacts(envelope)}
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
