"""Skill roots and the walk that finds skill folders inside them.

Every folder is listed once (one ``os.scandir``); the listing of a skill folder is kept, so the change
signature that makes rescans cheap costs no second listing. The real tree of a root is walked before any
symlinked folder in it, so a folder reached both ways is found at its real path first and the link is a mirror.
"""

from __future__ import annotations

import errno
import os
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .manifest import LOWER_SKILL_FILE, SKILL_FILE, locate_skill_md, read_install_manifest

MAX_DEPTH = 6
#: Folders never searched: version control, dependencies and tool caches (other dot-folders hold skills:
#: ``skills/.curated/``, ``.system/``, ``.claude/skills/``).
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        "site-packages",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".eggs",
    }
)
#: Inside a skill folder these hold the skill's own material, never further skills.
SKILL_MATERIAL_DIRS = frozenset(
    {"references", "templates", "assets", "scripts", "examples", "tests", "fixtures", "testdata"}
)
INSTALL_MANIFEST = "skill.json"


@dataclass(frozen=True)
class Root:
    """A folder searched for skills; ``rank`` 0 wins over every higher rank.

    ``package`` names the import package whose folder this is (the built-in skills, ``skillyard.builtin_skills``):
    the Python code of its skills is then imported under that package, as everything else imports it.
    ``trusted`` is the operator's word on the root (docs/sandbox.md): in-process code of an untrusted root never
    runs in the host process.
    """

    path: Path
    rank: int
    source: str
    package: str | None = None
    trusted: bool = True  # False: its in-process Python skills run in the sandbox, as subprocesses


@dataclass(frozen=True)
class FoundSkill:
    """A folder that holds a skill, the SKILL.md that describes it, and the folder's listing.

    ``identity`` is the SKILL.md's (device, inode): two folders sharing one (a symlinked or bind-mounted folder,
    a symlinked SKILL.md) are one skill. ``real`` is False when it was reached through a symlink.
    """

    root: Root
    dir: Path
    skill_md: Path
    install: dict[str, object]
    entries: list[os.DirEntry[str]] = field(default_factory=list, compare=False, repr=False)
    identity: tuple[int, int] = (0, 0)
    real: bool = True


def list_folder(path: str) -> list[os.DirEntry[str]]:
    """The entries of a folder; an unreadable folder is empty."""
    try:
        with os.scandir(path) as it:
            return list(it)
    except OSError:
        return []


def _inside(path: str, folders: Sequence[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


@dataclass
class _Walk:
    """One root's walk: what it found, the folders it entered, the links it put off, what it has to say."""

    root: Root
    allowed: tuple[str, ...]  # real paths of every configured root: where a link may lead
    warnings: list[str]
    entered: set[str] = field(default_factory=set)  # real paths of the folders walked
    links: deque[tuple[str, int, bool]] = field(default_factory=deque)
    found: dict[tuple[int, int], FoundSkill] = field(default_factory=dict)

    def folder(self, path: str, depth: int, in_skill: bool, real: bool) -> None:
        """Look at one folder ``depth`` levels below the root, then at its children.

        Below the (resolved) root and through no link, a folder's path is its real path: no stat is needed to know
        it. A followed link resolves it once."""
        key = path if real else os.path.realpath(path)
        if key in self.entered:
            return  # a mirror of a folder already walked
        self.entered.add(key)
        entries = list_folder(path)
        skill = self._skill(path, entries, depth, real)
        if skill is not None:
            self._keep(skill)
            in_skill = True
        if depth >= MAX_DEPTH:
            return
        for child in sorted(entries, key=lambda e: e.name):
            name = child.name
            if name in SKIP_DIRS or (in_skill and name in SKILL_MATERIAL_DIRS):
                continue
            try:
                link = child.is_symlink()
                is_dir = not link and child.is_dir()  # (is_dir() of a looping link raises: links wait)
            except OSError:
                continue
            if link:
                self.links.append((child.path, depth + 1, in_skill))
            elif is_dir:
                self.folder(child.path, depth + 1, in_skill, real)

    def follow_links(self) -> None:
        """Symlinked folders, after the real tree: loops are reported, links out of every root are not followed."""
        while self.links:
            path, depth, in_skill = self.links.popleft()
            try:
                target = os.path.realpath(path, strict=True)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    self.warnings.append(f"symlink loop at {path}: skipped")
                continue
            if not os.path.isdir(target):
                continue
            parent = os.path.realpath(os.path.dirname(path))
            if _inside(parent, (target,)):
                self.warnings.append(f"symlink loop: {path} leads back to {target}; skipped")
                continue
            if not _inside(target, self.allowed):
                self.warnings.append(
                    f"{path} links to {target}, outside every skills root: not followed "
                    "(add that folder as a skills root to use it)"
                )
                continue
            self.folder(path, depth, in_skill, real=False)

    def _skill(self, path: str, entries: list[os.DirEntry[str]], depth: int, real: bool) -> FoundSkill | None:
        by_name = {e.name: e for e in entries}
        own = SKILL_FILE if SKILL_FILE in by_name else (LOWER_SKILL_FILE if LOWER_SKILL_FILE in by_name else None)
        folder = Path(path)
        install = read_install_manifest(folder) if depth <= 1 and INSTALL_MANIFEST in by_name else {}
        # SKILL.md, else skill.md (the Agent Skills reference validator accepts the lower-case name, and real
        # collections use it); in a dropped-in folder an installer's skill.json may name another file
        listed = by_name.get(own) if own is not None and (depth != 1 or not install.get("skill_md")) else None
        if listed is not None:
            md = folder / listed.name
        elif depth == 1:  # a folder dropped into the root: the full SKILL.md lookup of spec §2.1
            located = locate_skill_md(folder, install)
            if located is None:
                return None
            md, listed = located, (by_name.get(located.name) if located.parent == folder else None)
        else:
            return None
        is_link = listed is not None and listed.is_symlink()
        if listed is None or is_link:  # a link, or a §2.1 candidate elsewhere: it must stay within the roots
            target = os.path.realpath(md)
            if not _inside(target, self.allowed):
                self.warnings.append(
                    f"{md} links to {target}, outside every skills root: not a skill "
                    "(copy the file, or add its folder as a skills root)"
                )
                return None
        try:  # through the DirEntry, the stat is cached for the catalog's change signature
            st = listed.stat() if listed is not None else md.stat()
        except OSError:
            return None
        return FoundSkill(self.root, folder, md, install, entries, (st.st_dev, st.st_ino), real and not is_link)

    def _keep(self, skill: FoundSkill) -> None:
        """One skill per SKILL.md: the first found wins, unless a later one is its real (unlinked) place."""
        held = self.found.get(skill.identity)
        if held is None or (skill.real and not held.real):
            self.found[skill.identity] = skill


def walk_root(root: Root, allowed: Sequence[Path] = (), warnings: list[str] | None = None) -> Iterator[FoundSkill]:
    """Every skill folder in a root, in a stable order.

    A root that is itself a skill folder is that skill. Folders down to six levels below the root are searched,
    dot-folders too (all but VCS and tool caches); a skill folder may hold further skills, except in its own
    material folders (``references/``, ``scripts/``, ...). ``allowed`` are the configured roots a symlink may
    lead into (the root itself always); ``warnings`` collects symlink loops and links that were not followed.
    """
    real_root = os.path.realpath(root.path)
    walk = _Walk(root, (real_root, *(os.path.realpath(p) for p in allowed)), warnings if warnings is not None else [])
    walk.folder(str(root.path), 0, False, True)
    walk.follow_links()
    yield from walk.found.values()
