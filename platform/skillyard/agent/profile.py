"""AGENT.md: an agent's frontmatter (code, name, status, skills) and its five body sections (contract spec §1.1).

Section headings (any level, case-insensitive) accepted:

=============  ==============================================  ============
section        English headings                                Chinese
=============  ==============================================  ============
identity       Identity                                        身份
mission        Mission, Responsibilities                       职责, 使命
boundary       Boundary, Boundaries                            边界
style          Style                                           风格
principles     Principles, Principle                           原则
=============  ==============================================  ============
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..catalog.frontmatter_parser import parse_markdown
from ..errors import SkillyardError

AGENT_FILE = "AGENT.md"
ACTIVE = "ACTIVE"
#: Heading text (lower-cased) → profile section.
SECTION_HEADINGS: dict[str, str] = {
    "identity": "identity",
    "身份": "identity",
    "mission": "mission",
    "responsibilities": "mission",
    "职责": "mission",
    "使命": "mission",
    "boundary": "boundary",
    "boundaries": "boundary",
    "边界": "boundary",
    "style": "style",
    "风格": "style",
    "principles": "principles",
    "principle": "principles",
    "原则": "principles",
}
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


class AgentProfileError(SkillyardError):
    """AGENT.md is missing or unusable; the message names the file and the fix."""


@dataclass(frozen=True)
class AgentProfile:
    """An agent (digital employee): who it is, what it does, and which contract skills it owns."""

    agent_code: str
    agent_name: str
    path: Path
    status: str = ACTIVE
    skills: tuple[str, ...] = ()
    identity: str = ""
    mission: str = ""
    boundary: str = ""
    style: str = ""
    principles: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.status == ACTIVE

    @property
    def routing_text(self) -> str:
        """§1.2: routing uses the mission, else the identity."""
        return self.mission or self.identity


def _sections(body: str, warnings: list[str]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in body.splitlines():
        match = _HEADING.match(line.strip())
        if match:
            title = match.group(1).strip().rstrip(":：").strip()
            current = SECTION_HEADINGS.get(title.lower())
            if current is None:
                warnings.append(f"unknown section heading {title!r} in AGENT.md; its text is ignored")
            continue
        if current is not None:
            found.setdefault(current, []).append(line)
    return {name: "\n".join(lines).strip() for name, lines in found.items()}


def _skill_keys(value: object, path: Path) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [v for v in value.split(",")]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AgentProfileError(f"{path}: 'skills' must be a list of skill keys, e.g. [cms.article.lifecycle]")
    return tuple(dict.fromkeys(v.strip() for v in value if v.strip()))


def read_agent_profile(agent_dir: Path) -> AgentProfile:
    """Read ``<agent_dir>/AGENT.md``; raise AgentProfileError when it is missing or unusable."""
    path = agent_dir / AGENT_FILE
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AgentProfileError(
            f"no {AGENT_FILE} in {agent_dir} ({exc.strerror}); an agent folder needs an AGENT.md with "
            "frontmatter agent_code, agent_name and skills"
        ) from None
    parsed = parse_markdown(raw)
    if parsed.error:
        raise AgentProfileError(f"{path}: {parsed.error}")
    meta = parsed.meta
    warnings = list(parsed.warnings)
    code = str(meta.get("agent_code") or "").strip()
    if not code:
        raise AgentProfileError(f"{path}: frontmatter needs 'agent_code', e.g. agent_code: cms")
    status = str(meta.get("status") or ACTIVE).strip()
    sections = _sections(parsed.body, warnings)
    return AgentProfile(
        agent_code=code,
        agent_name=str(meta.get("agent_name") or "").strip() or code,
        path=path,
        status=status,
        skills=_skill_keys(meta.get("skills"), path),
        identity=sections.get("identity", ""),
        mission=sections.get("mission", ""),
        boundary=sections.get("boundary", ""),
        style=sections.get("style", ""),
        principles=sections.get("principles", ""),
        warnings=tuple(warnings),
    )
