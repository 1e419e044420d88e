"""The PYTHON exec type in-process: entry choice, binding, results, per-skill imports, errors and wall clocks."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from skillyard import SkillYard
from support.skills import run_skill


def handler_skill(make_skill, name: str, code: str, exec_line: str = "", files: dict[str, str] | None = None) -> Path:
    return make_skill(name, f"name: {name}\ndescription: d\n{exec_line}", files={"handler.py": code, **(files or {})})


# --- entry function and binding -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["handle", "main", "handler", "run", "execute"], "execute"),
        (["handle", "main", "handler", "run"], "run"),
        (["handle", "main", "handler"], "handler"),
        (["handle", "main"], "main"),
        (["handle"], "handle"),
    ],
)
async def test_entry_name_order(make_skill, skills_root, names, expected):
    code = "".join(f"def {n}(input):\n    return {{'entry': {n!r}}}\n\n" for n in names)
    handler_skill(make_skill, "entries", code)
    env = await run_skill(skills_root, "entries")
    assert env["entry"] == expected


@pytest.mark.parametrize(
    ("signature", "expected"),
    [
        ("()", 0),
        ("(input)", 1),
        ("(input, ctx=None)", 1),
        ("(input, ctx)", 2),
        ("(input, ctx, *, extra=5)", 2),
        ("(*args)", 0),
    ],
)
async def test_binding_by_required_positional_count(make_skill, skills_root, signature, expected):
    handler_skill(
        make_skill,
        "bind",
        f"""
        def execute{signature}:
            got = locals()
            return {{"input": got.get("input", (got.get("args") or [None])[0] if "args" in got else None),
                     "has_ctx": isinstance(got.get("ctx"), dict), "n_args": len(got.get("args", ())) }}
    """,
    )
    env = await run_skill(skills_root, "bind", {"q": 1}, session_id="bind-s")
    assert env["ok"] is True, env
    assert env["input"] == ({"q": 1} if expected >= 1 else None)
    assert env["has_ctx"] is (expected == 2)
    assert env["n_args"] == 0


async def test_ctx_carries_the_runtime_context(make_skill, skills_root):
    handler_skill(
        make_skill,
        "ctxs",
        """
        async def execute(input, ctx):
            return {"session": ctx["session_id"], "org": ctx["org_name"], "has_call": callable(ctx["call_skill"]),
                    "region": ctx["skill_args"]["region"]}
    """,
    )
    env = await run_skill(skills_root, "ctxs", session_id="s9", org_name="Acme", skill_args={"region": "eu"})
    assert env == {"session": "s9", "org": "Acme", "has_call": True, "region": "eu", "ok": True, "success": True}


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        ("42", {"result": 42}),
        ("'text'", {"result": "text"}),
        ("[1, 2]", {"result": [1, 2]}),
        ("None", {"result": None}),
        ("(1, 'a')", {"result": [1, "a"]}),
        ("{'a': 1}", {"a": 1}),
    ],
)
async def test_non_dict_results_are_wrapped(make_skill, skills_root, returned, expected):
    handler_skill(make_skill, "wraps", f"def run(input):\n    return {returned}\n")
    env = await run_skill(skills_root, "wraps")
    assert env == {**expected, "ok": True, "success": True}


async def test_sync_entry_runs_in_a_worker_thread_without_db(make_skill, skills_root, db_env):
    handler_skill(
        make_skill,
        "sync_one",
        """
        import threading

        def execute(input, ctx):
            return {"thread": threading.get_ident(), "db_is_none": ctx["db"] is None, "has_db_key": "db" in ctx,
                    "factory": ctx["db_factory"] is not None}
    """,
    )
    handler_skill(
        make_skill,
        "async_one",
        """
        import threading

        async def execute(input, ctx):
            return {"thread": threading.get_ident(), "db": type(ctx["db"]).__name__}
    """,
    )
    sync_env = await run_skill(skills_root, "sync_one")
    async_env = await run_skill(skills_root, "async_one")
    here = threading.get_ident()
    assert async_env["thread"] == here  # async entries are awaited on the loop
    assert async_env["db"] == "AsyncSession"
    assert sync_env["thread"] != here
    assert sync_env["has_db_key"] is True and sync_env["db_is_none"] is True and sync_env["factory"] is True


async def test_sync_entry_gets_db_none_whatever_the_caller_passed(make_skill, skills_root):
    handler_skill(make_skill, "sync_two", "def execute(input, ctx):\n    return {'none': ctx.get('d' + 'b') is None}\n")
    env = await run_skill(skills_root, "sync_two", db="a-live-session-stand-in")
    assert env["none"] is True


async def test_sync_entry_does_not_block_the_loop(make_skill, skills_root):
    import asyncio

    handler_skill(make_skill, "blocking", "import time\n\ndef execute(input):\n    time.sleep(0.4)\n    return {}\n")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    task = asyncio.ensure_future(ticker())
    try:
        env = await run_skill(skills_root, "blocking")
    finally:
        task.cancel()
    assert env["ok"] is True
    assert ticks >= 5


# --- each skill under its own package -----------------------------------------------------------------------


async def test_two_skills_with_the_same_file_names_see_their_own_helpers(make_skill, skills_root):
    make_skill(
        "alpha",
        "name: alpha\ndescription: d",
        files={
            "handler.py": """
            from . import helpers
            import helpers as plain
            from helpers import WHO

            def execute(input):
                return {"rel": helpers.WHO, "plain": plain.WHO, "from": WHO, "same": helpers is plain,
                        "module": helpers.__name__}
        """,
            "helpers.py": "WHO = 'alpha'\n",
        },
    )
    make_skill(
        "beta",
        "name: beta\ndescription: d",
        files={
            "handler.py": """
            import helpers
            from . import helpers as rel
            from lib.util import shout

            def execute(input):
                return {"rel": rel.WHO, "plain": helpers.WHO, "from": shout(), "same": helpers is rel,
                        "module": helpers.__name__}
        """,
            "helpers.py": "WHO = 'beta'\n",
            "lib/__init__.py": "",
            "lib/util.py": "from helpers import WHO\n\ndef shout():\n    return WHO.upper()\n",
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        alpha = await yard.run("alpha", {})
        beta = await yard.run("beta", {})
        alpha_again = await yard.run("alpha", {})
    assert (alpha["rel"], alpha["plain"], alpha["from"], alpha["same"]) == ("alpha", "alpha", "alpha", True)
    assert (beta["rel"], beta["plain"], beta["from"], beta["same"]) == ("beta", "beta", "BETA", True)
    assert alpha_again["rel"] == "alpha"
    assert alpha["module"] != beta["module"]
    assert "helpers" not in sys.modules and "lib" not in sys.modules
    assert not any(str(skills_root) in p for p in sys.path)


async def test_rescan_picks_up_edited_code(make_skill, skills_root):
    folder = make_skill(
        "editable",
        "name: editable\ndescription: d",
        files={
            "handler.py": "from . import helpers\n\ndef execute(input):\n    return {'v': 1, 'h': helpers.H}\n",
            "helpers.py": "H = 'one'\n",
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("editable", {}))["v"] == 1
        (folder / "handler.py").write_text(
            "from . import helpers\n\ndef execute(input):\n    return {'v': 'second', 'h': helpers.H}\n"
        )
        yard.rescan()
        env = await yard.run("editable", {})
        assert (env["v"], env["h"]) == ("second", "one")
        (folder / "helpers.py").write_text("H = 'helper two'\n")
        yard.rescan()
        assert (await yard.run("editable", {}))["h"] == "helper two"


# --- failures -----------------------------------------------------------------------------------------------


async def test_exception_becomes_a_failure_envelope(make_skill, skills_root):
    handler_skill(make_skill, "raises", "def execute(input):\n    raise OSError('disk is gone')\n")
    env = await run_skill(skills_root, "raises")
    assert env["ok"] is False and env["success"] is False
    assert env["exception_type"] == "OSError"
    assert "disk is gone" in env["error"]
    assert "Traceback" not in str(env)


async def test_connection_refused_keeps_its_class_name(make_skill, skills_root):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    handler_skill(
        make_skill,
        "refused",
        f"""
        import asyncio

        async def execute(input):
            await asyncio.open_connection("127.0.0.1", {port})
    """,
    )
    env = await run_skill(skills_root, "refused")
    assert env["ok"] is False
    assert env["exception_type"] == "ConnectionRefusedError"


async def test_async_skill_stopped_by_exec_timeout(make_skill, skills_root, tmp_path):
    handler_skill(
        make_skill,
        "sleepy",
        """
        import asyncio
        import pathlib

        async def execute(input, ctx):
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                pathlib.Path(ctx["workspace_dir"], "cancelled").write_text("yes")
                raise
            return {"finished": True}
    """,
        exec_line="exec: {timeout: 1}",
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    started = time.monotonic()
    env = await run_skill(skills_root, "sleepy", workspace_dir=str(workspace))
    assert time.monotonic() - started < 5
    assert env["ok"] is False and env["timed_out"] is True
    assert (workspace / "cancelled").read_text() == "yes"


async def test_sync_skill_stopped_by_exec_timeout(make_skill, skills_root):
    handler_skill(
        make_skill,
        "sleepy_sync",
        "import time\n\ndef execute(input):\n    time.sleep(1.5)\n    return {}\n",
        exec_line="exec: {timeout: 0.5}",
    )
    started = time.monotonic()
    env = await run_skill(skills_root, "sleepy_sync")
    assert time.monotonic() - started < 1.4
    assert env["timed_out"] is True


async def test_timeout_raised_by_the_skill_is_not_a_wall_clock_stop(make_skill, skills_root):
    handler_skill(
        make_skill,
        "own_timeout",
        "def execute(input):\n    raise TimeoutError('upstream slow')\n",
        exec_line="exec: {timeout: 5}",
    )
    env = await run_skill(skills_root, "own_timeout")
    assert env["exception_type"] == "TimeoutError" and not env.get("timed_out")


# --- SystemExit: re-run as a CLI subprocess ------------------------------------------------------------------


async def test_system_exit_in_process_reruns_as_subprocess(make_skill, skills_root, capsys):
    handler_skill(
        make_skill,
        "exits",
        """
        import json
        import os
        import sys

        def main():
            data = json.loads(os.environ.get("SKILL_INPUT") or "{}")
            print(json.dumps({"echo": data, "as_main": __name__ == "__main__", "pid": os.getpid(),
                              "argv": sys.argv[1:]}))
            sys.exit(0)

        if __name__ == "__main__":
            main()
    """,
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert yard.skill("exits").exec.python_cli is False
        env = await yard.run("exits", {"city": "Paris"})
    assert env["ok"] is True, env
    assert env["echo"] == {"city": "Paris"}
    assert env["as_main"] is True and env["pid"] != os.getpid()
    assert env["argv"] == ["--city", "Paris"]


async def test_system_exit_while_importing_reruns_as_subprocess(make_skill, skills_root):
    """Module-level argparse exits on import (the host's argv lacks --city); the run must not take the host down."""
    handler_skill(
        make_skill,
        "module_args",
        """
        import argparse
        import json

        parser = argparse.ArgumentParser()
        parser.add_argument("--city", required=True)
        args = parser.parse_args()


        def main():
            print(json.dumps({"city": args.city}))


        main()
    """,
    )
    env = await run_skill(skills_root, "module_args", {"city": "Paris"})
    assert env == {"city": "Paris", "ok": True, "success": True}


async def test_old_versions_are_dropped_on_reload(make_skill, skills_root):
    import sys

    from skillyard import SkillYard

    folder = make_skill(
        "ver",
        files={
            "handler.py": "async def execute(i, c):\n    return {'v': 1}\n",
            "lib/__init__.py": "",
            "lib/util.py": "X = 1\n",
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("ver"))["v"] == 1
        first = [n for n in sys.modules if n.startswith("skillyard_skills.ver_")]
        (folder / "handler.py").write_text(
            "from .lib import util\nasync def execute(i, c):\n    return {'v': util.X}\n"
        )
        (folder / "lib" / "util.py").write_text("X = 2\n")
        yard.rescan()
        assert (await yard.run("ver"))["v"] == 2
        (folder / "lib" / "util.py").write_text("X = 33\n")  # an edit inside a sub-package alone
        yard.rescan()
        assert (await yard.run("ver"))["v"] == 33
        assert not any(n in sys.modules for n in first)
