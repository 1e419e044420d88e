"""Loading an agent folder: AGENT.md, its contract skills and their business tools, through the yard's catalog.

The agent's own ``skills/`` folder becomes a root of the yard's catalog, ranked above every other root (rank -1),
so ``yard.run(tool)`` later resolves the agent's bundled tools and a same-named skill elsewhere shows as shadowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..catalog.requires import as_bool
from ..catalog.roots import Root
from ..catalog.skill import Skill
from .contract import Contract
from .contract_parse import ContractError, parse_contract
from .expressions import open_platform_fields
from .profile import ACTIVE, AgentProfile, read_agent_profile
from .settings import AgentSettings

if TYPE_CHECKING:
    from ..yard import SkillYard

CONTRACT_FILE = "contract.json"
AGENT_SKILLS_DIR = "skills"
AGENT_ROOT_RANK = -1


@dataclass(frozen=True)
class LoadIssue:
    """A problem found while loading an agent: the skill (key or name), the rule, the JSON path and the fix."""

    skill: str
    rule: str
    path: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        return f"{self.severity}: skill {self.skill!r}{where} ({self.rule}): {self.message}"


@dataclass(frozen=True)
class ContractSkill:
    """A loaded contract skill (§1.1 ``skill_profile`` + ``skill_tool_binding``)."""

    skill_key: str
    name: str
    #: ``semantic_desc``: what the skill is for and what it is not for (the frontmatter ``description``).
    description: str
    #: ``skill_manual``: the SKILL.md body.
    manual: str
    #: ``toolNames``: the business tools (skillyard skill or tool names) the skill may call.
    tool_names: tuple[str, ...]
    contract: Contract
    #: The catalog skill the contract skill was read from (None: a pinned skill whose folder is gone).
    skill: Skill | None
    #: The contract as written (JSON text or a mapping): what a task's pinned binding stores.
    source: Any = None
    #: A pinned task's tools as they were when it started: name → {description, input_schema, hash}.
    pinned_tools: Mapping[str, Mapping[str, Any]] | None = None


@dataclass
class LoadedAgent:
    """An agent with the skills that passed validation; dropped skills are in ``errors``."""

    profile: AgentProfile
    dir: Path
    skills: dict[str, ContractSkill] = field(default_factory=dict)
    #: ``folder`` (an agent folder) or ``db`` (agents stored in the database, stored.py).
    source: str = "folder"
    errors: list[LoadIssue] = field(default_factory=list)
    warnings: list[LoadIssue] = field(default_factory=list)


def add_agent_root(yard: SkillYard, agent_dir: Path) -> Path | None:
    """Make ``<agent_dir>/skills`` the top-ranked root of the yard's catalog (once) and rescan; its path or None."""
    folder = agent_dir / AGENT_SKILLS_DIR
    if not folder.is_dir():
        return None
    resolved = folder.resolve()
    if all(root.path != resolved for root in yard.catalog.roots):
        yard.catalog.roots.insert(0, Root(resolved, AGENT_ROOT_RANK, "agent"))
        yard.rescan()
    return resolved


def contract_skills_by_key(yard: SkillYard) -> tuple[dict[str, Skill], list[LoadIssue]]:
    """Every active catalog skill whose frontmatter has ``skill_key``; a key claimed twice is a warning."""
    found: dict[str, Skill] = {}
    warnings = []
    for entry in yard.entries:
        key = entry.skill.meta.get("skill_key")
        if not entry.active or not isinstance(key, str) or not key.strip():
            continue
        key = key.strip()
        if key in found:
            warnings.append(
                LoadIssue(
                    key,
                    "skill_key",
                    "",
                    f"skill_key {key!r} is declared by {found[key].dir} and {entry.skill.dir}; the first wins. "
                    "Give each contract skill its own skill_key",
                    "warning",
                )
            )
            continue
        found[key] = entry.skill
    return found, warnings


def _tool_names(value: Any) -> tuple[str, ...] | None:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(dict.fromkeys(v.strip() for v in value if v.strip()))


def _raw_contract(skill: Skill, key: str) -> tuple[str | Mapping[str, Any] | None, LoadIssue | None]:
    """The inline ``contract:`` (mapping or JSON text) or ``contract.json``; inline wins when both exist."""
    inline = skill.meta.get("contract")
    file = skill.dir / CONTRACT_FILE
    if inline is not None and inline != "":
        if not isinstance(inline, str | Mapping):
            return None, LoadIssue(key, "§16.1", "contract", "the inline contract must be a mapping or JSON text")
        note = None
        if file.is_file():
            note = LoadIssue(
                key,
                "contract",
                "contract",
                f"both an inline contract and {file} exist; the inline one is used",
                "warning",
            )
        return inline, note
    try:
        return file.read_text(encoding="utf-8-sig"), None
    except FileNotFoundError:
        return None, LoadIssue(
            key,
            "§16.1",
            "contract",
            f"no contract: add 'contract:' to the frontmatter of {skill.manifest.path} or a {CONTRACT_FILE} beside it",
        )
    except OSError as exc:
        return None, LoadIssue(key, "§16.1", "contract", f"cannot read {file}: {exc.strerror}")
    except UnicodeDecodeError as exc:
        return None, LoadIssue(
            key, "§16.1", "contract", f"{file} is not UTF-8 text (byte {exc.start}); save the contract as UTF-8 JSON"
        )


def load_contract_skill(
    key: str, skill: Skill, open_fields: frozenset[str] | None = None
) -> tuple[ContractSkill | None, list[LoadIssue]]:
    """Build one ContractSkill; on failure return None and every problem (§16 rules, tools:, the catalog).

    ``open_fields``: the platform fields contracts may read (``[agent] platform_hidden``; default the seven of §11).
    """
    issues: list[LoadIssue] = []
    if skill.error:
        issues.append(LoadIssue(key, "catalog", "", f"{skill.manifest.path}: {skill.error}"))
    tools = _tool_names(skill.meta.get("tools"))
    if tools is None:
        issues.append(LoadIssue(key, "tools", "tools", "'tools' must be a list of business tool names"))
    raw, note = _raw_contract(skill, key)
    if note is not None:
        issues.append(note)
    contract = None
    if raw is not None:
        try:
            contract, warnings = parse_contract(raw, skill_key=key, open_fields=open_fields)
        except ContractError as exc:
            issues += [LoadIssue(key, p.rule, p.path, p.message) for p in exc.problems]
        else:
            issues += [LoadIssue(key, w.rule, w.path, w.message, "warning") for w in warnings]
    if contract is None or tools is None or any(i.severity == "error" for i in issues):
        return None, issues
    loaded = ContractSkill(
        skill_key=key,
        name=skill.name,
        description=skill.description,
        manual=skill.manifest.body.strip(),
        tool_names=tools,
        contract=contract,
        skill=skill,
        source=raw,
    )
    return loaded, issues


async def load_agent(yard: SkillYard, agent_dir: str | Path, settings: AgentSettings | None = None) -> LoadedAgent:
    """Load an agent folder. AGENT.md problems raise AgentProfileError; a skill that fails is dropped and its
    problems are kept in ``errors``, so the other skills still load."""
    folder = Path(agent_dir)
    profile = read_agent_profile(folder)
    agent = LoadedAgent(profile=profile, dir=folder)
    agent.warnings += [LoadIssue("", "AGENT.md", "", w, "warning") for w in profile.warnings]
    if not profile.active:
        agent.errors.append(
            LoadIssue("", "agent.status", "status", f"agent status is {profile.status!r}; only ACTIVE agents load")
        )
    add_agent_root(yard, folder)
    hidden = (settings or AgentSettings.load(yard.settings.home)).platform_hidden
    open_fields = open_platform_fields(hidden)
    by_key, duplicates = contract_skills_by_key(yard)
    agent.warnings += duplicates
    for key in profile.skills:
        skill = by_key.get(key)
        if skill is None:
            agent.errors.append(
                LoadIssue(
                    key,
                    "agent.skills",
                    "",
                    f"no skill has skill_key {key!r}; put its folder in {folder / AGENT_SKILLS_DIR} or a skills root, "
                    "or remove it from AGENT.md 'skills'",
                )
            )
            continue
        status = str(skill.meta.get("status") or ACTIVE).strip()
        if status != ACTIVE:
            agent.warnings.append(
                LoadIssue(key, "status", "status", f"skill status is {status!r}; only ACTIVE skills load", "warning")
            )
            continue
        if not as_bool(skill.meta.get("enabled", True)):
            agent.warnings.append(
                LoadIssue(
                    key, "enabled", "enabled", "the skill is disabled (enabled: false); it does not load", "warning"
                )
            )
            continue
        loaded, issues = load_contract_skill(key, skill, open_fields)
        agent.errors += [i for i in issues if i.severity == "error"]
        agent.warnings += [i for i in issues if i.severity != "error"]
        if loaded is not None:
            agent.skills[key] = loaded
    if not agent.skills:
        fix = "fix the errors above" if profile.skills else "list skill keys under 'skills:' in AGENT.md"
        agent.errors.append(LoadIssue("", "§16", "", f"the agent has no usable skill, so planning would fail; {fix}"))
    return agent
