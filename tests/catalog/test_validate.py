"""``skillyard validate``'s checks (catalog/validate.py): what is an error, what is a warning."""

from __future__ import annotations

import json

from support.cli import invoke
from support.skills import CRED_SCHEMA, ECHO, INPUT_ECHO, schema_json, write_raw


def test_validate_lists_every_property_the_secret_rule_matched(make_skill, skills_root):
    from skillyard.catalog.validate import validate_paths

    make_skill(
        "s",
        files={
            "handler.py": INPUT_ECHO,
            "schema.json": schema_json(
                {
                    "confirm_token": {"type": "string", "x-secret": False},
                    "author": {"type": "string"},
                    "key_fields": {"type": "array"},
                    "plain": {"type": "string"},
                }
            ),
        },
    )
    report = validate_paths([skills_root])[0]
    matched = [w for w in report["warnings"] if "matches the credential rule" in w]
    assert len(matched) == 3
    assert any("confirm_token" in w and "ordinary parameter" in w for w in matched)
    assert any("author" in w and "treated as a credential" in w for w in matched)


def test_missing_exec_config_file_is_reported(make_skill, skills_root):
    """docs/cli.md validate: 'Errors: anything that stops the skill from loading (... missing `exec.config` ...)'."""
    folder = make_skill("nocfg", frontmatter="name: nocfg\ndescription: d\nexec:\n  config: nothere.sh")
    res = invoke("validate", folder)
    assert res.exit_code == 1


def test_validate_lists_every_matched_property(make_skill, skills_root):
    """Issue: '`validate` lists every property the rule matched so authors see it' (incl. x-secret:false ones)."""
    folder = make_skill("cred3", files={"schema.json": json.dumps(CRED_SCHEMA), "handler.py": ECHO})
    res = invoke("validate", folder, "--json")
    text = json.dumps(json.loads(res.stdout))
    for p in ("api_key", "Password", "keyword", "author", "max_tokens"):
        assert p in text, p


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
