"""``POST /api/skills/echo/run`` of ``skillyard serve`` (token, rate limit, session owner, body validation, the
envelope) against a bare Starlette endpoint in the same server that calls ``yard.run`` without auth or validation.

    python bench/bench_serve.py

A server process on 127.0.0.1 (the embedded PostgreSQL in a temporary home), a trivial in-process ``echo`` skill in
the bench's own folder; 5,000 requests per endpoint from 50 concurrent clients (httpx, keep-alive), in paired
rounds (the order alternates). The clients share the machine with the server, so one round's ratio moves with
whatever else runs: the verdict is the median of the rounds' ratios. Target: API throughput / bare throughput
>= 0.8, zero errors; p99 latency printed.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time

from _common import isolate, verdict

TMP, BASE = isolate("serve")
REQUESTS = 5000
CLIENTS = 50
ROUNDS = 3
TARGET = 0.8
SKILLS = BASE / "skills"
HANDLER = "async def execute(input, ctx):\n    return {'echo': input['text']}\n"


def make_skill() -> None:
    folder = SKILLS / "echo"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: echo\ndescription: Echo the given text back.\n---\n\n# Echo\n")
    (folder / "handler.py").write_text(HANDLER)
    (folder / "schema.json").write_text(
        '{"type": "object", "properties": {"text": {"type": "string", "description": "what to echo"}},'
        ' "required": ["text"]}'
    )


def cli(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "skillyard", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


async def load(url: str, headers: dict[str, str]) -> tuple[float, list[float], int]:
    import httpx

    latencies: list[float] = []
    errors = 0
    left = REQUESTS
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=60) as client:

        async def worker() -> None:
            nonlocal left, errors
            while left > 0:
                left -= 1
                start = time.perf_counter()
                answer = await client.post(url, json={"input": {"text": "hi"}, "session": "bench"})
                latencies.append(time.perf_counter() - start)
                if answer.status_code != 200 or answer.json().get("echo") != "hi":
                    errors += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CLIENTS)))
        elapsed = time.perf_counter() - start
    return REQUESTS / elapsed, latencies, errors


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(len(ordered) * 0.99) - 1]


async def main() -> int:
    import httpx

    make_skill()
    # The limit is the operator's; the bench's own token may send all its requests in a window.
    os.environ["SKILLYARD_SERVICE_RATE_LIMIT"] = "1000000"
    cli("db", "url")  # starts the embedded PostgreSQL and runs the migrations once
    token = cli("token", "add", "--name", "bench", "--role", "bench", "--org", "bench")
    import socket

    with socket.socket() as sock:  # a free port of 127.0.0.1
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "skillyard",
            "serve",
            "--port",
            str(port),
            "--skills-dir",
            str(SKILLS),
            "--bench-endpoint",
        ]
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if server.poll() is not None:
                raise SystemExit("skillyard serve exited before it served")
            try:
                if httpx.get(f"{base}/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        api = {"url": f"{base}/api/skills/echo/run", "headers": {"Authorization": f"Bearer {token}"}}
        bare = {"url": f"{base}/bench/bare/echo", "headers": {}}
        await load(api["url"], api["headers"])  # warm-up: imports, pools, caches
        best: dict[str, tuple[float, list[float], int]] = {}
        ratios: list[float] = []
        errors = 0
        for round_ in range(ROUNDS):
            order = (("api", api), ("bare", bare)) if round_ % 2 == 0 else (("bare", bare), ("api", api))
            rates: dict[str, float] = {}
            for name, target in order:
                result = await load(target["url"], target["headers"])
                rates[name] = result[0]
                errors += result[2]
                if name not in best or result[0] > best[name][0]:
                    best[name] = result
            ratios.append(rates["api"] / rates["bare"])
        for name in ("api", "bare"):
            rate, latencies, errs = best[name]
            print(f"{name:5} {rate:8.0f} req/s  p50 {sorted(latencies)[len(latencies) // 2] * 1000:6.1f} ms  "
                  f"p99 {p99(latencies) * 1000:6.1f} ms  errors {errs}  (best round)")  # fmt: skip
        ratio = statistics.median(ratios)
        print(f"rounds' ratios: {', '.join(f'{r:.2f}' for r in ratios)}")
        print(f"API / bare throughput (median): {ratio:.2f} (target >= {TARGET}), errors: {errors}: "
              f"{verdict(ratio >= TARGET and errors == 0)}")  # fmt: skip
        return 1 if errors else 0
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
