"""``python -m skillyard mcp serve`` as a real subprocess, driven by the SDK's stdio client."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters


async def test_stdio_lists_and_calls_as_the_servers_context(mcp_skills: Path, db_env: str) -> None:
    context = json.dumps({"org_id": "stdio-org", "role_id": "ops", "actor_emp_no": "S1"})
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "skillyard", "mcp", "serve", "--skills-dir", str(mcp_skills), "--context", context],
        env=dict(os.environ),
    )
    async with Client(params, read_timeout_seconds=60.0) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("echo", {"text": "over stdio", "org_id": "forged"})
    assert {"echo", "slow", "skillyard_run_status"} <= names
    envelope = result.structured_content
    assert envelope["got"]["text"] == "over stdio"
    assert (envelope["who"], envelope["role"], envelope["emp"]) == ("stdio-org", "ops", "S1")
