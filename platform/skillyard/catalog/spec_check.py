"""The open Agent Skills specification's frontmatter rules (agentskills.io), for ``skillyard validate --spec``.

skillyard reads far more than the specification allows (OpenClaw and Hermes fields, repairs), so these are
warnings with the fix, for authors who publish to other agents too; plain ``validate`` stays as lenient as listing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

#: The top-level fields the specification defines.
SPEC_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500


def _name_problem(name: str) -> str | None:
    if not name:
        return "name is missing: add name: <folder-name> (lowercase letters, digits and hyphens)"
    if len(name) > MAX_NAME:
        return f"name is {len(name)} characters; the specification allows at most {MAX_NAME}"
    if any(not (c == "-" or (c.isalnum() and (not c.isalpha() or c.islower()))) for c in name):
        return f"name {name!r} may hold only lowercase letters, digits and hyphens; e.g. {_suggest(name)!r}"
    if name.startswith("-") or name.endswith("-") or "--" in name:
        return f"name {name!r} must not start or end with a hyphen or hold two in a row; e.g. {_suggest(name)!r}"
    return None


def _suggest(name: str) -> str:
    cleaned = "".join(c.lower() if c.isalnum() else "-" for c in name)
    return "-".join(part for part in cleaned.split("-") if part)[:MAX_NAME] or "my-skill"


def spec_findings(meta: Mapping[str, Any], folder_name: str) -> list[str]:
    """Each rule of the specification the frontmatter breaks, with the fix."""
    found: list[str] = []
    raw_name = meta.get("name")
    name = unicodedata.normalize("NFKC", raw_name.strip()) if isinstance(raw_name, str) else ""
    problem = _name_problem(name)
    if problem:
        found.append(problem)
    elif name != unicodedata.normalize("NFKC", folder_name):
        found.append(f"name {name!r} differs from its folder {folder_name!r}: rename one so they match")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        found.append("description is missing or empty: say what the skill does and when to use it")
    elif len(description) > MAX_DESCRIPTION:
        found.append(
            f"description is {len(description)} characters; the specification allows at most {MAX_DESCRIPTION}: "
            "move details to the body"
        )
    compatibility = meta.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY):
        found.append(f"compatibility must be text of at most {MAX_COMPATIBILITY} characters")
    metadata = meta.get("metadata")
    if metadata is not None and not (
        isinstance(metadata, Mapping) and all(isinstance(v, str) for v in metadata.values())
    ):
        found.append(
            "metadata must map keys to text values (quote numbers; nested blocks are not in the specification)"
        )
    extra = sorted(str(k) for k in meta if k not in SPEC_FIELDS)
    if extra:
        found.append(
            f"field(s) {', '.join(extra)} are not in the specification (it allows {', '.join(SPEC_FIELDS)}): move "
            "them under metadata"
        )
    return found
