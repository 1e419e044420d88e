"""Graded strictness of ``skillyard agent check`` (orchestration requirements P0) and the contracts as the runtime
reads them.

``--write-baseline FILE`` records each skill's content hash and its problems; ``--baseline FILE`` then reports the
problems of skills unchanged since the baseline as warnings (an old skill's known gaps do not block a release) and
keeps errors only for new or changed skills. A skill's hash is the one a task pins (binding.py): its manual,
contract, ``toolNames`` and the tools' exposed schemas, so a tool whose schema changed makes its skill "changed".
A skill that does not load is hashed by its files.
"""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from pathlib import Path
from typing import Any

from ..errors import SkillyardError
from .binding import skill_pin
from .chain.base import canonical, digest
from .contract import Contract
from .expressions import Expression
from .loader import CONTRACT_FILE, LoadedAgent, contract_skills_by_key

BASELINE_VERSION = 1


class BaselineError(SkillyardError):
    """A ``--baseline`` file that cannot be used; the message names the file and the fix."""


def skill_hashes(yard: Any, agent: LoadedAgent) -> dict[str, str]:
    """Every skill key of the agent → its content hash (loaded skills as pinned; others by their files)."""
    found, _ = contract_skills_by_key(yard)
    hashes: dict[str, str] = {}
    for key in agent.profile.skills:
        if key in agent.skills:
            hashes[key] = skill_pin(yard, agent.skills[key])["hash"]
        elif key in found:
            folder = found[key].dir
            texts = [_read(folder / name) for name in ("SKILL.md", CONTRACT_FILE)]
            hashes[key] = digest(canonical(texts))
        else:  # in no root: unchanged for as long as it stays missing
            hashes[key] = digest(canonical(["missing", key]))
    return hashes


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def write_baseline(path: Path, agent: LoadedAgent, hashes: dict[str, str], rows: list[dict[str, Any]]) -> None:
    skills = {key: {"hash": value, "problems": [r for r in rows if r["skill"] == key]} for key, value in hashes.items()}
    data = {"version": BASELINE_VERSION, "agent_code": agent.profile.agent_code, "skills": skills}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def read_baseline(path: Path, agent_code: str | None = None) -> dict[str, str]:
    """The skill hashes of a baseline file; :class:`BaselineError` when it is not one (or, given ``agent_code``,
    when it is another agent's)."""
    fix = f"write one with `skillyard agent check DIR --write-baseline {path}`"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"baseline {path} does not exist; {fix}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BaselineError(f"baseline {path} is not a JSON baseline ({exc}); {fix}") from None
    skills = data.get("skills") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("version") != BASELINE_VERSION or not isinstance(skills, dict):
        raise BaselineError(f"baseline {path} is not a version-{BASELINE_VERSION} skillyard baseline; {fix}")
    if agent_code is not None and data.get("agent_code") != agent_code:
        raise BaselineError(f"baseline {path} belongs to agent {data.get('agent_code')!r}, not {agent_code!r}; {fix}")
    hashes = {}
    for key, entry in skills.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("hash"), str):
            raise BaselineError(f"baseline {path}: skill {key!r} has no hash; {fix}")
        hashes[key] = entry["hash"]
    return hashes


def grade(rows: list[dict[str, Any]], hashes: dict[str, str], baseline: dict[str, str]) -> list[dict[str, Any]]:
    """Each row with ``baseline`` (``unchanged`` / ``changed`` / ``new``); errors of unchanged skills become
    warnings (``baseline_severity`` keeps what they were)."""
    graded = []
    for row in rows:
        key = row["skill"]
        if not key or key not in hashes:
            graded.append(row)
            continue
        state = "new" if key not in baseline else ("unchanged" if baseline[key] == hashes[key] else "changed")
        row = {**row, "baseline": state}
        if state == "unchanged" and row["severity"] == "error":
            row = {**row, "severity": "warning", "baseline_severity": "error"}
        graded.append(row)
    return graded


def contract_view(contract: Contract) -> dict[str, Any]:
    """The contract with every default filled, as JSON values (``agent check --defaults``)."""
    view: dict[str, Any] = _plain(contract)
    return view


def _plain(value: Any) -> Any:
    if isinstance(value, Expression):
        return value.text
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if isinstance(item, Enum) and item.name == "UNSET":
                continue
            out[_camel(f.name)] = _plain(item)
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _camel(name: str) -> str:
    """The contract's own spelling of a field (``side_effect`` → ``sideEffect``, ``from_expr`` → ``from``)."""
    special = {"from_expr": "from", "idempotency_key": "idempotencyKey", "min_items": "minItems"}
    if name in special:
        return special[name]
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
