"""``skillyard show`` (docs/cli.md): one skill by name, alias or tool name, as JSON or text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import invoke, show_json, usage_error
from support.cli_probes import LIST_FIELDS

SHOW_EXTRA = ["manifest", "tool_description", "input_schema", "tools", "subcommands", "secret_params", "requires"]


def test_show_json_hides_credentials(hello, skills_root):
    result = invoke("show", "hi", "--json", "--skills-dir", str(skills_root))
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["name"] == "hello" and set(info["input_schema"]["properties"]) == {"who"}
    assert info["tools"][0]["name"] == "hello" and info["secret_params"] == ["api_key"]


def test_show_unknown_is_a_usage_error(skills_root):
    result = invoke("show", "nope", "--skills-dir", str(skills_root))
    assert result.exit_code == 2 and "unknown skill 'nope'" in result.output


def test_cli_show_text(cli_root):
    """Issue: '`skillyard show NAME [--json]`: the manifest, `input_schema` ..., `tool_names` ..., warnings.'"""
    res = invoke("show", "hello", "--skills-dir", cli_root)
    assert res.exit_code == 0 and "hello" in res.stdout and "who" in res.stdout


def test_cli_show_json_manifest_and_schema(cli_root):
    """Issue: 'show --json: the manifest, `input_schema` ..., `tool_names` ..., warnings'."""
    info = show_json(cli_root, "hello")
    assert info["manifest"]["name"] == "hello" and info["input_schema"]["required"] == ["who"]
    assert info["tool_names"] == ["hello"] and isinstance(info["warnings"], list)


@pytest.mark.parametrize("field", [*SHOW_EXTRA, "exec", "async", "entry", *sorted(LIST_FIELDS)])
def test_show_json_fields(root, field):
    """`show --json` fields: Everything in `list --json`, plus: manifest, tool_description, input_schema, tools,
    subcommands, secret_params, requires, exec, async, entry"""
    out = invoke("show", "greet", "--json", "--skills-dir", str(root))
    assert out.exit_code == 0 and field in json.loads(out.stdout), out.output


def test_show_json_hides_credential_parameters(root):
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
