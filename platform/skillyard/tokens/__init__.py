"""Access tokens: who a caller over MCP (and, later, the HTTP API) is, stored hashed (docs/mcp.md#tokens).

The names load on first use: the plugin module of this package is imported by ``skillyard --help``, which must not
import the database stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .identity import TokenIdentity, parse_identity
    from .store import TokenStore

_EXPORTS = {"TokenIdentity": ".identity", "TokenStore": ".store", "parse_identity": ".identity"}
__all__ = ["TokenIdentity", "TokenStore", "parse_identity"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
