"""``skillyard serve``: the HTTP API, inbound hooks, the console and MCP on one port (added by :mod:`.plugin`)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import click

from ..cli.output import json_object, open_yard, run_async, skills_dir_option
from ..mcp.server import LOOPBACK


@click.command(name="serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="The port.")
@skills_dir_option()
@click.option(
    "--agent",
    "agent_dirs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="An agent folder the API and console answer with (repeatable).",
)
@click.option(
    "--agents-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A folder of agent folders (default: [service] agents_dir).",
)
@click.option("--model", default=None, help="The agents' model spec (default: [service] model, [agent.model] spec).")
@click.option("--no-auth", is_flag=True, help="No tokens: every request runs as --context (127.0.0.1 only).")
@click.option("--context", "context_json", default=None, help="The identity of --no-auth requests (JSON or @file).")
@click.option("--bench-endpoint", is_flag=True, hidden=True, help="Add the bare baseline endpoint of bench_serve.")
def serve_cmd(
    host: str,
    port: int,
    skills_dirs: tuple[Path, ...],
    agent_dirs: tuple[Path, ...],
    agents_dir: Path | None,
    model: str | None,
    no_auth: bool,
    context_json: str | None,
    bench_endpoint: bool,
) -> None:
    """Serve skills, agents, chains, inbound chat hooks and the web console over HTTP (docs/serve.md).

    Example: skillyard serve --port 8000 --skills-dir ./skills --agents-dir ./agents
    """
    if no_auth and host != "127.0.0.1":
        raise click.UsageError(f"--no-auth serves only --host 127.0.0.1, not {host!r}; use tokens elsewhere")
    if context_json is not None and not no_auth:
        raise click.UsageError("the identity comes from each request's token; --context goes with --no-auth only")
    if host not in LOOPBACK and host != "0.0.0.0":
        click.echo(f"note: serving on {host}; put TLS in front (docs/serve.md#deployment)", err=True)
    context = (json_object(context_json, "context") or {}) if no_auth else None
    yard = open_yard(skills_dirs)
    from .app import create_app

    app = create_app(
        yard,
        server_context=context,
        host=host,
        port=port,
        agent_dirs=agent_dirs,
        agents_dir=agents_dir,
        model=model,
        bench_endpoint=bench_endpoint,
    )
    run_async(_serve(app, host, port))


async def _serve(app: object, host: str, port: int) -> None:
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    with contextlib.suppress(asyncio.CancelledError):  # Ctrl-C: uvicorn stops the app, the lifespan closes the host
        await server.serve()
    if not server.started:
        raise click.ClickException(f"could not serve on {host}:{port} (is the port taken?)")
