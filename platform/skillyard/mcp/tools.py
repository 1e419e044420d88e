"""Skills as MCP tools: the definitions ``tools/list`` answers with and the results of ``tools/call``.

A tool is what models are offered (``skillyard list``'s exposed skills, with the fan-out names); its input schema
is the one models see (credential parameters stripped), its result the envelope as structured content plus a text
block, the skill's ``display_md`` as a second text block and its artifacts as resource links.
"""

from __future__ import annotations

import json
import mimetypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types

from ..outputs.artifacts import declared_artifacts
from .resources import artifact_uri

if TYPE_CHECKING:
    from ..catalog.skill import Skill
    from ..yard import SkillYard

#: The tool that answers for async skills' background runs on clients without MCP tasks.
RUN_STATUS_TOOL = "skillyard_run_status"
#: The ``execution`` of an async skill's tool: a client may ask for a task.
TASK_OPTIONAL = types.ToolExecution(task_support="optional")
RUN_STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"run_id": {"type": "string", "description": "The run_id an async skill's answer gave."}},
    "required": ["run_id"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ExposedTool:
    """One tool: the skill behind it and its subcommand (fan-out), if any."""

    name: str
    skill: Skill
    subcommand: str | None

    def definition(self) -> types.Tool:
        skill = self.skill
        schema = skill.schema.subcommands[self.subcommand] if self.subcommand else skill.schema.exposed
        return types.Tool(
            name=self.name,
            title=self.name,
            description=skill.tool_description,
            input_schema={"type": "object", **schema},
            output_schema=skill.output_schema,
            annotations=types.ToolAnnotations(title=self.name, read_only_hint=skill.read_only),
            execution=TASK_OPTIONAL if skill.is_async else None,  # MCP tasks (2025-11-25): mcp/tasks.py
        )


def exposed_tools(yard: SkillYard) -> dict[str, ExposedTool]:
    """The tools of the exposed skills, by tool name, in the catalog's order."""
    tools: dict[str, ExposedTool] = {}
    for entry in yard.entries:
        if entry.active and entry.skill.exposed:
            for name, sub in entry.skill.tool_names.items():
                tools[name] = ExposedTool(name, entry.skill, sub)
    return tools


def run_status_definition() -> types.Tool:
    return types.Tool(
        name=RUN_STATUS_TOOL,
        title=RUN_STATUS_TOOL,
        description="The result of an async skill's background run: its envelope, or {status: 'running'}.",
        input_schema=RUN_STATUS_SCHEMA,
        annotations=types.ToolAnnotations(title=RUN_STATUS_TOOL, read_only_hint=True),
    )


def tool_list(tools: dict[str, ExposedTool]) -> list[types.Tool]:
    """Every tool's definition, and the run-status tool when an async skill is among them."""
    listed = [tool.definition() for tool in tools.values()]
    if any(tool.skill.is_async for tool in tools.values()):
        listed.append(run_status_definition())
    return listed


def call_result(envelope: dict[str, Any], session_id: str) -> types.CallToolResult:
    """The envelope as structured content and text, ``display_md`` as text, artifacts as resource links."""
    text = json.dumps(envelope, ensure_ascii=False, default=str)
    content: list[types.ContentBlock] = [types.TextContent(text=text)]
    display = envelope.get("display_md")
    if isinstance(display, str) and display.strip():
        content.append(types.TextContent(text=display))
    for item, _ in declared_artifacts(envelope):
        ref = item.get("ref")
        if isinstance(ref, str) and ref:
            filename = str(item.get("filename") or ref)
            content.append(
                types.ResourceLink(
                    uri=artifact_uri(session_id, ref),
                    name=filename,
                    mime_type=mimetypes.guess_type(filename)[0] or "application/octet-stream",
                )
            )
    return types.CallToolResult(
        content=content,
        structured_content=json.loads(text),
        is_error=not envelope.get("ok", False),
    )


def error_result(message: str) -> types.CallToolResult:
    """A call skillyard refused before any skill ran (unknown tool, bad arguments, a session of someone else)."""
    envelope = {"ok": False, "success": False, "error": message}
    return types.CallToolResult(content=[types.TextContent(text=message)], structured_content=envelope, is_error=True)
