"""The skill as a Python package: every subpackage of skills/ is listed for the wheel (setuptools ships only the
packages pyproject names), under the name everything imports it by."""

from __future__ import annotations

import tomllib

from support import REPO


def test_every_subpackage_of_the_skills_is_listed_for_the_wheel() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    skills = REPO / "skills"
    found = {
        ".".join(["skillyard.builtin_skills", *init.parent.relative_to(skills).parts])
        for init in skills.rglob("__init__.py")
    }
    assert "skillyard.builtin_skills.datatable.sql" in found
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
