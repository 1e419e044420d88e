"""``skillyard mcp refresh [NAME]``: fetch configured servers' tool lists into the cache the catalog reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..cli.output import open_yard, print_json, print_table, run_async, skills_dir_option


@click.command(name="refresh")
@click.argument("name", required=False)
@skills_dir_option()
@click.option("--json", "as_json", is_flag=True, help="Print what each refresh found as JSON.")
def refresh_cmd(name: str | None, skills_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Fetch the tools of one configured MCP server (or all) and rewrite their cache (exit 1 on any failure).

    Example: skillyard mcp refresh crm
    """
    yard = open_yard(skills_dirs, True)
    servers = yard.mcp.servers
    for problem in yard.mcp.problems:
        click.echo(f"warning {problem}", err=True)
    if name is not None and name not in servers:
        known = ", ".join(servers) or "none"
        raise click.UsageError(f"no MCP server {name!r} in settings.toml [mcp.servers] (configured: {known})")
    chosen = [name] if name is not None else list(servers)

    async def go() -> list[dict[str, Any]]:
        async with yard:
            reports: list[dict[str, Any]] = []
            for server in chosen:
                try:
                    reports.append((await yard.mcp.refresh(server)).as_dict())
                except Exception as exc:  # one server's failure does not stop the others
                    reports.append({"server": server, "error": f"{type(exc).__name__}: {exc}"})
            return reports

    reports = run_async(go())
    if as_json:
        print_json(reports)
    else:
        rows = [
            [r["server"], str(len(r.get("tools", []))), ", ".join(r.get("changed", [])) or "-", r.get("error", "ok")]
            for r in reports
        ]
        print_table(rows, ["SERVER", "TOOLS", "CHANGED", "STATUS"])
        for report in reports:
            for tool, why in report.get("left_out", {}).items():
                click.echo(f"note    {report['server']}: {tool} left out ({why})", err=True)
            for missing in report.get("missing", []):
                click.echo(
                    f"warning {report['server']}: {missing} is allowed but the server does not list it", err=True
                )
            for changed in report.get("changed", []):
                click.echo(
                    f"note    {report['server']}: {changed} changed; tasks that pinned it report TOOL_SCHEMA_CHANGED "
                    "when a call no longer fits",
                    err=True,
                )
    if any("error" in r for r in reports):
        raise SystemExit(1)
