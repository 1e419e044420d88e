"""MCP in both directions (docs/mcp.md): skills served as MCP tools (:mod:`.server`), MCP servers' tools as skills."""
