"""The tolerant SKILL.md reader (catalog/frontmatter_parser.py, frontmatter_repair.py, yaml12.py, flow_blocks.py):
every quirk real files carry, each repaired with a warning or reported as an error."""

from __future__ import annotations

import json

import pytest

from skillyard.catalog.frontmatter_parser import parse_markdown
from skillyard.catalog.requires import parse_requirements
from support.catalog import TOOL_RX, fm, parse
from support.cli import listing, one, show_json
from support.skills import write_raw


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


def test_frontmatter_not_a_mapping_is_listed(skills_root):
    """Issue: never 'skills that vanish silently'; frontmatter that is a list is diagnosed, not dropped."""
    write_raw(skills_root, "listfm", "---\n- a\n- b\n---\nbody\n")
    items = listing(skills_root)
    assert len([i for i in items if i["dir"].endswith("listfm")]) == 1


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
