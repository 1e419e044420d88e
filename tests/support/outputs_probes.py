"""What the artifacts probes share (tests/outputs, tests/invoke, tests/storage, tests/cli): test data, unique
session ids, the skills they run, the session's attachment listing, and the fixtures for private addresses and a
SkillYard over the test's skill root (shared by every test folder through the root conftest)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
HTML = b"<!DOCTYPE html><html><head><title>a page</title></head><body>hello</body></html>"
JSON_BODY = b'{"data": [1, 2, 3], "ok": true}'
MP3 = b"ID3\x03\x00\x00\x00" + b"\xff\xfb" * 500

#: A handler that echoes its input, its workspace and its attachments.
ECHO = """
async def execute(input, ctx):
    return {"got": input, "ws": ctx["workspace_dir"], "attachments": ctx["attachments"]}
"""
#: A result_skill body returning the input's ``result`` as the skill's result.
URLS = "return dict(input['result'])"


def sid(name: str) -> str:
    """A session id unique to this test run (the PostgreSQL of the pytest session is shared by every test)."""
    return f"probe-{name}-{uuid.uuid4().hex[:8]}"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_files(folder: Path, names: list[str]) -> list[Path]:
    """Files named ``names`` in ``folder``, each holding its own name three times."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in names:
        path = folder / name
        path.write_bytes(name.encode() * 3)
        out.append(path)
    return out


def files_in(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def echo_skill(make_skill, name: str = "echo", frontmatter: str | None = None, schema: dict | None = None) -> None:
    files = {"handler.py": ECHO}
    if schema is not None:
        files["schema.json"] = json.dumps(schema)
    make_skill(name, frontmatter=frontmatter, files=files)


def result_skill(make_skill, name: str, body: str, frontmatter: str | None = None) -> None:
    """A skill whose handler body (indented 4 spaces) ends in a return; ws = Path(workspace_dir)."""
    lines = "\n".join("    " + line for line in body.strip("\n").splitlines())
    head = "import asyncio, json, os, time\nfrom pathlib import Path\nasync def execute(input, ctx):\n"
    code = f"{head}    ws = Path(ctx['workspace_dir'])\n{lines}\n"
    make_skill(name, frontmatter=frontmatter, files={"handler.py": code})


async def listed(session: str) -> list[dict[str, Any]]:
    """The session's attachments, as `skillyard artifacts --json` lists them."""
    async with SkillYard(include_builtin=False) as yard:
        return [a.as_dict() for a in await yard.attachments.for_session(session)]


@pytest.fixture
def allow_private(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLYARD_ALLOW_PRIVATE_URLS", "1")


@pytest.fixture
def deny_private(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLYARD_ALLOW_PRIVATE_URLS", raising=False)


@pytest.fixture
def yard_for(skills_root: Path) -> Callable[..., SkillYard]:
    """``yard_for(**kwargs)``: a SkillYard over the test's skill root, without the built-in skills."""

    def make(**kwargs: Any) -> SkillYard:
        return SkillYard(skills_dirs=[skills_root], include_builtin=False, **kwargs)

    return make


WRITE_AND_RETURN = """
for name, text in input.get("files", {}).items():
    target = ws / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
return json.loads(json.dumps(input.get("result", {"ok": True})).replace("{ws}", str(ws)))
"""


def writer(make_skill, name: str = "writer", frontmatter: str | None = None) -> None:
    result_skill(make_skill, name, WRITE_AND_RETURN, frontmatter=frontmatter)


BIG_ROWS = [{"i": n, "text": "x" * 100} for n in range(200)]


def url_skill(make_skill) -> None:
    """The skill ``urls``: its result is its input's ``result``."""
    result_skill(make_skill, "urls", URLS)


async def attach_and_close(session: str, path: Path) -> list[str]:
    async with SkillYard(include_builtin=False) as yard:
        return [i["ref"] for i in await yard.attach(session, [path])]
