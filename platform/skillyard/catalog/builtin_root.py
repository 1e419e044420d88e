"""Default plugin: the built-in skills shipped in the wheel (``skills/`` in a source checkout)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ..hookspecs import hookimpl


def builtin_skills_dir() -> Path | None:
    """Where the built-in skills are: the ``skillyard.builtin_skills`` data package, else the checkout's skills/."""
    spec = importlib.util.find_spec("skillyard.builtin_skills")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    checkout = Path(__file__).resolve().parents[3] / "skills"
    return checkout if checkout.is_dir() else None


@hookimpl
def skill_roots(yard: Any) -> list[str] | None:
    found = builtin_skills_dir()
    return [str(found)] if found else None
