"""Every hook works for a third-party plugin exactly as for the built-ins; duplicates fail with both names."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from skillyard import SkillYard, hookimpl, hookspecs
from skillyard.errors import DuplicateRegistration, SkillyardError
from skillyard.plugins import pm
from support.skills import FAIL, OK_HANDLER, child_env, run_skill, yard_of

DOCS = Path(__file__).resolve().parents[1] / "docs" / "hooks.md"


def hook_names() -> list[str]:
    return [n for n in dir(hookspecs) if getattr(getattr(hookspecs, n), "skillyard_spec", None) is not None]


class EchoExecutor:
    async def run(self, skill, input, ctx, *, yard):
        return {"echoed": input, "by": "ECHO"}


async def test_register_exec_types(plugin_reg, make_skill, skills_root):
    class Plugin:
        @hookimpl
        def register_exec_types(self, register):
            register("echo", EchoExecutor())

    plugin_reg(Plugin(), "echo-plugin")
    make_skill("e", frontmatter="name: e\ndescription: d\nexec:\n  primary:\n    type: ECHO")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert yard.registries.exec_type_plugins["ECHO"] == "echo-plugin"
        env = await yard.run("e", {"x": 1})
    assert env["echoed"] == {"x": 1} and env["ok"] is True


async def test_unknown_exec_type_is_a_precise_failure(make_skill, skills_root):
    make_skill("e", frontmatter="name: e\ndescription: d\nexec:\n  primary:\n    type: FOO")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("e")
    assert env["ok"] is False and "declares exec type 'FOO'" in env["error"] and "PYTHON" in env["error"]


def test_register_exec_types_duplicates_name_both_plugins(plugin_reg):
    class Plugin:
        @hookimpl
        def register_exec_types(self, register):
            register("PYTHON", EchoExecutor())

    plugin_reg(Plugin(), "shadowing-plugin")
    with pytest.raises(DuplicateRegistration, match="'PYTHON' is registered by both") as err:
        SkillYard(include_builtin=False)
    assert "skillyard.executors.inprocess" in str(err.value) and "shadowing-plugin" in str(err.value)


async def test_register_result_processors_run_in_order(plugin_reg, make_skill, skills_root):
    class Plugin:
        @hookimpl
        def register_result_processors(self, register):
            register(20, "second", lambda env, run: {**env, "trail": env.get("trail", "") + "2"})

            async def first(env, run):
                await asyncio.sleep(0)
                return {**env, "trail": env.get("trail", "") + "1", "skill_seen": run.skill.name}

            register(10, "first", first)

    plugin_reg(Plugin(), "processors")
    make_skill("p", files={"handler.py": "async def execute(i, c):\n    return {}\n"})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("p")
    assert env["trail"] == "12" and env["skill_seen"] == "p"


def test_register_result_processors_duplicate_order(plugin_reg):
    class A:
        @hookimpl
        def register_result_processors(self, register):
            register(7, "a", lambda e, r: e)

    class B:
        @hookimpl
        def register_result_processors(self, register):
            register(7, "b", lambda e, r: e)

    plugin_reg(A(), "plugin-a")
    plugin_reg(B(), "plugin-b")
    with pytest.raises(DuplicateRegistration, match="both use order 7"):
        SkillYard(include_builtin=False)


async def test_skill_roots_rank_between_env_and_builtin(plugin_reg, make_skill, tmp_path, monkeypatch):
    plugin_root = tmp_path / "plugin_root"
    env_root = tmp_path / "env_root"
    make_skill("x", frontmatter="name: x\ndescription: from plugin", root=plugin_root)
    make_skill("y", frontmatter="name: y\ndescription: from plugin", root=plugin_root)
    make_skill("y", frontmatter="name: y\ndescription: from env", root=env_root)
    monkeypatch.setenv("SKILLYARD_SKILLS_PATH", str(env_root))

    class Plugin:
        @hookimpl
        def skill_roots(self, yard):
            return [str(plugin_root)]

    plugin_reg(Plugin(), "roots")
    yard = SkillYard(include_builtin=False)
    assert yard.skill("x").description == "from plugin" and yard.skill("x").source == "plugin"
    assert yard.skill("y").description == "from env"


async def test_extra_context_sync_and_async(plugin_reg, make_skill, skills_root):
    class Plugin:
        @hookimpl
        def extra_context(self, skill, context):
            return {"tenant": "acme", "org_id": "must-not-override"}

    class AsyncPlugin:
        @hookimpl
        def extra_context(self, skill, context):
            async def later():
                await asyncio.sleep(0)
                return {"fetched_for": skill.name, "_private": 1}

            return later()

    plugin_reg(Plugin(), "ctx-sync")
    plugin_reg(AsyncPlugin(), "ctx-async")
    make_skill(
        "c",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"tenant": ctx["tenant"], "for": ctx["fetched_for"], "org": ctx["org_id"], "p": ctx["_private"]}
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("c", context={"org_id": "o1"})
    assert (env["tenant"], env["for"], env["org"], env["p"]) == ("acme", "c", "o1", 1)


async def test_startup(plugin_reg):
    events = []

    class Plugin:
        @hookimpl
        def startup(self, yard):
            async def go():
                events.append(("startup", type(yard).__name__))

            return go

        @hookimpl
        def shutdown(self, yard):
            events.append(("shutdown", type(yard).__name__))

    plugin_reg(Plugin(), "lifecycle")
    async with SkillYard(include_builtin=False):
        assert events == [("startup", "SkillYard")]
    assert events[-1] == ("shutdown", "SkillYard")


async def test_shutdown(plugin_reg):
    closed = []

    class Plugin:
        @hookimpl
        def shutdown(self, yard):
            async def flush():
                await asyncio.sleep(0)
                closed.append(yard.database.is_open)

            return flush()

    plugin_reg(Plugin(), "shutdown-plugin")
    yard = SkillYard(include_builtin=False)
    await yard.close()  # never opened: shutdown hooks are for opened hosts only
    assert closed == []
    async with SkillYard(include_builtin=False):
        pass
    assert closed == [False]


async def test_register_channels(plugin_reg):
    class Channel:
        def __init__(self):
            self.sent = []

        async def send(self, recipient, text, attachments):
            self.sent.append((recipient["session_id"], text))

    first, second = Channel(), Channel()

    class Plugin:
        @hookimpl
        def register_channels(self, register):
            register("chat-a", first)

    class Clash:
        @hookimpl
        def register_channels(self, register):
            register("chat-a", second)

    plugin_reg(Plugin(), "channels-plugin")
    async with SkillYard(include_builtin=False) as yard:
        assert "chat-a" in yard.channels.names()
        assert await yard.channels.deliver({"channel": "chat-a", "session_id": "s"}, "hi", []) is True
        assert await yard.channels.deliver({"channel": "nowhere"}, "hi", []) is False
    assert first.sent == [("s", "hi")]
    plugin_reg(Clash(), "clash-plugin")
    with pytest.raises(DuplicateRegistration, match="channel 'chat-a' is registered by both"):
        SkillYard(include_builtin=False)


async def test_register_models(plugin_reg, tmp_path):
    """A third-party provider answers its own spec prefix, exactly as the built-in script:/openai: ones do."""
    from skillyard.agent.models import ModelError, ModelReply, model_from_spec, spec_forms, stored_spec

    class Echo:
        def __init__(self, rest):
            self.rest = rest

        async def complete(self, messages, tools, state):
            return ModelReply(text=f"{self.rest}: {messages[-1]['content']}")

    class Plugin:
        @hookimpl
        def register_models(self, register):
            register("echo", lambda rest, settings: Echo(rest), help="echo:NAME (repeats the user)", stored=str.upper)

    plugin_reg(Plugin(), "echo-models")
    model = model_from_spec("echo:bob")
    assert (await model.complete([{"role": "user", "content": "hi"}], [], {})).text == "bob: hi"
    assert stored_spec("echo:bob") == "BOB"
    assert stored_spec(f"script:{tmp_path.name}") == f"script:{Path(tmp_path.name).resolve()}"
    assert "echo:NAME (repeats the user)" in spec_forms() and "script:FILE.yaml" in spec_forms()
    with pytest.raises(ModelError, match=r"unknown model spec 'nope:x'; use .*echo:NAME"):
        model_from_spec("nope:x")

    class Clash:
        @hookimpl
        def register_models(self, register):
            register("script", lambda rest, settings: Echo(rest))

    plugin_reg(Clash(), "clash-models")
    with pytest.raises(DuplicateRegistration, match="model prefix 'script' is registered by both"):
        model_from_spec("script:x.yaml")


async def test_register_jobs(plugin_reg, db_env, tmp_path):
    """A plugin's job kind runs in the host's own worker when deferred; close() waits for it; names are unique."""
    done = tmp_path / "done.txt"

    async def write(yard, path, text):
        Path(path).write_text(f"{text} via {type(yard).__name__}", encoding="utf-8")

    class Plugin:
        @hookimpl
        def register_jobs(self, register):
            register("acme.write", write)

    plugin_reg(Plugin(), "acme-jobs")
    async with SkillYard(include_builtin=False) as yard:
        job_id = await yard.background.defer("acme.write", {"path": str(done), "text": "hello"})
        assert isinstance(job_id, int)
    assert done.read_text(encoding="utf-8") == "hello via SkillYard"  # closing the host waited for the job

    class Clash:
        @hookimpl
        def register_jobs(self, register):
            register("acme.write", write)

    plugin_reg(Clash(), "clash-jobs")
    from skillyard.plugins import load_plugins
    from skillyard.registry import collect_jobs

    clash = r"job 'acme\.write' is registered by both 'clash-jobs' and 'acme-jobs'"
    with pytest.raises(DuplicateRegistration, match=clash):
        collect_jobs(load_plugins())


def test_register_commands_cannot_replace_a_command(plugin_reg):
    from skillyard.cli import cli

    class Plugin:
        @hookimpl
        def register_commands(self, cli):
            @cli.command(name="run")
            def run():
                """Not allowed."""

    plugin_reg(Plugin(), "hijack")
    with pytest.raises(DuplicateRegistration, match="'run', which already exists"):
        pm.hook.register_commands(cli=cli)
    assert cli.commands["run"].callback.__module__.startswith("skillyard.cli")


def test_register_commands(plugin_reg):
    from skillyard.cli import cli

    class Plugin:
        @hookimpl
        def register_commands(self, cli):
            @cli.command(name="hello-plugin")
            def hello_plugin():
                """Say hi."""
                click.echo("hi from a plugin")

    plugin_reg(Plugin(), "commands")
    pm.hook.register_commands(cli=cli)
    try:
        result = CliRunner().invoke(cli, ["hello-plugin"])
        assert result.exit_code == 0 and "hi from a plugin" in result.output
        listed = CliRunner().invoke(cli, ["plugins", "--json"])
        assert '"commands"' in listed.output and "register_commands" in listed.output
    finally:
        cli.commands.pop("hello-plugin", None)


def test_register_commands_lazy_form(plugin_reg, tmp_path, monkeypatch):
    """A plugin may add a command by name and import path: --help lists it without importing its module."""

    from skillyard.cli import cli

    (tmp_path / "acme_lazy_cmds.py").write_text(
        'import click\n\n\n@click.command()\ndef hello():\n    """Say hello lazily."""\n    click.echo("lazy hi")\n',
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    class Plugin:
        @hookimpl
        def register_commands(self, cli):
            cli.add_lazy_command("acme-lazy", "acme_lazy_cmds:hello", help="Say hello lazily.")

    plugin_reg(Plugin(), "lazy-commands")
    listed = CliRunner().invoke(cli, ["--help"])
    assert listed.exit_code == 0 and "acme-lazy" in listed.output and "Say hello lazily." in listed.output
    assert "acme_lazy_cmds" not in sys.modules
    ran = CliRunner().invoke(cli, ["acme-lazy"])
    assert ran.exit_code == 0 and ran.output == "lazy hi\n"

    class Clash:
        @hookimpl
        def register_commands(self, cli):
            cli.add_lazy_command("acme-lazy", "elsewhere:cmd", help="Another.")

    plugin_reg(Clash(), "lazy-clash")
    clashed = CliRunner().invoke(cli, ["--help"])
    assert clashed.exit_code == 2 and "tried to add the command 'acme-lazy', which already exists" in clashed.output
    assert "lazy-clash" in clashed.output and "lazy-commands" in clashed.output


def test_calling_register_commands_again_after_a_lazy_command_loaded_is_harmless():
    """A direct hook call (as a plugin's own tests may make) re-adds the same lazy command without a clash."""
    from skillyard.cli import cli

    assert CliRunner().invoke(cli, ["agent", "--help"]).exit_code == 0  # loads the lazy agent group
    pm.hook.register_commands(cli=cli)
    assert CliRunner().invoke(cli, ["agent", "--help"]).exit_code == 0


def test_a_lazy_command_that_does_not_load_names_the_plugin(plugin_reg):
    from skillyard.cli import cli

    class Plugin:
        @hookimpl
        def register_commands(self, cli):
            cli.add_lazy_command("acme-missing", "no_such_module_here:cmd", help="Gone.")
            cli.add_lazy_command("acme-notcmd", "json:dumps", help="Not a command.")

    plugin_reg(Plugin(), "broken-commands")
    missing = CliRunner().invoke(cli, ["acme-missing"])
    assert missing.exit_code == 2 and "of plugin 'broken-commands' cannot be loaded from" in missing.output
    notcmd = CliRunner().invoke(cli, ["acme-notcmd"])
    assert notcmd.exit_code == 2 and "not a click command; fix the plugin" in notcmd.output
    assert "Traceback" not in missing.output + notcmd.output


def test_help_lists_every_command_without_the_host_stacks():
    """``skillyard --help`` imports no command module and none of the database, HTTP or schema stacks."""
    import sys

    code = (
        "import sys; from skillyard.cli import main; sys.argv = ['skillyard', '--help']\n"
        "try: main()\nexcept SystemExit: pass\n"
        "heavy = ['sqlalchemy', 'alembic', 'httpx', 'jsonschema', 'asyncpg', 'cryptography', 'yaml', 'pglast',\n"
        "         'skillyard.yard', 'skillyard.agent.cli']\n"
        "print('LOADED', [m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "agent" in out and "datatable" in out and "run" in out
    assert "LOADED []" in out, out


def test_load_plugins_allow_list(monkeypatch, tmp_path):
    """SKILLYARD_LOAD_PLUGINS restricts entry-point plugins; empty loads none (checked in a fresh process)."""
    import sys

    code = (
        "import os; os.environ['SKILLYARD_LOAD_PLUGINS']=''; "
        "from skillyard.plugins import load_plugins, plugin_table; load_plugins(); "
        "print(len(plugin_table(False)), len(plugin_table(True)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "0" and int(out[1]) >= 5


def test_every_hook_has_a_test_and_a_docs_heading():
    tests = Path(__file__).read_text()
    docs = DOCS.read_text() if DOCS.exists() else ""
    for name in hook_names():
        assert f"def test_{name}" in tests, f"hook {name} has no test_{name} in tests/test_hooks.py"
        import inspect

        params = ", ".join(inspect.signature(getattr(hookspecs, name)).parameters)
        assert re.search(rf"^#+ {re.escape(name)}\({re.escape(params)}\)\s*$", docs, re.M), (
            f"docs/hooks.md has no heading '{name}({params})'"
        )


def test_doctor_checks(plugin_reg, db_env):
    """A third-party plugin's checks (sync list or awaitable) appear in ``skillyard doctor``; only fail exits 1."""
    from skillyard.cli import cli

    class Plugin:
        @hookimpl
        def doctor_checks(self, yard):
            async def probe():
                await asyncio.sleep(0)
                return [
                    {"name": "acme.api", "status": "ok", "detail": f"{len(yard.entries)} skills seen", "fix": None},
                    {"name": "acme.quota", "status": "warn", "detail": "90% used", "fix": "raise the quota"},
                ]

            return probe()

    plugin_reg(Plugin(), "acme")
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "warn  acme.quota: 90% used — fix: raise the quota" in result.output.splitlines()
    assert any(line.startswith("ok    acme.api: ") for line in result.output.splitlines())

    class Failing:
        @hookimpl
        def doctor_checks(self, yard):
            return [{"name": "acme.disk", "status": "fail", "detail": "disk full", "fix": "free some space"}]

    plugin_reg(Failing(), "acme-failing")
    failed = CliRunner().invoke(cli, ["doctor", "--json"])
    assert failed.exit_code == 1, failed.output
    checks = {c["name"]: c for c in json.loads(failed.stdout)["checks"]}
    assert checks["acme.disk"] == {
        "name": "acme.disk",
        "status": "fail",
        "detail": "disk full",
        "fix": "free some space",
        "plugin": "acme-failing",
    }


async def test_plugin_exec_type(make_skill, skills_root, plugin_reg):
    """Issue: 'registering exec types (each executor is a plugin)'; hooks.md example 'register("echo",
    EchoExecutor())'."""
    from skillyard import hookimpl

    class EchoExecutor:
        async def run(self, skill, input, ctx, *, yard):
            return {"echoed": input, "skill_name": skill.name}

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("echo_probe", EchoExecutor())

    plugin_reg(P(), "probe-echo")
    make_skill("ech", frontmatter="name: ech\ndescription: d\nexec:\n  primary:\n    type: echo_probe")
    env = await run_skill(skills_root, "ech", {"a": 1})
    assert env["ok"] is True and env["echoed"] == {"a": 1} and env["skill_name"] == "ech"


async def test_plugin_exec_type_timeout_and_exception(make_skill, skills_root, plugin_reg):
    """hooks.md: 'the host normalizes it into an envelope, turns exceptions into failure envelopes and stops the call at
    the skill's wall clock'."""
    from skillyard import hookimpl

    class Slow:
        async def run(self, skill, input, ctx, *, yard):
            if input.get("raise"):
                raise ConnectionRefusedError("plugin down")
            await asyncio.sleep(30)

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("slow_probe", Slow())

    plugin_reg(P(), "probe-slow")
    make_skill(
        "slowp", frontmatter="name: slowp\ndescription: d\nexec:\n  primary:\n    type: slow_probe\n  timeout: 0.3"
    )
    env = await run_skill(skills_root, "slowp", {})
    assert env["timed_out"] is True and env["ok"] is False
    env2 = await run_skill(skills_root, "slowp", {"raise": True})
    assert env2["exception_type"] == "ConnectionRefusedError"


async def test_async_extra_context_hook(dump_skill, plugin_reg):
    """Issue: 'extra runtime_context keys ... Async hook implementations must work (await what a hook returns when it is
    awaitable).'
    hooks.md: 'Keys the context already has are never overwritten.'"""
    from skillyard import hookimpl

    class P:
        @hookimpl
        async def extra_context(self, skill, context):
            return {"tenant": "acme-" + skill.name, "channel": "hijacked", "_private": 1}

    plugin_reg(P(), "probe-ctx")
    ctx = (await run_skill(dump_skill, "dump", channel="web"))["ctx"]
    assert ctx["tenant"] == "acme-dump" and ctx["channel"] == "web"


async def test_extra_context_callable_and_not_in_subprocess_private(probe_cli, skills_root, plugin_reg, monkeypatch):
    """hooks.md: 'a dict, a callable returning one, an awaitable ... Keys starting with `_` stay in-process'."""
    from skillyard import hookimpl

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            return lambda: {"plug_value": "pv", "_plug_private": "hidden"}

    plugin_reg(P(), "probe-ctx2")
    monkeypatch.setenv("PROBE_DECLARED", "x")
    env = await run_skill(skills_root, "probe")
    ctx = json.loads(child_env(env)["SKILL_CONTEXT"])
    assert ctx["plug_value"] == "pv" and "_plug_private" not in ctx


async def test_result_processor_runs_on_top_level_not_call_skill(chain_root, plugin_reg):
    """Issue: 'result post-processors'; 'No post-processing on call_skill results.'"""
    from skillyard import hookimpl

    async def stamp(envelope, run):
        return {**envelope, "stamped": True}

    class P:
        @hookimpl
        def register_result_processors(self, register):
            register(987, "probe-stamp", stamp)

    plugin_reg(P(), "probe-proc")
    env = await run_skill(chain_root, "caller", {"target": "callee"})
    assert env["stamped"] is True and "stamped" not in env["inner"]


async def test_startup_shutdown_async_hooks(skills_root, plugin_reg):
    """hooks.md: 'startup(yard) Called once when a `SkillYard` is opened ... May return an awaitable or a callable.'"""
    from skillyard import hookimpl

    calls: list[str] = []

    class P:
        @hookimpl
        async def startup(self, yard):
            calls.append("start")

        @hookimpl
        def shutdown(self, yard):
            async def stop():
                calls.append("stop")

            return stop()

    plugin_reg(P(), "probe-life")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False):
        assert calls == ["start"]
    assert calls == ["start", "stop"]


async def test_startup_and_shutdown_once_per_open_close(echo_root, plugin_reg):
    """hooks.md: 'startup(yard) Called once when a `SkillYard` is opened'; 'shutdown(yard) Called once when an opened
    `SkillYard` is closed'."""
    calls: list[str] = []

    class P:
        @hookimpl
        def startup(self, yard):
            calls.append("start")

        @hookimpl
        def shutdown(self, yard):
            calls.append("stop")

    plugin_reg(P(), "probe2-life")
    yard = yard_of(echo_root)
    await yard.open()
    await yard.close()
    await yard.close()
    assert calls == ["start", "stop"]


async def test_shutdown_not_called_for_never_opened(echo_root, plugin_reg):
    """hooks.md: 'shutdown(yard) Called once when an opened `SkillYard` is closed'."""
    calls: list[str] = []

    class P:
        @hookimpl
        def shutdown(self, yard):
            calls.append("stop")

    plugin_reg(P(), "probe2-noopen")
    yard = yard_of(echo_root)
    await yard.close()
    assert calls == []


async def test_startup_callable_is_called(echo_root, plugin_reg):
    """hooks.md: 'May return an awaitable or a callable' and the `warm` example returning an async function."""
    seen: list[str] = []

    class P:
        @hookimpl
        def startup(self, yard):
            async def warm():
                yard.probe_client = "client"
                seen.append("warm")

            return warm

    plugin_reg(P(), "probe2-warm")
    async with yard_of(echo_root) as yard:
        assert seen == ["warm"] and yard.probe_client == "client"


async def test_shutdown_returning_none_ok(echo_root, plugin_reg):
    """hooks.md shutdown example: `return client.aclose() if client else None`."""

    class P:
        @hookimpl
        def shutdown(self, yard):
            return None

    plugin_reg(P(), "probe2-none")
    async with yard_of(echo_root) as yard:
        env = await yard.run("echo", {})
    assert env["ok"] is True


async def test_exec_type_name_case_insensitive(make_skill, skills_root, plugin_reg):
    """hooks.md: '`name` is stored upper-cased and is what skills declare in `exec.primary.type`'."""

    class Ex:
        async def run(self, skill, input, ctx, *, yard):
            return {"by": "probe"}

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("probe_Mixed", Ex())

    plugin_reg(P(), "probe2-exec")
    make_skill("mx", frontmatter="name: mx\ndescription: m\nexec:\n  primary: {type: Probe_MIXED}")
    async with yard_of(skills_root) as yard:
        env = await yard.run("mx", {})
    assert env["ok"] is True and env["by"] == "probe"


@pytest.mark.parametrize(("ret", "expected"), [(None, {}), ("text", {"result": "text"}), ([1, 2], {"result": [1, 2]})])
async def test_executor_return_values_normalized(make_skill, skills_root, plugin_reg, ret, expected):
    """hooks.md: 'Return anything: the host normalizes it into an envelope'; issue: 'non-dict results wrapped as
    `{"result": …}`'."""

    class Ex:
        async def run(self, skill, input, ctx, *, yard):
            return ret

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("PROBE_RET", Ex())

    plugin_reg(P(), "probe2-ret")
    make_skill("rv", frontmatter="name: rv\ndescription: r\nexec:\n  primary: {type: PROBE_RET}")
    async with yard_of(skills_root) as yard:
        env = await yard.run("rv", {})
    assert env["ok"] is True
    for k, v in expected.items():
        assert env[k] == v


async def test_executor_gets_validated_input_and_context(make_skill, skills_root, plugin_reg):
    """hooks.md: '`input` the validated input, `ctx` the `runtime_context`'; credential parameters are 'removed from
    the caller's input, and filled in from the role's configs'."""
    seen: dict[str, Any] = {}

    class Ex:
        async def run(self, skill, input, ctx, *, yard):
            seen.update(input=dict(input), ctx_keys=set(ctx), yard=yard, skill=skill.name)
            return {"ok": True}

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("PROBE_SEE", Ex())

    plugin_reg(P(), "probe2-see")
    make_skill(
        "see",
        frontmatter="name: see\ndescription: s\nexec:\n  primary: {type: PROBE_SEE}",
        files={
            "schema.json": json.dumps(
                {"type": "object", "properties": {"q": {"type": "string"}, "api_token": {"type": "string"}}}
            )
        },
    )
    async with yard_of(skills_root) as yard:
        await yard.run("see", {"q": "x", "api_token": "FROM-MODEL"}, context={"skill_configs": {"api_token": "CFG"}})
        assert seen["yard"] is yard
    assert seen["input"].get("q") == "x" and seen["input"].get("api_token") in (None, "CFG")
    assert {"role_id", "session_id", "workspace_dir", "actor_name"} <= seen["ctx_keys"]


async def test_executor_registered_as_sync_hook_impl_module(make_skill, skills_root, plugin_reg):
    """hooks.md: plugins are 'a module (or object) with functions decorated with `skillyard.hookimpl`'."""
    import types

    mod = types.ModuleType("probe2_mod_plugin")

    class Ex:
        async def run(self, skill, input, ctx, *, yard):
            return {"mod": True}

    @hookimpl
    def register_exec_types(register):
        register("PROBE_MOD", Ex())

    mod.register_exec_types = register_exec_types  # type: ignore[attr-defined]
    plugin_reg(mod, "probe2-mod")
    make_skill("md", frontmatter="name: md\ndescription: m\nexec:\n  primary: {type: PROBE_MOD}")
    async with yard_of(skills_root) as yard:
        env = await yard.run("md", {})
    assert env["mod"] is True


async def test_result_processors_ascending_order_sync_and_async(echo_root, plugin_reg):
    """hooks.md: '`processor(envelope, run)` may be sync or async'; 'Processors run in ascending `order`'."""
    trail: list[str] = []

    def late(envelope, run):
        trail.append("late")
        return {**envelope, "late": True}

    async def early(envelope, run):
        trail.append("early")
        return {**envelope, "early": run.skill.name, "depth": run.depth}

    class P:
        @hookimpl
        def register_result_processors(self, register):
            register(9901, "probe-late", late)
            register(9801, "probe-early", early)

    plugin_reg(P(), "probe2-proc")
    async with yard_of(echo_root) as yard:
        env = await yard.run("echo", {})
    assert trail == ["early", "late"] and env["late"] is True and env["early"] == "echo" and env["depth"] == 0


async def test_result_processor_not_run_on_refused_runs(echo_root, plugin_reg):
    """hooks.md: 'Processors run ... on runs that actually executed (not on runs refused by gating, input validation
    or the failure budget)'."""
    trail: list[str] = []

    def proc(envelope, run):
        trail.append(run.skill.name)
        return envelope

    class P:
        @hookimpl
        def register_result_processors(self, register):
            register(9902, "probe-refused", proc)

    plugin_reg(P(), "probe2-refused")
    async with yard_of(echo_root) as yard:
        await yard.run("notes__add", {})
        turn = yard.new_turn(session_id="pr")
        await yard.run("ret", {"ret": FAIL, "n": 1}, turn=turn)
        await yard.run("ret", {"ret": FAIL, "n": 2}, turn=turn)
        await yard.run("ret", {"n": 3}, turn=turn)
    assert trail == ["ret", "ret"]


async def test_result_processor_run_object_fields(echo_root, plugin_reg):
    """hooks.md: '`run` is a `skillyard.invoke.pipeline.Run` with `skill`, `subcommand`, `input`, `context`, `turn`,
    `depth` and `started` (epoch seconds)'."""
    seen: dict[str, Any] = {}

    def proc(envelope, run):
        seen.update(
            skill=run.skill.name,
            sub=run.subcommand,
            input=dict(run.input),
            ctx=run.context["session_id"],
            turn=run.turn,
            depth=run.depth,
            started=run.started,
        )
        return envelope

    class P:
        @hookimpl
        def register_result_processors(self, register):
            register(9903, "probe-fields", proc)

    plugin_reg(P(), "probe2-fields")
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="rf")
        await yard.run("notes__add", {"text": "hi"}, turn=turn)
    assert seen["skill"] == "notes" and seen["sub"] == "add" and seen["input"]["text"] == "hi"
    assert seen["ctx"] == "rf" and seen["turn"] is turn and seen["depth"] == 0
    assert isinstance(seen["started"], float) and seen["started"] > 1e9


async def test_result_processor_raising_is_not_a_traceback(echo_root, plugin_reg):
    """README: '`yard.run` ... always returns an envelope ... a skill's failures never raise' — a faulty processor
    plugin must not turn a run into an uncaught exception."""

    def bad(envelope, run):
        raise RuntimeError("processor broke")

    class P:
        @hookimpl
        def register_result_processors(self, register):
            register(9904, "probe-bad", bad)

    plugin_reg(P(), "probe2-badproc")
    async with yard_of(echo_root) as yard:
        try:
            env = await yard.run("echo", {})
        except SkillyardError:
            return
    assert isinstance(env, dict) and "ok" in env


async def test_extra_context_sync_dict_and_no_overwrite(echo_root, plugin_reg):
    """hooks.md: 'Returns extra `runtime_context` keys ...: a dict ... Keys the context already has are never
    overwritten.'"""

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            return {"tenant": "acme", "org_id": "EVIL", "channel": "EVIL", "actor_name": "EVIL"}

    plugin_reg(P(), "probe2-ec")
    async with yard_of(echo_root) as yard:
        ctx = (await yard.run("dump", {}, context={"org_id": "o1", "channel": "web"}))["ctx"]
    assert ctx["tenant"] == "acme" and ctx["org_id"] == "o1" and ctx["channel"] == "web"
    assert ctx["actor_name"] == ""


async def test_extra_context_none_and_callable(echo_root, plugin_reg):
    """hooks.md: 'a dict, a callable returning one, an awaitable, or `None`'."""

    class A:
        @hookimpl
        def extra_context(self, skill, context):
            return None

    class B:
        @hookimpl
        def extra_context(self, skill, context):
            return lambda: {"from_callable": skill.name}

    plugin_reg(A(), "probe2-ecn")
    plugin_reg(B(), "probe2-ecc")
    async with yard_of(echo_root) as yard:
        ctx = (await yard.run("dump", {}))["ctx"]
    assert ctx["from_callable"] == "dump"


async def test_extra_context_async_def_impl(echo_root, plugin_reg):
    """Issue: 'Async hook implementations must work (await what a hook returns when it is awaitable).'"""

    class P:
        @hookimpl
        async def extra_context(self, skill, context):
            await asyncio.sleep(0)
            return {"async_key": context["session_id"] or "none"}

    plugin_reg(P(), "probe2-eca")
    async with yard_of(echo_root) as yard:
        ctx = (await yard.run("dump", {}, context={"session_id": "aa"}))["ctx"]
    assert ctx["async_key"] == "aa"


async def test_extra_context_for_call_skill_runs(echo_root, plugin_reg):
    """hooks.md: 'Called for every run, `call_skill` runs included'."""
    names: list[str] = []

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            names.append(skill.name)
            return {"hooked": True}

    plugin_reg(P(), "probe2-eccs")
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "dump", "input": {}})
    assert names == ["caller", "dump"] and env["inner"]["ctx"]["hooked"] is True


async def test_extra_context_sees_configs(echo_root, plugin_reg):
    """hooks.md: 'Called ... after the platform fields and configs are in place.'"""
    seen: dict[str, Any] = {}

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            seen["units"] = context.get("units")
            seen["role"] = context.get("role_id")
            return None

    plugin_reg(P(), "probe2-eccfg")
    async with yard_of(echo_root) as yard:
        await yard.run("dump", {}, context={"role_id": "r9", "skill_configs": {"units": "metric"}})
    assert seen == {"units": "metric", "role": "r9"}


async def test_extra_context_raising_gives_envelope(echo_root, plugin_reg):
    """README: '`yard.run` ... always returns an envelope'. A raising extra_context hook must not escape as a bare
    exception."""

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            raise RuntimeError("hook broke")

    plugin_reg(P(), "probe2-ecr")
    async with yard_of(echo_root) as yard:
        try:
            env = await yard.run("echo", {})
        except SkillyardError:
            return
    assert isinstance(env, dict) and "ok" in env


async def test_extra_context_non_json_value_subprocess_ok(make_skill, skills_root, plugin_reg):
    """hooks.md: 'values that are not JSON-serializable are also left out of `SKILL_CONTEXT`'."""
    make_skill(
        "sub_ctx",
        frontmatter="name: sub_ctx\ndescription: s\nexec:\n  config: run.sh",
        files={"run.sh": 'printf "%s" "$SKILL_CONTEXT"\n'},
    )

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            return {"opaque": object(), "plain": "P1", "_private": "HIDDEN"}

    plugin_reg(P(), "probe2-ecsub")
    async with yard_of(skills_root) as yard:
        env = await yard.run("sub_ctx", {})
    assert env["ok"] is True, env
    assert env["plain"] == "P1" and "opaque" not in env and "_private" not in env


async def test_skill_roots_none_missing_and_source(make_skill, tmp_path, skills_root, plugin_reg):
    """hooks.md: 'Returns a list of extra folders ..., or `None`'; 'Folders that do not exist are ignored'; 'their
    skills get `source: plugin` unless they declare one'."""
    proot = tmp_path / "proot"
    make_skill("plugged", files={"handler.py": OK_HANDLER}, root=proot)

    class A:
        @hookimpl
        def skill_roots(self, yard):
            return None

    class B:
        @hookimpl
        def skill_roots(self, yard):
            return [str(tmp_path / "nope"), str(proot)]

    plugin_reg(A(), "probe2-sra")
    plugin_reg(B(), "probe2-srb")
    async with yard_of(skills_root) as yard:
        env = await yard.run("plugged", {})
        skill = yard.skill("plugged")
    assert env["ok"] is True and skill.source == "plugin"


async def test_skill_roots_accept_path_objects(make_skill, tmp_path, skills_root, plugin_reg):
    """hooks.md example returns `str(Path(...))`; a plugin returning a `Path` must not crash the host."""
    proot = tmp_path / "proot2"
    make_skill("plugged2", files={"handler.py": OK_HANDLER}, root=proot)

    class P:
        @hookimpl
        def skill_roots(self, yard):
            return [proot]

    plugin_reg(P(), "probe2-srp")
    try:
        yard = yard_of(skills_root)
    except SkillyardError:
        return
    async with yard:
        env = await yard.run("plugged2", {})
    assert env["ok"] is True


def test_register_commands_plugin_command(plugin_reg, capsys):
    """hooks.md: 'Adds commands to the `skillyard` CLI. `cli` is the root `click.Group`; called before click parses the
    command line.'"""
    import click

    class P:
        @hookimpl
        def register_commands(self, cli):
            @cli.command(name="probe2-hello")
            @click.argument("who", default="world")
            def hello(who):
                click.echo(f"hello {who}")

    plugin_reg(P(), "probe2-cmd")
    from skillyard.cli import cli, main

    try:
        with pytest.raises(SystemExit) as info, pytest.MonkeyPatch.context() as mp:
            mp.setattr("sys.argv", ["skillyard", "probe2-hello", "Ada"])
            main()
        assert info.value.code in (0, None)
    finally:
        cli.commands.pop("probe2-hello", None)
    assert "hello Ada" in capsys.readouterr().out
