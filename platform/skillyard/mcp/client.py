"""Connections to configured MCP servers, pooled per server (the official SDK's ``mcp.Client``).

A connection starts lazily on first use and is reused: a stdio server is started once, an HTTP session kept open.
A connection whose server died is restarted on the next call (one that died during a call is an ``io`` failure of
that call: the tool may have run); the pool closes every connection when the yard closes. The SDK's client is an
anyio context manager, which must be left in the task that entered it, so each connection is held open by a task of
its own and calls reach it from any task.

A stdio server starts in the sandbox of subprocess skills (:mod:`.launch`); its stderr goes to
``SKILLYARD_HOME/logs/mcp-<name>.log`` (never to the host's own output).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any, TextIO

from ..errors import SkillyardError
from ..executors.sandbox import SandboxUnavailable
from ..settings import SandboxSettings
from .launch import Launch, launch
from .settings import McpServer

log = logging.getLogger("skillyard.mcp")

#: Seconds a server may take to start and answer the handshake.
CONNECT_TIMEOUT_S = 30.0
#: Seconds between two reports of a server's unreadable stdout (one garbage line would be one traceback each).
GARBAGE_REPORT_S = 10.0


class _OneLineGarbage(logging.Filter):
    """The SDK logs each line a server prints to stdout that is no JSON-RPC with its traceback: keep one line,
    at most every :data:`GARBAGE_REPORT_S`, saying how many were dropped since."""

    def __init__(self) -> None:
        super().__init__()
        self.last = float("-inf")
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info is None:
            return True
        now = time.monotonic()
        if now - self.last < GARBAGE_REPORT_S:
            self.dropped += 1
            return False
        reason = _reason(record.exc_info[1]) if record.exc_info[1] is not None else ""
        record.msg = f"{record.getMessage()} ({reason[:200]}; {self.dropped} more dropped since the last report)"
        record.args = None
        record.exc_info = record.exc_text = None
        self.last, self.dropped = now, 0
        return True


logging.getLogger("mcp.client.stdio").addFilter(_OneLineGarbage())


class McpUnreachable(SkillyardError):
    """The server could not be started or connected to (``TOOL_UNREACHABLE``); the message says why."""


class McpConnectionLost(SkillyardError):
    """The connection ended while a call waited for its answer (``TOOL_IO_ERROR``); the next call restarts it."""


def _ended(client: Any) -> bool:
    """Whether a connected client's connection has ended (its server exited, its stream closed). The SDK keeps no
    public flag for it; its dispatcher's ``_closed`` is the one a call would answer "Connection closed" from."""
    dispatcher = getattr(getattr(client, "_session", None), "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


class McpConnection:
    """One server's connection (see the module docstring)."""

    def __init__(self, server: McpServer, logs: Path, sandbox: SandboxSettings) -> None:
        self.server = server
        self.logs = logs
        self.sandbox = sandbox
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    def _stdio(self, started: Launch, errlog: TextIO) -> Any:
        """The SDK's stdio transport spawning the sandboxed command."""
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=started.command, args=started.args, env=started.env, cwd=started.cwd)
        return stdio_client(params, errlog=errlog)

    def _http(self) -> Any:
        """The SDK transport of a streamable HTTP server: the URL, or HTTP with our headers."""
        assert self.server.url is not None
        if not self.server.headers:
            return self.server.url
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        # the SDK's own default timeouts, with the configured headers (a bearer token, …)
        http = httpx2.AsyncClient(headers=dict(self.server.headers), timeout=httpx2.Timeout(30.0, read=300.0))
        return _HttpTransport(streamable_http_client(self.server.url, http_client=http), http)

    async def _hold(self, ready: asyncio.Future[Any]) -> None:
        from mcp.client.client import Client

        self.logs.mkdir(parents=True, exist_ok=True)
        started: Launch | None = None
        with open(self.logs / f"mcp-{self.server.name}.log", "a", encoding="utf-8") as errlog:
            try:
                if self.server.command:
                    started = launch(self.server, self.sandbox)
                    if started.warning:
                        log.warning("MCP server %r: %s", self.server.name, started.warning)
                    log.info("MCP server %r starts at sandbox tier %s", self.server.name, started.tier)
                client = Client(self._stdio(started, errlog) if started else self._http())
                async with client:
                    if started is not None:
                        started.started()
                    if not ready.done():
                        ready.set_result(client)
                    await self._stop.wait()
            except BaseException as exc:  # the server died, or never started: the next call restarts it
                if not ready.done():
                    ready.set_exception(exc if isinstance(exc, Exception) else McpUnreachable(str(exc)))
                if isinstance(exc, asyncio.CancelledError):
                    raise
                log.warning("MCP server %r: the connection ended (%s)", self.server.name, type(exc).__name__)
            finally:
                if started is not None:
                    await asyncio.shield(asyncio.to_thread(started.finish))

    async def client(self) -> Any:
        """The connected client, starting (or restarting) the server when needed."""
        async with self._lock:
            if self._task is not None and not self._task.done() and self._client is not None:
                if not _ended(self._client):
                    return self._client
                log.info("MCP server %r: the connection ended; restarting it", self.server.name)
                await self.close()
            self._client = None
            self._stop = asyncio.Event()
            ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._hold(ready), name=f"mcp:{self.server.name}")
            try:
                self._client = await asyncio.wait_for(asyncio.shield(ready), CONNECT_TIMEOUT_S)
            except TimeoutError:
                ready.cancel()  # a failure the task reports later has nobody to read it
                await self.close()
                raise McpUnreachable(
                    f"MCP server {self.server.name!r} did not answer the handshake within {CONNECT_TIMEOUT_S:g} s; "
                    f"check its command/url and its log {self.logs / f'mcp-{self.server.name}.log'}"
                ) from None
            except SandboxUnavailable as exc:
                raise McpUnreachable(f"MCP server {self.server.name!r} cannot start in the sandbox: {exc}") from None
            except Exception as exc:
                raise McpUnreachable(
                    f"MCP server {self.server.name!r} could not be {'started' if self.server.command else 'reached'}: "
                    f"{_reason(exc)}; check its command/url and its log {self.logs / f'mcp-{self.server.name}.log'}"
                ) from None
            return self._client

    async def close(self) -> None:
        self._stop.set()
        connected = self._client is not None
        task, self._task, self._client = self._task, None, None
        if task is not None and not task.done():
            try:
                # a connected client leaves its context in its task (the server is told goodbye); a handshake
                # that never ended has nothing to say goodbye to
                await asyncio.wait_for(task, 10 if connected else 0)
            except (TimeoutError, Exception):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


class _HttpTransport:
    """The SDK's streamable HTTP transport with our own httpx client (closed with it)."""

    def __init__(self, transport: Any, http: Any) -> None:
        self.transport = transport
        self.http = http

    async def __aenter__(self) -> Any:
        return await self.transport.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self.transport.__aexit__(*exc)
        finally:
            await self.http.aclose()


def _reason(exc: BaseException) -> str:
    """A short reason without a traceback (an exception group shows its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpPool:
    """Connections by server name, created on first use."""

    def __init__(self, servers: dict[str, McpServer], logs: Path, sandbox: SandboxSettings) -> None:
        self.servers = servers
        self.logs = logs
        self.sandbox = sandbox
        self._connections: dict[str, McpConnection] = {}

    def connection(self, name: str) -> McpConnection:
        server = self.servers.get(name)
        if server is None:
            known = ", ".join(self.servers) or "none"
            raise McpUnreachable(f"no MCP server {name!r} in settings.toml [mcp.servers] (configured: {known})")
        found = self._connections.get(name)
        if found is None or found.server != server:
            found = self._connections[name] = McpConnection(server, self.logs, self.sandbox)
        return found

    async def list_tools(self, name: str) -> list[Any]:
        """Every tool the server lists (all pages, bounded)."""
        client = await self.connection(name).client()
        tools: list[Any] = []
        cursor = None
        timeout = self.servers[name].timeout
        for _page in range(100):
            try:
                result = await asyncio.wait_for(client.list_tools(cursor=cursor), timeout)
            except TimeoutError:
                raise McpUnreachable(
                    f"MCP server {name!r} did not list its tools within {timeout:g} s (its timeout in settings.toml)"
                ) from None
            tools += result.tools
            cursor = result.next_cursor
            if not cursor:
                break
        return tools

    async def call_tool(self, name: str, tool: str, arguments: dict[str, Any]) -> Any:
        """``tools/call``; a connection found dead is restarted first, one lost during the call is
        :class:`McpConnectionLost` (the tool may or may not have run)."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = await self.connection(name).client()
        try:
            return await client.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise McpConnectionLost(f"MCP server {name!r} closed the connection during the call") from None
            raise

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.close()
