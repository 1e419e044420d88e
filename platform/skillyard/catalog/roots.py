"""Skill roots and the walk that finds skill folders inside them.

Every folder is listed once (one ``os.scandir``); the listing of a skill folder is kept, so the change
signature that makes rescans cheap costs no second listing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .manifest import LOWER_SKILL_FILE, SKILL_FILE, locate_skill_md, read_install_manifest

MAX_DEPTH = 6
#: Folders never searched: version control, dependencies and caches.
SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", "site-packages"})
INSTALL_MANIFEST = "skill.json"


@dataclass(frozen=True)
class Root:
    """A folder searched for skills; ``rank`` 0 wins over every higher rank.

    ``package`` names the import package whose folder this is (the built-in skills, ``skillyard.builtin_skills``):
    the Python code of its skills is then imported under that package, as everything else imports it.
    """

    path: Path
    rank: int
    source: str
    package: str | None = None


@dataclass(frozen=True)
class FoundSkill:
    """A folder that holds a skill, the SKILL.md that describes it, and the folder's listing."""

    root: Root
    dir: Path
    skill_md: Path
    install: dict[str, object]
    entries: list[os.DirEntry[str]] = field(default_factory=list, compare=False, repr=False)


def list_folder(path: str) -> list[os.DirEntry[str]]:
    """The entries of a folder; an unreadable folder is empty."""
    try:
        with os.scandir(path) as it:
            return list(it)
    except OSError:
        return []


def _searchable_dirs(entries: list[os.DirEntry[str]]) -> list[str]:
    """Child folders worth searching, sorted (hidden folders and dependency caches skipped)."""
    dirs = []
    for e in entries:
        if e.name in SKIP_DIRS or e.name.startswith("."):
            continue
        try:
            if e.is_dir():
                dirs.append(e.path)
        except OSError:
            continue
    dirs.sort()
    return dirs


def skill_file(entries: list[os.DirEntry[str]]) -> str | None:
    """The folder's skill file: ``SKILL.md``, else ``skill.md`` (the Agent Skills reference validator accepts the
    lower-case name, and real collections use it)."""
    names = {e.name for e in entries}
    return SKILL_FILE if SKILL_FILE in names else (LOWER_SKILL_FILE if LOWER_SKILL_FILE in names else None)


def _found(root: Root, folder: str, entries: list[os.DirEntry[str]]) -> FoundSkill | None:
    """The skill in a folder dropped into a root (full §2.1 lookup), or None."""
    names = {e.name for e in entries}
    install = read_install_manifest(Path(folder)) if INSTALL_MANIFEST in names else {}
    own = skill_file(entries)
    if own is not None and not install.get("skill_md"):
        md: Path | None = Path(folder, own)
    else:
        md = locate_skill_md(Path(folder), install)
    return FoundSkill(root, Path(folder), md, install, entries) if md is not None else None


def walk_root(root: Root) -> Iterator[FoundSkill]:
    """Every skill folder in a root, in a stable order.

    A root that is itself a skill folder is that one skill. Direct children get the full SKILL.md lookup of
    §2.1; deeper folders (Hermes nests ``<category>/<skill>/``) count when they hold a SKILL.md, down to
    six levels. The walk never descends into a skill folder.
    """
    entries = list_folder(str(root.path))
    own = skill_file(entries)
    if own is not None:
        yield FoundSkill(root, root.path, root.path / own, read_install_manifest(root.path), entries)
        return
    for child in _searchable_dirs(entries):
        child_entries = list_folder(child)
        found = _found(root, child, child_entries)
        if found is not None:
            yield found
        else:
            yield from _walk_deep(root, _searchable_dirs(child_entries), 2)


def _walk_deep(root: Root, folders: list[str], depth: int) -> Iterator[FoundSkill]:
    for folder in folders:
        entries = list_folder(folder)
        own = skill_file(entries)
        if own is not None:
            yield FoundSkill(root, Path(folder), Path(folder, own), {}, entries)
        elif depth < MAX_DEPTH:
            yield from _walk_deep(root, _searchable_dirs(entries), depth + 1)
