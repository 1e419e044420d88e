"""The ASGI app of ``skillyard serve``: the HTTP API, the inbound hooks, the web console and the MCP server on one
port. Everything another process needs is in PostgreSQL (session owners, rate-limit windows, turn events, hook
events seen, turn locks), so any number of these processes can share one database behind a load balancer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from ..credentials import masked_logger
from ..mcp.server import SkillServer
from ..mcp.session import Caller
from ..tokens.store import TokenStore
from . import errors, progress
from .agents import Agents
from .auth import Authenticator, Principal
from .bus import Bus
from .limits import BodyLimit
from .locks import TurnLocks
from .ratelimit import RateLimiter
from .sessions import SessionOwners
from .settings import ServiceSettings
from .turns import TurnEvents

if TYPE_CHECKING:
    from ..chains.engine import ChainEngine
    from ..yard import SkillYard

log = masked_logger("skillyard.service")
PRUNE_EVERY_S = 600.0


class Service:
    """What the routes share: the host, the caller checks, the shared state in PostgreSQL and the agents."""

    def __init__(
        self,
        yard: SkillYard,
        settings: ServiceSettings,
        server_context: dict[str, Any] | None = None,
        *,
        agent_dirs: Sequence[Path] = (),
        agents_dir: Path | None = None,
        model: str | None = None,
    ) -> None:
        self.yard = yard
        self.settings = settings
        server = Principal.from_server_context(server_context) if server_context is not None else None
        self.auth = Authenticator(TokenStore(yard.database), server)
        self.limiter = RateLimiter(yard.database, settings.rate_limit, settings.rate_window_s)
        self.owners = SessionOwners(yard.database)
        self.locks = TurnLocks(yard.database)
        self.bus = Bus(yard)
        self.events = TurnEvents(yard.database, self.bus)
        self.agents = Agents(
            yard,
            self.owners,
            self.locks,
            self.events,
            agent_dirs=agent_dirs,
            agents_dir=agents_dir or settings.agents_dir,
            model=model or settings.model,
        )
        self._chains: ChainEngine | None = None
        self._chains_lock = asyncio.Lock()
        self._pruner: asyncio.Task[None] | None = None

    async def start(self) -> None:
        from .hooks.job import share_agents

        progress.install(self.yard)
        share_agents(self.yard, self.agents)
        await self.yard.database.engine()  # migrations first: every endpoint needs the tables
        await self.bus.start()
        self._pruner = asyncio.get_running_loop().create_task(self._prune())

    async def stop(self) -> None:
        if self._pruner is not None:
            self._pruner.cancel()
            await asyncio.gather(self._pruner, return_exceptions=True)
        if self._chains is not None:
            await self._chains.close()
            self._chains = None
        await self.bus.close()

    async def enqueue_inbound(self, binding: str, event_id: str) -> None:
        """Queue the job of a stored inbound message on this process's own queue (run here at once; a worker's
        recovery moves it to the shared queue should this process die, so it names the agent and model)."""
        from .hooks.job import job_arguments
        from .plugin import INBOUND_JOB

        agent = self.agents.locate(self.settings.bindings[binding].agent)
        await self.yard.background.defer(INBOUND_JOB, job_arguments(binding, event_id, agent, self.agents.model))

    async def chain_engine(self) -> ChainEngine:
        """One chain engine for the process's requests (its connection pool is opened once)."""
        async with self._chains_lock:
            if self._chains is None:
                self._chains = await self.yard.chains().open()
        return self._chains

    async def _prune(self) -> None:
        from .hooks.dedup import prune_seen

        while True:
            try:
                await self.events.prune()
                await prune_seen(self.yard.database)
            except Exception as exc:  # a database hiccup: try at the next round
                log.warning("pruning the service tables failed: %s", exc)
            await asyncio.sleep(PRUNE_EVERY_S)


class _McpPath:
    """``/mcp`` reaches the mounted MCP app as ``/mcp/`` (a mount matches only below its prefix; a redirect would
    lose a POST's body with some clients)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") == "/mcp":
            scope = {**scope, "path": "/mcp/", "raw_path": b"/mcp/"}
        await self.app(scope, receive, send)


def create_app(
    yard: SkillYard,
    *,
    settings: ServiceSettings | None = None,
    server_context: dict[str, Any] | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    agent_dirs: Sequence[Path] = (),
    agents_dir: Path | None = None,
    model: str | None = None,
    bench_endpoint: bool = False,
) -> FastAPI:
    """The app over ``yard`` (opened and closed by the app's lifespan). ``server_context``: ``--no-auth``, every
    request runs as it. ``bench_endpoint`` adds ``POST /bench/bare/{name}`` (yard.run, nothing else) for
    bench/bench_serve.py."""
    settings = settings or ServiceSettings.load(yard.settings.home)
    service = Service(yard, settings, server_context, agent_dirs=agent_dirs, agents_dir=agents_dir, model=model)
    mcp_caller = Caller.from_server_context(server_context) if server_context is not None else None
    mcp = SkillServer(yard, mcp_caller, rescan_s=5.0)
    mcp_app = mcp.http_app(host, port, require_token=server_context is None, path="/", stateless=settings.mcp_stateless)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.running(), mcp_app.router.lifespan_context(mcp_app):
            await service.start()
            try:
                yield
            finally:
                await service.stop()

    app = FastAPI(
        title="skillyard",
        summary="Skills, agents, chains and inbound chat messages over HTTP (docs/serve.md).",
        version=_version(),
        lifespan=lifespan,
    )
    app.state.service = service
    errors.install(app)
    from .api import admin, agents, chains, skills

    for module in (skills, agents, chains, admin):
        app.include_router(module.router)
    from .hooks.router import router as hooks_router

    app.include_router(hooks_router)
    from .console.pages import mount_console

    mount_console(app)
    if bench_endpoint:
        from .bench import add_bare_endpoint

        add_bare_endpoint(app, yard)
    app.mount("/mcp", mcp_app)
    app.add_middleware(_McpPath)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("skillyard")
    except PackageNotFoundError:
        return "0"
