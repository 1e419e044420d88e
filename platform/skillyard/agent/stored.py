"""Agents stored in the database (contract spec §1.1): ``agent_profile``, ``skill_profile``, ``agent_skill_binding``
and ``skill_tool_binding`` in the platform schema (migration 0006).

:func:`import_agent` writes a folder agent into them (upsert by ``agent_code`` / ``skill_key``; the agent's
bindings are replaced by the folder's). :func:`load_stored_agent` reads one back as a :class:`LoadedAgent`, with
the same §16 checks as a folder: only ``status = 'ACTIVE'`` profiles and ``enabled_flag = 1`` bindings load, a
skill whose contract fails is dropped with its problems. Business tools stay skills of the catalog: a
``tool_name`` is a skill (or fan-out tool) name, resolved at run time like a folder agent's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert

from ..errors import SkillyardError
from ..storage.tables import agent_profile, agent_skill_binding, skill_profile, skill_tool_binding
from .contract_parse import ContractError, parse_contract
from .expressions import open_platform_fields
from .loader import ContractSkill, LoadedAgent, LoadIssue, contract_skills_by_key, load_agent
from .profile import ACTIVE, AgentProfile
from .settings import AgentSettings

if TYPE_CHECKING:
    from ..yard import SkillYard

#: Where a stored agent says it came from (``LoadedAgent.dir`` names no folder).
STORED_PREFIX = "db:"


@dataclass(frozen=True)
class ImportReport:
    """What ``agent import`` wrote: the agent code, the skills stored and the ones left out (with why)."""

    agent_code: str
    skills: tuple[str, ...]
    skipped: tuple[LoadIssue, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent_code": self.agent_code,
            "skills": list(self.skills),
            "skipped": [{"skill": i.skill, "rule": i.rule, "message": i.message} for i in self.skipped],
        }


def _contract_text(source: Any) -> str:
    """The contract as the JSON text ``skill_contract`` holds (an inline mapping is written as JSON)."""
    return source if isinstance(source, str) else json.dumps(source, ensure_ascii=False)


async def import_agent(yard: SkillYard, agent_dir: Path) -> ImportReport:
    """Write the folder agent into the four tables in one transaction; skills that fail to load are left out."""
    loaded = await load_agent(yard, agent_dir)
    profile = loaded.profile
    if not loaded.skills:  # nothing usable: keep what is stored rather than replace it with an empty agent
        problems = "; ".join(str(e) for e in loaded.errors) or "AGENT.md lists no skill"
        raise SkillyardError(f"no skill of {agent_dir} loads, so nothing was stored: {problems}")
    values = {
        "agent_name": profile.agent_name,
        "identity_desc": profile.identity,
        "mission_desc": profile.mission,
        "boundary_desc": profile.boundary,
        "style_desc": profile.style,
        "principle_desc": profile.principles,
        "status": profile.status,
    }
    async with await yard.database.session() as session:
        upsert = insert(agent_profile).values(agent_code=profile.agent_code, **values)
        agent_id = (
            await session.execute(
                upsert.on_conflict_do_update(index_elements=["agent_code"], set_=values).returning(agent_profile.c.id)
            )
        ).scalar_one()
        await session.execute(delete(agent_skill_binding).where(agent_skill_binding.c.agent_id == agent_id))
        for order, skill in enumerate(loaded.skills.values()):
            row = {
                "skill_name": skill.name,
                "semantic_desc": skill.description,
                "skill_manual": skill.manual,
                "skill_contract": _contract_text(skill.source),
                "status": ACTIVE,
            }
            statement = insert(skill_profile).values(skill_key=skill.skill_key, **row)
            skill_id = (
                await session.execute(
                    statement.on_conflict_do_update(index_elements=["skill_key"], set_=row).returning(
                        skill_profile.c.id
                    )
                )
            ).scalar_one()
            await session.execute(
                insert(agent_skill_binding).values(agent_id=agent_id, skill_id=skill_id, sort_order=order)
            )
            await session.execute(delete(skill_tool_binding).where(skill_tool_binding.c.skill_id == skill_id))
            for tool_order, tool in enumerate(skill.tool_names):
                await session.execute(
                    insert(skill_tool_binding).values(skill_id=skill_id, tool_name=tool, sort_order=tool_order)
                )
        await session.commit()
    return ImportReport(profile.agent_code, tuple(loaded.skills), tuple(loaded.errors))


async def load_stored_agent(yard: SkillYard, agent_code: str, settings: AgentSettings) -> LoadedAgent | None:
    """The stored agent ``agent_code`` (ACTIVE profile, enabled bindings), or None when there is none."""
    async with await yard.database.session() as session:
        found = (
            (
                await session.execute(
                    select(agent_profile).where(
                        agent_profile.c.agent_code == agent_code, agent_profile.c.status == ACTIVE
                    )
                )
            )
            .mappings()
            .first()
        )
        if found is None:
            return None
        skills = (
            (
                await session.execute(
                    select(skill_profile)
                    .join(agent_skill_binding, agent_skill_binding.c.skill_id == skill_profile.c.id)
                    .where(
                        agent_skill_binding.c.agent_id == found["id"],
                        agent_skill_binding.c.enabled_flag == 1,
                        skill_profile.c.status == ACTIVE,
                    )
                    .order_by(agent_skill_binding.c.sort_order, skill_profile.c.skill_key)
                )
            )
            .mappings()
            .all()
        )
        tools: dict[int, list[str]] = {}
        if skills:
            rows = await session.execute(
                select(skill_tool_binding.c.skill_id, skill_tool_binding.c.tool_name)
                .where(
                    skill_tool_binding.c.skill_id.in_([s["id"] for s in skills]),
                    skill_tool_binding.c.enabled_flag == 1,
                )
                .order_by(skill_tool_binding.c.sort_order, skill_tool_binding.c.tool_name)
            )
            for skill_id, tool in rows:
                tools.setdefault(skill_id, []).append(tool)
    profile = AgentProfile(
        agent_code=found["agent_code"],
        agent_name=found["agent_name"] or found["agent_code"],
        path=Path(STORED_PREFIX + found["agent_code"]),
        status=found["status"],
        skills=tuple(s["skill_key"] for s in skills),
        identity=found["identity_desc"],
        mission=found["mission_desc"],
        boundary=found["boundary_desc"],
        style=found["style_desc"],
        principles=found["principle_desc"],
    )
    agent = LoadedAgent(profile=profile, dir=profile.path, source="db")
    open_fields = open_platform_fields(settings.platform_hidden)
    catalog, _duplicates = contract_skills_by_key(yard)
    for row in skills:
        key = row["skill_key"]
        try:
            contract, warnings = parse_contract(row["skill_contract"] or "", skill_key=key, open_fields=open_fields)
        except ContractError as exc:
            agent.errors += [LoadIssue(key, p.rule, p.path, p.message) for p in exc.problems]
            continue
        agent.warnings += [LoadIssue(key, w.rule, w.path, w.message, "warning") for w in warnings]
        agent.skills[key] = ContractSkill(
            skill_key=key,
            name=row["skill_name"] or key,
            description=row["semantic_desc"],
            manual=row["skill_manual"],
            tool_names=tuple(tools.get(row["id"], [])),
            contract=contract,
            skill=catalog.get(key),  # its folder, when the catalog has it: the manual's files are read from there
            source=row["skill_contract"],
        )
    if not agent.skills:
        agent.errors.append(LoadIssue("", "§16", "", "the stored agent has no usable skill; re-import it"))
    return agent
