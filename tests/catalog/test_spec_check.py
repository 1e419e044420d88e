"""The Agent Skills specification's frontmatter rules (catalog/spec_check.py, `validate --spec`; issue 18, item 10)."""

from __future__ import annotations

import pytest

from skillyard.catalog.spec_check import spec_findings
from support.cli import invoke, no_traceback


def test_a_skill_that_follows_the_specification_has_no_findings():
    meta = {"name": "pdf-tools", "description": "Split PDFs. Use for PDFs.", "license": "MIT", "metadata": {"a": "1"}}
    assert spec_findings({**meta, "compatibility": "Needs qpdf", "allowed-tools": "Read"}, "pdf-tools") == []


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("PDF-Tools", "lowercase letters"),
        ("pdf_tools", "lowercase letters"),
        ("-pdf", "start or end with a hyphen"),
        ("pdf-", "start or end with a hyphen"),
        ("pdf--tools", "two in a row"),
        ("x" * 65, "at most 64"),
        ("", "name is missing"),
    ],
)
def test_names_outside_the_rules_are_named_with_the_fix(name, needle):
    findings = spec_findings({"name": name, "description": "d"}, name or "folder")
    assert any(needle in f for f in findings), findings


def test_a_unicode_lowercase_name_is_allowed_and_must_match_its_folder():
    assert spec_findings({"name": "café", "description": "d"}, "café") == []
    assert any("differs from its folder" in f for f in spec_findings({"name": "pdf", "description": "d"}, "docs"))


def test_description_compatibility_metadata_and_extra_fields():
    long = {"name": "a", "description": "d" * 1025, "compatibility": "c" * 501, "metadata": {"n": 1}, "tags": ["x"]}
    findings = " | ".join(spec_findings(long, "a"))
    for needle in ("at most 1024", "at most 500", "metadata must map keys to text", "tags are not in the spec"):
        assert needle in findings
    assert any("description is missing" in f for f in spec_findings({"name": "a"}, "a"))


def test_validate_spec_reports_warnings_and_exits_0_only_for_them(make_skill, skills_root):
    make_skill("My_Skill", frontmatter="name: My_Skill\ndescription: d\ncategory: tools")
    plain = invoke("validate", skills_root)
    spec = invoke("validate", "--spec", skills_root)
    assert plain.exit_code == 0 and "spec:" not in plain.stdout
    assert spec.exit_code == 0 and no_traceback(spec)
    assert "spec: name 'My_Skill' may hold only lowercase letters" in spec.stdout and "my-skill" in spec.stdout
    assert "spec: field(s) category are not in the specification" in spec.stdout
