"""``skillyard plugins [--all] [--json]`` (docs/cli.md)."""

from __future__ import annotations

import json

from support.cli import invoke


def test_plugins_lists_builtins_only_with_all():
    default = json.loads(invoke("plugins", "--json").stdout)
    assert all(not p["builtin"] for p in default)
    everything = json.loads(invoke("plugins", "--all", "--json").stdout)
    names = {p["name"]: p["hooks"] for p in everything}
    assert names["skillyard.executors.inprocess"] == ["register_exec_types"]


def test_plugins_all_lists_builtins(runner_env=None):
    """Issue: '`skillyard plugins [--all] [--json]`: loaded plugins and the hooks each implements (`--all` includes
    built-ins).'"""
    res = invoke("plugins", "--all", "--json")
    assert res.exit_code == 0
    items = json.loads(res.stdout)
    builtin = [p for p in items if p["builtin"]]
    assert builtin and any("register_exec_types" in p["hooks"] for p in builtin)
    plain = json.loads(invoke("plugins", "--json").stdout)
    assert not [p for p in plain if p["builtin"]]


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
