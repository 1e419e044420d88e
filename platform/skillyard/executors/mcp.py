"""The MCP exec type: a skill that is one tool of a configured MCP server (docs/mcp.md "Consuming MCP servers").

A default plugin: it registers the executor, adds the tool-list cache (``SKILLYARD_HOME/cache/mcp``) as a skill
root when servers are configured, reports the servers in ``skillyard doctor`` and closes their connections with the
yard. The call goes through the host's pooled connection (mcp/client.py); its result keeps both views
(mcp/results.py). A tool outside the server's ``allow`` list is refused here too, whatever a folder declares.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..envelope import failure
from ..hookspecs import hookimpl

if TYPE_CHECKING:
    from ..catalog.skill import Skill
    from ..yard import SkillYard


def _broken_connection(exc: BaseException) -> bool:
    import anyio

    return isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError | anyio.EndOfStream | OSError)


class McpExecutor:
    """Calls ``exec.tool`` of ``exec.server`` with the validated input."""

    async def run(self, skill: Skill, input: dict[str, Any], ctx: dict[str, Any], *, yard: SkillYard) -> Any:
        from mcp.shared.exceptions import MCPError

        from ..mcp import results
        from ..mcp.client import McpConnectionLost, McpUnreachable

        hub = yard.mcp
        server_name, tool = skill.exec.server, skill.exec.tool
        server = hub.server(server_name or "")
        if server is None or tool is None:
            known = ", ".join(hub.servers) or "none"
            return failure(
                skill.name,
                f"skill {skill.name!r} names MCP server {server_name!r}, which settings.toml [mcp.servers] does not "
                f"configure (configured: {known}); add it or fix exec.server",
                error_type="config",
                non_retriable=True,
                mcp_error="unreachable",
            )
        if not server.allows(tool):
            return failure(
                skill.name,
                f"tool {tool!r} is not in the allow list of MCP server {server.name!r}; add it to allow in "
                f"[mcp.servers.{server.name}]",
                error_type="config",
                non_retriable=True,
                mcp_error="unreachable",
            )
        arguments = {k: v for k, v in input.items() if not k.startswith("_")}
        try:
            result = await asyncio.wait_for(hub.pool.call_tool(server.name, tool, arguments), server.timeout)
        except TimeoutError:
            return results.timed_out(skill.name, server.timeout)
        except McpUnreachable as exc:
            return results.unreachable(skill.name, str(exc))
        except McpConnectionLost:
            return results.broken(skill.name, "the server closed the connection")
        except MCPError as exc:
            return results.rpc_failure(skill.name, exc.code, exc.message)
        except Exception as exc:
            if _broken_connection(exc):
                return results.broken(skill.name, type(exc).__name__)
            return results.unknown_failure(skill.name, f"{type(exc).__name__}: {exc}")
        return results.envelope(result, results.workspace_of(ctx), skill.name)


@hookimpl
def register_exec_types(register: Any) -> None:
    register("MCP", McpExecutor())


@hookimpl
def skill_roots(yard: SkillYard) -> list[str] | None:
    """The tool-list cache, once servers are configured (servers no longer configured lose their tools)."""
    from ..mcp.cache import cache_root, drop_unconfigured
    from ..mcp.settings import load_servers

    try:
        servers, _problems = load_servers(yard.settings.home)
    except Exception:  # a settings file that does not parse: the host reports it elsewhere
        return None
    root = cache_root(yard.settings.home)
    drop_unconfigured(yard.settings.home, set(servers))
    if not servers:
        return None
    root.mkdir(parents=True, exist_ok=True)
    return [str(root)]


@hookimpl
async def shutdown(yard: SkillYard) -> None:
    hub = yard.__dict__.get("_mcp")
    if hub is not None:
        await hub.close()


@hookimpl
def doctor_checks(yard: SkillYard) -> list[dict[str, Any]] | None:
    """One check per configured server (cache age, tools left out, missing allowed tools) and per bad entry."""
    from ..mcp.hub import McpHub

    try:
        hub = McpHub(yard)
    except Exception as exc:
        return [{"name": "mcp settings", "status": "fail", "detail": str(exc), "fix": "fix settings.toml"}]
    checks: list[dict[str, Any]] = [
        {"name": "mcp settings", "status": "fail", "detail": problem, "fix": "fix the entry in settings.toml"}
        for problem in hub.problems
    ]
    for row in hub.status():
        name = row["server"]
        problems = [f"{t}: {why}" for t, why in row["left_out"].items() if "allow list" not in why]
        problems += [f"{m}: listed in allow but not served" for m in row["missing"]]
        if not row["fetched"]:
            checks.append(
                {
                    "name": f"mcp server {name}",
                    "status": "warn",
                    "detail": "its tool list was never fetched",
                    "fix": f"run `skillyard mcp refresh {name}` (or call one of its tools)",
                }
            )
            continue
        detail = f"{len(row['tools'])} tool(s), fetched {row['age_s']:.0f} s ago"
        if row["sandbox"] == "host":
            detail += ", runs on the host (sandbox = false)"
        elif row["sandbox"] is not None:
            detail += f", runs at sandbox tier {row['sandbox']}"
        if row["sandbox_problem"]:
            problems.append(f"it cannot start: {row['sandbox_problem']}")
        checks.append(
            {
                "name": f"mcp server {name}",
                "status": "warn" if problems else "ok",
                "detail": detail + ("; " + "; ".join(problems) if problems else ""),
                "fix": "make the sandbox tier available (skillyard sandbox status) or unset SKILLYARD_SANDBOX"
                if row["sandbox_problem"]
                else f"fix the server's tools or its allow list, then `skillyard mcp refresh {name}`"
                if problems
                else None,
            }
        )
    return checks
