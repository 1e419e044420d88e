"""The root command group (cli/group.py, cli/__init__.py): --help for every command, usage errors, --version, host
errors at the edge."""

from __future__ import annotations

import re

import pytest

from support.cli import invoke, usage_error


@pytest.fixture(scope="module")
def help_text() -> str:
    return invoke("--help").stdout


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SKILLYARD_WALL_CLOCK", "soon"),
        ("SKILLYARD_SUBPROCESS_TIMEOUT", "-5"),
        ("SKILLYARD_SUBPROCESS_TIMEOUT", "0"),
        ("SKILLYARD_WALL_CLOCK", "inf"),
        ("SKILLYARD_MAX_DOWNLOAD_MB", "nan"),
        ("SKILLYARD_RESCAN_INTERVAL", "-1"),
    ],
)
def test_bad_settings_are_usage_errors(skills_root, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    result = invoke("list", "--skills-dir", str(skills_root))
    assert result.exit_code == 2 and f"{name}={value!r} must be a number" in result.output, result.output
    assert "Traceback" not in result.output


def test_version_flag():
    """docs/cli.md: '`--version` print `skillyard, version X` and exit'."""
    res = invoke("--version")
    assert res.exit_code == 0 and res.stdout.startswith("skillyard, version ")


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
