"""Loading a skill's Python code in-process, each skill under its own package name.

Two skills may both ship ``handler.py`` and ``helpers.py``; each sees only its own. The skill folder never goes
on ``sys.path``: relative imports work because the folder is a package, and plain sibling imports
(``import helpers``) are mapped onto that package by a per-skill ``__import__``.

A skill that is a package inside a package root (the built-in skills, :func:`register_package_root`) is imported
under its real name instead, ``<package>.<skill folder>.<module>``, so the handler that runs is the very module the
skill's plugin and everything else import (imported once, like any installed package).
"""

from __future__ import annotations

import builtins
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

PACKAGE_ROOT = "skillyard_skills"
_lock = threading.RLock()
_loaded: dict[tuple[str, Any], ModuleType] = {}
#: Folders of skill roots that are import packages: folder → package name.
_package_roots: dict[Path, str] = {}


def register_package_root(folder: Path, package: str) -> None:
    """Import the skills that are packages in ``folder`` as ``<package>.<skill folder>`` (``folder`` is its folder)."""
    _package_roots[folder.resolve()] = package


def _real_name(skill_dir: Path, module_file: Path) -> str | None:
    """The module's name inside a registered package root, or None when the skill is not a package of one."""
    package = _package_roots.get(skill_dir.parent.resolve())
    if package is None or not (skill_dir / "__init__.py").is_file() or not module_file.is_relative_to(skill_dir):
        return None
    parts = [skill_dir.name, *module_file.relative_to(skill_dir).with_suffix("").parts]
    return ".".join([package, *parts]) if all(part.isidentifier() for part in parts) else None


def _package_name(skill_dir: Path, version: Any) -> str:
    digest = hashlib.sha1(f"{skill_dir}\x00{version}".encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() else "_" for c in skill_dir.name)[:40]
    return f"{PACKAGE_ROOT}.{safe}_{digest}"


def _sibling_names(skill_dir: Path) -> frozenset[str]:
    names = set()
    for entry in skill_dir.iterdir():
        if entry.suffix == ".py" and entry.stem.isidentifier():
            names.add(entry.stem)
        elif entry.is_dir() and (entry / "__init__.py").is_file() and entry.name.isidentifier():
            names.add(entry.name)
    return frozenset(names)


def _scoped_builtins(package: str, siblings: frozenset[str]) -> dict[str, Any]:
    """A copy of builtins whose ``__import__`` resolves the skill's own top-level modules inside its package."""
    real_import = builtins.__import__

    def skill_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        head = name.partition(".")[0]
        if level == 0 and head in siblings:
            module = real_import(f"{package}.{name}", globals, locals, fromlist, 0)
            return module if fromlist else sys.modules[f"{package}.{head}"]
        return real_import(name, globals, locals, fromlist, level)

    scoped = dict(vars(builtins))
    scoped["__import__"] = skill_import
    return scoped


class _SkillLoader(importlib.machinery.SourceFileLoader):
    """Source loader that gives every module of a skill package the skill's scoped builtins."""

    def __init__(self, fullname: str, path: str, scoped: dict[str, Any]) -> None:
        super().__init__(fullname, path)
        self._scoped = scoped

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__["__builtins__"] = self._scoped
        super().exec_module(module)


class _SkillFinder(importlib.abc.MetaPathFinder):
    """Finds modules of loaded skill packages (``skillyard_skills.<pkg>.<mod>``) inside their folders."""

    packages: ClassVar[dict[str, tuple[Path, dict[str, Any]]]] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(PACKAGE_ROOT + "."):
            return None
        parts = fullname.split(".")
        package = ".".join(parts[:2])
        if package not in self.packages:
            return None
        folder, scoped = self.packages[package]
        relative = parts[2:]
        base = folder.joinpath(*relative)
        if not relative or (base / "__init__.py").is_file():
            init = base / "__init__.py"
            origin = str(init) if init.is_file() else None
            loader = _SkillLoader(fullname, origin, scoped) if origin else None
            spec = importlib.util.spec_from_loader(fullname, loader, origin=origin, is_package=True)
            if spec is not None:
                spec.submodule_search_locations = [str(base)]
            return spec
        source = base.with_suffix(".py")
        if source.is_file():
            return importlib.util.spec_from_file_location(
                fullname, source, loader=_SkillLoader(fullname, str(source), scoped)
            )
        return None


_finder = _SkillFinder()


def _ensure_root() -> None:
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    if PACKAGE_ROOT not in sys.modules:
        root = ModuleType(PACKAGE_ROOT)
        root.__path__ = []
        sys.modules[PACKAGE_ROOT] = root


def load_entry_module(skill_dir: Path, module_file: Path, version: Any) -> ModuleType:
    """Import a skill's entry module (once per version of its files) under the skill's own package."""
    real_name = _real_name(skill_dir, module_file)
    if real_name is not None:
        return importlib.import_module(real_name)
    key = (str(module_file), version)
    with _lock:
        module = _loaded.get(key)
        if module is not None:
            return module
        _ensure_root()
        package = _package_name(skill_dir, version)
        folder = module_file.parent
        _SkillFinder.packages[package] = (folder, _scoped_builtins(package, _sibling_names(folder)))
        module = importlib.import_module(f"{package}.{module_file.stem}")
        _forget_older_versions(str(module_file), version)
        _loaded[key] = module
        return module


def _forget_older_versions(module_file: str, current: Any) -> None:
    """Drop earlier versions of a skill's package so a long-running host does not keep every edit in memory."""
    for old_key in [k for k in _loaded if k[0] == module_file and k[1] != current]:
        old = _loaded.pop(old_key)
        package = old.__name__.rpartition(".")[0]
        _SkillFinder.packages.pop(package, None)
        for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
            del sys.modules[name]
