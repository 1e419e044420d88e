"""``skillyard list`` (docs/cli.md): the JSON fields, the table for people, diagnostics on stderr, skill roots."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import Result

from support.cli import by_name, invoke, list_json, listing, one, usage_error
from support.cli_probes import LIST_FIELDS
from support.skills import OK_HANDLER, write_raw, write_skill


def _table_rows(out: Result) -> dict[str, list[list[str]]]:
    rows: dict[str, list[list[str]]] = {}
    for line in out.stdout.splitlines()[1:]:
        cells = line.split()
        if cells:
            rows.setdefault(cells[0], []).append(cells)
    return rows


def test_list_json(hello, skills_root):
    result = invoke("list", "--json", "--skills-dir", str(skills_root), "--no-builtin")
    assert result.exit_code == 0, result.output
    items = json.loads(result.stdout)
    assert [i["name"] for i in items] == ["hello"]
    item = items[0]
    assert item["dir"] == str(hello) and item["tool_names"] == ["hello"] and item["aliases"] == ["hi"]
    assert item["available"] is True and item["error"] is None and item["warnings"] == []


def test_list_table_for_people(hello, skills_root):
    result = invoke("list", "--skills-dir", str(skills_root), "--no-builtin")
    assert result.exit_code == 0 and "NAME" in result.output and "hello" in result.output


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


def test_cli_missing_skills_dir_exit_2(tmp_path):
    """docs/cli.md: 'A `--skills-dir` that does not exist is a usage error.'"""
    res = invoke("list", "--skills-dir", str(tmp_path / "nope"))
    assert res.exit_code == 2 and "Traceback" not in res.stderr and "nope" in res.stderr


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
