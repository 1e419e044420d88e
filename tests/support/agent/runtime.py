"""A small end-to-end agent (save/find business skills that log their calls) and its scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from support.agent.probes import write_files

CONTRACT = {
    "target": "saveNote",
    "outputs": {"noteId": {"sources": ["EVIDENCE"], "required": False}},
    "tools": {
        "saveNote": {
            "label": "Saving the note",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER"], "label": "标题"},
                "owner": {"from": "platform.userId", "label": "Owner"},
            },
            "success": {"path": "code", "op": "EQ", "value": 200},
            "extracts": [{"key": "note", "path": "data", "entity": {"type": "note", "name": "title"}}],
            "verify": {"tool": "findNote", "args": {"title": {"from": "call.title"}}},
        },
        "findNote": {
            "label": "Looking up notes",
            "args": {"title": {"sources": ["USER", "MODEL"]}},
            "success": {"path": "found", "op": "TRUTHY"},
            "extracts": [{"key": "notes", "path": "notes", "fields": ["id", "title"]}],
        },
    },
}


SAVE = """import asyncio, json, pathlib
LOG = pathlib.Path({log!r})

async def execute(input, ctx):
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": "saveNote", "title": input["title"], "key": ctx.get("idempotency_key")}}) + "\\n")
    if input["title"].startswith("slow"):
        await asyncio.sleep(5)  # committed, then the wall clock stops the skill
    return {{"code": 200, "data": {{"id": "n-" + input["title"], "title": input["title"]}}}}
"""


FIND = """import json, pathlib
LOG = pathlib.Path({log!r})

async def execute(input, ctx):
    saved = [json.loads(line) for line in LOG.read_text(encoding="utf-8").splitlines()] if LOG.exists() else []
    notes = [{{"id": "n-" + s["title"], "title": s["title"]}} for s in saved if s["title"] == input.get("title")]
    return {{"found": bool(notes), "notes": notes}}
"""


def make_agent(root: Path, log: Path, *, verify: bool = True) -> Path:
    agent = root / "notes_agent"
    skills = agent / "skills"
    contract = json.loads(json.dumps(CONTRACT))
    if not verify:
        del contract["tools"]["saveNote"]["verify"]
    files = {
        agent / "AGENT.md": "---\nagent_code: notes\nagent_name: Note keeper\nskills: [notes.keeper]\n---\n"
        "# Identity\nKeeps notes.\n\n# Mission\nSave the notes the user dictates.\n",
        skills / "keeper" / "SKILL.md": "---\nname: keeper\nskill_key: notes.keeper\n"
        "description: Saves notes.\ntools: [saveNote, findNote]\n---\n# Manual\nSave what the user says.\n",
        skills / "keeper" / "contract.json": json.dumps(contract),
        skills / "saveNote" / "SKILL.md": "---\nname: saveNote\ndescription: Save a note.\nexec:\n  timeout: 1\n---\n",
        skills / "saveNote" / "handler.py": SAVE.format(log=str(log)),
        skills / "saveNote" / "schema.json": json.dumps(
            {
                "type": "object",
                "properties": {"title": {"type": "string"}, "owner": {"type": "string"}},
                "required": ["title"],
            }
        ),
        skills / "findNote" / "SKILL.md": "---\nname: findNote\ndescription: Find notes by title.\n---\n",
        skills / "findNote" / "handler.py": FIND.format(log=str(log)),
        skills / "findNote" / "schema.json": json.dumps(
            {"type": "object", "properties": {"title": {"type": "string"}}}
        ),
    }
    write_files(files)
    return agent


def script(path: Path, *turns: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
    return f"script:{path}"


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}
