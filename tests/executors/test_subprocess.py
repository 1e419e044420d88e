"""Subprocess exec types end to end (executors/subprocess.py): real processes for PYTHON CLI, SHELL,
INLINE_SHELL, NODE, RUBY and GO; argv, SKILL_INPUT and SKILL_CONTEXT in, the child's environment, timeouts."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from skillyard import SkillYard
from skillyard.executors.subprocess import _kill_group
from skillyard.invoke.pipeline import _wall_clock
from skillyard.settings import Settings
from support.cli import listing, one
from support.skills import PROBE_CLI, child_env, inline_shell_skill, run_skill, shell_skill


def needs(binary: str) -> pytest.MarkDecorator:
    """Skip on a developer machine without the interpreter; CI installs it, so there it must run."""
    missing = shutil.which(binary) is None and not os.environ.get("CI")
    return pytest.mark.skipif(missing, reason=f"{binary} not installed")


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


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its (re)parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


ENV_DUMP = """
import argparse
import json
import os

if __name__ == "__main__":
    argparse.ArgumentParser().parse_known_args()
    # values reversed: the platform masks the run's credentials in its result, and the tests read them back here
    print(json.dumps({"env": {k: v[::-1] for k, v in os.environ.items()}}))
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

GO_MAIN = """
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	var in map[string]any
	json.Unmarshal([]byte(os.Getenv("SKILL_INPUT")), &in)
	if in["fail"] == true {
		fmt.Fprintln(os.Stderr, "go failing")
		os.Exit(3)
	}
	b, _ := json.Marshal(map[string]any{"ok": true, "lang": "go", "argv": os.Args[1:], "x": in["x"]})
	fmt.Println(string(b))
}
"""


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


@pytest.mark.spec("§4.3")
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


def test_default_subprocess_timeout_is_60s_and_exec_timeout_overrides(make_skill, skills_root, monkeypatch):
    monkeypatch.delenv("SKILLYARD_SUBPROCESS_TIMEOUT", raising=False)
    for name, timeout in (("slow_default", ""), ("slow_set", ", timeout: 2.5")):
        make_skill(name, f"name: {name}\ndescription: d\nexec: {{config: run.sh{timeout}}}", files={"run.sh": "true\n"})
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert Settings.from_env().subprocess_timeout == 60.0
    assert _wall_clock(yard, yard.skill("slow_default")) == 60.0
    assert _wall_clock(yard, yard.skill("slow_set")) == 2.5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_a_reaped_runs_pid_held_by_another_group_leader_is_not_signalled():
    """After a run's leader is reaped its pid may be reused: the group kill must not reach the process holding it."""
    stranger = await asyncio.create_subprocess_exec("sleep", "30", start_new_session=True)
    reaped = SimpleNamespace(pid=stranger.pid, returncode=0)  # a finished run whose pid came round again
    try:
        _kill_group(reaped)  # type: ignore[arg-type]
        await asyncio.sleep(0.1)
        assert _alive(stranger.pid)
    finally:
        stranger.kill()
        await stranger.wait()


# the pid file is renamed into place, so the test never reads it half written
WAITS_SCRIPT = "sleep 30 > /dev/null 2>&1 &\necho $! > child.tmp && mv child.tmp child.pid\nsleep 30\ntouch finished\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_abort_signal_set_during_the_run_kills_the_process_group(
    monkeypatch, db_env, make_skill, skills_root, tmp_path
):
    """A subprocess cannot see the caller's Event: the platform kills its group when it is set, children too."""
    monkeypatch.setenv("SKILLYARD_SANDBOX", "C")  # host PIDs in child.pid: at tier A they are the namespace's
    make_skill(
        "waits",
        "name: waits\ndescription: d\nexec: {config: run.sh, timeout: 30}",
        files={"run.sh": WAITS_SCRIPT},
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
async def test_background_children_end_with_the_skill(monkeypatch, db_env, make_skill, skills_root, tmp_path):
    """What a skill leaves running goes when its process exits: a child keeping the output pipe does not hold the
    run until the wall clock, and a child with its own output does not outlive the run."""
    monkeypatch.setenv("SKILLYARD_SANDBOX", "C")  # host PIDs and host paths: at tier A they are the sandbox's
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
async def test_timeout_kills_the_whole_process_group(monkeypatch, db_env, make_skill, skills_root, tmp_path):
    monkeypatch.setenv("SKILLYARD_SANDBOX", "C")  # host PIDs in child.pid: at tier A they are the namespace's
    make_skill(
        "hangs",
        "name: hangs\ndescription: d\nexec: {config: run.sh, timeout: 0.5}",
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
    monkeypatch.setenv("SKILLYARD_SANDBOX", "C")  # host PIDs and host paths: at tier A they are the sandbox's
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
    child = child_env(env)
    # bubblewrap (tier A) sets PWD to the working folder, as a shell would
    assert set(child) <= BASE | {"DEPLOY_TOKEN", "SERVICE_PIN", "PWD"}, set(child) - BASE
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
    assert child_env(env)["DEPLOY_TOKEN"] == "token-from-configs"
    assert child_env(env)["SERVICE_PIN"] == "pin-from-host"
    assert "token-from-configs" not in child_env(env)["SKILL_CONTEXT"]


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


@pytest.mark.spec("§5.2")
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
        "$*" "$SKILL_INPUT" "$(printf %s "$API_TOKEN" | rev)" "$VAULT_PIN" "$SKILL_CONTEXT"
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
    # the token comes back reversed: the platform masks the run's credentials in its result
    assert (env["token"][::-1], env["pin"]) == ("T0K-from-configs", "4321")
    assert "4321" not in json.dumps(env["context"]) and "T0K" not in json.dumps(env["context"])


async def test_python_cli_runs_as_subprocess(probe_cli, skills_root, monkeypatch):
    """Issue: 'PYTHON CLI: a script with argparse and `if __name__ == "__main__"` ... runs as a subprocess'."""
    monkeypatch.setenv("PROBE_DECLARED", "d")
    env = await run_skill(skills_root, "probe", {"x": "1"})
    assert env["ok"] is True and env["pid"] != os.getpid()
    assert one(listing(skills_root), "probe")["exec_type"] == "PYTHON"


async def test_argv_encoding(probe_cli, skills_root, monkeypatch):
    """Issue: 'input as argv (`--key value`, booleans as flags, lists repeated, objects as JSON)'."""
    monkeypatch.setenv("PROBE_DECLARED", "d")
    env = await run_skill(
        skills_root, "probe", {"name": "Ada", "flag": True, "off": False, "tags": ["a", "b"], "opts": {"x": 1}, "n": 3}
    )
    argv = env["argv"]
    assert argv[argv.index("--name") + 1] == "Ada"
    assert "--flag" in argv and (
        argv.index("--flag") + 1 == len(argv) or argv[argv.index("--flag") + 1].startswith("--")
    )
    assert "--off" not in argv or argv[argv.index("--off") + 1] != "True"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--tags"] == ["a", "b"]
    assert json.loads(argv[argv.index("--opts") + 1]) == {"x": 1}
    assert argv[argv.index("--n") + 1] == "3"


async def test_skill_input_and_context_env(probe_cli, skills_root, monkeypatch):
    """Issue: 'and as `SKILL_INPUT`, the context as `SKILL_CONTEXT` (JSON-serializable keys only, never `_`-prefixed
    keys, never db/call_skill)'."""
    monkeypatch.setenv("PROBE_DECLARED", "d")
    env = await run_skill(skills_root, "probe", {"a": 1}, _meta={"internal": 1}, org_name="acme", role_id="r1")
    child = child_env(env)
    assert json.loads(child["SKILL_INPUT"]) == {"a": 1}
    ctx = json.loads(child["SKILL_CONTEXT"])
    assert not [k for k in ctx if k.startswith("_")]
    for k in ("db", "call_skill", "db_factory", "abort_signal"):
        assert k not in ctx
    assert ctx["org_name"] == "acme" and ctx["role_id"] == "r1"
    assert ctx["triggered_at"] and isinstance(ctx["triggered_at"], float)


async def test_child_env_is_minimal(probe_cli, skills_root, monkeypatch):
    """Issue: 'The child's environment is a minimal base (PATH, HOME, LANG, TMPDIR) plus `SKILL_INPUT`, `SKILL_CONTEXT`
    and the credentials the skill declares (requires.env / primaryEnv ...) — never the rest of the host environment.'"""
    monkeypatch.setenv("PROBE_DECLARED", "declared-v")
    monkeypatch.setenv("PROBE_PRIMARY", "primary-v")
    monkeypatch.setenv("HOST_ONLY_SECRET", "leakme")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-leak")
    env = await run_skill(skills_root, "probe", {})
    child = child_env(env)
    assert child["PROBE_DECLARED"] == "declared-v" and child["PROBE_PRIMARY"] == "primary-v"
    assert "HOST_ONLY_SECRET" not in child and "AWS_SECRET_ACCESS_KEY" not in child
    extra = set(child) - {
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "SKILL_INPUT",
        "SKILL_CONTEXT",
        "PROBE_DECLARED",
        "PROBE_PRIMARY",
        "LC_CTYPE",
        "PWD",
        "SHLVL",
        "_",
    }
    assert not extra, extra
    assert "leakme" not in json.dumps(child) and "aws-leak" not in json.dumps(child)


@pytest.mark.spec("§5.2")
async def test_declared_credential_from_configs(probe_cli, skills_root, monkeypatch):
    """Issue: 'the credentials the skill declares (requires.env / primaryEnv, from configs, then the host environment,
    §5.2)'."""
    monkeypatch.setenv("PROBE_DECLARED", "from-host")
    env = await run_skill(skills_root, "probe", {}, skill_configs={"PROBE_DECLARED": "from-config"})
    assert child_env(env)["PROBE_DECLARED"] == "from-config"


@pytest.mark.spec("§5.2")
async def test_skill_context_has_no_secrets(probe_cli, skills_root, monkeypatch):
    """docs/authoring.md: '`skill_configs` and `skill_args` are flat and without credentials (credential-looking keys,
    declared credential variables and credential parameters), and so is the top level.'
    Spec §5.2: 凭证 ... 不展开、不打印."""
    monkeypatch.setenv("PROBE_DECLARED", "x")
    pk = "-----BEGIN PRIVATE KEY-----MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-----END PRIVATE KEY-----"
    env = await run_skill(
        skills_root,
        "probe",
        {},
        skill_configs={"api_token": "TOKVAL12345", "private_key": pk, "region": "eu-1"},
        ssh_private_key=pk,
        session_password="PWVAL98765",
        actor_key="AK1",
        idempotency_key="IK1",
    )
    ctx_text = child_env(env)["SKILL_CONTEXT"]
    assert "TOKVAL12345" not in ctx_text and "BEGIN PRIVATE KEY" not in ctx_text and "PWVAL98765" not in ctx_text
    assert "eu-1" in ctx_text
    # the platform's own fields are not credentials, although their names contain "key"
    ctx = json.loads(ctx_text)
    assert ctx["actor_key"] == "AK1" and ctx["idempotency_key"] == "IK1"
    assert "TOKVAL12345" not in json.dumps(env["argv"]) and "BEGIN PRIVATE" not in json.dumps(env["argv"])


async def test_credential_param_as_env_not_argv(make_skill, skills_root):
    """docs/authoring.md: 'each credential parameter of the input schema ... `api_token` arrives as `$API_TOKEN`, never
    on argv ... and never in `SKILL_INPUT`.'"""
    make_skill(
        "cp",
        frontmatter="name: cp\ndescription: d\nexec:\n  config: probe.py",
        files={
            "probe.py": PROBE_CLI,
            "schema.json": json.dumps(
                {"type": "object", "properties": {"api_token": {"type": "string"}, "q": {"type": "string"}}}
            ),
        },
    )
    env = await run_skill(skills_root, "cp", {"q": "z"}, skill_configs={"api_token": "CFGTOKEN99"})
    assert child_env(env).get("API_TOKEN") == "CFGTOKEN99"
    assert "CFGTOKEN99" not in json.dumps(env["argv"]) and "CFGTOKEN99" not in child_env(env)["SKILL_INPUT"]


async def test_cwd_is_session_workspace(probe_cli, skills_root, monkeypatch, home):
    """Issue: 'cwd = the session workspace'; docs: 'SKILLYARD_HOME/workspaces/<session_id or "default">'."""
    monkeypatch.setenv("PROBE_DECLARED", "x")
    env = await run_skill(skills_root, "probe", {}, session_id="sess1")
    assert os.path.realpath(env["cwd"]) == os.path.realpath(home / "workspaces" / "sess1")


async def test_cwd_given_workspace(probe_cli, skills_root, monkeypatch, tmp_path):
    """Issue: 'cwd = the session workspace' (workspace_dir given)."""
    monkeypatch.setenv("PROBE_DECLARED", "x")
    ws = tmp_path / "ws_given"
    env = await run_skill(skills_root, "probe", {}, workspace_dir=str(ws))
    assert os.path.realpath(env["cwd"]) == os.path.realpath(ws)


@pytest.mark.spec("§2.3")
async def test_shell_skill_runs(make_skill, skills_root):
    """Issue: 'Subprocess types (... SHELL ...)'; spec §2.3 SKILL_INPUT."""
    shell_skill(make_skill, "sh1", 'printf \'{"ok": true, "first": "%s", "input": %s}\\n\' "$1" "$SKILL_INPUT"\n')
    env = await run_skill(skills_root, "sh1", {"x": "y"})
    assert env["ok"] is True and env["first"] == "--x" and env["input"] == {"x": "y"}


async def test_inline_shell(make_skill, skills_root):
    """Issue: '`primary.type: INLINE_SHELL` with `primary.command`'."""
    make_skill(
        "inl",
        frontmatter='name: inl\ndescription: d\nexec:\n  primary:\n    type: INLINE_SHELL\n    command: \'echo "{\\"ok\\": true, \\"a1\\": \\"$1\\", \\"a2\\": \\"$2\\"}"\'',  # noqa: E501 (a skill file's text)
    )
    item = one(listing(skills_root), "inl")
    assert item["exec_type"] == "INLINE_SHELL"
    env = await run_skill(skills_root, "inl", {"who": "ada"})
    assert env["ok"] is True and (env["a1"], env["a2"]) == ("--who", "ada")


async def test_inline_shell_without_command_is_config_failure(make_skill, skills_root):
    """docs/authoring.md: 'an INLINE_SHELL without `command` is a `config` failure.'"""
    make_skill("inl2", frontmatter="name: inl2\ndescription: d\nexec:\n  primary:\n    type: INLINE_SHELL")
    env = await run_skill(skills_root, "inl2")
    assert env["ok"] is False and env["error_type"] == "config"


async def test_nonzero_exit(make_skill, skills_root):
    """Issue: 'stderr goes to the log; non-zero exit is a technical failure whose envelope carries `exit_code` and
    `stderr_tail`'."""
    shell_skill(make_skill, "fail", "echo 'partial'\necho 'disk is full' >&2\nexit 3\n")
    env = await run_skill(skills_root, "fail")
    assert env["ok"] is False and env["success"] is False and env["exit_code"] == 3
    assert "disk is full" in env["stderr_tail"] and env["error"]


@pytest.mark.spec("§2.3")
async def test_nonzero_exit_with_ok_json_still_failure(make_skill, skills_root):
    """Spec §2.3: '退出码非 0 判为技术失败' even when stdout says ok."""
    shell_skill(make_skill, "fail2", "echo '{\"ok\": true}'\nexit 1\n")
    env = await run_skill(skills_root, "fail2")
    assert env["ok"] is False and env["exit_code"] == 1


async def test_stderr_not_in_success_envelope(make_skill, skills_root):
    """Issue: 'stderr goes to the log'."""
    shell_skill(make_skill, "logs", "echo 'LOGLINE-XYZ' >&2\necho '{\"ok\": true}'\n")
    env = await run_skill(skills_root, "logs")
    assert env["ok"] is True and "LOGLINE-XYZ" not in json.dumps(env)


async def test_subprocess_timeout_kills_group(monkeypatch, db_env, make_skill, skills_root, tmp_path):
    """Issue: 'on timeout the whole process group is killed and the envelope says `timed_out: true`'."""
    monkeypatch.setenv("SKILLYARD_SANDBOX", "C")  # host PIDs and host paths: at tier A they are the sandbox's
    ws = tmp_path / "ws_to"
    shell_skill(make_skill, "hang", "sleep 60 &\necho $! > child.pid\nsleep 60\n", extra="  timeout: 0.5")
    env = await run_skill(skills_root, "hang", workspace_dir=str(ws))
    assert env["ok"] is False and env["timed_out"] is True
    pid = int((ws / "child.pid").read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().split()[2] == "Z":
                break
        time.sleep(0.1)
    else:
        pytest.fail("background child outlived the timeout")


async def test_missing_interpreter_is_config_failure(make_skill, skills_root, tmp_path, monkeypatch):
    """Issue: 'A missing interpreter is a config failure naming the binary.'"""
    make_skill(
        "js", frontmatter="name: js\ndescription: d\nexec:\n  config: main.js", files={"main.js": "console.log('{}')\n"}
    )
    empty = tmp_path / "emptybin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    env = await run_skill(skills_root, "js")
    assert env["ok"] is False and env["error_type"] == "config" and "node" in env["error"]


@needs("node")
async def test_node_skill(make_skill, skills_root):
    """Issue: 'Subprocess types (... NODE ...)'."""
    make_skill(
        "nd",
        frontmatter="name: nd\ndescription: d\nexec:\n  config: main.js",
        files={
            "main.js": """
        const input = JSON.parse(process.env.SKILL_INPUT || "{}");
        const ctx = JSON.parse(process.env.SKILL_CONTEXT || "{}");
        console.error("node log");
        console.log(JSON.stringify({ok: true, lang: "node", argv: process.argv.slice(2), x: input.x, ch: ctx.channel}));
    """
        },
    )
    env = await run_skill(skills_root, "nd", {"x": 5}, channel="web")
    assert env == {**env, "ok": True, "lang": "node", "x": 5, "ch": "web"} and env["argv"] == ["--x", "5"]


@needs("ruby")
async def test_ruby_skill(make_skill, skills_root):
    """Issue: 'Subprocess types (... RUBY ...)'."""
    make_skill(
        "rb",
        frontmatter="name: rb\ndescription: d\nexec:\n  config: main.rb",
        files={
            "main.rb": """
        require 'json'
        input = JSON.parse(ENV['SKILL_INPUT'] || '{}')
        puts JSON.generate({ok: true, lang: 'ruby', argv: ARGV, x: input['x']})
    """
        },
    )
    env = await run_skill(skills_root, "rb", {"x": "q"})
    assert env["ok"] is True and env["lang"] == "ruby" and env["argv"] == ["--x", "q"] and env["x"] == "q"


@needs("go")
async def test_go_skill(make_skill, skills_root):
    """Issue: 'Subprocess types (... GO)'."""
    make_skill(
        "gs",
        frontmatter="name: gs\ndescription: d\nexec:\n  config: main.go\n  timeout: 180",
        files={"main.go": GO_MAIN},
    )
    env = await run_skill(skills_root, "gs", {"x": "v"})
    assert env["ok"] is True and env["lang"] == "go" and env["argv"] == ["--x", "v"]


@needs("go")
async def test_go_exit_code_is_programs(make_skill, skills_root):
    """docs/authoring.md: 'For GO skills ... `exit_code` is the program's own code N.'"""
    make_skill(
        "gf",
        frontmatter="name: gf\ndescription: d\nexec:\n  config: main.go\n  timeout: 180",
        files={"main.go": GO_MAIN},
    )
    env = await run_skill(skills_root, "gf", {"fail": True})
    assert env["ok"] is False and env["exit_code"] == 3 and "go failing" in env["stderr_tail"]


@pytest.mark.spec("§3.2")
async def test_cli_subcommand_is_argv0(make_skill, skills_root):
    """Issue: 'CLI skills get it as argv[0]'; spec §3.2: 'CLI 型技能的 _subcommand 会被放到 argv[0]'."""
    make_skill(
        "clisub",
        frontmatter="name: clisub\ndescription: d\nexec:\n  config: probe.py\ncli_commands:\n  add:\n    properties: {text: {type: string}}\n  rm: {}",  # noqa: E501 (a skill file's text)
        files={"probe.py": PROBE_CLI},
    )
    env = await run_skill(skills_root, "clisub__add", {"text": "t"})
    assert env["argv"][0] == "add" and env["argv"][1:] == ["--text", "t"]
    assert json.loads(child_env(env)["SKILL_INPUT"]).get("_subcommand") in ("add", None)


async def test_secret_scrubbed_from_stderr_tail(make_skill, skills_root, monkeypatch):
    """docs/authoring.md: 'Credential values the run could see ... are replaced by `***` in `error`, `stderr_tail`
    ...'."""
    monkeypatch.setenv("SCRUB_API_KEY", "supersecretvalue")
    shell_skill(
        make_skill,
        "leaky",
        'echo "auth failed with $SCRUB_API_KEY" >&2\nexit 1\n',
        extra="metadata:\n  openclaw:\n    requires:\n      env: [SCRUB_API_KEY]",
    )
    env = await run_skill(skills_root, "leaky")
    assert env["ok"] is False and "supersecretvalue" not in json.dumps(env)


async def test_subprocess_has_no_call_skill(probe_cli, skills_root, monkeypatch):
    """Issue: 'Subprocess and HTTP skills have no `call_skill`'."""
    monkeypatch.setenv("PROBE_DECLARED", "x")
    env = await run_skill(skills_root, "probe")
    assert "call_skill" not in json.loads(child_env(env)["SKILL_CONTEXT"])


async def test_subprocess_large_stdout_and_stderr(make_skill, skills_root):
    """Issue: 'stdout parsed in order: whole JSON ...'; 'stderr goes to the log' (a chatty script must not hang or break
    parsing)."""
    shell_skill(
        make_skill,
        "chatty",
        "python3 -c \"import sys; sys.stderr.write('e' * 1000000)\"\npython3 -c \"import json; print(json.dumps({'ok': True, 'n': len('x' * 100000)}))\"\n",  # noqa: E501 (a skill file's text)
    )
    env = await run_skill(skills_root, "chatty")
    assert env["ok"] is True and env.get("n") == 100000


async def test_subprocess_killed_by_signal_is_failure(make_skill, skills_root):
    """Issue: 'non-zero exit is a technical failure whose envelope carries `exit_code` and `stderr_tail`'."""
    shell_skill(make_skill, "sig", "kill -9 $$\n")
    env = await run_skill(skills_root, "sig")
    assert env["ok"] is False and env["exit_code"] != 0 and "stderr_tail" in env


async def test_subprocess_null_and_false_omitted(probe_cli, skills_root, monkeypatch):
    """docs/authoring.md argv: '`true` as a bare `--key`, `false` and `null` omitted'."""
    monkeypatch.setenv("PROBE_DECLARED", "x")
    env = await run_skill(skills_root, "probe", {"a": None, "b": False, "c": True})
    assert env["argv"] == ["--c"]


async def test_a_set_abort_signal_stops_a_subprocess_skill(make_skill, yard_for, tmp_path):
    """Issue: "`abort_signal` is an `asyncio.Event` the caller can set to stop a run". A subprocess skill cannot
    poll the Event (it is in-process only), so the platform must act on it: a run whose caller already set the
    signal must not carry on to its end."""
    marker = tmp_path / "reached-the-end"
    make_skill(
        "sleeper",
        frontmatter="name: sleeper\ndescription: d\nexec:\n  config: run.sh\n  timeout: 30",
        files={"run.sh": f"sleep 2\ntouch '{marker}'\necho '{{\"ok\": true}}'\n"},
    )
    stop = asyncio.Event()
    stop.set()
    async with yard_for() as yard:
        env = await yard.run("sleeper", context={"abort_signal": stop})
    assert not marker.exists(), "the skill ran to its end although the caller had set abort_signal"
    assert env["ok"] is False
