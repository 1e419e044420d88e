"""notify through the whole platform against Apprise's own async notify: 1,000 notifications to a local json://
receiver, 50 in flight.

    python bench/bench_notify.py

Ours: ``yard.run("notify", {"message": …, "target": "bench"})`` (alias lookup, input checks, the address guard,
one Apprise object per call, result). Baseline: ``Apprise.async_notify`` on one Apprise object holding the same
URL, called directly. Target: baseline time / our time >= 0.8.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _common import isolate, verdict

TMP, BASE = isolate("notify")
os.environ["SKILLYARD_ALLOW_PRIVATE_URLS"] = "1"  # the receiver is on 127.0.0.1

import apprise  # noqa: E402

from skillyard import SkillYard  # noqa: E402

CALLS = 1000
IN_FLIGHT = 50
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
TARGET = 0.8
RECEIVED = [0]


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        RECEIVED[0] += 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


@contextmanager
def serve() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    httpd.daemon_threads = True
    httpd.request_queue_size = 128
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"json://127.0.0.1:{httpd.server_address[1]}/hook"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def timed(call: Callable[[int], Awaitable[bool]]) -> float:
    """Seconds for CALLS calls with IN_FLIGHT at a time; every one must succeed."""
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(i: int) -> bool:
        async with gate:
            return await call(i)

    before = RECEIVED[0]
    start = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(CALLS)))
    elapsed = time.perf_counter() - start
    if not all(results) or RECEIVED[0] - before != CALLS:
        sys.exit(f"a notification was lost: {results.count(False)} failed, {RECEIVED[0] - before} received")
    return elapsed


async def main() -> None:
    with serve() as url:
        alias = json.dumps({"urls": [url], "config": None, "tags": []})
        context = {"skill_args": {"alias_bench": alias}}  # the alias as a stored config reaches the run
        direct = apprise.Apprise(asset=apprise.AppriseAsset(http_redirects=False))
        direct.add(url)
        async with SkillYard(include_builtin=True) as yard:

            async def ours(i: int) -> bool:
                envelope = await yard.run("notify", {"message": f"note {i}", "target": "bench"}, context)
                return envelope.get("sent") is True

            async def baseline(i: int) -> bool:
                return bool(await direct.async_notify(body=f"note {i}"))

            await ours(0), await baseline(0)  # warm-up: imports, the catalog, connections
            best = {"ours": float("inf"), "apprise": float("inf")}
            for _ in range(ROUNDS):
                best["ours"] = min(best["ours"], await timed(ours))
                best["apprise"] = min(best["apprise"], await timed(baseline))
    ratio = best["apprise"] / best["ours"]
    print(
        f"notify via yard.run: {best['ours']:.2f} s for {CALLS} ({CALLS / best['ours']:,.0f}/s), {IN_FLIGHT} in flight"
    )
    print(f"Apprise async_notify: {best['apprise']:.2f} s for {CALLS} ({CALLS / best['apprise']:,.0f}/s)")
    print(f"baseline/ours {ratio:.2f}x (target >= {TARGET}x): {verdict(ratio >= TARGET)}")


if __name__ == "__main__":
    asyncio.run(main())
