"""``skillyard validate`` (docs/cli.md): exit codes, the JSON report and the text form."""

from __future__ import annotations

import json

import pytest

from support import EXAMPLES
from support.cli import invoke, no_traceback, usage_error
from support.skills import OK_HANDLER, write_skill

VALIDATE_ERRORS = {
    "nodesc": ("name: nodesc", {"handler.py": "async def execute(input, ctx):\n    return {}\n"}, "description"),
    "defaulted": (
        "name: defaulted\ndescription: d",
        {"handler.py": "async def execute(input, ctx=None):\n    return {}\n"},
        "default",
    ),
    "syncdb": (
        "name: syncdb\ndescription: d",
        {"handler.py": "def execute(input, ctx):\n    return {'x': ctx['db']}\n"},
        "db",
    ),
    "syntax": ("name: syntax\ndescription: d", {"handler.py": "async def execute(input, ctx)\n    return {}\n"}, ""),
    "noconfig": ("name: noconfig\ndescription: d\nexec:\n  config: missing.py", {}, "missing.py"),
    "stdoutlog": (
        "name: stdoutlog\ndescription: d",
        {
            "main.py": (
                "import argparse, logging, sys\nlogging.basicConfig(stream=sys.stdout)\n"
                "def main():\n    argparse.ArgumentParser().parse_args()\n    print('{}')\n"
                "if __name__ == '__main__':\n    main()\n"
            )
        },
        "",
    ),
}

VALIDATE_WARNINGS = {
    "constant": ("API_TOKEN_NAME = 'x'\nasync def execute(input, ctx):\n    return {}\n", "API_TOKEN_NAME"),
    "environ": (
        "import os\nasync def execute(input, ctx):\n    return {'v': os.environ.get('UNDECLARED_VAR_X')}\n",
        "UNDECLARED_VAR_X",
    ),
    "getenv": (
        "import os\nasync def execute(input, ctx):\n    return {'v': os.getenv('UNDECLARED_VAR_Y')}\n",
        "UNDECLARED_VAR_Y",
    ),
}


def test_validate(make_skill, skills_root, tmp_path):
    good = make_skill("good", files={"handler.py": "async def execute(input, ctx):\n    return {}\n"})
    bad = make_skill(
        "bad",
        frontmatter="name: bad",
        files={
            "handler.py": """
        import os
        PARAM_KEYS = ["a"]
        def execute(input, ctx=None):
            ctx["db"]
            return {"k": os.environ["SOME_TOKEN"]}
    """
        },
    )
    ok = invoke("validate", str(good))
    assert ok.exit_code == 0, ok.output
    result = invoke("validate", "--json", str(bad))
    assert result.exit_code == 1
    report = json.loads(result.stdout)[0]
    errors, warnings = " ".join(report["errors"]), " ".join(report["warnings"])
    assert "second parameter has a default" in errors
    assert "missing description" in errors
    assert "PARAM_KEYS" in warnings and "SOME_TOKEN" in warnings
    empty = tmp_path / "empty"
    empty.mkdir()
    assert invoke("validate", str(empty)).exit_code == 1


def test_validate_flags_sync_db_use_and_stdout_logging(make_skill):
    sync_db = make_skill(
        "sync_db",
        files={"handler.py": "async def helper():\n    pass\ndef execute(input, ctx):\n    return ctx['db']\n"},
    )
    cli_logs = make_skill(
        "cli_logs",
        files={
            "handler.py": """
        import argparse, logging, sys
        logging.basicConfig(stream=sys.stdout)
        if __name__ == "__main__":
            argparse.ArgumentParser().parse_args()
            print("{}")
    """
        },
    )
    out = json.loads(invoke("validate", "--json", str(sync_db), str(cli_logs)).stdout)
    by = {r["name"]: " ".join(r["errors"]) for r in out}
    assert "uses db but is not async" in by["sync_db"]
    assert "logging goes to stdout" in by["cli_logs"]


def test_a_handler_that_does_not_parse(make_skill, skills_root):
    broken = make_skill("broken_py", files={"handler.py": "async def execute(input, ctx)\n    return {}\n"})
    report = json.loads(invoke("validate", "--json", str(broken)).stdout)[0]
    assert any("does not parse" in e for e in report["errors"])
    ran = invoke("run", "broken_py", "--skills-dir", str(skills_root))
    env = json.loads(ran.stdout)
    assert ran.exit_code == 1 and env["exception_type"] == "SyntaxError"


def test_cli_validate_ok_and_errors(make_skill, skills_root, tmp_path):
    """Issue: '`skillyard validate PATH...`: lints skill folders ... exit 1 on errors.'"""
    good = make_skill("good", files={"handler.py": OK_HANDLER})
    assert invoke("validate", good).exit_code == 0
    bad = make_skill("baddefault", files={"handler.py": "async def execute(i, ctx=None):\n    return {}\n"})
    res = invoke("validate", bad, "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)[0]["errors"]


def test_validate_no_skill_found_exit_1(tmp_path):
    """docs/cli.md: 'Exit 1 when any skill has an error or when no skill folder is found'."""
    empty = tmp_path / "empty"
    empty.mkdir()
    res = invoke("validate", empty)
    assert res.exit_code == 1 and "Traceback" not in res.output


def test_validate_clean_root_exit_0():
    """Exit 1 when any skill has an error or when no skill folder is found; warnings alone exit 0."""
    out = invoke("validate", str(EXAMPLES))
    assert out.exit_code == 0, out.output


def test_validate_single_skill_folder(root):
    """Each `PATH` is a root (a folder of skills) or a single skill folder."""
    out = invoke("validate", "--json", str(root / "greet"))
    assert out.exit_code == 0 and [r["name"] for r in json.loads(out.stdout)] == ["greet"]


def test_validate_json_shape(root):
    """`--json` prints a list of `{name, dir, errors, warnings, secret_params}`."""
    out = invoke("validate", "--json", str(root))
    reports = json.loads(out.stdout)
    assert reports and all(set(r) == {"name", "dir", "errors", "warnings", "secret_params"} for r in reports)


def test_validate_secret_params_listed(root):
    """Warnings: … each parameter the credential rule matched with what was decided (`x-secret`)."""
    report = next(r for r in json.loads(invoke("validate", "--json", str(root)).stdout) if r["name"] == "greet")
    assert report["secret_params"] == ["api_key"] or "api_key" in json.dumps(report["secret_params"])


def test_validate_empty_folder_exit_1(tmp_path):
    """Exit 1 … when no skill folder is found"""
    (tmp_path / "empty").mkdir()
    out = invoke("validate", str(tmp_path / "empty"))
    assert out.exit_code == 1 and no_traceback(out)


def test_validate_missing_path_is_not_success(tmp_path):
    """Exit 1 … when no skill folder is found (a path that does not exist finds none)"""
    out = invoke("validate", str(tmp_path / "nope"))
    assert out.exit_code in (1, 2) and no_traceback(out)


def test_validate_needs_a_path():
    """skillyard validate PATH... [--json]"""
    usage_error(invoke("validate"))


@pytest.mark.parametrize("name", sorted(VALIDATE_ERRORS))
def test_validate_errors(tmp_path, name):
    """Errors: anything that stops the skill from loading (frontmatter, schema, missing `exec.config`, syntax errors),
    no `description` in the frontmatter, an entry function whose second parameter has a default, a sync entry that
    uses `db`, a Python CLI skill that configures logging to stdout."""
    frontmatter, files, needle = VALIDATE_ERRORS[name]
    if name == "stdoutlog":
        frontmatter += "\nexec:\n  config: main.py"
    folder = write_skill(tmp_path / "v", name, frontmatter, files=files)
    out = invoke("validate", "--json", str(folder))
    assert out.exit_code == 1, out.output
    errors = " ".join(json.loads(out.stdout)[0]["errors"])
    assert errors and needle in errors, errors


@pytest.mark.parametrize("name", sorted(VALIDATE_WARNINGS))
def test_validate_warnings_exit_0(tmp_path, name):
    """Warnings: … module constants whose names contain a credential substring, environment variables read with
    `os.environ`/`os.getenv` but not declared under `requires.env` … warnings alone exit 0."""
    code, needle = VALIDATE_WARNINGS[name]
    folder = write_skill(tmp_path / "v", name, f"name: {name}\ndescription: d", files={"handler.py": code})
    out = invoke("validate", "--json", str(folder))
    assert out.exit_code == 0, out.output
    assert needle in " ".join(json.loads(out.stdout)[0]["warnings"])


def test_validate_declared_env_is_not_warned(tmp_path):
    """environment variables read with `os.environ`/`os.getenv` but not declared under `requires.env`"""
    code = "import os\nasync def execute(input, ctx):\n    return {'v': os.environ.get('DECLARED_VAR_Z')}\n"
    fm = "name: declared\ndescription: d\nmetadata: {openclaw: {requires: {env: [DECLARED_VAR_Z]}}}"
    folder = write_skill(tmp_path / "v", "declared", fm, files={"handler.py": code})
    out = invoke("validate", "--json", str(folder))
    assert "DECLARED_VAR_Z" not in " ".join(json.loads(out.stdout)[0]["warnings"])


def test_validate_list_warnings_included(state_root):
    """Warnings: every repair and warning of `skillyard list`"""
    out = invoke("validate", "--json", str(state_root[0] / "nodesc"))
    report = json.loads(out.stdout)[0]
    assert any("first line" in w or "description" in w for w in report["warnings"] + report["errors"])


def test_validate_text_names_each_skill(root):
    """Lints skill folders without running them."""
    out = invoke("validate", str(root))
    assert out.exit_code in (0, 1) and "greet" in out.stdout and "boom" in out.stdout


def test_validate_json_no_skill_exit_1(tmp_path):
    """`--json` prints a list …; Exit 1 … when no skill folder is found"""
    (tmp_path / "empty").mkdir()
    out = invoke("validate", "--json", str(tmp_path / "empty"))
    assert out.exit_code == 1 and no_traceback(out)
