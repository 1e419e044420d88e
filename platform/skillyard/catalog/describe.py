"""Skills as plain dicts: what ``skillyard list`` / ``show`` print and programs read."""

from __future__ import annotations

from typing import Any

from .catalog import Entry
from .requires import check_requirements
from .skill import Skill


def gate_fields(skill: Skill) -> dict[str, Any]:
    """Availability against the current environment (configs are per role and are checked at run time)."""
    gate = check_requirements(skill.requires)
    return {
        "available": gate.passed and skill.error is None and skill.skill_type != "knowledge",
        "needs_config": list(gate.missing_env),
        "missing_bins": list(gate.missing_bins),
        "os_supported": gate.os_supported,
    }


def describe_entry(entry: Entry) -> dict[str, Any]:
    """One object per skill folder found (the ``list --json`` shape)."""
    skill = entry.skill
    return {
        "name": skill.name,
        "description": skill.description,
        "dir": str(skill.dir),
        "root": str(skill.root),
        "skill_md": str(skill.manifest.path),
        "skill_type": skill.skill_type,
        "exec_type": skill.exec_type,
        "source": skill.source,
        "category": skill.category,
        "trigger_type": skill.trigger_type,
        "exposed": skill.exposed and entry.active,
        "tool_names": list(skill.tool_names) if entry.active else [],
        "aliases": list(skill.aliases),
        **gate_fields(skill),
        "warnings": list(skill.warnings),
        "error": skill.error,
        "active": entry.active,
        "shadowed": list(entry.shadowed),
        "shadowed_by": entry.shadowed_by,
    }


def describe_skill(entry: Entry) -> dict[str, Any]:
    """The ``show --json`` shape: the listing plus manifest, exposed schema, tools and requirements."""
    skill = entry.skill
    out = describe_entry(entry)
    tools = []
    for tool, sub in skill.tool_names.items():
        schema = skill.schema.subcommands[sub] if sub else skill.schema.exposed
        tools.append({"name": tool, "subcommand": sub, "description": skill.tool_description, "input_schema": schema})
    req = skill.requires
    out.update(
        {
            "manifest": skill.manifest.meta,
            "tool_description": skill.tool_description,
            "input_schema": skill.schema.exposed,
            "tools": tools,
            "subcommands": skill.schema.subcommands,
            "secret_params": list(skill.schema.secret_params),
            "requires": {
                "env": list(req.env),
                "optional_env": list(req.optional_env),
                "bins": list(req.bins),
                "any_bins": list(req.any_bins),
                "config": list(req.config),
                "os": list(req.os),
                "always": req.always,
                "primary_env": req.primary_env,
            },
            "exec": {
                "type": skill.exec.type,
                "config": str(skill.exec.config) if skill.exec.config else None,
                "command": skill.exec.command,
                "timeout": skill.exec.timeout,
                "python_cli": skill.exec.python_cli,
            },
            "async": skill.is_async,
            "entry": skill.code.entry,
        }
    )
    return out
