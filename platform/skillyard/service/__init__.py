"""``skillyard serve``: the HTTP API, inbound chat hooks, the web console and the MCP server on one port
(docs/serve.md). The names load on first use: the plugin module is imported by ``skillyard --help``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .app import Service, create_app
    from .settings import Binding, ServiceSettings

_EXPORTS = {"Service": ".app", "create_app": ".app", "Binding": ".settings", "ServiceSettings": ".settings"}
__all__ = ["Binding", "Service", "ServiceSettings", "create_app"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
