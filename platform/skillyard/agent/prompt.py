"""The node prompt and the model's tool list (contract spec §1.2, §1.3, §7, §8).

The system prompt holds the agent profile (identity, mission, boundary, style, principles), the skill manual, the
contract-derived tool catalog (builtins and the business tools configured in ``contract.tools``; unconfigured
business tools are still offered as functions, without contract notes — §1.3), the node's goal, its inputs (missing
required ones marked) and the declared outputs. It is rebuilt for every model call from the current state, so a
resumed node sees what happened while it was suspended.
"""

from __future__ import annotations

import json
from typing import Any

from .context import NodeContext
from .contract import OutputType, ToolContract

#: The manual goes in whole up to this many characters; past it, the head and a pointer to read the rest.
MANUAL_HEAD_CHARS = 8000


def section(title: str, text: str) -> str:
    """A ``## title`` block, or nothing when the text is empty."""
    return f"## {title}\n{text.strip()}\n" if text and text.strip() else ""


def profile_sections(profile: Any) -> list[str]:
    """The agent's five descriptions (§1.2), as every prompt of the agent shows them."""
    return [
        section("Identity", profile.identity),
        section("Mission", profile.mission),
        section("Boundary", profile.boundary),
        section("Style", profile.style),
        section("Principles", profile.principles),
    ]


def _tool_line(tool: ToolContract) -> str:
    kind = "WRITE (needs the user's approval; call builtin_node_approval when asked)" if tool.is_write else "read"
    parts = [f"- {tool.name}: {tool.label or tool.name} — {kind}"]
    for path, arg in tool.args.items():
        how = []
        if arg.from_expr is not None or arg.has_const:
            how.append("filled by the platform")
        if arg.sources:
            how.append("allowed sources: " + ", ".join(s.value for s in arg.sources))
        if not arg.required:
            how.append("optional")
        if arg.enum:
            how.append("one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in arg.enum))
        parts.append(
            f"    - {path}" + (f" ({arg.label})" if arg.label else "") + (": " + "; ".join(how) if how else "")
        )
    return "\n".join(parts)


def manual_text(manual: str) -> str:
    if len(manual) <= MANUAL_HEAD_CHARS:
        return manual
    return (
        manual[:MANUAL_HEAD_CHARS]
        + f"\n\n[The manual is {len(manual)} characters; only the first {MANUAL_HEAD_CHARS} are shown. "
        "Read the rest with read_skill_file if you need it.]"
    )


def system_prompt(ctx: NodeContext, profile: Any) -> str:
    """The node's system prompt (see the module docstring)."""
    skill = ctx.skill
    node = ctx.node
    parts = [
        f"You are {profile.agent_name} ({profile.agent_code}).",
        *profile_sections(profile),
        section(f"Skill: {skill.name} ({skill.skill_key})", skill.description),
        section("Manual", manual_text(skill.manual)),
    ]
    configured = [skill.contract.tools[name] for name in skill.tool_names if name in skill.contract.tools]
    catalog = "\n".join(_tool_line(t) for t in configured)
    parts.append(
        section(
            "Tools",
            "Builtin tools (builtin_*) are always available. Business tools of this skill:\n"
            + (catalog or "(no business tool is configured in the contract)"),
        )
    )
    parts.append(section("Goal", node.goal))
    parts.append(section("Upstream results", _upstream(ctx)))
    if skill.contract.inputs:
        lines = []
        for name, spec in skill.contract.inputs.items():
            if name in node.inputs:
                lines.append(f"- {name}: {json.dumps(node.inputs[name], ensure_ascii=False)}")
            elif spec.required:
                lines.append(f"- {name}: MISSING (required input not available)")
        parts.append(section("Inputs", "\n".join(lines)))
    if skill.contract.outputs:
        lines = []
        for key, out in skill.contract.outputs.items():
            detail = [out.type.value, "required" if out.required else "optional"]
            if out.fields:
                detail.append("fields: " + ", ".join(out.fields))
            if out.type is OutputType.LIST:
                detail.append(f"at least {out.min_items} item{'s' if out.min_items != 1 else ''}")  # §8 minItems
            if out.hint:
                detail.append(out.hint)
            lines.append(f"- {key} ({'; '.join(detail)})")
        parts.append(section("Outputs (write them with builtin_output_set)", "\n".join(lines)))
    parts.append(
        "Finish with builtin_node_finish when the goal is met, or builtin_node_fail when it cannot be. "
        "Ask the user with builtin_node_follow_up when a value must come from them; never invent values."
    )
    return "\n".join(p for p in parts if p)


#: Characters of an upstream node's finish output shown in a downstream node's prompt.
UPSTREAM_REPLY_CHARS = 500


def _upstream(ctx: NodeContext) -> str:
    """What the nodes upstream of this one (nearest first) finished with: their output and written outputs."""
    lines = []
    for node_id in ctx.upstream_node_ids:
        node = ctx.graph.get(node_id)
        if node is None:
            continue
        reply = (node.reply or node.skipped_reason or "")[:UPSTREAM_REPLY_CHARS]
        line = f"- {node.skill_key} ({node.status.value}): {reply}"
        if node.outputs:
            written = {k: v.value for k, v in node.outputs.items()}
            line += "\n  outputs: " + json.dumps(written, ensure_ascii=False, default=str)[:UPSTREAM_REPLY_CHARS]
        lines.append(line)
    return "\n".join(lines)


def business_tool_functions(ctx: NodeContext) -> list[dict[str, Any]]:
    """OpenAI function definitions of the skill's business tools: ``toolNames ∩ catalog`` (orchestration §2), each
    described as the task pinned it (binding.py), else as the catalog skill describes it now."""
    functions: list[dict[str, Any]] = []
    pinned = ctx.skill.pinned_tools or {}
    for name in ctx.skill.tool_names:
        found = ctx.yard.resolve(name)
        if found is None:
            ctx.report_missing(name)
            continue
        skill = found[0]
        view = pinned.get(name)
        contract = ctx.tool_contract(name)
        own = view["description"] if view is not None else skill.description
        description = (contract.label if contract and contract.label else None) or own or name
        parameters = dict(view["input_schema"] if view is not None else skill.schema.exposed)
        functions.append(
            {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
        )
    return functions
