"""The client the official MCP conformance suite drives (``conformance client --command``): it connects to the
scenario's server URL (the last argument) with skillyard's own MCP client code — a server configured in a
temporary ``settings.toml``, its tools fetched into the catalog, a tool called through ``yard.run`` — as a user's
host would. ``MCP_CONFORMANCE_SCENARIO`` names the scenario: ``initialize`` lists the tools, ``tools_call`` calls
``add_numbers``. Exit 0 when the call did what the scenario asks, else 1 with the reason on stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path


async def main(url: str, scenario: str) -> int:
    home = Path(tempfile.mkdtemp(prefix="skillyard-conformance-"))
    (home / "settings.toml").write_text(f"[mcp.servers.conf]\nurl = {json.dumps(url)}\ntimeout = 20\n")
    os.environ["SKILLYARD_HOME"] = str(home)
    from skillyard import SkillYard

    async with SkillYard(include_builtin=False) as yard:
        report = await yard.mcp.refresh("conf")
        if scenario == "tools_call":
            envelope = await yard.run("conf__add_numbers", {"a": 2, "b": 3})
            if not envelope.get("ok"):
                print(f"add_numbers failed: {envelope.get('error')}", file=sys.stderr)
                return 1
            print(json.dumps({"text": envelope.get("text")}))
        else:
            print(json.dumps({"tools": report.tools}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize"))))
