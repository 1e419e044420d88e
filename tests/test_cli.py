"""The CLI: list, show, plugins, run (exit codes 0/1/2), validate, config."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.cli import invoke

HELLO = "async def execute(input, ctx):\n    return {'greeting': 'hello ' + input['who'], 'ws': ctx['workspace_dir']}\n"
SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"who": {"type": "string"}, "api_key": {"type": "string"}},
        "required": ["who"],
    }
)


@pytest.fixture
def hello(make_skill):
    return make_skill(
        "hello",
        frontmatter="name: hello\ndescription: Greets\naliases: [hi]",
        files={"handler.py": HELLO, "schema.json": SCHEMA},
    )


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


def test_show_json_hides_credentials(hello, skills_root):
    result = invoke("show", "hi", "--json", "--skills-dir", str(skills_root))
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["name"] == "hello" and set(info["input_schema"]["properties"]) == {"who"}
    assert info["tools"][0]["name"] == "hello" and info["secret_params"] == ["api_key"]


def test_show_unknown_is_a_usage_error(skills_root):
    result = invoke("show", "nope", "--skills-dir", str(skills_root))
    assert result.exit_code == 2 and "unknown skill 'nope'" in result.output


def test_run_success_failure_and_usage_errors(hello, skills_root, tmp_path):
    base = ["run", "hello", "--skills-dir", str(skills_root)]
    ok = invoke(*base, "--input", '{"who": "Ada"}')
    assert ok.exit_code == 0 and json.loads(ok.stdout)["greeting"] == "hello Ada"
    failed = invoke(*base, "--input", "{}")
    assert failed.exit_code == 1 and json.loads(failed.stdout)["need_param"] == "who"
    bad_json = invoke(*base, "--input", "{who")
    assert bad_json.exit_code == 2 and "not valid JSON" in bad_json.output
    not_object = invoke(*base, "--input", "[1]")
    assert not_object.exit_code == 2 and "must be a JSON object" in not_object.output
    missing_file = invoke(*base, "--input", "@/nonexistent.json")
    assert missing_file.exit_code == 2 and "cannot read" in missing_file.output
    unknown = invoke("run", "nope", "--skills-dir", str(skills_root))
    assert unknown.exit_code == 2 and "unknown skill" in unknown.output
    bad_session = invoke(*base, "--input", '{"who": "x"}', "--context", '{"session_id": "../x"}')
    assert bad_session.exit_code == 2 and "not a safe name" in bad_session.output


def test_run_with_files_alias_and_workspace(hello, skills_root, tmp_path):
    (tmp_path / "in.json").write_text('{"who": "file"}')
    ws = tmp_path / "ws"
    result = invoke(
        "run", "hi", "--skills-dir", str(skills_root), "--input", f"@{tmp_path / 'in.json'}", "--workspace", str(ws)
    )
    env = json.loads(result.stdout)
    assert result.exit_code == 0 and env["greeting"] == "hello file" and env["ws"] == str(ws.resolve())


def test_run_needs_config_exits_1(make_skill, skills_root, monkeypatch):
    monkeypatch.delenv("NEED_ME", raising=False)
    make_skill(
        "gated",
        frontmatter="name: gated\ndescription: d\nmetadata: {openclaw: {requires: {env: [NEED_ME]}}}",
        files={"handler.py": "async def execute(i, c):\n    return {}\n"},
    )
    result = invoke("run", "gated", "--skills-dir", str(skills_root))
    assert result.exit_code == 1 and json.loads(result.stdout)["needs_config"] == ["NEED_ME"]


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


def test_plugins_lists_builtins_only_with_all():
    default = json.loads(invoke("plugins", "--json").stdout)
    assert all(not p["builtin"] for p in default)
    everything = json.loads(invoke("plugins", "--all", "--json").stdout)
    names = {p["name"]: p["hooks"] for p in everything}
    assert names["skillyard.executors.inprocess"] == ["register_exec_types"]


def test_console_script_prints_envelope_and_logs_to_stderr(hello, skills_root):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "skillyard",
            "run",
            "hello",
            "--skills-dir",
            str(skills_root),
            "--input",
            '{"who": "proc"}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["greeting"] == "hello proc"


def test_config_commands(skills_root, db_env):
    result = invoke("config", "set", "weather", "api-key=abc", "units=metric", "--role", "r1")
    assert result.exit_code == 0, result.output
    assert "set weather.api_key (secret, encrypted)" in result.output
    listed = invoke("config", "list", "weather", "--role", "r1")
    assert "api_key = ********" in listed.output and "units = metric" in listed.output and "abc" not in listed.output
    assert invoke("config", "set", "weather", "novalue").exit_code == 2
    assert "removed 2" in invoke("config", "unset", "weather", "--role", "r1").output


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SKILLYARD_WALL_CLOCK", "soon"),
        ("SKILLYARD_SUBPROCESS_TIMEOUT", "-5"),
        ("SKILLYARD_SUBPROCESS_TIMEOUT", "0"),
        ("SKILLYARD_WALL_CLOCK", "inf"),
        ("SKILLYARD_MAX_DOWNLOAD_MB", "nan"),
        ("SKILLYARD_RESCAN_INTERVAL", "-1"),
    ],
)
def test_bad_settings_are_usage_errors(skills_root, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    result = invoke("list", "--skills-dir", str(skills_root))
    assert result.exit_code == 2 and f"{name}={value!r} must be a number" in result.output, result.output
    assert "Traceback" not in result.output


def test_config_set_with_an_empty_key_is_a_usage_error(db_env):
    result = invoke("config", "set", "weather", "--", "-=x")
    assert result.exit_code == 2 and "empty once normalized" in result.output


def test_a_handler_that_does_not_parse(make_skill, skills_root):
    broken = make_skill("broken_py", files={"handler.py": "async def execute(input, ctx)\n    return {}\n"})
    report = json.loads(invoke("validate", "--json", str(broken)).stdout)[0]
    assert any("does not parse" in e for e in report["errors"])
    ran = invoke("run", "broken_py", "--skills-dir", str(skills_root))
    env = json.loads(ran.stdout)
    assert ran.exit_code == 1 and env["exception_type"] == "SyntaxError"
