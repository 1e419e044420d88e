"""What the catalog tests read skills with: tool-name rule, parsed frontmatter, catalog entries by name."""

from __future__ import annotations

import json
import re
from pathlib import Path

from skillyard import SkillYard
from skillyard.catalog.catalog import Entry
from skillyard.catalog.describe import describe_entry
from skillyard.catalog.frontmatter_parser import parse_markdown

TOOL_RX = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def entries_by_name(yard: SkillYard) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for e in yard.entries:
        d = describe_entry(e)
        out.setdefault(d["name"], []).append(d)
    return out


def parse(text: str | bytes):
    result = parse_markdown(text)
    json.dumps(result.meta)  # always JSON-serializable
    return result


def fm(body: str) -> str:
    return f"---\n{body}\n---\nBody.\n"


def entries(root: Path) -> dict[str, Entry]:
    yard = SkillYard(skills_dirs=[root], include_builtin=False)
    return {e.skill.dir.name: e for e in yard.entries}
