"""An MCP server of skillyard on 127.0.0.1 (a real uvicorn in the test's loop), the skills it serves in the tests,
tokens and SDK clients for it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from mcp.client.streamable_http import streamable_http_client

from mcp import Client
from skillyard import SkillYard
from skillyard.mcp.server import SkillServer
from skillyard.mcp.session import Caller
from skillyard.tokens import TokenStore
from support.skills import write_skill

STARTUP_S = 20.0
#: The handshake-era protocol a raw client speaks (:class:`LegacyClient`).
VERSION = "2025-11-25"
SECRET = "sk-live-abcdef123456"

SKILLS: dict[str, tuple[str, str, dict[str, str]]] = {
    "echo": (
        """name: echo
description: Echo the input back
read_only: true
output_schema: {type: object, properties: {ok: {type: boolean}, got: {type: object}}, required: [ok]}""",
        "Echo manual.\n",
        {
            "handler.py": """async def execute(input, ctx):
    await ctx["progress"](1, 2, "half way")
    return {"ok": True, "got": input, "who": ctx["org_id"], "role": ctx["role_id"],
            "emp": ctx["actor_emp_no"], "display_md": "**echoed**"}
""",
            "references/guide.md": "# Guide\nRead me.\n",
        },
    ),
    "report": (
        "name: report\ndescription: Write a report file",
        "",
        {
            "handler.py": """import os
async def execute(input, ctx):
    path = os.path.join(ctx["workspace_dir"], "report.txt")
    with open(path, "w") as fh:
        fh.write("report body")
    return {"ok": True, "files": [{"local_path": path}]}
"""
        },
    ),
    "slow": (
        "name: slow\ndescription: Wait until aborted",
        "",
        {
            "handler.py": """import asyncio, os
async def execute(input, ctx):
    for _ in range(600):
        if ctx["abort_signal"].is_set():
            open(os.path.join(ctx["workspace_dir"], "aborted"), "w").close()
            return {"ok": False, "error": "aborted"}
        await asyncio.sleep(0.05)
    return {"ok": True}
"""
        },
    ),
    "later": (
        "name: later\ndescription: A long job\nasync: true",
        "",
        {
            "handler.py": "import asyncio\n"
            "async def execute(input, ctx):\n    await asyncio.sleep(0.2)\n"
            "    if input.get('fail'):\n        return {'ok': False, 'error': 'asked to fail'}\n"
            "    return {'ok': True, 'value': 42}\n"
        },
    ),
    "vault": (
        "name: vault\ndescription: Use a secret",
        "",
        {
            "schema.json": '{"type": "object", "properties": '
            '{"api_token": {"type": "string"}, "q": {"type": "string"}}}',
            "handler.py": "async def execute(input, ctx):\n"
            "    return {'ok': True, 'echo': input.get('api_token'), 'q': input.get('q')}\n",
        },
    ),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Running:
    """A server being served: its URL, the SkillServer, and a way to make tokens and clients."""

    def __init__(self, server: SkillServer, url: str) -> None:
        self.server = server
        self.url = url

    async def token(self, name: str, role: str = "sales", org: str = "acme", **identity: Any) -> str:
        return await TokenStore(self.server.yard.database).add(name, role, org, identity)

    def client(self, token: str | None = None, **kwargs: Any) -> Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0))
        return Client(streamable_http_client(self.url, http_client=http), read_timeout_seconds=30.0, **kwargs)


class LegacyClient:
    """One 2025-11-25 MCP session over streamable HTTP: initialize, then requests on its Mcp-Session-Id."""

    def __init__(self, http: httpx2.AsyncClient, url: str, token: str) -> None:
        self.http = http
        self.url = url
        self.headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
        }
        self.ids = 0
        self.capabilities: dict[str, Any] = {}
        self.session_id: str | None = None

    async def open(self) -> LegacyClient:
        init = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "tasks-test", "version": "1"}}
        answer = await self.post("initialize", init)
        self.capabilities = answer["result"]["capabilities"]
        self.headers |= {"mcp-protocol-version": VERSION}
        if self.session_id:  # none from a stateless server
            self.headers["mcp-session-id"] = self.session_id
        sent = await self.http.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )
        assert sent.status_code == 202, sent.text
        return self

    async def post(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        response = await self.http.post(self.url, json=body, headers=self.headers)
        assert response.status_code == 200, response.text
        if method == "initialize":
            self.session_id = response.headers.get("mcp-session-id")
        if response.headers["content-type"].startswith("text/event-stream"):
            data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
            messages = [json.loads(d) for d in data if d]
            return next(m for m in messages if m.get("id") == self.ids)
        answer: dict[str, Any] = response.json()
        return answer

    async def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await self.post(method, params)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result


@contextlib.asynccontextmanager
async def serving(
    root: Path, caller: Caller | None, rescan_s: float = 0.2, stateless: bool = False
) -> AsyncIterator[Running]:
    """``mcp serve --transport http`` in this loop: a token required unless ``caller`` (``--no-auth``)."""
    server = SkillServer(SkillYard([root]), caller, rescan_s=rescan_s)
    port = free_port()
    async with server.running():
        app = server.http_app("127.0.0.1", port, require_token=caller is None, stateless=stateless)
        http = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
        task = asyncio.get_running_loop().create_task(http.serve())
        try:
            async with asyncio.timeout(STARTUP_S):
                while not http.started:
                    if task.done():
                        task.result()
                    await asyncio.sleep(0.02)
            yield Running(server, f"http://127.0.0.1:{port}/mcp")
        finally:
            http.should_exit = True
            await asyncio.wait({task}, timeout=STARTUP_S)


def write_mcp_skills(root: Path) -> Path:
    """The skills of ``SKILLS`` under ``root``."""
    for name, (frontmatter, body, files) in SKILLS.items():
        write_skill(root, name, frontmatter, body or "Instructions.\n", files)
    return root
