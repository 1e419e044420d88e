"""Pinned execution bindings (orchestration requirements P0): what a task runs with, fixed when it is created.

A task stores, for every skill it may run (its planned and provider nodes' skills and the agent's delegatable
skills), the skill's manual, contract source, ``toolNames`` and, for each tool, the description and the input
schema exposed to models, each with a content hash. Every later turn and every resume of that task rebuilds its
contract skills from the pin (:class:`PinnedSkills`), never from the files on disk, so editing a skill while a task
is suspended at an APPROVAL changes nothing for that task; new tasks pin the current files.

At call time the pinned schema is the contract (chain/pinned_schema.py: ``TOOL_SCHEMA_CHANGED``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import SkillyardError
from .chain.base import canonical, digest
from .contract_parse import ContractError, parse_contract
from .loader import ContractSkill

if TYPE_CHECKING:
    from ..yard import SkillYard


def tool_view(yard: SkillYard, name: str) -> dict[str, Any] | None:
    """A business tool as models see it now (description and exposed input schema) with its hash; None when no
    catalog skill answers to the name (aliases included)."""
    found = yard.resolve(name)
    if found is None:
        return None
    skill = found[0]
    view = {"description": skill.description or name, "input_schema": dict(skill.schema.exposed)}
    return {**view, "hash": digest(canonical(view))}


def skill_pin(yard: SkillYard, skill: ContractSkill) -> dict[str, Any]:
    """One skill's pinned binding (see the module docstring)."""
    tools = {name: view for name in skill.tool_names if (view := tool_view(yard, name)) is not None}
    body = {
        "name": skill.name,
        "description": skill.description,
        "manual": skill.manual,
        "contract": skill.source,
        "tool_names": list(skill.tool_names),
        "tools": tools,
    }
    return {**body, "hash": digest(canonical(body))}


def pin(yard: SkillYard, skills: Iterable[ContractSkill]) -> dict[str, Any]:
    """The binding a new task stores: ``{pinned_at, skills: {key: pin}}``."""
    return {
        "pinned_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "skills": {skill.skill_key: skill_pin(yard, skill) for skill in skills},
    }


def summary(binding: Mapping[str, Any]) -> dict[str, Any]:
    """The ``binding`` of a turn's JSON: when it was pinned and each skill's hash."""
    skills = binding.get("skills") or {}
    return {"pinned_at": binding.get("pinned_at"), "skills": {k: v.get("hash") for k, v in skills.items()}}


class PinnedSkills:
    """The contract skills of pinned bindings, rebuilt once per skill key and content hash (a turn may reopen many
    nodes)."""

    def __init__(self, open_fields: frozenset[str] | None) -> None:
        self.open_fields = open_fields
        self._built: dict[tuple[str, str], ContractSkill] = {}

    def get(self, key: str, entry: Mapping[str, Any], current: ContractSkill | None) -> ContractSkill:
        """The pinned skill ``key``; ``current`` (the loaded skill of that key, if any) lends its catalog skill for
        reading the skill's own files. A pin whose contract no longer parses is an error of the pin (it parsed when
        it was made), so it is raised rather than silently replaced by the current contract."""
        built = self._built.get((key, entry["hash"]))
        if built is not None:
            return built
        try:
            contract, _warnings = parse_contract(entry["contract"], skill_key=key, open_fields=self.open_fields)
        except ContractError as exc:
            raise PinnedBindingError(
                f"the pinned contract of skill {key!r} no longer parses ({exc}); cancel the task and start a new one"
            ) from None
        built = ContractSkill(
            skill_key=key,
            name=entry["name"],
            description=entry["description"],
            manual=entry["manual"],
            tool_names=tuple(entry["tool_names"]),
            contract=contract,
            skill=current.skill if current is not None else None,
            source=entry["contract"],
            pinned_tools=dict(entry["tools"]),
        )
        self._built[(key, entry["hash"])] = built
        return built


class PinnedBindingError(SkillyardError):
    """A stored pin that cannot be used (it was written by an incompatible version)."""
