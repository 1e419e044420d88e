"""The Skill value (catalog/skill.py): name and description fallbacks, category, skill type, exposure, trigger
type, exec type and warnings."""

from __future__ import annotations

import json

import pytest

from skillyard import SkillYard
from skillyard.catalog.describe import describe_entry
from support.catalog import entries
from support.cli import invoke, listing, one, show_json
from support.skills import OK_HANDLER, write_raw


def test_category_from_frontmatter_beats_path(make_skill, skills_root):
    make_skill("tools/x", frontmatter="name: x\ndescription: d\ncategory: data")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    skill = yard.skill("x")
    assert skill.category == "data"
    assert skill.tool_description == "[data] d"


def test_skill_types_and_exposure(make_skill, skills_root):
    make_skill("code", files={"handler.py": OK_HANDLER})
    make_skill("doc")
    make_skill("know", frontmatter="name: know\ndescription: d\nskill_type: knowledge")
    make_skill(
        "hidden",
        frontmatter="name: hidden\ndescription: d\ntrigger-type: auto",
        files={"handler.py": OK_HANDLER},
    )
    make_skill("nested_trigger", frontmatter="name: nested_trigger\ndescription: d\ntrigger:\n  type: explicit")
    make_skill("no_entry", files={"handler.py": "def helper():\n    return 1\n"})
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    d = {x["name"]: x for x in (describe_entry(e) for e in yard.entries)}
    assert (d["code"]["skill_type"], d["code"]["exec_type"], d["code"]["exposed"]) == (
        "handler",
        "PYTHON",
        True,
    )
    assert (d["doc"]["skill_type"], d["doc"]["exec_type"], d["doc"]["exposed"]) == ("skill_md", None, True)
    assert d["know"]["exposed"] is False and d["know"]["trigger_type"] == "explicit"
    assert d["hidden"]["exposed"] is False and d["hidden"]["trigger_type"] == "auto"
    assert d["nested_trigger"]["exposed"] is True
    assert d["no_entry"]["skill_type"] == "skill_md"
    assert any("downgraded to skill_md" in w for w in d["no_entry"]["warnings"])


def test_long_skill_md_warns_only_for_skill_md(make_skill, skills_root):
    make_skill("long_doc", body="x" * 8100)
    make_skill("long_code", body="x" * 8100, files={"handler.py": OK_HANDLER})
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert any("over 8000" in w for w in yard.skill("long_doc").warnings)
    assert not any("over 8000" in w for w in yard.skill("long_code").warnings)


def test_exec_type_from_extension_and_declaration(make_skill, skills_root):
    cases = {
        "sh": ("exec:\n  config: run.sh", {"run.sh": "echo {}"}, "SHELL"),
        "js": ("exec:\n  config: run.mjs", {"run.mjs": "console.log('{}')"}, "NODE"),
        "rb": ("exec:\n  config: run.rb", {"run.rb": "puts '{}'"}, "RUBY"),
        "go": ("exec:\n  config: main.go", {"main.go": "package main\nfunc main(){}"}, "GO"),
        "toml": ("exec:\n  config: api.toml", {"api.toml": "[request]\nurl='http://127.0.0.1/'"}, "HTTP"),
        "inline": ("exec:\n  primary:\n    type: inline_shell\n    command: echo hi", {}, "INLINE_SHELL"),
        "browser": ("exec:\n  primary:\n    type: BROWSER", {}, "BROWSER"),
    }
    for name, (fm, files, _) in cases.items():
        make_skill(name, frontmatter=f"name: {name}\ndescription: d\n{fm}", files=files)
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    for name, (_, _, expected) in cases.items():
        assert yard.skill(name).exec_type == expected, name


async def test_declared_python_type_without_config_uses_handler_py(make_skill, skills_root):
    make_skill(
        "typed",
        frontmatter="name: typed\ndescription: d\nexec:\n  primary:\n    type: python",
        files={"handler.py": OK_HANDLER},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert yard.skill("typed").exec.config == (skills_root / "typed" / "handler.py").resolve()
        assert (await yard.run("typed"))["ok"] is True


def test_a_description_written_as_a_list_is_joined(make_skill, skills_root):
    """A YAML list under description (a long line split into items) reads as one text, with a warning to fix it."""
    make_skill("listed", "name: listed\ndescription:\n  - Looks up orders\n  - by customer and date")
    skill = SkillYard(skills_dirs=[skills_root], include_builtin=False).skill("listed")
    assert skill.description == "Looks up orders by customer and date"
    assert any("description is a list" in w for w in skill.warnings)


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


def test_missing_name_is_the_folder_name(make_skill, skills_root):
    make_skill("folder-name", frontmatter="description: d")
    skill = entries(skills_root)["folder-name"].skill
    assert skill.name == "folder-name" and skill.error is None


def test_missing_description_is_the_first_body_line_with_a_warning(make_skill, skills_root):
    make_skill("nodesc", frontmatter="name: nodesc", body="# Title\n\n## Sub\n\nSummarize a document.\nMore.\n")
    skill = entries(skills_root)["nodesc"].skill
    assert skill.description == "Summarize a document."
    assert "no description in the frontmatter; using the first line of the body" in skill.warnings


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


def test_category_from_path(make_skill, skills_root):
    """Issue: 'Category from frontmatter, else from the path.'"""
    make_skill("research/arxiv")
    assert one(listing(skills_root), "arxiv")["category"] == "research"


def test_category_from_frontmatter_wins(make_skill, skills_root):
    """Issue: 'Category from frontmatter, else from the path.'"""
    make_skill("research/arxiv2", frontmatter="name: arxiv2\ndescription: d\ncategory: papers")
    assert one(listing(skills_root), "arxiv2")["category"] == "papers"


@pytest.mark.spec("§2.2")
def test_tool_description_has_category_prefix(make_skill, skills_root):
    """Issue: 'A tool's description is `[category] description` when a category is known (§2.2).'"""
    make_skill("data/px", frontmatter="name: px\ndescription: Price lookup")
    info = show_json(skills_root, "px")
    assert info["tool_description"] == "[data] Price lookup"
    assert info["tools"][0]["description"] == "[data] Price lookup"


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


def test_long_skill_md_warns(make_skill, skills_root):
    """Issue: 'SKILL.md over 8,000 characters on a skill_md skill → a warning'."""
    make_skill("longdoc", body="x" * 9000)
    assert any("8" in w for w in one(listing(skills_root), "longdoc")["warnings"])


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


@pytest.mark.parametrize("flag", ["disable-model-invocation: true", "disable_model_invocation: yes"])
async def test_a_skill_kept_from_the_model_is_not_exposed_but_runs_by_name(make_skill, skills_root, flag):
    """Issue 18 (7): OpenClaw and Claude Code read `disable-model-invocation: true` to keep a skill away from the
    model; it is listed, not exposed, and can still be run explicitly."""
    make_skill(
        "manual_only",
        frontmatter=f"name: manual_only\ndescription: d\n{flag}",
        files={"handler.py": "async def execute(input, context):\n    return {'ran': True}\n"},
    )
    item = one(listing(skills_root), "manual_only")
    assert item["exposed"] is False and not item["error"]
    from skillyard import SkillYard

    async with SkillYard([skills_root], include_builtin=False) as yard:
        assert (await yard.run("manual_only"))["ran"] is True


def test_disable_model_invocation_false_keeps_it_exposed(make_skill, skills_root):
    make_skill("offered", frontmatter="name: offered\ndescription: d\ndisable-model-invocation: false")
    assert one(listing(skills_root), "offered")["exposed"] is True
