"""Artifacts (§6.3): files a skill returns are registered as session attachments; files it only wrote to the
workspace root are collected as a fallback. Intermediate files belong in subdirectories and are left alone."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..envelope import add_warning
from ..storage.attachments import NewAttachment, describe_file
from .media import media_type
from .safe_write import resolve_in_workspace

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


def existing_file(value: Any, workspace: Path, workspaces_root: Path) -> Path | None:
    """The resolved file a declared ``local_path``/``filename`` names, or None.

    A relative value is read inside the workspace and must stay there (no ``..`` or symlink out of it); an absolute
    value may be anywhere except another session's workspace.
    """
    if not _names_a_path(value) or not _is_utf8(value):
        return None
    try:
        if os.path.isabs(value):
            path = Path(value).resolve()
            root, own = workspaces_root.resolve(), workspace.resolve()
            if path.is_relative_to(root) and not path.is_relative_to(own):
                return None
        else:
            path = resolve_in_workspace(workspace, value)
        return path if path.is_file() else None
    except (OSError, ValueError):  # UnsafePath is a ValueError
        return None


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
    root = run.yard.settings.workspaces_root
    pending: list[tuple[dict[str, Any], NewAttachment]] = []
    for item, default_media in declared:
        path = existing_file(item.get("local_path"), workspace, root)
        if path is None and item is envelope:
            path = existing_file(item.get("filename"), workspace, root)
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
