"""Locating a skill's SKILL.md (spec §2.1) and reading it into a Manifest."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .frontmatter_parser import parse_markdown

SKILL_FILE = "SKILL.md"
LOWER_SKILL_FILE = "skill.md"


@dataclass(frozen=True)
class Manifest:
    """A parsed SKILL.md: frontmatter, body and what reading it had to repair."""

    path: Path
    meta: dict[str, Any]
    body: str
    size: int
    warnings: tuple[str, ...] = ()
    error: str | None = None
    install: dict[str, Any] = field(default_factory=dict)
    frontmatter: bool = True  # False: no frontmatter block, so name and description were derived


def read_install_manifest(skill_dir: Path) -> dict[str, Any]:
    """The ``skill.json`` an installer may leave in a skill folder (``skill_md``, ``origin_path``)."""
    path = skill_dir / "skill.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _named(folder: Path, name: str) -> Path | None:
    """``<folder>/<name>`` as a file (``<name>.md``) or a folder holding SKILL.md."""
    for candidate in (folder / name / SKILL_FILE, folder / f"{name}.md", folder / name):
        if candidate.is_file():
            return candidate
    return None


def locate_skill_md(skill_dir: Path, install: dict[str, Any]) -> Path | None:
    """The first SKILL.md candidate of spec §2.1 that exists for a folder dropped into a root."""
    direct = skill_dir / str(install.get("skill_md") or SKILL_FILE)
    if direct.is_file():
        return direct
    origin = install.get("origin_path")
    if isinstance(origin, str) and origin.strip():
        for name in (SKILL_FILE, LOWER_SKILL_FILE):
            candidate = skill_dir / origin / name
            if candidate.is_file():
                return candidate
    for sub in ("optional-skills", "docs"):
        found = _named(skill_dir / sub, skill_dir.name)
        if found is not None:
            return found
    readme = skill_dir / "README.md"
    if readme.is_file() and _starts_with_frontmatter(readme):
        return readme
    return None


def _starts_with_frontmatter(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
    except OSError:
        return False
    return head.lstrip(b"\xef\xbb\xbf").startswith(b"---")


def read_manifest(path: Path, install: dict[str, Any] | None = None) -> Manifest:
    """Read and parse one SKILL.md; problems become the manifest's warnings or error, never exceptions."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return Manifest(path, {}, "", 0, error=f"cannot read {path}: {exc.strerror}", install=install or {})
    parsed = parse_markdown(raw)
    warnings = list(parsed.warnings)
    if not parsed.has_frontmatter and parsed.error is None:
        warnings.append(
            "SKILL.md has no frontmatter: name and description were derived, and it is not offered to models; "
            "add a --- block with name and description"
        )
    return Manifest(
        path=path,
        meta=parsed.meta,
        body=parsed.body,
        size=parsed.size,
        warnings=tuple(warnings),
        error=parsed.error,
        install=install or {},
        frontmatter=parsed.has_frontmatter or parsed.error is not None,
    )
