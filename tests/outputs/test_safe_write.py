"""Safe file output (安全落盘, outputs/safe_write.py): workspace-relative paths, temp file + fsync + atomic publish,
no-clobber, nothing left behind."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from skillyard.outputs.safe_write import TooLarge, UnsafePath, resolve_in_workspace, safe_stream, safe_write


def files_in(folder: Path) -> list[str]:
    """Every file under ``folder``, hidden temp files included."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


async def chunks_of(*parts: bytes, fail_after: int | None = None) -> AsyncIterator[bytes]:
    for index, part in enumerate(parts):
        if fail_after is not None and index == fail_after:
            raise ConnectionResetError("the peer went away")
        await asyncio.sleep(0)
        yield part


def test_relative_paths_resolve_inside_the_workspace(ws: Path) -> None:
    assert resolve_in_workspace(ws, "report.xlsx") == ws / "report.xlsx"
    assert resolve_in_workspace(ws, Path("out/a/b.txt")) == ws / "out/a/b.txt"
    assert resolve_in_workspace(ws, "./out/../b.txt") == ws / "b.txt"
    assert resolve_in_workspace(ws, "out//b.txt") == ws / "out/b.txt"


@pytest.mark.parametrize(
    ("relative", "message"),
    [
        ("/etc/passwd", "is absolute; give it relative to the workspace, e.g. 'passwd'"),
        ("../x.txt", "climbs out of the workspace with '..'"),
        ("a/../../x.txt", "climbs out of the workspace with '..'"),
        ("a/b/../../../x.txt", "climbs out of the workspace"),
        ("bad\x00name.txt", "contains a NUL byte; remove it"),
        ("", "the path is empty"),
        ("   ", "the path is empty"),
    ],
)
def test_unsafe_paths_are_refused_with_a_fix(ws: Path, relative: str, message: str) -> None:
    with pytest.raises(UnsafePath, match=message.replace("(", r"\(").replace(".", r"\.")):
        resolve_in_workspace(ws, relative)
    with pytest.raises(UnsafePath):
        safe_write(ws, relative, b"data")
    assert files_in(ws.parent) == []


def test_symlinks_out_of_the_workspace_are_refused(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "escape").symlink_to(outside)
    (ws / "file-link.txt").symlink_to(outside / "target.txt")  # dangling, and outside
    (ws / "rel-escape").symlink_to("../outside")
    for relative in ("escape/x.txt", "file-link.txt", "rel-escape/x.txt", "escape"):
        with pytest.raises(UnsafePath, match="points outside the workspace"):
            safe_write(ws, relative, b"data")
    assert list(outside.iterdir()) == []


def test_symlinks_inside_the_workspace_are_followed(ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "alias").symlink_to("real")
    assert resolve_in_workspace(ws, "alias/x.txt") == ws / "real/x.txt"
    # The kernel reads alias/.. as the parent of real's target, and so does the check.
    (ws / "real/deeper").mkdir()
    (ws / "deep").symlink_to("real/deeper")
    assert resolve_in_workspace(ws, "deep/../y.txt") == ws / "real/y.txt"
    assert safe_write(ws, "alias/x.txt", "hi") == ws / "real/x.txt"


def test_a_symlinked_workspace_is_fine(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "ws-link").symlink_to(ws)
    assert safe_write(tmp_path / "ws-link", "a.txt", "x") == ws / "a.txt"


def test_safe_write_publishes_the_whole_file(ws: Path) -> None:
    path = safe_write(ws, "out/deep/report.txt", "héllo")
    assert path == ws / "out/deep/report.txt" and path.is_absolute()
    assert path.read_bytes() == "héllo".encode()
    assert files_in(ws) == ["out/deep/report.txt"]  # no temp file left
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # an ordinary file, not mkstemp's 0600


def test_existing_files_are_never_clobbered(ws: Path) -> None:
    assert safe_write(ws, "a.txt", "1") == ws / "a.txt"
    assert safe_write(ws, "a.txt", "2") == ws / "a-1.txt"
    assert safe_write(ws, "a.txt", "3") == ws / "a-2.txt"
    assert [(ws / n).read_text() for n in ("a.txt", "a-1.txt", "a-2.txt")] == ["1", "2", "3"]
    assert safe_write(ws, "b.tar.gz", "x").name == "b.tar.gz"
    assert safe_write(ws, "b.tar.gz", "y").name == "b-1.tar.gz"
    assert safe_write(ws, "noext", "x").name == "noext"
    assert safe_write(ws, "noext", "y").name == "noext-1"
    # A link inside the workspace is followed, as the kernel would: the file lands at its target.
    (ws / "link.txt").symlink_to("a.txt")
    assert safe_write(ws, "link.txt", "4") == ws / "a-3.txt"
    (ws / "dangling.txt").symlink_to("target.txt")
    assert safe_write(ws, "dangling.txt", "5") == ws / "target.txt"
    assert (ws / "dangling.txt").read_text() == "5"


def test_overwrite_replaces_atomically(ws: Path) -> None:
    safe_write(ws, "a.txt", "old")
    assert safe_write(ws, "a.txt", "new", overwrite=True) == ws / "a.txt"
    assert (ws / "a.txt").read_text() == "new"
    assert files_in(ws) == ["a.txt"]


def test_concurrent_writers_never_share_a_name(ws: Path) -> None:
    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(lambda n: safe_write(ws, "same.txt", f"writer {n}"), range(40)))
    assert len(set(paths)) == 40
    assert sorted(p.read_text() for p in paths) == sorted(f"writer {n}" for n in range(40))
    assert len(files_in(ws)) == 40


def test_without_hard_links_names_are_reserved_exclusively(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    assert safe_write(ws, "a.txt", "1") == ws / "a.txt"
    assert safe_write(ws, "a.txt", "2") == ws / "a-1.txt"
    assert (ws / "a-1.txt").read_text() == "2"
    assert files_in(ws) == ["a-1.txt", "a.txt"]


def test_a_failed_write_leaves_nothing(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_sync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", broken_sync)
    with pytest.raises(OSError, match="Input/output error"):
        safe_write(ws, "a.txt", "data")
    assert files_in(ws) == []


def test_a_failed_publish_leaves_nothing(ws: Path) -> None:
    (ws / "dir").mkdir()
    with pytest.raises(IsADirectoryError):
        safe_write(ws, "dir", "data", overwrite=True)
    assert files_in(ws) == []
    with pytest.raises(UnsafePath, match="names the workspace folder itself"):
        safe_write(ws, ".", "data")


async def test_safe_stream_returns_path_size_and_digest(ws: Path) -> None:
    parts = (b"a" * 70_000, b"b" * 5, b"", b"c" * 1000)
    path, size, digest = await safe_stream(ws, "s/stream.bin", chunks_of(*parts), max_bytes=71_005)
    body = b"".join(parts)
    assert path == ws / "s/stream.bin" and path.read_bytes() == body
    assert (size, digest) == (len(body), hashlib.sha256(body).hexdigest())
    assert files_in(ws) == ["s/stream.bin"]
    again, _, _ = await safe_stream(ws, "s/stream.bin", chunks_of(b"x"))
    assert again == ws / "s/stream-1.bin"
    replaced, _, _ = await safe_stream(ws, "s/stream.bin", chunks_of(b"y"), overwrite=True)
    assert replaced == path and path.read_bytes() == b"y"


@pytest.mark.parametrize(("chunk", "count"), [(65536, 60), (1 << 20, 12), (3 << 20, 4)])
async def test_large_streams_are_hashed_in_order(ws: Path, chunk: int, count: int) -> None:
    """Past 1 MB a worker thread writes and hashes in batches: the file and its digest must still be in order."""
    parts = [bytes([n % 251]) * chunk for n in range(count)]
    path, size, digest = await safe_stream(ws, "large.bin", chunks_of(*parts))
    assert size == chunk * count
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(b"".join(parts)).hexdigest()


async def test_a_stream_failing_midway_leaves_nothing(ws: Path) -> None:
    with pytest.raises(ConnectionResetError):
        await safe_stream(ws, "partial.bin", chunks_of(b"x" * 100_000, b"y" * 100_000, b"z", fail_after=2))
    with pytest.raises(ConnectionResetError):  # after batches went to the hashing thread
        await safe_stream(ws, "partial.bin", chunks_of(*[b"x" * (1 << 20)] * 5, fail_after=3))
    assert files_in(ws) == []


async def test_a_stream_over_the_limit_leaves_nothing(ws: Path) -> None:
    with pytest.raises(TooLarge, match=r"big\.bin is larger than the limit of 1 KB"):
        await safe_stream(ws, "big.bin", chunks_of(b"x" * 1000, b"x" * 25), max_bytes=1024)
    assert files_in(ws) == []
    assert issubclass(TooLarge, ValueError)


async def test_a_cancelled_stream_leaves_nothing(ws: Path) -> None:
    started = asyncio.Event()

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"x" * 65536
            started.set()
            await asyncio.sleep(0.01)

    task = asyncio.create_task(safe_stream(ws, "endless.bin", endless()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert files_in(ws) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open descriptors through /proc")
async def test_a_stream_cancelled_at_any_point_leaves_no_file_and_no_descriptor(ws: Path) -> None:
    """Cancelled at any point, also while a batch is on the writing thread: no temp file and no open descriptor
    is left once the thread's last job is over."""
    before = len(os.listdir("/proc/self/fd"))

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield os.urandom(1 << 20)
            await asyncio.sleep(0)

    for delay in (0.0, 0.005, 0.02, 0.05):
        task = asyncio.create_task(safe_stream(ws, "endless.bin", endless()))
        await asyncio.sleep(delay)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert files_in(ws) == []
    for _ in range(100):  # the last jobs end on their threads, then their callbacks close the files
        await asyncio.sleep(0.01)
        if len(os.listdir("/proc/self/fd")) <= before:
            break
    assert len(os.listdir("/proc/self/fd")) <= before


async def test_safe_stream_refuses_unsafe_paths_before_reading(ws: Path) -> None:
    read = False

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal read
        read = True
        yield b"x"

    with pytest.raises(UnsafePath):
        await safe_stream(ws, "../x.bin", chunks())
    assert not read


def test_safe_write_no_clobber_and_workspace_relative(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    first = safe_write(ws, "exports/report.json", "1")
    second = safe_write(ws, "exports/report.json", "2")
    assert first == ws / "exports" / "report.json" and second == ws / "exports" / "report-1.json"
    assert first.read_text() == "1" and second.read_text() == "2"
    for bad in ("../x.txt", "/etc/x.txt", "a\x00b"):
        with pytest.raises(ValueError):
            safe_write(ws, bad, "x")
    assert files_in(ws) == ["exports/report-1.json", "exports/report.json"]


def test_a_write_of_a_non_text_value_leaves_nothing(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(TypeError):
        safe_write(ws, "exports/report.json", 12345)  # type: ignore[arg-type]
    assert files_in(ws) == []


def test_writes_through_a_symlink_out_of_the_workspace_are_refused(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "exports").symlink_to(outside)
    (ws / "inside").mkdir()
    (ws / "inside" / "up").symlink_to(tmp_path)
    for bad in ("exports/r.json", "inside/up/outside/r.json", "exports/../r.json"):
        with pytest.raises(ValueError):
            safe_write(ws, bad, "x")
    assert list(outside.iterdir()) == []
    assert safe_write(ws, "inside/../ok.json", "fine") == ws / "ok.json"


def test_concurrent_writers_of_one_name_all_keep_their_content(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    results: list[Path] = []
    lock = threading.Lock()

    def write(n: int) -> None:
        path = safe_write(ws, "out/report.txt", f"writer {n}")
        with lock:
            results.append(path)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 16
    assert sorted(p.read_text() for p in results) == sorted(f"writer {n}" for n in range(16))
    assert files_in(ws) == sorted(p.relative_to(ws).as_posix() for p in results)  # no temp file left
