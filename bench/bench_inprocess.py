"""In-process run of a trivial async skill through the whole pipeline, against calling the handler directly
and against LangChain's StructuredTool.ainvoke on the same function and schema.

    python bench/bench_inprocess.py

Two configurations, in one process: without a database, and with the embedded PostgreSQL started (as a user's
machine has it after the quickstart: configs, attachments and the run log then live there).
Target: LangChain time / our time >= 3, with the embedded database started.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import best_per_call, isolate, us, verdict

TMP, BASE = isolate("inprocess")

from skillyard.yard import SkillYard  # noqa: E402  (after isolate(): the host reads the environment)

Handler = Callable[[dict[str, Any], dict[str, Any]], Awaitable[dict[str, Any]]]
REPS = 15
TARGET = 3.0
HANDLER = textwrap.dedent(
    """\
    async def execute(input, ctx):
        return {"echo": input["text"]}
    """
)
SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "what to echo"}},
    "required": ["text"],
}


def make_skill(root: Path) -> Path:
    folder = root / "echo"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: echo\ndescription: Echo the given text back.\n---\n\n# Echo\n")
    (folder / "handler.py").write_text(HANDLER)
    (folder / "schema.json").write_text(json.dumps(SCHEMA))
    return folder


def load_handler(folder: Path) -> Handler:
    """The same handler function, imported on its own (not through the host's loader)."""
    spec = importlib.util.spec_from_file_location("bench_echo_handler", folder / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    execute: Handler = module.execute
    return execute


def langchain_tool(execute: Handler) -> Any:
    """StructuredTool over the same function, with the same JSON schema as args_schema; None when not installed.

    With a JSON-schema dict as ``args_schema`` LangChain passes the input through unvalidated (it validates
    only Pydantic models), so this baseline does less work than yard.run, which validates every input.
    """
    try:
        from langchain_core.tools import StructuredTool
    except ImportError:
        return None

    async def echo(**kwargs: Any) -> dict[str, Any]:
        return await execute(kwargs, {})

    return StructuredTool.from_function(
        coroutine=echo, name="echo", description="Echo the given text back.", args_schema=SCHEMA
    )


async def measure(root: Path, execute: Handler, tool: Any) -> dict[str, float]:
    """Best seconds per call of yard.run, the bare handler and (if installed) LangChain, after a warm-up."""
    ctx: dict[str, Any] = {}
    async with SkillYard(skills_dirs=[root], include_builtin=False) as yard:
        result = await yard.run("echo", {"text": "hi"})
        if result != {"echo": "hi", "ok": True, "success": True}:
            sys.exit(f"unexpected envelope from yard.run: {result!r}")
        if tool is not None and (out := await tool.ainvoke({"text": "hi"})) != {"echo": "hi"}:
            sys.exit(f"unexpected LangChain result: {out!r}")
        for _ in range(2000):  # warm up: module import, validator, config cache, workspace folder
            await yard.run("echo", {"text": "hi"})
            if tool is not None:
                await tool.ainvoke({"text": "hi"})

        calls = {
            "ours": lambda: yard.run("echo", {"text": "hi"}),
            "direct": lambda: execute({"text": "hi"}, ctx),
        }
        if tool is not None:
            calls["langchain"] = lambda: tool.ainvoke({"text": "hi"})
        return await best_per_call(calls, REPS, target_s=0.1)


def report(config: str, best: dict[str, float], target: bool) -> None:
    ours = best["ours"]
    print(f"[{config}]")
    print(f"ours    yard.run('echo', {{'text': 'hi'}}):  {us(ours)}/call  {1 / ours:,.0f} calls/s")
    direct = best["direct"]
    print(
        f"(a) direct await of the handler:            {us(direct)}/call  {1 / direct:,.0f} calls/s"
        f"  -> ours/direct = {ours / direct:,.1f}x (pipeline overhead {us(ours - direct)}/call)"
    )
    if "langchain" not in best:
        print(
            "(b) LangChain StructuredTool.ainvoke: SKIPPED (langchain-core is not installed; "
            "`pip install langchain-core` into this environment to compare)"
        )
        return
    import langchain_core

    lc = best["langchain"]
    ratio = lc / ours
    print(
        f"(b) LangChain {langchain_core.__version__} StructuredTool.ainvoke: {us(lc)}/call  {1 / lc:,.0f} calls/s"
        f"  -> langchain/ours = {ratio:.2f}x"
    )
    if target:
        print(f"target: langchain/ours >= {TARGET:g}x with the embedded database started: {verdict(ratio >= TARGET)}")


async def start_embedded_database() -> None:
    """Initialise and start the embedded PostgreSQL under this SKILLYARD_HOME (migrations included)."""
    async with SkillYard(include_builtin=False) as yard:
        await yard.database.engine()


async def main() -> None:
    root = BASE / "skills"
    folder = make_skill(root)
    execute = load_handler(folder)
    tool = langchain_tool(execute)
    print(f"python {sys.version.split()[0]}; best of {REPS} repetitions of ~0.1 s each (contenders interleaved)")
    report("no database", await measure(root, execute, tool), target=False)
    await start_embedded_database()
    report("embedded database started", await measure(root, execute, tool), target=True)


if __name__ == "__main__":
    asyncio.run(main())
