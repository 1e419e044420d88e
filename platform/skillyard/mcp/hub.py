"""``yard.mcp``: the configured MCP servers of a host, their connection pool and their cached tool lists.

Settings are read once per hub (``[mcp.servers]`` in settings.toml). A tool name ``<server>__<tool>`` that the
catalog does not know yet, of a configured server never fetched, fills that server's cache on first use
(:meth:`McpHub.fill_for`); ``skillyard mcp refresh`` refetches on demand.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..executors.sandbox import SandboxUnavailable, tier_for
from .cache import Refresh, read_state, stale, write_cache
from .client import McpPool
from .settings import McpServer, load_servers

if TYPE_CHECKING:
    from ..yard import SkillYard


def tool_dict(tool: Any) -> dict[str, Any]:
    """A tool of ``tools/list`` as the JSON the server sent (camelCase, unset fields left out)."""
    dumped: dict[str, Any] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


class McpHub:
    def __init__(self, yard: SkillYard) -> None:
        self.yard = yard
        self.home = yard.settings.home
        self.servers, self.problems = load_servers(self.home)
        self._pool: McpPool | None = None

    @property
    def pool(self) -> McpPool:
        if self._pool is None:
            self._pool = McpPool(self.servers, self.home / "logs", self.yard.settings.sandbox)
        return self._pool

    def server(self, name: str) -> McpServer | None:
        return self.servers.get(name)

    async def refresh(self, name: str) -> Refresh:
        """Fetch one server's ``tools/list`` into its cache and rescan the catalog."""
        server = self.servers[name]
        tools = [tool_dict(t) for t in await self.pool.list_tools(name)]
        report = write_cache(self.home, server, tools)
        self.yard.rescan()
        return report

    async def fill_for(self, tool_name: str) -> bool:
        """Fill the cache of the server a ``<server>__<tool>`` name belongs to, when it was never fetched (or was
        fetched with another definition); True when the catalog was refreshed. Errors are the call's to report."""
        server_name, sep, _tool = tool_name.partition("__")
        server = self.servers.get(server_name) if sep else None
        if server is None or not stale(self.home, server):
            return False
        await self.refresh(server_name)
        return True

    async def fill_names(self, names: list[str]) -> None:
        """:meth:`fill_for` for each name the catalog does not resolve (an agent's toolNames, before it runs)."""
        for name in names:
            if self.yard.catalog.resolve(name) is None:
                try:
                    await self.fill_for(name)
                except Exception:  # the tool stays missing, and the runtime reports it once per task
                    continue

    def status(self) -> list[dict[str, Any]]:
        """Per configured server: its transport, the cache's age and size, what it left out and what is missing."""
        now = time.time()
        rows = []
        for name, server in self.servers.items():
            state = read_state(self.home, name)
            fetched = state.get("fetched_at") if state else None
            rows.append(
                {
                    "server": name,
                    "transport": server.transport,
                    **self._sandbox(server),
                    "fetched": state is not None,
                    "age_s": round(now - fetched, 1) if isinstance(fetched, int | float) else None,
                    "stale": stale(self.home, server),
                    "tools": [t.get("name") for t in state.get("tools", [])] if state else [],
                    "left_out": state.get("left_out", {}) if state else {},
                    "missing": state.get("missing", []) if state else [],
                }
            )
        return rows

    def _sandbox(self, server: McpServer) -> dict[str, str | None]:
        """Where a stdio server runs (``sandbox``: its tier, or ``host`` with ``sandbox = false``; None over HTTP)
        and, when the configured tier cannot run here, why (``sandbox_problem``)."""
        if server.transport != "stdio":
            return {"sandbox": None, "sandbox_problem": None}
        if server.sandbox is None:
            return {"sandbox": "host", "sandbox_problem": None}
        try:
            return {"sandbox": tier_for(self.yard.settings.sandbox), "sandbox_problem": None}
        except SandboxUnavailable as exc:
            return {"sandbox": None, "sandbox_problem": str(exc)}

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
