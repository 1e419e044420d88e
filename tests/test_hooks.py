"""Every hook works for a third-party plugin exactly as for the built-ins; duplicates fail with both names."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from skillyard import SkillYard, hookimpl, hookspecs
from skillyard.errors import DuplicateRegistration
from skillyard.plugins import pm

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
        assert yard.channels.names() == ["chat-a"]
        assert await yard.channels.deliver({"channel": "chat-a", "session_id": "s"}, "hi", []) is True
        assert await yard.channels.deliver({"channel": "nowhere"}, "hi", []) is False
    assert first.sent == [("s", "hi")]
    plugin_reg(Clash(), "clash-plugin")
    with pytest.raises(DuplicateRegistration, match="channel 'chat-a' is registered by both"):
        SkillYard(include_builtin=False)


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
    import sys

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
    import subprocess
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
    import subprocess
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
