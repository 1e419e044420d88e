"""The PYTHON exec type in-process (executors/inprocess.py): entry choice, binding, results, errors and wall
clocks."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from skillyard import SkillYard
from support.skills import run_skill


def handler_skill(make_skill, name: str, code: str, exec_line: str = "", files: dict[str, str] | None = None) -> Path:
    return make_skill(name, f"name: {name}\ndescription: d\n{exec_line}", files={"handler.py": code, **(files or {})})


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


async def test_async_skill_stopped_by_exec_timeout(db_env, make_skill, skills_root, tmp_path):
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
        exec_line="exec: {timeout: 0.3}",
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


async def test_entry_name_order_with_several_names_defined(make_skill, skills_root):
    """Issue: 'entry name order execute/run/handler/main/handle'."""
    code = "".join(
        f"def {n}(i):\n    return {{'entry': '{n}'}}\n" for n in ("handle", "main", "handler", "run", "execute")
    )
    make_skill("order", files={"handler.py": code})
    code2 = "".join(f"def {n}(i):\n    return {{'entry': '{n}'}}\n" for n in ("handle", "main", "handler"))
    make_skill("order2", files={"handler.py": code2})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("order", {}))["entry"] == "execute"
        assert (await yard.run("order2", {}))["entry"] == "handler"


@pytest.mark.parametrize(
    ("sig", "expected"),
    [
        ("()", "none"),
        ("(i)", "input"),
        ("(i, c)", "both"),
        ("(i, c, extra=None)", "both"),
        ("(i, *, flag=False)", "input"),
    ],
)
async def test_binding_by_required_positionals(make_skill, skills_root, sig, expected):
    """Issue: 'bind by the number of required positional parameters (0 → f(), 1 → f(input), 2+ → f(input, ctx))'."""
    body = {
        "none": "    return {'bound': 'none'}\n",
        "input": "    return {'bound': 'input', 'v': i['v']}\n",
        "both": "    return {'bound': 'both', 'v': i['v'], 'has_ctx': 'raw_input' in c}\n",
    }[expected]
    make_skill("bind", files={"handler.py": f"async def execute{sig}:\n{body}"})
    env = await run_skill(skills_root, "bind", {"v": 1})
    assert env["ok"] is True, env
    assert env["bound"] == expected
    if expected == "both":
        assert env["has_ctx"] is True


async def test_non_dict_result_wrapped(make_skill, skills_root):
    """Issue: 'non-dict results wrapped as `{"result": …}`'."""
    make_skill("nd", files={"handler.py": "async def execute(i):\n    return [1, 2]\n"})
    env = await run_skill(skills_root, "nd")
    assert env["ok"] is True and env["result"] == [1, 2]


@pytest.mark.spec("§6.1")
async def test_none_result_is_success(make_skill, skills_root):
    """Spec §6.1: '缺省或 None 不算失败'; issue: 'non-dict results wrapped as {"result": …}'."""
    make_skill("nn", files={"handler.py": "def execute():\n    return None\n"})
    env = await run_skill(skills_root, "nn")
    assert env["ok"] is True and env["success"] is True


async def test_sync_entry_runs_in_worker_thread_with_db_none(db_env, make_skill, skills_root):
    """Issue: 'sync entries run in a worker thread and get `ctx["db"] = None`'."""
    make_skill(
        "sync",
        files={
            "handler.py": """
        import threading
        def execute(i, ctx):
            return {"thread": threading.current_thread() is threading.main_thread(), "has_db": "db" in ctx, "db":
            ctx["db"]}
    """
        },
    )
    env = await run_skill(skills_root, "sync")
    assert env["ok"] is True and env["thread"] is False and env["has_db"] is True and env["db"] is None


async def test_in_process_timeout_async(make_skill, skills_root):
    """Issue: '`exec.timeout` is the wall clock of that skill whatever its exec type, in-process included' ... 'a run
    stopped by its wall clock says `timed_out: true`'."""
    make_skill(
        "slow",
        frontmatter="name: slow\ndescription: d\nexec:\n  timeout: 0.3",
        files={"handler.py": "import asyncio\nasync def execute(i, c):\n    await asyncio.sleep(30)\n    return {}\n"},
    )
    env = await run_skill(skills_root, "slow")
    assert env["ok"] is False and env["timed_out"] is True and env["success"] is False


async def test_in_process_timeout_sync(make_skill, skills_root):
    """Issue: '`exec.timeout` is the wall clock of that skill whatever its exec type, in-process included'."""
    make_skill(
        "slows",
        frontmatter="name: slows\ndescription: d\nexec:\n  timeout: 0.3",
        files={"handler.py": "import time\ndef execute(i, c):\n    time.sleep(3)\n    return {'late': True}\n"},
    )
    env = await run_skill(skills_root, "slows")
    assert env["ok"] is False and env["timed_out"] is True


@pytest.mark.parametrize(
    "exc",
    ["OSError('disk gone')", "ConnectionRefusedError('refused!')", "ValueError('bad value')", "KeyError('missing_k')"],
)
async def test_exception_becomes_envelope(make_skill, skills_root, exc):
    """Issue: 'Exceptions inside a skill become failure envelopes with `exception_type` (the class name, e.g. `OSError`,
    `ConnectionRefusedError`) and the message (traceback to the log only)'."""
    make_skill("boom", files={"handler.py": f"async def execute(i, c):\n    raise {exc}\n"})
    env = await run_skill(skills_root, "boom")
    cls, msg = exc.split("(")[0], exc.split("'")[1]
    assert env["ok"] is False and env["success"] is False
    assert env["exception_type"] == cls and msg in env["error"]
    assert "Traceback" not in json.dumps(env)
    json.dumps(env)


async def test_exception_in_sync_entry(make_skill, skills_root):
    """Issue: 'Exceptions inside a skill become failure envelopes'."""
    make_skill("boom2", files={"handler.py": "def execute(i):\n    return 1 / 0\n"})
    env = await run_skill(skills_root, "boom2")
    assert env["ok"] is False and env["exception_type"] == "ZeroDivisionError"


async def test_exception_at_import(make_skill, skills_root):
    """Issue: 'Exceptions inside a skill become failure envelopes'; yard.run: 'a skill's failures never raise'
    (README)."""
    make_skill("boom3", files={"handler.py": "raise RuntimeError('at import')\ndef execute():\n    return {}\n"})
    env = await run_skill(skills_root, "boom3")
    assert env["ok"] is False and env["exception_type"] == "RuntimeError"


async def test_syntax_error_handler(make_skill, skills_root):
    """decisions.md: 'a handler that does not parse ... fails its first run with `exception_type: SyntaxError`'."""
    make_skill("syn", files={"handler.py": "def execute(:\n    pass\n"})
    env = await run_skill(skills_root, "syn")
    assert env["ok"] is False and env["exception_type"] == "SyntaxError"


async def test_custom_exception_type_name(make_skill, skills_root):
    """Issue: '`exception_type` (the class name ...)'; docs: 'exception_family (the nearest built-in class)'."""
    make_skill(
        "boom4",
        files={
            "handler.py": "class QuotaGone(ConnectionError):\n    pass\nasync def execute(i, c):\n    raise QuotaGone('q')\n"  # noqa: E501 (a skill file's text)
        },
    )
    env = await run_skill(skills_root, "boom4")
    assert env["exception_type"] == "QuotaGone" and env["exception_family"] == "ConnectionError"
    assert env["error_type"] == "transient"


async def test_system_exit_in_process_reruns_as_cli(make_skill, skills_root):
    """Issue: 'PYTHON CLI: ... or an in-process run that raises SystemExit, runs as a subprocess instead.'"""
    make_skill(
        "sx",
        files={
            "handler.py": """
        import json, os, sys
        def execute(i):
            if os.environ.get("SKILL_INPUT") is None:
                sys.exit(2)
            return {"never": True}
        if os.environ.get("SKILL_INPUT") is not None:
            print(json.dumps({"via": "subprocess", "pid": os.getpid()}))
    """
        },
    )
    env = await run_skill(skills_root, "sx")
    assert env.get("via") == "subprocess" and env["pid"] != os.getpid()
