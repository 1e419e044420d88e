"""The tolerant SKILL.md reader: every quirk real files carry, each repaired with a warning or reported as an error.

Also the gating vocabularies (ours, OpenClaw's, Hermes') read by parse_requirements and checked by
check_requirements.
"""

from __future__ import annotations

import json

import pytest

from skillyard.catalog.describe import describe_entry
from skillyard.catalog.frontmatter_parser import parse_markdown
from skillyard.catalog.requires import Requirements, check_requirements, parse_requirements
from support.catalog import entries, fm, parse
from support.skills import write_raw

# ---------------------------------------------------------------------------------------------------------
# splitting: BOM, CRLF, end of file at the fence, '---' inside values


def test_utf8_bom_is_dropped():
    r = parse("\ufeff---\nname: bom\ndescription: d\n---\nBody\n".encode())
    assert r.has_frontmatter and r.meta == {"name": "bom", "description": "d"}
    assert r.body == "Body\n" and r.warnings == [] and r.error is None


def test_crlf_line_ends():
    r = parse(b"---\r\nname: crlf\r\ndescription: Use it\r\nmetadata:\r\n  a: 1\r\n---\r\nBody\r\nmore\r\n")
    assert r.meta == {"name": "crlf", "description": "Use it", "metadata": {"a": 1}}
    assert r.body == "Body\nmore\n"


def test_bom_crlf_and_no_newline_after_the_closing_fence():
    r = parse(b"\xef\xbb\xbf---\r\nname: x\r\ndescription: d\r\n---")
    assert r.meta == {"name": "x", "description": "d"} and r.body == "" and r.error is None


def test_file_ending_at_the_closing_fence():
    r = parse("---\nname: end\ndescription: d\n---")
    assert r.has_frontmatter and r.meta["name"] == "end" and r.body == ""


def test_closing_fence_may_carry_trailing_spaces_and_more_dashes():
    assert parse("----\nname: a\n---   \nBody").meta == {"name": "a"}


def test_dashes_inside_a_quoted_value_on_one_line():
    r = parse('---\nname: a\ndescription: "before --- after"\n---\nBody\n')
    assert r.meta["description"] == "before --- after" and r.body == "Body\n" and r.warnings == []


def test_a_dash_line_inside_a_multiline_quoted_value_does_not_close_the_block():
    r = parse('---\nname: a\ndescription: "first part\n---\nsecond part"\nversion: 2\n---\nBody\n---\nafter rule\n')
    assert r.meta == {"name": "a", "description": "first part --- second part", "version": "2"}
    assert r.body == "Body\n---\nafter rule\n"
    assert any("'---'" in w for w in r.warnings)


def test_indented_dash_line_inside_a_quoted_value_is_plain_yaml():
    r = parse("---\nname: a\ndescription: 'one\n  ---\n  two'\n---\nBody\n")
    assert r.meta["description"] == "one --- two" and r.warnings == []


def test_a_horizontal_rule_in_the_body_is_body():
    r = parse("---\nname: a\ndescription: d\n---\nIntro\n\n---\n\nMore\n")
    assert r.meta == {"name": "a", "description": "d"} and r.body == "Intro\n\n---\n\nMore\n"


def test_no_frontmatter_at_all():
    r = parse("# Title\n\nJust text.\n---\nnot frontmatter\n")
    assert not r.has_frontmatter and r.meta == {} and r.error is None


def test_empty_frontmatter():
    r = parse("---\n---\nBody\n")
    assert r.has_frontmatter and r.meta == {} and r.error is None and r.body == "Body\n"


# ---------------------------------------------------------------------------------------------------------
# repairs: unquoted colons, wrapped scalars, indicator characters, tabs


@pytest.mark.parametrize(
    ("line", "key", "value"),
    [
        ("description: Use when: x", "description", "Use when: x"),
        ("license: MIT: see LICENSE", "license", "MIT: see LICENSE"),
        ("description: Use when the user says:", "description", "Use when the user says:"),
        ("description: It's a: test", "description", "It's a: test"),
        ("description: 日本語: テスト", "description", "日本語: テスト"),
    ],
)
def test_unquoted_colon_is_repaired_with_a_warning(line, key, value):
    r = parse(fm(f"name: colon\n{line}\nversion: 1.0"))
    assert r.error is None and r.meta[key] == value and r.meta["version"] == "1.0"
    assert r.warnings == [f"repaired {key!r}: its value contains ': ' and was not quoted"]


def test_unquoted_colons_on_several_lines_are_each_reported():
    r = parse(fm("name: x\ndescription: Use when: x\nlicense: MIT: see LICENSE"))
    assert r.meta == {"name": "x", "description": "Use when: x", "license": "MIT: see LICENSE"}
    assert len(r.warnings) == 2


def test_unquoted_colon_in_a_nested_value():
    r = parse(fm("name: x\ndescription: d\nmetadata:\n  hermes:\n    note: see: this\n    tags: [a]"))
    assert r.meta["metadata"] == {"hermes": {"note": "see: this", "tags": ["a"]}}
    assert r.warnings == ["repaired 'note': its value contains ': ' and was not quoted"]


def test_prettier_wrapped_plain_scalar_without_colons_needs_no_repair():
    r = parse(
        fm(
            "name: wrap\ndescription: Use this skill when the user asks for\n  something long that prettier\n"
            "  wrapped over lines\nversion: 1.2"
        )
    )
    wrapped = "Use this skill when the user asks for something long that prettier wrapped over lines"
    assert r.meta["description"] == wrapped
    assert r.meta["version"] == "1.2" and r.warnings == []


def test_prettier_wrapped_plain_scalar_with_colons_in_continuation_lines():
    r = parse(
        fm(
            "name: wrap\ndescription: Use this skill when\n  the user says: summarize this\n"
            "  or asks: what changed\nlicense: MIT"
        )
    )
    assert r.meta["description"] == "Use this skill when the user says: summarize this or asks: what changed"
    assert r.meta["license"] == "MIT"
    assert r.warnings == ["repaired 'description': its value contains ': ' and was not quoted"]


def test_colon_repair_leaves_block_scalars_alone():
    r = parse(fm("name: x\ndescription: |\n  Literal: keep: as is\n  second line\nlicense: MIT: see LICENSE"))
    assert r.meta["description"] == "Literal: keep: as is\nsecond line\n"
    assert r.meta["license"] == "MIT: see LICENSE"


@pytest.mark.parametrize(
    "value",
    [
        "[WIP] a skill",
        "*bold* claim",
        "@mention the user",
        "`gh` wrapper",
        "% of things",
        '"Quoted" and more',
        "{x} is a thing",
        "- starts with a dash",
        "*alias",
        "!important thing",
    ],
)
def test_values_starting_with_a_yaml_indicator_are_quoted_with_a_warning(value):
    r = parse(fm(f"name: ind\ndescription: {value}\nversion: 1.0"))
    assert r.error is None
    assert r.meta == {"name": "ind", "description": value, "version": "1.0"}
    assert len(r.warnings) == 1 and r.warnings[0].startswith("repaired 'description': quoted its value")


def test_valid_flow_values_are_not_touched():
    r = parse(fm("name: x\ndescription: d\ntags: [a, b]\nextra: {k: v}"))
    assert r.meta["tags"] == ["a", "b"] and r.meta["extra"] == {"k": "v"} and r.warnings == []


def test_tab_indentation_is_repaired():
    r = parse(fm("name: tabs\ndescription: d\nmetadata:\n\topenclaw:\n\t\trequires:\n\t\t\tbins: [gh]"))
    assert r.meta["metadata"] == {"openclaw": {"requires": {"bins": ["gh"]}}}
    assert r.warnings == ["replaced tab indentation in the frontmatter with spaces (YAML does not allow tabs)"]


def test_control_characters_are_removed_with_a_warning():
    r = parse(fm("name: ctl\ndescription: a\x07b"))
    assert r.meta["description"] == "ab" and r.warnings


def test_comment_cutting_a_description_short_is_reported():
    r = parse(fm("name: x\ndescription: Tag posts #like #this\nversion: 1.0 # not reported"))
    assert r.meta["description"] == "Tag posts" and r.meta["version"] == "1.0"
    assert r.warnings == [
        "'description': the text after ' #' was read as a YAML comment and left out; quote the value to keep it"
    ]


def test_duplicate_keys_are_reported():
    r = parse(fm("name: first\ndescription: d\nname: second"))
    assert r.meta["name"] == "second"
    assert r.warnings == ["the key 'name' appears twice in the frontmatter: the last value is used"]


# ---------------------------------------------------------------------------------------------------------
# YAML 1.1 surprises: a YAML 1.2-style loader keeps what authors wrote


def test_yaml11_surprises_stay_as_written():
    r = parse(
        fm(
            "name: yes\ndescription: yes\nversion: 1.0\nlicense: no\ncreated: 2024-01-02\non: push\n"
            "enabled: yes\nmode: off\ntime: 12:30\noctal: 010\nhex: 0x1F\nsci: 1e3\nunderscored: 1_000\n"
            "nested:\n  when: 2024-05-06 10:00:00\n  flag: on\n  ratio: 0.5\n  on: pull\nreal: true\nnull_value: ~"
        )
    )
    assert r.error is None and r.warnings == []
    assert r.meta == {
        "name": "yes",
        "description": "yes",
        "version": "1.0",
        "license": "no",
        "created": "2024-01-02",
        "on": "push",
        "enabled": "yes",
        "mode": "off",
        "time": "12:30",
        "octal": 10,
        "hex": 31,
        "sci": 1000.0,
        "underscored": "1_000",
        "nested": {"when": "2024-05-06 10:00:00", "flag": "on", "ratio": 0.5, "on": "pull"},
        "real": True,
        "null_value": None,
    }
    assert json.loads(json.dumps(r.meta)) == r.meta


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("1.0", "1.0"),
        ("1.10", "1.10"),
        ("2", "2"),
        ("1.0.0", "1.0.0"),
        ("'1.0'", "1.0"),
        ("0.10", "0.10"),
        ("1e3", "1e3"),
    ],
)
def test_version_is_kept_as_written(written, kept):
    assert parse(fm(f"name: v\ndescription: d\nversion: {written}")).meta["version"] == kept


def test_string_fields_are_strings():
    r = parse(fm("name: 123\ndescription: 2024-01-01\nversion: 3\nlicense: true\nauthor: 0.5"))
    assert r.meta == {"name": "123", "description": "2024-01-01", "version": "3", "license": "true", "author": "0.5"}


def test_odd_scalars_stay_json_serializable():
    r = parse(
        fm(
            "name: x\ndescription: d\ninf: .inf\nnan: .nan\nbin: !!binary aGVsbG8=\nset: !!set {a, b}\n"
            "eq: =\nkeys:\n  2: two\n  true: yes\n  2024-01-01: date"
        )
    )
    assert r.error is None
    assert r.meta["inf"] == "inf" and r.meta["nan"] == "nan" and r.meta["bin"] == "hello"
    assert r.meta["eq"] == "=" and r.meta["keys"] == {"2": "two", "true": "yes", "2024-01-01": "date"}
    json.dumps(r.meta)


def test_alias_bombs_and_self_reference_are_errors_not_hangs():
    assert "aliases expand to too many values" in parse(fm("name: x\na: &a\n  - *a")).error
    lol = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    assert "aliases expand to too many values" in parse(fm("name: x\n" + lol)).error


@pytest.mark.parametrize(
    "text",
    [
        "---\n",
        "---",
        "---\n:\n---\n",
        "---\n- a\n---\n",
        "---\njust text\n---\n",
        "---\n? [a]\n: b\n---\n",
        "---\n" + "[" * 500 + "\n---\n",
        "---\nx: " + "[" * 200_000 + "\n---\n",
        "---\nmetadata: " + "{" * 100_000 + "\n---\n",
        "---\nmetadata: '" + "[" * 100_000 + "'\n---\n",
        "---\nx: !!int zz\n---\n",
        "---\n\t\n---\n",
        "---\nx: 'a\n---\n",
        "---\nmetadata: {\n---\n",
        "---\nmetadata: 5\n---\n",
        "---\nmetadata: '[1]'\n---\n",
        "\x00\x01---\n",
    ],
    ids=lambda text: repr(text[:24]) + (f"+{len(text) - 24}" if len(text) > 24 else ""),
)
def test_never_raises(text):
    r = parse(text)
    assert r.error is None or isinstance(r.error, str)
    json.dumps(r.meta)


# ---------------------------------------------------------------------------------------------------------
# metadata: OpenClaw's JSON5 blocks, JSON strings


def test_openclaw_metadata_block_with_trailing_commas_is_plain_yaml():
    text = fm("""name: gh
description: GitHub CLI
metadata:
  {
    "openclaw":
      {
        "emoji": "🐙",
        "requires": { "bins": ["gh"], "env": ["GH_TOKEN",], },
        "install": [{ "id": "brew", "kind": "brew", "formula": "gh", "bins": ["gh"], },],
      },
  }""")
    r = parse(text)
    assert r.warnings == [] and r.error is None
    req = parse_requirements(r.meta)
    assert req.bins == ("gh",) and req.env == ("GH_TOKEN",)
    assert r.meta["metadata"]["openclaw"]["install"][0]["formula"] == "gh"


def test_openclaw_metadata_block_with_comments_is_read_as_json5_with_a_warning():
    text = fm("""name: gh
description: GitHub CLI
metadata:
  {
    // gating for the GitHub skill
    "openclaw": {
      requires: { bins: ["gh"], anyBins: ['git', 'hub'], }, /* unquoted keys */
      primaryEnv: "GH_TOKEN",
    },
  }
version: 1.0""")
    r = parse(text)
    assert r.error is None and r.meta["version"] == "1.0"
    assert r.warnings == ["read 'metadata' as JSON5: it is not valid YAML (comments or unquoted keys)"]
    req = parse_requirements(r.meta)
    assert req.bins == ("gh",) and req.any_bins == ("git", "hub") and req.primary_env == "GH_TOKEN"


def test_single_line_json5_metadata_with_a_trailing_comment():
    r = parse(fm('name: x\ndescription: d\nmetadata: { openclaw: { requires: { env: ["API_KEY"] } } } // gate'))
    assert parse_requirements(r.meta).env == ("API_KEY",)


def test_yaml_errors_after_a_metadata_block_keep_their_line_numbers():
    # the block's five lines are set aside for JSON5 but still counted: the error is past line 6, not line 3
    r = parse(fm('name: x\nmetadata:\n  {\n    "a": 1,\n  }\ndescription: [unclosed'))
    assert r.error is not None and "frontmatter line 7, column 1" in r.error


def test_metadata_as_a_json_string():
    r = parse(
        fm("""name: x\ndescription: d\nmetadata: '{"openclaw": {"requires": {"bins": ["jq"]}, "os": ["linux"]}}'\n""")
    )
    assert r.meta["metadata"] == {"openclaw": {"requires": {"bins": ["jq"]}, "os": ["linux"]}}
    assert r.warnings == ["read 'metadata' from a JSON string"]
    req = parse_requirements(r.meta)
    assert req.bins == ("jq",) and req.os == ("linux",)


def test_metadata_as_a_block_string_of_json5():
    r = parse(
        fm('name: x\ndescription: d\nmetadata: |\n  {\n    "clawdbot": { "requires": { "bins": ["rg"], }, },\n  }')
    )
    assert parse_requirements(r.meta).bins == ("rg",)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("metadata: { openclaw: [ }", "frontmatter is not valid YAML"),
        ("metadata: 'not json at all'", "'metadata' is a string but not JSON"),
        ("metadata: '[1, 2]'", "'metadata' must be a mapping, not a list"),
        ("metadata: [1, 2]", "'metadata' must be a mapping, not a list"),
    ],
)
def test_unparseable_metadata_is_an_explicit_error(line, message):
    r = parse(fm(f"name: x\ndescription: d\n{line}"))
    assert r.error is not None and message in r.error


# ---------------------------------------------------------------------------------------------------------
# through the catalog: nothing dropped, defaults derived


def test_missing_name_is_the_folder_name(make_skill, skills_root):
    make_skill("folder-name", frontmatter="description: d")
    skill = entries(skills_root)["folder-name"].skill
    assert skill.name == "folder-name" and skill.error is None


def test_missing_description_is_the_first_body_line_with_a_warning(make_skill, skills_root):
    make_skill("nodesc", frontmatter="name: nodesc", body="# Title\n\n## Sub\n\nSummarize a document.\nMore.\n")
    skill = entries(skills_root)["nodesc"].skill
    assert skill.description == "Summarize a document."
    assert "no description in the frontmatter; using the first line of the body" in skill.warnings


def test_unterminated_frontmatter_is_listed_with_its_error(make_skill, skills_root):
    write_raw(skills_root, "open", b"---\nname: open\ndescription: never closed\n\n# Body\n")
    make_skill("fine")
    found = entries(skills_root)
    assert set(found) == {"open", "fine"}
    listing = describe_entry(found["open"])
    assert listing["name"] == "open" and not listing["exposed"]
    assert listing["error"] == (
        "the frontmatter block is not terminated: add a line '---' after the last frontmatter field"
    )
    json.dumps(listing)


def test_unparseable_metadata_skill_is_listed_with_its_error(make_skill, skills_root):
    make_skill("badmeta", frontmatter="name: badmeta\ndescription: d\nmetadata: { openclaw: [ }")
    listing = describe_entry(entries(skills_root)["badmeta"])
    assert listing["error"].startswith("the frontmatter is not valid YAML") and not listing["exposed"]
    assert "frontmatter line 3" in listing["error"]


def test_quirky_files_all_load_through_the_catalog(skills_root):
    write_raw(skills_root, "bom", "\ufeff---\r\nname: bom\r\ndescription: Use when: x\r\n---".encode())
    write_raw(skills_root, "wip", b"---\nname: wip\ndescription: [WIP] a skill\nversion: 1.10\n---\nBody\n")
    found = entries(skills_root)
    assert found["bom"].skill.description == "Use when: x" and found["bom"].skill.error is None
    assert any("repaired 'description'" in w for w in found["bom"].skill.warnings)
    assert found["wip"].skill.description == "[WIP] a skill" and found["wip"].skill.meta["version"] == "1.10"
    for entry in found.values():
        json.dumps(describe_entry(entry))


# ---------------------------------------------------------------------------------------------------------
# gating vocabularies


def which_of(*present: str):
    return lambda name: f"/usr/bin/{name}" if name in present else None


def has_of(*present: str):
    return lambda name: name in present


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


def test_explicit_yaml_types_come_back_as_json_values():
    text = (
        "---\nname: t\nnan: .nan\nbin: !!binary aGVsbG8=\nset: !!set {x, y}\nomap: !!omap [a: 1, b: 2]\n"
        "when: !!timestamp 2024-01-01\n7: seven\nanchor: &A [1]\nalias: *A\n---\n"
    )
    meta = parse_markdown(text).meta
    assert meta["nan"] == "nan" and meta["bin"] == "hello" and meta["set"] == ["x", "y"]
    assert meta["omap"] == [["a", 1], ["b", 2]] and meta["when"] == "2024-01-01" and meta["7"] == "seven"
    assert meta["alias"] == [1]
    assert json.loads(json.dumps(meta)) == meta
