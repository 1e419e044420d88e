"""Safe output of a node's exports and downloads (doc-runtime-contracts "安全落盘"), declared with ``export`` on a
read tool.

Before the call: the ``pathArg`` value must be a path relative to the session's workspace that stays inside it (no
``..`` out of it, no absolute path, no symlink out of it), and an existing file there is never replaced unless the
``overwriteArg`` is ``true`` from a USER source (``OUTPUT_PATH_INVALID``, ``OUTPUT_WRITE_FORBIDDEN``). After a
successful call the runtime writes the content (``contentPath``) or the tool's file (``filePath``) to a hidden temp
file beside the target, checks its size and, when the result gives them, the expected size and SHA-256, fsyncs it
and publishes it atomically (a hard link that fails on an existing name, or ``os.replace`` when overwriting). On any
failure the temp file is removed and nothing that looks final is left behind.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import secrets
from pathlib import Path
from typing import Any

from ...outputs.safe_write import UnsafePath, resolve_in_workspace
from ..codes import ErrorCode
from ..contract import ExportSpec
from ..paths import get_path
from ..state import Evidence, Observation
from .arg_binding import put
from .base import ChainCall, json_copy

USER = "USER"
_CHUNK = 1 << 20


class ExportFailed(Exception):
    """The export could not be verified or published; nothing was left behind."""


def workspace(call: ChainCall) -> Path:
    """The session's workspace, where the business skills of this node run."""
    return Path(call.ctx.yard.workspace(call.ctx.session.id))


def overwrite_chosen(call: ChainCall, spec: ExportSpec) -> bool:
    """The user chose to overwrite: ``overwriteArg`` is true and its source is USER (§5.3)."""
    if spec.overwrite_arg is None:
        return False
    found, value = get_path(call.args, spec.overwrite_arg)
    return found and value is True and call.sources.get(spec.overwrite_arg) == USER


def _target(call: ChainCall, spec: ExportSpec) -> tuple[str, Path]:
    found, relative = get_path(call.args, spec.path_arg)
    if not found or not isinstance(relative, str) or not relative.strip():
        raise UnsafePath(f"{spec.path_arg} needs a file name relative to the workspace, e.g. 'exports/report.pdf'")
    root = workspace(call)
    target = resolve_in_workspace(root, relative)
    if target == Path(os.path.realpath(root)) or target.is_dir() or relative.endswith(("/", os.sep)):
        raise UnsafePath(f"path {relative!r} names a folder; add a file name, e.g. {relative.rstrip('/')}/report.pdf")
    return relative, target


def check(call: ChainCall, spec: ExportSpec) -> Observation | None:
    """The refusal of an export whose path is unsafe or taken, before anything runs; None when it may run."""
    try:
        relative, target = _target(call, spec)
    except UnsafePath as exc:
        return call.refuse(
            ErrorCode.OUTPUT_PATH_INVALID,
            f"the export path of {call.label} cannot be used: {exc}",
            f"call {call.tool} again with {spec.path_arg} a path inside the workspace, e.g. 'exports/report.pdf' "
            "(no absolute path, no '..')",
        )
    if os.path.lexists(target) and not overwrite_chosen(call, spec):
        ask = (
            f"ask the user with builtin_node_follow_up whether to overwrite it (expectedFields "
            f'["{spec.overwrite_arg}"]) and call again with {spec.overwrite_arg}: true, or use another file name'
            if spec.overwrite_arg
            else "use another file name"
        )
        return call.refuse(
            ErrorCode.OUTPUT_WRITE_FORBIDDEN,
            f"{relative!r} already exists in the workspace; an export never replaces a file unless the user chose to",
            ask,
        )
    return None


def _content(spec: ExportSpec, root: Any) -> bytes:
    found, value = get_path(root, spec.content_path)
    if not found or not isinstance(value, str):
        raise ExportFailed(f"the result has no text at {spec.content_path!r} to export")
    if spec.encoding == "base64":
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ExportFailed(f"the content at {spec.content_path!r} is not valid base64") from None
    return value.encode("utf-8")


def _source(call: ChainCall, spec: ExportSpec, root: Any) -> Path:
    found, value = get_path(root, spec.file_path)
    if not found or not isinstance(value, str) or not value.strip():
        raise ExportFailed(f"the result names no file at {spec.file_path!r} to export")
    base = Path(os.path.realpath(workspace(call)))
    try:
        path = Path(os.path.realpath(value)) if os.path.isabs(value) else resolve_in_workspace(base, value)
    except UnsafePath as exc:
        raise ExportFailed(f"the file the tool wrote cannot be used: {exc}") from None
    if not path.is_relative_to(base) or not path.is_file():
        raise ExportFailed(f"the file {value!r} the tool wrote is not a file inside the workspace")
    return path


def _expected(spec: ExportSpec, root: Any) -> tuple[int | None, str | None]:
    size = get_path(root, spec.size_path)[1] if spec.size_path else None
    sha = get_path(root, spec.sha256_path)[1] if spec.sha256_path else None
    if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
        raise ExportFailed(f"the expected size at {spec.size_path!r} is not a whole number: {size!r}")
    if sha is not None and not isinstance(sha, str):
        raise ExportFailed(f"the expected SHA-256 at {spec.sha256_path!r} is not text: {sha!r}")
    return size, sha.strip().lower() if isinstance(sha, str) else None


def _write_temp(target: Path, data: bytes | None, source: Path | None) -> tuple[Path, int, str]:
    """A hidden fsynced temp file beside ``target`` (named as safe_write names its own, so the stale-temp sweep
    finds it): (its path, its size, its SHA-256)."""
    temp = target.with_name(f".{target.name[:64]}.{secrets.token_hex(4)}.part")
    digest, size = hashlib.sha256(), 0
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with open(fd, "wb") as file:
            if data is not None:
                file.write(data)
                digest.update(data)
                size = len(data)
            else:
                assert source is not None
                with source.open("rb") as original:
                    while chunk := original.read(_CHUNK):
                        file.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
            file.flush()
            os.fdatasync(file.fileno())
    except BaseException:
        _discard(temp)
        raise
    return temp, size, digest.hexdigest()


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def publish(call: ChainCall, spec: ExportSpec, record: Evidence, root: Any) -> None:
    """Write, verify and publish the export of a successful call; its facts go to ``record.export``.
    Raises :class:`ExportFailed` (nothing left behind) or ``FileExistsError`` (the name was taken meanwhile)."""
    relative, target = _target(call, spec)
    overwrite = overwrite_chosen(call, spec)
    source = _source(call, spec, root) if spec.file_path else None
    data = _content(spec, root) if source is None else None
    size, sha = _expected(spec, root)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp, written, digest = _write_temp(target, data, source)
    published = False
    try:
        if size is not None and written != size:
            raise ExportFailed(f"the export has {written} bytes, but the result says {size}")
        if sha is not None and digest != sha:
            raise ExportFailed(f"the export's SHA-256 is {digest}, but the result says {sha}")
        if overwrite or source == target:  # the tool wrote the final name itself: its verified copy replaces it
            os.replace(temp, target)
        else:
            os.link(temp, target)  # fails with FileExistsError instead of replacing: no clobber, race-free
        published = True
    finally:
        _discard(temp)
        if source is not None and (source != target or not published):
            _discard(source)  # the tool's file is consumed: verified and published, or refused and removed
    record.export = {"path": relative, "size": written, "sha256": digest, "overwrote": overwrite}


def shown(envelope: Any, root: Any, spec: ExportSpec, record: Evidence) -> Any:
    """What the model reads of an exported result: the content (often large) replaced by where it went."""
    facts = record.export or {}
    if spec.content_path is None or root is not envelope or not isinstance(envelope, dict):
        return envelope
    copy = json_copy(envelope)
    put(copy, spec.content_path, f"(written to {facts.get('path')}, {facts.get('size')} bytes)")
    return copy
