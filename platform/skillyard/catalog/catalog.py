"""The catalog: every skill folder in every root, the winner per name, aliases and tool names; rescans cheaply."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .cache import Cached, ManifestCache, Signature
from .manifest import read_manifest
from .roots import FoundSkill, Root, list_folder, walk_root
from .skill import Skill, build_skill
from .toolnames import disambiguate, fanout_name, safe_tool_name


@dataclass(frozen=True)
class Entry:
    """One skill folder as listed: the skill, and how it relates to others of the same name."""

    skill: Skill
    active: bool
    shadowed: tuple[str, ...] = ()
    shadowed_by: str | None = None


def _stat(path: str, name: str, items: list[tuple[str, int, int, int]]) -> None:
    st = os.stat(path)
    items.append((name, st.st_mtime_ns, st.st_size, st.st_ino))


def _stat_entries(entries: list[os.DirEntry[str]], prefix: str, items: list[tuple[str, int, int, int]]) -> None:
    """Add (name, mtime, size, inode) of listed files, recursing into Python packages (edits there reload code)."""
    for entry in entries:
        try:
            if entry.is_file():
                st = entry.stat()
                items.append((prefix + entry.name, st.st_mtime_ns, st.st_size, st.st_ino))
            elif entry.is_dir() and os.path.exists(os.path.join(entry.path, "__init__.py")):
                _stat_entries(list_folder(entry.path), f"{prefix}{entry.name}/", items)
        except OSError:
            continue


def _signature(found: FoundSkill) -> Signature:
    """What a skill's files look like now: a change of any of them rebuilds the skill."""
    items: list[tuple[str, int, int, int]] = []
    _stat_entries(found.entries, "", items)
    if found.skill_md.parent != found.dir:  # a SKILL.md found via origin_path, docs/ or optional-skills/
        with contextlib.suppress(OSError):
            _stat(str(found.skill_md), str(found.skill_md), items)
    items.sort()
    return tuple(items)


def _outside_signature(skill: Skill) -> Signature:
    """The files a skill refers to below its top level (an ``exec.config`` in a subfolder): they shape it too."""
    items: list[tuple[str, int, int, int]] = []
    config = skill.exec.config
    if config is not None and config.parent != skill.dir:
        try:
            _stat(str(config), str(config), items)
        except OSError:
            items.append((str(config), 0, -1, 0))
    return tuple(items)


def _version(sig: Signature) -> str:
    """A digest of the signature: the same files give the same version in every process."""
    return hashlib.blake2b(repr(sig).encode(), digest_size=8).hexdigest()


class Catalog:
    """Skills found in ranked roots. ``scan()`` re-reads only folders whose files changed.

    With a ``cache`` (the host passes one under ``SKILLYARD_HOME``), skills parsed by an earlier process are
    reused while their files are unchanged.
    """

    def __init__(self, roots: list[Root], cache: ManifestCache | None = None) -> None:
        self.roots = roots
        self._disk = cache
        self._cache: dict[Path, dict[Path, Cached]] = {}
        self.entries: list[Entry] = []
        self.by_name: dict[str, Skill] = {}
        self.by_alias: dict[str, Skill] = {}
        self.by_tool: dict[str, tuple[Skill, str | None]] = {}
        self.warnings: tuple[str, ...] = ()  # what the walk has to say that belongs to no skill (symlinks)
        self.last_parsed = 0

    def scan(self) -> int:
        """Walk every root; rebuild changed skills; return how many folders were (re)parsed."""
        parsed = 0
        warnings: list[str] = []
        allowed = [r.path for r in self.roots]
        found_by_root = [(root, list(walk_root(root, allowed, warnings))) for root in self.roots]
        real = {f.identity for _, founds in found_by_root for f in founds if f.real}
        seen: dict[Path, dict[Path, Cached]] = {}
        skills: list[Skill] = []
        for root, founds in found_by_root:
            cache = self._cache.get(root.path)
            if cache is None:
                cache = self._disk.load(root.path) if self._disk is not None else {}
            kept: dict[Path, Cached] = {}
            root_parsed = 0
            for found in founds:
                if not found.real and found.identity in real:
                    continue  # a link to a skill listed at its real place
                sig = _signature(found)
                cached = cache.get(found.dir)
                if (
                    cached is None
                    or cached[0] != sig
                    or os.fspath(cached[2].manifest.path) != os.fspath(found.skill_md)
                    or (cached[1] and cached[1] != _outside_signature(cached[2]))
                ):
                    manifest = read_manifest(found.skill_md, found.install)
                    files = frozenset(item[0] for item in sig if "/" not in item[0])
                    skill = build_skill(found.dir, root.path, manifest, root.source, _version(sig), files)
                    cached = (sig, _outside_signature(skill), skill)
                    root_parsed += 1
                kept[found.dir] = cached
                skills.append(cached[2])
            if self._disk is not None and (root_parsed or kept.keys() != cache.keys()):
                self._disk.save(root.path, kept)
            seen[root.path] = kept
            parsed += root_parsed
        unchanged = (
            parsed == 0
            and seen.keys() == self._cache.keys()
            and all(seen[r].keys() == self._cache[r].keys() for r in seen)
        )
        self._cache = seen
        self.warnings = tuple(warnings)
        self.last_parsed = parsed
        if not unchanged:  # keep the same Skill objects (and the caches keyed by them) when nothing changed
            self._index(skills)
        return parsed

    def _index(self, skills: list[Skill]) -> None:
        rank = {r.path: r.rank for r in self.roots}

        def claim(s: Skill) -> tuple[str, bool, int, str]:
            # A skill in error never claims a name (a broken frontmatter falls back to its folder's name, which must
            # not knock out a valid skill of that name); then roots rank, then folder paths.
            return s.name, s.error is not None, rank.get(s.root, 99), str(s.dir)

        named = self._own_names(sorted(skills, key=claim))
        winners: dict[str, Skill] = {}
        shadows: dict[str, list[Skill]] = {}
        for skill in sorted(named, key=claim):
            if skill.name in winners:
                shadows.setdefault(skill.name, []).append(skill)
            else:
                winners[skill.name] = skill
        ordered = sorted(named, key=lambda s: (rank.get(s.root, 99), s.name, str(s.dir)))
        taken: dict[str, str] = {}
        final: dict[str, Skill] = {}
        for skill in ordered:
            if winners[skill.name] is skill:
                final[skill.name] = self._with_tool_names(skill, taken)
        entries = []
        for skill in ordered:
            winner = final[skill.name]
            if winner.dir == skill.dir and winner.root == skill.root:
                entries.append(Entry(winner, True, tuple(str(s.dir) for s in shadows.get(skill.name, []))))
            else:
                entries.append(Entry(skill, False, (), str(winner.dir)))
        self.entries = entries
        self.by_name = final
        self.by_tool = {t: (s, sub) for s in final.values() for t, sub in s.tool_names.items()}
        self.by_alias = {}
        for skill in final.values():
            for alias in skill.aliases:
                if alias not in final and alias not in self.by_alias:
                    self.by_alias[alias] = skill

    @staticmethod
    def _own_names(by_claim: list[Skill]) -> list[Skill]:
        """Two valid skills of one name in one root both stay usable: the first by folder path keeps the name, each
        later one is renamed ``<name>_<hash of its folder within the root>`` (stable across restarts), with a
        warning naming both. Across roots the higher root shadows the lower, as before."""
        first: dict[tuple[str, Path], Skill] = {}
        named = []
        for skill in by_claim:
            holder = first.setdefault((skill.name, skill.root), skill) if skill.error is None else skill
            if holder is skill:
                named.append(skill)
                continue
            folder = skill.dir.relative_to(skill.root) if skill.dir.is_relative_to(skill.root) else skill.dir
            new = disambiguate(skill.name, str(folder))
            note = f"another skill named {skill.name!r} in this root keeps the name ({holder.dir}); this one is {new!r}"
            named.append(dataclasses.replace(skill, name=new, warnings=(*skill.warnings, note)))
        return named

    @staticmethod
    def _with_tool_names(skill: Skill, taken: dict[str, str]) -> Skill:
        warnings = list(skill.warnings)
        base = safe_tool_name(skill.name)
        if base in taken:
            new = disambiguate(base, str(skill.dir))
            warnings.append(f"tool name {base!r} is taken by skill {taken[base]!r}; offered as {new!r}")
            base = new
        subs = skill.schema.subcommands
        names: dict[str, str | None] = {fanout_name(base, sub): sub for sub in subs} if subs else {base: None}
        if skill.skill_type == "knowledge":  # never a tool: retrieval only
            names = {}
        for tool in names:
            taken[tool] = skill.name
        taken.setdefault(base, skill.name)
        if len(warnings) != len(skill.warnings):
            skill = dataclasses.replace(skill, tool_names={}, warnings=tuple(warnings))
        skill.tool_names.clear()  # catalog state: names depend on the other skills, so the catalog fills them
        skill.tool_names.update(names)
        return skill

    def trusted(self, skill: Skill) -> bool:
        """Whether the skill's root is trusted (an unknown root is not)."""
        return any(root.path == skill.root and root.trusted for root in self.roots)

    def resolve(self, name: str) -> tuple[Skill, str | None] | None:
        """A skill by name, alias or tool name (``<skill>__<sub>`` restores the subcommand)."""
        if type(name) is not str:
            return None  # a list or a number names no skill (and could not be looked up: unhashable)
        skill = self.by_name.get(name) or self.by_alias.get(name)
        if skill is not None:
            return skill, None
        return self.by_tool.get(name)
