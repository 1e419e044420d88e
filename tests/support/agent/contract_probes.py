"""Agent folders for the contract loader and preflight probes: a base contract over business tools with schemas,
built on disk, checked with ``skillyard agent check --json``."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent import load_agent
from support.agent.probes import skillyard_cli

SKILL = "notes.keeper"


OK200 = {"path": "code", "op": "EQ", "value": 200}


SCHEMAS: dict[str, dict[str, Any]] = {
    "saveNote": {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "spaceId": {"type": "string"},
            "userId": {"type": "string"},
            "info": {"type": "object", "properties": {"code": {"type": "string"}}},
            "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        },
        "required": ["title"],
    },
    "findNotes": {"type": "object", "properties": {"q": {"type": "string"}, "code": {"type": "string"}}},
    "plainTool": {"type": "object", "properties": {"q": {"type": "string"}}},
}


TOOLS = list(SCHEMAS)


BASE: dict[str, Any] = {
    "target": "saveNote",
    "outputs": {"noteId": {"sources": ["EVIDENCE"], "required": False}},
    "tools": {
        "saveNote": {
            "label": "Saving the note",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER"], "label": "Title"},
                "spaceId": {"from": "shared.spaceId", "sources": ["MODEL"]},
                "userId": {"from": "platform.userId"},
            },
            "success": OK200,
            "extracts": [{"key": "note", "path": "data"}],
            "verify": {"tool": "findNotes", "args": {"q": {"from": "call.title"}}},
        },
        "findNotes": {
            "label": "Looking notes up",
            "args": {"q": {"sources": ["USER", "MODEL"]}},
            "success": OK200,
            "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
        },
        "plainTool": {"args": {"q": {"sources": ["MODEL"]}}},
    },
}


def contract_with(mutate: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    contract = copy.deepcopy(BASE)
    if mutate is not None:
        mutate(contract)
    return contract


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def business_tool(root: Path, name: str) -> None:
    write(root / name / "SKILL.md", f"---\nname: {name}\ndescription: business tool {name}\n---\nDoes {name}.\n")
    write(root / name / "handler.py", "async def execute(input, ctx):\n    return {'code': 200, 'data': {}}\n")
    write(root / name / "schema.json", json.dumps(SCHEMAS[name]))


def contract_skill(
    root: Path,
    folder: str = "keeper",
    key: str = SKILL,
    contract: dict[str, Any] | str | None = None,
    tools: str | None = None,
    front: str = "",
) -> Path:
    tools = tools if tools is not None else "[" + ", ".join(TOOLS) + "]"
    write(
        root / folder / "SKILL.md",
        f"---\nname: {folder}\nskill_key: {key}\ndescription: Keeps notes.\ntools: {tools}\n{front}---\n"
        "The manual: save notes the user dictates.\n",
    )
    if contract is not None:
        text = contract if isinstance(contract, str) else json.dumps(contract, ensure_ascii=False)
        write(root / folder / "contract.json", text)
    return root / folder


def make_agent(
    root: Path,
    contract: dict[str, Any] | str | None = None,
    *,
    skills: str = f"[{SKILL}]",
    agent_front: str = "",
    front: str = "",
    tools: str | None = None,
    with_skill: bool = True,
    with_tools: bool = True,
) -> Path:
    agent = root / "notes_agent"
    write(
        agent / "AGENT.md",
        f"---\nagent_code: notes\nagent_name: Note keeper\n{agent_front}skills: {skills}\n---\n"
        "# Identity\nA careful note keeper.\n# Mission\nKeep the user's notes.\n",
    )
    if with_tools:
        for name in TOOLS:
            business_tool(agent / "skills", name)
    if with_skill:
        contract_skill(agent / "skills", contract=BASE if contract is None else contract, tools=tools, front=front)
    else:
        (agent / "skills").mkdir(parents=True, exist_ok=True)
    return agent


def check(agent: Path, *extra: str, extra_env: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    result = skillyard_cli("agent", "check", str(agent), *extra, "--json", extra_env=extra_env)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    try:
        rows = json.loads(result.stdout)
    except json.JSONDecodeError:  # pragma: no cover - reported by the assertion below
        pytest.fail(f"--json printed no JSON list: {result.stdout!r} {result.stderr!r}")
    return result.returncode, rows


def errors(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["severity"] == "error"]


def load_errors(rows: list[dict[str, Any]], skill: str = SKILL) -> set[tuple[str, str]]:
    return {(r["rule"], r["path"]) for r in rows if r["kind"] == "load" and r["skill"] == skill}


async def loaded(agent: Path, *skills_dirs: Path):
    yard = SkillYard(skills_dirs=list(skills_dirs), include_builtin=False)
    return await load_agent(yard, agent)
