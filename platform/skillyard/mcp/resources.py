"""Resources: each exposed skill's SKILL.md and ``references/`` files, and the files a session's runs made.

``skillyard://skills/<name>/<path>`` reads a skill's file; ``skillyard://sessions/<id>/files/<ref>`` an artifact,
for the session that made it only (its owner's requests in that session).
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

import mcp_types as types

if TYPE_CHECKING:
    from ..catalog.skill import Skill
    from ..yard import SkillYard

SCHEME = "skillyard://"
#: The largest file ``resources/read`` returns (a resource is read whole).
MAX_RESOURCE_BYTES = 20 * 1024 * 1024
#: The ``references/`` files listed per skill (a folder of thousands is not a listing).
MAX_REFERENCES = 200


class ResourceProblem(Exception):
    """A URI that names nothing readable, or something the caller may not read; the message says which."""


def artifact_uri(session_id: str, ref: str) -> str:
    return f"{SCHEME}sessions/{quote(session_id, safe='')}/files/{quote(ref, safe='')}"


def skill_file_uri(skill: str, path: str) -> str:
    return f"{SCHEME}skills/{quote(skill, safe='')}/{quote(path)}"


def _reference_files(skill: Skill) -> list[str]:
    folder = skill.dir / "references"
    if not folder.is_dir():
        return []
    found: list[str] = []
    for path in sorted(folder.rglob("*")):
        if len(found) >= MAX_REFERENCES:
            break
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(skill.dir).parts):
            found.append(path.relative_to(skill.dir).as_posix())
    return found


def skill_resources(skills: list[Skill]) -> list[types.Resource]:
    """SKILL.md and the references of each skill."""
    resources = []
    for skill in skills:
        resources.append(
            types.Resource(
                uri=skill_file_uri(skill.name, "SKILL.md"),
                name=f"{skill.name}/SKILL.md",
                description=f"The manual of skill {skill.name}",
                mime_type="text/markdown",
            )
        )
        for path in _reference_files(skill):
            resources.append(
                types.Resource(
                    uri=skill_file_uri(skill.name, path),
                    name=f"{skill.name}/{path}",
                    mime_type=mimetypes.guess_type(path)[0] or "text/plain",
                )
            )
    return resources


async def session_resources(yard: SkillYard, session_id: str) -> list[types.Resource]:
    """The files of the caller's session (its runs' artifacts and its uploads)."""
    return [
        types.Resource(
            uri=artifact_uri(session_id, a.ref),
            name=a.filename,
            mime_type=mimetypes.guess_type(a.filename)[0] or "application/octet-stream",
            size=a.size,
        )
        for a in await yard.attachments.for_session(session_id)
        if a.local_path
    ]


def _contents(uri: str, path: Path) -> types.ReadResourceResult:
    try:
        size = path.stat().st_size
    except OSError:
        raise ResourceProblem(f"{uri} names a file that no longer exists") from None
    if size > MAX_RESOURCE_BYTES:
        raise ResourceProblem(f"{uri} is {size} bytes, over the {MAX_RESOURCE_BYTES} a resource may be")
    data = path.read_bytes()
    mime = mimetypes.guess_type(path.name)[0]
    try:
        if b"\x00" in data[:8192]:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "binary")
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        blob = base64.b64encode(data).decode("ascii")
        return types.ReadResourceResult(
            contents=[types.BlobResourceContents(uri=uri, blob=blob, mime_type=mime or "application/octet-stream")]
        )
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text, mime_type=mime)])


def _skill_file(skill: Skill, path: str, uri: str) -> Path:
    """SKILL.md or a file under ``references/``, inside the skill's folder (links out of it are not followed)."""
    if path == "SKILL.md":
        return skill.manifest.path
    base = skill.dir.resolve()
    target = (base / path).resolve()
    if not path.startswith("references/") or not target.is_relative_to(base / "references") or not target.is_file():
        raise ResourceProblem(f"{uri}: skill {skill.name!r} serves SKILL.md and its references/ files only")
    return target


async def read_resource(
    yard: SkillYard, uri: str, session_id: str, skills: dict[str, Skill]
) -> types.ReadResourceResult:
    """Read one resource; ``session_id`` is the caller's session, ``skills`` the exposed skills by name."""
    if not uri.startswith(SCHEME):
        raise ResourceProblem(f"{uri!r} is not a skillyard:// resource; resources/list shows them")
    kind, _, rest = uri[len(SCHEME) :].partition("/")
    if kind == "skills":
        name, _, path = rest.partition("/")
        skill = skills.get(unquote(name))
        if skill is None:
            raise ResourceProblem(f"{uri}: no exposed skill named {unquote(name)!r}")
        return _contents(uri, _skill_file(skill, unquote(path), uri))
    if kind == "sessions":
        session, _, tail = rest.partition("/")
        files, _, ref = tail.partition("/")
        if unquote(session) != session_id or files != "files" or not ref:
            raise ResourceProblem(f"{uri}: only the files of your own session ({session_id}) can be read")
        for attachment in await yard.attachments.for_session(session_id):
            if attachment.ref == unquote(ref) and attachment.local_path:
                return _contents(uri, Path(attachment.local_path))
        raise ResourceProblem(f"{uri}: your session has no file {unquote(ref)!r}")
    raise ResourceProblem(f"{uri}: unknown kind {kind!r}; skillyard serves skills/ and sessions/ resources")
