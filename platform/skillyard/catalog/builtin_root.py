"""Default plugin: the built-in skills shipped in the wheel (``skills/`` in a source checkout)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ..hookspecs import hookimpl

#: The package the built-in skills ship in.
BUILTIN_PACKAGE = "skillyard.builtin_skills"


def _package_dir() -> Path | None:
    spec = importlib.util.find_spec(BUILTIN_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return None


def builtin_skills_dir() -> Path | None:
    """Where the built-in skills are: the ``skillyard.builtin_skills`` data package, else the checkout's skills/."""
    found = _package_dir()
    if found is not None:
        return found
    checkout = Path(__file__).resolve().parents[3] / "skills"
    return checkout if checkout.is_dir() else None


def builtin_package(folder: Path) -> str | None:
    """``skillyard.builtin_skills`` when ``folder`` is that package's folder (its skills are its modules), else None."""
    found = _package_dir()
    return BUILTIN_PACKAGE if found is not None and found.resolve() == folder.resolve() else None


@hookimpl
def skill_roots(yard: Any) -> list[str] | None:
    found = builtin_skills_dir()
    return [str(found)] if found else None
