"""What the CLI probes share (tests/cli): the skills of their probe root and the documented `list --json`
fields with their types (tests/cli/conftest.py builds the roots)."""

from __future__ import annotations

import json

GREET = """
async def execute(input, ctx):
    return {
        "greeting": "hi " + input["who"],
        "ws": ctx["workspace_dir"],
        "session": ctx["session_id"],
        "role": ctx["role_id"],
        "actor": ctx["actor_name"],
        "got_key": input.get("api_key"),
    }
"""


GREET_SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"who": {"type": "string", "description": "who"}, "api_key": {"type": "string"}},
        "required": ["who"],
    }
)


FANOUT_FM = """
name: notes
description: Notes in subcommands
cli_commands:
  add:
    properties: {text: {type: string, description: the note}}
    required: [text]
  list: {}
"""


FANOUT = """
async def execute(input, ctx):
    return {"sub": input.get("_subcommand"), "text": input.get("text")}
"""


BOOM = """
async def execute(input, ctx):
    raise ValueError("kaput")
"""


LEAKY = """
async def execute(input, ctx):
    return {"ok": False, "error": "the server refused token " + str(input.get("api_token"))}
"""


LEAKY_SCHEMA = json.dumps({"type": "object", "properties": {"api_token": {"type": "string"}, "q": {"type": "string"}}})


DBUSER = """
async def execute(input, ctx):
    session = ctx["db"]
    return {"has_db": session is not None}
"""


LIST_FIELDS = {
    "name": str,
    "description": str,
    "dir": str,
    "root": str,
    "skill_md": str,
    "skill_type": str,
    "exec_type": (str, type(None)),
    "source": str,
    "category": (str, type(None)),
    "trigger_type": str,
    "exposed": bool,
    "tool_names": list,
    "aliases": list,
    "available": bool,
    "needs_config": list,
    "missing_bins": list,
    "os_supported": bool,
    "warnings": list,
    "error": (str, type(None)),
    "active": bool,
    "shadowed": list,
    "shadowed_by": (str, type(None)),
}
