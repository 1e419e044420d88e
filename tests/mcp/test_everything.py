"""The MCP reference server ``@modelcontextprotocol/server-everything`` (stdio, from npm) consumed as skills:
text tools, arguments, its structured-content tool and an image tool, through ``yard.run``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from skillyard import SkillYard
from support.npm_cache import npm_package

VERSION = "2026.8.31"


@pytest.fixture
def everything(home: Path) -> Path:
    root = npm_package(
        "everything",
        f"@modelcontextprotocol/server-everything@{VERSION}",
        check="@modelcontextprotocol/server-everything",
    )
    script = root / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    node = shutil.which("node") or pytest.skip("node is not installed")
    (home / "settings.toml").write_text(
        f'[mcp.servers.everything]\ncommand = {json.dumps(node)}\nargs = [{json.dumps(str(script))}, "stdio"]\n'
        "timeout = 30\n",
        encoding="utf-8",
    )
    return home


async def test_the_reference_server_tools_run_as_skills(everything: Path, db_env: str):
    async with SkillYard() as yard:
        report = await yard.mcp.refresh("everything")
        assert {"echo", "get-sum", "get-structured-content", "get-tiny-image"} <= set(report.tools), report
        echo = await yard.run("everything__echo", {"message": "hello"})
        assert echo["ok"] is True and "hello" in echo["text"], echo
        total = await yard.run("everything__get-sum", {"a": 2, "b": 3})
        assert total["ok"] is True and "5" in total["text"], total
        weather = await yard.run("everything__get-structured-content", {"location": "New York"})
        assert weather["ok"] is True and isinstance(weather["structured"], dict) and weather["structured"], weather
        image = await yard.run("everything__get-tiny-image", {}, {"session_id": "everything-image"})
        assert image["ok"] is True and image["images"][0]["ref"].startswith("img_"), image
        refused = await yard.run("everything__get-sum", {"a": "two"})
        assert refused["ok"] is False, refused  # the schema (exposed to models) is checked before the call
