"""Skill folders for tests, the handlers and schemas many tests share, and a SkillYard over a test's skill root.

``make_skill`` (tests/conftest.py) is ``write_skill`` bound to the test's skill root.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from skillyard import SkillYard
from skillyard.errors import SkillyardError

OK_HANDLER = "async def execute(input, ctx):\n    return {'ok': True}\n"
"""A handler that succeeds with nothing to say."""

ECHO = "async def execute(input, ctx):\n    return {'ok': True, 'got': input}\n"
"""A handler that answers with its input under ``got``."""


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


RET = "async def execute(i, c):\n    return i.get('ret', {'ok': True})\n"
"""A handler answering ``input["ret"]`` (``{"ok": True}`` without one): a test picks the result."""

INPUT_ECHO = "async def execute(input, ctx):\n    return {'input': input}\n"
"""A handler that answers with its input under ``input``."""

CTX_DUMP = """
import json
async def execute(i, ctx):
    out = {}
    for k, v in ctx.items():
        try:
            json.dumps(v)
            out[k] = v
        except TypeError:
            out[k] = "<" + type(v).__name__ + ">"
    return {"ctx": out, "types": {k: type(v).__name__ for k, v in ctx.items()}, "input": i}
"""
"""A handler answering its runtime_context (values JSON cannot hold as ``<TypeName>``), each value's type and its
input."""

CALLER = """
async def execute(i, ctx):
    kw = i.get("kw", {})
    r = await ctx["call_skill"](i["target"], i.get("input"), **kw)
    return {"inner": r}
"""
"""A handler that calls ``input["target"]`` with ``input["input"]`` (and ``input["kw"]``) and answers its result."""

PROBE_CLI = """
import argparse, json, os, sys
def main():
    p = argparse.ArgumentParser()
    p.parse_known_args()
    print("log line", file=sys.stderr)
    env = {k: v[::-1] for k, v in os.environ.items()}  # reversed: results have the run's credentials masked
    print(json.dumps({"ok": True, "argv": sys.argv[1:], "env": env, "cwd": os.getcwd(), "pid": os.getpid()}))
if __name__ == "__main__":
    main()
"""
"""A Python CLI skill (argparse, ``__main__``) that prints its argv, environment (values reversed: read them with
:func:`child_env`), working folder and pid."""


def child_env(envelope: dict[str, Any]) -> dict[str, str]:
    """The environment a dumping skill (PROBE_CLI, ENV_DUMP) saw, its values reversed back: the platform masks a
    run's credentials in its result, so they travel reversed."""
    return {k: v[::-1] for k, v in envelope["env"].items()}


FAIL = {"ok": False, "error": "nope", "error_type": "transient"}
"""A failure a skill returns (for RET)."""

SCHEMA_WHO = {
    "type": "object",
    "properties": {"who": {"type": "string", "description": "Who to greet"}},
    "required": ["who"],
}

CRED_SCHEMA = {
    "type": "object",
    "properties": {
        "q": {"type": "string"},
        "api_key": {"type": "string"},
        "Password": {"type": "string"},
        "keyword": {"type": "string"},
        "author": {"type": "string", "x-secret": False},
        "max_tokens": {"type": "integer", "x-secret": False},
        "plain": {"type": "string", "x-secret": True},
    },
    "required": ["q", "api_key"],
}
"""Parameters the credential rule (§5.2) matches by name, and ``x-secret`` overriding it both ways."""

NOTES_FM = """name: notes
description: Notes
cli_commands:
  add:
    type: object
    properties: {text: {type: string, description: the note}}
    required: [text]
  list: {}"""
"""Frontmatter of a skill fanned out into the tools ``notes__add`` and ``notes__list``."""


def schema_json(props: dict, required: list[str] | None = None) -> str:
    """The text of an object schema."""
    return json.dumps({"type": "object", "properties": props, "required": required or []})


def shell_skill(make_skill, name: str, script: str, extra: str = "") -> Path:
    """A SHELL skill running ``run.sh``; ``extra`` goes on under ``exec:`` (e.g. ``"  timeout: 1"``)."""
    return make_skill(
        name, frontmatter=f"name: {name}\ndescription: d\nexec:\n  config: run.sh\n{extra}", files={"run.sh": script}
    )


def inline_shell_skill(make_skill, name: str, command: str, extra: str = "") -> None:
    """An INLINE_SHELL skill running ``command``; ``extra`` is frontmatter put before ``exec``."""
    make_skill(
        name,
        f"name: {name}\ndescription: d\n{extra}exec:\n  primary:\n    type: INLINE_SHELL\n"
        f"    command: |\n" + "".join(f"      {line}\n" for line in command.strip().splitlines()),
    )


def assert_failure(env: Any) -> None:
    """``env`` is a failure envelope: a JSON-serializable dict with ``ok`` and ``success`` false and an error."""
    assert isinstance(env, dict), env
    assert env["ok"] is False and env["success"] is False, env
    assert isinstance(env.get("error"), str | dict) and env["error"], env
    json.dumps(env)


async def run_or_error(coro: Any) -> Any:
    """A bad argument must give a failure envelope or a SkillyardError, never another exception."""
    try:
        env = await coro
    except SkillyardError as exc:
        assert str(exc)
        return exc
    assert_failure(env)
    return env
