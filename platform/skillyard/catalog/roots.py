"""Skill roots and the walk that finds skill folders inside them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .manifest import SKILL_FILE, locate_skill_md, read_install_manifest

MAX_DEPTH = 6
#: Folders never searched: version control, dependencies and caches.
SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", "site-packages"})


@dataclass(frozen=True)
class Root:
    """A folder searched for skills; ``rank`` 0 wins over every higher rank."""

    path: Path
    rank: int
    source: str


@dataclass(frozen=True)
class FoundSkill:
    """A folder that holds a skill, and the SKILL.md that describes it."""

    root: Root
    dir: Path
    skill_md: Path
    install: dict[str, object]


def _subdirs(path: Path) -> tuple[list[Path], set[str]]:
    """Child folders worth searching, and the names of every entry (to spot SKILL.md without a stat)."""
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except OSError:
        return [], set()
    names = {e.name for e in entries}
    dirs = []
    for e in entries:
        if e.name in SKIP_DIRS or e.name.startswith("."):
            continue
        try:
            if e.is_dir():
                dirs.append(Path(e.path))
        except OSError:
            continue
    dirs.sort()
    return dirs, names


def walk_root(root: Root) -> Iterator[FoundSkill]:
    """Every skill folder in a root, in a stable order.

    A root that is itself a skill folder is that one skill. Direct children get the full SKILL.md lookup of
    §2.1; deeper folders (Hermes nests ``<category>/<skill>/``) count when they hold a SKILL.md, down to
    six levels. The walk never descends into a skill folder.
    """
    children, names = _subdirs(root.path)
    if SKILL_FILE in names:
        yield FoundSkill(root, root.path, root.path / SKILL_FILE, read_install_manifest(root.path))
        return
    for child in children:
        install = read_install_manifest(child)
        md = locate_skill_md(child, install)
        if md is not None:
            yield FoundSkill(root, child, md, install)
        else:
            yield from _walk_deep(root, _subdirs(child)[0], 2)


def _walk_deep(root: Root, folders: list[Path], depth: int) -> Iterator[FoundSkill]:
    for folder in folders:
        children, names = _subdirs(folder)
        if SKILL_FILE in names:
            yield FoundSkill(root, folder, folder / SKILL_FILE, {})
        elif depth < MAX_DEPTH:
            yield from _walk_deep(root, children, depth + 1)
