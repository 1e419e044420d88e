"""``skillyard mcp``: skills served as MCP tools (``serve``); the group other MCP commands join."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import click

from ..cli.output import json_object, open_yard, run_async, skills_dir_option
from .server import LOOPBACK, SkillServer
from .session import Caller


@click.group(name="mcp")
def mcp_group() -> None:
    """MCP: serve skills as tools to MCP clients (docs/mcp.md).

    Example: skillyard mcp serve --skills-dir ./skills
    """


@mcp_group.command(name="serve")
@skills_dir_option()
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: the address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="HTTP: the port.")
@click.option(
    "--context", "context_json", default=None, help="The identity of stdio and --no-auth calls (JSON or @file)."
)
@click.option("--no-auth", is_flag=True, help="HTTP on a loopback address only: no token, calls run as --context.")
@click.option(
    "--rescan-interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds between reads of the skill roots (tools/list_changed).",
)
def mcp_serve(
    skills_dirs: tuple[Path, ...],
    transport: str,
    host: str,
    port: int,
    context_json: str | None,
    no_auth: bool,
    rescan_interval: float,
) -> None:
    """Serve the exposed skills as MCP tools over stdio or streamable HTTP."""
    given = json_object(context_json, "context") or {}
    if transport == "stdio" and no_auth:
        raise click.UsageError("--no-auth is for --transport http; stdio calls always run as --context")
    if transport == "http" and no_auth and host not in LOOPBACK:
        raise click.UsageError(f"--no-auth serves only a loopback address (127.0.0.1), not {host!r}; use tokens")
    if transport == "http" and context_json is not None and not no_auth:
        raise click.UsageError("over HTTP the identity comes from each token; --context goes with --no-auth only")
    caller = Caller.from_server_context(given) if transport == "stdio" or no_auth else None
    server = SkillServer(open_yard(skills_dirs), caller, rescan_s=rescan_interval)
    run_async(_serve(server, transport, host, port, require_token=not no_auth))


async def _serve(server: SkillServer, transport: str, host: str, port: int, require_token: bool) -> None:
    async with server.running():
        if transport == "stdio":
            await server.serve_stdio()
            return
        import uvicorn

        app = server.http_app(host, port, require_token)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        with contextlib.suppress(asyncio.CancelledError):  # Ctrl-C: uvicorn stopped the app; the host closes
            await uvicorn.Server(config).serve()


from .refresh import refresh_cmd  # noqa: E402  (the consuming half of the group, docs/mcp.md)

mcp_group.add_command(refresh_cmd)
