"""Skill folders for tests, the handlers most tests need, and a SkillYard over a test's skill root.

``make_skill`` (tests/conftest.py) is ``write_skill`` bound to the test's skill root.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from skillyard import SkillYard

#: A handler that succeeds with nothing to say.
OK_HANDLER = "async def execute(input, ctx):\n    return {'ok': True}\n"
#: A handler that answers with its input under ``got``.
ECHO = "async def execute(input, ctx):\n    return {'ok': True, 'got': input}\n"


def write_skill(
    root: Path,
    name: str,
    frontmatter: str | None = None,
    body: str = "Instructions.\n",
    files: dict[str, str] | None = None,
) -> Path:
    """``root/name`` with a SKILL.md (frontmatter dedented; by default a name and a description) and ``files``."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    fm = frontmatter if frontmatter is not None else f"name: {name.split('/')[-1]}\ndescription: Test skill {name}"
    (folder / "SKILL.md").write_text(f"---\n{textwrap.dedent(fm).strip()}\n---\n{body}", encoding="utf-8")
    _write_files(folder, files)
    return folder


def write_raw(root: Path, name: str, content: str | bytes, files: dict[str, str] | None = None) -> Path:
    """``root/name`` whose SKILL.md is ``content`` exactly as given (a BOM, CRLF, broken YAML…), plus ``files``."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    _write_files(folder, files)
    return folder


def _write_files(folder: Path, files: dict[str, str] | None) -> None:
    for rel, text in (files or {}).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def yard_of(root: Path) -> SkillYard:
    """A SkillYard over one skill root, without the built-in skills."""
    return SkillYard(skills_dirs=[root], include_builtin=False)


async def run_skill(root: Path, name: str, input: dict[str, Any] | None = None, **context: Any) -> dict[str, Any]:
    """One run of ``name`` in a SkillYard opened over ``root`` for it; ``context`` is the run's runtime_context."""
    async with yard_of(root) as yard:
        return await yard.run(name, input or {}, context=context)
