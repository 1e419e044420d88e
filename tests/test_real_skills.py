"""Discovery survives every real skill shipped by OpenClaw (npm) and Hermes Agent (PyPI sdist).

The corpora are fetched once into tests/.cache/corpus (see tests/support/corpus.py); without the registries these tests
skip. Every folder holding a SKILL.md is listed exactly once, nothing is dropped, every listing is JSON, and the
gating each ecosystem declares is read the way that ecosystem reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import json5
import pytest
import yaml

from skillyard import SkillYard
from skillyard.catalog.describe import describe_entry, describe_skill
from skillyard.catalog.frontmatter_parser import normalize_text
from skillyard.catalog.requires import parse_requirements
from support import corpus

pytestmark = [pytest.mark.network, pytest.mark.slow]

SKIP = {".git", "node_modules", "__pycache__", ".venv", "venv", "site-packages"}
MAX_DEPTH = 6
#: Files that are genuinely broken, with the explicit error they must produce (relative to the corpus).
KNOWN_BROKEN: dict[str, str] = {}
_OS = {"macos": "darwin", "mac": "darwin", "osx": "darwin", "windows": "win32", "win": "win32"}


@pytest.fixture(scope="module", params=sorted(corpus.CORPORA))
def real(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A corpus and a SkillYard over all its roots, built once per module."""
    try:
        found = corpus.CORPORA[request.param]()
    except corpus.RegistryUnreachable as exc:
        pytest.skip(f"the {request.param} corpus cannot be fetched: {exc}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SKILLYARD_HOME", str(tmp_path_factory.mktemp("home")))
        mp.setenv("SKILLYARD_LOAD_PLUGINS", "")
        mp.delenv("SKILLYARD_SKILLS_PATH", raising=False)
        mp.delenv("SKILLYARD_DATABASE_URL", raising=False)
        started = time.perf_counter()
        yard = SkillYard(skills_dirs=list(found.roots), include_builtin=False)
        elapsed = time.perf_counter() - started
        yield {"corpus": found, "yard": yard, "scan_seconds": elapsed}


def skill_folders(root: Path) -> set[Path]:
    """Every folder holding a SKILL.md, up to six levels below the root, outside dependency/VCS folders."""
    out: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).relative_to(root).parts)
        dirnames[:] = [d for d in dirnames if d not in SKIP] if depth < MAX_DEPTH else []
        if "SKILL.md" in filenames:
            out.add(Path(dirpath).resolve())
    return out


def nested_in_another_skill(folders: set[Path]) -> set[Path]:
    """Folders inside another skill folder (its references/ or assets/): part of that skill, not skills."""
    return {f for f in folders if any(p in folders for p in f.parents)}


def rel(found: corpus.Corpus, path: str | Path) -> str:
    return Path(path).resolve().relative_to(found.path.resolve()).as_posix()


def test_every_skill_folder_is_listed_exactly_once(real: dict[str, Any]) -> None:
    found, yard = real["corpus"], real["yard"]
    expected: set[Path] = set()
    for root in found.roots:
        expected |= skill_folders(root)
    nested = nested_in_another_skill(expected)
    print(f"\n{found.name} {found.version}: {len(expected)} SKILL.md folders, {len(nested)} nested in a skill")
    expected -= nested
    listed = Counter(e.skill.dir.resolve() for e in yard.entries)
    twice = sorted(rel(found, d) for d, n in listed.items() if n > 1)
    assert twice == [], f"listed more than once: {twice}"
    missing = sorted(rel(found, d) for d in expected - set(listed))
    extra = sorted(rel(found, d) for d in set(listed) - expected)
    assert missing == [], f"silently dropped: {missing}"
    assert extra == [], f"listed but holding no SKILL.md: {extra}"
    assert len(yard.entries) == len(expected) > 0


def test_every_listing_is_json_with_string_fields(real: dict[str, Any]) -> None:
    found, yard = real["corpus"], real["yard"]
    errors: dict[str, str] = {}
    warned = 0
    for entry in yard.entries:
        listing = describe_entry(entry)
        json.dumps(listing)
        json.dumps(describe_skill(entry))
        assert isinstance(listing["name"], str) and listing["name"].strip()
        assert isinstance(listing["description"], str) and listing["description"].strip(), listing["dir"]
        assert all(isinstance(w, str) for w in listing["warnings"])
        version = entry.skill.meta.get("version")
        assert version is None or isinstance(version, str), (listing["dir"], version)
        for key in ("name", "description", "license"):
            value = entry.skill.meta.get(key)
            assert value is None or isinstance(value, str), (listing["dir"], key, value)
        if listing["error"]:
            errors[rel(found, listing["dir"])] = listing["error"]
        warned += bool([w for w in listing["warnings"] if "characters (over" not in w])
    print(f"\n{found.name}: {len(yard.entries)} skills, {len(errors)} with an error, {warned} with parse warnings")
    for where, error in sorted(errors.items()):
        print(f"  error {where}: {error}")
    known = {k: v for k, v in KNOWN_BROKEN.items() if k.split("/")[0] in {r.name for r in found.roots}}
    assert sorted(errors) == sorted(known)
    for where, message in known.items():
        assert message in errors[where]


def test_no_parse_repairs_on_valid_files(real: dict[str, Any]) -> None:
    """The shipped files are valid YAML: reading them needs no repair, so no parser warning is raised."""
    yard = real["yard"]
    parser_warnings = {
        str(e.skill.dir): list(e.skill.manifest.warnings) for e in yard.entries if e.skill.manifest.warnings
    }
    assert parser_warnings == {}


def test_frontmatter_matches_a_plain_yaml_read(real: dict[str, Any]) -> None:
    """Plain PyYAML reads every shipped file, and the tolerant parser reads each exactly as it does."""
    found, yard = real["corpus"], real["yard"]
    for entry in yard.entries:
        reference = _reference_frontmatter(entry.skill.manifest.path)
        assert reference is not None, f"plain YAML cannot read {rel(found, entry.skill.dir)}"
        assert entry.skill.meta == reference, rel(found, entry.skill.dir)


def test_gating_is_read_as_each_ecosystem_reads_it(real: dict[str, Any]) -> None:
    found, yard = real["corpus"], real["yard"]
    gated = 0
    for entry in yard.entries:
        meta = _reference_frontmatter(entry.skill.manifest.path) or {}
        req = entry.skill.requires
        expected = _openclaw_requires(meta) if found.name == "openclaw" else _hermes_requires(meta)
        got = {
            "bins": list(req.bins),
            "any_bins": list(req.any_bins),
            "env": list(req.env),
            "optional_env": list(req.optional_env),
            "config": list(req.config),
            "os": list(req.os),
            "primary_env": req.primary_env,
            "always": req.always,
        }
        assert got == expected, rel(found, entry.skill.dir)
        gated += any(v for k, v in expected.items())
    print(f"\n{found.name}: {gated} skills declare gating")
    assert gated > 0


def test_specific_skills_keep_their_requirements(real: dict[str, Any]) -> None:
    found, yard = real["corpus"], real["yard"]
    by_dir = {rel(found, e.skill.dir): e.skill for e in yard.entries}
    if found.name == "openclaw":
        assert by_dir["skills/github"].requires.bins == ("gh",)
        gh_issues = by_dir["skills/gh-issues"].requires
        assert gh_issues.bins == ("git", "gh") and gh_issues.primary_env == "GH_TOKEN"
        coding = by_dir["skills/coding-agent"].requires
        assert coding.any_bins == ("claude", "codex", "opencode")
        assert coding.config == ("skills.entries.coding-agent.enabled",)
        trello = by_dir["skills/trello"].requires
        assert trello.bins == ("curl", "jq") and trello.env == ("TRELLO_API_KEY", "TRELLO_TOKEN")
        assert by_dir["skills/apple-notes"].requires.os == ("darwin",)
        assert by_dir["skills/notion"].requires.primary_env == "NOTION_API_TOKEN"
        assert "GOOGLE_PLACES_API_KEY" in by_dir["skills/goplaces"].requires.credential_env
    else:
        assert by_dir["skills/productivity/notion"].requires.env == ("NOTION_API_KEY",)
        assert by_dir["skills/productivity/notion"].requires.os == ("linux", "darwin", "win32")
        assert by_dir["skills/apple/imessage"].requires.os == ("darwin",)
        assert by_dir["optional-skills/security/1password"].requires.env == ("OP_SERVICE_ACCOUNT_TOKEN",)
        shopify = by_dir["optional-skills/productivity/shopify"].requires
        assert shopify.env == ("SHOPIFY_ACCESS_TOKEN", "SHOPIFY_STORE_DOMAIN", "SHOPIFY_API_VERSION")
        nutrition = by_dir["optional-skills/health/fitness-nutrition"].requires
        assert nutrition.env == () and nutrition.optional_env == ("USDA_API_KEY",)
        # Hermes keeps its category in the folder path
        assert by_dir["skills/mlops/evaluation/weights-and-biases"].category == "mlops/evaluation"


def test_rescan_rereads_nothing_and_scan_is_fast(real: dict[str, Any]) -> None:
    found, yard = real["corpus"], real["yard"]
    started = time.perf_counter()
    assert yard.rescan() == 0
    rescan = time.perf_counter() - started
    print(f"\n{found.name}: first scan {real['scan_seconds']:.2f}s, rescan {rescan:.2f}s")
    assert real["scan_seconds"] < 20


def test_cli_list_json_over_a_real_root(real: dict[str, Any], tmp_path: Path) -> None:
    found, yard = real["corpus"], real["yard"]
    root = found.roots[0]
    exe = Path(sys.executable).with_name("skillyard")
    argv = [str(exe)] if exe.is_file() else [sys.executable, "-m", "skillyard"]
    env = {**os.environ, "SKILLYARD_HOME": str(tmp_path / "home"), "SKILLYARD_LOAD_PLUGINS": ""}
    env.pop("SKILLYARD_SKILLS_PATH", None)
    proc = subprocess.run(
        [*argv, "list", "--json", "--skills-dir", str(root), "--no-builtin"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    items = json.loads(proc.stdout)
    assert isinstance(items, list)
    listed = sorted(Path(it["dir"]).resolve() for it in items)
    expected = sorted(e.skill.dir.resolve() for e in yard.entries if e.skill.root == root.resolve())
    assert listed == expected
    assert all(isinstance(it["name"], str) and isinstance(it["description"], str) for it in items)
    assert [it for it in items if it["error"]] == []


# ---------------------------------------------------------------------------------------------------------
# independent readings, as each ecosystem does it


def _reference_frontmatter(path: Path) -> dict[str, Any] | None:
    """Plain PyYAML over the text between the fences, made JSON-shaped; None when it cannot read the file."""
    text = normalize_text(path.read_bytes())
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        return None
    try:
        data = yaml.safe_load(text[4 : end + 1])
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict):
        return None
    return json.loads(json.dumps(data, default=str))


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    return [str(v).strip() for v in value if str(v).strip()]


def _openclaw_requires(meta: dict[str, Any]) -> dict[str, Any]:
    """OpenClaw: metadata (JSON5 when a string) → the ``openclaw`` or legacy ``clawdbot`` block."""
    metadata = meta.get("metadata")
    if isinstance(metadata, str):
        metadata = json5.loads(metadata)
    block = {}
    for key in ("openclaw", "clawdbot"):
        if isinstance((metadata or {}).get(key), dict):
            block = metadata[key]
            break
    req = block.get("requires") or {}
    return {
        "bins": _list(req.get("bins")),
        "any_bins": _list(req.get("anyBins")),
        "env": _list(req.get("env")),
        "optional_env": [],
        "config": _list(req.get("config")),
        "os": _list(block.get("os")),
        "primary_env": block.get("primaryEnv"),
        "always": bool(block.get("always", False)),
    }


def _hermes_requires(meta: dict[str, Any]) -> dict[str, Any]:
    """Hermes: platforms; required_environment_variables, setup.collect_secrets, prerequisites.env_vars."""
    env: list[tuple[str, bool]] = []
    required_raw = meta.get("required_environment_variables") or []
    for item in [required_raw] if isinstance(required_raw, dict) else required_raw:
        if isinstance(item, str):
            env.append((item, True))
        elif isinstance(item, dict) and (item.get("name") or item.get("env_var")):
            env.append((item.get("name") or item.get("env_var"), not item.get("optional")))
    for item in (meta.get("setup") or {}).get("collect_secrets") or []:
        if isinstance(item, dict) and item.get("env_var"):
            env.append((item["env_var"], True))
    env += [(name, True) for name in _list((meta.get("prerequisites") or {}).get("env_vars"))]
    required = list(dict.fromkeys(n for n, r in env if r))
    platforms = [_OS.get(p.lower(), p.lower()) for p in _list(meta.get("platforms"))]
    return {
        "bins": [],
        "any_bins": [],
        "env": required,
        "optional_env": [n for n in dict.fromkeys(n for n, r in env if not r) if n not in required],
        "config": [],
        "os": list(dict.fromkeys(platforms)),
        "primary_env": None,
        "always": False,
    }


def test_parse_requirements_agrees_with_the_catalog(real: dict[str, Any]) -> None:
    """The catalog's Requirements are parse_requirements over the parsed frontmatter, nothing lost between."""
    for entry in real["yard"].entries:
        assert entry.skill.requires == parse_requirements(entry.skill.meta)
