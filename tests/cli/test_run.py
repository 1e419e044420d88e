"""``skillyard run`` (docs/cli.md): the envelope as one JSON line, exit codes 0/1/2, --input/--context/--workspace/
--session/--attach."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path

import pytest

from support.cli import invoke, no_traceback, usage_error
from support.outputs_probes import BIG_ROWS, echo_skill, listed, make_files, result_skill, sid, writer
from support.skills import ECHO, NOTES_FM, OK_HANDLER, run_skill


@pytest.fixture
def cli_echo(make_skill, skills_root):
    echo_skill(make_skill)
    return str(skills_root)


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


def test_cli_run_fan_out_tool_name(make_skill, skills_root):
    """Issue: '`skillyard run NAME` (NAME may be a skill name, an alias or a fan-out tool name `<skill>__<sub>`)'."""
    make_skill("notes", frontmatter=NOTES_FM, files={"handler.py": ECHO})
    res = invoke("run", "notes__add", "--skills-dir", skills_root, "--input", '{"text": "t"}')
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["got"]["_subcommand"] == "add"


def test_run_returns_plain_dict_same_as_cli(make_skill, skills_root):
    """Issue: 'the same shape `call_skill` returns and `skillyard run` prints'."""
    make_skill("same", files={"handler.py": "async def execute(i, c):\n    return {'v': 1}\n"})
    env = asyncio.run(run_skill(skills_root, "same"))
    res = invoke("run", "same", "--skills-dir", skills_root)
    printed = json.loads(res.stdout)
    assert type(env) is dict and set(printed) == set(env) and printed["v"] == env["v"] == 1


def test_cli_unsafe_session_exit_2(dump_skill):
    """docs/cli.md: exit 2 for '... unsafe `session_id`'."""
    res = invoke("run", "dump", "--skills-dir", dump_skill, "--context", '{"session_id": "../x"}')
    assert res.exit_code == 2 and "Traceback" not in res.output


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


@pytest.mark.spec("§4.2")
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


def test_run_prints_one_json_line_and_exit_0(root):
    """prints its envelope as one line of JSON on stdout … Exit 0 when `ok` is true"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "Ada"}')
    assert out.exit_code == 0 and out.stdout.count("\n") == 1
    env = json.loads(out.stdout)
    assert env["ok"] is True and env["greeting"] == "hi Ada"


def test_run_failure_exit_1(root):
    """Exit 0 when `ok` is true, 1 when false"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", "{}")
    env = json.loads(out.stdout)
    assert out.exit_code == 1 and env["ok"] is False and env["need_param"] == "who"


def test_run_exception_is_an_envelope_exit_1(root):
    """1 | `run`: the skill ran or was refused and the envelope has `ok: false`"""
    out = invoke("run", "boom", "--skills-dir", str(root))
    env = json.loads(out.stdout)
    assert out.exit_code == 1 and env["ok"] is False and env["exception_type"] == "ValueError"
    assert "Traceback" not in out.stdout


def test_run_needs_config_exit_1(state_root, monkeypatch):
    """A `needs_config` result is a failure (exit 1 on the CLI)."""
    monkeypatch.delenv("CLI_PROBE_NEED_ME", raising=False)
    out = invoke("run", "gated", "--skills-dir", str(state_root[0]))
    assert out.exit_code == 1 and "CLI_PROBE_NEED_ME" in json.loads(out.stdout)["needs_config"]


def test_run_knowledge_is_refused_exit_1(state_root):
    """1 | `run`: the skill ran or was refused and the envelope has `ok: false`"""
    out = invoke("run", "know", "--skills-dir", str(state_root[0]))
    assert out.exit_code == 1 and json.loads(out.stdout)["ok"] is False


def test_run_by_alias(root):
    """Runs a skill by name, alias or tool name"""
    out = invoke("run", "hey", "--skills-dir", str(root), "--input", '{"who": "B"}')
    assert out.exit_code == 0 and json.loads(out.stdout)["greeting"] == "hi B"


def test_run_tool_name_restores_subcommand(root):
    """(`notes__add` restores the subcommand)"""
    out = invoke("run", "notes__add", "--skills-dir", str(root), "--input", '{"text": "milk"}')
    assert out.exit_code == 0 and json.loads(out.stdout)["sub"] == "add" and json.loads(out.stdout)["text"] == "milk"


def test_run_tool_name_validates_subcommand_schema(root):
    """Running a fan-out tool name restores `input["_subcommand"]` and validates against that subcommand's schema"""
    out = invoke("run", "notes__add", "--skills-dir", str(root))
    assert out.exit_code == 1 and json.loads(out.stdout)["need_param"] == "text"


def test_run_unknown_skill_exit_2(root):
    """2 | usage error: … unknown skill"""
    usage_error(invoke("run", "nope_not_here", "--skills-dir", str(root)), "nope_not_here")


def test_run_missing_name_exit_2():
    """2 | usage error: unknown command or option …"""
    usage_error(invoke("run"))


@pytest.mark.parametrize("value", ["{who", "[1, 2]", '"text"', "null", "42", ""])
def test_run_input_not_an_object_exit_2(root, value):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    usage_error(invoke("run", "greet", "--skills-dir", str(root), "--input", value), "--input")


@pytest.mark.parametrize("value", ["{x", "[1]", '"s"', "true"])
def test_run_context_not_an_object_exit_2(root, value):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "a"}', "--context", value)
    usage_error(out, "--context")


def test_run_bad_json_message_says_the_fix(root):
    """`run` … 2 on usage errors (unknown skill, bad JSON), with a message that says what to fix. (issue 2)"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", "{who")
    usage_error(out)
    assert "JSON" in out.stderr and "Traceback" not in out.stderr


def test_run_input_from_file(root, tmp_path):
    """`--input` | the input: a JSON object inline, or `@path` to a JSON file (default `{}`)"""
    (tmp_path / "in.json").write_text('{"who": "File"}', encoding="utf-8")
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", f"@{tmp_path / 'in.json'}")
    assert out.exit_code == 0 and json.loads(out.stdout)["greeting"] == "hi File"


def test_run_input_from_file_with_bom(root, tmp_path):
    """`--input` | … or `@path` to a JSON file"""
    (tmp_path / "in.json").write_bytes(b"\xef\xbb\xbf" + b'{"who": "Bom"}')
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", f"@{tmp_path / 'in.json'}")
    assert out.exit_code == 0 and json.loads(out.stdout)["greeting"] == "hi Bom"


def test_run_context_from_file(root, tmp_path):
    """`--context` | `runtime_context` fields: a JSON object or `@path`"""
    (tmp_path / "ctx.json").write_text('{"actor_name": "Ada", "session_id": "s1"}', encoding="utf-8")
    out = invoke(
        "run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--context", f"@{tmp_path / 'ctx.json'}"
    )
    assert out.exit_code == 0 and json.loads(out.stdout)["actor"] == "Ada" and json.loads(out.stdout)["session"] == "s1"


@pytest.mark.parametrize("option", ["--input", "--context"])
def test_run_at_missing_file_exit_2(root, tmp_path, option):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    args = ["run", "greet", "--skills-dir", str(root), option, f"@{tmp_path / 'missing.json'}"]
    usage_error(invoke(*args), option)


@pytest.mark.parametrize("option", ["--input", "--context"])
def test_run_at_directory_exit_2(root, tmp_path, option):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    usage_error(invoke("run", "greet", "--skills-dir", str(root), option, f"@{tmp_path}"), option)


@pytest.mark.parametrize("option", ["--input", "--context"])
def test_run_at_file_not_an_object_exit_2(root, tmp_path, option):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    usage_error(invoke("run", "greet", "--skills-dir", str(root), option, f"@{tmp_path / 'list.json'}"), option)


@pytest.mark.parametrize("option", ["--input", "--context"])
def test_run_at_file_not_utf8_exit_2(root, tmp_path, option):
    """2 | usage error: … `--input`/`--context` not a JSON object or unreadable file"""
    (tmp_path / "latin1.json").write_bytes(b'{"who": "Jos\xe9"}')
    usage_error(invoke("run", "greet", "--skills-dir", str(root), option, f"@{tmp_path / 'latin1.json'}"), option)


def test_run_input_default_is_empty_object(root):
    """`--input` | … (default `{}`)"""
    out = invoke("run", "notes__list", "--skills-dir", str(root))
    assert out.exit_code == 0 and json.loads(out.stdout)["sub"] == "list"


def test_run_skills_dir_missing_exit_2(tmp_path):
    """2 | usage error: … missing `--skills-dir`"""
    usage_error(invoke("run", "greet", "--skills-dir", str(tmp_path / "nope")))


def test_run_workspace_created_if_missing(root, tmp_path):
    """`--workspace DIR` | the run's `workspace_dir` (created if missing)"""
    ws = tmp_path / "a" / "b" / "ws"
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--workspace", str(ws))
    assert out.exit_code == 0 and Path(json.loads(out.stdout)["ws"]).resolve() == ws.resolve() and ws.is_dir()


def test_run_workspace_that_is_a_file_exit_2(root, tmp_path):
    """2 | usage error … (a workspace that is a file cannot be the run's folder)"""
    target = tmp_path / "f.txt"
    target.write_text("x")
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--workspace", str(target))
    usage_error(out)


def test_run_default_workspace(root, home):
    """default `SKILLYARD_HOME/workspaces/<session_id or default>`"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}')
    assert Path(json.loads(out.stdout)["ws"]).resolve() == (home / "workspaces" / "default").resolve()


def test_run_session_workspace(root, home):
    """`--session ID` | the session: its workspace and attachments"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--session", "sess-1")
    env = json.loads(out.stdout)
    assert Path(env["ws"]).resolve() == (home / "workspaces" / "sess-1").resolve() and env["session"] == "sess-1"


def test_run_context_session_same_as_session(root, home):
    """`--session ID` | … (same as `"session_id"` in `--context`)"""
    out = invoke(
        "run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--context", '{"session_id": "c-9"}'
    )
    assert Path(json.loads(out.stdout)["ws"]).resolve() == (home / "workspaces" / "c-9").resolve()


@pytest.mark.parametrize("session", ["../escape", "", "a/b", ".hidden", "x" * 129, "sp ace"])
def test_run_unsafe_session_exit_2(root, session):
    """2 | usage error: … unsafe `session_id`"""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--session", session)
    usage_error(out)


def test_run_unsafe_session_in_context_exit_2(root):
    """2 | usage error: … unsafe `session_id`"""
    ctx = '{"session_id": "../../etc"}'
    usage_error(invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--context", ctx))


def test_run_unsafe_session_message_says_the_rule(root):
    """A session id must be 1–128 letters, digits, `_`, `-` or `.`, starting with a letter or digit; anything else is
    refused with that explanation."""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--session", "../x")
    usage_error(out, "128")


def test_run_context_actor_reaches_skill(root):
    """`--context` | `runtime_context` fields: … e.g. `{"role_id": "sales", "actor_name": "Ada", "session_id": "s1"}`"""
    ctx = '{"role_id": "sales", "actor_name": "Ada"}'
    env = json.loads(
        invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--context", ctx).stdout
    )
    assert env["actor"] == "Ada" and env["role"] == "sales"


def test_run_credential_in_input_is_dropped(root):
    """Credentials the caller passes in the input are dropped and taken from configs."""
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x", "api_key": "sk-passed-in-input"}')
    assert out.exit_code == 0 and "sk-passed-in-input" not in out.stdout


def test_run_attach_needs_a_session(root, tmp_path):
    """`--attach PATH` | register a file as an attachment of the session before the run (repeatable; needs a session)"""
    (tmp_path / "p.png").write_bytes(b"\x89PNG")
    out = invoke(
        "run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--attach", str(tmp_path / "p.png")
    )
    usage_error(out, "session")


def test_run_attach_prints_ids_on_stderr(db_env, root, tmp_path):
    """The reference ids (`img_1`, `file_1`, …) are printed on stderr as `attached img_1: /abs/path`"""
    (tmp_path / "p.png").write_bytes(b"\x89PNG")
    (tmp_path / "d.txt").write_text("doc")
    session = "att-" + uuid.uuid4().hex[:8]
    args = ["run", "greet", "--skills-dir", str(root), "--input", '{"who": "img_1"}', "--session", session]
    out = invoke(*args, "--attach", str(tmp_path / "p.png"), "--attach", str(tmp_path / "d.txt"))
    assert out.exit_code == 0, out.output
    assert f"attached img_1: {(tmp_path / 'p.png').resolve()}" in out.stderr
    assert f"attached file_1: {(tmp_path / 'd.txt').resolve()}" in out.stderr
    assert "attached" not in out.stdout


def test_run_attach_ref_usable_in_input(db_env, root, tmp_path):
    """… so the input can use them: `--input '{"image": "img_1"}'`"""
    (tmp_path / "p.png").write_bytes(b"\x89PNG")
    session = "att-" + uuid.uuid4().hex[:8]
    args = ["run", "greet", "--skills-dir", str(root), "--input", '{"who": "img_1"}', "--session", session]
    out = invoke(*args, "--attach", str(tmp_path / "p.png"))
    assert json.loads(out.stdout)["greeting"] == f"hi {(tmp_path / 'p.png').resolve()}"


def test_run_attach_with_context_session(db_env, root, tmp_path):
    """`--session ID` | … (same as `"session_id"` in `--context`); `--attach` … needs a session"""
    (tmp_path / "p.png").write_bytes(b"\x89PNG")
    ctx = json.dumps({"session_id": "att-" + uuid.uuid4().hex[:8]})
    args = ["run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--context", ctx]
    out = invoke(*args, "--attach", str(tmp_path / "p.png"))
    assert out.exit_code == 0 and "attached img_1:" in out.stderr, out.output


def test_run_attach_missing_file_exit_2(root, tmp_path):
    """2 | usage error … (an --attach path that does not exist)"""
    args = ["run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}', "--session", "s"]
    usage_error(invoke(*args, "--attach", str(tmp_path / "missing.png")))


def test_run_database_unreachable_exit_2(root, monkeypatch):
    """2 | … host errors raised around a run (database unreachable, …)"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://probe:probe-pass-1@127.0.0.1:1/nodb")
    out = invoke("run", "dbuser", "--skills-dir", str(root))
    usage_error(out, "SKILLYARD_DATABASE_URL")
    assert "probe-pass-1" not in out.output


def test_run_database_bad_scheme_exit_2(root, monkeypatch):
    """`SKILLYARD_DATABASE_URL` | … Any other scheme is an error."""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "mysql://probe:probe-pass-2@127.0.0.1/nodb")
    out = invoke("run", "dbuser", "--skills-dir", str(root))
    usage_error(out, "SKILLYARD_DATABASE_URL")
    assert "probe-pass-2" not in out.output


def test_run_with_database(db_env, root):
    """`db` is a live SQLAlchemy `AsyncSession` … a skill that uses `db`"""
    out = invoke("run", "dbuser", "--skills-dir", str(root))
    assert out.exit_code == 0 and json.loads(out.stdout)["has_db"] is True


@pytest.mark.parametrize("variable", ["SKILLYARD_WALL_CLOCK", "SKILLYARD_SUBPROCESS_TIMEOUT"])
def test_bad_timeout_variable_names_it(root, monkeypatch, variable):
    """The timeouts must be numbers; anything else stops skillyard with a message naming the variable."""
    monkeypatch.setenv(variable, "soon")
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}')
    assert out.exit_code != 0 and no_traceback(out) and variable in out.stderr and not out.stdout


def test_run_bad_secret_key_names_it(root, monkeypatch):
    """host errors raised around a run (… a secret that cannot be decrypted)"""
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", "not-a-fernet-key")
    out = invoke("run", "greet", "--skills-dir", str(root), "--input", '{"who": "x"}')
    assert out.exit_code in (0, 2) and no_traceback(out)
    if out.exit_code == 2:
        assert "SKILLYARD_SECRET_KEY" in out.stderr and "not-a-fernet-key" not in out.output


def test_run_failure_scrubs_credentials(db_env, root):
    """Credential values (4 characters or more) are replaced by `***` in a failure's `error`"""
    invoke("config", "set", "leaky", "api_token=Sup3rS3cretValue")
    out = invoke("run", "leaky", "--skills-dir", str(root))
    assert out.exit_code == 1 and "Sup3rS3cretValue" not in out.output and "***" in json.loads(out.stdout)["error"]


def test_run_undecryptable_secret_exit_2(db_env, root, monkeypatch):
    """host errors raised around a run (… a secret that cannot be decrypted); reading them with another key fails
    with a message saying so (set them again, or restore the key)"""
    from cryptography.fernet import Fernet

    invoke("config", "set", "leaky", "api_token=EncryptedWithKeyA")
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", Fernet.generate_key().decode())
    out = invoke("run", "leaky", "--skills-dir", str(root))
    usage_error(out, "key")
    assert "EncryptedWithKeyA" not in out.output


def test_cli_attach_many_and_list_json(make_skill, skills_root, db_env, tmp_path):
    echo_skill(
        make_skill,
        schema={
            "type": "object",
            "properties": {"images": {"type": "array", "items": {"type": "string"}}, "cmd": {"type": "string"}},
        },
    )
    a = tmp_path / "a b.png"
    a.write_bytes(b"png")
    c = tmp_path / "c.mp3"
    c.write_bytes(b"mp3")
    result = invoke(
        "run",
        "echo",
        "--skills-dir",
        str(skills_root),
        "--session",
        "cli-r",
        "--attach",
        str(a),
        "--attach",
        str(c),
        "--input",
        json.dumps({"images": ["img_1", "img_1"], "cmd": "ffmpeg -i audio_1 -i img_1 out.mp4"}),
    )
    assert result.exit_code == 0, result.output
    assert "img_1" in result.stderr and "audio_1" in result.stderr
    got = json.loads(result.stdout)["got"]
    assert got["images"] == [str(a.resolve())]
    assert got["cmd"] == f"ffmpeg -i {c.resolve()} -i '{a.resolve()}' out.mp4"
    listed = json.loads(invoke("artifacts", "--session", "cli-r", "--json").stdout)
    assert [(i["ref"], i["type"], i["skill"] or "") for i in listed] == [
        ("img_1", "image", ""),
        ("audio_1", "audio", ""),
    ]
    for item in listed:
        assert {"ref", "type", "filename", "local_path", "url", "size", "sha256", "skill", "created_at"} <= set(item)


def test_cli_run_with_unsafe_session_is_a_usage_error(make_skill, skills_root):
    echo_skill(make_skill)
    result = invoke("run", "echo", "--skills-dir", str(skills_root), "--session", "../../etc")
    assert result.exit_code == 2 and "not a safe name" in result.output


def test_cli_attach_prints_ids_on_stderr_and_the_ref_works_in_input(db_env, cli_echo, tmp_path):
    session = sid("cli")
    photo, notes = make_files(tmp_path / "my uploads", ["cat photo.jpg", "notes.txt"])
    proc = invoke(
        "run", "echo", "--skills-dir", cli_echo, "--session", session, "--attach", str(photo), "--attach", str(notes),
        "--input", json.dumps({"image": "img_1", "files": ["file_1", "img_1"], "command": "wc -c file_1 img_1"}),
    )  # fmt: skip
    assert proc.exit_code == 0, proc.stderr
    assert f"attached img_1: {photo.resolve()}" in proc.stderr.splitlines()
    assert f"attached file_1: {notes.resolve()}" in proc.stderr.splitlines()
    got = json.loads(proc.stdout)["got"]
    assert got["image"] == str(photo.resolve())
    assert got["files"] == [str(notes.resolve()), str(photo.resolve())]
    assert got["command"] == f"wc -c '{notes.resolve()}' '{photo.resolve()}'"


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_cli_attach_of_a_missing_file_or_a_directory_is_a_clear_usage_error(db_env, cli_echo, tmp_path, kind):
    session = sid("clibad")
    target = tmp_path / ("nope.png" if kind == "missing" else "a folder")
    if kind == "directory":
        target.mkdir()
    proc = invoke("run", "echo", "--skills-dir", cli_echo, "--session", session, "--attach", str(target))
    assert proc.exit_code == 2, (proc.exit_code, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert str(target) in proc.stderr
    assert ("does not exist" if kind == "missing" else "directory") in proc.stderr
    assert asyncio.run(listed(session)) == []


def test_cli_attach_without_a_session_is_a_usage_error(db_env, cli_echo, tmp_path):
    [photo] = make_files(tmp_path / "up", ["a.png"])
    proc = invoke("run", "echo", "--skills-dir", cli_echo, "--attach", str(photo))
    assert proc.exit_code == 2 and "--session" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_attach_one_good_one_missing_registers_nothing(db_env, cli_echo, tmp_path):
    """A usage error stops the command before the run; no half of the uploads is left registered."""
    session = sid("clihalf")
    [photo] = make_files(tmp_path / "up", ["a.png"])
    proc = invoke(
        "run", "echo", "--skills-dir", cli_echo, "--session", session,
        "--attach", str(photo), "--attach", str(tmp_path / "missing.pdf"),
    )  # fmt: skip
    assert proc.exit_code == 2 and "Traceback" not in proc.stderr
    assert asyncio.run(listed(session)) == []


def test_cli_attach_uses_the_session_given_in_context(db_env, make_skill, skills_root, tmp_path):
    """docs/cli.md: --session is the "same as "session_id" in --context"; --attach needs a session."""
    echo_skill(make_skill)
    session = sid("ctxsess")
    photo = tmp_path / "a.png"
    photo.write_bytes(b"png")
    proc = invoke(
        "run", "echo", "--skills-dir", str(skills_root), "--context", json.dumps({"session_id": session}),
        "--attach", str(photo), "--input", '{"image": "img_1"}',
    )  # fmt: skip
    assert proc.exit_code == 0, proc.stderr
    assert f"attached img_1: {photo.resolve()}" in proc.stderr
    assert json.loads(proc.stdout)["got"]["image"] == str(photo.resolve())


def test_cli_attach_relative_path_is_printed_and_stored_absolute(
    db_env, make_skill, skills_root, tmp_path, monkeypatch
):
    echo_skill(make_skill)
    session = sid("rel")
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "voice memo.m4a").write_bytes(b"m4a")
    monkeypatch.chdir(tmp_path / "cwd")
    proc = invoke("run", "echo", "--skills-dir", str(skills_root), "--session", session, "--attach", "voice memo.m4a")
    assert proc.exit_code == 0, proc.stderr
    path = str((tmp_path / "cwd" / "voice memo.m4a").resolve())
    assert f"attached audio_1: {path}" in proc.stderr.splitlines()
    [item] = json.loads(proc.stdout)["attachments"]
    assert item["local_path"] == path and item["ref"] == "audio_1"


def test_cli_attach_of_the_same_file_twice_is_one_attachment(db_env, make_skill, skills_root, tmp_path):
    """docs: "A file already registered keeps its id"."""
    echo_skill(make_skill)
    session = sid("twice")
    photo = tmp_path / "a.png"
    photo.write_bytes(b"png")
    proc = invoke(
        "run", "echo", "--skills-dir", str(skills_root), "--session", session,
        "--attach", str(photo), "--attach", str(photo),
    )  # fmt: skip
    assert proc.exit_code == 0, proc.stderr
    assert "img_2" not in proc.stderr
    assert [a["ref"] for a in json.loads(proc.stdout)["attachments"]] == ["img_1"]


def test_cli_run_with_an_empty_session_id_is_a_usage_error(db_env, make_skill, skills_root, tmp_path):
    """Issue: "A session id that is not a safe name is rejected with a clear error"; docs/files-and-artifacts.md:
    "a session id must be 1–128 letters …" — an empty `--session ""` is not one; it must not silently run (and
    attach) in another session."""
    echo_skill(make_skill)
    proc = invoke("run", "echo", "--skills-dir", str(skills_root), "--session", "")
    assert proc.exit_code == 2, (proc.exit_code, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr


def test_cli_async_skill_on_a_chat_channel_finishes_before_the_command_exits(db_env, make_skill, skills_root):
    """docs: an async skill on a non-web channel answers at once and runs as a task of the host; "close() waits
    for it". From the CLI (--context channel) the background run must still finish and register its file
    before the process exits, rather than being dropped with the event loop."""
    result_skill(
        make_skill,
        "render",
        """
await asyncio.sleep(1.0)
(ws / "render.mp4").write_bytes(b"mp4")
return {"ok": True, "local_path": str(ws / "render.mp4")}
""",
        frontmatter="name: render\ndescription: d\nasync: true",
    )
    session = sid("cliasync")
    proc = invoke(
        "run", "render", "--skills-dir", str(skills_root), "--session", session,
        "--context", json.dumps({"channel": "dingtalk"}),
    )  # fmt: skip
    assert proc.exit_code == 0, proc.stderr
    ack = json.loads(proc.stdout)
    assert ack["ok"] is True and ack["async"] is True and isinstance(ack["message"], str)
    listing = json.loads(invoke("artifacts", "--session", session, "--json").stdout)
    assert [(i["ref"], i["skill"]) for i in listing] == [("video_1", "render")]
    assert Path(listing[0]["local_path"]).is_file()


def test_cli_workspace_and_session_register_artifacts_of_that_session(db_env, make_skill, skills_root, tmp_path):
    """docs/cli.md: --workspace picks the run's folder, --session its attachments: the artifact written in the
    given folder is listed under the session."""
    result_skill(
        make_skill,
        "draw",
        '(ws / "chart.png").write_bytes(b"png")\nreturn {"ok": True, "local_path": str(ws / "chart.png")}',
    )
    session = sid("cliws")
    folder = tmp_path / "my ws"
    proc = invoke("run", "draw", "--skills-dir", str(skills_root), "--session", session, "--workspace", str(folder))
    assert proc.exit_code == 0, proc.stderr
    env = json.loads(proc.stdout)
    assert env["ref"] == "img_1" and Path(env["local_path"]).parent == folder.resolve()
    listing = json.loads(invoke("artifacts", "--session", session, "--json").stdout)
    assert [(i["ref"], i["local_path"]) for i in listing] == [("img_1", env["local_path"])]


def test_cli_run_prints_the_receipt_and_the_offload_file_exists(db_env, make_skill, skills_root):
    """docs/cli.md: `skillyard run` "prints its envelope as one line of JSON" — for a large result, the receipt."""
    writer(make_skill)
    proc = invoke(
        "run",
        "writer",
        "--skills-dir",
        str(skills_root),
        "--session",
        sid("offcli"),
        "--input",
        json.dumps({"result": {"ok": True, "rows": BIG_ROWS}}),
    )
    assert proc.exit_code == 0, proc.stderr
    env = json.loads(proc.stdout.strip().splitlines()[-1])
    assert env["offloaded"] is True and Path(env["offload_file"]).is_file()
    assert len(proc.stdout) < 12_000


def test_cli_attach_names_with_spaces_and_unicode(db_env, make_skill, skills_root, tmp_path):
    """docs/cli.md: ids "printed on stderr as `attached img_1: /abs/path`"; `artifacts --json` gives `filename`
    and `local_path` of each."""
    echo_skill(make_skill)
    session = sid("uni")
    photo, memo = make_files(tmp_path / "上传 目录", ["假期 照片.PNG", "voice memo.M4A"])
    proc = invoke(
        "run",
        "echo",
        "--skills-dir",
        str(skills_root),
        "--session",
        session,
        "--attach",
        str(photo),
        "--attach",
        str(memo),
    )
    assert proc.exit_code == 0, proc.stderr
    assert f"attached img_1: {photo.resolve()}" in proc.stderr.splitlines()
    assert f"attached audio_1: {memo.resolve()}" in proc.stderr.splitlines()
    listing = invoke("artifacts", "--session", session, "--json")
    rows = {r["ref"]: r for r in json.loads(listing.stdout)}
    assert rows["img_1"]["filename"] == "假期 照片.PNG" and rows["img_1"]["type"] == "image"
    assert rows["audio_1"]["local_path"] == str(memo.resolve()) and rows["audio_1"]["type"] == "audio"


@pytest.mark.spec("§3.3")
def test_cli_attached_refs_in_a_list_field_and_a_command(db_env, make_skill, skills_root, tmp_path):
    """§3.3: "字段值或数组项精确等于引用 ID → 替换成真实 local_path"; in command fields "路径统一转 posix
    正斜杠，含空格时自动补引号" — from the CLI, with --attach."""
    echo_skill(make_skill)
    session = sid("clirefs")
    photo, sheet = make_files(tmp_path / "in", ["a b.png", "data.csv"])
    proc = invoke(
        "run",
        "echo",
        "--skills-dir",
        str(skills_root),
        "--session",
        session,
        "--attach",
        str(photo),
        "--attach",
        str(sheet),
        "--input",
        json.dumps({"files": ["img_1", "file_1", "img_1"], "cmd": "wc -c img_1 file_1"}),
    )
    assert proc.exit_code == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])["got"]
    assert got["files"] == [str(photo.resolve()), str(sheet.resolve())]
    assert str(sheet.resolve()) in got["cmd"] and "img_1" not in got["cmd"] and "file_1" not in got["cmd"]
    assert f"'{photo.resolve()}'" in got["cmd"] or f'"{photo.resolve()}"' in got["cmd"], got["cmd"]


def test_cli_run_prints_refs_of_produced_artifacts(db_env, make_skill, skills_root):
    """decisions.md: "Registered artifact items get their `ref` written into the result" — as printed by
    `skillyard run`."""
    writer(make_skill)
    proc = invoke(
        "run",
        "writer",
        "--skills-dir",
        str(skills_root),
        "--session",
        sid("cliref"),
        "--input",
        json.dumps({"files": {"a.png": "a"}, "result": {"ok": True, "images": ["a.png"]}}),
    )
    env = json.loads(proc.stdout.strip().splitlines()[-1])
    assert env["images"][0]["ref"] == "img_1" and Path(env["images"][0]["local_path"]).is_absolute()


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("--input", '{"who": "\\ud800"}', "half of a surrogate pair"),
        ("--input", '{"who": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ("--input", '{"who": NaN}', "NaN is not a JSON number"),
        ("--context", '{"triggered_at": Infinity}', "Infinity is not a JSON number"),
        ("--context", '{"triggered_at": 1e18}', "between years 1 and 9999"),
        ("--context", '{"triggered_at": -1e18}', "between years 1 and 9999"),
        ("--context", '{"triggered_at": "NaN"}', "between years 1 and 9999"),
        ("--context", '{"workspace_dir": "/tmp/a\\u0000b"}', "contains a NUL byte"),
    ],
    ids=["surrogate", "deep", "nan", "infinity", "far-future", "far-past", "nan-text", "nul-workspace"],
)
def test_inputs_that_crashed_are_usage_errors_naming_the_fix(hello, skills_root, option, value, needle):
    """Hardening issue 17: each was a traceback before."""
    args = ["run", "hello", "--skills-dir", skills_root]
    args += ["--input", '{"who": "a"}'] if option == "--context" else []
    usage_error(invoke(*args, option, value), needle)
