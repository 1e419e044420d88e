"""The plugin manager (plugins.py): entry-point plugins and the SKILLYARD_LOAD_PLUGINS allow-list, in fresh
processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _fake_dist(site: Path) -> None:
    (site / "probe_plug.py").write_text(
        "from skillyard import hookimpl\n@hookimpl\ndef startup(yard):\n    return None\n"
    )
    dist = site / "probe_plug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-plug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[skillyard]\nprobeplug = probe_plug\n")


@pytest.mark.parametrize(
    ("allow", "expected"),
    [(None, True), ("", False), ("probeplug", True), ("other", False), ("other, probeplug", True)],
)
def test_load_plugins_allow_list(tmp_path, home, allow, expected):
    """Issue: 'Third-party plugins load from the entry-point group `skillyard`; `SKILLYARD_LOAD_PLUGINS=a,b` restricts
    which load (empty = none).'"""
    site = tmp_path / "site"
    site.mkdir()
    _fake_dist(site)
    env = {k: v for k, v in os.environ.items() if k != "SKILLYARD_LOAD_PLUGINS"}
    env["PYTHONPATH"] = str(site) + os.pathsep + env.get("PYTHONPATH", "")
    env["SKILLYARD_HOME"] = str(home)
    if allow is not None:
        env["SKILLYARD_LOAD_PLUGINS"] = allow
    # A fresh process: entry-point plugins are loaded once per process, and the fake distribution is on its path.
    out = subprocess.run(
        [sys.executable, "-m", "skillyard", "plugins", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    names = [p["name"] for p in json.loads(out.stdout)]
    assert ("probeplug" in names) is expected
    if expected:
        entry = next(p for p in json.loads(out.stdout) if p["name"] == "probeplug")
        assert "startup" in entry["hooks"] and entry["version"] == "0.1"


def test_plugin_cli_command_from_entry_point(tmp_path, home):
    """Issue: 'At least: ... CLI commands'; hooks.md register_commands: 'they appear in `skillyard --help`'."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "probe_cmd.py").write_text(
        "import click\nfrom skillyard import hookimpl\n@hookimpl\ndef register_commands(cli):\n"
        "    @cli.command(name='probe-hello')\n    def probe_hello():\n        click.echo('hello from probe')\n"
    )
    dist = site / "probe_cmd-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-cmd\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[skillyard]\nprobecmd = probe_cmd\n")
    env = {k: v for k, v in os.environ.items() if k != "SKILLYARD_LOAD_PLUGINS"}
    env["PYTHONPATH"] = str(site)
    env["SKILLYARD_HOME"] = str(home)
    # Fresh processes: entry-point plugins are loaded once per process, and the fake distribution is on their path.
    out = subprocess.run(["skillyard", "probe-hello"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and "hello from probe" in out.stdout
    env["SKILLYARD_LOAD_PLUGINS"] = ""
    out2 = subprocess.run(["skillyard", "probe-hello"], capture_output=True, text=True, env=env, timeout=120)
    assert out2.returncode == 2 and "Traceback" not in out2.stderr
