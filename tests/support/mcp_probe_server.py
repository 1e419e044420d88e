"""A stdio MCP server (the official SDK's ``MCPServer``) that reports what it can do where it runs: the tests of
stdio servers in the sandbox ask it.

    python tests/support/mcp_probe_server.py

Tools: ``probe`` (its uid, its environment's names, its rlimits, whether it can read a path, write a file in a
folder, reach a TCP port on 127.0.0.1, and the pid of a detached ``sleep`` it started on request).
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


def _limit(which: int) -> int | None:
    soft = resource.getrlimit(which)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def _reads(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError:
        return False
    return True


def _writes(folder: str) -> bool:
    try:
        with open(os.path.join(folder, "probe.txt"), "w", encoding="utf-8") as fh:
            fh.write("written by the probe server\n")
    except OSError:
        return False
    return True


def _connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


@server.tool(description="Report what this server can do where it runs.")
def probe(read: str = "", write: str = "", port: int = 0, sleep: str = "") -> dict[str, Any]:
    child = None
    if sleep:  # a detached `sleep SECONDS` in a session of its own: the sandbox must end it with the server
        child = subprocess.Popen(["sleep", sleep], start_new_session=True, stdin=subprocess.DEVNULL).pid
    return {
        "uid": os.getuid(),
        "env": sorted(os.environ),
        "cpu_s": _limit(resource.RLIMIT_CPU),
        "data": _limit(resource.RLIMIT_DATA),
        "read": _reads(read) if read else None,
        "write": _writes(write) if write else None,
        "connect": _connects(port) if port else None,
        "child": child,
    }


if __name__ == "__main__":
    server.run("stdio")
