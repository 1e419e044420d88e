"""Black-box conformance probes of the command-line interface as documented in docs/cli.md (and the pages it links).

Every probe drives the real console entry point (``skillyard.cli.main``, the function the ``skillyard`` script calls)
or a real ``skillyard`` subprocess, against a real PostgreSQL where a command needs one. Each docstring quotes the
sentence it checks.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from support import EXAMPLES, REPO
from support.cli import by_name, invoke, list_json, no_traceback, usage_error
from support.cli_probes import BOOM, DBUSER, FANOUT, FANOUT_FM, GREET, GREET_SCHEMA, LEAKY, LEAKY_SCHEMA, LIST_FIELDS
from support.skills import write_skill

NOTES_AGENT = EXAMPLES / "agents" / "notes"
DEMO_MESSAGE = "把标题为季度总结的笔记保存下来：收入增长 12%"


# ---------------------------------------------------------------------------------------------------------------
# helpers


def proc(*args: str, module: bool = False) -> subprocess.CompletedProcess[str]:
    """A real ``skillyard`` process (or ``python -m skillyard``), with this test's environment."""
    cmd = [sys.executable, "-m", "skillyard", *args] if module else ["skillyard", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=str(REPO))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A skill root with the probe skills."""
    base = tmp_path / "root"
    base.mkdir()
    write_skill(
        base,
        "greet",
        "name: greet\ndescription: Greets someone\naliases: [hey]\ncategory: people",
        files={"handler.py": GREET, "schema.json": GREET_SCHEMA},
    )
    write_skill(base, "notes", FANOUT_FM, files={"handler.py": FANOUT})
    write_skill(base, "boom", "name: boom\ndescription: Always raises", files={"handler.py": BOOM})
    write_skill(
        base,
        "leaky",
        "name: leaky\ndescription: Echoes its token",
        files={"handler.py": LEAKY, "schema.json": LEAKY_SCHEMA},
    )
    write_skill(base, "dbuser", "name: dbuser\ndescription: Uses the database", files={"handler.py": DBUSER})
    write_skill(
        base,
        "noisy",
        "name: noisy\ndescription: Writes to stderr\nexec:\n  config: run.sh",
        files={"run.sh": 'echo "NOISY_STDERR_MARK" >&2\necho \'{"ok": true, "said": "yes"}\'\n'},
    )
    return base


@pytest.fixture
def state_root(tmp_path: Path) -> tuple[Path, Path]:
    """Two roots exercising every list STATE: error, shadowed, ok, gated (requirements, knowledge)."""
    first, second = tmp_path / "r1", tmp_path / "r2"
    write_skill(first, "dup", "name: dup\ndescription: first copy")
    write_skill(second, "dup", "name: dup\ndescription: second copy")
    (first / "broken").mkdir(parents=True)
    (first / "broken" / "SKILL.md").write_text("---\nname: broken\ndescription: [unterminated\n", encoding="utf-8")
    write_skill(
        first,
        "gated",
        "name: gated\ndescription: g\n"
        "metadata: {openclaw: {requires: {env: [CLI_PROBE_NEED_ME], bins: [no_such_bin_zz]}}}",
        files={"handler.py": "async def execute(i):\n    return {}\n"},
    )
    write_skill(first, "know", "name: know\ndescription: k\nskill_type: knowledge")
    write_skill(first, "longdesc", "name: longdesc\ndescription: " + "abcdefghij" * 10)
    write_skill(first, "nodesc", "name: nodesc", body="First body line here\n")
    return first, second


# ---------------------------------------------------------------------------------------------------------------
# global options


def test_version_prints_name_and_version():
    """`--version` | print `skillyard, version X` and exit"""
    out = proc("--version")
    assert out.returncode == 0 and re.fullmatch(r"skillyard, version \S+\n", out.stdout), out.stdout + out.stderr


def test_python_dash_m_runs_the_cli():
    """python -m skillyard …          (the same CLI)"""
    out = proc("list", "--no-builtin", "--json", module=True)
    assert out.returncode == 0 and json.loads(out.stdout) == []


def test_python_dash_m_version_is_the_same():
    """`--version` | print `skillyard, version X` and exit; python -m skillyard …          (the same CLI)"""
    assert proc("--version", module=True).stdout == proc("--version").stdout


@pytest.fixture(scope="module")
def help_text() -> str:
    return invoke("--help").stdout


@pytest.mark.parametrize(
    "command", ["list", "show", "plugins", "run", "artifacts", "validate", "config", "doctor", "agent", "datatable"]
)
def test_help_lists_every_documented_command(help_text, command):
    """Plugins add commands through the `register_commands` hook; they appear in `skillyard --help`."""
    assert re.search(rf"^\s+{command}\s", help_text, re.M), help_text


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["show"],
        ["plugins"],
        ["run"],
        ["artifacts"],
        ["validate"],
        ["config", "set"],
        ["config", "list"],
        ["config", "unset"],
        ["doctor"],
        ["agent", "check"],
        ["agent", "run"],
        ["agent", "resume"],
        ["datatable", "grant"],
        ["datatable", "grants"],
        ["datatable", "revoke"],
    ],
)
def test_help_for_any_command(args):
    """`--help` | help for the CLI or any command"""
    out = invoke(*args, "--help")
    assert out.exit_code == 0 and "Usage:" in out.stdout, out.output


def test_unknown_command_is_a_usage_error():
    """2 | usage error: unknown command or option, …"""
    usage_error(invoke("frobnicate"))


@pytest.mark.parametrize("args", [["list", "--frob"], ["run", "x", "--frob"], ["doctor", "--frob"]])
def test_unknown_option_is_a_usage_error(args):
    """2 | usage error: unknown command or option, …"""
    usage_error(invoke(*args))


def test_verbose_logs_subprocess_stderr_lines(root):
    """`-v`, `--verbose` | log to stderr: `-v` info (subprocess stderr lines, …); default: warnings only"""
    loud = proc("-v", "run", "noisy", "--skills-dir", str(root))
    quiet = proc("run", "noisy", "--skills-dir", str(root))
    assert loud.returncode == 0 and quiet.returncode == 0
    assert "NOISY_STDERR_MARK" in loud.stderr and "NOISY_STDERR_MARK" not in quiet.stderr
    assert "NOISY_STDERR_MARK" not in loud.stdout


# ---------------------------------------------------------------------------------------------------------------
# list


@pytest.mark.parametrize("field", sorted(LIST_FIELDS))
def test_list_json_has_every_documented_field(root, field):
    """### `list --json` fields (the table of name, description, dir, root, skill_md, … shadowed_by)"""
    items = list_json("--skills-dir", str(root))
    assert items and all(isinstance(item[field], LIST_FIELDS[field]) for item in items), field


def test_list_json_one_object_per_skill_folder(root, state_root):
    """Every skill folder found, including shadowed ones and those that failed to read."""
    first, second = state_root
    items = list_json("--skills-dir", str(first), "--skills-dir", str(second), "--no-builtin")
    names = sorted(i["name"] for i in items)
    assert names == ["broken", "dup", "dup", "gated", "know", "longdesc", "nodesc"]


def test_list_no_builtin_leaves_out_builtins(root):
    """`--no-builtin` | leave out the built-in skills"""
    with_builtin = {i["name"]: i for i in list_json("--skills-dir", str(root))}
    without = {i["name"] for i in list_json("--skills-dir", str(root), "--no-builtin")}
    assert "datatable" in with_builtin and with_builtin["datatable"]["source"] == "builtin"
    assert "datatable" not in without and "greet" in without


def test_list_source_is_local_for_a_skills_dir(root):
    """`source` | frontmatter `source`, else `local`, `plugin` or `builtin` from the root"""
    assert by_name(list_json("--skills-dir", str(root)), "greet")["source"] == "local"


def test_list_dir_and_root_are_the_folders(root):
    """`dir` | the skill folder; `root` | the root it was found in; `skill_md` | the file read as its SKILL.md"""
    item = by_name(list_json("--skills-dir", str(root)), "greet")
    assert Path(item["dir"]) == (root / "greet").resolve() or Path(item["dir"]) == root / "greet"
    assert Path(item["root"]).resolve() == root.resolve()
    assert Path(item["skill_md"]).resolve() == (root / "greet" / "SKILL.md").resolve()


def test_list_exec_type_null_without_code(state_root):
    """`exec_type` | `PYTHON`, `SHELL`, … or null without code"""
    items = list_json("--skills-dir", str(state_root[0]), "--no-builtin")
    assert by_name(items, "know")["exec_type"] is None and by_name(items, "gated")["exec_type"] == "PYTHON"


def test_list_exec_type_shell(root):
    """`exec_type` | `PYTHON`, `SHELL`, `INLINE_SHELL`, `NODE`, `RUBY`, `GO`, `HTTP`, …"""
    assert by_name(list_json("--skills-dir", str(root)), "noisy")["exec_type"] == "SHELL"


def test_list_trigger_type_defaults_to_explicit(root):
    """`trigger_type` | `explicit` unless declared otherwise"""
    assert by_name(list_json("--skills-dir", str(root)), "greet")["trigger_type"] == "explicit"


def test_list_aliases_and_tool_names(root):
    """`aliases` | declared aliases; `tool_names` | its tool names"""
    items = list_json("--skills-dir", str(root))
    assert by_name(items, "greet")["aliases"] == ["hey"]
    assert sorted(by_name(items, "notes")["tool_names"]) == ["notes__add", "notes__list"]


def test_list_category_declared(root):
    """`category` | declared, else the folder's path under its root"""
    assert by_name(list_json("--skills-dir", str(root)), "greet")["category"] == "people"


def test_list_shadowed_fields(state_root):
    """`shadowed` | folders of lower-ranked skills with the same name; `shadowed_by` | the folder of the skill that
    shadows this one; `active` | false when shadowed"""
    first, second = state_root
    items = list_json("--skills-dir", str(first), "--skills-dir", str(second), "--no-builtin")
    winner, loser = by_name(items, "dup", True), by_name(items, "dup", False)
    assert [Path(p).resolve() for p in winner["shadowed"]] == [(second / "dup").resolve()]
    assert Path(loser["shadowed_by"]).resolve() == (first / "dup").resolve()
    assert winner["shadowed_by"] is None and loser["description"] == "second copy"


def test_list_tool_names_empty_when_shadowed(state_root):
    """`tool_names` | its tool names (empty when shadowed)"""
    first, second = state_root
    items = list_json("--skills-dir", str(first), "--skills-dir", str(second), "--no-builtin")
    assert by_name(items, "dup", False)["tool_names"] == []


def test_list_gating_fields(state_root, monkeypatch):
    """`needs_config` | required env/config names missing …; `missing_bins` | required programs not on PATH"""
    monkeypatch.delenv("CLI_PROBE_NEED_ME", raising=False)
    item = by_name(list_json("--skills-dir", str(state_root[0]), "--no-builtin"), "gated")
    assert item["needs_config"] == ["CLI_PROBE_NEED_ME"] and item["missing_bins"] == ["no_such_bin_zz"]
    assert item["available"] is False


def test_list_knowledge_is_not_available_nor_exposed(state_root):
    """`exposed` | offered to models: active, explicit, not knowledge, no error; `available` | …, not knowledge"""
    item = by_name(list_json("--skills-dir", str(state_root[0]), "--no-builtin"), "know")
    assert item["exposed"] is False and item["available"] is False


def test_list_error_skill(state_root):
    """`error` | str | null | why the skill cannot run"""
    item = by_name(list_json("--skills-dir", str(state_root[0]), "--no-builtin"), "broken")
    assert isinstance(item["error"], str) and item["error"]
    assert item["exposed"] is False and item["available"] is False


def test_list_missing_description_warns(state_root):
    """`description` | frontmatter description (or the first body line); `warnings` | repairs and problems"""
    item = by_name(list_json("--skills-dir", str(state_root[0]), "--no-builtin"), "nodesc")
    assert item["description"] == "First body line here" and item["warnings"]


def test_list_table_header():
    """The table has `NAME`, `TYPE` (skill_type), `EXEC` (exec type or `-`), `STATE`, `WARN` (number of warnings) and
    the first 60 characters of the description."""
    out = invoke("list")
    header = out.stdout.splitlines()[0].split()
    assert out.exit_code == 0 and header[:5] == ["NAME", "TYPE", "EXEC", "STATE", "WARN"], out.stdout


def _table_rows(out: Result) -> dict[str, list[list[str]]]:
    rows: dict[str, list[list[str]]] = {}
    for line in out.stdout.splitlines()[1:]:
        cells = line.split()
        if cells:
            rows.setdefault(cells[0], []).append(cells)
    return rows


@pytest.mark.parametrize(
    ("name", "state"), [("broken", "error"), ("gated", "gated"), ("know", "gated"), ("longdesc", "ok")]
)
def test_list_table_state(state_root, monkeypatch, name, state):
    """`STATE` is `error` (the folder could not be read as a skill), `shadowed` …, `ok` (available) or `gated`
    (requirements not met in this environment, or a knowledge skill)."""
    monkeypatch.delenv("CLI_PROBE_NEED_ME", raising=False)
    out = invoke("list", "--skills-dir", str(state_root[0]), "--no-builtin")
    assert out.exit_code == 0
    assert _table_rows(out)[name][0][3] == state, out.stdout


def test_list_table_state_shadowed(state_root):
    """`shadowed` (a higher-ranked skill has the same name)"""
    first, second = state_root
    out = invoke("list", "--skills-dir", str(first), "--skills-dir", str(second), "--no-builtin")
    assert sorted(row[3] for row in _table_rows(out)["dup"]) == ["ok", "shadowed"], out.stdout


def test_list_table_exec_dash_and_warn_count(state_root):
    """`EXEC` (exec type or `-`), … `WARN` (number of warnings)"""
    rows = _table_rows(invoke("list", "--skills-dir", str(state_root[0]), "--no-builtin"))
    assert rows["know"][0][2] == "-" and rows["gated"][0][2] == "PYTHON"
    assert rows["nodesc"][0][4] == "1"


def test_list_table_description_cut_at_60(state_root):
    """… and the first 60 characters of the description."""
    out = invoke("list", "--skills-dir", str(state_root[0]), "--no-builtin")
    line = next(line for line in out.stdout.splitlines() if line.startswith("longdesc"))
    assert ("abcdefghij" * 6) in line and ("abcdefghij" * 6 + "a") not in line


def test_list_diagnostics_on_stderr(state_root):
    """Then, on stderr, one line per `error`, `warning` and `note` (which folders a skill shadows)."""
    first, second = state_root
    out = invoke("list", "--skills-dir", str(first), "--skills-dir", str(second), "--no-builtin")
    lines = out.stderr.splitlines()
    assert any(line.startswith("error") and "broken" in line for line in lines), out.stderr
    assert any(line.startswith("warning") and "nodesc" in line for line in lines), out.stderr
    assert any(line.startswith("note") and "dup" in line for line in lines), out.stderr
    assert "broken" not in out.stdout.split("NAME")[0]


def test_list_skills_dir_missing_is_usage_error(tmp_path):
    """A `--skills-dir` that does not exist is a usage error."""
    usage_error(invoke("list", "--skills-dir", str(tmp_path / "nope")))


def test_list_skills_dir_that_is_a_file_is_usage_error(tmp_path):
    """A `--skills-dir` that does not exist is a usage error. (a file is not a folder)"""
    target = tmp_path / "file.txt"
    target.write_text("x")
    usage_error(invoke("list", "--skills-dir", str(target)))


def test_skills_dir_ranks_above_skills_path(state_root, monkeypatch):
    """Those folders rank first, then `SKILLYARD_SKILLS_PATH`, then plugin roots, then the built-in skills"""
    first, second = state_root
    monkeypatch.setenv("SKILLYARD_SKILLS_PATH", str(first))
    items = list_json("--skills-dir", str(second), "--no-builtin")
    assert by_name(items, "dup", True)["description"] == "second copy"


def test_skills_path_is_searched(state_root, monkeypatch):
    """`SKILLYARD_SKILLS_PATH` | Skill roots separated by `:` … They rank after `--skills-dir`"""
    first, second = state_root
    monkeypatch.setenv("SKILLYARD_SKILLS_PATH", f"{first}{os.pathsep}{second}")
    items = list_json("--no-builtin")
    assert by_name(items, "dup", True)["description"] == "first copy" and by_name(items, "gated")


def test_user_skill_shadows_builtin(tmp_path):
    """Skill roots rank `--skills-dir` > `SKILLYARD_SKILLS_PATH` > plugin roots > built-in skills"""
    write_skill(tmp_path / "mine", "datatable", "name: datatable\ndescription: my own")
    items = list_json("--skills-dir", str(tmp_path / "mine"))
    assert by_name(items, "datatable", True)["description"] == "my own"
    assert by_name(items, "datatable", False)["source"] == "builtin"


# ---------------------------------------------------------------------------------------------------------------
# show

SHOW_EXTRA = ["manifest", "tool_description", "input_schema", "tools", "subcommands", "secret_params", "requires"]


@pytest.mark.parametrize("field", [*SHOW_EXTRA, "exec", "async", "entry", *sorted(LIST_FIELDS)])
def test_show_json_fields(root, field):
    """`show --json` fields: Everything in `list --json`, plus: manifest, tool_description, input_schema, tools,
    subcommands, secret_params, requires, exec, async, entry"""
    out = invoke("show", "greet", "--json", "--skills-dir", str(root))
    assert out.exit_code == 0 and field in json.loads(out.stdout), out.output


def test_show_json_hides_credentials(root):
    """`input_schema` | the schema models see (credential parameters removed); `secret_params` | the parameters
    treated as credentials"""
    info = json.loads(invoke("show", "greet", "--json", "--skills-dir", str(root)).stdout)
    assert "api_key" not in info["input_schema"]["properties"] and "who" in info["input_schema"]["properties"]
    assert info["secret_params"] == ["api_key"]
    assert "api_key" not in json.dumps(info["tools"])


def test_show_by_alias(root):
    """One skill by name, alias or tool name"""
    out = invoke("show", "hey", "--json", "--skills-dir", str(root))
    assert out.exit_code == 0 and json.loads(out.stdout)["name"] == "greet"


def test_show_by_tool_name(root):
    """One skill by name, alias or tool name"""
    out = invoke("show", "notes__add", "--json", "--skills-dir", str(root))
    assert out.exit_code == 0 and json.loads(out.stdout)["name"] == "notes"


def test_show_unknown_is_exit_2(root):
    """One skill by name, alias or tool name (unknown: exit 2)."""
    usage_error(invoke("show", "no_such_skill", "--skills-dir", str(root)), "no_such_skill")


def test_show_tools_per_subcommand(root):
    """`tools` | list of `{name, subcommand, description, input_schema}`, one per tool name (per subcommand when
    fanned out)"""
    info = json.loads(invoke("show", "notes", "--json", "--skills-dir", str(root)).stdout)
    tools = {t["name"]: t for t in info["tools"]}
    assert set(tools) == {"notes__add", "notes__list"}
    assert tools["notes__add"]["subcommand"] == "add" and set(tools["notes__add"]) >= {"description", "input_schema"}
    assert tools["notes__add"]["input_schema"]["required"] == ["text"]


def test_show_subcommands(root):
    """`subcommands` | `{subcommand: input schema}` from `cli_commands` (credentials removed); `{}` when not fanned
    out"""
    assert set(json.loads(invoke("show", "notes", "--json", "--skills-dir", str(root)).stdout)["subcommands"]) == {
        "add",
        "list",
    }
    assert json.loads(invoke("show", "greet", "--json", "--skills-dir", str(root)).stdout)["subcommands"] == {}


def test_show_tool_description(root):
    """`tool_description` | `[category] description`, or the description"""
    assert (
        json.loads(invoke("show", "greet", "--json", "--skills-dir", str(root)).stdout)["tool_description"]
        == "[people] Greets someone"
    )


def test_show_requires_keys(root):
    """`requires` | `{env, optional_env, bins, any_bins, config, os, always, primary_env}`"""
    requires = json.loads(invoke("show", "greet", "--json", "--skills-dir", str(root)).stdout)["requires"]
    assert set(requires) == {"env", "optional_env", "bins", "any_bins", "config", "os", "always", "primary_env"}


def test_show_exec_config_absolute(root):
    """`exec` | `{type, config, command, timeout, python_cli}` (`config` as an absolute path)"""
    exec_ = json.loads(invoke("show", "noisy", "--json", "--skills-dir", str(root)).stdout)["exec"]
    assert set(exec_) == {"type", "config", "command", "timeout", "python_cli"}
    assert exec_["type"] == "SHELL" and Path(exec_["config"]).is_absolute() and exec_["config"].endswith("run.sh")


def test_show_entry(root, state_root):
    """`entry` | the entry function found in a PYTHON module, or null"""
    assert json.loads(invoke("show", "greet", "--json", "--skills-dir", str(root)).stdout)["entry"] == "execute"
    assert json.loads(invoke("show", "know", "--json", "--skills-dir", str(state_root[0])).stdout)["entry"] is None


def test_show_manifest_is_frontmatter(root):
    """`manifest` | the parsed frontmatter"""
    manifest = json.loads(invoke("show", "greet", "--json", "--skills-dir", str(root)).stdout)["manifest"]
    assert manifest["name"] == "greet" and manifest["aliases"] == ["hey"]


def test_show_text_fields_in_order(root):
    """The text form prints `name`, `description`, `dir`, `skill_type`, `exec_type`, `category`, `trigger_type`,
    `exposed`, `available`, `aliases`, then each tool with the input schema models see"""
    out = invoke("show", "greet", "--skills-dir", str(root))
    assert out.exit_code == 0
    keys = ["name", "description", "dir", "skill_type", "exec_type", "category", "trigger_type", "exposed"]
    keys += ["available", "aliases"]
    positions = [out.stdout.find(f"{key}:") for key in keys]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), out.stdout
    assert '"who"' in out.stdout and "api_key" not in out.stdout


def test_show_text_warnings_and_error(state_root):
    """… then warnings and the error."""
    out = invoke("show", "broken", "--skills-dir", str(state_root[0]))
    assert out.exit_code == 0 and "not terminated" in out.stdout and "warning" in out.stdout.lower()


def test_show_skills_dir_missing_is_usage_error(tmp_path):
    """A `--skills-dir` that does not exist is a usage error."""
    usage_error(invoke("show", "x", "--skills-dir", str(tmp_path / "nope")))


# ---------------------------------------------------------------------------------------------------------------
# plugins


def test_plugins_leaves_builtins_out():
    """Built-in plugins (the executors and the built-in skill root) are left out unless `--all`."""
    plain = invoke("plugins", "--json")
    assert plain.exit_code == 0 and all(not p["builtin"] for p in json.loads(plain.stdout))


def test_plugins_all_json_shape():
    """`--json` prints a list of `{name, hooks, builtin, version}`; `version` is the distribution version of an
    entry-point plugin, else null."""
    out = invoke("plugins", "--all", "--json")
    items = json.loads(out.stdout)
    assert out.exit_code == 0 and items
    assert all(set(i) == {"name", "hooks", "builtin", "version"} for i in items)
    assert any(i["builtin"] and i["version"] is None and i["hooks"] for i in items)


def test_plugins_all_text_names_hooks():
    """Loaded plugins and the hooks each implements."""
    out = invoke("plugins", "--all")
    assert out.exit_code == 0 and "register_exec_types" in out.stdout and "register_commands" in out.stdout


# ---------------------------------------------------------------------------------------------------------------
# run


def test_run_prints_one_json_line_and_exit_0(root):
    """prints its envelope as one line of JSON on stdout … Exit 0 when `ok` is true"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "Ada"}')
    assert out.exit_code == 0 and out.stdout.count("\n") == 1
    env = json.loads(out.stdout)
    assert env["ok"] is True and env["greeting"] == "hi Ada"


def test_run_failure_exit_1(root):
    """Exit 0 when `ok` is true, 1 when false"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", "{}")
    env = json.loads(out.stdout)
    assert out.exit_code == 1 and env["ok"] is False and env["need_param"] == "who"


def test_run_exception_is_an_envelope_exit_1(root):
    """1 | `run`: the skill ran or was refused and the envelope has `ok: false`"""
    out = invoke("run", "boom", "--skills-dir", str(root))
    env = json.loads(out.stdout)
    assert out.exit_code == 1 and env["ok"] is False and env["exception_type"] == "ValueError"
    assert "Traceback" not in out.stdout


def test_run_needs_config_exit_1(state_root, monkeypatch):
    """A `needs_config` result is a failure (exit 1 on the CLI)."""
    monkeypatch.delenv("CLI_PROBE_NEED_ME", raising=False)
    out = invoke("run", "gated", "--skills-dir", str(state_root[0]))
    assert out.exit_code == 1 and "CLI_PROBE_NEED_ME" in json.loads(out.stdout)["needs_config"]


def test_run_knowledge_is_refused_exit_1(state_root):
    """1 | `run`: the skill ran or was refused and the envelope has `ok: false`"""
    out = invoke("run", "know", "--skills-dir", str(state_root[0]))
    assert out.exit_code == 1 and json.loads(out.stdout)["ok"] is False


def test_run_logs_go_to_stderr(root):
    """prints its envelope as one line of JSON on stdout. Logs go to stderr."""
    out = proc("-v", "run", "noisy", "--skills-dir", str(root))
    assert out.returncode == 0 and json.loads(out.stdout)["said"] == "yes" and out.stdout.count("\n") == 1


def test_run_by_alias(root):
    """Runs a skill by name, alias or tool name"""
    out = invoke("run", "hey", "--skills-dir", str(root), "--input", '{"who": "B"}')
    assert out.exit_code == 0 and json.loads(out.stdout)["greeting"] == "hi B"


def test_run_tool_name_restores_subcommand(root):
    """(`notes__add` restores the subcommand)"""
    out = invoke("run", "notes__add", "--skills-dir", str(root), "--input", '{"text": "milk"}')
    assert out.exit_code == 0 and json.loads(out.stdout)["sub"] == "add" and json.loads(out.stdout)["text"] == "milk"


def test_run_tool_name_validates_subcommand_schema(root):
    """Running a fan-out tool name restores `input["_subcommand"]` and validates against that subcommand's schema"""
    out = invoke("run", "notes__add", "--skills-dir", str(root))
    assert out.exit_code == 1 and json.loads(out.stdout)["need_param"] == "text"


def test_run_unknown_skill_exit_2(root):
    """2 | usage error: … unknown skill"""
    usage_error(invoke("run", "nope_not_here", "--skills-dir", str(root)), "nope_not_here")


def test_run_missing_name_exit_2():
    """2 | usage error: unknown command or option …"""
    usage_error(invoke("run"))


@pytest.mark.parametrize("value", ["{who", "[1, 2]", '"text"', "null", "42", ""])
def test_run_input_not_an_object_exit_2(root, value):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    usage_error(invoke("run", "greet", "--skills-dir", str(root), "--input", value), "--input")


@pytest.mark.parametrize("value", ["{x", "[1]", '"s"', "true"])
def test_run_context_not_an_object_exit_2(root, value):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "a"}', "--context", value)
    usage_error(out, "--context")


def test_run_bad_json_message_says_the_fix(root):
    """`run` … 2 on usage errors (unknown skill, bad JSON), with a message that says what to fix. (issue 2)"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", "{who")
    usage_error(out)
    assert "JSON" in out.stderr and "Traceback" not in out.stderr


def test_run_input_from_file(root, tmp_path):
    """`--input` | the input: a JSON object inline, or `@path` to a JSON file (default `{}`)"""
    (tmp_path / "in.json").write_text('{"who": "File"}', encoding="utf-8")
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", f"@{tmp_path / 'in.json'}")
    assert out.exit_code == 0 and json.loads(out.stdout)["greeting"] == "hi File"


def test_run_input_from_file_with_bom(root, tmp_path):
    """`--input` | … or `@path` to a JSON file"""
    (tmp_path / "in.json").write_bytes(b"\xef\xbb\xbf" + b'{"who": "Bom"}')
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", f"@{tmp_path / 'in.json'}")
    assert out.exit_code == 0 and json.loads(out.stdout)["greeting"] == "hi Bom"


def test_run_context_from_file(root, tmp_path):
    """`--context` | `runtime_context` fields: a JSON object or `@path`"""
    (tmp_path / "ctx.json").write_text('{"actor_name": "Ada", "session_id": "s1"}', encoding="utf-8")
    out = invoke(
        "run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--context", f"@{tmp_path / 'ctx.json'}"
    )
    assert out.exit_code == 0 and json.loads(out.stdout)["actor"] == "Ada" and json.loads(out.stdout)["session"] == "s1"


@pytest.mark.parametrize("option", ["--input", "--context"])
def test_run_at_missing_file_exit_2(root, tmp_path, option):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    args = ["run", "greet", "--skills-dir", str(root), option, f"@{tmp_path / 'missing.json'}"]
    usage_error(invoke(*args), option)


@pytest.mark.parametrize("option", ["--input", "--context"])
def test_run_at_directory_exit_2(root, tmp_path, option):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    usage_error(invoke("run", "greet", "--skills-dir", str(root), option, f"@{tmp_path}"), option)


@pytest.mark.parametrize("option", ["--input", "--context"])
def test_run_at_file_not_an_object_exit_2(root, tmp_path, option):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    usage_error(invoke("run", "greet", "--skills-dir", str(root), option, f"@{tmp_path / 'list.json'}"), option)


@pytest.mark.parametrize("option", ["--input", "--context"])
def test_run_at_file_not_utf8_exit_2(root, tmp_path, option):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    (tmp_path / "latin1.json").write_bytes(b'{"who": "Jos\xe9"}')
    usage_error(invoke("run", "greet", "--skills-dir", str(root), option, f"@{tmp_path / 'latin1.json'}"), option)


def test_run_input_default_is_empty_object(root):
    """`--input` | … (default `{}`)"""
    out = invoke("run", "notes__list", "--skills-dir", str(root))
    assert out.exit_code == 0 and json.loads(out.stdout)["sub"] == "list"


def test_run_skills_dir_missing_exit_2(tmp_path):
    """2 | usage error: … missing `--skills-dir`"""
    usage_error(invoke("run", "greet", "--skills-dir", str(tmp_path / "nope")))


def test_run_workspace_created_if_missing(root, tmp_path):
    """`--workspace DIR` | the run's `workspace_dir` (created if missing)"""
    ws = tmp_path / "a" / "b" / "ws"
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--workspace", str(ws))
    assert out.exit_code == 0 and Path(json.loads(out.stdout)["ws"]).resolve() == ws.resolve() and ws.is_dir()


def test_run_workspace_that_is_a_file_exit_2(root, tmp_path):
    """2 | usage error … (a workspace that is a file cannot be the run's folder)"""
    target = tmp_path / "f.txt"
    target.write_text("x")
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--workspace", str(target))
    usage_error(out)


def test_run_default_workspace(root, home):
    """default `SKILLYARD_HOME/workspaces/<session_id or default>`"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}')
    assert Path(json.loads(out.stdout)["ws"]).resolve() == (home / "workspaces" / "default").resolve()


def test_run_session_workspace(root, home):
    """`--session ID` | the session: its workspace and attachments"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--session", "sess-1")
    env = json.loads(out.stdout)
    assert Path(env["ws"]).resolve() == (home / "workspaces" / "sess-1").resolve() and env["session"] == "sess-1"


def test_run_context_session_same_as_session(root, home):
    """`--session ID` | … (same as `"session_id"` in `--context`)"""
    out = invoke(
        "run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--context", '{"session_id": "c-9"}'
    )
    assert Path(json.loads(out.stdout)["ws"]).resolve() == (home / "workspaces" / "c-9").resolve()


@pytest.mark.parametrize("session", ["../escape", "", "a/b", ".hidden", "x" * 129, "sp ace"])
def test_run_unsafe_session_exit_2(root, session):
    """2 | usage error: … unsafe `session_id`"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--session", session)
    usage_error(out)


def test_run_unsafe_session_in_context_exit_2(root):
    """2 | usage error: … unsafe `session_id`"""
    ctx = '{"session_id": "../../etc"}'
    usage_error(invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--context", ctx))


def test_run_unsafe_session_message_says_the_rule(root):
    """A session id must be 1–128 letters, digits, `_`, `-` or `.`, starting with a letter or digit; anything else is
    refused with that explanation."""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--session", "../x")
    usage_error(out, "128")


def test_run_context_actor_reaches_skill(root):
    """`--context` | `runtime_context` fields: … e.g. `{"role_id": "sales", "actor_name": "Ada", "session_id": "s1"}`"""
    ctx = '{"role_id": "sales", "actor_name": "Ada"}'
    env = json.loads(
        invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--context", ctx).stdout
    )
    assert env["actor"] == "Ada" and env["role"] == "sales"


def test_run_credential_in_input_is_dropped(root):
    """Credentials the caller passes in the input are dropped and taken from configs."""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x", "api_key": "sk-passed-in-input"}')
    assert out.exit_code == 0 and "sk-passed-in-input" not in out.stdout


def test_run_example_hello():
    """$ skillyard run hello --skills-dir examples --input '{"who": "Ada"}'"""
    out = invoke("run", "hello", "--skills-dir", str(EXAMPLES), "--input", '{"who": "Ada"}')
    env = json.loads(out.stdout)
    assert out.exit_code == 0 and env["ok"] is True and env["greeting"] == "Hello, Ada!" and env["success"] is True


def test_run_example_guestbook_failure(db_env):
    """$ skillyard run guestbook --skills-dir examples --input '{"name": "", "message": "Hi"}'; echo $? … 1"""
    out = invoke("run", "guestbook", "--skills-dir", str(EXAMPLES), "--input", '{"name": "", "message": "Hi"}')
    env = json.loads(out.stdout)
    assert out.exit_code == 1 and env["need_param"] == "name" and env["error_type"] == "recoverable"
    assert env["skill"] == "guestbook" and "call 'guestbook' again" in env["error"]


def test_run_shell_example():
    """skillyard run shout --skills-dir examples --input '{"text": "hi", "times": 2}'       # a shell skill"""
    out = invoke("run", "shout", "--skills-dir", str(EXAMPLES), "--input", '{"text": "hi", "times": 2}')
    assert out.exit_code == 0 and "HI" in out.stdout


def test_run_python_cli_example():
    """skillyard run word_count --skills-dir examples --input '{"text": "one two three"}'   # a Python CLI skill"""
    out = invoke("run", "word_count", "--skills-dir", str(EXAMPLES), "--input", '{"text": "one two three"}')
    assert out.exit_code == 0 and json.loads(out.stdout)["ok"] is True and "3" in out.stdout


# --- attachments from the command line


def test_run_attach_needs_a_session(root, tmp_path):
    """`--attach PATH` | register a file as an attachment of the session before the run (repeatable; needs a session)"""
    (tmp_path / "p.png").write_bytes(b"\x89PNG")
    out = invoke(
        "run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--attach", str(tmp_path / "p.png")
    )
    usage_error(out, "session")


def test_run_attach_prints_ids_on_stderr(db_env, root, tmp_path):
    """The reference ids (`img_1`, `file_1`, …) are printed on stderr as `attached img_1: /abs/path`"""
    (tmp_path / "p.png").write_bytes(b"\x89PNG")
    (tmp_path / "d.txt").write_text("doc")
    session = "att-" + uuid.uuid4().hex[:8]
    args = ["run", "greet", "--skills-dir", str(root), "--input", '{"who": "img_1"}', "--session", session]
    out = invoke(*args, "--attach", str(tmp_path / "p.png"), "--attach", str(tmp_path / "d.txt"))
    assert out.exit_code == 0, out.output
    assert f"attached img_1: {(tmp_path / 'p.png').resolve()}" in out.stderr
    assert f"attached file_1: {(tmp_path / 'd.txt').resolve()}" in out.stderr
    assert "attached" not in out.stdout


def test_run_attach_ref_usable_in_input(db_env, root, tmp_path):
    """… so the input can use them: `--input '{"image": "img_1"}'`"""
    (tmp_path / "p.png").write_bytes(b"\x89PNG")
    session = "att-" + uuid.uuid4().hex[:8]
    args = ["run", "greet", "--skills-dir", str(root), "--input", '{"who": "img_1"}', "--session", session]
    out = invoke(*args, "--attach", str(tmp_path / "p.png"))
    assert json.loads(out.stdout)["greeting"] == f"hi {(tmp_path / 'p.png').resolve()}"


def test_run_attach_with_context_session(db_env, root, tmp_path):
    """`--session ID` | … (same as `"session_id"` in `--context`); `--attach` … needs a session"""
    (tmp_path / "p.png").write_bytes(b"\x89PNG")
    ctx = json.dumps({"session_id": "att-" + uuid.uuid4().hex[:8]})
    args = ["run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--context", ctx]
    out = invoke(*args, "--attach", str(tmp_path / "p.png"))
    assert out.exit_code == 0 and "attached img_1:" in out.stderr, out.output


def test_run_attach_missing_file_exit_2(root, tmp_path):
    """2 | usage error … (an --attach path that does not exist)"""
    args = ["run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--session", "s"]
    usage_error(invoke(*args, "--attach", str(tmp_path / "missing.png")))


# --- host errors around a run


def test_run_database_unreachable_exit_2(root, monkeypatch):
    """2 | … host errors raised around a run (database unreachable, …)"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://probe:probe-pass-1@127.0.0.1:1/nodb")
    out = invoke("run", "dbuser", "--skills-dir", str(root))
    usage_error(out, "SKILLYARD_DATABASE_URL")
    assert "probe-pass-1" not in out.output


def test_run_database_bad_scheme_exit_2(root, monkeypatch):
    """`SKILLYARD_DATABASE_URL` | … Any other scheme is an error."""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "mysql://probe:probe-pass-2@127.0.0.1/nodb")
    out = invoke("run", "dbuser", "--skills-dir", str(root))
    usage_error(out, "SKILLYARD_DATABASE_URL")
    assert "probe-pass-2" not in out.output


def test_run_with_database(db_env, root):
    """`db` is a live SQLAlchemy `AsyncSession` … a skill that uses `db`"""
    out = invoke("run", "dbuser", "--skills-dir", str(root))
    assert out.exit_code == 0 and json.loads(out.stdout)["has_db"] is True


@pytest.mark.parametrize("variable", ["SKILLYARD_WALL_CLOCK", "SKILLYARD_SUBPROCESS_TIMEOUT"])
def test_bad_timeout_variable_names_it(root, monkeypatch, variable):
    """The timeouts must be numbers; anything else stops skillyard with a message naming the variable."""
    monkeypatch.setenv(variable, "soon")
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}')
    assert out.exit_code != 0 and no_traceback(out) and variable in out.stderr and not out.stdout


def test_run_bad_secret_key_names_it(root, monkeypatch):
    """host errors raised around a run (… a secret that cannot be decrypted)"""
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", "not-a-fernet-key")
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}')
    assert out.exit_code in (0, 2) and no_traceback(out)
    if out.exit_code == 2:
        assert "SKILLYARD_SECRET_KEY" in out.stderr and "not-a-fernet-key" not in out.output


# ---------------------------------------------------------------------------------------------------------------
# config (real PostgreSQL)


def test_config_set_plain_and_secret(db_env):
    """keys containing `key`, `token`, … are encrypted and reported as `set SKILL.KEY (secret, encrypted)`"""
    skill = "cfg" + uuid.uuid4().hex[:6]
    out = invoke("config", "set", skill, "api_token=abc12345", "units=metric")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert f"set {skill}.api_token (secret, encrypted)" in lines and f"set {skill}.units" in lines
    assert "abc12345" not in out.output


def test_config_keys_normalized(db_env):
    """Keys are normalized (`api-token` → `api_token`)"""
    skill = "cfg" + uuid.uuid4().hex[:6]
    out = invoke("config", "set", skill, "api-token=abc12345", "my name=v")
    assert f"{skill}.api_token" in out.stdout and f"{skill}.my_name" in out.stdout
    listing = invoke("config", "list", skill)
    assert "api_token = ********" in listing.stdout and "my_name = v" in listing.stdout


def test_config_list_sorted_and_masked(db_env):
    """`list` prints `KEY = VALUE` sorted by key, with credential values shown as `********`."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "zeta=1", "alpha=2", "db_password=hunter22", "Mid=3")
    out = invoke("config", "list", skill)
    assert out.exit_code == 0
    lines = out.stdout.splitlines()
    assert [line.split(" = ")[0] for line in lines] == sorted(["zeta", "alpha", "db_password", "Mid"])
    assert "db_password = ********" in lines and "hunter22" not in out.output


@pytest.mark.parametrize("key", ["key", "token", "secret", "password", "credential", "auth"])
def test_config_credential_substrings_encrypted(db_env, key):
    """keys containing `key`, `token`, `secret`, `password`, `credential` or `auth` are encrypted"""
    skill = "cfg" + uuid.uuid4().hex[:6]
    out = invoke("config", "set", skill, f"My{key.upper()}x=value-{key}-1234")
    assert "(secret, encrypted)" in out.stdout and f"value-{key}-1234" not in invoke("config", "list", skill).stdout


def test_config_secret_stored_encrypted(db_env, database_url):
    """**Encryption.** A key containing `key`, … is stored encrypted with Fernet"""
    import asyncpg

    from support.datatable import asyncpg_dsn

    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "api_key=plain-text-never-stored")

    async def read() -> list[Any]:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            return [dict(r) for r in await conn.fetch("SELECT * FROM skillyard.skill_configs WHERE skill = $1", skill)]
        finally:
            await conn.close()

    rows = asyncio.run(read())
    assert rows and "plain-text-never-stored" not in json.dumps(rows, default=str)


def test_config_secret_key_file_mode(db_env, home, monkeypatch):
    """The key is `SKILLYARD_SECRET_KEY` if set, else `SKILLYARD_HOME/secret.key`, created with mode 0600 the first
    time a secret is stored."""
    monkeypatch.delenv("SKILLYARD_SECRET_KEY", raising=False)
    invoke("config", "set", "cfg" + uuid.uuid4().hex[:6], "token=abcd1234")
    key_file = home / "secret.key"
    assert key_file.is_file() and (key_file.stat().st_mode & 0o777) == 0o600


def test_config_set_replaces(db_env):
    """Setting a key again replaces it."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "units=metric")
    invoke("config", "set", skill, "units=imperial")
    assert invoke("config", "list", skill).stdout.splitlines() == ["units = imperial"]


@pytest.mark.parametrize("pair", ["nokey", "=value", " =value"])
def test_config_set_bad_pair_exit_2(db_env, pair):
    """`set` stores each pair (a pair without `=` or with an empty key exits 2)."""
    usage_error(invoke("config", "set", "cfgbad", pair), "KEY=VALUE")


def test_config_bad_pair_stores_nothing(db_env):
    """`set` stores each pair (a pair without `=` or with an empty key exits 2)."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    out = invoke("config", "set", skill, "good=1", "bad")
    assert out.exit_code == 2 and invoke("config", "list", skill).stdout.strip() == ""


def test_config_dash_key_after_double_dash(db_env):
    """A key that starts with `-` is read as an option; put such pairs after `--`."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    out = invoke("config", "set", skill, "--", "--api-token=zz991122")
    assert out.exit_code == 0 and f"set {skill}.api_token (secret, encrypted)" in out.stdout


def test_config_unset_keys(db_env):
    """`unset` removes the given keys … and prints `removed N key(s)`."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "a=1", "b=2", "c=3")
    out = invoke("config", "unset", skill, "a", "b")
    assert out.exit_code == 0 and out.stdout.strip() == "removed 2 key(s)"
    assert invoke("config", "list", skill).stdout.splitlines() == ["c = 3"]


def test_config_unset_all(db_env):
    """`unset` removes … every key of the skill for that role when none is given"""
    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "a=1", "b=2")
    invoke("config", "set", skill, "a=9", "--role", "other")
    assert invoke("config", "unset", skill).stdout.strip() == "removed 2 key(s)"
    assert invoke("config", "list", skill, "--role", "other").stdout.splitlines() == ["a = 9"]


def test_config_unset_missing_key_removes_zero(db_env):
    """`unset` … prints `removed N key(s)`."""
    assert invoke("config", "unset", "cfg" + uuid.uuid4().hex[:6], "nothing").stdout.strip() == "removed 0 key(s)"


def test_config_roles_are_separate(db_env):
    """Per-role skill configs … `--role` defaults to `$SKILLYARD_ROLE`, else the default role `""`."""
    skill = "cfg" + uuid.uuid4().hex[:6]
    invoke("config", "set", skill, "units=metric", "--role", "sales")
    assert invoke("config", "list", skill).stdout.strip() == ""
    assert invoke("config", "list", skill, "--role", "sales").stdout.splitlines() == ["units = metric"]


def test_config_role_from_environment(db_env, monkeypatch):
    """`--role` defaults to `$SKILLYARD_ROLE`"""
    skill = "cfg" + uuid.uuid4().hex[:6]
    monkeypatch.setenv("SKILLYARD_ROLE", "support")
    invoke("config", "set", skill, "units=metric")
    monkeypatch.delenv("SKILLYARD_ROLE")
    assert invoke("config", "list", skill, "--role", "support").stdout.splitlines() == ["units = metric"]


def test_config_skill_not_checked_against_catalog(db_env):
    """The skill name is not checked against the catalog."""
    out = invoke("config", "set", "definitely_not_a_skill_" + uuid.uuid4().hex[:6], "a=1")
    assert out.exit_code == 0


def test_config_missing_pairs_exit_2(db_env):
    """2 | usage error: unknown command or option … (set needs KEY=VALUE pairs)"""
    usage_error(invoke("config", "set", "x"))


def test_config_unreachable_database_exit_2(monkeypatch):
    """2 | … host errors raised around a run (database unreachable, …)"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:cfg-pass-77@127.0.0.1:1/db")
    out = invoke("config", "list", "x")
    usage_error(out)
    assert "cfg-pass-77" not in out.output


def test_config_role_reaches_run(db_env, tmp_path):
    """Configs are read for the `role_id` given in `--context` (default role `""`)."""
    skill = "leaky" + uuid.uuid4().hex[:6]
    write_skill(
        tmp_path / "cr",
        skill,
        f"name: {skill}\ndescription: d",
        files={"handler.py": GREET, "schema.json": GREET_SCHEMA},
    )
    invoke("config", "set", skill, "api_key=role-secret-value", "--role", "sales")
    base = ["run", skill, "--skills-dir", str(tmp_path / "cr"), "--input", '{"who": "x"}']
    default = invoke(*base)
    assert default.exit_code == 0 and json.loads(default.stdout)["got_key"] is None
    sales = invoke(*base, "--context", '{"role_id": "sales"}')
    assert sales.exit_code == 0  # the value reached the skill; whether it is echoed is the skill's business
    assert json.loads(sales.stdout)["got_key"] in ("role-secret-value", "***")


def test_run_failure_scrubs_credentials(db_env, root):
    """Credential values (4 characters or more) are replaced by `***` in a failure's `error`"""
    invoke("config", "set", "leaky", "api_token=Sup3rS3cretValue")
    out = invoke("run", "leaky", "--skills-dir", str(root))
    assert out.exit_code == 1 and "Sup3rS3cretValue" not in out.output and "***" in json.loads(out.stdout)["error"]


def test_run_undecryptable_secret_exit_2(db_env, root, monkeypatch):
    """host errors raised around a run (… a secret that cannot be decrypted); reading them with another key fails
    with a message saying so (set them again, or restore the key)"""
    from cryptography.fernet import Fernet

    invoke("config", "set", "leaky", "api_token=EncryptedWithKeyA")
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", Fernet.generate_key().decode())
    out = invoke("run", "leaky", "--skills-dir", str(root))
    usage_error(out, "key")
    assert "EncryptedWithKeyA" not in out.output


# ---------------------------------------------------------------------------------------------------------------
# artifacts


def test_artifacts_needs_session():
    """skillyard artifacts --session ID [--json]"""
    usage_error(invoke("artifacts"))


@pytest.mark.parametrize("session", ["../x", "a b", ""])
def test_artifacts_unsafe_session_exit_2(session):
    """A session id that is not a safe name is a usage error (exit 2)."""
    usage_error(invoke("artifacts", "--session", session))


def test_artifacts_empty_session_json(db_env):
    """`--json` prints an array of objects"""
    out = invoke("artifacts", "--session", "empty-" + uuid.uuid4().hex[:8], "--json")
    assert out.exit_code == 0 and json.loads(out.stdout) == []


def test_artifacts_empty_session_text(db_env):
    """Lists a session's attachments (none: a line saying so, exit 0)"""
    out = invoke("artifacts", "--session", "empty-" + uuid.uuid4().hex[:8])
    assert out.exit_code == 0 and no_traceback(out)


@pytest.fixture
def attached(db_env, root, tmp_path) -> tuple[str, Path]:
    session = "art-" + uuid.uuid4().hex[:8]
    image = tmp_path / "photo.png"
    image.write_bytes(b"\x89PNG-not-really")
    out = invoke(
        "run",
        "greet",
        "--skills-dir",
        str(root),
        "--input",
        '{"who": "x"}',
        "--session",
        session,
        "--attach",
        str(image),
    )
    assert out.exit_code == 0, out.output
    return session, image


def test_artifacts_json_fields(attached):
    """`--json` prints an array of objects with `ref`, `type`, `filename`, `local_path`, `url`, `size`, `sha256`,
    `skill` (empty for uploads) and `created_at` (ISO 8601, UTC)."""
    import hashlib
    from datetime import datetime, timedelta

    session, image = attached
    items = json.loads(invoke("artifacts", "--session", session, "--json").stdout)
    assert len(items) == 1
    item = items[0]
    assert set(item) >= {"ref", "type", "filename", "local_path", "url", "size", "sha256", "skill", "created_at"}
    assert item["ref"] == "img_1" and item["type"] == "image" and item["filename"] == "photo.png"
    assert Path(item["local_path"]).resolve() == image.resolve() and item["skill"] == ""
    assert item["size"] == image.stat().st_size and item["sha256"] == hashlib.sha256(image.read_bytes()).hexdigest()
    created = datetime.fromisoformat(item["created_at"].replace("Z", "+00:00"))
    assert created.utcoffset() == timedelta(0)


def test_artifacts_table(attached):
    """The table shows ref, type, file name, size, producing skill and path"""
    session, image = attached
    out = invoke("artifacts", "--session", session)
    assert (
        out.exit_code == 0
        and "img_1" in out.stdout
        and "photo.png" in out.stdout
        and str(image.resolve()) in out.stdout
    )


def test_artifacts_lists_produced_files(db_env):
    """Lists a session's attachments: uploads (`--attach`, `yard.attach`) and the files its skills produced."""
    session = "rep-" + uuid.uuid4().hex[:8]
    out = invoke(
        "run", "word_report", "--skills-dir", str(EXAMPLES), "--session", session, "--input", '{"text": "a b a"}'
    )
    assert out.exit_code == 0, out.output
    items = json.loads(invoke("artifacts", "--session", session, "--json").stdout)
    assert [(i["ref"], i["type"], i["skill"]) for i in items] == [("file_1", "file", "word_report")]
    assert "word_report" in invoke("artifacts", "--session", session).stdout


# ---------------------------------------------------------------------------------------------------------------
# validate


def test_validate_clean_root_exit_0():
    """Exit 1 when any skill has an error or when no skill folder is found; warnings alone exit 0."""
    out = invoke("validate", str(EXAMPLES))
    assert out.exit_code == 0, out.output


def test_validate_single_skill_folder(root):
    """Each `PATH` is a root (a folder of skills) or a single skill folder."""
    out = invoke("validate", "--json", str(root / "greet"))
    assert out.exit_code == 0 and [r["name"] for r in json.loads(out.stdout)] == ["greet"]


def test_validate_json_shape(root):
    """`--json` prints a list of `{name, dir, errors, warnings, secret_params}`."""
    out = invoke("validate", "--json", str(root))
    reports = json.loads(out.stdout)
    assert reports and all(set(r) == {"name", "dir", "errors", "warnings", "secret_params"} for r in reports)


def test_validate_secret_params_listed(root):
    """Warnings: … each parameter the credential rule matched with what was decided (`x-secret`)."""
    report = next(r for r in json.loads(invoke("validate", "--json", str(root)).stdout) if r["name"] == "greet")
    assert report["secret_params"] == ["api_key"] or "api_key" in json.dumps(report["secret_params"])


def test_validate_empty_folder_exit_1(tmp_path):
    """Exit 1 … when no skill folder is found"""
    (tmp_path / "empty").mkdir()
    out = invoke("validate", str(tmp_path / "empty"))
    assert out.exit_code == 1 and no_traceback(out)


def test_validate_missing_path_is_not_success(tmp_path):
    """Exit 1 … when no skill folder is found (a path that does not exist finds none)"""
    out = invoke("validate", str(tmp_path / "nope"))
    assert out.exit_code in (1, 2) and no_traceback(out)


def test_validate_needs_a_path():
    """skillyard validate PATH... [--json]"""
    usage_error(invoke("validate"))


VALIDATE_ERRORS = {
    "nodesc": ("name: nodesc", {"handler.py": "async def execute(input, ctx):\n    return {}\n"}, "description"),
    "defaulted": (
        "name: defaulted\ndescription: d",
        {"handler.py": "async def execute(input, ctx=None):\n    return {}\n"},
        "default",
    ),
    "syncdb": (
        "name: syncdb\ndescription: d",
        {"handler.py": "def execute(input, ctx):\n    return {'x': ctx['db']}\n"},
        "db",
    ),
    "syntax": ("name: syntax\ndescription: d", {"handler.py": "async def execute(input, ctx)\n    return {}\n"}, ""),
    "noconfig": ("name: noconfig\ndescription: d\nexec:\n  config: missing.py", {}, "missing.py"),
    "stdoutlog": (
        "name: stdoutlog\ndescription: d",
        {
            "main.py": (
                "import argparse, logging, sys\nlogging.basicConfig(stream=sys.stdout)\n"
                "def main():\n    argparse.ArgumentParser().parse_args()\n    print('{}')\n"
                "if __name__ == '__main__':\n    main()\n"
            )
        },
        "",
    ),
}


@pytest.mark.parametrize("name", sorted(VALIDATE_ERRORS))
def test_validate_errors(tmp_path, name):
    """Errors: anything that stops the skill from loading (frontmatter, schema, missing `exec.config`, syntax errors),
    no `description` in the frontmatter, an entry function whose second parameter has a default, a sync entry that
    uses `db`, a Python CLI skill that configures logging to stdout."""
    frontmatter, files, needle = VALIDATE_ERRORS[name]
    if name == "stdoutlog":
        frontmatter += "\nexec:\n  config: main.py"
    folder = write_skill(tmp_path / "v", name, frontmatter, files=files)
    out = invoke("validate", "--json", str(folder))
    assert out.exit_code == 1, out.output
    errors = " ".join(json.loads(out.stdout)[0]["errors"])
    assert errors and needle in errors, errors


VALIDATE_WARNINGS = {
    "constant": ("API_TOKEN_NAME = 'x'\nasync def execute(input, ctx):\n    return {}\n", "API_TOKEN_NAME"),
    "environ": (
        "import os\nasync def execute(input, ctx):\n    return {'v': os.environ.get('UNDECLARED_VAR_X')}\n",
        "UNDECLARED_VAR_X",
    ),
    "getenv": (
        "import os\nasync def execute(input, ctx):\n    return {'v': os.getenv('UNDECLARED_VAR_Y')}\n",
        "UNDECLARED_VAR_Y",
    ),
}


@pytest.mark.parametrize("name", sorted(VALIDATE_WARNINGS))
def test_validate_warnings_exit_0(tmp_path, name):
    """Warnings: … module constants whose names contain a credential substring, environment variables read with
    `os.environ`/`os.getenv` but not declared under `requires.env` … warnings alone exit 0."""
    code, needle = VALIDATE_WARNINGS[name]
    folder = write_skill(tmp_path / "v", name, f"name: {name}\ndescription: d", files={"handler.py": code})
    out = invoke("validate", "--json", str(folder))
    assert out.exit_code == 0, out.output
    assert needle in " ".join(json.loads(out.stdout)[0]["warnings"])


def test_validate_declared_env_is_not_warned(tmp_path):
    """environment variables read with `os.environ`/`os.getenv` but not declared under `requires.env`"""
    code = "import os\nasync def execute(input, ctx):\n    return {'v': os.environ.get('DECLARED_VAR_Z')}\n"
    fm = "name: declared\ndescription: d\nmetadata: {openclaw: {requires: {env: [DECLARED_VAR_Z]}}}"
    folder = write_skill(tmp_path / "v", "declared", fm, files={"handler.py": code})
    out = invoke("validate", "--json", str(folder))
    assert "DECLARED_VAR_Z" not in " ".join(json.loads(out.stdout)[0]["warnings"])


def test_validate_list_warnings_included(state_root):
    """Warnings: every repair and warning of `skillyard list`"""
    out = invoke("validate", "--json", str(state_root[0] / "nodesc"))
    report = json.loads(out.stdout)[0]
    assert any("first line" in w or "description" in w for w in report["warnings"] + report["errors"])


def test_validate_text_names_each_skill(root):
    """Lints skill folders without running them."""
    out = invoke("validate", str(root))
    assert out.exit_code in (0, 1) and "greet" in out.stdout and "boom" in out.stdout


# ---------------------------------------------------------------------------------------------------------------
# doctor (real PostgreSQL)


def test_doctor_ok_lines_and_count(db_env):
    """prints one line per check: its status (`ok`, `warn` or `fail`), its name, what was found … then a count."""
    out = invoke("doctor")
    assert out.exit_code == 0, out.output
    lines = out.stdout.strip().splitlines()
    for name in ("home", "database", "skills", "datatable.sql_roles"):
        assert any(re.match(rf"^(ok|warn|fail)\s+{re.escape(name)}: ", line) for line in lines), (name, lines)
    assert re.fullmatch(r"\d+ ok, \d+ warn, \d+ fail", lines[-1]), lines[-1]


def test_doctor_json_shape(db_env):
    """`--json` prints `{"status": "ok" | "warn" | "fail" (the worst), "checks": [...]}`, each check
    `{name, status, detail, fix, plugin}` (`fix` null when ok; `plugin` is `core` for the checks above the plugin
    ones)"""
    out = invoke("doctor", "--json")
    report = json.loads(out.stdout)
    assert out.exit_code == 0 and set(report) == {"status", "checks"}
    assert all(set(c) == {"name", "status", "detail", "fix", "plugin"} for c in report["checks"])
    checks = {c["name"]: c for c in report["checks"]}
    assert all(checks[n]["plugin"] == "core" for n in ("home", "database", "skills"))
    assert all(c["fix"] is None for c in report["checks"] if c["status"] == "ok")
    assert all(c["fix"] for c in report["checks"] if c["status"] != "ok")
    worst = max((c["status"] for c in report["checks"]), key=["ok", "warn", "fail"].index)
    assert report["status"] == worst


def test_doctor_database_migrated(db_env):
    """`database` | the database answers … and schema `skillyard` is at this version's newest migration"""
    checks = {c["name"]: c for c in json.loads(invoke("doctor", "--json").stdout)["checks"]}
    assert checks["database"]["status"] == "ok" and "revision" in checks["database"]["detail"]


def test_doctor_unreachable_database_fails(monkeypatch):
    """`database` | … | `fail`; Exit 1 when any check fails"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:doctor-pass-1@127.0.0.1:1/db")
    out = invoke("doctor")
    assert out.exit_code == 1 and no_traceback(out)
    line = next(line for line in out.stdout.splitlines() if "database:" in line)
    assert line.startswith("fail") and "— fix:" in line
    assert "doctor-pass-1" not in out.output


def test_doctor_unreachable_database_json(monkeypatch):
    """`--json` … (the worst) … Passwords in database URLs are shown as `***`."""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:doctor-pass-2@127.0.0.1:1/db")
    out = invoke("doctor", "--json")
    assert out.exit_code == 1 and json.loads(out.stdout)["status"] == "fail" and "doctor-pass-2" not in out.output


def test_doctor_masks_password_of_reachable_url(database_url, monkeypatch):
    """Passwords in database URLs are shown as `***`."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(database_url)
    if parts.password:
        url = database_url
        password = parts.password
    else:  # the embedded test server trusts local connections: any password connects
        password = "Visible-Pass-9"
        user = parts.username or "postgres"
        netloc = f"{user}:{password}@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", url)
    out = invoke("doctor")
    assert password not in out.output, out.output


def test_doctor_home_not_writable_fails(db_env, tmp_path, monkeypatch):
    """`home` | `SKILLYARD_HOME` exists (it is created when missing) and a file can be written in it | `fail`"""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("SKILLYARD_HOME", str(blocker))
    out = invoke("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert out.exit_code == 1 and checks["home"]["status"] == "fail" and checks["home"]["fix"]


def test_doctor_creates_missing_home(db_env, tmp_path, monkeypatch):
    """`home` | `SKILLYARD_HOME` exists (it is created when missing)"""
    target = tmp_path / "new-home"
    monkeypatch.setenv("SKILLYARD_HOME", str(target))
    out = invoke("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert checks["home"]["status"] == "ok" and target.is_dir()


def test_doctor_skill_error_is_a_warning(db_env, state_root):
    """`skills` | at least one skill folder is found and none has an error | `warn` … (warnings alone exit 0)"""
    out = invoke("doctor", "--json", "--skills-dir", str(state_root[0]))
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert out.exit_code == 0 and checks["skills"]["status"] == "warn" and json.loads(out.stdout)["status"] in ("warn",)


def test_doctor_skills_dir_missing_exit_2(db_env, tmp_path):
    """a `--skills-dir` that does not exist is a usage error (exit 2)."""
    usage_error(invoke("doctor", "--skills-dir", str(tmp_path / "nope")))


def test_doctor_sql_roles_check_belongs_to_datatable(db_env):
    """`datatable.sql_roles` | the platform's database user has CREATEROLE or is a superuser"""
    checks = {c["name"]: c for c in json.loads(invoke("doctor", "--json").stdout)["checks"]}
    assert checks["datatable.sql_roles"]["status"] in ("ok", "warn")
    assert checks["datatable.sql_roles"]["plugin"] != "core"


# ---------------------------------------------------------------------------------------------------------------
# datatable (real PostgreSQL)


def create_table(org: str, title: str = "客户") -> str:
    fields = [{"title": "名称", "uidt": "文本"}, {"title": "工号", "uidt": "文本"}, {"title": "金额", "uidt": "数字"}]
    payload = {"action": "create_table", "payload": {"table_name": title, "fields": fields}}
    out = invoke(
        "run",
        "datatable",
        "--context",
        json.dumps({"org_id": org, "team_role": "owner"}),
        "--input",
        json.dumps(payload),
    )
    assert out.exit_code == 0, out.output
    return str(json.loads(out.stdout)["id"])


@pytest.fixture
def dt_org(db_env) -> str:
    org = "cli" + uuid.uuid4().hex[:10]
    create_table(org)
    return org


def dt(*args: str) -> Result:
    return invoke("datatable", *args)


def test_datatable_grant_text(dt_org):
    """$ skillyard datatable grant --org acme --table 客户 --role sales --ops read,insert
    granted sales on 客户: read, insert; all rows"""
    out = dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read,insert")
    assert out.exit_code == 0 and out.stdout.strip() == "granted sales on 客户: read, insert; all rows", out.output


def test_datatable_grant_own_text(dt_org):
    """granted field on 客户: read, update; own rows (by 工号)"""
    args = ["--org", dt_org, "--table", "客户", "--role", "field", "--ops", "read,update", "--row-scope", "own"]
    out = dt("grant", *args, "--owner-field", "工号")
    assert out.exit_code == 0 and out.stdout.strip() == "granted field on 客户: read, update; own rows (by 工号)", (
        out.output
    )


def test_datatable_grant_json(dt_org):
    """`--json` prints the stored grant `{table_id, table, role, ops, row_scope, owner_field}` with `ops` expanded and
    sorted."""
    out = dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read,insert", "--json")
    grant = json.loads(out.stdout)
    assert out.exit_code == 0 and set(grant) == {"table_id", "table", "role", "ops", "row_scope", "owner_field"}
    assert grant["ops"] == ["aggregate", "insert", "list_columns", "query"]
    assert grant["table"] == "客户" and grant["role"] == "sales" and grant["row_scope"] == "all"
    assert grant["owner_field"] is None


def test_datatable_grant_all_expanded(dt_org):
    """Stored expanded, so an action added to the skill later is not granted by an old `all`."""
    grant = json.loads(dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "all", "--json").stdout)
    assert len(grant["ops"]) == 12 and "all" not in grant["ops"]


def test_datatable_grant_write_expanded(dt_org):
    """`write` (the nine write actions)"""
    grant = json.loads(
        dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "write", "--json").stdout
    )
    assert len(grant["ops"]) == 9 and "query" not in grant["ops"]


def test_datatable_grant_fullwidth_comma(dt_org):
    """comma-separated (`,` or `，`) row actions"""
    grant = json.loads(
        dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "query，insert", "--json").stdout
    )
    assert grant["ops"] == ["insert", "query"]


def test_datatable_grant_empty_ops(dt_org):
    """An empty value (`--ops ""`) is a grant of nothing"""
    out = dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "", "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["ops"] == []


def test_datatable_grant_by_table_id(db_env):
    """`--table TABLE` | the table's title (exact) or id"""
    org = "cli" + uuid.uuid4().hex[:10]
    table_id = create_table(org)
    out = dt("grant", "--org", org, "--table", table_id, "--role", "r", "--ops", "read", "--json")
    assert (
        out.exit_code == 0
        and json.loads(out.stdout)["table"] == "客户"
        and json.loads(out.stdout)["table_id"] == table_id
    )


def test_datatable_grant_replaces(dt_org):
    """`grant` sets (or replaces) the grant"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "read")
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "insert")
    grants = json.loads(dt("grants", "--org", dt_org, "--json").stdout)
    assert [g["ops"] for g in grants] == [["insert"]]


def test_datatable_grants_table(dt_org):
    """$ skillyard datatable grants --org acme (TABLE ROLE OPS ROW SCOPE OWNER FIELD; ordered by table and role)"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read,insert")
    args = ["--table", "客户", "--role", "field", "--ops", "read,update", "--row-scope", "own", "--owner-field", "工号"]
    dt("grant", "--org", dt_org, *args)
    out = dt("grants", "--org", dt_org)
    lines = [re.split(r"\s{2,}", line.strip()) for line in out.stdout.strip().splitlines()]
    assert out.exit_code == 0
    assert lines == [
        ["TABLE", "ROLE", "OPS", "ROW SCOPE", "OWNER FIELD"],
        ["客户", "field", "read, update", "own", "工号"],
        ["客户", "sales", "read, insert", "all", "-"],
    ], out.stdout


@pytest.mark.parametrize(("ops", "shown"), [("all", "all"), ("write", "write"), ("", "(none)"), ("read", "read")])
def test_datatable_grants_shortens_groups(dt_org, ops, shown):
    """`OPS` (shortened back to `all`, `read`, `write` where a whole group is granted; `(none)` for an empty grant)"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", ops)
    out = dt("grants", "--org", dt_org)
    row = re.split(r"\s{2,}", out.stdout.strip().splitlines()[1].strip())
    assert row[2] == shown, out.stdout


def test_datatable_grants_empty_org_text(dt_org):
    """an organisation without grants prints a line saying every table is open."""
    out = dt("grants", "--org", dt_org)
    assert out.exit_code == 0 and "open" in out.stdout and len(out.stdout.strip().splitlines()) == 1


def test_datatable_grants_empty_json(dt_org):
    """`--json` prints a list of the grant objects (`[]` when none)."""
    out = dt("grants", "--org", dt_org, "--json")
    assert out.exit_code == 0 and json.loads(out.stdout) == []


def test_datatable_grants_json_objects(dt_org):
    """`--json` prints a list of the grant objects"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "b", "--ops", "read")
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "a", "--ops", "insert")
    grants = json.loads(dt("grants", "--org", dt_org, "--json").stdout)
    assert [g["role"] for g in grants] == ["a", "b"]
    assert all(set(g) == {"table_id", "table", "role", "ops", "row_scope", "owner_field"} for g in grants)


def _schema_exists(database_url: str, org: str) -> bool:
    import asyncpg

    from support.datatable import asyncpg_dsn

    schema = "org_data_" + re.sub(r"[^a-z0-9]", "", org.lower())

    async def check() -> bool:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            return bool(await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", f'"{schema}"'))
        finally:
            await conn.close()

    return asyncio.run(check())


def test_datatable_grants_creates_nothing(db_env, database_url):
    """It creates nothing."""
    org = "cli" + uuid.uuid4().hex[:10]
    out = dt("grants", "--org", org)
    assert out.exit_code == 0 and not _schema_exists(database_url, org)


def test_datatable_refused_grant_changes_nothing(db_env, database_url):
    """A refused command changes nothing (not even the organisation's schema)."""
    org = "cli" + uuid.uuid4().hex[:10]
    out = dt("grant", "--org", org, "--table", "客户", "--role", "r", "--ops", "read")
    assert out.exit_code == 2 and not _schema_exists(database_url, org)


def test_datatable_revoke_text(dt_org):
    """`revoke` removes the grant and prints `revoked the grant of ROLE on TABLE`, or `ROLE had no grant on TABLE;
    nothing changed` (exit 0 either way)"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read")
    first = dt("revoke", "--org", dt_org, "--table", "客户", "--role", "sales")
    again = dt("revoke", "--org", dt_org, "--table", "客户", "--role", "sales")
    assert first.exit_code == 0 and first.stdout.strip() == "revoked the grant of sales on 客户"
    assert again.exit_code == 0 and again.stdout.strip() == "sales had no grant on 客户; nothing changed"


def test_datatable_revoke_json(dt_org):
    """`--json` prints `{"revoked": true|false, "org", "table", "role"}`"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read")
    first = json.loads(dt("revoke", "--org", dt_org, "--table", "客户", "--role", "sales", "--json").stdout)
    again = json.loads(dt("revoke", "--org", dt_org, "--table", "客户", "--role", "sales", "--json").stdout)
    assert first == {"revoked": True, "org": dt_org, "table": "客户", "role": "sales"}
    assert again["revoked"] is False


def test_datatable_revoke_removes_grant(dt_org):
    """`revoke` removes the grant"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read")
    dt("revoke", "--org", dt_org, "--table", "客户", "--role", "sales")
    assert json.loads(dt("grants", "--org", dt_org, "--json").stdout) == []


DT_BAD = {
    "blank org": (["--org", "  ", "--table", "客户", "--role", "r", "--ops", "read"], "--org"),
    "org without letters": (["--org", "!!-", "--table", "客户", "--role", "r", "--ops", "read"], "--org"),
    "unknown table": (["--table", "无此表", "--role", "r", "--ops", "read"], "--table"),
    "unknown op": (["--table", "客户", "--role", "r", "--ops", "read,fly"], "--ops"),
    "ungrantable op": (["--table", "客户", "--role", "r", "--ops", "create_table"], "--ops"),
    "sql op": (["--table", "客户", "--role", "r", "--ops", "sql_query"], "--ops"),
    "own without field": (["--table", "客户", "--role", "r", "--ops", "read", "--row-scope", "own"], "--owner-field"),
    "owner field missing": (
        ["--table", "客户", "--role", "r", "--ops", "read", "--row-scope", "own", "--owner-field", "无"],
        "--owner-field",
    ),
    "owner field wrong type": (
        ["--table", "客户", "--role", "r", "--ops", "read", "--row-scope", "own", "--owner-field", "金额"],
        "--owner-field",
    ),
    "blank role": (["--table", "客户", "--role", " ", "--ops", "read"], "--role"),
    "bad row scope": (["--table", "客户", "--role", "r", "--ops", "read", "--row-scope", "some"], "--row-scope"),
}


@pytest.mark.parametrize("case", sorted(DT_BAD))
def test_datatable_grant_bad_input(dt_org, case):
    """Bad input exits 2 with one `Error:` line naming the option to change and how"""
    args, option = DT_BAD[case]
    if "--org" not in args:
        args = ["--org", dt_org, *args]
    out = dt("grant", *args)
    usage_error(out, option)
    error_lines = [line for line in out.stderr.splitlines() if line.startswith("Error:")]
    assert len(error_lines) == 1 and option in error_lines[0], out.stderr


def test_datatable_unknown_table_lists_tables(dt_org):
    """an unknown table (the message lists the organisation's tables)"""
    out = dt("grant", "--org", dt_org, "--table", "无此表", "--role", "r", "--ops", "read")
    usage_error(out, "客户")


def test_datatable_owner_field_message_lists_fields(dt_org):
    """e.g. `Error: --owner-field: row_scope 'own' needs owner_field: the field of table '客户' holding the owner's
    employee number (fields: 名称, 工号, 金额)`"""
    out = dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "read", "--row-scope", "own")
    usage_error(out, "Error: --owner-field: row_scope 'own' needs owner_field", "(fields: 名称, 工号, 金额)")


@pytest.mark.parametrize("missing", ["--org", "--table", "--role", "--ops"])
def test_datatable_grant_missing_required_option(dt_org, missing):
    """skillyard datatable grant  --org ORG --table TABLE --role ROLE --ops OPS (required options)"""
    values = {"--org": dt_org, "--table": "客户", "--role": "r", "--ops": "read"}
    args = [x for key, value in values.items() if key != missing for x in (key, value)]
    usage_error(dt("grant", *args), missing)


def test_datatable_revoke_unknown_table_exit_2(dt_org):
    """Bad input exits 2 … an unknown table (the message lists the organisation's tables)"""
    usage_error(dt("revoke", "--org", dt_org, "--table", "无此表", "--role", "r"), "--table")


def test_datatable_grants_blank_org_exit_2(db_env):
    """Bad input exits 2 … a blank `--org` (or one without letters or digits)"""
    usage_error(dt("grants", "--org", " "), "--org")


def test_datatable_unreachable_database_exit_2(monkeypatch):
    """Bad input exits 2 with one `Error:` line …: … an unreachable database."""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:dt-pass-5@127.0.0.1:1/db")
    out = dt("grants", "--org", "acme")
    usage_error(out)
    assert "dt-pass-5" not in out.output
    assert len([line for line in out.stderr.splitlines() if line.startswith("Error:")]) == 1


def test_datatable_grant_enforced_on_run(dt_org):
    """a role with grants on a table may run only the granted actions"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read")
    ctx = json.dumps({"org_id": dt_org, "role_id": "sales"})
    payload = json.dumps({"action": "insert", "table_name": "客户", "data": {"名称": "Ada"}})
    out = invoke("run", "datatable", "--context", ctx, "--input", payload)
    assert out.exit_code == 1 and json.loads(out.stdout)["ok"] is False


def test_datatable_run_blank_org_is_a_failure_envelope(db_env):
    """`org_id` | … blank → `error_type: config`, `non_retriable`, nothing created"""
    out = invoke("run", "datatable", "--context", '{"org_id": ""}', "--input", '{"action": "list_tables"}')
    env = json.loads(out.stdout)
    assert out.exit_code == 1 and env["error_type"] == "config" and env["non_retriable"] is True


# ---------------------------------------------------------------------------------------------------------------
# agent check


def test_agent_check_example_exit_0():
    """skillyard agent check examples/agents/notes … summary line `AGENT_DIR: N error(s), M warning(s)`"""
    out = invoke("agent", "check", str(NOTES_AGENT))
    assert out.exit_code == 0, out.output
    assert re.search(r": 0 error\(s\), \d+ warning\(s\)\s*$", out.stdout.strip()), out.stdout


def test_agent_check_example_json():
    """`--json` | print a JSON list of findings"""
    out = invoke("agent", "check", str(NOTES_AGENT), "--json")
    assert out.exit_code == 0 and isinstance(json.loads(out.stdout), list)


@pytest.fixture
def broken_agent(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    shutil.copytree(NOTES_AGENT, agent)
    contract = json.dumps(
        {
            "target": "save_note",
            "tools": {
                "save_note": {
                    "sideEffect": "WRITE",
                    "args": {"title": {"sources": ["USER"]}, "no_such_field": {"sources": ["USER"]}},
                    "success": {"path": "saved", "op": "EQ", "value": True},
                },
                "find_note": {"args": {"title": {"sources": ["USER", "MODEL"]}}},
            },
        }
    )
    (agent / "skills" / "keeper" / "contract.json").write_text(contract, encoding="utf-8")
    return agent


FINDING_KEYS = {"kind", "severity", "skill", "tool", "rule", "path", "message"}


def test_agent_check_preflight_error_exit_1(broken_agent):
    """Exit 1 when any finding is an error"""
    out = invoke("agent", "check", str(broken_agent))
    assert out.exit_code == 1 and no_traceback(out)
    assert "preflight.arg_path" in out.stdout and "1 error(s), 0 warning(s)" in out.output


def test_agent_check_json_findings(broken_agent):
    """`--json` | print a JSON list of findings: `{kind: "load" | "preflight", severity, skill, tool, rule, path,
    message}`"""
    out = invoke("agent", "check", str(broken_agent), "--json")
    findings = json.loads(out.stdout)
    assert out.exit_code == 1 and findings and all(set(f) == FINDING_KEYS for f in findings)
    error = next(f for f in findings if f["severity"] == "error")
    assert error["kind"] == "preflight" and error["rule"] == "preflight.arg_path" and error["tool"] == "save_note"


def test_agent_check_load_error(tmp_path):
    """`{kind: "load" | "preflight", …}`; Exit code 1 when any skill fails to load"""
    agent = tmp_path / "agent"
    shutil.copytree(NOTES_AGENT, agent)
    (agent / "skills" / "keeper" / "contract.json").write_text('{"target": "find_note", "tools": {}}', encoding="utf-8")
    out = invoke("agent", "check", str(agent), "--json")
    findings = json.loads(out.stdout)
    assert out.exit_code == 1 and any(f["kind"] == "load" and f["severity"] == "error" for f in findings), findings


def test_agent_check_missing_dir_exit_2(tmp_path):
    """`AGENT_DIR` | the agent folder (with `AGENT.md`); must exist"""
    usage_error(invoke("agent", "check", str(tmp_path / "nope")))


def test_agent_check_file_exit_2(tmp_path):
    """`AGENT_DIR` | the agent folder (with `AGENT.md`); must exist"""
    (tmp_path / "f").write_text("x")
    usage_error(invoke("agent", "check", str(tmp_path / "f")))


def test_agent_check_no_agent_md_exit_1(tmp_path):
    """A missing `AGENT.md` … raises `AgentProfileError` (`skillyard agent check` prints it and exits 1)."""
    (tmp_path / "empty").mkdir()
    out = invoke("agent", "check", str(tmp_path / "empty"))
    assert out.exit_code == 1 and no_traceback(out) and "AGENT.md" in out.output


def test_agent_check_missing_agent_code_exit_1(tmp_path):
    """a missing `agent_code` … raises `AgentProfileError` (`skillyard agent check` prints it and exits 1)."""
    agent = tmp_path / "agent"
    shutil.copytree(NOTES_AGENT, agent)
    (agent / "AGENT.md").write_text(
        "---\nagent_name: x\nskills: [notes.keeper]\n---\n# Identity\nx\n", encoding="utf-8"
    )
    out = invoke("agent", "check", str(agent))
    assert out.exit_code == 1 and no_traceback(out) and "agent_code" in out.output


def test_agent_check_inactive_agent_exit_1(tmp_path):
    """status: … any other value: the agent does not load (… agent check exits 1)"""
    agent = tmp_path / "agent"
    shutil.copytree(NOTES_AGENT, agent)
    text = (
        (agent / "AGENT.md")
        .read_text(encoding="utf-8")
        .replace("agent_code: notes", "agent_code: notes\nstatus: DRAFT")
    )
    (agent / "AGENT.md").write_text(text, encoding="utf-8")
    out = invoke("agent", "check", str(agent))
    assert out.exit_code == 1 and no_traceback(out)


def test_agent_check_skills_dir_missing_exit_2(tmp_path):
    """Commands that search for skills take `--skills-dir DIR` (repeatable). … A `--skills-dir` that does not exist
    is a usage error."""
    usage_error(invoke("agent", "check", str(NOTES_AGENT), "--skills-dir", str(tmp_path / "nope")))


def test_agent_check_skills_dir_missing_no_traceback(tmp_path):
    """the message is printed, no traceback"""
    out = invoke("agent", "check", str(NOTES_AGENT), "--skills-dir", str(tmp_path / "nope"))
    assert out.exit_code != 0 and no_traceback(out) and "nope" in out.output


# ---------------------------------------------------------------------------------------------------------------
# agent run / resume (real PostgreSQL)


def new_session() -> str:
    return "ag-" + uuid.uuid4().hex[:10]


def write_script(tmp_path: Path, turns: list[dict[str, Any]]) -> str:
    path = tmp_path / f"script-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps({"turns": turns}, ensure_ascii=False), encoding="utf-8")  # JSON is YAML
    return f"script:{path}"


def agent_run(session: str, *extra: str, message: str = DEMO_MESSAGE, agent: Path = NOTES_AGENT) -> Result:
    return invoke("agent", "run", str(agent), "--session", session, "--message", message, *extra)


DEMO_MODEL = f"script:{NOTES_AGENT / 'demo.yaml'}"


def test_agent_run_demo_text(db_env):
    """Without `--json`, `run` and `resume` print `status: …`, one `  … LABEL` line per tool event, one `  TOOL: ok`
    (or `  TOOL: CODE`) line per observation, `checkpoint: TYPE (expects FIELDS)` when suspended, and the reply."""
    out = agent_run(new_session(), "--model", DEMO_MODEL, "--context", '{"actor_name": "Ada"}')
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0] == "status: SUSPENDED"
    assert "  … Looking the note up" in lines
    assert "  builtin_node_approval: ok" in lines
    assert "  save_note: agent_runtime.42221" in lines
    assert any(line.startswith("checkpoint: APPROVAL") for line in lines)
    assert "标题：季度总结" in out.stdout


TURN_KEYS = {"session_id", "status", "reply", "checkpoint", "observations", "evidence", "events", "task_id", "node_id"}
OBSERVATION_KEYS = {"tool", "arguments", "ok", "code", "next_step", "sources", "evidence_id", "content"}


def test_agent_run_demo_json(db_env):
    """`--json` prints `TurnResult.as_dict()` (session_id, status, reply, checkpoint, observations, evidence, events,
    task_id, node_id)"""
    session = new_session()
    out = agent_run(session, "--model", DEMO_MODEL, "--context", '{"actor_name": "Ada"}', "--json")
    turn = json.loads(out.stdout)
    assert out.exit_code == 0 and set(turn) >= TURN_KEYS
    assert turn["session_id"] == session and turn["status"] == "SUSPENDED"
    assert set(turn["checkpoint"]) == {"type", "question", "expected_fields", "suggestions", "tool"}
    assert turn["checkpoint"]["type"] == "APPROVAL" and turn["checkpoint"]["tool"] == "save_note"
    assert all(set(o) >= OBSERVATION_KEYS for o in turn["observations"])
    codes = [o["code"] for o in turn["observations"]]
    assert "agent_runtime.42221" in codes
    assert all(set(e) == {"id", "tool", "status", "business_ok"} for e in turn["evidence"])
    assert all(e["type"] == "tool" and set(e) == {"type", "tool", "label"} for e in turn["events"])
    assert turn["task_id"] and turn["node_id"]


def test_agent_resume_confirm_done(db_env):
    """skillyard agent resume --session demo --action CONFIRM   # saves the note once, finishes"""
    session = new_session()
    assert agent_run(session, "--model", DEMO_MODEL, "--context", '{"actor_name": "Ada"}').exit_code == 0
    out = invoke("agent", "resume", "--session", session, "--action", "CONFIRM", "--json")
    turn = json.loads(out.stdout)
    assert out.exit_code == 0 and turn["status"] == "DONE" and turn["reply"] == "已保存笔记《季度总结》"
    assert [e["tool"] for e in turn["events"]] == ["save_note"]


def test_agent_resume_action_any_case(db_env):
    """`--action` | required, any case: `CONFIRM`, `REJECT`, `REPLY` or `CANCEL`"""
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL)
    out = invoke("agent", "resume", "--session", session, "--action", "cancel")
    assert out.exit_code == 0 and out.stdout.splitlines()[0] == "status: CANCELLED", out.output


def test_agent_resume_reject(db_env):
    """`REJECT` | task cancelled; the reply names the write that did not run"""
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL)
    out = invoke("agent", "resume", "--session", session, "--action", "Reject", "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["status"] == "CANCELLED"


def test_agent_resume_without_open_node_exit_1(db_env):
    """1 when … the command could not run (… no open node to resume …: the message is printed, no traceback)"""
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL)
    invoke("agent", "resume", "--session", session, "--action", "CANCEL")
    out = invoke("agent", "resume", "--session", session, "--action", "CONFIRM")
    assert out.exit_code == 1 and no_traceback(out) and out.output.strip()


def test_agent_resume_unknown_session_exit_1(db_env):
    """1 when … the command could not run (`AgentError`, …: the message is printed, no traceback)"""
    out = invoke("agent", "resume", "--session", new_session(), "--action", "CONFIRM")
    assert out.exit_code == 1 and no_traceback(out) and out.output.strip()


def test_agent_resume_unknown_action_exit_2():
    """2 for usage errors (missing `--session`, an unknown `--action`, a bad `--context`)."""
    usage_error(invoke("agent", "resume", "--session", "s1", "--action", "APPROVE"))


def test_agent_resume_missing_session_exit_2():
    """2 for usage errors (missing `--session`, …)"""
    usage_error(invoke("agent", "resume", "--action", "CONFIRM"), "--session")


def test_agent_resume_missing_action_exit_2():
    """`--action` | required"""
    usage_error(invoke("agent", "resume", "--session", "s1"), "--action")


def test_agent_run_missing_session_exit_2():
    """`--session ID` | required … 2 for usage errors (missing `--session`, …)"""
    usage_error(invoke("agent", "run", str(NOTES_AGENT), "--message", "hi", "--model", DEMO_MODEL), "--session")


def test_agent_run_missing_message_exit_2():
    """`--message TEXT` | required: the user's message"""
    usage_error(invoke("agent", "run", str(NOTES_AGENT), "--session", "s1", "--model", DEMO_MODEL), "--message")


@pytest.mark.parametrize("context", ["{bad", "[1, 2]", '"text"', "7"])
def test_agent_run_bad_context_exit_2(context):
    """`--context JSON` | … not JSON or not an object is a usage error (exit 2)"""
    out = invoke(
        "agent",
        "run",
        str(NOTES_AGENT),
        "--session",
        "s1",
        "--message",
        "hi",
        "--model",
        DEMO_MODEL,
        "--context",
        context,
    )
    usage_error(out, "--context")


def test_agent_run_missing_agent_dir_exit_2(tmp_path):
    """`AGENT_DIR` | the agent folder; must exist"""
    usage_error(
        invoke("agent", "run", str(tmp_path / "nope"), "--session", "s1", "--message", "hi", "--model", DEMO_MODEL)
    )


def test_agent_run_without_model_exit_1(db_env, monkeypatch):
    """a new session without `--model` fails: no model"""
    monkeypatch.delenv("SKILLYARD_MODEL", raising=False)
    out = agent_run(new_session())
    assert out.exit_code == 1 and no_traceback(out) and "model" in out.output


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "anthropic:claude"])
def test_agent_run_bad_model_spec_exit_1(db_env, spec):
    """1 when … the command could not run (…, a bad model spec, …); Anything else … is rejected with a message listing
    the two forms."""
    out = agent_run(new_session(), "--model", spec)
    assert out.exit_code == 1 and no_traceback(out) and "script:" in out.output and "openai:" in out.output


def test_agent_run_missing_script_file_exit_1(db_env, tmp_path):
    """1 when … the command could not run (… a bad model spec …: the message is printed, no traceback)"""
    out = agent_run(new_session(), "--model", f"script:{tmp_path / 'missing.yaml'}")
    assert out.exit_code == 1 and no_traceback(out) and out.output.strip()


def test_agent_run_script_out_of_turns_exit_1(db_env, tmp_path):
    """1 when … the command could not run (… a scripted model out of turns …: the message is printed, no traceback)"""
    model = write_script(tmp_path, [{"text": "hello there"}])
    session = new_session()
    first = agent_run(session, "--model", model)
    assert first.exit_code == 0 and first.stdout.splitlines()[0] == "status: RUNNING", first.output
    second = agent_run(session, message="and again")
    assert second.exit_code == 1 and no_traceback(second) and second.output.strip()


def test_agent_run_text_reply_is_running(db_env, tmp_path):
    """`status` | `RUNNING` (the model answered with text; send the next message)"""
    model = write_script(tmp_path, [{"text": "a plain answer"}])
    out = agent_run(new_session(), "--model", model, "--json")
    turn = json.loads(out.stdout)
    assert out.exit_code == 0 and turn["status"] == "RUNNING" and turn["reply"] == "a plain answer"
    assert turn["checkpoint"] is None


def test_agent_run_failed_node_exit_1(db_env, tmp_path):
    """Exit codes: 0 when the turn ended (any status but `FAILED`), 1 when the node `FAILED`"""
    model = write_script(
        tmp_path, [{"tool_calls": [{"name": "builtin_node_fail", "arguments": {"reason": "cannot do"}}]}]
    )
    out = agent_run(new_session(), "--model", model, "--json")
    assert (
        out.exit_code == 1
        and json.loads(out.stdout)["status"] == "FAILED"
        and json.loads(out.stdout)["reply"] == "cannot do"
    )


def test_agent_run_follow_up_checkpoint_text(db_env, tmp_path):
    """`checkpoint: TYPE (expects FIELDS)` when suspended"""
    call = {"name": "builtin_node_follow_up", "arguments": {"question": "Which title?", "expectedFields": ["title"]}}
    model = write_script(tmp_path, [{"tool_calls": [call]}])
    out = agent_run(new_session(), "--model", model, message="save a note please")
    assert out.exit_code == 0, out.output
    assert "checkpoint: FOLLOW_UP (expects title)" in out.stdout.splitlines(), out.stdout
    assert "Which title?" in out.stdout


def test_agent_resume_reply_at_follow_up(db_env, tmp_path):
    """`--text TEXT` | the user's answer (needed for `REPLY` at a `FOLLOW_UP`)"""
    call = {"name": "builtin_node_follow_up", "arguments": {"question": "Which title?", "expectedFields": ["title"]}}
    model = write_script(tmp_path, [{"tool_calls": [call]}, {"text": "noted"}])
    session = new_session()
    agent_run(session, "--model", model, message="save a note please")
    out = invoke("agent", "resume", "--session", session, "--action", "REPLY", "--text", "周报", "--json")
    assert (
        out.exit_code == 0
        and json.loads(out.stdout)["status"] == "RUNNING"
        and json.loads(out.stdout)["reply"] == "noted"
    )


def test_agent_resume_reply_without_text_exit_1(db_env, tmp_path):
    """empty text raises `AgentError` … (`AgentError` …: the message is printed, no traceback)"""
    call = {"name": "builtin_node_follow_up", "arguments": {"question": "Which title?", "expectedFields": ["title"]}}
    model = write_script(tmp_path, [{"tool_calls": [call]}, {"text": "noted"}])
    session = new_session()
    agent_run(session, "--model", model, message="save a note please")
    out = invoke("agent", "resume", "--session", session, "--action", "REPLY")
    assert out.exit_code in (1, 2) and no_traceback(out) and out.output.strip()


def test_agent_run_message_while_suspended_is_reply(db_env):
    """A message sent while a node is suspended is its REPLY. … at APPROVAL it drops the gated write"""
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL)
    out = agent_run(session, "--json", message="算了，不保存了")
    assert out.exit_code in (0, 1) and no_traceback(out)


def test_agent_run_unsafe_session_no_traceback(db_env):
    """A session id is checked before anything runs …: `send`/`resume` raise `AgentError`, the CLI exits with the
    message."""
    out = agent_run("../escape", "--model", DEMO_MODEL)
    assert out.exit_code in (1, 2) and no_traceback(out) and "session" in out.output


def test_agent_resume_works_from_another_directory(db_env, tmp_path, monkeypatch):
    """A session stores its agent folder and a `script:` model path as absolute paths, so `agent resume` works from
    any working directory."""
    session = new_session()
    monkeypatch.chdir(REPO)
    relative_model = "script:examples/agents/notes/demo.yaml"
    out = invoke(
        "agent",
        "run",
        "examples/agents/notes",
        "--session",
        session,
        "--message",
        DEMO_MESSAGE,
        "--model",
        relative_model,
    )
    assert out.exit_code == 0, out.output
    monkeypatch.chdir(tmp_path)
    resumed = invoke("agent", "resume", "--session", session, "--action", "CONFIRM", "--json")
    assert resumed.exit_code == 0 and json.loads(resumed.stdout)["status"] == "DONE", resumed.output


def test_agent_session_belongs_to_one_agent(db_env, tmp_path):
    """A session belongs to one agent (another agent's session id raises `AgentError`)."""
    other = tmp_path / "other"
    shutil.copytree(NOTES_AGENT, other)
    text = (other / "AGENT.md").read_text(encoding="utf-8").replace("agent_code: notes", "agent_code: other_notes")
    (other / "AGENT.md").write_text(text, encoding="utf-8")
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL)
    out = agent_run(session, "--model", DEMO_MODEL, agent=other)
    assert out.exit_code == 1 and no_traceback(out) and out.output.strip()


def test_agent_run_skills_dir_missing_no_traceback(db_env, tmp_path):
    """`--skills-dir DIR` | another skill root (repeatable); A `--skills-dir` that does not exist is a usage error."""
    out = agent_run(new_session(), "--model", DEMO_MODEL, "--skills-dir", str(tmp_path / "nope"))
    assert out.exit_code != 0 and no_traceback(out)


def test_agent_run_unknown_skill_key_exit_1(db_env):
    """`--skill KEY` | the contract skill (`skill_key`) a new task runs; … an unknown key raises `AgentError`"""
    out = agent_run(new_session(), "--model", DEMO_MODEL, "--skill", "no.such.key")
    assert out.exit_code == 1 and no_traceback(out) and "no.such.key" in out.output


def test_agent_run_skill_key_given(db_env):
    """`--skill KEY` | the contract skill (`skill_key`) a new task runs; default: the agent's first loaded skill"""
    out = agent_run(new_session(), "--model", DEMO_MODEL, "--skill", "notes.keeper", "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["status"] == "SUSPENDED"


def test_agent_context_merged_into_identity(db_env):
    """`--context JSON` | the caller's identity as a JSON object …, merged into the session's identity"""
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL, "--context", '{"actor_name": "Grace"}')
    turn = json.loads(invoke("agent", "resume", "--session", session, "--action", "CONFIRM", "--json").stdout)
    saved = next(o for o in turn["observations"] if o["tool"] == "save_note")
    assert saved["arguments"]["owner"] == "Grace" and saved["sources"]["owner"] == "PLATFORM"


def test_agent_openai_unreachable_never_shows_key(db_env, monkeypatch):
    """`api_key` … never logged or shown; 1 when … the command could not run (… the message is printed, no traceback)"""
    monkeypatch.setenv("SKILLYARD_MODEL_BASE_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("SKILLYARD_MODEL_API_KEY", "sk-never-print-this-123")
    monkeypatch.setenv("SKILLYARD_MODEL_RETRIES", "0")
    monkeypatch.setenv("SKILLYARD_MODEL_TIMEOUT", "5")
    out = agent_run(new_session(), "--model", "openai:probe-model")
    assert (
        out.exit_code == 1 and no_traceback(out) and "sk-never-print-this-123" not in out.output and out.output.strip()
    )


def test_agent_bad_settings_names_file(db_env, home):
    """A malformed file or value stops with an `AgentSettingsError` naming the file (or variable), the key and the
    fix"""
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 0\n", encoding="utf-8")
    out = agent_run(new_session(), "--model", DEMO_MODEL)
    assert out.exit_code in (1, 2) and no_traceback(out)
    assert "settings.toml" in out.output and "fingerprint_limit" in out.output


def test_agent_settings_api_key_never_echoed(db_env, home):
    """An `api_key` value is never echoed."""
    (home / "settings.toml").write_text('[agent.model]\napi_key = 12345678901\ntimeout = "x"\n', encoding="utf-8")
    out = agent_run(new_session(), "--model", DEMO_MODEL)
    assert no_traceback(out) and "12345678901" not in out.output


def test_agent_run_unreachable_database_no_traceback(monkeypatch):
    """`run` and `resume` keep their state in the platform's database …; the message is printed, no traceback"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:agent-pass-3@127.0.0.1:1/db")
    out = agent_run(new_session(), "--model", DEMO_MODEL)
    assert out.exit_code in (1, 2) and no_traceback(out) and "agent-pass-3" not in out.output


def test_agent_resume_skills_dir_missing_no_traceback(db_env, tmp_path):
    """`--skills-dir DIR` | another skill root (repeatable)"""
    out = invoke(
        "agent", "resume", "--session", new_session(), "--action", "CONFIRM", "--skills-dir", str(tmp_path / "no")
    )
    assert out.exit_code != 0 and no_traceback(out)


def test_artifacts_unreachable_database_exit_2(monkeypatch):
    """2 | … host errors raised around a run (database unreachable, …)"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:art-pass-4@127.0.0.1:1/db")
    out = invoke("artifacts", "--session", "s1")
    usage_error(out)
    assert "art-pass-4" not in out.output


def test_validate_json_no_skill_exit_1(tmp_path):
    """`--json` prints a list …; Exit 1 … when no skill folder is found"""
    (tmp_path / "empty").mkdir()
    out = invoke("validate", "--json", str(tmp_path / "empty"))
    assert out.exit_code == 1 and no_traceback(out)


def test_agent_run_skills_dir_missing_exit_2(db_env, tmp_path):
    """Commands that search for skills take `--skills-dir DIR` (repeatable). … A `--skills-dir` that does not exist
    is a usage error."""
    usage_error(agent_run(new_session(), "--model", DEMO_MODEL, "--skills-dir", str(tmp_path / "nope")))
