"""URL materialization of 8 x 5 MB files from a local server through materialize_urls, against a plain httpx
streamed download of the same files to disk at the same concurrency.

    python bench/bench_outputs.py

Target: our throughput / plain httpx throughput >= 0.8.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _common import isolate, verdict

TMP, BASE = isolate("outputs")

import httpx  # noqa: E402

from skillyard.outputs.materialize import CONCURRENCY, materialize_urls  # noqa: E402

FILES = 8
SIZE = 5 * 1024 * 1024
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))
TARGET = 0.8
BODIES = {f"/f{n}.bin": os.urandom(SIZE) for n in range(FILES)}
DIGESTS = {hashlib.sha256(body).hexdigest() for body in BODIES.values()}


class Files(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = BODIES[self.path]
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serve() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Files)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def ours(urls: list[str], folder: Path) -> None:
    envelope = await materialize_urls({"file_urls": urls}, folder, allow_private=True)
    items = envelope.get("files", [])
    if envelope.get("warnings") or {item["sha256"] for item in items} != DIGESTS:
        sys.exit(f"materialize_urls gave a wrong result: {envelope.get('warnings') or items}")


async def plain(urls: list[str], folder: Path, ssl_context: Any, careful: bool = False) -> None:
    """What a skill author would write: one client, four streams at a time, each chunk written as it arrives.

    ``careful`` also does by hand the work materialize_urls must do: SHA-256 of each file and an fsync before
    the file counts as written (for the size of that work; no target).
    """
    folder.mkdir()
    limit = asyncio.Semaphore(CONCURRENCY)

    async def fetch(client: httpx.AsyncClient, url: str) -> None:
        digest = hashlib.sha256()
        async with limit, client.stream("GET", url) as response:
            response.raise_for_status()
            with open(folder / url.rsplit("/", 1)[1], "wb") as file:
                async for chunk in response.aiter_bytes():
                    file.write(chunk)
                    if careful:
                        digest.update(chunk)
                if careful:
                    file.flush()
                    await asyncio.to_thread(os.fsync, file.fileno())

    async with httpx.AsyncClient(verify=ssl_context, trust_env=False) as client:
        await asyncio.gather(*(fetch(client, url) for url in urls))


async def main() -> None:
    ssl_context = httpx.create_ssl_context()  # built once for the baseline too, as materialize_urls does
    with serve() as server:
        urls = [server + path for path in BODIES]
        contenders = {
            "ours": lambda f: ours(urls, f),
            "plain": lambda f: plain(urls, f, ssl_context),
            "careful": lambda f: plain(urls, f, ssl_context, careful=True),
        }
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for round_ in range(ROUNDS + 1):  # round 0 warms up (imports, first connections) and is not counted
            for name, call in contenders.items():
                folder = BASE / f"{name}-{round_}"
                start = time.perf_counter()
                await call(folder)
                elapsed = time.perf_counter() - start
                if sorted(p.stat().st_size for p in folder.iterdir()) != [SIZE] * FILES:
                    sys.exit(f"{name}: the files on disk are not {FILES} x {SIZE} bytes")
                shutil.rmtree(folder)
                if round_:
                    times[name].append(elapsed)

    total_mb = FILES * SIZE / 1e6
    print(
        f"python {sys.version.split()[0]}, httpx {httpx.__version__}; {FILES} files x {SIZE // 2**20} MiB from "
        f"127.0.0.1, {CONCURRENCY} at a time; best and median of {ROUNDS} rounds (contenders interleaved)"
    )
    labels = {
        "ours": "materialize_urls (file_urls)",
        "plain": "plain httpx stream to disk",
        "careful": "(a) plain + sha256 + fsync",
    }
    for name, label in labels.items():
        best, median = min(times[name]), statistics.median(times[name])
        print(
            f"{label:<30} best {best * 1e3:7.1f} ms  {total_mb / best:7.1f} MB/s   "
            f"median {median * 1e3:7.1f} ms  {total_mb / median:7.1f} MB/s"
        )
    ratio = min(times["plain"]) / min(times["ours"])
    median_ratio = statistics.median(times["plain"]) / statistics.median(times["ours"])
    print(f"ours/plain throughput: best {ratio:.2f}x, median {median_ratio:.2f}x")
    careful = min(times["careful"]) / min(times["ours"])
    print(f"(a) ours/careful throughput: best {careful:.2f}x (the same hashing and fsync done by hand; no target)")
    print(f"target: ours/plain >= {TARGET:g}x (best rounds): {verdict(ratio >= TARGET)}")


if __name__ == "__main__":
    asyncio.run(main())
