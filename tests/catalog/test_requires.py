"""Gating (§2.2, catalog/requires.py): what a skill needs before it may run, in our, OpenClaw's and Hermes'
vocabularies, merged."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from skillyard.catalog.requires import Requirements, check_requirements, parse_requirements
from support.catalog import fm, parse
from support.cli import listing, one
from support.skills import write_raw


def which_of(*present: str):
    return lambda name: f"/usr/bin/{name}" if name in present else None


def has_of(*present: str):
    return lambda name: name in present


def gated(skills_root: Path, name: str, meta: str, **kw: Any) -> dict[str, Any]:
    write_raw(skills_root, name, f"---\nname: {name}\ndescription: d\n{textwrap.dedent(meta).strip()}\n---\n", **kw)
    return one(listing(skills_root), name)


def test_our_vocabulary_env_strings_and_objects_bins_primary_env():
    meta = {
        "metadata": {
            "openclaw": {
                "requires": {
                    "env": ["A_KEY", {"name": "B_KEY", "required": False}, {"name": "C_KEY"}, "D1, D2"],
                    "bins": ["gh", "jq"],
                },
                "primaryEnv": "A_KEY",
            }
        }
    }
    req = parse_requirements(meta)
    assert req.env == ("A_KEY", "C_KEY", "D1", "D2") and req.optional_env == ("B_KEY",)
    assert req.bins == ("gh", "jq") and req.primary_env == "A_KEY"
    assert req.credential_env == ("A_KEY", "C_KEY", "D1", "D2", "B_KEY")
    gate = check_requirements(req, has_value=has_of("A_KEY", "C_KEY", "D1"), which=which_of("gh"))
    assert gate.missing_env == ("D2",) and gate.missing_bins == ("jq",) and not gate.passed
    ok = check_requirements(req, has_value=has_of("A_KEY", "C_KEY", "D1", "D2"), which=which_of("gh", "jq"))
    assert ok.passed


def test_openclaw_vocabulary_os_any_bins_config():
    meta = {
        "metadata": {
            "openclaw": {
                "os": ["darwin", "linux"],
                "requires": {"anyBins": ["claude", "codex"], "config": ["skills.x.enabled"]},
            }
        }
    }
    req = parse_requirements(meta)
    assert req.os == ("darwin", "linux") and req.any_bins == ("claude", "codex") and req.config == ("skills.x.enabled",)
    assert check_requirements(req, has_of("skills.x.enabled"), which_of("codex"), platform="linux").passed
    none = check_requirements(req, has_of("skills.x.enabled"), which_of(), platform="linux")
    assert none.missing_bins == ("claude | codex",)
    assert check_requirements(req, has_of(), which_of("codex"), platform="linux").missing_env == ("skills.x.enabled",)
    assert not check_requirements(req, has_of("skills.x.enabled"), which_of("codex"), platform="win32").os_supported


def test_legacy_clawdbot_block():
    req = parse_requirements(
        {"metadata": {"clawdbot": {"requires": {"bins": ["rg"], "env": ["TOKEN"]}, "os": "darwin"}}}
    )
    assert req.bins == ("rg",) and req.env == ("TOKEN",) and req.os == ("darwin",)
    assert not check_requirements(req, has_of("TOKEN"), which_of("rg"), platform="linux").passed
    assert check_requirements(req, has_of("TOKEN"), which_of("rg"), platform="darwin").passed


def test_always_bypasses_requires_but_never_os():
    req = parse_requirements(
        {
            "metadata": {
                "openclaw": {"always": True, "os": ["darwin"], "requires": {"bins": ["nope"], "env": ["MISSING"]}}
            }
        }
    )
    assert req.always
    on_mac = check_requirements(req, has_of(), which_of(), platform="darwin")
    assert on_mac.passed and on_mac.missing_env == () and on_mac.missing_bins == ()
    on_linux = check_requirements(req, has_of(), which_of(), platform="linux")
    assert not on_linux.passed and not on_linux.os_supported


def test_hermes_vocabulary():
    meta = {
        "platforms": ["macos", "linux"],
        "required_environment_variables": [
            "PLAIN_KEY",
            {"name": "OBJ_KEY", "prompt": "Key", "help": "https://x"},
            {"name": "OPT_KEY", "optional": True},
        ],
        "prerequisites": {"env_vars": ["LEGACY_KEY", "PLAIN_KEY"], "commands": ["curl"]},
        "setup": {"collect_secrets": [{"env_var": "SECRET_KEY", "prompt": "Secret", "secret": True}]},
    }
    req = parse_requirements(meta)
    assert req.os == ("darwin", "linux")
    assert req.env == ("PLAIN_KEY", "OBJ_KEY", "SECRET_KEY", "LEGACY_KEY")
    assert req.optional_env == ("OPT_KEY",)
    assert req.bins == ()  # Hermes' prerequisites.commands are advisory only
    everything = has_of("PLAIN_KEY", "OBJ_KEY", "SECRET_KEY", "LEGACY_KEY")
    assert check_requirements(req, everything, which_of(), platform="darwin").passed
    assert not check_requirements(req, everything, which_of(), platform="win32").os_supported
    missing = check_requirements(req, has_of("PLAIN_KEY", "OBJ_KEY"), which_of(), platform="linux")
    assert missing.missing_env == ("SECRET_KEY", "LEGACY_KEY")


def test_hermes_windows_and_single_values():
    req = parse_requirements({"platforms": "windows", "required_environment_variables": {"name": "ONE"}})
    assert req.os == ("win32",) and req.env == ("ONE",)
    assert check_requirements(req, has_of("ONE"), which_of(), platform="win32").passed
    assert not check_requirements(req, has_of("ONE"), which_of(), platform="darwin").passed


def test_vocabularies_merge_and_deduplicate():
    meta = {
        "platforms": ["macos"],
        "required_environment_variables": ["SHARED", {"name": "H_ONLY"}],
        "prerequisites": {"env_vars": ["SHARED"]},
        "metadata": {
            "openclaw": {
                "os": ["darwin"],
                "requires": {"env": ["SHARED", "O_ONLY"], "bins": ["gh"]},
                "primaryEnv": "SHARED",
            },
            "clawdbot": {"requires": {"bins": ["gh", "git"], "env": [{"name": "SHARED", "required": True}]}},
        },
    }
    req = parse_requirements(meta)
    assert req.env == ("SHARED", "O_ONLY", "H_ONLY")
    assert req.bins == ("gh", "git") and req.os == ("darwin",) and req.primary_env == "SHARED"
    assert req.credential_env == ("SHARED", "O_ONLY", "H_ONLY")


def test_optional_env_that_another_vocabulary_requires_is_required():
    req = parse_requirements(
        {
            "metadata": {"openclaw": {"requires": {"env": [{"name": "K", "required": False}]}}},
            "required_environment_variables": ["K"],
        }
    )
    assert req.env == ("K",) and req.optional_env == ()


def test_gating_read_from_real_frontmatter_text():
    r = parse(
        fm("""name: notion
description: Notion API
platforms: [linux, macos, windows]
prerequisites:
  env_vars: [NOTION_API_KEY]
  commands: [curl]
metadata:
  { "openclaw": { "requires": { "anyBins": ["ntn", "curl"] }, "primaryEnv": "NOTION_API_TOKEN" } }""")
    )
    req = parse_requirements(r.meta)
    assert req.os == ("linux", "darwin", "win32") and req.env == ("NOTION_API_KEY",)
    assert req.any_bins == ("ntn", "curl") and req.primary_env == "NOTION_API_TOKEN"
    assert isinstance(req, Requirements)


def test_exec_mode_shell_skips_host_binaries():
    req = parse_requirements({"exec_mode": "shell", "metadata": {"openclaw": {"requires": {"bins": ["nope"]}}}})
    assert check_requirements(req, has_of(), which_of()).passed


def test_requires_env_strings(skills_root, monkeypatch):
    """Issue: 'ours (`metadata.openclaw.requires.env` as strings ...)'."""
    monkeypatch.delenv("G_ENV_A", raising=False)
    item = gated(skills_root, "g1", "metadata:\n  openclaw:\n    requires:\n      env: [G_ENV_A]")
    assert item["needs_config"] == ["G_ENV_A"] and item["available"] is False


def test_requires_env_objects_required_false_not_needed(skills_root, monkeypatch):
    """Issue: '`requires.env` as strings or `{name, required}` objects'."""
    for v in ("G_ENV_B", "G_ENV_C"):
        monkeypatch.delenv(v, raising=False)
    item = gated(
        skills_root,
        "g2",
        "metadata:\n  openclaw:\n    requires:\n      env: [{name: G_ENV_B, required: true}, {name: G_ENV_C, required: false}]",  # noqa: E501 (a skill file's text)
    )
    assert item["needs_config"] == ["G_ENV_B"]


def test_requires_env_satisfied_by_environment(skills_root, monkeypatch):
    """Issue: 'missing env (not in configs nor environment)'."""
    monkeypatch.setenv("G_ENV_SET", "v")
    item = gated(skills_root, "g3", "metadata:\n  openclaw:\n    requires:\n      env: [G_ENV_SET]")
    assert item["needs_config"] == [] and item["available"] is True


def test_clawdbot_legacy_and_anybins(skills_root):
    """Issue: 'OpenClaw's (`metadata.openclaw` and legacy `metadata.clawdbot`: `os`, `requires.anyBins` ...)'."""
    item = gated(skills_root, "g4", "metadata:\n  clawdbot:\n    requires:\n      anyBins: [no_such_zz1, no_such_zz2]")
    assert item["available"] is False and item["missing_bins"]
    item2 = gated(skills_root, "g5", "metadata:\n  clawdbot:\n    requires:\n      anyBins: [no_such_zz1, sh]")
    assert item2["available"] is True and item2["missing_bins"] == []


def test_requires_config_is_checked(skills_root, monkeypatch):
    """Issue: OpenClaw's '`requires.config`'; docs: 'config: [WEATHER_REGION]  # checked like env'."""
    monkeypatch.delenv("G_CFG_X", raising=False)
    item = gated(skills_root, "g6", "metadata:\n  openclaw:\n    requires:\n      config: [G_CFG_X]")
    assert "G_CFG_X" in item["needs_config"] and item["available"] is False


def test_os_gating(skills_root):
    """Issue: OpenClaw's `os`; an unsupported OS gives `os_supported: false`."""
    other = "win32" if sys.platform != "win32" else "linux"
    item = gated(skills_root, "g7", f"metadata:\n  openclaw:\n    os: [{other}]")
    assert item["os_supported"] is False and item["available"] is False


def test_always_bypasses_requires(skills_root, monkeypatch):
    """Issue: '`always` — which bypasses requires but never `os`'."""
    monkeypatch.delenv("G_ALW", raising=False)
    item = gated(
        skills_root,
        "g8",
        "metadata:\n  openclaw:\n    always: true\n    requires:\n      env: [G_ALW]\n      bins: [no_such_zz3]",
    )
    assert item["available"] is True


def test_always_never_bypasses_os(skills_root):
    """Issue: '`always` — which bypasses requires but never `os`'."""
    other = "win32" if sys.platform != "win32" else "linux"
    item = gated(skills_root, "g9", f"metadata:\n  openclaw:\n    always: true\n    os: [{other}]")
    assert item["available"] is False and item["os_supported"] is False


def test_hermes_platforms(skills_root):
    """Issue: 'Hermes' (`platforms` with macos/linux/windows ...)'."""
    here = {"linux": "linux", "darwin": "macos", "win32": "windows"}[sys.platform]
    other = "windows" if here != "windows" else "linux"
    assert gated(skills_root, "h1", f"platforms: [{here}]")["os_supported"] is True
    assert gated(skills_root, "h2", f"platforms: [{other}]")["os_supported"] is False


def test_hermes_required_environment_variables_objects(skills_root, monkeypatch):
    """Issue: Hermes' '`required_environment_variables` as strings or objects'."""
    monkeypatch.delenv("H_ENV_1", raising=False)
    monkeypatch.delenv("H_ENV_2", raising=False)
    item = gated(
        skills_root,
        "h3",
        "required_environment_variables:\n  - name: H_ENV_1\n    prompt: the key\n  - H_ENV_2",
    )
    assert sorted(item["needs_config"]) == ["H_ENV_1", "H_ENV_2"]


def test_hermes_prerequisites_and_collect_secrets(skills_root, monkeypatch):
    """Issue: Hermes' '`prerequisites.env_vars`, `setup.collect_secrets`'."""
    monkeypatch.delenv("H_ENV_3", raising=False)
    monkeypatch.delenv("H_ENV_4", raising=False)
    item = gated(
        skills_root,
        "h4",
        "prerequisites:\n  env_vars: [H_ENV_3]\nsetup:\n  collect_secrets:\n    - env_var: H_ENV_4\n      prompt: key",
    )
    assert sorted(item["needs_config"]) == ["H_ENV_3", "H_ENV_4"]


def test_vocabularies_merged_and_deduplicated(skills_root, monkeypatch):
    """Issue: 'merged and de-duplicated'."""
    monkeypatch.delenv("H_DUP", raising=False)
    item = gated(
        skills_root,
        "h5",
        "metadata:\n  openclaw:\n    primaryEnv: H_DUP\n    requires:\n      env: [H_DUP]\n"
        "required_environment_variables: [H_DUP]\nprerequisites:\n  env_vars: [H_DUP]",
    )
    assert item["needs_config"] == ["H_DUP"]


@pytest.mark.parametrize("block", ["moltbot", "clawdis", "clawdhub"])
def test_older_openclaw_block_names_gate_too(block):
    """Issue 18 (6): OpenClaw's earlier names carry requirements in real collections; a darwin-only skill under
    one of them is unavailable on Linux."""
    req = parse_requirements({"metadata": {block: {"requires": {"bins": ["rg"]}, "os": ["darwin"]}}})
    assert req.bins == ("rg",) and req.os == ("darwin",)
    assert not check_requirements(req, has_of(), which_of("rg"), platform="linux").os_supported
    assert check_requirements(req, has_of(), which_of("rg"), platform="darwin").passed
