"""MCP: (a) 1,000 calls of a trivial tool of a local stdio MCP server (written with the SDK) through ``yard.run`` (the
``MCP`` exec type: catalog, validation, the pooled connection, the envelope with both views) vs the SDK's own client
calling the same tool of the same server directly: target ours / direct <= 1.2 (best of rounds, interleaved).
(b) 1,000 calls of a trivial skill through ``skillyard mcp serve`` (the SDK's client, streamable HTTP on
127.0.0.1, ``--no-auth``) vs ``yard.run`` in-process. Reports the ratio and calls/s (no target: the figure shows
what the protocol and transport add to a call).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path

from _common import isolate, verdict

CALLS = 1000
STARTUP_S = 30.0


def _skill(root: Path) -> None:
    folder = root / "trivial"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: trivial\ndescription: Answer at once\n---\nIt answers.\n")
    (folder / "handler.py").write_text("async def execute(input, ctx):\n    return {'ok': True, 'n': input.get('n')}\n")


async def part_b(root: Path) -> list[str]:
    """The served call vs the in-process one (distinct inputs: a session is one failure budget, §6.1.4)."""
    import uvicorn

    from mcp import Client
    from skillyard import SkillYard
    from skillyard.mcp.server import SkillServer
    from skillyard.mcp.session import Caller

    async with SkillYard([root], include_builtin=False) as yard:
        started = time.perf_counter()
        for n in range(CALLS):
            envelope = await yard.run("trivial", {"n": n}, {"session_id": "bench"})
            if envelope.get("n") != n:
                sys.exit(f"wrong envelope in-process: {envelope}")
        direct = time.perf_counter() - started

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = SkillServer(SkillYard([root], include_builtin=False), Caller.from_server_context({}))
    async with server.running():
        app = server.http_app("127.0.0.1", port, require_token=False)
        http = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        task = asyncio.create_task(http.serve())
        async with asyncio.timeout(STARTUP_S):
            while not http.started:
                await asyncio.sleep(0.02)
        try:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=30.0) as client:
                started = time.perf_counter()
                for n in range(CALLS):
                    result = await client.call_tool("trivial", {"n": n})
                    if result.structured_content.get("n") != n:
                        sys.exit(f"wrong result over MCP: {result}")
                served = time.perf_counter() - started
        finally:
            http.should_exit = True
            await asyncio.wait({task}, timeout=STARTUP_S)
    return [
        f"(b) yard.run in-process: {CALLS} calls in {direct:.2f} s ({CALLS / direct:.0f} calls/s)",
        f"(b) mcp serve, streamable HTTP: {CALLS} calls in {served:.2f} s ({CALLS / served:.0f} calls/s)",
        f"(b) ratio served / in-process: {served / direct:.1f}x (reported, no target)",
    ]


TOOL_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool(description="Answer at once.")
def ping(n: int) -> dict[str, int]:
    return {"n": n}


server.run("stdio")
"""
ROUNDS_A = 5
TARGET_A = 1.2


async def part_a(base: Path) -> list[str]:
    """Our MCP call path against the SDK's client on the same stdio server (the server's time counts on both sides)."""
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from skillyard import SkillYard

    folder = base / "server"  # the sandbox user reads it (the temporary folder above is 0700)
    folder.mkdir(mode=0o755)
    script = folder / "bench_server.py"
    script.write_text(TOOL_SERVER)
    home = Path(os.environ["SKILLYARD_HOME"])
    (home / "settings.toml").write_text(
        f"[mcp.servers.bench]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(script))}]\n"
    )
    per_round = CALLS // ROUNDS_A
    best = {"ours": float("inf"), "direct": float("inf")}
    params = StdioServerParameters(command=sys.executable, args=[str(script)])
    async with SkillYard(include_builtin=False) as yard, Client(stdio_client(params)) as client:
        await yard.run("bench__ping", {"n": -1})  # first use: fetch the tool list, start the pooled server
        for _ in range(ROUNDS_A):
            started = time.perf_counter()
            for n in range(per_round):
                envelope = await yard.run("bench__ping", {"n": n})
                if envelope.get("structured") != {"n": n}:
                    sys.exit(f"wrong envelope through yard.run: {envelope}")
            best["ours"] = min(best["ours"], time.perf_counter() - started)
            started = time.perf_counter()
            for n in range(per_round):
                result = await client.call_tool("ping", {"n": n})
                if result.structured_content != {"n": n}:
                    sys.exit(f"wrong result from the SDK client: {result}")
            best["direct"] = min(best["direct"], time.perf_counter() - started)
    ratio = best["ours"] / best["direct"]
    ours, direct = best["ours"] / per_round, best["direct"] / per_round
    return [
        f"(a) yard.run('bench__ping'):  {ours * 1e6:,.0f} µs/call ({1 / ours:,.0f} calls/s)",
        f"(a) ClientSession.call_tool:  {direct * 1e6:,.0f} µs/call ({1 / direct:,.0f} calls/s)",
        f"(a) ours / direct = {ratio:.2f}x; target <= {TARGET_A:g}x: {verdict(ratio <= TARGET_A)}"
        f" ({CALLS} calls each, best of {ROUNDS_A} rounds)",
    ]


def main() -> None:
    _tmp, base = isolate("mcp")
    _skill(base / "skills")
    for line in asyncio.run(part_a(base)):
        print(line)
    for line in asyncio.run(part_b(base / "skills")):
        print(line)


if __name__ == "__main__":
    main()
