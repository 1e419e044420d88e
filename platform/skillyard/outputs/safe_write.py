"""Every file the platform writes goes through here (安全落盘): workspace-relative paths only, a hidden temp file
that is fsynced and then published atomically, no-clobber unless overwriting is asked for, and nothing left behind
when anything fails."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import re
import secrets
import shutil
import time
from collections.abc import AsyncIterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

MAX_UNIQUE_NAMES = 10_000
# errno values of link(2) meaning "this filesystem has no hard links here": publish by O_EXCL instead.
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK, errno.EXDEV})
_TEMP_NAME_BYTES = 64  # of the final name kept in the temp name, so ".name.<hex>.part" stays within NAME_MAX
_TEMP_NAME = re.compile(r"\A\..*\.[0-9a-f]{8}\.part\Z", re.DOTALL)  # what _open_temp names its files
_BATCH = 1 << 20  # bytes handed to the writing thread at a time
_BACKLOG = 8 << 20  # waiting for the writing thread beyond this keeps memory bounded
_WRITEBACK = 1 << 20  # streamed bytes after which the kernel is asked to start writing them to disk
_FADVISE = getattr(os, "posix_fadvise", None)  # not on macOS: there the final fdatasync does all the work


class UnsafePath(ValueError):
    """A path handed to the platform would write outside the workspace, or is not a usable relative path."""


class TooLarge(ValueError):
    """Streamed content went over its size limit; nothing was written."""


def resolve_in_workspace(workspace: Path, relative: str | os.PathLike[str]) -> Path:
    """The absolute path ``relative`` names inside ``workspace``, with symlinks resolved.

    Refuses absolute paths, NUL bytes, ``..`` that climbs out of the workspace and symlinks (in any existing
    component) that lead outside it. Components are resolved one by one, the way the kernel walks them, so
    ``link/..`` means the parent of the link's target. The check is on paths: a concurrent writer inside the
    workspace that swaps a directory for a symlink between this check and the write is not defended against.
    """
    text = os.fspath(relative)
    if not isinstance(text, str):
        raise UnsafePath(f"path {text!r} is bytes; pass it as a str relative to the workspace")
    if "\x00" in text:
        raise UnsafePath(f"path {text!r} contains a NUL byte; remove it")
    if not text.strip():
        raise UnsafePath("the path is empty; give a file name relative to the workspace, e.g. 'report.xlsx'")
    if os.path.isabs(text):
        raise UnsafePath(
            f"path {text!r} is absolute; give it relative to the workspace, e.g. {Path(text).name or 'out.txt'!r}"
        )
    root = Path(os.path.realpath(workspace))
    current = root
    for part in Path(text).parts:
        if part == "..":
            if current == root:
                raise UnsafePath(f"path {text!r} climbs out of the workspace with '..'; use a path inside it")
            current = current.parent
            continue
        current = current / part
        if current.is_symlink():
            target = Path(os.path.realpath(current))
            if not target.is_relative_to(root):
                raise UnsafePath(
                    f"path {text!r} goes through the symlink {current.relative_to(root).as_posix()!r}, which "
                    f"points outside the workspace (to {str(target)!r}); write to a path without that link"
                )
            current = target
    return current


def safe_write(
    workspace: Path, relative: str | os.PathLike[str], data: bytes | str, *, overwrite: bool = False
) -> Path:
    """Write ``data`` (str is UTF-8) to ``relative`` inside ``workspace`` and return the absolute path written.

    Parent folders are created. The bytes go to a hidden temp file beside the target, are fsynced, then published
    atomically. Without ``overwrite`` an existing file is never replaced: the first free name of ``stem-1.ext``,
    ``stem-2.ext``, … is used. On any failure the temp file is removed and no file appears.
    """
    target = _file_target(workspace, relative)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = _open_temp(target)
    try:
        with open(fd, "wb") as file:
            file.write(payload)
            file.flush()
            os.fdatasync(file.fileno())
        return _publish(temp, target, overwrite=overwrite)
    except BaseException:
        _discard(temp)
        raise


def safe_copy(workspace: Path, relative: str | os.PathLike[str], source: Path) -> Path:
    """:func:`safe_write` of a copy of the file ``source`` (streamed, never whole in memory); the path written."""
    target = _file_target(workspace, relative)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = _open_temp(target)
    try:
        with open(fd, "wb") as file, source.open("rb") as original:
            shutil.copyfileobj(original, file, 1 << 20)
            file.flush()
            os.fdatasync(file.fileno())
        return _publish(temp, target, overwrite=False)
    except BaseException:
        _discard(temp)
        raise


async def safe_stream(
    workspace: Path,
    relative: str | os.PathLike[str],
    chunks: AsyncIterable[bytes],
    *,
    max_bytes: int | None = None,
    overwrite: bool = False,
) -> tuple[Path, int, str]:
    """:func:`safe_write` for streamed content; returns ``(path, size, sha256 hex)``.

    More than ``max_bytes`` raises :class:`TooLarge`. Whatever fails (the stream, the limit, the disk, a
    cancellation), the temp file is removed and nothing is published.
    """
    target = _file_target(workspace, relative)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = _open_temp(target)
    sink = _Sink(open(fd, "wb"))  # noqa: SIM115 (closed by the sink's last job, or below)
    loop = asyncio.get_running_loop()
    pending: asyncio.Future[Any] | None = None  # the job the worker thread is doing (never cancelled: shielded)
    batch: list[bytes] = []
    batched = size = 0
    try:
        # The event loop only receives; a worker thread writes and hashes in 1 MB batches, in order, one batch at
        # a time, while the next chunks arrive. For 8 x 5 MB (bench/bench_outputs.py) writing into the page cache
        # took about 20 ms of the loop's time and SHA-256 about 35 ms; both release the GIL, so a second core
        # overlaps them with the download (median 0.74x -> 0.79x of a bare download before reads got larger,
        # address_guard._LargeReads). Every _WRITEBACK bytes the kernel is asked to start writing the range out,
        # so the final fdatasync, the thread's last job, finds little dirty data.
        async for chunk in chunks:
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                raise TooLarge(f"{target.name} is larger than the limit of {describe_size(max_bytes)}")
            batch.append(chunk)
            batched += len(chunk)
            if batched >= _BATCH and (pending is None or pending.done() or batched >= _BACKLOG):
                if pending is not None:
                    await asyncio.shield(pending)
                pending = loop.run_in_executor(None, sink.take, batch)
                batch, batched = [], 0
        if pending is not None:
            await asyncio.shield(pending)
        pending = loop.run_in_executor(None, sink.finish, batch)
        hex_digest: str = await asyncio.shield(pending)
        return _publish(temp, target, overwrite=overwrite), size, hex_digest
    except BaseException:
        if pending is None:
            sink.close()
        else:  # after the thread's job (cancelled meanwhile: it still writes through the descriptor)
            pending.add_done_callback(sink.close_after)
        _discard(temp)  # unlinking a file another thread still writes is fine on POSIX
        raise


class _Sink:
    """The temp file of a stream and the SHA-256 of what went into it; :meth:`take` and :meth:`finish` run on a
    worker thread, one at a time and in order."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._digest = hashlib.sha256()
        self._written = 0  # bytes handed to the kernel so far
        self._synced_from = 0  # start of the range not yet handed to early writeback

    def take(self, parts: list[bytes]) -> None:
        for part in parts:
            self._file.write(part)  # both release the GIL for anything over a few KB
            self._digest.update(part)
            self._written += len(part)
        if self._written - self._synced_from >= _WRITEBACK:
            self._file.flush()
            _start_writeback(self._file.fileno(), self._synced_from, self._written - self._synced_from)
            self._synced_from = self._written

    def finish(self, parts: list[bytes]) -> str:
        """Write the last parts, sync the file and close it; the hex digest of everything written.

        ``fdatasync`` makes the content and size durable before the rename publishes the name, which is all the
        no-half-written-file promise needs; it skips the timestamp update a full ``fsync`` also waits for."""
        try:
            self.take(parts)
            self._file.flush()
            os.fdatasync(self._file.fileno())
            return self._digest.hexdigest()
        finally:
            self._file.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()

    def close_after(self, job: asyncio.Future[Any]) -> None:
        """Close once ``job`` is over; its error, if any, is the one already raised (or superseded)."""
        if not job.cancelled():
            job.exception()  # retrieved, so asyncio does not log it as never retrieved
        self.close()


def describe_size(size: int) -> str:
    """A byte count for people: ``512 bytes``, ``3.5 MB``."""
    units = ("bytes", "KB", "MB", "GB", "TB")
    value, index = float(size), 0
    while value >= 1024 and index < len(units) - 1:
        value /= 1024
        index += 1
    return f"{size} bytes" if index == 0 else f"{value:.1f} {units[index]}".replace(".0 ", " ")


def _file_target(workspace: Path, relative: str | os.PathLike[str]) -> Path:
    target = resolve_in_workspace(workspace, relative)
    if target == Path(os.path.realpath(workspace)):
        raise UnsafePath(f"path {os.fspath(relative)!r} names the workspace folder itself; add a file name")
    return target


def _open_temp(target: Path) -> tuple[int, Path]:
    """A new hidden file beside ``target`` (same folder, so publishing it is a rename, never a copy)."""
    stem = target.name.encode("utf-8")[:_TEMP_NAME_BYTES].decode("utf-8", "ignore")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    for _ in range(100):
        temp = target.with_name(f".{stem}.{secrets.token_hex(4)}.part")
        try:
            return os.open(temp, flags, 0o666), temp  # 0o666 & umask: the same mode as any file the user writes
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot find a free temp file name beside {target}")


def remove_stale_temp_files(root: Path, older_than: float) -> int:
    """Remove the hidden temp files of unfinished writes under ``root`` not touched for ``older_than`` seconds (a
    process killed mid-write leaves them; no live write is that old); how many were removed. Symlinks are never
    followed."""
    cutoff = time.time() - older_than
    removed = 0
    pending = [root]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif _TEMP_NAME.match(entry.name) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
            except OSError:
                continue
    return removed


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing a range to disk now, so the fdatasync before publishing has little left.

    On Linux ``POSIX_FADV_DONTNEED`` first starts asynchronous writeback of the range's dirty pages (it does not
    wait for it), then drops only the pages that are already clean. A hint: it never replaces the fdatasync.
    """
    if _FADVISE is not None:
        with contextlib.suppress(OSError):
            _FADVISE(fd, offset, length, os.POSIX_FADV_DONTNEED)


def _publish(temp: Path, target: Path, *, overwrite: bool) -> Path:
    # The file was fsynced before this rename or link, so the final name never shows partial content. The folder
    # itself is not fsynced: after a crash the new name may be missing, but never present with partial content.
    if overwrite:
        os.replace(temp, target)
        return target
    for candidate in _unique_names(target):
        try:
            # link(2) fails with EEXIST instead of replacing, so taking a name is race-free between writers.
            os.link(temp, candidate)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            return _publish_exclusive(temp, target)
        _discard(temp)
        return candidate
    raise FileExistsError(f"{target.name} and {MAX_UNIQUE_NAMES - 1} numbered variants all exist in {target.parent}")


def _publish_exclusive(temp: Path, target: Path) -> Path:
    """No hard links on this filesystem: reserve a name with O_EXCL, then rename the temp file onto it.

    Between the two steps the reserved name is an empty file; a crash there leaves it empty, never partial.
    """
    for candidate in _unique_names(target):
        try:
            os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
        except FileExistsError:
            continue
        try:
            os.replace(temp, candidate)
        except BaseException:
            _discard(candidate)
            raise
        return candidate
    raise FileExistsError(f"{target.name} and {MAX_UNIQUE_NAMES - 1} numbered variants all exist in {target.parent}")


def _unique_names(target: Path) -> Iterator[Path]:
    """``target``, then ``stem-1.ext``, ``stem-2.ext``, … (``.tar.gz`` and the like stay one extension)."""
    yield target
    suffixes = target.suffixes
    ext = "".join(suffixes[-2:]) if len(suffixes) >= 2 and suffixes[-2] == ".tar" else target.suffix
    stem = target.name[: len(target.name) - len(ext)] if ext else target.name
    for number in range(1, MAX_UNIQUE_NAMES):
        yield target.with_name(f"{stem}-{number}{ext}")


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
