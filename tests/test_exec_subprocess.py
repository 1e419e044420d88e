"""Subprocess exec types end to end: real processes for PYTHON CLI, SHELL, INLINE_SHELL, NODE, RUBY and GO."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.invoke.pipeline import _wall_clock
from skillyard.settings import Settings
from support.skills import inline_shell_skill, run_skill


def needs(binary: str) -> pytest.MarkDecorator:
    """Skip on a developer machine without the interpreter; CI installs it, so there it must run."""
    missing = shutil.which(binary) is None and not os.environ.get("CI")
    return pytest.mark.skipif(missing, reason=f"{binary} not installed")


# --- exec type from the frontmatter -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("handler.py", "PYTHON"),
        ("run.sh", "SHELL"),
        ("main.js", "NODE"),
        ("main.mjs", "NODE"),
        ("main.rb", "RUBY"),
        ("main.go", "GO"),
        ("api.toml", "HTTP"),
    ],
)
def test_exec_type_from_config_extension(make_skill, skills_root, config, expected):
    make_skill(
        "typed",
        f"name: typed\ndescription: d\nexec: {{config: {config}}}",
        files={config: "def execute():\n    return {}\n" if config.endswith(".py") else "x\n"},
    )
    skill = SkillYard(skills_dirs=[skills_root], include_builtin=False).skill("typed")
    assert skill.exec.type == expected
    assert skill.exec.config == (skills_root / "typed" / config).resolve()


def test_primary_type_beats_the_extension(make_skill, skills_root):
    make_skill(
        "declared",
        "name: declared\ndescription: d\nexec: {config: tool.txt, primary: {type: shell}, timeout: 7}",
        files={"tool.txt": "echo hi\n"},
    )
    skill = SkillYard(skills_dirs=[skills_root], include_builtin=False).skill("declared")
    assert (skill.exec.type, skill.exec.timeout) == ("SHELL", 7.0)


@pytest.mark.parametrize("exec_type", ["BROWSER", "MCP"])
async def test_browser_and_mcp_answer_not_supported_yet(make_skill, skills_root, exec_type):
    make_skill("later", f"name: later\ndescription: d\nexec: {{primary: {{type: {exec_type}}}}}")
    env = await run_skill(skills_root, "later", {"url": "https://example.org"})
    assert env["ok"] is False
    assert f"exec type {exec_type} is not supported yet" in env["error"]
    assert env["error_type"] == "config" and env["non_retriable"] is True


# --- every language, end to end -----------------------------------------------------------------------------

INPUT = {"name": "Ada Lovelace", "n": 3, "loud": True, "quiet": False, "tags": ["a", "b c"], "opts": {"k": [1, 2]}}
ARGV = ["--name", "Ada Lovelace", "--n", "3", "--loud", "--tags", "a", "--tags", "b c", "--opts", '{"k": [1, 2]}']

SHELL_SCRIPT = r"""
out=""
for a in "$@"; do
  a=${a//\\/\\\\}; a=${a//\"/\\\"}
  out="$out${out:+,}\"$a\""
done
echo "a log line on stderr" >&2
printf '{"argv": [%s], "input": %s, "cwd": "%s", "context": %s}\n' "$out" "$SKILL_INPUT" "$PWD" "$SKILL_CONTEXT"
"""
NODE_SCRIPT = """
console.log(JSON.stringify({argv: process.argv.slice(2), input: JSON.parse(process.env.SKILL_INPUT),
  cwd: process.cwd(), context: JSON.parse(process.env.SKILL_CONTEXT)}));
"""
RUBY_SCRIPT = """
require 'json'
puts JSON.generate({argv: ARGV, input: JSON.parse(ENV['SKILL_INPUT']), cwd: Dir.pwd,
                    context: JSON.parse(ENV['SKILL_CONTEXT'])})
"""
GO_PROGRAM = """
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	var input, ctx interface{}
	json.Unmarshal([]byte(os.Getenv("SKILL_INPUT")), &input)
	json.Unmarshal([]byte(os.Getenv("SKILL_CONTEXT")), &ctx)
	cwd, _ := os.Getwd()
	out, _ := json.Marshal(map[string]interface{}{"argv": os.Args[1:], "input": input, "cwd": cwd, "context": ctx})
	fmt.Println(string(out))
}
"""
PYTHON_CLI = """
import argparse
import json
import os


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name")
    parser.add_argument("--n", type=int)
    parser.add_argument("--loud", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--tags", action="append")
    parser.add_argument("--opts", type=json.loads)
    args = parser.parse_args()
    import sys
    print(json.dumps({"argv": sys.argv[1:], "parsed": vars(args), "as_main": __name__ == "__main__",
                      "pid": os.getpid(), "input": json.loads(os.environ["SKILL_INPUT"]), "cwd": os.getcwd(),
                      "context": json.loads(os.environ["SKILL_CONTEXT"])}))


if __name__ == "__main__":
    main()
"""

LANGUAGES = {
    "python_cli": ("exec: {config: cli.py}", {"cli.py": PYTHON_CLI}),
    "shell": ("exec: {config: run.sh}", {"run.sh": SHELL_SCRIPT}),
    "node_js": ("exec: {config: main.js}", {"main.js": NODE_SCRIPT}),
    "node_mjs": ("exec: {config: main.mjs}", {"main.mjs": NODE_SCRIPT}),
    "ruby": ("exec: {config: main.rb}", {"main.rb": RUBY_SCRIPT}),
    "go": ("exec: {config: main.go, timeout: 50}", {"main.go": GO_PROGRAM}),
}


@pytest.mark.parametrize(
    "lang",
    [
        pytest.param(k, marks=needs({"node_js": "node", "node_mjs": "node", "ruby": "ruby", "go": "go"}.get(k, "bash")))
        for k in LANGUAGES
    ],
)
async def test_language_end_to_end(make_skill, skills_root, home, lang):
    frontmatter, files = LANGUAGES[lang]
    make_skill(lang, f"name: {lang}\ndescription: d\n{frontmatter}", files=files)
    env = await run_skill(skills_root, lang, INPUT, session_id="lang-run", org_name="Acme", _private="hidden")
    assert env["ok"] is True, env
    assert env["argv"] == ARGV
    assert env["input"] == INPUT
    workspace = home / "workspaces" / "lang-run"
    assert Path(env["cwd"]).resolve() == workspace.resolve()
    ctx = env["context"]
    assert ctx["session_id"] == "lang-run" and ctx["org_name"] == "Acme"
    assert ctx["workspace_dir"] == str(workspace)
    for hidden in ("_private", "_call_depth", "db", "db_factory", "call_skill", "abort_signal"):
        assert hidden not in ctx
    if lang == "python_cli":
        assert env["as_main"] is True and env["pid"] != os.getpid()
        assert env["parsed"] == {
            "name": "Ada Lovelace",
            "n": 3,
            "loud": True,
            "quiet": False,
            "tags": ["a", "b c"],
            "opts": {"k": [1, 2]},
        }


async def test_platform_keys_of_the_input_are_never_flags(make_skill, skills_root, home):
    """Keys starting with _ are the platform's (§4.3): an argparse CLI would refuse `--_meta` as an unrecognized
    argument, so they are never flags; `_subcommand` is the subcommand."""
    make_skill("strict_cli", "name: strict_cli\ndescription: d\nexec: {config: cli.py}", files={"cli.py": PYTHON_CLI})
    env = await run_skill(skills_root, "strict_cli", {"name": "x", "_meta": {"trace": 1}, "_note": "n"})
    assert env["ok"] is True, env
    assert env["argv"] == ["--name", "x"] and env["parsed"]["name"] == "x"


async def test_inline_shell_gets_argv_and_input(make_skill, skills_root):
    make_skill(
        "inline",
        """
name: inline
description: d
exec:
  primary:
    type: INLINE_SHELL
    command: |
      printf '{"argc": %s, "first": "%s", "second": "%s", "input": %s, "zero": "%s"}' "$#" "$1" "$2" "$SKILL_INPUT" "$0"
""",
    )
    env = await run_skill(skills_root, "inline", {"who": "Ada Lovelace"})
    assert env["ok"] is True, env
    assert env["argc"] == 2 and env["first"] == "--who" and env["second"] == "Ada Lovelace"
    assert env["input"] == {"who": "Ada Lovelace"}
    assert env["zero"] == "inline"


async def test_cwd_is_the_given_workspace(make_skill, skills_root, tmp_path):
    make_skill("where", "name: where\ndescription: d\nexec: {primary: {type: INLINE_SHELL, command: pwd}}")
    workspace = tmp_path / "ws"
    env = await run_skill(skills_root, "where", workspace_dir=str(workspace))
    assert Path(env["output"].strip()).resolve() == workspace.resolve()


# --- stdout, stderr and exit codes --------------------------------------------------------------------------


async def test_stdout_whole_json_document(make_skill, skills_root):
    inline_shell_skill(make_skill, "whole", """printf '{\\n  "a": 1,\\n  "b": [1, 2]\\n}\\n'""")
    env = await run_skill(skills_root, "whole")
    assert env == {"a": 1, "b": [1, 2], "ok": True, "success": True}


async def test_stdout_last_line_json(make_skill, skills_root):
    inline_shell_skill(
        make_skill,
        "lastline",
        """
echo "starting"
echo "{not json"
echo '{"answer": 42}'
""",
    )
    env = await run_skill(skills_root, "lastline")
    assert env == {"answer": 42, "ok": True, "success": True}


async def test_stdout_media_path_line(make_skill, skills_root, tmp_path):
    inline_shell_skill(
        make_skill,
        "chart",
        """
printf 'PNG' > chart.png
echo "rendered the chart"
echo chart.png
""",
    )
    workspace = tmp_path / "ws"
    env = await run_skill(skills_root, "chart", workspace_dir=str(workspace))
    assert env["ok"] is True
    assert env["local_path"] == str((workspace / "chart.png").resolve())
    assert env["media"] == "image" and env["filename"] == "chart.png"


async def test_stdout_plain_text_and_stderr_to_the_log(make_skill, skills_root, caplog):
    inline_shell_skill(
        make_skill,
        "plain",
        """
echo "progress: half way" >&2
echo "hello world"
echo "second line"
""",
    )
    with caplog.at_level(logging.INFO, logger="skillyard.subprocess"):
        env = await run_skill(skills_root, "plain")
    assert env == {"output": "hello world\nsecond line\n", "ok": True, "success": True}
    assert "progress: half way" in caplog.text


async def test_nonzero_exit_is_a_technical_failure(make_skill, skills_root):
    inline_shell_skill(
        make_skill,
        "broken",
        """
echo '{"partial": true}'
echo "cannot open database: permission denied" >&2
exit 3
""",
    )
    env = await run_skill(skills_root, "broken")
    assert env["ok"] is False and env["success"] is False
    assert env["exit_code"] == 3
    assert "cannot open database: permission denied" in env["stderr_tail"]
    assert "exited with code 3" in env["error"] and "permission denied" in env["error"]
    assert "partial" not in env


# --- wall clock ---------------------------------------------------------------------------------------------


def test_default_subprocess_timeout_is_60s_and_exec_timeout_overrides(make_skill, skills_root, monkeypatch):
    monkeypatch.delenv("SKILLYARD_SUBPROCESS_TIMEOUT", raising=False)
    for name, timeout in (("slow_default", ""), ("slow_set", ", timeout: 2.5")):
        make_skill(name, f"name: {name}\ndescription: d\nexec: {{config: run.sh{timeout}}}", files={"run.sh": "true\n"})
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert Settings.from_env().subprocess_timeout == 60.0
    assert _wall_clock(yard, yard.skill("slow_default")) == 60.0
    assert _wall_clock(yard, yard.skill("slow_set")) == 2.5


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its (re)parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_abort_signal_set_during_the_run_kills_the_process_group(make_skill, skills_root, tmp_path):
    """A subprocess cannot see the caller's Event: the platform kills its group when it is set, children too."""
    make_skill(
        "waits",
        "name: waits\ndescription: d\nexec: {config: run.sh, timeout: 30}",
        files={"run.sh": "sleep 30 > /dev/null 2>&1 &\necho $! > child.pid\nsleep 30\ntouch finished\n"},
    )
    workspace = tmp_path / "ws"
    stop = asyncio.Event()

    async def press_stop() -> None:
        while not (workspace / "child.pid").exists():
            await asyncio.sleep(0.02)
        stop.set()

    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        presser = asyncio.create_task(press_stop())
        env = await yard.run("waits", context={"workspace_dir": str(workspace), "abort_signal": stop})
        await presser
    pid = int((workspace / "child.pid").read_text())
    try:
        assert env["ok"] is False and env["aborted"] is True and "abort_signal" in env["error"], env
        assert not (workspace / "finished").exists()
        deadline = time.monotonic() + 3
        while _alive(pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not _alive(pid), "the background child outlived the abort"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_background_children_end_with_the_skill(make_skill, skills_root, tmp_path):
    """What a skill leaves running goes when its process exits: a child keeping the output pipe does not hold the
    run until the wall clock, and a child with its own output does not outlive the run."""
    make_skill(
        "leaves",
        "name: leaves\ndescription: d\nexec: {config: run.sh, timeout: 30}",
        files={
            "run.sh": "sleep 30 &\necho $! > kept.pid\nsleep 30 > /dev/null 2>&1 &\necho $! > quiet.pid\n"
            "echo '{\"ok\": true}'\n"
        },
    )
    workspace = tmp_path / "ws"
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        started = time.monotonic()
        env = await yard.run("leaves", context={"workspace_dir": str(workspace)})
        took = time.monotonic() - started
    pids = [int((workspace / name).read_text()) for name in ("kept.pid", "quiet.pid")]
    try:
        assert env["ok"] is True, env
        assert took < 20, f"the run waited for a background child ({took:.1f} s)"
        deadline = time.monotonic() + 3
        while any(map(_alive, pids)) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not any(map(_alive, pids)), "a background child outlived the run"
    finally:
        for pid in filter(_alive, pids):
            os.kill(pid, signal.SIGKILL)


@needs("go")
async def test_go_failure_reports_the_program_exit_code(make_skill, skills_root, home):
    """`go run` itself exits 1 whatever the program returned and prints `exit status N`: the envelope carries the
    program's code and its own last stderr line."""
    program = (
        'package main\n\nimport (\n\t"fmt"\n\t"os"\n)\n\nfunc main() {\n'
        '\tfmt.Fprintln(os.Stderr, "no such customer")\n\tos.Exit(3)\n}\n'
    )
    make_skill(
        "gofail", "name: gofail\ndescription: d\nexec: {config: main.go, timeout: 50}", files={"main.go": program}
    )
    env = await run_skill(skills_root, "gofail", {})
    assert env["ok"] is False and env["exit_code"] == 3, env
    assert env["error"].endswith("exited with code 3: no such customer"), env
    assert "exit status" not in env["stderr_tail"], env


async def test_input_too_large_for_a_process_is_a_recoverable_failure(make_skill, skills_root):
    """Input reaches a subprocess as argv and SKILL_INPUT, and the system caps each string (128 KiB on Linux): the
    failure says so and what to do instead, and is recoverable (the same input fails every time)."""
    make_skill("big", "name: big\ndescription: d\nexec: {config: run.sh}", files={"run.sh": "echo '{}'\n"})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("big", {"text": "x" * 300_000})
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert "too large" in env["error"] and "file in the workspace" in env["error"], env


async def test_abort_signal_left_unset_changes_nothing(make_skill, skills_root):
    make_skill(
        "quick", "name: quick\ndescription: d\nexec: {config: run.sh}", files={"run.sh": "echo '{\"ok\": true}'\n"}
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("quick", context={"abort_signal": asyncio.Event()})
    assert env["ok"] is True and "aborted" not in env


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_timeout_kills_the_whole_process_group(make_skill, skills_root, tmp_path):
    make_skill(
        "hangs",
        "name: hangs\ndescription: d\nexec: {config: run.sh, timeout: 1}",
        files={
            "run.sh": """
        sleep 30 > /dev/null 2>&1 &
        echo $! > child.pid
        sleep 30
    """
        },
    )
    workspace = tmp_path / "ws"
    started = time.monotonic()
    env = await run_skill(skills_root, "hangs", workspace_dir=str(workspace))
    elapsed = time.monotonic() - started
    pid = int((workspace / "child.pid").read_text())
    try:
        assert env["ok"] is False and env["timed_out"] is True
        assert elapsed < 10
        deadline = time.monotonic() + 3
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the background child outlived the timeout"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


# --- interpreters and environment ---------------------------------------------------------------------------


@pytest.mark.parametrize(("config", "binary"), [("main.go", "go"), ("main.js", "node"), ("main.rb", "ruby")])
async def test_missing_interpreter_is_a_config_failure(make_skill, skills_root, tmp_path, monkeypatch, config, binary):
    make_skill("needs_bin", f"name: needs_bin\ndescription: d\nexec: {{config: {config}}}", files={config: "x\n"})
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    env = await run_skill(skills_root, "needs_bin")
    assert env["ok"] is False
    assert env["error_type"] == "config" and env["non_retriable"] is True
    assert repr(binary) in env["error"] and "not on PATH" in env["error"]
    assert env["missing_bins"] == [binary]


async def test_missing_interpreter_for_declared_type(make_skill, skills_root, tmp_path, monkeypatch):
    make_skill(
        "rb_declared",
        "name: rb_declared\ndescription: d\nexec: {config: tool, primary: {type: RUBY}}",
        files={"tool": "puts 1\n"},
    )
    monkeypatch.setenv("PATH", str(tmp_path))
    env = await run_skill(skills_root, "rb_declared")
    assert env["ok"] is False and env["missing_bins"] == ["ruby"]


@needs("go")
async def test_go_runs_without_home(make_skill, skills_root, tmp_path, monkeypatch):
    """`go run` needs a build cache: GOCACHE passes through, and without HOME or GOCACHE one is provided."""
    make_skill(
        "go_nohome",
        "name: go_nohome\ndescription: d\nexec: {config: main.go, timeout: 50}",
        files={"main.go": GO_PROGRAM},
    )
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("GOCACHE", raising=False)
    env = await run_skill(skills_root, "go_nohome", {"x": 1})
    assert env["ok"] is True, env
    assert env["input"] == {"x": 1}
    cache = tmp_path / "gocache"
    monkeypatch.setenv("GOCACHE", str(cache))
    env = await run_skill(skills_root, "go_nohome", {"x": 2})
    assert env["ok"] is True, env
    assert any(cache.iterdir()), "GOCACHE from the host was not used"


ENV_DUMP = """
import argparse
import json
import os

if __name__ == "__main__":
    argparse.ArgumentParser().parse_known_args()
    print(json.dumps({"env": dict(os.environ)}))
"""
CREDENTIAL_SKILL = """
name: creds
description: d
exec: {config: dump.py}
metadata:
  openclaw:
    primaryEnv: SERVICE_PIN
    requires:
      env: [DEPLOY_TOKEN]
"""
#: Python itself may add LC_CTYPE (PEP 538 locale coercion) when LANG is unset or C.
BASE = {"PATH", "HOME", "LANG", "TMPDIR", "SKILL_INPUT", "SKILL_CONTEXT", "LC_CTYPE"}


async def test_child_environment_is_minimal_plus_declared_credentials(make_skill, skills_root, monkeypatch):
    make_skill("creds", CREDENTIAL_SKILL, files={"dump.py": ENV_DUMP})
    monkeypatch.setenv("SKILLYARD_TEST_UNDECLARED", "leak-me-not")
    monkeypatch.setenv("DEPLOY_TOKEN", "token-from-host")
    monkeypatch.delenv("SERVICE_PIN", raising=False)
    env = await run_skill(
        skills_root,
        "creds",
        {"q": 1},
        skill_args={"SERVICE_PIN": "pin-from-configs", "api_token": "undeclared-secret", "region": "eu"},
    )
    assert env["ok"] is True, env
    child = env["env"]
    assert set(child) <= BASE | {"DEPLOY_TOKEN", "SERVICE_PIN"}, set(child) - BASE
    assert "SKILLYARD_TEST_UNDECLARED" not in child
    assert child["DEPLOY_TOKEN"] == "token-from-host"
    assert child["SERVICE_PIN"] == "pin-from-configs"
    assert child["PATH"] == os.environ["PATH"]
    assert json.loads(child["SKILL_INPUT"]) == {"q": 1}
    context_text = child["SKILL_CONTEXT"]
    for secret in ("token-from-host", "pin-from-configs", "undeclared-secret"):
        assert secret not in context_text
    assert json.loads(context_text)["skill_args"]["region"] == "eu"


async def test_declared_credential_from_configs_beats_the_host(make_skill, skills_root, monkeypatch):
    make_skill("creds", CREDENTIAL_SKILL, files={"dump.py": ENV_DUMP})
    monkeypatch.setenv("DEPLOY_TOKEN", "token-from-host")
    monkeypatch.setenv("SERVICE_PIN", "pin-from-host")
    env = await run_skill(skills_root, "creds", skill_args={"deploy_token": "token-from-configs"})
    assert env["env"]["DEPLOY_TOKEN"] == "token-from-configs"
    assert env["env"]["SERVICE_PIN"] == "pin-from-host"
    assert "token-from-configs" not in env["env"]["SKILL_CONTEXT"]


async def test_missing_declared_credential_is_not_run(make_skill, skills_root, monkeypatch):
    make_skill("creds", CREDENTIAL_SKILL, files={"dump.py": ENV_DUMP})
    monkeypatch.delenv("DEPLOY_TOKEN", raising=False)
    env = await run_skill(skills_root, "creds")
    assert env["ok"] is False and env["needs_config"] == ["DEPLOY_TOKEN"]


async def test_missing_script_or_command_is_a_config_failure(make_skill, skills_root):
    make_skill("no_script", "name: no_script\ndescription: d\nexec: {config: scripts/run.sh}")
    make_skill("no_command", "name: no_command\ndescription: d\nexec: {primary: {type: INLINE_SHELL}}")
    for name, fragment in (("no_script", "run.sh does not exist"), ("no_command", "needs exec.primary.command")):
        env = await run_skill(skills_root, name)
        assert env["ok"] is False and env["error_type"] == "config", env
        assert fragment in env["error"]


async def test_credential_parameters_travel_as_env_not_argv(make_skill, skills_root):
    """§5.2: a secret parameter filled from configs must not show on argv (``ps``) nor in SKILL_INPUT."""
    make_skill(
        "secret_param",
        """
name: secret_param
description: d
exec:
  primary:
    type: INLINE_SHELL
    command: |
      printf '{"argv": "%s", "input": %s, "token": "%s", "pin": "%s", "context": %s}' \
        "$*" "$SKILL_INPUT" "$API_TOKEN" "$VAULT_PIN" "$SKILL_CONTEXT"
""",
        files={
            "schema.json": json.dumps(
                {
                    "type": "object",
                    "properties": {
                        "q": {"type": "string"},
                        "api_token": {"type": "string"},
                        "vault_pin": {"type": "string", "x-secret": True},
                    },
                }
            )
        },
    )
    env = await run_skill(
        skills_root,
        "secret_param",
        {"q": "x", "api_token": "typed-by-the-model"},
        skill_args={"api_token": "T0K-from-configs", "vault_pin": "4321"},
    )
    assert env["ok"] is True, env
    assert env["argv"] == "--q x"
    assert env["input"] == {"q": "x"}
    assert (env["token"], env["pin"]) == ("T0K-from-configs", "4321")
    assert "4321" not in json.dumps(env["context"]) and "T0K" not in json.dumps(env["context"])
