"""A local MCP server written with the official SDK (``MCPServer``), for the tests of MCP servers' tools as skills.

    python tests/support/mcp_crm_server.py stdio
    python tests/support/mcp_crm_server.py http PORT        # streamable HTTP on 127.0.0.1:PORT/mcp

Tools: ``search`` (read, structured output + JSON text), ``create_order`` (a write, logged to ``$CRM_LOG``),
``fail`` (a tool error), ``slow`` (sleeps), ``big`` (a 10 MB text), ``picture`` (an image block), ``plain`` (text
that is not JSON), ``echo`` (its text as given), ``whoami`` (``$CRM_TOKEN`` as the server sees it: only listed env
vars reach a stdio server), ``strict`` (a required integer), ``rpc`` (a JSON-RPC error), ``views`` (text and
structured views that differ), ``die`` (the server exits mid-call). ``$CRM_BROKEN_SCHEMA=1`` adds a tool
whose input schema is no JSON Schema; ``$CRM_ODD_NAMES=1`` tools with separators, dots and control characters in
their names (answering an image and an embedded file); ``$CRM_GARBAGE=1`` prints lines that are no JSON-RPC first;
``$CRM_CRASH=1`` exits before serving.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")).decode()

server = MCPServer("crm")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, title="Search customers"), description="Find customers.")
def search(q: str) -> dict[str, Any]:
    return {"code": 200, "customers": [{"id": "c-7", "name": q or "Acme"}]}


@server.tool(description="Create an order for a customer.")
def create_order(customer_id: str, item: str) -> dict[str, Any]:
    log = os.environ.get("CRM_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"customer_id": customer_id, "item": item}) + "\n")
    return {"code": 200, "order_id": "o-1", "item": item}


@server.tool(description="Always fails.")
def fail(reason: str = "the CRM refused") -> str:
    raise ToolError(reason)


@server.tool(description="Two views that differ: the text's JSON and the structured content.")
def views() -> CallToolResult:
    text = json.dumps({"code": 200, "view": "text", "items": [{"id": "t-1"}]})
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"code": 200, "view": "structured", "items": [{"id": "s-1"}, {"id": "s-2"}]},
    )


@server.tool(description="Sleeps.")
async def slow(seconds: float = 5.0) -> str:
    await asyncio.sleep(seconds)
    return "done"


@server.tool(description="A very large answer.")
def big() -> str:
    return "x" * (10 * 1024 * 1024)


@server.tool(description="A picture.")
def picture() -> list[Any]:
    return [TextContent(type="text", text="a pixel"), ImageContent(type="image", data=PNG, mime_type="image/png")]


@server.tool(description="Plain words.", structured_output=False)
def plain(q: str = "") -> str:
    return f"hello {q}".strip()


@server.tool(description="Its text as given.", structured_output=False)
def echo(text: str) -> str:
    return text


@server.tool(description="What token the server got.", structured_output=False)
def whoami() -> str:
    return json.dumps({"token": os.environ.get("CRM_TOKEN"), "home": os.environ.get("CRM_UNLISTED")})


@server.tool(description="Answers with a JSON-RPC error: invalid params (-32602) or an internal error (-32603).")
def rpc(code: int = -32602) -> str:
    raise MCPError(code, "the server refused this at the protocol level")


@server.tool(description="Needs an integer.")
def strict(count: int) -> dict[str, Any]:
    return {"count": count}


@server.tool(description="Exits while the call waits for its answer.")
def die() -> str:
    os._exit(9)


def _files() -> list[Any]:
    resource = TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="server-chosen bytes")
    return [
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        EmbeddedResource(type="resource", resource=resource),
    ]


if os.environ.get("CRM_ODD_NAMES") == "1":  # names a server may choose: separators, dots, control characters
    for odd in ("a/b", "../../../../escape", "line\nbreak", "nul\x00name", "n" * 200):
        server.add_tool(_files, name=odd, description="Odd name.")

if os.environ.get("CRM_GARBAGE") == "1":  # lines on stdout that are no JSON-RPC, before serving
    for n in range(50):
        print(f"garbage line {n}", flush=True)

if os.environ.get("CRM_BROKEN_SCHEMA") == "1":
    server._tool_manager.add_tool(lambda: "x", name="broken")  # replaced below: a schema that is no JSON Schema
    broken = server._tool_manager._tools["broken"]
    broken.parameters = {"type": "object", "properties": {"x": {"type": 12}}}
    server._tool_manager.add_tool(lambda: "x", name="dangling")  # a $ref that names nothing
    server._tool_manager._tools["dangling"].parameters = {"type": "object", "properties": {"q": {"$ref": "#/nowhere"}}}
    server._tool_manager.add_tool(lambda: "x", name="deep")  # nested deeper than skillyard reads (64)
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(40):  # 80 objects deep: past 64, within what the SDK parses
        deep = {"type": "object", "properties": {"x": deep}}
    server._tool_manager._tools["deep"].parameters = deep


def main() -> None:
    if os.environ.get("CRM_CRASH") == "1":
        sys.exit(3)
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
