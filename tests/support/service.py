"""A real ``skillyard serve`` app on 127.0.0.1 for the service tests: uvicorn in the test's event loop on a free
port, tokens made through the token store, and an httpx client per token; or a ``skillyard serve`` process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from skillyard import SkillYard


@dataclass
class Served:
    base: str
    yard: SkillYard
    app: Any
    org: str
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    async def token(self, name: str | None = None, *, role: str = "", org: str | None = None, admin: bool = False,
                    identity: dict[str, Any] | None = None) -> str:  # fmt: skip
        from skillyard.tokens.store import TokenStore

        name = name or "t-" + uuid.uuid4().hex[:10]
        return await TokenStore(self.yard.database).add(
            name, role or "role-" + self.org, org or self.org, identity or {}, admin
        )

    def client(self, token: str | None = None, **kw: Any) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        client = httpx.AsyncClient(base_url=self.base, headers=headers, timeout=30, **kw)
        self.clients.append(client)
        return client


def refused_cleanly(answer: httpx.Response, *statuses: int) -> None:
    """The answer is one of ``statuses`` (400 or 422 when none is named) with the service's JSON error body."""
    assert answer.status_code in (statuses or (400, 422)), answer.text
    assert set(answer.json()) == {"error", "detail", "fix"}, answer.text


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.asynccontextmanager
async def serving(yard: SkillYard, **options: Any) -> AsyncIterator[Served]:
    """``create_app(yard, **options)`` served by uvicorn on 127.0.0.1 until the block ends."""
    import uvicorn

    from skillyard.service.app import create_app

    sock = free_socket()
    port = sock.getsockname()[1]
    app = create_app(yard, host="127.0.0.1", port=port, **options)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.02)
        served = Served(f"http://127.0.0.1:{port}", yard, app, "org-" + uuid.uuid4().hex[:8])
        try:
            yield served
        finally:
            for client in served.clients:
                await client.aclose()
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)
        sock.close()


async def serve_process(
    log: Path, *options: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A ``skillyard serve --port … OPTIONS`` process on a free port of 127.0.0.1 (output in ``log``), once it
    answers; its base URL. The caller stops it."""
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    process = subprocess.Popen(
        [sys.executable, "-m", "skillyard", "serve", "--port", str(port), *options],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient() as client:
        for _ in range(600):
            try:
                if (await client.get(f"{base}/openapi.json", timeout=1)).status_code == 200:
                    return process, base
            except httpx.HTTPError:
                pass
            if process.poll() is not None:
                break
            await asyncio.sleep(0.1)
    process.kill()
    process.wait()
    raise RuntimeError(f"serve did not start: {log.read_text()}")


def write_echo(root: Path, name: str = "echo") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Echo the text back.\n---\nEcho.\n")
    (folder / "handler.py").write_text(
        "async def execute(input, ctx):\n"
        "    return {'echo': input['text'], 'org': ctx['org_id'], 'role': ctx['role_id'],\n"
        "            'session': ctx['session_id'], 'channel': ctx['channel'],\n"
        "            'display_md': '**' + input['text'] + '**'}\n"
    )
    (folder / "schema.json").write_text(
        '{"type": "object", "properties": {"text": {"type": "string", "description": "what to echo"}},'
        ' "required": ["text"]}'
    )
    return folder
