"""Black-box conformance probes for the skill host core (issue 2, spec §1-6.1 and §10, docs/).

Each probe quotes the sentence it checks. Probes marked xfail(strict=True) document defects.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

from skillyard import SkillYard, current_department, department_path, identity_org_id
from skillyard.errors import SkillyardError
from support import EXAMPLES
from support.catalog import TOOL_RX
from support.cli import invoke, listing, named, one, show_json
from support.local_http import serve
from support.skills import (
    CRED_SCHEMA,
    ECHO,
    FAIL,
    NOTES_FM,
    OK_HANDLER,
    PROBE_CLI,
    SCHEMA_WHO,
    run_skill,
    shell_skill,
    write_raw,
)


def needs(binary: str) -> pytest.MarkDecorator:
    """Skip on a developer machine without the interpreter; CI installs it, so there it must run."""
    missing = shutil.which(binary) is None and not os.environ.get("CI")
    return pytest.mark.skipif(missing, reason=f"{binary} not installed")


# --------------------------------------------------------------------------------------------------- helpers


# =========================================================================================== 1. frontmatter


def test_bom_is_tolerated(skills_root):
    """Issue: 'Frontmatter ... must survive what real files contain, each case tested: a UTF-8 BOM'."""
    write_raw(skills_root, "bom", "\ufeff---\nname: bom\ndescription: With a BOM\n---\nbody\n")
    item = one(listing(skills_root), "bom")
    assert item["description"] == "With a BOM" and item["error"] is None


def test_crlf_is_tolerated(skills_root):
    """Issue: frontmatter must survive '... CRLF'."""
    write_raw(skills_root, "crlf", b"---\r\nname: crlf\r\ndescription: Windows lines\r\n---\r\nbody\r\n")
    item = one(listing(skills_root), "crlf")
    assert item["description"] == "Windows lines" and item["error"] is None


def test_bom_and_crlf_together(skills_root):
    """Issue: 'a UTF-8 BOM; CRLF' (real Windows-saved files carry both)."""
    write_raw(skills_root, "both", "\ufeff---\r\nname: both\r\ndescription: Both\r\n---\r\n".encode())
    item = one(listing(skills_root), "both")
    assert item["description"] == "Both" and item["error"] is None


def test_file_ending_at_closing_fence(skills_root):
    """Issue: 'a file that ends at the closing fence'."""
    write_raw(skills_root, "fence", "---\nname: fence\ndescription: Ends here\n---")
    item = one(listing(skills_root), "fence")
    assert item["description"] == "Ends here" and item["error"] is None


def test_triple_dash_inside_quoted_value(skills_root):
    """Issue: '`---` inside a quoted value'."""
    write_raw(skills_root, "dash", '---\nname: dash\ndescription: "before --- after"\n---\nbody\n')
    item = one(listing(skills_root), "dash")
    assert item["description"] == "before --- after" and item["error"] is None


def test_unquoted_colon_in_description_is_repaired_with_warning(skills_root):
    """Issue: 'an unquoted colon inside a scalar (`description: Use when: x` ...) — repair it and warn, do not
    reject'."""
    write_raw(skills_root, "colon", "---\nname: colon\ndescription: Use when: x\n---\nbody\n")
    item = one(listing(skills_root), "colon")
    assert item["error"] is None
    assert item["description"] == "Use when: x"
    assert item["warnings"], "a repair must be reported as a warning"


def test_unquoted_colon_in_license_is_repaired(skills_root):
    """Issue: '`license: MIT: see LICENSE` — repair it and warn, do not reject the skill'."""
    write_raw(skills_root, "lic", "---\nname: lic\ndescription: ok\nlicense: MIT: see LICENSE\n---\nbody\n")
    item = show_json(skills_root, "lic")
    assert item["error"] is None and item["manifest"]["license"] == "MIT: see LICENSE"
    assert item["warnings"]


def test_prettier_wrapped_plain_scalar(skills_root):
    """Issue: 'prettier-wrapped multi-line plain scalars'."""
    write_raw(
        skills_root,
        "wrapped",
        "---\nname: wrapped\ndescription: Use this skill when the user asks\n  for the price of a stock.\n---\nbody\n",
    )
    item = one(listing(skills_root), "wrapped")
    assert item["error"] is None
    assert item["description"] == "Use this skill when the user asks for the price of a stock."


def test_yaml11_yes_stays_a_string(skills_root):
    """Issue: 'YAML 1.1 surprises (`description: yes` ...) — string fields stay the strings the author wrote'."""
    write_raw(skills_root, "yes", "---\nname: yes\ndescription: yes\n---\nbody\n")
    items = listing(skills_root)
    item = one(items, "yes")
    assert item["description"] == "yes"


def test_yaml11_version_float_stays_text(skills_root):
    """Issue: '`version: 1.0` ... string fields stay the strings the author wrote, and everything is
    JSON-serializable'."""
    write_raw(skills_root, "ver", "---\nname: ver\ndescription: d\nversion: 1.0\n---\nbody\n")
    assert show_json(skills_root, "ver")["manifest"]["version"] == "1.0"


def test_yaml_dates_are_json_serializable_text(skills_root):
    """Issue: 'dates ... everything is JSON-serializable'."""
    write_raw(skills_root, "dated", "---\nname: dated\ndescription: d\ncreated: 2024-01-02\n---\nbody\n")
    info = show_json(skills_root, "dated")
    assert info["manifest"]["created"] == "2024-01-02"


def test_yaml_on_key_stays_a_key(skills_root):
    """Issue: 'a key `on:`' (YAML 1.1 would turn it into True)."""
    write_raw(skills_root, "onkey", "---\nname: onkey\ndescription: d\non: push\n---\nbody\n")
    assert show_json(skills_root, "onkey")["manifest"].get("on") == "push"


def test_numeric_name_stays_text(skills_root):
    """Issue: string fields stay strings; tool names: '`2048` ... get usable ones'."""
    write_raw(skills_root, "2048", "---\nname: 2048\ndescription: the game\n---\nbody\n")
    item = one(listing(skills_root), "2048")
    assert item["name"] == "2048" and all(TOOL_RX.match(t) for t in item["tool_names"])


def test_metadata_json5_trailing_commas_and_comments_keep_gating(skills_root, monkeypatch):
    """Issue: '`metadata` as JSON-style flow mappings with trailing commas or `//` comments (... JSON5 — so must we;
    gating must never be silently switched off)'."""
    monkeypatch.delenv("J5_PROBE_KEY", raising=False)
    write_raw(
        skills_root,
        "j5",
        '---\nname: j5\ndescription: d\nmetadata:\n  {\n    // OpenClaw style\n    "openclaw": {\n'
        '      "requires": { "env": ["J5_PROBE_KEY"], },\n    },\n  }\n---\nbody\n',
    )
    item = one(listing(skills_root), "j5")
    assert item["error"] is None
    assert item["needs_config"] == ["J5_PROBE_KEY"] and item["available"] is False


def test_metadata_one_line_json_openclaw_style(skills_root):
    """Issue: OpenClaw metadata as a JSON-style flow mapping on one line; 'missing bins → the same for binaries'."""
    write_raw(
        skills_root,
        "oneline",
        '---\nname: oneline\ndescription: d\nmetadata: {"openclaw": {"emoji": "x", "requires": {"bins": ["no_such_bin_zz9"]}}}\n---\n',  # noqa: E501 (a skill file's text)
    )
    item = one(listing(skills_root), "oneline")
    assert item["error"] is None and item["missing_bins"] == ["no_such_bin_zz9"]


def test_metadata_as_json_string(skills_root, monkeypatch):
    """Issue: 'metadata ... or as a JSON string'."""
    monkeypatch.delenv("JSTR_PROBE_KEY", raising=False)
    meta = json.dumps(json.dumps({"openclaw": {"requires": {"env": ["JSTR_PROBE_KEY"]}}}))
    write_raw(skills_root, "jstr", f"---\nname: jstr\ndescription: d\nmetadata: {meta}\n---\n")
    item = one(listing(skills_root), "jstr")
    assert item["error"] is None and item["needs_config"] == ["JSTR_PROBE_KEY"]


def test_missing_name_uses_folder_name(skills_root):
    """Issue: 'Missing `name` → the folder name'."""
    write_raw(skills_root, "folder_named", "---\ndescription: no name here\n---\nbody\n")
    item = one(listing(skills_root), "folder_named")
    assert item["error"] is None


def test_missing_description_uses_first_body_line_with_warning(skills_root):
    """Issue: 'missing `description` → the first non-heading body line, with a warning'."""
    write_raw(skills_root, "nodesc", "---\nname: nodesc\n---\n# Title\n\nFetches the weather.\nMore.\n")
    item = one(listing(skills_root), "nodesc")
    assert item["description"] == "Fetches the weather."
    assert item["warnings"] and item["error"] is None


def test_unterminated_frontmatter_is_listed_with_error(skills_root):
    """Issue: 'An unterminated frontmatter block ... → the skill is listed with its error, not dropped'."""
    write_raw(skills_root, "unterm", "---\nname: unterm\ndescription: never closed\n\nbody\n")
    items = listing(skills_root)
    found = [i for i in items if i["dir"].endswith("unterm")]
    assert len(found) == 1 and found[0]["error"], items


def test_unparseable_metadata_is_listed_with_error(skills_root):
    """Issue: 'unparseable metadata → the skill is listed with its error, not dropped'."""
    write_raw(
        skills_root, "badmeta", '---\nname: badmeta\ndescription: d\nmetadata: {"openclaw": {"requires": [[[\n---\n'
    )
    items = listing(skills_root)
    found = [i for i in items if i["dir"].endswith("badmeta")]
    assert len(found) == 1 and found[0]["error"], items
    assert found[0]["available"] is False and found[0]["exposed"] is False


def test_hopeless_yaml_is_listed_with_error_not_dropped(skills_root):
    """Issue: 'skillyard must list every real skill folder ... with a per-skill diagnostic for anything it ... could not
    read'."""
    write_raw(skills_root, "garbage", "---\nname: [unclosed\ndescription: {{{{\n  - : : -\n\t\tx: [\n---\nbody\n")
    items = listing(skills_root)
    found = [i for i in items if i["dir"].endswith("garbage")]
    assert len(found) == 1
    assert found[0]["error"] or found[0]["warnings"]


def test_frontmatter_not_a_mapping_is_listed(skills_root):
    """Issue: never 'skills that vanish silently'; frontmatter that is a list is diagnosed, not dropped."""
    write_raw(skills_root, "listfm", "---\n- a\n- b\n---\nbody\n")
    items = listing(skills_root)
    assert len([i for i in items if i["dir"].endswith("listfm")]) == 1


def test_error_skill_is_never_run(skills_root):
    """docs/authoring.md: 'A skill with a reading error (`error` in `skillyard list`) is never offered and never
    run.'"""
    write_raw(
        skills_root,
        "broken",
        '---\nname: broken\ndescription: d\nmetadata: {"openclaw": [[[\n---\n',
        files={"handler.py": "async def execute(i, c):\n    open('RAN', 'w').write('x')\n    return {'ok': True}\n"},
    )
    env = asyncio.run(run_skill(skills_root, "broken"))
    assert env["ok"] is False and env["success"] is False and env["error"]


def test_list_everything_is_json_serializable_with_odd_values(skills_root):
    """Issue: 'everything is JSON-serializable' (timestamps, sets of odd YAML)."""
    write_raw(
        skills_root,
        "odd",
        "---\nname: odd\ndescription: d\nwhen: 2024-01-02 10:00:00\nnums: [010, 0x1F, .inf]\nflag: on\n---\n",
    )
    info = show_json(skills_root, "odd")
    json.dumps(info)
    assert info["manifest"]["flag"] in ("on", True)


# =========================================================================================== 2. discovery


def test_nested_up_to_six_levels_not_seven(make_skill, skills_root):
    """Issue: 'a folder containing `SKILL.md` is a skill, found up to 6 levels deep'."""
    make_skill("a/b/c/d/e/six")
    make_skill("a/b/c/d/e/f/seven")
    names = {i["name"] for i in listing(skills_root)}
    assert "six" in names and "seven" not in names


@pytest.mark.parametrize("excluded", [".git", "node_modules", "__pycache__", ".venv", "venv", "site-packages"])
def test_excluded_folders_are_not_searched(make_skill, skills_root, excluded):
    """Issue: 'do not descend into a skill folder or into `.git`, `node_modules`, `__pycache__`, `.venv`/`venv`,
    `site-packages`'."""
    make_skill(f"cat/{excluded}/hidden_skill")
    make_skill("visible")
    names = {i["name"] for i in listing(skills_root)}
    assert names == {"visible"}


def test_no_descent_into_a_skill_folder(make_skill, skills_root):
    """Issue: 'do not descend into a skill folder'."""
    make_skill("outer", files={"sub/inner/SKILL.md": "---\nname: inner\ndescription: x\n---\n"})
    names = {i["name"] for i in listing(skills_root)}
    assert names == {"outer"}


def test_category_from_path(make_skill, skills_root):
    """Issue: 'Category from frontmatter, else from the path.'"""
    make_skill("research/arxiv")
    assert one(listing(skills_root), "arxiv")["category"] == "research"


def test_category_from_frontmatter_wins(make_skill, skills_root):
    """Issue: 'Category from frontmatter, else from the path.'"""
    make_skill("research/arxiv2", frontmatter="name: arxiv2\ndescription: d\ncategory: papers")
    assert one(listing(skills_root), "arxiv2")["category"] == "papers"


def test_tool_description_has_category_prefix(make_skill, skills_root):
    """Issue: 'A tool's description is `[category] description` when a category is known (§2.2).'"""
    make_skill("data/px", frontmatter="name: px\ndescription: Price lookup")
    info = show_json(skills_root, "px")
    assert info["tool_description"] == "[data] Price lookup"
    assert info["tools"][0]["description"] == "[data] Price lookup"


def test_lookup_skill_json_skill_md(skills_root):
    """Issue §2.1 lookup: '`<dir>/<skill_md or SKILL.md>` ... `skill_md` and `origin_path` come from an install manifest
    `skill.json`'."""
    d = skills_root / "inst"
    d.mkdir()
    (d / "skill.json").write_text(json.dumps({"skill_md": "MANUAL.md"}))
    (d / "MANUAL.md").write_text("---\nname: inst\ndescription: from manual\n---\n")
    item = one(listing(skills_root), "inst")
    assert item["description"] == "from manual" and item["skill_md"].endswith("MANUAL.md")


def test_lookup_origin_path_lowercase_skill_md(skills_root):
    """Issue §2.1: '`<dir>/<origin_path>/{SKILL.md, skill.md}`'."""
    d = skills_root / "orig"
    (d / "src" / "pkg").mkdir(parents=True)
    (d / "skill.json").write_text(json.dumps({"origin_path": "src/pkg"}))
    (d / "src" / "pkg" / "skill.md").write_text("---\nname: orig\ndescription: from origin\n---\n")
    item = one(listing(skills_root), "orig")
    assert item["description"] == "from origin"


def test_lookup_optional_skills_name_md_file(skills_root):
    """Issue §2.1: '`<dir>/optional-skills/<name>` ... `<name>` is the folder name and may be a file (`<name>.md`)'."""
    d = skills_root / "opt"
    (d / "optional-skills").mkdir(parents=True)
    (d / "optional-skills" / "opt.md").write_text("---\nname: opt\ndescription: optional file\n---\n")
    assert one(listing(skills_root), "opt")["description"] == "optional file"


def test_lookup_docs_name_folder(skills_root):
    """Issue §2.1: '`<dir>/docs/<name>` ... or a folder holding `SKILL.md`'."""
    d = skills_root / "dd"
    (d / "docs" / "dd").mkdir(parents=True)
    (d / "docs" / "dd" / "SKILL.md").write_text("---\nname: dd\ndescription: docs folder\n---\n")
    assert one(listing(skills_root), "dd")["description"] == "docs folder"


def test_lookup_readme_with_frontmatter(skills_root):
    """Issue §2.1: '`<dir>/README.md`. A README counts only when it has frontmatter'."""
    d = skills_root / "rd"
    d.mkdir()
    (d / "README.md").write_text("---\nname: rd\ndescription: readme skill\n---\n# x\n")
    assert one(listing(skills_root), "rd")["description"] == "readme skill"


def test_readme_without_frontmatter_is_not_a_skill(skills_root, make_skill):
    """Issue: 'A README counts only when it has frontmatter, so a project README ... never becomes a false skill.'"""
    d = skills_root / "proj"
    d.mkdir()
    (d / "README.md").write_text("# A project\n\nNot a skill.\n")
    make_skill("real")
    assert {i["name"] for i in listing(skills_root)} == {"real"}


def test_lookup_order_skill_md_beats_readme(skills_root):
    """Spec §2.1: '平台按以下顺序定位 SKILL.md，取第一个存在的' — SKILL.md before README.md."""
    d = skills_root / "both"
    d.mkdir()
    (d / "SKILL.md").write_text("---\nname: both\ndescription: the skill md\n---\n")
    (d / "README.md").write_text("---\nname: both\ndescription: the readme\n---\n")
    assert one(listing(skills_root), "both")["description"] == "the skill md"


def test_root_precedence_skills_dir_over_env_path(make_skill, tmp_path, monkeypatch):
    """Issue: 'Skill roots in precedence order: explicit `--skills-dir` ..., `SKILLYARD_SKILLS_PATH`' and
    'The same name in two roots: the higher root wins and `list` says which was shadowed'."""
    hi, lo = tmp_path / "hi", tmp_path / "lo"
    make_skill("dup", frontmatter="name: dup\ndescription: high", root=hi)
    make_skill("dup", frontmatter="name: dup\ndescription: low", root=lo)
    items = listing(hi, env={"SKILLYARD_SKILLS_PATH": str(lo)})
    dups = named(items, "dup")
    assert len(dups) == 2
    winner = [i for i in dups if i["active"]]
    assert len(winner) == 1 and winner[0]["description"] == "high"
    assert winner[0]["shadowed"] == [str(lo / "dup")]
    loser = next(i for i in dups if not i["active"])
    assert loser["tool_names"] == [] and loser["shadowed_by"] == str(hi / "dup")


def test_env_skills_path_is_os_pathsep_list(make_skill, tmp_path):
    """Issue: '`SKILLYARD_SKILLS_PATH` (os.pathsep list)'."""
    a, b = tmp_path / "a", tmp_path / "b"
    make_skill("sa", root=a)
    make_skill("sb", root=b)
    items = listing(env={"SKILLYARD_SKILLS_PATH": f"{a}{os.pathsep}{b}"})
    assert {"sa", "sb"} <= {i["name"] for i in items}


def test_env_skills_path_order_first_wins(make_skill, tmp_path):
    """docs/configuration.md: `SKILLYARD_SKILLS_PATH` roots, in order; docs/authoring.md: 'the first root that holds a
    skill name wins'."""
    a, b = tmp_path / "a", tmp_path / "b"
    make_skill("same", frontmatter="name: same\ndescription: A", root=a)
    make_skill("same", frontmatter="name: same\ndescription: B", root=b)
    items = listing(env={"SKILLYARD_SKILLS_PATH": f"{a}{os.pathsep}{b}"})
    active = [i for i in named(items, "same") if i["active"]]
    assert [i["description"] for i in active] == ["A"]


def test_two_skills_same_name_in_one_root_both_reported(make_skill, skills_root):
    """Issue: 'two skills of the same name in one root are both reported, never one silently dropped'."""
    make_skill("x1", frontmatter="name: twin\ndescription: one")
    make_skill("x2", frontmatter="name: twin\ndescription: two")
    twins = named(listing(skills_root), "twin")
    assert len(twins) == 2
    assert sum(1 for t in twins if t["error"]) == 1  # docs/decisions.md: 'the other is listed with an error'


def test_list_table_shows_shadowed_state(make_skill, tmp_path):
    """docs/cli.md: '`STATE` is `error` ..., `shadowed` (a higher-ranked skill has the same name), `ok` ... or
    `gated`'."""
    hi, lo = tmp_path / "hi", tmp_path / "lo"
    make_skill("dup", root=hi)
    make_skill("dup", root=lo)
    res = invoke("list", "--no-builtin", "--skills-dir", hi, "--skills-dir", lo)
    assert res.exit_code == 0
    assert "shadowed" in res.stdout and "ok" in res.stdout
    for col in ("NAME", "TYPE", "EXEC", "STATE", "WARN"):
        assert col in res.stdout


def test_list_json_has_every_required_field(make_skill, skills_root):
    """Issue: '`skillyard list` JSON is an array ... with at least: name, description, dir (absolute), skill_type,
    exec_type, source, category, trigger_type, exposed, tool_names, available, needs_config, missing_bins,
    os_supported, warnings (list of strings), error (string or null), shadowed (list of dirs).'"""
    make_skill("full", files={"handler.py": OK_HANDLER})
    item = one(listing(skills_root), "full")
    for key in (
        "name",
        "description",
        "dir",
        "skill_type",
        "exec_type",
        "source",
        "category",
        "trigger_type",
        "exposed",
        "tool_names",
        "available",
        "needs_config",
        "missing_bins",
        "os_supported",
        "warnings",
        "error",
        "shadowed",
    ):
        assert key in item, key
    assert os.path.isabs(item["dir"]) and isinstance(item["warnings"], list) and isinstance(item["shadowed"], list)
    assert item["source"] == "local" and item["exec_type"] == "PYTHON" and item["skill_type"] == "handler"


def test_skills_dir_relative_path_gives_absolute_dir(make_skill, skills_root, monkeypatch):
    """Issue: 'dir (absolute)'."""
    make_skill("rel")
    monkeypatch.chdir(skills_root.parent)
    item = one(listing(Path(skills_root.name)), "rel")
    assert os.path.isabs(item["dir"]) and item["dir"] == str(skills_root / "rel")


def test_plugin_root_ranks_below_env_path_and_gets_source_plugin(make_skill, tmp_path, monkeypatch):
    """Issue: roots 'explicit ..., `SKILLYARD_SKILLS_PATH` ..., plugin roots, built-in'. hooks.md: 'their skills get
    `source: plugin`'."""
    from skillyard import hookimpl
    from skillyard.plugins import pm

    proot, eroot = tmp_path / "proot", tmp_path / "eroot"
    make_skill("pl", frontmatter="name: pl\ndescription: from plugin", root=proot)
    make_skill("only_plugin", root=proot)
    make_skill("pl", frontmatter="name: pl\ndescription: from env", root=eroot)
    monkeypatch.setenv("SKILLYARD_SKILLS_PATH", str(eroot))

    class Roots:
        @hookimpl
        def skill_roots(self, yard):
            return [str(proot)]

    plugin = Roots()
    pm.register(plugin, name="probe-roots")
    try:
        yard = SkillYard(include_builtin=False)
        assert yard.skill("pl").description == "from env"
        assert yard.skill("only_plugin").source == "plugin"
    finally:
        pm.unregister(plugin)


def test_rescan_picks_up_added_changed_removed(make_skill, skills_root):
    """Issue: '`rescan()` ... picks up folders dropped in, changed or removed without a restart'."""
    make_skill("keep")
    gone = make_skill("gone")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    make_skill("added")
    (skills_root / "keep" / "SKILL.md").write_text("---\nname: keep\ndescription: changed text\n---\n")
    shutil.rmtree(gone)
    yard.rescan()
    names = {e.name for e in [yard.skill("keep"), yard.skill("added")]}
    assert names == {"keep", "added"}
    assert yard.skill("keep").description == "changed text"
    from skillyard import UnknownSkill

    with pytest.raises(UnknownSkill):
        yard.skill("gone")


async def test_running_host_finds_dropped_in_skill_by_name(make_skill, skills_root):
    """Issue: 'a long-running host picks up folders dropped in ... without a restart'. decisions: 'an unknown name
    triggers one rescan'."""
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        make_skill("late", files={"handler.py": OK_HANDLER})
        await asyncio.sleep(1.1)  # decisions.md: 'an unknown name triggers one rescan at most once a second'
        env = await yard.run("late", {})
        assert env["ok"] is True


# =========================================================================================== 3. gating


def gated(skills_root: Path, name: str, meta: str, **kw: Any) -> dict[str, Any]:
    write_raw(skills_root, name, f"---\nname: {name}\ndescription: d\n{textwrap.dedent(meta).strip()}\n---\n", **kw)
    return one(listing(skills_root), name)


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


async def test_needs_config_envelope_names_variables_and_skill_not_run(make_skill, skills_root, monkeypatch):
    """Issue: 'missing env ... → a `needs_config` envelope naming each missing variable, the skill not run'."""
    monkeypatch.delenv("NC_A", raising=False)
    monkeypatch.delenv("NC_B", raising=False)
    marker = skills_root / "ran.txt"
    make_skill(
        "nc",
        frontmatter="name: nc\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [NC_A, NC_B]",
        files={"handler.py": f"async def execute(i, c):\n    open({str(marker)!r}, 'w').write('x')\n    return {{}}\n"},
    )
    env = await run_skill(skills_root, "nc")
    assert env["ok"] is False and env["success"] is False
    assert sorted(env["needs_config"]) == ["NC_A", "NC_B"]
    assert "NC_A" in env["error"] and "NC_B" in env["error"]
    assert not marker.exists()


async def test_needs_config_satisfied_by_context_skill_configs(make_skill, skills_root, monkeypatch):
    """configuration.md: 'A caller may put a `skill_configs` or `skill_args` mapping in the context ... those values
    override the stored ones'."""
    monkeypatch.delenv("NC_C", raising=False)
    make_skill(
        "nc2",
        frontmatter="name: nc2\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [NC_C]",
        files={"handler.py": OK_HANDLER},
    )
    env = await run_skill(skills_root, "nc2", skill_configs={"NC_C": "v"})
    assert env["ok"] is True


async def test_missing_bins_envelope(make_skill, skills_root):
    """Issue: 'missing bins → the same for binaries'."""
    make_skill(
        "mb",
        frontmatter="name: mb\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      bins: [no_such_bin_q1]",
        files={"handler.py": OK_HANDLER},
    )
    env = await run_skill(skills_root, "mb")
    assert env["ok"] is False and env["missing_bins"] == ["no_such_bin_q1"]


@pytest.mark.parametrize("mode", ["shell", "runtime"])
async def test_exec_mode_skips_bins_check(make_skill, skills_root, mode):
    """Issue: 'missing bins → the same for binaries, except for skills with `exec_mode: shell` or `runtime`'."""
    make_skill(
        "em",
        frontmatter=f"name: em\ndescription: d\nexec_mode: {mode}\nmetadata:\n  openclaw:\n    requires:\n      bins: [no_such_bin_q2]",  # noqa: E501 (a skill file's text)
        files={"handler.py": OK_HANDLER},
    )
    env = await run_skill(skills_root, "em")
    assert env["ok"] is True


def test_cli_needs_config_exit_1(make_skill, skills_root, monkeypatch):
    """Issue: 'A `needs_config` result is a failure (exit 1 on the CLI).'"""
    monkeypatch.delenv("NC_CLI", raising=False)
    make_skill(
        "ncc",
        frontmatter="name: ncc\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [NC_CLI]",
        files={"handler.py": OK_HANDLER},
    )
    res = invoke("run", "ncc", "--skills-dir", skills_root)
    assert res.exit_code == 1
    env = json.loads(res.stdout)
    assert env["needs_config"] == ["NC_CLI"]


# =========================================================================================== 4. types, names


def test_skill_type_inferred_handler_and_skill_md(make_skill, skills_root):
    """Issue: 'declared by frontmatter `skill_type` or inferred (code → handler, else skill_md)'."""
    make_skill("code", files={"handler.py": OK_HANDLER})
    make_skill("doc")
    items = listing(skills_root)
    assert one(items, "code")["skill_type"] == "handler" and one(items, "doc")["skill_type"] == "skill_md"
    assert one(items, "doc")["exec_type"] is None


def test_knowledge_never_exposed(make_skill, skills_root):
    """Issue: 'any other value, and every knowledge skill, is not offered'."""
    make_skill("kn", frontmatter="name: kn\ndescription: d\nskill_type: knowledge")
    item = one(listing(skills_root), "kn")
    assert item["exposed"] is False and item["skill_type"] == "knowledge"


def test_missing_trigger_type_is_explicit(make_skill, skills_root):
    """Issue: 'a missing `trigger-type` (or `trigger.type`) means `explicit`, so third-party skills are offered'."""
    make_skill("tt")
    item = one(listing(skills_root), "tt")
    assert item["trigger_type"] == "explicit" and item["exposed"] is True


@pytest.mark.parametrize("decl", ["trigger-type: auto", "trigger:\n  type: scheduled"])
def test_other_trigger_type_not_exposed(make_skill, skills_root, decl):
    """Issue: 'any other value ... is not offered'."""
    make_skill("tt2", frontmatter=f"name: tt2\ndescription: d\n{decl}")
    assert one(listing(skills_root), "tt2")["exposed"] is False


def test_trigger_dot_type_explicit_is_exposed(make_skill, skills_root):
    """Issue: '`trigger-type` (or `trigger.type`)'."""
    make_skill("tt3", frontmatter="name: tt3\ndescription: d\ntrigger:\n  type: explicit")
    item = one(listing(skills_root), "tt3")
    assert item["exposed"] is True and item["trigger_type"] == "explicit"


def test_handler_without_entry_is_downgraded_with_warning(make_skill, skills_root):
    """Issue: 'a handler whose module has no entry function is downgraded to skill_md as the spec says, and `list` /
    `validate` show a warning'."""
    folder = make_skill("noentry", files={"handler.py": "def helper():\n    return 1\n"})
    item = one(listing(skills_root), "noentry")
    assert item["skill_type"] == "skill_md" and item["warnings"]
    res = invoke("validate", folder, "--json")
    report = json.loads(res.stdout)
    assert report[0]["warnings"] or report[0]["errors"]


@pytest.mark.parametrize("name", ["数据-技能", "here.now", "2048"])
def test_tool_names_provider_safe(skills_root, name):
    """Issue: 'Tool names are provider-safe (`^[A-Za-z0-9_-]{1,64}$` ...), derived deterministically from the name
    (`数据-技能`, `here.now` and `2048` all get usable ones)'."""
    write_raw(skills_root, "folder", f'---\nname: "{name}"\ndescription: d\n---\n')
    first = one(listing(skills_root), name)["tool_names"]
    again = one(listing(skills_root), name)["tool_names"]
    assert first and first == again and all(TOOL_RX.match(t) for t in first)


def test_tool_name_collision_resolved_and_reported(skills_root):
    """Issue: 'collisions are resolved deterministically and reported'."""
    write_raw(skills_root, "a", "---\nname: here.now\ndescription: d\n---\n")
    write_raw(skills_root, "b", "---\nname: here_now\ndescription: d\n---\n")
    items = listing(skills_root)
    t1, t2 = one(items, "here.now")["tool_names"], one(items, "here_now")["tool_names"]
    assert set(t1).isdisjoint(t2)
    assert one(items, "here.now")["warnings"] or one(items, "here_now")["warnings"]


def test_long_name_tool_name_capped(skills_root):
    """Issue: tool names match `^[A-Za-z0-9_-]{1,64}$` (docs: 'names over 64 characters are cut and end in a hash')."""
    long = "x" * 100
    write_raw(skills_root, "long", f"---\nname: {long}\ndescription: d\n---\n")
    tools = one(listing(skills_root), long)["tool_names"]
    assert tools and all(TOOL_RX.match(t) for t in tools)


def test_aliases_reported_and_runnable(make_skill, skills_root):
    """Issue: 'Frontmatter `aliases: [..]` makes a skill callable under other names too ..., reported by `list`.'"""
    make_skill("al", frontmatter="name: al\ndescription: d\naliases: [nocodb_probe, other]", files={"handler.py": ECHO})
    assert one(listing(skills_root), "al")["aliases"] == ["nocodb_probe", "other"]
    env = asyncio.run(run_skill(skills_root, "nocodb_probe", {"a": 1}))
    assert env["ok"] is True and env["got"] == {"a": 1}


def test_long_skill_md_warns(make_skill, skills_root):
    """Issue: 'SKILL.md over 8,000 characters on a skill_md skill → a warning'."""
    make_skill("longdoc", body="x" * 9000)
    assert any("8" in w for w in one(listing(skills_root), "longdoc")["warnings"])


def test_read_skill_file_caps_and_confines(make_skill, skills_root, tmp_path):
    """Issue: '`yard.read_skill_file(name, path, offset)` returns at most 40,000 characters per call, confined to the
    skill folder, with a stub for binary files.'"""
    make_skill("rf", files={"references/big.md": "y" * 100_000})
    (skills_root / "rf" / "img.bin").write_bytes(bytes(range(256)) * 10)
    (tmp_path / "outside.txt").write_text("secret")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    page = yard.read_skill_file("rf", "references/big.md")
    assert len(page["content"]) <= 40_000 and page["next_offset"]
    page2 = yard.read_skill_file("rf", "references/big.md", page["next_offset"])
    assert len(page2["content"]) <= 40_000
    binary = yard.read_skill_file("rf", "img.bin")
    assert binary["binary"] is True and "\x00" not in binary["content"]
    with pytest.raises(SkillyardError, match="outside the folder"):
        yard.read_skill_file("rf", "../../outside.txt")
    with pytest.raises(SkillyardError, match="outside the folder"):
        yard.read_skill_file("rf", str(tmp_path / "outside.txt"))


def test_read_skill_file_symlink_escape_refused(make_skill, skills_root, tmp_path):
    """Issue: 'confined to the skill folder'."""
    make_skill("rf2")
    (tmp_path / "outside.txt").write_text("TOPSECRET")
    os.symlink(tmp_path / "outside.txt", skills_root / "rf2" / "link.txt")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    try:
        out = yard.read_skill_file("rf2", "link.txt")
    except Exception:
        return
    assert "TOPSECRET" not in json.dumps(out)


# =========================================================================================== 5. exec declaration


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("a.py", "PYTHON"),
        ("a.sh", "SHELL"),
        ("a.js", "NODE"),
        ("a.mjs", "NODE"),
        ("a.rb", "RUBY"),
        ("a.go", "GO"),
        ("a.toml", "HTTP"),
    ],
)
def test_exec_type_by_extension(make_skill, skills_root, config, expected):
    """Issue: 'Type by `primary.type` when given, else by the config's extension: `.py` PYTHON, `.sh` SHELL,
    `.js`/`.mjs` NODE, `.rb` RUBY, `.go` GO, `.toml` HTTP'."""
    make_skill(
        "ex",
        frontmatter=f"name: ex\ndescription: d\nexec:\n  config: {config}",
        files={config: "def execute():\n    return {}\n" if config.endswith(".py") else "x\n"},
    )
    assert one(listing(skills_root), "ex")["exec_type"] == expected


def test_handler_py_without_exec_is_python(make_skill, skills_root):
    """Issue: 'When `exec` is absent or has no `config`: `handler.py` present → PYTHON; otherwise no code
    (skill_md).'"""
    make_skill("hp", frontmatter="name: hp\ndescription: d\nexec:\n  timeout: 5", files={"handler.py": OK_HANDLER})
    item = one(listing(skills_root), "hp")
    assert item["exec_type"] == "PYTHON" and item["skill_type"] == "handler"


def test_missing_exec_config_file_is_reported(make_skill, skills_root):
    """docs/cli.md validate: 'Errors: anything that stops the skill from loading (... missing `exec.config` ...)'."""
    folder = make_skill("nocfg", frontmatter="name: nocfg\ndescription: d\nexec:\n  config: nothere.sh")
    res = invoke("validate", folder)
    assert res.exit_code == 1


@pytest.mark.parametrize("t", ["BROWSER", "MCP"])
async def test_browser_mcp_not_supported(make_skill, skills_root, t):
    """Issue: 'BROWSER and MCP answer a clear "not supported yet" failure envelope.'"""
    make_skill("bm", frontmatter=f"name: bm\ndescription: d\nexec:\n  primary:\n    type: {t}")
    env = await run_skill(skills_root, "bm")
    assert env["ok"] is False and "not supported" in env["error"]


async def test_unknown_exec_type_config_failure_naming_known_types(make_skill, skills_root):
    """docs/authoring.md: 'A type no plugin registered answers a `config` failure naming the known types.'"""
    make_skill("unk", frontmatter="name: unk\ndescription: d\nexec:\n  primary:\n    type: TELEPATHY")
    env = await run_skill(skills_root, "unk")
    assert env["ok"] is False and env["error_type"] == "config" and "SHELL" in env["error"]


async def test_skill_md_run_is_config_failure(make_skill, skills_root):
    """docs/authoring.md: '`skill_md` ... `skillyard run` answers a `config` failure'."""
    make_skill("docsonly")
    env = await run_skill(skills_root, "docsonly")
    assert env["ok"] is False and env["error_type"] == "config"


# =========================================================================================== 6. input


def test_schema_json_beats_input_schema_constant(make_skill, skills_root):
    """Issue: '`schema.json` beats a schema constant in the handler (`INPUT_SCHEMA`)'."""
    make_skill(
        "sj",
        files={
            "schema.json": json.dumps({"type": "object", "properties": {"from_file": {"type": "string"}}}),
            "handler.py": "INPUT_SCHEMA = {'type': 'object', 'properties': {'from_code': {'type': 'string'}}}\n"
            + OK_HANDLER,
        },
    )
    assert set(show_json(skills_root, "sj")["input_schema"]["properties"]) == {"from_file"}


def test_input_schema_constant_used(make_skill, skills_root):
    """Spec §3.1: '放 schema.json 或代码内常量'."""
    make_skill(
        "isc",
        files={
            "handler.py": "INPUT_SCHEMA = {'type': 'object', 'properties': {'c': {'type': 'integer'}}}\n" + OK_HANDLER
        },
    )
    assert set(show_json(skills_root, "isc")["input_schema"]["properties"]) == {"c"}


def test_bare_string_property_repaired_with_warning(make_skill, skills_root):
    """Issue: 'bare-string property values are repaired (`"symbol": "string"` → `{"type": "string"}`) with a
    warning'."""
    make_skill(
        "bare",
        files={"schema.json": json.dumps({"type": "object", "properties": {"symbol": "string"}}), "handler.py": ECHO},
    )
    info = show_json(skills_root, "bare")
    assert info["input_schema"]["properties"]["symbol"] == {"type": "string"} and info["warnings"]
    assert info["error"] is None


@pytest.mark.parametrize("value", ["", "   ", [], {}, None])
async def test_required_empty_counts_as_missing(make_skill, skills_root, value):
    """Issue: 'Required means present and non-empty: `""`, `[]`, `{}` and whitespace count as missing' ...
    'A failed validation returns a recoverable failure envelope with `need_param` set to the field and an `error` that
    says the fix, without running the skill.'"""
    marker = skills_root / "ran"
    make_skill(
        "req",
        files={
            "schema.json": json.dumps({"type": "object", "properties": {"who": {}}, "required": ["who"]}),
            "handler.py": f"async def execute(i, c):\n    open({str(marker)!r}, 'w').write('x')\n    return {{}}\n",
        },
    )
    env = await run_skill(skills_root, "req", {"who": value})
    assert env["ok"] is False and env["need_param"] == "who" and env["error_type"] == "recoverable"
    assert "who" in env["error"] and not marker.exists()


@pytest.mark.parametrize("value", [0, False])
async def test_zero_and_false_are_values(make_skill, skills_root, value):
    """Issue: '`0` and `false` are values.'"""
    make_skill(
        "req0",
        files={
            "schema.json": json.dumps({"type": "object", "properties": {"n": {}}, "required": ["n"]}),
            "handler.py": ECHO,
        },
    )
    env = await run_skill(skills_root, "req0", {"n": value})
    assert env["ok"] is True and env["got"]["n"] == value


async def test_missing_required_key(make_skill, skills_root):
    """Spec §3.1: '缺字段 ... 都判为未提供'."""
    make_skill("req1", files={"schema.json": json.dumps(SCHEMA_WHO), "handler.py": ECHO})
    env = await run_skill(skills_root, "req1", {})
    assert env["ok"] is False and env["need_param"] == "who"
    assert "Who to greet" in env["error"]  # docs: 'it names the field and quotes its `description`'


async def test_type_error_names_field(make_skill, skills_root):
    """Issue: 'A failed validation returns a recoverable failure envelope with `need_param` set to the field'."""
    make_skill(
        "typ",
        files={
            "schema.json": json.dumps({"type": "object", "properties": {"count": {"type": "integer"}}}),
            "handler.py": ECHO,
        },
    )
    env = await run_skill(skills_root, "typ", {"count": "abc"})
    assert env["ok"] is False and env["need_param"] == "count" and env["error_type"] == "recoverable"
    assert "count" in env["error"]


async def test_nested_type_error_names_field(make_skill, skills_root):
    """Issue: '`need_param` set to the field'."""
    schema = {
        "type": "object",
        "properties": {"opts": {"type": "object", "properties": {"depth": {"type": "integer"}}}},
    }
    make_skill("nest", files={"schema.json": json.dumps(schema), "handler.py": ECHO})
    env = await run_skill(skills_root, "nest", {"opts": {"depth": "deep"}})
    assert env["ok"] is False and env["need_param"] in ("opts", "opts.depth", "depth")


async def test_defaults_not_filled_in(make_skill, skills_root):
    """docs/authoring.md: 'Defaults are not filled in.' Spec §3.1: '不会静默补默认值'."""
    make_skill(
        "dflt",
        files={
            "schema.json": json.dumps({"type": "object", "properties": {"limit": {"type": "integer", "default": 100}}}),
            "handler.py": ECHO,
        },
    )
    env = await run_skill(skills_root, "dflt", {})
    assert env["got"] == {}


def test_broken_schema_json_is_an_error(make_skill, skills_root):
    """docs/authoring.md: 'A broken `schema.json` is an error, never silently ignored.'"""
    make_skill("brk", files={"schema.json": "{not json", "handler.py": OK_HANDLER})
    assert one(listing(skills_root), "brk")["error"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": 5}},
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": "maybe"},
        {"type": "object", "properties": {"a": {"type": "array", "items": 3}}},
        {"type": "object", "properties": {"a": {"type": "strng"}}},
    ],
)
def test_invalid_schema_shapes_repaired_or_error(make_skill, skills_root, schema):
    """Issue: 'Schemas are checked against the JSON Schema meta-schema; shapes that providers reject (`properties`
    values that are not objects, `additionalProperties`/`items` that are neither boolean nor object) are repaired
    with a warning or reported as the skill's error (§3.1).'"""
    make_skill("shape", files={"schema.json": json.dumps(schema), "handler.py": OK_HANDLER})
    info = show_json(skills_root, "shape")
    if info["error"] is None:
        assert info["warnings"]
        from jsonschema.validators import Draft202012Validator

        Draft202012Validator.check_schema(info["input_schema"])
        exposed = info["input_schema"]
        for prop in exposed.get("properties", {}).values():
            assert isinstance(prop, dict)
            assert isinstance(prop.get("items", {}), (dict, bool))
        assert isinstance(exposed.get("additionalProperties", True), (dict, bool))


def test_schema_not_object_is_error(make_skill, skills_root):
    """Issue: 'Schemas are checked against the JSON Schema meta-schema'."""
    make_skill("arr", files={"schema.json": json.dumps([1, 2]), "handler.py": OK_HANDLER})
    assert one(listing(skills_root), "arr")["error"]


def test_credentials_removed_from_exposed_schema(make_skill, skills_root):
    """Issue: 'Parameters whose name contains key/token/secret/password/credential/auth (substring, case-insensitive,
    §5.2) are credentials: removed from the schema exposed to models (`skillyard show --json` prints the exposed
    schema)' and '`"x-secret": false` to stay an ordinary parameter (or `true` to force credential treatment)'."""
    make_skill("cred", files={"schema.json": json.dumps(CRED_SCHEMA), "handler.py": ECHO})
    info = show_json(skills_root, "cred")
    props = set(info["input_schema"]["properties"])
    assert props == {"q", "author", "max_tokens"}
    assert info["input_schema"].get("required") == ["q"]
    assert set(info["secret_params"]) == {"api_key", "Password", "keyword", "plain"}
    assert set(info["tools"][0]["input_schema"]["properties"]) == props


async def test_credential_input_ignored_and_filled_from_configs(make_skill, skills_root):
    """Issue: 'filled from configs at run time, and a value passed in the input for them is ignored'."""
    make_skill("cred2", files={"schema.json": json.dumps(CRED_SCHEMA), "handler.py": ECHO})
    env = await run_skill(
        skills_root,
        "cred2",
        {"q": "x", "api_key": "from-model", "plain": "model"},
        skill_configs={"api_key": "from-config"},
    )
    assert env["ok"] is True
    assert env["got"]["api_key"] == "from-config" and env["got"].get("plain") != "model"


def test_validate_lists_every_matched_property(make_skill, skills_root):
    """Issue: '`validate` lists every property the rule matched so authors see it' (incl. x-secret:false ones)."""
    folder = make_skill("cred3", files={"schema.json": json.dumps(CRED_SCHEMA), "handler.py": ECHO})
    res = invoke("validate", folder, "--json")
    text = json.dumps(json.loads(res.stdout))
    for p in ("api_key", "Password", "keyword", "author", "max_tokens"):
        assert p in text, p


def test_fan_out_tool_names_and_subschemas(make_skill, skills_root):
    """Issue: '`cli_commands` with 1–45 entries fan out into tools `<skill>__<sub>`'; show: '`tool_names` (with fan-out
    and each subcommand's schema)'."""
    make_skill("notes", frontmatter=NOTES_FM, files={"handler.py": ECHO})
    info = show_json(skills_root, "notes")
    assert sorted(info["tool_names"]) == ["notes__add", "notes__list"]
    tools = {t["name"]: t for t in info["tools"]}
    assert tools["notes__add"]["input_schema"]["required"] == ["text"]
    assert all(TOOL_RX.match(t) for t in info["tool_names"])


async def test_fan_out_call_restores_subcommand_and_validates(make_skill, skills_root):
    """Issue: 'a call is restored to the skill with `input["_subcommand"]` and validated against that subcommand's
    schema'."""
    make_skill("notes", frontmatter=NOTES_FM, files={"handler.py": ECHO})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        ok = await yard.run("notes__add", {"text": "hi"})
        bad = await yard.run("notes__add", {})
        lst = await yard.run("notes__list", {})
    assert ok["ok"] is True and ok["got"] == {"text": "hi", "_subcommand": "add"}
    assert bad["ok"] is False and bad["need_param"] == "text"
    assert lst["ok"] is True and lst["got"]["_subcommand"] == "list"


def test_more_than_45_subcommands_not_fanned_out(make_skill, skills_root):
    """Issue: '`cli_commands` with 1–45 entries fan out'; decisions: 'more are not fanned out (warning)'."""
    subs = "\n".join(f"  s{i}: {{}}" for i in range(46))
    make_skill("many", frontmatter=f"name: many\ndescription: d\ncli_commands:\n{subs}", files={"handler.py": ECHO})
    item = one(listing(skills_root), "many")
    assert item["tool_names"] == ["many"] and item["warnings"]


def test_exactly_45_subcommands_fan_out(make_skill, skills_root):
    """Issue: '`cli_commands` with 1–45 entries fan out into tools'."""
    subs = "\n".join(f"  s{i}: {{}}" for i in range(45))
    make_skill("many45", frontmatter=f"name: many45\ndescription: d\ncli_commands:\n{subs}", files={"handler.py": ECHO})
    assert len(one(listing(skills_root), "many45")["tool_names"]) == 45


def test_cli_run_fan_out_tool_name(make_skill, skills_root):
    """Issue: '`skillyard run NAME` (NAME may be a skill name, an alias or a fan-out tool name `<skill>__<sub>`)'."""
    make_skill("notes", frontmatter=NOTES_FM, files={"handler.py": ECHO})
    res = invoke("run", "notes__add", "--skills-dir", skills_root, "--input", '{"text": "t"}')
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["got"]["_subcommand"] == "add"


# =========================================================================================== 7. in-process PYTHON


async def test_entry_name_order(make_skill, skills_root):
    """Issue: 'entry name order execute/run/handler/main/handle'."""
    code = "".join(
        f"def {n}(i):\n    return {{'entry': '{n}'}}\n" for n in ("handle", "main", "handler", "run", "execute")
    )
    make_skill("order", files={"handler.py": code})
    code2 = "".join(f"def {n}(i):\n    return {{'entry': '{n}'}}\n" for n in ("handle", "main", "handler"))
    make_skill("order2", files={"handler.py": code2})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("order", {}))["entry"] == "execute"
        assert (await yard.run("order2", {}))["entry"] == "handler"


@pytest.mark.parametrize(
    ("sig", "expected"),
    [
        ("()", "none"),
        ("(i)", "input"),
        ("(i, c)", "both"),
        ("(i, c, extra=None)", "both"),
        ("(i, *, flag=False)", "input"),
    ],
)
async def test_binding_by_required_positionals(make_skill, skills_root, sig, expected):
    """Issue: 'bind by the number of required positional parameters (0 → f(), 1 → f(input), 2+ → f(input, ctx))'."""
    body = {
        "none": "    return {'bound': 'none'}\n",
        "input": "    return {'bound': 'input', 'v': i['v']}\n",
        "both": "    return {'bound': 'both', 'v': i['v'], 'has_ctx': 'raw_input' in c}\n",
    }[expected]
    make_skill("bind", files={"handler.py": f"async def execute{sig}:\n{body}"})
    env = await run_skill(skills_root, "bind", {"v": 1})
    assert env["ok"] is True, env
    assert env["bound"] == expected
    if expected == "both":
        assert env["has_ctx"] is True


async def test_non_dict_result_wrapped(make_skill, skills_root):
    """Issue: 'non-dict results wrapped as `{"result": …}`'."""
    make_skill("nd", files={"handler.py": "async def execute(i):\n    return [1, 2]\n"})
    env = await run_skill(skills_root, "nd")
    assert env["ok"] is True and env["result"] == [1, 2]


async def test_none_result_is_success(make_skill, skills_root):
    """Spec §6.1: '缺省或 None 不算失败'; issue: 'non-dict results wrapped as {"result": …}'."""
    make_skill("nn", files={"handler.py": "def execute():\n    return None\n"})
    env = await run_skill(skills_root, "nn")
    assert env["ok"] is True and env["success"] is True


async def test_sync_entry_runs_in_worker_thread_with_db_none(make_skill, skills_root):
    """Issue: 'sync entries run in a worker thread and get `ctx["db"] = None`'."""
    make_skill(
        "sync",
        files={
            "handler.py": """
        import threading
        def execute(i, ctx):
            return {"thread": threading.current_thread() is threading.main_thread(), "has_db": "db" in ctx, "db":
            ctx["db"]}
    """
        },
    )
    env = await run_skill(skills_root, "sync")
    assert env["ok"] is True and env["thread"] is False and env["has_db"] is True and env["db"] is None


async def test_two_skills_with_same_helper_module(make_skill, skills_root):
    """Issue: 'Each skill is loaded under its own package name, so two skills may both have `handler.py` and a skill may
    import its own helper modules (relative or sibling imports) without seeing any other skill's.'"""
    make_skill(
        "sa",
        files={
            "helpers.py": "VALUE = 'a'\n",
            "handler.py": "from helpers import VALUE\ndef execute():\n    return {'v': VALUE}\n",
        },
    )
    make_skill(
        "sb",
        files={
            "helpers.py": "VALUE = 'b'\n",
            "handler.py": "from .helpers import VALUE\ndef execute():\n    return {'v': VALUE}\n",
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        a1 = await yard.run("sa", {})
        b1 = await yard.run("sb", {})
        a2 = await yard.run("sa", {})
    assert (a1["v"], b1["v"], a2["v"]) == ("a", "b", "a")


async def test_skill_package_helper_subpackage(make_skill, skills_root):
    """Issue: 'a skill may import its own helper modules (relative or sibling imports)'."""
    make_skill(
        "pk",
        files={
            "lib/__init__.py": "",
            "lib/util.py": "X = 42\n",
            "handler.py": "from lib.util import X\nasync def execute(i, c):\n    return {'x': X}\n",
        },
    )
    make_skill(
        "pk2",
        files={
            "lib/__init__.py": "",
            "lib/util.py": "X = 7\n",
            "handler.py": "from .lib.util import X\nasync def execute(i, c):\n    return {'x': X}\n",
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("pk", {}))["x"] == 42
        assert (await yard.run("pk2", {}))["x"] == 7


async def test_skill_folder_not_on_sys_path(make_skill, skills_root):
    """docs/authoring.md: 'Code is imported per skill, under its own package name; the skill folder is never put on
    `sys.path`.'"""
    folder = make_skill("sp", files={"handler.py": "import sys\ndef execute():\n    return {'path': sys.path}\n"})
    env = await run_skill(skills_root, "sp")
    assert str(folder) not in env["path"]
    assert str(folder) not in sys.path


async def test_edited_handler_picked_up_after_rescan(make_skill, skills_root):
    """docs/authoring.md: 'A module is imported once per version of the folder's files: an edit takes effect after a
    rescan'."""
    folder = make_skill("ed", files={"handler.py": "def execute():\n    return {'v': 1}\n"})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("ed", {}))["v"] == 1
        (folder / "handler.py").write_text("def execute():\n    return {'v': 22222}\n")
        yard.rescan()
        assert (await yard.run("ed", {}))["v"] == 22222


async def test_in_process_timeout_async(make_skill, skills_root):
    """Issue: '`exec.timeout` is the wall clock of that skill whatever its exec type, in-process included' ... 'a run
    stopped by its wall clock says `timed_out: true`'."""
    make_skill(
        "slow",
        frontmatter="name: slow\ndescription: d\nexec:\n  timeout: 1",
        files={"handler.py": "import asyncio\nasync def execute(i, c):\n    await asyncio.sleep(30)\n    return {}\n"},
    )
    env = await run_skill(skills_root, "slow")
    assert env["ok"] is False and env["timed_out"] is True and env["success"] is False


async def test_in_process_timeout_sync(make_skill, skills_root):
    """Issue: '`exec.timeout` is the wall clock of that skill whatever its exec type, in-process included'."""
    make_skill(
        "slows",
        frontmatter="name: slows\ndescription: d\nexec:\n  timeout: 1",
        files={"handler.py": "import time\ndef execute(i, c):\n    time.sleep(3)\n    return {'late': True}\n"},
    )
    env = await run_skill(skills_root, "slows")
    assert env["ok"] is False and env["timed_out"] is True


@pytest.mark.parametrize(
    "exc",
    ["OSError('disk gone')", "ConnectionRefusedError('refused!')", "ValueError('bad value')", "KeyError('missing_k')"],
)
async def test_exception_becomes_envelope(make_skill, skills_root, exc):
    """Issue: 'Exceptions inside a skill become failure envelopes with `exception_type` (the class name, e.g. `OSError`,
    `ConnectionRefusedError`) and the message (traceback to the log only)'."""
    make_skill("boom", files={"handler.py": f"async def execute(i, c):\n    raise {exc}\n"})
    env = await run_skill(skills_root, "boom")
    cls, msg = exc.split("(")[0], exc.split("'")[1]
    assert env["ok"] is False and env["success"] is False
    assert env["exception_type"] == cls and msg in env["error"]
    assert "Traceback" not in json.dumps(env)
    json.dumps(env)


async def test_exception_in_sync_entry(make_skill, skills_root):
    """Issue: 'Exceptions inside a skill become failure envelopes'."""
    make_skill("boom2", files={"handler.py": "def execute(i):\n    return 1 / 0\n"})
    env = await run_skill(skills_root, "boom2")
    assert env["ok"] is False and env["exception_type"] == "ZeroDivisionError"


async def test_exception_at_import(make_skill, skills_root):
    """Issue: 'Exceptions inside a skill become failure envelopes'; yard.run: 'a skill's failures never raise'
    (README)."""
    make_skill("boom3", files={"handler.py": "raise RuntimeError('at import')\ndef execute():\n    return {}\n"})
    env = await run_skill(skills_root, "boom3")
    assert env["ok"] is False and env["exception_type"] == "RuntimeError"


async def test_syntax_error_handler(make_skill, skills_root):
    """decisions.md: 'a handler that does not parse ... fails its first run with `exception_type: SyntaxError`'."""
    make_skill("syn", files={"handler.py": "def execute(:\n    pass\n"})
    env = await run_skill(skills_root, "syn")
    assert env["ok"] is False and env["exception_type"] == "SyntaxError"


async def test_custom_exception_type_name(make_skill, skills_root):
    """Issue: '`exception_type` (the class name ...)'; docs: 'exception_family (the nearest built-in class)'."""
    make_skill(
        "boom4",
        files={
            "handler.py": "class QuotaGone(ConnectionError):\n    pass\nasync def execute(i, c):\n    raise QuotaGone('q')\n"  # noqa: E501 (a skill file's text)
        },
    )
    env = await run_skill(skills_root, "boom4")
    assert env["exception_type"] == "QuotaGone" and env["exception_family"] == "ConnectionError"
    assert env["error_type"] == "transient"


async def test_system_exit_in_process_reruns_as_cli(make_skill, skills_root):
    """Issue: 'PYTHON CLI: ... or an in-process run that raises SystemExit, runs as a subprocess instead.'"""
    make_skill(
        "sx",
        files={
            "handler.py": """
        import json, os, sys
        def execute(i):
            if os.environ.get("SKILL_INPUT") is None:
                sys.exit(2)
            return {"never": True}
        if os.environ.get("SKILL_INPUT") is not None:
            print(json.dumps({"via": "subprocess", "pid": os.getpid()}))
    """
        },
    )
    env = await run_skill(skills_root, "sx")
    assert env.get("via") == "subprocess" and env["pid"] != os.getpid()


# =========================================================================================== 8. subprocess


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
    child = env["env"]
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
    child = env["env"]
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


async def test_declared_credential_from_configs(probe_cli, skills_root, monkeypatch):
    """Issue: 'the credentials the skill declares (requires.env / primaryEnv, from configs, then the host environment,
    §5.2)'."""
    monkeypatch.setenv("PROBE_DECLARED", "from-host")
    env = await run_skill(skills_root, "probe", {}, skill_configs={"PROBE_DECLARED": "from-config"})
    assert env["env"]["PROBE_DECLARED"] == "from-config"


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
    ctx_text = env["env"]["SKILL_CONTEXT"]
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
    assert env["env"].get("API_TOKEN") == "CFGTOKEN99"
    assert "CFGTOKEN99" not in json.dumps(env["argv"]) and "CFGTOKEN99" not in env["env"]["SKILL_INPUT"]


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


@pytest.mark.parametrize(
    ("script", "check"),
    [
        ('printf \'{\\n  "a": 1,\\n  "b": [1, 2]\\n}\\n\'\n', lambda e: e["a"] == 1 and e["b"] == [1, 2]),
        ('echo "progress 1"\necho "progress 2"\necho \'{"last": true}\'\n', lambda e: e["last"] is True),
        ('echo "just text"\necho "more text"\n', lambda e: "just text" in e["output"] and "more text" in e["output"]),
        ('echo "[1, 2, 3]"\n', lambda e: e["result"] == [1, 2, 3]),
        ('echo "counted"\necho 42\n', lambda e: "42" in e["output"]),
        ("", lambda e: e.get("output") == ""),
    ],
    ids=["whole-json", "last-line-json", "plain", "whole-array", "bare-number-last", "empty"],
)
async def test_stdout_parse_order(make_skill, skills_root, script, check):
    """Issue: 'stdout parsed in order: whole JSON → last line JSON → media path line → `{"output": stdout}`'."""
    shell_skill(make_skill, "out", script)
    env = await run_skill(skills_root, "out")
    assert env["ok"] is True and check(env), env


async def test_stdout_media_path_line(make_skill, skills_root, tmp_path):
    """Issue: 'stdout parsed in order: ... → media path line'."""
    ws = tmp_path / "ws_media"
    shell_skill(make_skill, "media", "printf 'PNGDATA' > pic.png\necho 'made it'\necho pic.png\n")
    env = await run_skill(skills_root, "media", workspace_dir=str(ws))
    assert env["ok"] is True and env["local_path"].endswith("pic.png") and env["media"] == "image"


async def test_nonzero_exit(make_skill, skills_root):
    """Issue: 'stderr goes to the log; non-zero exit is a technical failure whose envelope carries `exit_code` and
    `stderr_tail`'."""
    shell_skill(make_skill, "fail", "echo 'partial'\necho 'disk is full' >&2\nexit 3\n")
    env = await run_skill(skills_root, "fail")
    assert env["ok"] is False and env["success"] is False and env["exit_code"] == 3
    assert "disk is full" in env["stderr_tail"] and env["error"]


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


async def test_subprocess_timeout_kills_group(make_skill, skills_root, tmp_path):
    """Issue: 'on timeout the whole process group is killed and the envelope says `timed_out: true`'."""
    ws = tmp_path / "ws_to"
    shell_skill(make_skill, "hang", "sleep 60 &\necho $! > child.pid\nsleep 60\n", extra="  timeout: 1")
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


async def test_cli_subcommand_is_argv0(make_skill, skills_root):
    """Issue: 'CLI skills get it as argv[0]'; spec §3.2: 'CLI 型技能的 _subcommand 会被放到 argv[0]'."""
    make_skill(
        "clisub",
        frontmatter="name: clisub\ndescription: d\nexec:\n  config: probe.py\ncli_commands:\n  add:\n    properties: {text: {type: string}}\n  rm: {}",  # noqa: E501 (a skill file's text)
        files={"probe.py": PROBE_CLI},
    )
    env = await run_skill(skills_root, "clisub__add", {"text": "t"})
    assert env["argv"][0] == "add" and env["argv"][1:] == ["--text", "t"]
    assert json.loads(env["env"]["SKILL_INPUT"]).get("_subcommand") in ("add", None)


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


# =========================================================================================== 9. HTTP


class ApiHandler(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        url = urlparse(self.path)
        rec = {
            "method": self.command,
            "path": url.path,
            "raw_path": self.path,
            "query": parse_qs(url.query),
            "headers": dict(self.headers),
            "body": raw.decode(),
        }
        ApiHandler.seen.append(rec)
        if url.path.startswith("/fail"):
            self._reply(503, b"upstream exploded: detail-xyz", "text/plain")
        elif url.path.startswith("/text"):
            self._reply(200, b"plain body here", "text/plain")
        else:
            self._reply(200, json.dumps({"data": {"echo": rec, "n": 7}, "meta": {"v": 1}}).encode())

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle


@pytest.fixture
def api():
    ApiHandler.seen = []
    with serve(ApiHandler) as base:
        yield base


def api_skill(make_skill, name: str, toml: str, extra: str = "", schema: dict | None = None) -> Path:
    files = {"api.toml": toml}
    if schema:
        files["schema.json"] = json.dumps(schema)
    return make_skill(
        name, frontmatter=f"name: {name}\ndescription: d\nexec:\n  config: api.toml\n{extra}", files=files
    )


async def test_http_get_url_encoding_query_headers_path(make_skill, skills_root, api):
    """Issue HTTP TOML: '`{field}` filled from input, URL-encoded', 'headers ... `${VAR}` from configs', 'query =
    ["limit"]', '[response] path = "data"'."""
    api_skill(
        make_skill,
        "price",
        f"""
        [request]
        method = "GET"
        url = "{api}/price/{{symbol}}"
        headers = {{ Authorization = "Bearer ${{PRICE_API_KEY}}" }}
        query = ["limit"]
        timeout = 10
        [response]
        path = "data"
    """,
        extra="metadata:\n  openclaw:\n    requires:\n      env: [PRICE_API_KEY]",
    )
    env = await run_skill(
        skills_root, "price", {"symbol": "BRK/A b&c", "limit": 5}, skill_configs={"PRICE_API_KEY": "k-123"}
    )
    assert env["ok"] is True, env
    rec = ApiHandler.seen[-1]
    assert rec["raw_path"].startswith("/price/BRK%2FA%20b%26c") or rec["raw_path"].startswith("/price/BRK%2FA+b%26c")
    assert rec["query"] == {"limit": ["5"]}
    assert rec["headers"]["Authorization"] == "Bearer k-123"
    assert env["n"] == 7 and "meta" not in env


async def test_http_header_var_from_environment(make_skill, skills_root, api, monkeypatch):
    """Issue HTTP TOML: '`${VAR}` from configs, then the environment'."""
    monkeypatch.setenv("PRICE_ENV_KEY", "env-456")
    api_skill(
        make_skill,
        "price2",
        f"""
        [request]
        url = "{api}/p"
        headers = {{ X-Key = "${{PRICE_ENV_KEY}}" }}
    """,
        extra="metadata:\n  openclaw:\n    primaryEnv: PRICE_ENV_KEY",
    )
    env = await run_skill(skills_root, "price2", {})
    assert env["ok"] is True and ApiHandler.seen[-1]["headers"]["X-Key"] == "env-456"


async def test_http_post_json_body(make_skill, skills_root, api):
    """Issue HTTP TOML: 'body = "json" # json | form | none: the remaining input fields as the body'."""
    api_skill(
        make_skill,
        "post",
        f"""
        [request]
        method = "POST"
        url = "{api}/items/{{id}}"
        query = ["limit"]
        body = "json"
    """,
    )
    env = await run_skill(skills_root, "post", {"id": "7", "limit": 2, "name": "x", "tags": ["a"]})
    assert env["ok"] is True
    rec = ApiHandler.seen[-1]
    assert rec["method"] == "POST" and rec["path"] == "/items/7"
    assert json.loads(rec["body"]) == {"name": "x", "tags": ["a"]}
    assert "json" in rec["headers"].get("Content-Type", "")


async def test_http_form_body(make_skill, skills_root, api):
    """Issue HTTP TOML: 'body = ... form'."""
    api_skill(
        make_skill,
        "form",
        f"""
        [request]
        method = "PUT"
        url = "{api}/f"
        body = "form"
    """,
    )
    env = await run_skill(skills_root, "form", {"a": "1", "b": "two words"})
    assert env["ok"] is True
    rec = ApiHandler.seen[-1]
    assert rec["method"] == "PUT" and parse_qs(rec["body"]) == {"a": ["1"], "b": ["two words"]}


async def test_http_body_none(make_skill, skills_root, api):
    """Issue HTTP TOML: 'body = ... none'."""
    api_skill(
        make_skill,
        "nob",
        f"""
        [request]
        method = "DELETE"
        url = "{api}/d"
        body = "none"
    """,
    )
    env = await run_skill(skills_root, "nob", {"a": "1"})
    assert env["ok"] is True and ApiHandler.seen[-1]["body"] == ""


async def test_http_non_2xx(make_skill, skills_root, api):
    """Issue: 'Non-2xx → failure envelope with status and a body excerpt'."""
    api_skill(
        make_skill,
        "bad",
        f"""
        [request]
        url = "{api}/fail"
    """,
    )
    env = await run_skill(skills_root, "bad", {})
    assert env["ok"] is False and env["success"] is False
    assert env["status"] == 503 and "detail-xyz" in env["body_excerpt"]


async def test_http_non_json_body_text(make_skill, skills_root, api):
    """Issue: 'a non-JSON body is returned as text'."""
    api_skill(
        make_skill,
        "txt",
        f"""
        [request]
        url = "{api}/text"
    """,
    )
    env = await run_skill(skills_root, "txt", {})
    assert env["ok"] is True and env["output"] == "plain body here"


async def test_http_connection_refused(make_skill, skills_root):
    """Issue: exceptions become envelopes with 'exception_type' ... 'ConnectionRefusedError'; never raises."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    api_skill(
        make_skill,
        "down",
        f"""
        [request]
        url = "http://127.0.0.1:{port}/x"
        timeout = 5
    """,
    )
    env = await run_skill(skills_root, "down", {})
    assert env["ok"] is False and env["error"]


async def test_http_secret_scrubbed_from_body_excerpt(make_skill, skills_root):
    """docs/authoring.md: credential values 'are replaced by `***` in ... `body_excerpt`'."""

    class Echo401(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = f"bad token {self.headers.get('Authorization')}".encode()
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serve(Echo401) as base:
        api_skill(
            make_skill,
            "e401",
            f"""
            [request]
            url = "{base}/x"
            headers = {{ Authorization = "Bearer ${{E401_TOKEN}}" }}
        """,
            extra="metadata:\n  openclaw:\n    requires:\n      env: [E401_TOKEN]",
        )
        env = await run_skill(skills_root, "e401", {}, skill_configs={"E401_TOKEN": "tok-very-secret"})
    assert env["ok"] is False and env["status"] == 401
    assert "tok-very-secret" not in json.dumps(env)


async def test_http_schema_credential_not_sent_from_model(make_skill, skills_root, api):
    """Issue: credential parameters: 'a value passed in the input for them is ignored'."""
    api_skill(
        make_skill,
        "hc",
        f"""
        [request]
        url = "{api}/q"
        query = ["q", "api_key"]
    """,
        schema={"type": "object", "properties": {"q": {"type": "string"}, "api_key": {"type": "string"}}},
    )
    env = await run_skill(skills_root, "hc", {"q": "z", "api_key": "from-model"})
    assert env["ok"] is True
    assert ApiHandler.seen[-1]["query"].get("api_key") != ["from-model"]


# =========================================================================================== 10. envelope


@pytest.fixture
def ret_skill(make_skill, skills_root):
    make_skill("ret", files={"handler.py": "async def execute(i, c):\n    return i['ret']\n"})
    return skills_root


async def ret(root: Path, value: Any) -> dict[str, Any]:
    return await run_skill(root, "ret", {"ret": value})


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"ok": False, "error": "x"}, False),
        ({"success": False, "error": "x"}, False),
        ({"success": None, "data": 1}, True),
        ({"ok": None}, True),
        ({}, True),
        ({"data": {"a": 1}}, True),
        ({"success": True, "ok": False, "error": "x"}, False),
        ({"ok": True, "success": False, "error": "x"}, False),
        ({"ok": "false", "error": "x"}, False),
    ],
)
async def test_ok_success_normalization(ret_skill, value, ok):
    """Issue: 'Normalize every result per §6.1: `success`/`ok` False means failure (missing or None does not)'; docs:
    'Both `ok` and `success` are always set.'"""
    env = await ret(ret_skill, value)
    assert env["ok"] is ok and env["success"] is ok


async def test_failure_without_error_gets_specific_one(ret_skill):
    """Issue: 'a failure without `error` gets a specific one (skill name, what was returned)'."""
    env = await ret(ret_skill, {"ok": False, "count": 3})
    assert env["ok"] is False and "ret" in env["error"] and "count" in env["error"]


async def test_failure_with_empty_error_gets_specific_one(ret_skill):
    """Spec §6.1: 'error ... 失败必须给原因'; issue: 'a failure without `error` gets a specific one'."""
    env = await ret(ret_skill, {"success": False, "error": "", "user_message": "票据已过期"})
    assert env["error"].strip() and "ret" in env["error"]


async def test_failure_fields_kept(ret_skill):
    """Issue: 'keep `user_message`, `need_param`, `error_type`, `non_retriable`, `redirect`, `action_note`'."""
    value = {
        "success": False,
        "error": "bad",
        "user_message": "um",
        "need_param": "np",
        "error_type": "recoverable",
        "non_retriable": True,
        "redirect": "other",
        "action_note": "initialize → 初始化",
        "extra": 1,
    }
    env = await ret(ret_skill, value)
    for k, v in value.items():
        if k != "success":
            assert env[k] == v, k
    assert env["skill"] == "ret"


async def test_action_note_kept_on_success(ret_skill):
    """Spec §6.1: 'action_note ... 成功失败都可带'."""
    env = await ret(ret_skill, {"success": True, "action_note": "a → b"})
    assert env["ok"] is True and env["action_note"] == "a → b"


async def test_envelope_json_serializable_odd_values(make_skill, skills_root):
    """Issue: '`yard.run` returns the normalized envelope as a plain `dict` (JSON-serializable)'."""
    make_skill(
        "odd",
        files={
            "handler.py": """
        import datetime, decimal, uuid, pathlib
        async def execute(i, c):
            return {"when": datetime.datetime(2024, 1, 2, 3, 4, tzinfo=datetime.timezone.utc), "d": datetime.date(2024,
            1, 2),
                    "dec": decimal.Decimal("1.50"), "u": uuid.UUID(int=1), "p": pathlib.Path("/x"), "s": {1},
                    "b": b"hi", "o": object(), "t": (1, 2), 5: "intkey", "nested": {"x": float("nan")}}
    """
        },
    )
    env = await run_skill(skills_root, "odd")
    assert type(env) is dict
    json.dumps(env, allow_nan=False)
    assert env["ok"] is True and env["dec"] == "1.50" and env["p"] == "/x"


def test_run_returns_plain_dict_same_as_cli(make_skill, skills_root):
    """Issue: 'the same shape `call_skill` returns and `skillyard run` prints'."""
    make_skill("same", files={"handler.py": "async def execute(i, c):\n    return {'v': 1}\n"})
    env = asyncio.run(run_skill(skills_root, "same"))
    res = invoke("run", "same", "--skills-dir", skills_root)
    printed = json.loads(res.stdout)
    assert type(env) is dict and set(printed) == set(env) and printed["v"] == env["v"] == 1


async def test_error_type_transient_for_oserror(make_skill, skills_root):
    """docs/authoring.md: '`error_type` `transient` for `OSError` (network, files) or `recoverable` otherwise.'"""
    make_skill("ose", files={"handler.py": "async def execute(i, c):\n    raise FileNotFoundError('nofile')\n"})
    env = await run_skill(skills_root, "ose")
    assert env["error_type"] == "transient" and env["exception_type"] == "FileNotFoundError"


async def test_in_process_secret_scrubbed_from_exception(make_skill, skills_root):
    """docs/authoring.md: 'Credential values the run could see (credential configs ...) are replaced by `***` in
    `error`'."""
    make_skill(
        "sx2", files={"handler.py": "async def execute(i, c):\n    raise ValueError('bad key ' + c['api_token'])\n"}
    )
    env = await run_skill(skills_root, "sx2", skill_configs={"api_token": "hunter2hunter2"})
    assert env["ok"] is False and "hunter2hunter2" not in json.dumps(env)


# =========================================================================================== 11. context


FIXED = {
    "raw_input": "str",
    "attachments": "list",
    "actor_name": "str",
    "actor_emp_no": "str",
    "actor_department": "str",
    "actor_department_path": "str",
    "actor_position": "str",
    "actor_title": "str",
    "actor_phone": "str",
    "actor_email": "str",
    "actor_tags": "list",
    "actor_key": "str",
    "channel": "str",
    "triggered_at": "float",
    "triggered_at_str": "str",
    "actor_id": "str",
    "actor_is_admin": "bool",
}
PLATFORM = {
    "org_id": "str",
    "role_id": "str",
    "session_id": "str",
    "user_id": "str",
    "team_id": "str",
    "team_role": "str",
    "is_admin": "bool",
    "chat_mode": "bool",
    "allow_sql": "bool",
    "workspace_dir": "str",
}


async def test_fixed_fields_always_present_typed(dump_skill):
    """Issue: 'the fixed fields always present with typed empty values (`triggered_at` float, `triggered_at_str`
    `YYYY-MM-DD HH:MM` UTC, lists as lists)'."""
    env = await run_skill(dump_skill, "dump")
    for k, t in {**FIXED, **PLATFORM}.items():
        assert env["types"].get(k) == t, (k, env["types"].get(k))
    ctx = env["ctx"]
    assert ctx["attachments"] == [] and ctx["actor_tags"] == [] and ctx["actor_is_admin"] is False
    assert ctx["allow_sql"] is True and ctx["chat_mode"] is False
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", ctx["triggered_at_str"])
    expect = datetime.fromtimestamp(ctx["triggered_at"], tz=UTC).strftime("%Y-%m-%d %H:%M")
    assert ctx["triggered_at_str"] == expect


async def test_triggered_at_str_derived_from_given_triggered_at(dump_skill):
    """Spec §4.2: 'triggered_at_str ... YYYY-MM-DD HH:MM，UTC'."""
    env = await run_skill(dump_skill, "dump", triggered_at=0.0 + 86400 * 365)
    assert env["ctx"]["triggered_at_str"] in ("1971-01-01 00:00",)


async def test_coercion_of_given_values(dump_skill):
    """docs/authoring.md: 'Values the caller passes are coerced to these types: `"yes"` → `True`, `"a, b"` → `["a",
    "b"]`, `"12"` → `12.0`.'"""
    env = await run_skill(
        dump_skill, "dump", actor_is_admin="no", actor_tags="a, b", triggered_at="12", is_admin="yes", actor_name=None
    )
    ctx = env["ctx"]
    assert ctx["actor_tags"] == ["a", "b"] and ctx["triggered_at"] == 12.0 and ctx["is_admin"] is True
    assert ctx["actor_is_admin"] is False and ctx["actor_name"] == ""


async def test_admin_fill_clears_identity(dump_skill):
    """Issue: 'admin-fill clearing (§4.4)'; spec: '清空：actor_title, actor_department, actor_department_path,
    actor_position, actor_tags, actor_key, actor_id, actor_emp_no 保留：actor_name, actor_phone, actor_email'."""
    given = {
        "actor_is_admin": True,
        "actor_title": "VP",
        "actor_department": "Sales",
        "actor_department_path": "/HQ/Sales/",
        "actor_position": "lead",
        "actor_tags": ["x"],
        "actor_key": "k",
        "actor_id": "9",
        "actor_emp_no": "E1",
        "actor_name": "Ada",
        "actor_phone": "123",
        "actor_email": "a@x",
    }
    ctx = (await run_skill(dump_skill, "dump", **given))["ctx"]
    for k in (
        "actor_title",
        "actor_department",
        "actor_department_path",
        "actor_position",
        "actor_key",
        "actor_id",
        "actor_emp_no",
    ):
        assert ctx[k] == "", k
    assert ctx["actor_tags"] == []
    assert (ctx["actor_name"], ctx["actor_phone"], ctx["actor_email"]) == ("Ada", "123", "a@x")


async def test_department_path_normalized_in_context(dump_skill):
    """Issue: '`actor_department_path` normalized to `/top/…/own/` (leading and trailing slash, at most 20 levels,
    §4.5)'."""
    ctx = (await run_skill(dump_skill, "dump", actor_department_path="总部/销售中心//销售一部"))["ctx"]
    assert ctx["actor_department_path"] == "/总部/销售中心/销售一部/"


def test_department_path_helper():
    """Spec §4.5: '深度上限 20 层，超出从顶端截断'; '空值 ""'."""
    segs = [f"d{i}" for i in range(25)]
    out = department_path("/" + "/".join(segs) + "/")
    assert out == "/" + "/".join(segs[-20:]) + "/"
    assert department_path("") == "" and department_path("///") == ""
    assert department_path(["a", "b"]) == "/a/b/"
    assert current_department("/a/b/") == "b" and current_department("") == ""


def test_identity_org_id_helper():
    """Issue: 'the pseudo-organisation `r_<role_id>` for identity lookups when `org_id` is empty (§4.6), exposed as a
    documented helper'."""
    assert identity_org_id({"org_id": "", "role_id": "r1"}) == "r_r1"
    assert identity_org_id({"org_id": "  ", "role_id": "r1"}) == "r_r1"
    assert identity_org_id({"org_id": " acme ", "role_id": "r1"}) == "acme"
    assert identity_org_id({"role_id": "r2"}) == "r_r2"


async def test_configs_in_four_places_and_normalized(dump_skill):
    """Issue: 'configs injected in the four places of §5.1 with CLI-style `--api-token` normalized to `api_token`'."""
    ctx = (await run_skill(dump_skill, "dump", skill_configs={"--api-token": "T1", "region": "eu"}))["ctx"]
    assert ctx["skill_configs"]["dump"]["api_token"] == "T1"
    assert ctx["skill_configs"]["api_token"] == "T1"
    assert ctx["skill_args"]["api_token"] == "T1"
    assert ctx["api_token"] == "T1" and ctx["region"] == "eu"


async def test_config_never_replaces_fixed_field(dump_skill):
    """docs/authoring.md: '`ctx["api_token"]` ... top-level copy; never replaces a fixed or platform field'."""
    ctx = (
        await run_skill(
            dump_skill, "dump", channel="web", skill_configs={"channel": "evil", "org_id": "evil"}, org_id="acme"
        )
    )["ctx"]
    assert ctx["channel"] == "web" and ctx["org_id"] == "acme"


async def test_call_skill_and_db_keys_in_process(dump_skill):
    """docs/authoring.md platform fields: '`call_skill` async callable in-process Python skills only'; '`db`,
    `db_factory` ... otherwise `None`'."""
    env = await run_skill(dump_skill, "dump")
    assert env["types"]["call_skill"] in ("function", "method", "partial", "coroutine") or env["ctx"][
        "call_skill"
    ].startswith("<")
    assert env["ctx"].get("db") is None and env["ctx"].get("db_factory") is None


async def test_extra_caller_keys_kept(dump_skill):
    """docs/authoring.md: 'Extra keys the caller passes (e.g. `org_name`) are kept.'"""
    ctx = (await run_skill(dump_skill, "dump", org_name="Acme Ltd"))["ctx"]
    assert ctx["org_name"] == "Acme Ltd"


async def test_unsafe_session_id_refused(dump_skill):
    """docs/authoring.md: 'A `session_id` must be 1-128 letters, digits, `_`, `-` or `.`, starting with a letter or
    digit.'"""
    try:
        env = await run_skill(dump_skill, "dump", session_id="../../etc")
    except Exception:
        return
    assert env["ok"] is False


def test_cli_unsafe_session_exit_2(dump_skill):
    """docs/cli.md: exit 2 for '... unsafe `session_id`'."""
    res = invoke("run", "dump", "--skills-dir", dump_skill, "--context", '{"session_id": "../x"}')
    assert res.exit_code == 2 and "Traceback" not in res.output


# =========================================================================================== 12. turn budget


@pytest.fixture
def budget_root(make_skill, skills_root):
    counter = skills_root / "count.txt"
    code = f"""
        async def execute(i, c):
            with open({str(counter)!r}, "a") as fh:
                fh.write(c["session_id"] + "\\n")
            return i.get("ret", {{"ok": True}})
    """
    for n in ("f1", "f2", "f3", "f4", "f5"):
        make_skill(n, files={"handler.py": code})
    make_skill(
        "strict",
        files={
            "handler.py": code,
            "schema.json": json.dumps(
                {"type": "object", "properties": {"ret": {}, "need": {"type": "string"}}, "required": ["need"]}
            ),
        },
    )
    return skills_root


def runs_made(root: Path) -> int:
    p = root / "count.txt"
    return len(p.read_text().splitlines()) if p.exists() else 0


async def test_two_consecutive_failures_ban(budget_root):
    """Issue §6.1.4: '2 consecutive failures of a skill → banned for the turn'."""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t1")
        await yard.run("f1", {"ret": FAIL, "n": 1}, turn=turn)
        await yard.run("f1", {"ret": FAIL, "n": 2}, turn=turn)
        third = await yard.run("f1", {"n": 3}, turn=turn)
        other = await yard.run("f2", {"n": 4}, turn=turn)
    assert third["ok"] is False and third["banned"] is True
    assert other["ok"] is True
    assert runs_made(budget_root) == 3


async def test_success_resets_consecutive(budget_root):
    """decisions.md: 'a success resets a skill's consecutive-failure count. "Two in a row" means two in a row.'"""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t2")
        await yard.run("f1", {"ret": FAIL, "n": 1}, turn=turn)
        await yard.run("f1", {"n": 2}, turn=turn)
        await yard.run("f1", {"ret": FAIL, "n": 3}, turn=turn)
        env = await yard.run("f1", {"n": 4}, turn=turn)
    assert env["ok"] is True and not env.get("banned")


async def test_four_failures_wrap_up(budget_root):
    """Issue: '4 in total → the turn is told to wrap up'."""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t3")
        envs = [await yard.run(n, {"ret": FAIL}, turn=turn) for n in ("f1", "f2", "f3", "f4")]
        after = await yard.run("f5", {}, turn=turn)
    assert not envs[2].get("wrap_up") and envs[3]["wrap_up"] is True
    assert after["wrap_up"] is True and after["ok"] is False
    assert runs_made(budget_root) == 4


async def test_same_input_three_times_loop(budget_root):
    """Issue: 'the same (skill, input) 3 times → loop detected'."""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t4")
        a = await yard.run("f1", {"x": 1, "y": 2}, turn=turn)
        b = await yard.run("f1", {"y": 2, "x": 1}, turn=turn)
        c = await yard.run("f1", {"x": 1, "y": 2}, turn=turn)
    assert a["ok"] and b["ok"] and c["ok"] is False and c["loop_detected"] is True
    assert runs_made(budget_root) == 2


async def test_non_retriable_bans_at_once(budget_root):
    """Issue: '`non_retriable` bans the skill at once'."""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t5")
        await yard.run("f1", {"ret": {**FAIL, "non_retriable": True}}, turn=turn)
        env = await yard.run("f1", {"n": 2}, turn=turn)
    assert env["banned"] is True and runs_made(budget_root) == 1


async def test_validation_refusals_do_not_count(budget_root):
    """Issue: 'Only real runs of a skill count.'"""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t6")
        for i in range(5):
            r = await yard.run("strict", {"need": "", "i": i}, turn=turn)
            assert r["need_param"] == "need"
        env = await yard.run("strict", {"need": "x"}, turn=turn)
    assert env["ok"] is True and runs_made(budget_root) == 1


async def test_gating_refusals_do_not_count(make_skill, skills_root, monkeypatch):
    """Issue: 'Only real runs of a skill count.'; docs: 'calls refused by the budget, gating or input validation do
    not'."""
    monkeypatch.delenv("GATE_T", raising=False)
    make_skill(
        "gt",
        frontmatter="name: gt\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [GATE_T]",
        files={"handler.py": OK_HANDLER},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t7")
        for i in range(3):
            await yard.run("gt", {"i": i}, turn=turn)
        env = await yard.run("gt", {"i": 9}, turn=turn, context={"skill_configs": {"GATE_T": "v"}})
    assert env["ok"] is True and not env.get("banned") and not env.get("wrap_up")


async def test_turn_sets_chat_mode_and_session(dump_skill):
    """docs: '`yard.new_turn()` sets `chat_mode: true`'; issue: 'turn = yard.new_turn(session_id=…, channel=…)'."""
    async with SkillYard(skills_dirs=[dump_skill], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="sess9", channel="wecom")
        env = await yard.run("dump", {}, turn=turn)
    ctx = env["ctx"]
    assert ctx["chat_mode"] is True and ctx["session_id"] == "sess9" and ctx["channel"] == "wecom"


# =========================================================================================== 13. call_skill


async def test_call_skill_context_whitelist(chain_root):
    """Issue §9.1: 'The callee's context passes exactly the whitelist ... never the caller's
    `skill_configs`/`skill_args`/flat keys or invented keys such as `emp_no`.'"""
    env = await run_skill(
        chain_root,
        "caller",
        {"target": "callee", "input": {"a": 1}},
        role_id="r1",
        session_id="s1",
        org_id="o1",
        actor_emp_no="E7",
        emp_no="E7",
        org_name="Acme",
        channel="web",
        actor_name="Ada",
        skill_configs={"caller_secret_cfg": "CFGV"},
        raw_input="hello there",
    )
    inner = env["inner"]
    assert inner["ok"] is True, inner
    ctx = inner["ctx"]
    assert (
        ctx["role_id"],
        ctx["session_id"],
        ctx["org_id"],
        ctx["actor_emp_no"],
        ctx["channel"],
        ctx["actor_name"],
    ) == ("r1", "s1", "o1", "E7", "web", "Ada")
    assert "emp_no" not in ctx and "org_name" not in ctx and "caller_secret_cfg" not in ctx
    assert "CFGV" not in json.dumps(ctx)
    assert ctx.get("raw_input", "") == ""
    assert inner["input"] == {"a": 1}


async def test_call_skill_unknown_never_raises(chain_root):
    """Issue: 'the result is the callee's normalized output dict, or `{"ok": False, "error": …, "skill": name}` — it
    never raises.'"""
    env = await run_skill(chain_root, "caller", {"target": "nope_missing"})
    inner = env["inner"]
    assert inner["ok"] is False and inner["error"] and inner["skill"] == "nope_missing"


async def test_call_skill_self_refused(chain_root):
    """Issue: 'a skill calling itself directly is refused'."""
    env = await run_skill(chain_root, "caller", {"target": "caller", "input": {"target": "callee"}})
    assert env["ok"] is True and env["inner"]["ok"] is False and env["inner"]["error"]


async def test_call_skill_depth_limit(make_skill, skills_root):
    """Issue: 'At most 3 levels deep'; decisions: 'a skill at depth 3 cannot call further'."""
    for i in range(1, 6):
        make_skill(
            f"c{i}",
            files={
                "handler.py": f"""
            async def execute(i, ctx):
                r = await ctx["call_skill"]("c{i + 1}", {{}})
                return {{"level": {i}, "next": r}}
        """
            },
        )
    env = await run_skill(skills_root, "c1")
    chain, depth = env, 0
    while isinstance(chain, dict) and "next" in chain:
        chain = chain["next"]
        depth += 1
    assert chain["ok"] is False and depth == 4  # c1→c2→c3→c4, c4's call refused


async def test_call_skill_input_priority(chain_root):
    """Issue: 'priority explicit dict/kwargs > template (`{field}` filled from source) > passthrough (the whole
    source)'."""
    kw = {
        "source": {"a": "src-a", "b": "src-b", "c": "src-c", "n": 5},
        "template": {"a": "tpl-{b}", "b": "tpl-{c}", "num": "{n}"},
        "passthrough": True,
        "d": "kwarg-d",
    }
    env = await run_skill(chain_root, "caller", {"target": "callee", "input": {"a": "explicit"}, "kw": kw})
    got = env["inner"]["input"]
    assert got["a"] == "explicit" and got["b"] == "tpl-src-c" and got["c"] == "src-c" and got["d"] == "kwarg-d"
    assert got["num"] == 5


async def test_call_skill_exception_in_callee(make_skill, chain_root):
    """Issue: 'it never raises'."""
    make_skill("raiser", files={"handler.py": "async def execute(i, c):\n    raise OSError('io')\n"})
    env = await run_skill(chain_root, "caller", {"target": "raiser"})
    assert env["ok"] is True and env["inner"]["ok"] is False and env["inner"]["exception_type"] == "OSError"


async def test_call_skill_validation_failure_envelope(make_skill, chain_root):
    """Issue: 'it never raises'; call_skill returns failure envelopes (invalid input)."""
    make_skill("needy", files={"handler.py": OK_HANDLER, "schema.json": json.dumps(SCHEMA_WHO)})
    env = await run_skill(chain_root, "caller", {"target": "needy", "input": {}})
    assert env["inner"]["ok"] is False and env["inner"]["need_param"] == "who"


async def test_call_skill_subprocess_callee(make_skill, chain_root):
    """docs/authoring.md §9.3 pattern: an in-process skill calls a subprocess skill through call_skill."""
    shell_skill(make_skill, "shcallee", 'echo \'{"ok": true, "v": 42}\'\n')
    env = await run_skill(chain_root, "caller", {"target": "shcallee"})
    assert env["inner"]["ok"] is True and env["inner"]["v"] == 42


async def test_subprocess_has_no_call_skill(probe_cli, skills_root, monkeypatch):
    """Issue: 'Subprocess and HTTP skills have no `call_skill`'."""
    monkeypatch.setenv("PROBE_DECLARED", "x")
    env = await run_skill(skills_root, "probe")
    assert "call_skill" not in json.loads(env["env"]["SKILL_CONTEXT"])


# ========================================== 14. database, configs, run records


async def test_async_entry_gets_live_asyncsession(make_skill, skills_root, db_env):
    """Issue: '`db` is a live SQLAlchemy `AsyncSession` (asyncpg) and `db_factory` a session factory, for in-process
    async entries only.'"""
    make_skill(
        "dbs",
        files={
            "handler.py": """
        from sqlalchemy import text
        async def execute(i, ctx):
            db = ctx["db"]
            val = (await db.execute(text("SELECT 41 + 1"))).scalar()
            async with ctx["db_factory"]() as s2:
                v2 = (await s2.execute(text("SELECT 7"))).scalar()
            return {"v": val, "v2": v2, "cls": type(db).__name__}
    """
        },
    )
    env = await run_skill(skills_root, "dbs")
    assert env["ok"] is True, env
    assert (env["v"], env["v2"], env["cls"]) == (42, 7, "AsyncSession")


async def test_sync_entry_db_none_even_when_db_used(make_skill, skills_root, db_env):
    """Spec §1: '同步入口被平台显式置为 None'."""
    make_skill("dbsync", files={"handler.py": "def execute(i, ctx):\n    return {'db_is_none': ctx['db'] is None}\n"})
    env = await run_skill(skills_root, "dbsync")
    assert env["db_is_none"] is True


async def test_stored_configs_four_places_and_cache_invalidation(dump_skill, db_env):
    """Issue: 'configs injected in the four places of §5.1 with CLI-style `--api-token` normalized to `api_token`' and
    'configs cached per (role, skill) with invalidation on change'."""
    async with SkillYard(skills_dirs=[dump_skill], include_builtin=False) as yard:
        await yard.configs.set("rA", "dump", {"--api-token": "v1", "units": "metric"})
        ctx = (await yard.run("dump", {}, context={"role_id": "rA"}))["ctx"]
        assert ctx["api_token"] == "v1" and ctx["skill_args"]["api_token"] == "v1"
        assert ctx["skill_configs"]["dump"]["api_token"] == "v1" and ctx["skill_configs"]["api_token"] == "v1"
        await yard.configs.set("rA", "dump", {"api_token": "v2"})
        ctx2 = (await yard.run("dump", {}, context={"role_id": "rA"}))["ctx"]
        assert ctx2["api_token"] == "v2"
        other = (await yard.run("dump", {}, context={"role_id": "rB"}))["ctx"]
        assert "api_token" not in other and "v2" not in json.dumps(other)


async def test_run_records_written(make_skill, skills_root, db_env):
    """Issue: 'run records written behind the response in batches'; configuration.md: 'one row per run: skill, role,
    session, ok, `error_type`, `exception_type`, `timed_out` ... Inputs, outputs and configs are never recorded.' 'not
    for runs refused by gating, input validation'."""
    from sqlalchemy import text

    make_skill(
        "rec1",
        files={
            "handler.py": "async def execute(i, c):\n    if i.get('boom'):\n        raise OSError('x')\n    return {'ok': True, 'out': 'OUTPUT-MARK'}\n",  # noqa: E501 (a skill file's text)
            "schema.json": json.dumps({"type": "object", "properties": {"boom": {}, "must": {}}, "required": ["must"]}),
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        await yard.run(
            "rec1",
            {"must": "INPUT-MARK"},
            context={"role_id": "rr", "session_id": "recs", "skill_configs": {"pw": "CONF-MARK"}},
        )
        await yard.run("rec1", {"must": "y", "boom": True}, context={"role_id": "rr", "session_id": "recs"})
        await yard.run("rec1", {"must": ""}, context={"role_id": "rr", "session_id": "recs"})
    async with SkillYard(include_builtin=False) as yard, await yard.database.session() as s:
        rows = (
            (
                await s.execute(
                    text("SELECT * FROM skillyard.runs WHERE skill = 'rec1' AND session_id = 'recs' ORDER BY id")
                )
            )
            .mappings()
            .all()
        )
    assert len(rows) == 2
    assert [r["ok"] for r in rows] == [True, False]
    assert rows[1]["exception_type"] == "OSError" and rows[0]["role_id" if "role_id" in rows[0] else "role"] == "rr"
    dump = str([dict(r) for r in rows])
    assert "INPUT-MARK" not in dump and "OUTPUT-MARK" not in dump and "CONF-MARK" not in dump


async def test_no_database_started_for_plain_run(make_skill, skills_root, home):
    """Issue: 'With no `SKILLYARD_DATABASE_URL`, start the embedded PostgreSQL ... lazily, only when a skill needs
    it.'"""
    make_skill("nodb", files={"handler.py": OK_HANDLER})
    env = await run_skill(skills_root, "nodb")
    assert env["ok"] is True and not (home / "pg").exists()


def test_config_cli_set_list_masks_secrets(db_env, monkeypatch):
    """docs/cli.md: 'keys containing `key`, `token` ... are encrypted and reported as `set SKILL.KEY (secret,
    encrypted)`' and '`list` prints `KEY = VALUE` ... credential values shown as `********`'."""
    res = invoke("config", "set", "wx", "--role", "cfgrole", "--", "--api-token=abc123", "units=metric")
    assert res.exit_code == 0, res.output
    assert "api_token" in res.output and "encrypted" in res.output
    lst = invoke("config", "list", "wx", "--role", "cfgrole")
    assert "abc123" not in lst.output and "units = metric" in lst.output and "********" in lst.output
    invoke("config", "unset", "wx", "--role", "cfgrole")


def test_config_set_bad_pair_exit_2(db_env):
    """docs/cli.md: '`set` stores each pair (a pair without `=` or with an empty key exits 2)'."""
    res = invoke("config", "set", "wx", "novalue")
    assert res.exit_code == 2 and "Traceback" not in res.output


# =========================================================================================== 15. plugins


async def test_plugin_exec_type(make_skill, skills_root, plugin_reg):
    """Issue: 'registering exec types (each executor is a plugin)'; hooks.md example 'register("echo",
    EchoExecutor())'."""
    from skillyard import hookimpl

    class EchoExecutor:
        async def run(self, skill, input, ctx, *, yard):
            return {"echoed": input, "skill_name": skill.name}

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("echo_probe", EchoExecutor())

    plugin_reg(P(), "probe-echo")
    make_skill("ech", frontmatter="name: ech\ndescription: d\nexec:\n  primary:\n    type: echo_probe")
    env = await run_skill(skills_root, "ech", {"a": 1})
    assert env["ok"] is True and env["echoed"] == {"a": 1} and env["skill_name"] == "ech"


async def test_plugin_exec_type_timeout_and_exception(make_skill, skills_root, plugin_reg):
    """hooks.md: 'the host normalizes it into an envelope, turns exceptions into failure envelopes and stops the call at
    the skill's wall clock'."""
    from skillyard import hookimpl

    class Slow:
        async def run(self, skill, input, ctx, *, yard):
            if input.get("raise"):
                raise ConnectionRefusedError("plugin down")
            await asyncio.sleep(30)

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("slow_probe", Slow())

    plugin_reg(P(), "probe-slow")
    make_skill(
        "slowp", frontmatter="name: slowp\ndescription: d\nexec:\n  primary:\n    type: slow_probe\n  timeout: 1"
    )
    env = await run_skill(skills_root, "slowp", {})
    assert env["timed_out"] is True and env["ok"] is False
    env2 = await run_skill(skills_root, "slowp", {"raise": True})
    assert env2["exception_type"] == "ConnectionRefusedError"


def test_duplicate_exec_type_fails_at_startup(plugin_reg, skills_root):
    """hooks.md: 'Two plugins registering the same exec type ... make `SkillYard(...)` raise
    `skillyard.errors.DuplicateRegistration` with a message naming both plugins.'"""
    from skillyard import hookimpl
    from skillyard.errors import DuplicateRegistration

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("shell", object())

    plugin_reg(P(), "probe-dup")
    with pytest.raises(DuplicateRegistration) as info:
        SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert "probe-dup" in str(info.value)


async def test_async_extra_context_hook(dump_skill, plugin_reg):
    """Issue: 'extra runtime_context keys ... Async hook implementations must work (await what a hook returns when it is
    awaitable).'
    hooks.md: 'Keys the context already has are never overwritten.'"""
    from skillyard import hookimpl

    class P:
        @hookimpl
        async def extra_context(self, skill, context):
            return {"tenant": "acme-" + skill.name, "channel": "hijacked", "_private": 1}

    plugin_reg(P(), "probe-ctx")
    ctx = (await run_skill(dump_skill, "dump", channel="web"))["ctx"]
    assert ctx["tenant"] == "acme-dump" and ctx["channel"] == "web"


async def test_extra_context_callable_and_not_in_subprocess_private(probe_cli, skills_root, plugin_reg, monkeypatch):
    """hooks.md: 'a dict, a callable returning one, an awaitable ... Keys starting with `_` stay in-process'."""
    from skillyard import hookimpl

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            return lambda: {"plug_value": "pv", "_plug_private": "hidden"}

    plugin_reg(P(), "probe-ctx2")
    monkeypatch.setenv("PROBE_DECLARED", "x")
    env = await run_skill(skills_root, "probe")
    ctx = json.loads(env["env"]["SKILL_CONTEXT"])
    assert ctx["plug_value"] == "pv" and "_plug_private" not in ctx


async def test_result_processor_runs_on_top_level_not_call_skill(chain_root, plugin_reg):
    """Issue: 'result post-processors'; 'No post-processing on call_skill results.'"""
    from skillyard import hookimpl

    async def stamp(envelope, run):
        return {**envelope, "stamped": True}

    class P:
        @hookimpl
        def register_result_processors(self, register):
            register(987, "probe-stamp", stamp)

    plugin_reg(P(), "probe-proc")
    env = await run_skill(chain_root, "caller", {"target": "callee"})
    assert env["stamped"] is True and "stamped" not in env["inner"]


async def test_startup_shutdown_async_hooks(skills_root, plugin_reg):
    """hooks.md: 'startup(yard) Called once when a `SkillYard` is opened ... May return an awaitable or a callable.'"""
    from skillyard import hookimpl

    calls: list[str] = []

    class P:
        @hookimpl
        async def startup(self, yard):
            calls.append("start")

        @hookimpl
        def shutdown(self, yard):
            async def stop():
                calls.append("stop")

            return stop()

    plugin_reg(P(), "probe-life")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False):
        assert calls == ["start"]
    assert calls == ["start", "stop"]


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


# =========================================================================================== 16. CLI


@pytest.fixture
def cli_root(make_skill, skills_root):
    make_skill(
        "hello",
        frontmatter="name: hello\ndescription: Greets\naliases: [hi]",
        files={
            "handler.py": "async def execute(i, c):\n    return {'greeting': 'hello ' + i['who']}\n",
            "schema.json": json.dumps(SCHEMA_WHO),
        },
    )
    make_skill(
        "failer",
        files={
            "handler.py": "async def execute(i, c):\n    return {'ok': False, 'error': 'it failed', 'error_type': 'recoverable'}\n"  # noqa: E501 (a skill file's text)
        },
    )
    make_skill("raiser", files={"handler.py": "async def execute(i, c):\n    raise ValueError('kaput')\n"})
    return skills_root


def test_cli_run_success_one_json_line(cli_root):
    """Issue: 'prints the final envelope as one JSON object on stdout (logs on stderr); exit 0 on success'."""
    res = invoke("run", "hello", "--skills-dir", cli_root, "--input", '{"who": "Ada"}')
    assert res.exit_code == 0
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1 and json.loads(lines[0])["greeting"] == "hello Ada"


def test_cli_run_alias(cli_root):
    """Issue: 'NAME may be a skill name, an alias ...'."""
    res = invoke("run", "hi", "--skills-dir", cli_root, "--input", '{"who": "B"}')
    assert res.exit_code == 0 and json.loads(res.stdout)["greeting"] == "hello B"


def test_cli_run_failure_exit_1(cli_root):
    """Issue: 'exit ... 1 when the skill failed'."""
    res = invoke("run", "failer", "--skills-dir", cli_root)
    assert res.exit_code == 1 and json.loads(res.stdout)["error"] == "it failed"


def test_cli_run_validation_failure_exit_1(cli_root):
    """Issue: exit 1 when the skill failed (a validation refusal is a failure envelope)."""
    res = invoke("run", "hello", "--skills-dir", cli_root, "--input", '{"who": "  "}')
    assert res.exit_code == 1 and json.loads(res.stdout)["need_param"] == "who"


def test_cli_run_exception_no_traceback(cli_root):
    """Issue: '(traceback to the log only)'; brief: error messages never a traceback."""
    # A real process: the exit code and the terminal's two streams as a shell sees them.
    res = subprocess.run(
        ["skillyard", "run", "raiser", "--skills-dir", str(cli_root)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 1
    assert json.loads(res.stdout)["exception_type"] == "ValueError"
    assert "Traceback" not in res.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "nosuchskill"], "nosuchskill"),
        (["run", "hello", "--input", "{bad json"], "--input"),
        (["run", "hello", "--input", "[1, 2]"], "--input"),
        (["run", "hello", "--input", '"str"'], "--input"),
        (["run", "hello", "--context", "{bad"], "--context"),
        (["run", "hello", "--context", "[]"], "--context"),
        (["run", "hello", "--input", "@/nonexistent/file.json"], "file.json"),
        (["show", "nosuchskill"], "nosuchskill"),
    ],
)
def test_cli_usage_errors_exit_2_with_fix(cli_root, args, needle):
    """Issue: 'exit ... 2 on usage errors (unknown skill, bad JSON), with a message that says what to fix.'"""
    res = invoke(*args, "--skills-dir", str(cli_root))
    assert res.exit_code == 2, (res.stdout, res.stderr)
    text = res.stdout + res.stderr
    assert "Traceback" not in text and needle in text


def test_cli_missing_skills_dir_exit_2(tmp_path):
    """docs/cli.md: 'A `--skills-dir` that does not exist is a usage error.'"""
    res = invoke("list", "--skills-dir", str(tmp_path / "nope"))
    assert res.exit_code == 2 and "Traceback" not in res.stderr and "nope" in res.stderr


def test_cli_input_and_context_from_file(cli_root, tmp_path, dump_skill):
    """Issue: '`skillyard run NAME [--input JSON|@file] [--context JSON|@file]`'."""
    (tmp_path / "in.json").write_text('{"who": "File"}')
    (tmp_path / "ctx.json").write_text('{"actor_name": "Ctx", "channel": "web"}')
    res = invoke("run", "hello", "--skills-dir", cli_root, "--input", f"@{tmp_path / 'in.json'}")
    assert res.exit_code == 0 and json.loads(res.stdout)["greeting"] == "hello File"
    res2 = invoke("run", "dump", "--skills-dir", dump_skill, "--context", f"@{tmp_path / 'ctx.json'}")
    assert res2.exit_code == 0 and json.loads(res2.stdout)["ctx"]["actor_name"] == "Ctx"


def test_cli_input_utf8_bom_file(cli_root, tmp_path):
    """Issue: '--input JSON|@file' (a file saved with a BOM by a Windows editor is still a JSON object)."""
    (tmp_path / "bom.json").write_bytes('\ufeff{"who": "Bom"}'.encode())
    res = invoke("run", "hello", "--skills-dir", cli_root, "--input", f"@{tmp_path / 'bom.json'}")
    assert res.exit_code in (0, 2) and "Traceback" not in res.output


def test_cli_workspace_option(probe_cli, skills_root, tmp_path, monkeypatch):
    """Issue: '`skillyard run NAME ... [--workspace DIR]`'; docs: 'the run's `workspace_dir` (created if missing)'."""
    monkeypatch.setenv("PROBE_DECLARED", "x")
    ws = tmp_path / "cli_ws" / "deeper"
    res = invoke("run", "probe", "--skills-dir", skills_root, "--workspace", ws)
    assert res.exit_code == 0, res.output
    assert os.path.realpath(json.loads(res.stdout)["cwd"]) == os.path.realpath(ws)


def test_cli_list_table_and_gated_state(make_skill, skills_root, monkeypatch):
    """docs/cli.md: '`STATE` is `error` ..., `ok` (available) or `gated` (requirements not met ...)'."""
    monkeypatch.delenv("TBL_KEY", raising=False)
    make_skill("okk")
    make_skill(
        "gat", frontmatter="name: gat\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [TBL_KEY]"
    )
    write_raw(skills_root, "errd", "---\nname: errd\ndescription: x\n")
    res = invoke("list", "--no-builtin", "--skills-dir", skills_root)
    rows = {ln.split()[0]: ln for ln in res.stdout.splitlines()[1:] if ln.strip()}
    assert " ok " in rows["okk"] and "gated" in rows["gat"]
    assert any("error" in ln for ln in res.stdout.splitlines()[1:])


def test_cli_show_text(cli_root):
    """Issue: '`skillyard show NAME [--json]`: the manifest, `input_schema` ..., `tool_names` ..., warnings.'"""
    res = invoke("show", "hello", "--skills-dir", cli_root)
    assert res.exit_code == 0 and "hello" in res.stdout and "who" in res.stdout


def test_cli_show_json_manifest_and_schema(cli_root):
    """Issue: 'show --json: the manifest, `input_schema` ..., `tool_names` ..., warnings'."""
    info = show_json(cli_root, "hello")
    assert info["manifest"]["name"] == "hello" and info["input_schema"]["required"] == ["who"]
    assert info["tool_names"] == ["hello"] and isinstance(info["warnings"], list)


def test_cli_validate_ok_and_errors(make_skill, skills_root, tmp_path):
    """Issue: '`skillyard validate PATH...`: lints skill folders ... exit 1 on errors.'"""
    good = make_skill("good", files={"handler.py": OK_HANDLER})
    assert invoke("validate", good).exit_code == 0
    bad = make_skill("baddefault", files={"handler.py": "async def execute(i, ctx=None):\n    return {}\n"})
    res = invoke("validate", bad, "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)[0]["errors"]


def test_validate_sync_entry_using_db(make_skill):
    """Issue validate: '(... sync entry that uses db ...)'."""
    folder = make_skill("syncdb", files={"handler.py": "def execute(i, ctx):\n    return {'x': ctx['db']}\n"})
    res = invoke("validate", folder, "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)[0]["errors"]


def test_validate_missing_description(skills_root):
    """Issue validate: '(... missing description ...)'; docs: 'validate reports an error'."""
    folder = write_raw(skills_root, "nodsc", "---\nname: nodsc\n---\nSome body.\n")
    res = invoke("validate", folder, "--json")
    assert res.exit_code == 1


def test_validate_constants_with_secret_substrings(make_skill):
    """Issue validate: '(... non-credential constants whose names contain the secret substrings ...)'."""
    folder = make_skill(
        "consts",
        files={"handler.py": "PARAM_KEYS = ['a']\nAUTH_HEADERS = {}\nasync def execute(i, c):\n    return {}\n"},
    )
    report = json.loads(invoke("validate", folder, "--json").stdout)[0]
    text = json.dumps(report["warnings"])
    assert "PARAM_KEYS" in text and "AUTH_HEADERS" in text


def test_validate_requires_declared(make_skill):
    """Issue validate: '(... requires declared)'; cli.md: 'environment variables read with `os.environ`/`os.getenv` but
    not declared under `requires.env`'."""
    folder = make_skill(
        "undecl",
        files={
            "handler.py": "import os\nasync def execute(i, c):\n    return {'k': os.getenv('WEATHER_TOKEN'), 'e': os.environ['OTHER_VAR']}\n"  # noqa: E501 (a skill file's text)
        },
    )
    report = json.loads(invoke("validate", folder, "--json").stdout)[0]
    text = json.dumps(report["warnings"])
    assert "WEATHER_TOKEN" in text and "OTHER_VAR" in text


def test_validate_long_skill_md(make_skill):
    """Issue validate: '(... SKILL.md over 8000 characters for skill_md ...)'."""
    folder = make_skill("longv", body="z" * 8500)
    report = json.loads(invoke("validate", folder, "--json").stdout)[0]
    assert report["warnings"]


def test_validate_cli_logging_to_stdout(make_skill):
    """Issue validate: 'stdout prints in CLI skills' code paths are fine but logging must go to stderr'."""
    folder = make_skill(
        "clilog",
        frontmatter="name: clilog\ndescription: d\nexec:\n  config: tool.py",
        files={
            "tool.py": """
        import argparse, logging, sys, json
        logging.basicConfig(stream=sys.stdout, level=logging.INFO)
        def main():
            argparse.ArgumentParser().parse_args()
            print(json.dumps({"ok": True}))
        if __name__ == "__main__":
            main()
    """
        },
    )
    res = invoke("validate", folder, "--json")
    assert res.exit_code == 1


def test_validate_cli_print_is_fine(make_skill):
    """Issue validate: 'stdout prints in CLI skills' code paths are fine'."""
    folder = make_skill(
        "cliprint",
        frontmatter="name: cliprint\ndescription: d\nexec:\n  config: tool.py",
        files={
            "tool.py": """
        import argparse, logging, sys, json
        logging.basicConfig(stream=sys.stderr)
        def main():
            argparse.ArgumentParser().parse_args()
            print(json.dumps({"ok": True}))
        if __name__ == "__main__":
            main()
    """
        },
    )
    res = invoke("validate", folder, "--json")
    assert res.exit_code == 0, res.output


def test_validate_no_skill_found_exit_1(tmp_path):
    """docs/cli.md: 'Exit 1 when any skill has an error or when no skill folder is found'."""
    empty = tmp_path / "empty"
    empty.mkdir()
    res = invoke("validate", empty)
    assert res.exit_code == 1 and "Traceback" not in res.output


def test_version_flag():
    """docs/cli.md: '`--version` print `skillyard, version X` and exit'."""
    res = invoke("--version")
    assert res.exit_code == 0 and res.stdout.startswith("skillyard, version ")


def test_examples_quickstart_hello():
    """README: 'skillyard run hello --skills-dir examples --input '{"who": "Ada"}''."""
    res = invoke("run", "hello", "--skills-dir", EXAMPLES, "--input", '{"who": "Ada"}')
    assert res.exit_code == 0 and "Ada" in json.loads(res.stdout)["greeting"]


# =========================================================================================== 17. more edges


def test_cli_bad_context_value_is_usage_error(cli_root):
    """Issue: 'exit ... 2 on usage errors (unknown skill, bad JSON), with a message that says what to fix'; spec §4.2
    triggered_at is a float, '不是 ISO 串'."""
    res = invoke(
        "run",
        "hello",
        "--skills-dir",
        str(cli_root),
        "--input",
        '{"who": "a"}',
        "--context",
        '{"triggered_at": "2024-01-02T03:04:05Z"}',
    )
    assert "Traceback" not in res.stderr
    assert res.exit_code == 2 and "triggered_at" in res.stderr


def test_cli_uncreatable_workspace_is_usage_error(cli_root, tmp_path):
    """Issue: 'exit ... 2 on usage errors ... with a message that says what to fix'; docs/cli.md: '`--workspace DIR` the
    run's `workspace_dir` (created if missing)'."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = invoke(
        "run", "hello", "--skills-dir", str(cli_root), "--input", '{"who": "a"}', "--workspace", str(blocker / "sub")
    )
    assert "Traceback" not in res.stderr and res.exit_code == 2


def test_cli_uncreatable_context_workspace_dir_no_traceback(cli_root, tmp_path):
    """docs/cli.md exit 2: '... and host errors raised around a run'; issue: error messages that say what to fix."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    ctx = json.dumps({"workspace_dir": str(blocker / "sub")})
    res = invoke("run", "hello", "--skills-dir", str(cli_root), "--input", '{"who": "a"}', "--context", ctx)
    assert "Traceback" not in res.stderr and res.exit_code == 2


def test_validate_reports_unreadable_http_toml(make_skill):
    """docs/cli.md: 'Errors: anything that stops the skill from loading (frontmatter, schema, missing `exec.config`,
    syntax errors)'."""
    folder = make_skill(
        "badtoml",
        frontmatter="name: badtoml\ndescription: d\nexec:\n  config: api.toml",
        files={"api.toml": "this is [not toml\n"},
    )
    res = invoke("validate", folder)
    assert res.exit_code == 1


async def test_http_missing_placeholder_need_param(make_skill, skills_root, api):
    """docs/http-skills.md: 'A placeholder without a matching input field answers a recoverable failure with
    `need_param`.'"""
    api_skill(
        make_skill,
        "ph",
        f"""
        [request]
        url = "{api}/x/{{sym}}"
    """,
    )
    env = await run_skill(skills_root, "ph", {})
    assert env["ok"] is False and env["need_param"] == "sym" and env["error_type"] == "recoverable"


async def test_http_response_path_list_index_and_non_object(make_skill, skills_root, api):
    """docs/http-skills.md: '`data.items.0.id`: keys, and list indexes as numbers' ... 'any other value as `{"result":
    value}`'."""
    api_skill(
        make_skill,
        "idx",
        f"""
        [request]
        url = "{api}/x"
        [response]
        path = "data.echo.query"
    """,
    )
    env = await run_skill(skills_root, "idx", {})
    assert env["ok"] is True and env == {**env, "ok": True}


async def test_http_query_list_repeated(make_skill, skills_root, api):
    """docs/http-skills.md: 'A list value repeats the parameter (`tags=a&tags=b`)'."""
    api_skill(
        make_skill,
        "ql",
        f"""
        [request]
        url = "{api}/x"
        query = ["tags"]
    """,
    )
    env = await run_skill(skills_root, "ql", {"tags": ["a", "b"]})
    assert env["ok"] is True and ApiHandler.seen[-1]["query"] == {"tags": ["a", "b"]}


async def test_http_underscore_fields_never_sent(make_skill, skills_root, api):
    """docs/http-skills.md: 'Fields starting with `_` (such as `_subcommand`) are never sent.'"""
    api_skill(
        make_skill,
        "us",
        f"""
        [request]
        method = "POST"
        url = "{api}/x"
    """,
        extra="cli_commands:\n  go: {}",
    )
    env = await run_skill(skills_root, "us__go", {"a": 1})
    assert env["ok"] is True and json.loads(ApiHandler.seen[-1]["body"]) == {"a": 1}


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


async def test_http_exec_timeout_is_wall_clock(make_skill, skills_root):
    """Issue: '`exec.timeout` is the wall clock of that skill whatever its exec type'; 'a run stopped by its wall clock
    says `timed_out: true`'."""

    class Slow(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            time.sleep(5)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    with serve(Slow) as base:
        api_skill(
            make_skill,
            "slowhttp",
            f"""
            [request]
            url = "{base}/x"
            timeout = 30
        """,
            extra="  timeout: 1",
        )
        env = await run_skill(skills_root, "slowhttp", {})
    assert env["ok"] is False and env["timed_out"] is True
