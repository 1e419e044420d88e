"""``skillyard agent check / run / resume`` (cli.py): exit codes, text and --json output, usage errors without a
traceback; in-process through the click group, a few in a real process where the process boundary is the subject."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from skillyard.cli import cli
from skillyard.cli import cli as cli_main
from support.agent import check as check_kit
from support.agent import contract_probes as probes_kit
from support.agent import desk as desk_kit
from support.agent import memo as memo_kit
from support.agent import runtime as runtime_kit
from support.agent.check import set_contract
from support.agent.contract_probes import contract_skill, contract_with, errors, make_agent
from support.agent.desk import (
    API_KEY,
    APPROVAL_REQUIRED,
    FINGERPRINT_TRIP,
    DeskAgent,
    completion,
    free_port,
    openai_env,
    run_cli,
    tool_calls_message,
)
from support.agent.keeper import CONTRACT, IDENTITY, KeeperAgent, check, check_rows
from support.agent.memo import MemoAgent, changed
from support.agent.probes import call, needs_db, no_traceback, say, skillyard_cli
from support.agent.runtime import script, tool


def with_tool(name: str, **changes: Any) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    contract["tools"][name].update(changes)
    return contract


CODE_RE = re.compile(r"^agent_runtime\.\d{5}$")


ARG_JSON_INVALID = "agent_runtime.40020"


CATALOG_DENIED = "agent_runtime.40027"


BAD_SCRIPTS = [
    ("turns: [\n  - {text: hi\n", "invalid YAML"),
    ("turns:\n  - {tool_calls: [{arguments: {}}]}\n", "turns[0].tool_calls[0] has no 'name'"),
    ("turns:\n  - {say: hi}\n", "turns[0]"),
    ("steps:\n  - {text: hi}\n", "turns"),
]


def test_agent_check_reports_a_dropped_skill_with_skill_rule_and_path_and_exits_1(keeper_agent: KeeperAgent):
    keeper_agent.contract(with_tool("sendMemo", sideEffect="write"))
    code, output = check(str(keeper_agent.dir))
    assert code == 1
    assert "notes.keeper" in output and "§16.13" in output and "tools.sendMemo.sideEffect" in output


def test_a_good_agent_checks_clean(keeper_agent: KeeperAgent):
    code, rows = check_rows(keeper_agent.dir)
    assert code == 0, rows
    assert [r for r in rows if r["severity"] == "error"] == []


@needs_db
def test_cli_json_turn_at_a_follow_up_and_reply(keeper_agent: KeeperAgent):
    model = keeper_agent.script(
        call("findNotes", {"q": "总结"}),
        call("builtin_node_follow_up", {"question": "存哪一篇？", "expectedFields": ["title"]}),
        call("builtin_node_fail", {"reason": "不存了"}),
    )
    runner = CliRunner()
    session = keeper_agent.sid("cli")
    first = runner.invoke(
        cli,
        [
            "agent",
            "run",
            str(keeper_agent.dir),
            "--session",
            session,
            "--message",
            "存总结",
            "--model",
            model,
            "--context",
            json.dumps(IDENTITY),
            "--json",
        ],
    )
    assert first.exit_code == 0, first.output
    turn = json.loads(first.output)
    assert turn["status"] == "SUSPENDED"
    assert turn["checkpoint"]["type"] == "FOLLOW_UP" and turn["checkpoint"]["expected_fields"] == ["title"]
    assert turn["checkpoint"]["question"] == "存哪一篇？"
    assert turn["evidence"][0]["status"] == "SUCCESS" and turn["evidence"][0]["id"]
    assert turn["observations"][0]["evidence_id"] == turn["evidence"][0]["id"]
    second = runner.invoke(
        cli, ["agent", "resume", "--session", session, "--action", "REPLY", "--text", "周报", "--json"]
    )
    assert second.exit_code == 1  # the node failed
    assert json.loads(second.output)["status"] == "FAILED"


def test_cli_check_prints_rows_with_skill_tool_rule_path_and_a_summary(memo_agent: MemoAgent):
    memo_agent.contract(changed(lambda c: c["tools"]["sendMemo"].update(sideEffect="write")))
    result = skillyard_cli("agent", "check", str(memo_agent.dir))
    assert result.returncode == 1 and no_traceback(result), result.stderr
    out = result.stdout + result.stderr
    row = next(line for line in out.splitlines() if "§16.13" in line)
    assert "memo.keeper" in row and "sendMemo" in row and "tools.sendMemo.sideEffect" in row and "error" in row
    import re

    assert re.search(rf"^{re.escape(str(memo_agent.dir))}: \d+ error\(s\), \d+ warning\(s\)$", out, re.M), out


def test_cli_check_warnings_alone_pass(memo_agent: MemoAgent):
    memo_agent.contract(changed(lambda c: c["tools"]["pickTool"]["args"].update(userId={"sources": ["USER"]})))
    result = skillyard_cli("agent", "check", str(memo_agent.dir), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads(result.stdout)
    assert all(set(r) == {"kind", "severity", "skill", "tool", "rule", "path", "message"} for r in rows)
    assert {r["severity"] for r in rows} == {"warning"}
    assert any(r["rule"] == "§11" and r["tool"] == "pickTool" and "userId" in r["path"] for r in rows), rows
    assert any(
        r["rule"] == "P0.uncontracted_read" and r["tool"] == "plainTool" and r["kind"] == "preflight" for r in rows
    ), rows


@pytest.mark.parametrize("what", ["no AGENT.md", "missing folder"])
def test_cli_check_unusable_folder(memo_agent: MemoAgent, what: str):
    folder = memo_agent.root / "empty" if what == "no AGENT.md" else memo_agent.root / "ghost"
    if what == "no AGENT.md":
        folder.mkdir()
    result = skillyard_cli("agent", "check", str(folder))
    assert result.returncode == (1 if what == "no AGENT.md" else 2) and no_traceback(result), result.stderr
    assert ("AGENT.md" if what == "no AGENT.md" else "ghost") in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["--message", "x"], "--session"),
        (["--session", "s"], "--message"),
        (["--session", "s", "--message", "x", "--context", "{bad"], "--context"),
        (["--session", "s", "--message", "x", "--context", "[1]"], "--context"),
    ],
    ids=["no-session", "no-message", "context-not-json", "context-not-object"],
)
def test_cli_run_usage_errors_exit_2(memo_agent: MemoAgent, args: list[str], word: str):
    result = skillyard_cli("agent", "run", str(memo_agent.dir), *args, "--model", memo_agent.script(say("x")))
    assert result.returncode == 2 and no_traceback(result) and word in result.stderr, result.stderr


def test_cli_run_on_a_missing_folder_is_a_clean_usage_error(memo_agent: MemoAgent):
    result = skillyard_cli("agent", "run", str(memo_agent.root / "nope"), "--session", "s", "--message", "x")
    assert result.returncode == 2 and no_traceback(result) and "nope" in result.stderr


@needs_db
@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ([], "no model"),
        (["--model", "gpt-4o"], "script:"),
        (["--model", "script:/nonexistent/turns.yaml"], "no such file"),
        (["--skill", "memo.ghost", "--model", "SCRIPT"], "memo.ghost"),
        (["--model", "EMPTY"], "turn 1"),
    ],
    ids=["no-model", "bad-spec", "missing-script", "unknown-skill", "script-exhausted"],
)
def test_cli_run_errors_exit_1_with_a_message_and_no_traceback(memo_agent: MemoAgent, extra: list[str], needle: str):
    extra = [memo_agent.script(say("x")) if x == "SCRIPT" else x for x in extra]
    if "EMPTY" in extra:
        empty = memo_agent.root / "empty.yaml"
        empty.write_text("turns: []\n", encoding="utf-8")
        extra = ["--model", f"script:{empty}"]
    result = skillyard_cli(
        "agent", "run", str(memo_agent.dir), "--session", memo_agent.sid("err"), "--message", "x", *extra
    )
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert needle in result.stderr + result.stdout, result.stderr


@needs_db
def test_cli_resume_errors(memo_agent: MemoAgent):
    unknown = skillyard_cli("agent", "resume", "--session", memo_agent.sid("never"), "--action", "CONFIRM")
    assert unknown.returncode == 1 and no_traceback(unknown) and memo_agent.sid("never") in unknown.stderr
    bad_action = skillyard_cli("agent", "resume", "--session", memo_agent.sid("never"), "--action", "APPROVE")
    assert bad_action.returncode == 2 and no_traceback(bad_action)
    no_action = skillyard_cli("agent", "resume", "--session", memo_agent.sid("never"))
    assert no_action.returncode == 2 and "--action" in no_action.stderr
    model = memo_agent.script(call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]}))
    first = skillyard_cli(
        "agent", "run", str(memo_agent.dir), "--session", memo_agent.sid("fu"), "--message", "存", "--model", model
    )
    assert first.returncode == 0, first.stderr
    no_text = skillyard_cli("agent", "resume", "--session", memo_agent.sid("fu"), "--action", "reply")
    assert no_text.returncode == 1 and no_traceback(no_text) and "text" in no_text.stderr


@needs_db
def test_cli_run_text_output_and_cancel(memo_agent: MemoAgent):
    model = memo_agent.script(
        call("findNotes", {"q": "a"}),
        call("sendMemo", {"text": "编造的"}),
        call("builtin_node_follow_up", {"question": "发什么？", "expectedFields": ["text"]}),
    )
    first = skillyard_cli(
        "agent",
        "run",
        str(memo_agent.dir),
        "--session",
        memo_agent.sid("txt"),
        "--message",
        "发备忘",
        "--model",
        model,
        "--context",
        json.dumps(memo_kit.IDENTITY),
    )
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0] == "status: SUSPENDED"
    assert "  … 正在查找笔记" in lines
    assert "  findNotes: ok" in lines and "  sendMemo: agent_runtime.40024" in lines
    assert "  builtin_node_follow_up: ok" in lines
    assert "checkpoint: FOLLOW_UP (expects text)" in lines and "发什么？" in lines
    cancelled = skillyard_cli("agent", "resume", "--session", memo_agent.sid("txt"), "--action", "cancel", "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    turn = json.loads(cancelled.stdout)
    assert turn["status"] == "CANCELLED" and turn["checkpoint"] is None and turn["reply"]
    again = skillyard_cli("agent", "resume", "--session", memo_agent.sid("txt"), "--action", "CONFIRM")
    assert again.returncode == 1 and no_traceback(again)  # nothing open any more


@needs_db
def test_cli_json_fields_of_an_approval_turn(memo_agent: MemoAgent):
    model = memo_agent.script(
        call("saveNote", {"title": "季度总结", "mode": "ok"}),
        call("builtin_node_approval", {"summary": "保存笔记", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    first = skillyard_cli(
        "agent",
        "run",
        str(memo_agent.dir),
        "--session",
        memo_agent.sid("js"),
        "--message",
        "保存季度总结",
        "--model",
        model,
        "--context",
        json.dumps(memo_kit.IDENTITY),
        "--json",
    )
    assert first.returncode == 0, first.stderr
    turn = json.loads(first.stdout)
    assert set(turn) >= {
        "session_id",
        "status",
        "reply",
        "checkpoint",
        "observations",
        "evidence",
        "events",
        "task_id",
        "node_id",
    }
    assert turn["checkpoint"] == {
        "type": "APPROVAL",
        "question": "保存笔记\n标题：季度总结\nmode：ok",
        "expected_fields": [],
        "suggestions": [],
        "tool": "saveNote",
    }
    gated = turn["observations"][0]
    assert gated["code"] == "agent_runtime.42221" and gated["sources"] == {
        "title": "USER",
        "owner": "PLATFORM",
        "mode": "MODEL",
    }
    assert set(gated) == {"tool", "arguments", "ok", "code", "next_step", "sources", "evidence_id", "content"}
    done = skillyard_cli("agent", "resume", "--session", memo_agent.sid("js"), "--action", "CONFIRM", "--json")
    assert done.returncode == 0, done.stderr
    after = json.loads(done.stdout)
    assert after["status"] == "DONE" and after["reply"] == "已保存"
    assert [(e["tool"], e["status"], e["business_ok"]) for e in after["evidence"]] == [("saveNote", "SUCCESS", True)]
    assert after["events"] == [{"type": "tool", "tool": "saveNote", "label": "正在保存笔记"}]
    assert memo_agent.calls("saveNote")[0]["ctx"]["user_id"] == "42"


@needs_db
def test_cli_a_later_run_without_model_continues_with_the_sessions_model(memo_agent: MemoAgent):
    model = memo_agent.script(say("第一句"), say("第二句"))
    first = skillyard_cli(
        "agent", "run", str(memo_agent.dir), "--session", memo_agent.sid("cont"), "--message", "一", "--model", model
    )
    second = skillyard_cli(
        "agent", "run", str(memo_agent.dir), "--session", memo_agent.sid("cont"), "--message", "二", "--json"
    )
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["reply"] == "第二句"


@needs_db
def test_cli_run_takes_the_model_from_skillyard_model(memo_agent: MemoAgent):
    model = memo_agent.script(say("来自环境变量"))
    result = skillyard_cli(
        "agent",
        "run",
        str(memo_agent.dir),
        "--session",
        memo_agent.sid("envmodel"),
        "--message",
        "x",
        "--json",
        extra_env={"SKILLYARD_MODEL": model},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "来自环境变量"


@needs_db
def test_cli_run_and_resume_find_the_contract_skill_through_skills_dir(memo_agent: MemoAgent, tmp_path: Path):
    """Contract skills and tools are found through --skills-dir like every other skill (issue, docs/cli.md)."""
    import shutil

    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(memo_agent.dir / "skills"), str(elsewhere))
    model = memo_agent.script(
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "发了"}),
    )
    first = skillyard_cli(
        "agent",
        "run",
        str(memo_agent.dir),
        "--session",
        memo_agent.sid("sd"),
        "--message",
        "发备忘：开会",
        "--model",
        model,
        "--skills-dir",
        str(elsewhere),
        "--json",
    )
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["checkpoint"]["type"] == "APPROVAL"
    done = skillyard_cli(
        "agent", "resume", "--session", memo_agent.sid("sd"), "--action", "CONFIRM", "--skills-dir", str(elsewhere)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("status: DONE") and len(memo_agent.calls("sendMemo")) == 1


@needs_db
def test_cli_resume_works_from_another_working_directory(memo_agent: MemoAgent, tmp_path: Path):
    """docs/cli.md: resume reads the agent folder and the model spec from the session. A session started with
    relative paths (as in the docs' own example) must still resume from another directory."""
    model = memo_agent.script(
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "发了"}),
    )
    relative_model = "script:" + os.path.relpath(model.removeprefix("script:"), memo_agent.root)
    first = skillyard_cli(
        "agent",
        "run",
        memo_agent.dir.name,
        "--session",
        memo_agent.sid("cwd"),
        "--message",
        "发备忘：开会",
        "--model",
        relative_model,
        cwd=memo_agent.root,
    )
    assert first.returncode == 0, first.stderr
    other = tmp_path / "somewhere_else"
    other.mkdir()
    done = skillyard_cli("agent", "resume", "--session", memo_agent.sid("cwd"), "--action", "CONFIRM", cwd=other)
    assert done.returncode == 0 and no_traceback(done), done.stderr
    assert done.stdout.startswith("status: DONE") and len(memo_agent.calls("sendMemo")) == 1


@needs_db
def test_cli_a_session_of_another_agent_is_refused(memo_agent: MemoAgent, tmp_path: Path):
    import shutil

    other = tmp_path / "other_agent"
    shutil.copytree(memo_agent.dir, other)
    (other / "AGENT.md").write_text(
        "---\nagent_code: other\nskills: [memo.keeper]\n---\n# Mission\nx\n", encoding="utf-8"
    )
    first = skillyard_cli(
        "agent",
        "run",
        str(memo_agent.dir),
        "--session",
        memo_agent.sid("own"),
        "--message",
        "x",
        "--model",
        memo_agent.script(say("a")),
    )
    assert first.returncode == 0, first.stderr
    second = skillyard_cli(
        "agent",
        "run",
        str(other),
        "--session",
        memo_agent.sid("own"),
        "--message",
        "x",
        "--model",
        memo_agent.script(say("b")),
    )
    assert second.returncode == 1 and no_traceback(second) and "memo" in second.stderr


@needs_db
def test_cli_a_process_that_dies_mid_write_is_settled_on_the_next_run(memo_agent: MemoAgent):
    """A real crash (the process exits inside the confirmed write): the write is not run twice, the next command
    finds it uncertain (UNKNOWN_PRE_CALL) and asks at VERIFY (sendMemo has no verify tool); CONFIRM settles it."""
    model = memo_agent.script(
        call("sendMemo", {"text": "开会", "mode": "crash"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "发了"}),
    )
    first = skillyard_cli(
        "agent",
        "run",
        str(memo_agent.dir),
        "--session",
        memo_agent.sid("crash"),
        "--message",
        "发备忘：开会",
        "--model",
        model,
        "--context",
        json.dumps(memo_kit.IDENTITY),
        process=True,
    )
    assert first.returncode == 0, first.stderr
    crashed = skillyard_cli(
        "agent", "resume", "--session", memo_agent.sid("crash"), "--action", "CONFIRM", process=True
    )
    assert crashed.returncode == 17 and len(memo_agent.calls("sendMemo")) == 1
    again = skillyard_cli(
        "agent",
        "run",
        str(memo_agent.dir),
        "--session",
        memo_agent.sid("crash"),
        "--message",
        "发了吗？",
        "--json",
        process=True,
    )
    assert again.returncode == 0, again.stderr
    turn = json.loads(again.stdout)
    assert turn["status"] == "SUSPENDED" and turn["checkpoint"]["type"] == "VERIFY", turn
    assert [e["status"] for e in turn["evidence"]] == ["UNKNOWN_PRE_CALL"]
    settled = skillyard_cli(
        "agent", "resume", "--session", memo_agent.sid("crash"), "--action", "CONFIRM", "--json", process=True
    )
    assert settled.returncode == 0, settled.stderr
    after = json.loads(settled.stdout)
    assert after["status"] == "DONE" and [e["status"] for e in after["evidence"]] == ["SUCCESS"]
    assert len(memo_agent.calls("sendMemo")) == 1


@needs_db
def test_an_openai_compatible_model_drives_the_runner_through_the_cli(memo_agent: MemoAgent):
    """Models bullet, end to end: `agent run --model openai:MODEL` against a local chat-completions server; the
    tool call runs once through the chain, the next request carries the assistant tool_calls and the matching
    tool message, and the API key goes into the Authorization header only."""
    from http.server import BaseHTTPRequestHandler

    from support.local_http import serve

    seen: list[dict[str, Any]] = []
    key = "sk-probe-" + uuid.uuid4().hex

    class Chat(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            if len(seen) == 1:
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c-1",
                            "type": "function",
                            "function": {"name": "findNotes", "arguments": '{"q": "周报"}'},
                        }
                    ],
                }
            else:
                message = {"role": "assistant", "content": "找到两篇。"}
            data = json.dumps({"choices": [{"message": message}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with serve(Chat) as base:
        result = skillyard_cli(
            "agent",
            "run",
            str(memo_agent.dir),
            "--session",
            memo_agent.sid("oa"),
            "--message",
            "找周报",
            "--model",
            "openai:probe-model",
            "--json",
            extra_env={"SKILLYARD_MODEL_BASE_URL": f"{base}/v1", "SKILLYARD_MODEL_API_KEY": key},
        )
    assert result.returncode == 0, result.stderr
    turn = json.loads(result.stdout)
    assert turn["reply"] == "找到两篇。" and turn["status"] == "RUNNING"
    assert len(memo_agent.calls("findNotes")) == 1
    assert [s["path"] for s in seen] == ["/v1/chat/completions"] * 2
    assert all(s["auth"] == f"Bearer {key}" and s["body"]["model"] == "probe-model" for s in seen)
    first_tools = {t["function"]["name"] for t in seen[0]["body"]["tools"]}
    assert {"findNotes", "builtin_node_finish"} <= first_tools and seen[0]["body"]["tool_choice"] == "auto"
    messages = seen[1]["body"]["messages"]
    assert messages[0]["role"] == "system" and messages[1] == {"role": "user", "content": "找周报"}
    assert messages[2]["tool_calls"][0]["id"] == "c-1"
    assert messages[3]["role"] == "tool" and messages[3]["tool_call_id"] == "c-1"
    assert key not in result.stdout + result.stderr


@pytest.mark.parametrize("session", ["a/b", "x y", "s" * 300], ids=["slash", "space", "300-chars"])
@needs_db
def test_cli_run_refuses_a_session_id_it_cannot_use_before_anything_runs(memo_agent: MemoAgent, session: str):
    """Bad input is a clean error, without a traceback (docs/cli.md). The core refuses unsafe session ids (1-128
    letters, digits, '_', '-', '.'); the agent runtime passes the session id to every business skill, so a session
    id it accepts must work there too: here every tool call fails with TOOL_ERROR (and a write would be left
    UNKNOWN), or the database refuses the id after the model step ran."""
    model = memo_agent.script(call("findNotes", {"q": "a"}), say("b"))
    result = skillyard_cli(
        "agent", "run", str(memo_agent.dir), "--session", session, "--message", "x", "--model", model, "--json"
    )
    assert no_traceback(result), result.stderr[:600]
    if result.returncode == 0:
        turn = json.loads(result.stdout)
        assert turn["observations"][0]["ok"], turn["observations"][0]
    else:
        assert "session" in result.stderr and memo_agent.calls() == [], result.stderr


@needs_db
def test_cli_openai_401_is_one_clean_error_without_the_key(desk_agent: DeskAgent, chat):
    plan, url = chat
    plan.actions = [(401, {"error": {"message": f"Incorrect API key provided: {API_KEY}"}})]
    result = run_cli(desk_agent, "c401", "hi", "--model", "openai:probe", "--json", extra_env=openai_env(url))
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert "401" in result.stderr
    assert API_KEY not in result.stdout + result.stderr


@needs_db
def test_cli_openai_debug_logging_never_shows_the_key_and_stdout_stays_json(desk_agent: DeskAgent, chat):
    plan, url = chat
    plan.actions = [
        (200, completion(tool_calls_message(("c-1", "findNotes", '{"q": "周报"}')))),
        (200, completion({"content": "找到。"})),
    ]
    result = skillyard_cli(
        "-vv",
        "agent",
        "run",
        str(desk_agent.dir),
        "--session",
        desk_agent.sid("vv"),
        "--message",
        "找周报",
        "--model",
        "openai:probe",
        "--json",
        extra_env=openai_env(url),
        process=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["reply"] == "找到。"
    assert API_KEY not in result.stdout + result.stderr


@needs_db
def test_cli_openai_unreachable_server_names_the_url_and_attempts(desk_agent: DeskAgent):
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = run_cli(
        desk_agent, "unreach", "hi", "--model", "openai:probe", extra_env=openai_env(url, SKILLYARD_MODEL_RETRIES="0")
    )
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert "127.0.0.1" in result.stderr and "1 attempt(s)" in result.stderr
    assert API_KEY not in result.stdout + result.stderr


@needs_db
def test_cli_openai_takes_base_url_and_key_from_settings_toml(desk_agent: DeskAgent, chat, home: Path):
    plan, url = chat
    (home / "settings.toml").write_text(f'[agent.model]\nbase_url = "{url}/"\napi_key = "{API_KEY}"\n')
    plan.actions = [(200, completion({"content": "来自文件"}))]
    result = run_cli(desk_agent, "filecfg", "hi", "--model", "openai:file-model", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "来自文件"
    assert plan.seen[0]["path"] == "/v1/chat/completions"
    assert plan.seen[0]["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert plan.seen[0]["body"]["model"] == "file-model"


@needs_db
def test_cli_openai_environment_base_url_beats_the_file(desk_agent: DeskAgent, chat, home: Path):
    plan, url = chat
    dead = f"http://127.0.0.1:{free_port()}/v1"
    (home / "settings.toml").write_text(f'[agent.model]\nbase_url = "{dead}"\nretries = 0\n')
    plan.actions = [(200, completion({"content": "env wins"}))]
    result = run_cli(desk_agent, "envcfg", "hi", "--model", "openai:m", "--json", extra_env=openai_env(url))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "env wins"


@needs_db
def test_cli_openai_generic_openai_variables_are_the_fallback(desk_agent: DeskAgent, chat):
    plan, url = chat
    plan.actions = [(200, completion({"content": "fallback"}))]
    result = run_cli(
        desk_agent,
        "generic",
        "hi",
        "--model",
        "openai:m",
        "--json",
        extra_env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": API_KEY},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "fallback"
    assert plan.seen[0]["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert API_KEY not in result.stdout + result.stderr


@pytest.mark.parametrize(("text", "fragment"), BAD_SCRIPTS, ids=["bad-yaml", "no-name", "unknown-key", "no-turns"])
@needs_db
def test_cli_malformed_script_names_the_file_and_the_problem(desk_agent: DeskAgent, text: str, fragment: str):
    path = desk_agent.raw_script(text)
    result = run_cli(desk_agent, "bad", "x", "--model", f"script:{path}")
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert fragment in result.stderr and str(path) in result.stderr, result.stderr
    assert desk_agent.calls() == []


@needs_db
def test_cli_a_script_path_that_is_a_folder_is_a_clean_error(desk_agent: DeskAgent):
    folder = desk_agent.root / "scripts_dir"
    folder.mkdir()
    result = run_cli(desk_agent, "dir", "x", "--model", f"script:{folder}")
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert str(folder) in result.stderr


@needs_db
def test_cli_a_script_that_is_not_utf8_is_a_clean_error(desk_agent: DeskAgent):
    path = desk_agent.root / "latin1.yaml"
    path.write_bytes("turns:\n  - {text: caf\xe9}\n".encode("latin-1"))
    result = run_cli(desk_agent, "latin", "x", "--model", f"script:{path}")
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert str(path) in result.stderr


@needs_db
def test_cli_script_arguments_as_invalid_json_text_reach_the_chain_verbatim(desk_agent: DeskAgent):
    model = desk_agent.script(call("findNotes", '{"q": "a"'), say("stop"))
    result = run_cli(desk_agent, "badjson", "找", "--model", model, "--json")
    assert result.returncode == 0, result.stderr
    obs = json.loads(result.stdout)["observations"][0]
    assert obs["code"] == ARG_JSON_INVALID and obs["arguments"] == '{"q": "a"' and obs["next_step"]
    assert desk_agent.calls() == []


@needs_db
def test_cli_json_running_turn_fields(desk_agent: DeskAgent):
    model = desk_agent.script(call("findNotes", {"q": "周报"}), say("找到一篇。"))
    result = run_cli(
        desk_agent, "running", "找周报", "--model", model, "--context", json.dumps(desk_kit.IDENTITY), "--json"
    )
    assert result.returncode == 0, result.stderr
    turn = json.loads(result.stdout)
    assert turn["session_id"] == desk_agent.sid("running")
    assert turn["status"] == "RUNNING" and turn["checkpoint"] is None and turn["reply"] == "找到一篇。"
    assert turn["task_id"] and turn["node_id"]
    (obs,) = turn["observations"]
    assert obs["tool"] == "findNotes" and obs["ok"] is True and obs["code"] is None
    assert json.loads(obs["arguments"]) == {"q": "周报"}
    assert obs["sources"] == {"q": "MODEL"}
    (ev,) = turn["evidence"]
    assert set(ev) == {"id", "tool", "status", "business_ok"}
    assert ev["id"] == obs["evidence_id"] and ev["tool"] == "findNotes"
    assert ev["status"] == "SUCCESS" and ev["business_ok"] is True
    assert turn["events"] == [{"type": "tool", "tool": "findNotes", "label": "正在查找笔记"}]


@needs_db
def test_cli_json_stdout_is_exactly_one_json_object_even_with_verbose_logging(desk_agent: DeskAgent):
    model = desk_agent.script(call("findNotes", {"q": "a"}), say("ok"))
    result = skillyard_cli(
        "-v",
        "agent",
        "run",
        str(desk_agent.dir),
        "--session",
        desk_agent.sid("v"),
        "--message",
        "x",
        "--model",
        model,
        "--json",
        process=True,
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip().splitlines()) == 1
    assert json.loads(result.stdout)["status"] == "RUNNING"


@needs_db
def test_cli_a_failed_node_exits_1_and_still_prints_the_turn(desk_agent: DeskAgent):
    model = desk_agent.script(call("builtin_node_fail", {"reason": "资料不全，无法继续"}))
    result = run_cli(desk_agent, "failed", "x", "--model", model, "--json", process=True)
    assert result.returncode == 1 and no_traceback(result), result.stderr
    turn = json.loads(result.stdout)
    assert turn["status"] == "FAILED" and turn["reply"] == "资料不全，无法继续" and turn["checkpoint"] is None


@needs_db
def test_cli_a_fingerprint_trip_fails_the_node_with_the_full_code(desk_agent: DeskAgent):
    same = call("findNotes", {"q": "a"})
    result = run_cli(
        desk_agent, "trip", "x", "--model", desk_agent.script(same, same, same, same, say("never")), "--json"
    )
    assert result.returncode == 1 and no_traceback(result), result.stderr
    turn = json.loads(result.stdout)
    assert turn["status"] == "FAILED"
    assert [o["code"] for o in turn["observations"]] == [None, None, None, FINGERPRINT_TRIP]
    assert len(turn["evidence"]) == 3 and len(desk_agent.calls("findNotes")) == 3


@needs_db
def test_cli_refusals_carry_the_full_code_and_a_next_step(desk_agent: DeskAgent):
    model = desk_agent.script(
        call("deleteEverything", {}),
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_finish", {"output": ""}),
        say("stop"),
    )
    result = run_cli(
        desk_agent, "refuse", "保存季度总结", "--model", model, "--context", json.dumps(desk_kit.IDENTITY), "--json"
    )
    assert result.returncode == 0, result.stderr
    turn = json.loads(result.stdout)
    obs = turn["observations"]
    assert [o["code"] for o in obs] == [CATALOG_DENIED, APPROVAL_REQUIRED, "agent_runtime.42250"]
    for o in obs:
        assert CODE_RE.match(o["code"]) and o["ok"] is False and o["next_step"], o
        assert o["evidence_id"] is None
    assert turn["evidence"] == [] and desk_agent.calls() == []


@needs_db
def test_cli_sources_per_argument_show_evidence_and_platform(desk_agent: DeskAgent):
    model = desk_agent.script(
        call("findNotes", {"q": "总结"}),
        call("saveNote", {"title": "季度总结"}),
        say("stop"),
    )
    result = run_cli(
        desk_agent, "src", "把找到的那篇存一下", "--model", model, "--context", json.dumps(desk_kit.IDENTITY), "--json"
    )
    assert result.returncode == 0, result.stderr
    gated = json.loads(result.stdout)["observations"][1]
    assert gated["code"] == APPROVAL_REQUIRED
    assert gated["sources"] == {"title": "EVIDENCE", "owner": "PLATFORM"}


@needs_db
def test_cli_follow_up_checkpoint_json_and_reply_by_resume(desk_agent: DeskAgent):
    model = desk_agent.script(
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
        call("saveNote", {"title": "月报"}),
        say("stop"),
    )
    first = run_cli(desk_agent, "fu", "存笔记", "--model", model, "--context", json.dumps(desk_kit.IDENTITY), "--json")
    assert first.returncode == 0, first.stderr
    turn = json.loads(first.stdout)
    assert turn["status"] == "SUSPENDED"
    assert turn["checkpoint"]["type"] == "FOLLOW_UP"
    assert turn["checkpoint"]["question"] == "标题是什么？" and turn["checkpoint"]["expected_fields"] == ["title"]
    answered = skillyard_cli(
        "agent", "resume", "--session", desk_agent.sid("fu"), "--action", "REPLY", "--text", "月报", "--json"
    )
    assert answered.returncode == 0, answered.stderr
    after = json.loads(answered.stdout)
    assert after["observations"][0]["sources"]["title"] == "USER"
    assert after["observations"][0]["code"] == APPROVAL_REQUIRED


@pytest.mark.spec("§11")
@needs_db
def test_cli_context_ids_reach_platform_fields_as_strings(desk_agent: DeskAgent):
    """Issue §11 mapping: userId←user_id, organId←org_id …; ids stay strings (also when the caller sends numbers)."""
    desk_agent.contract(
        desk_kit.changed(
            lambda c: c["tools"]["pickTool"]["args"].update(
                a={"from": "platform.userId"}, d={"from": "platform.organId"}
            )
        )
    )
    model = desk_agent.script(call("pickTool", {}), say("ok"))
    result = run_cli(
        desk_agent, "ids", "x", "--model", model, "--context", json.dumps({"user_id": 42, "org_id": "007"}), "--json"
    )
    assert result.returncode == 0, result.stderr
    obs = json.loads(result.stdout)["observations"][0]
    assert obs["ok"] and obs["sources"] == {"a": "PLATFORM", "d": "PLATFORM"}, obs
    assert desk_agent.calls("pickTool")[0]["input"] == {"a": "42", "d": "007"}


@needs_db
def test_cli_text_output_of_a_running_turn(desk_agent: DeskAgent):
    model = desk_agent.script(call("findNotes", {"q": "a"}), say("这是回答"))
    result = run_cli(desk_agent, "text", "x", "--model", model)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "status: RUNNING"
    assert "  findNotes: ok" in lines and "这是回答" in lines


@needs_db
def test_cli_resume_of_a_running_node_is_a_clean_error(desk_agent: DeskAgent):
    first = run_cli(desk_agent, "notsusp", "x", "--model", desk_agent.script(say("在的")))
    assert first.returncode == 0, first.stderr
    result = skillyard_cli("agent", "resume", "--session", desk_agent.sid("notsusp"), "--action", "CONFIRM", "--json")
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert result.stderr.strip()


@needs_db
def test_cli_resume_of_an_unknown_session_names_it_in_one_line(desk_agent: DeskAgent):
    result = skillyard_cli("agent", "resume", "--session", desk_agent.sid("ghost"), "--action", "REJECT", "--json")
    assert result.returncode == 1 and no_traceback(result), result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and desk_agent.sid("ghost") in lines[0], result.stderr


@pytest.mark.parametrize("context", ["null", "42", '"text"'], ids=["null", "number", "string"])
def test_cli_run_context_that_is_not_an_object_is_a_usage_error(desk_agent: DeskAgent, context: str):
    result = run_cli(desk_agent, "ctx", "x", "--model", desk_agent.script(say("x")), "--context", context)
    assert result.returncode == 2 and no_traceback(result), result.stderr
    assert "--context" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["agent", "run", "--session", "s", "--message", "x"],
        ["agent", "resume", "--action", "CONFIRM"],
        ["agent", "resume", "--session", "s", "--action", ""],
        ["agent", "resume", "--session", "s", "--action", "OK"],
        ["agent", "run", "DIR", "--session", "s", "--message", "x", "--bogus"],
    ],
    ids=["no-agent-dir", "resume-no-session", "empty-action", "unknown-action", "unknown-option"],
)
def test_cli_usage_errors_exit_2_without_a_traceback(desk_agent: DeskAgent, args: list[str]):
    args = [str(desk_agent.dir) if a == "DIR" else a for a in args]
    result = skillyard_cli(*args)
    assert result.returncode == 2 and no_traceback(result), result.stderr
    assert result.stderr.strip()


@needs_db
def test_cli_unknown_action_lists_the_accepted_actions(desk_agent: DeskAgent):
    result = skillyard_cli("agent", "resume", "--session", desk_agent.sid("x"), "--action", "APPROVE")
    assert result.returncode == 2 and no_traceback(result)
    for action in ("confirm", "reject", "reply", "cancel"):  # --action is case-insensitive (docs/cli.md)
        assert action in result.stderr.lower(), result.stderr


@needs_db
def test_cli_missing_model_says_how_to_give_one(desk_agent: DeskAgent):
    result = run_cli(desk_agent, "nomodel", "x")
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert "--model" in result.stderr or "SKILLYARD_MODEL" in result.stderr, result.stderr


@needs_db
def test_cli_resume_with_a_model_override(desk_agent: DeskAgent):
    model = desk_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
    )
    first = run_cli(desk_agent, "ovr", "保存季度总结", "--model", model, "--context", json.dumps(desk_kit.IDENTITY))
    assert first.returncode == 0, first.stderr
    bad = skillyard_cli(
        "agent", "resume", "--session", desk_agent.sid("ovr"), "--action", "CONFIRM", "--model", "gpt-4o"
    )
    assert bad.returncode == 1 and no_traceback(bad) and "script:" in bad.stderr, bad.stderr
    assert desk_agent.calls() == []


def test_a_good_agent_passes(cms):
    code, output = check_kit.check(str(cms))
    assert code == 0, output
    assert "0 error(s), 0 warning(s)" in output
    code, output = check_kit.check(str(cms), "--json")
    assert code == 0 and json.loads(output) == []


def test_load_errors_fail_with_skill_rule_and_path(cms):
    set_contract(cms, {"tools": {"createArticle": {"sideEffect": "WRITE"}, "queryArticle": {}}})
    code, output = check_kit.check(str(cms))
    assert code == 1
    assert "cms.article.lifecycle" in output and "§16.6" in output and "tools.createArticle.success" in output
    assert "2 error(s), 0 warning(s)" in output
    code, output = check_kit.check(str(cms), "--json")
    rows = json.loads(output)
    assert code == 1
    first = rows[0]
    assert set(first) == {"kind", "severity", "skill", "tool", "rule", "path", "message"}
    assert (first["kind"], first["severity"], first["skill"], first["rule"], first["path"]) == (
        "load",
        "error",
        "cms.article.lifecycle",
        "§16.6",
        "tools.createArticle.success",
    )
    assert first["tool"] == "createArticle" and {r["rule"] for r in rows} == {"§16.6", "§16"}


def test_skills_dir_option_and_agent_md_errors(tmp_path, cms):
    shared = tmp_path / "shared"
    shutil.move(str(cms / "skills" / "queryArticle"), shared / "queryArticle")
    code, output = check_kit.check(str(cms))
    assert code == 1 and "'queryArticle'" in output and "P0.tool_missing" in output
    code, output = check_kit.check(str(cms), "--skills-dir", str(shared))
    assert code == 0, output
    (cms / "AGENT.md").unlink()
    code, output = check_kit.check(str(cms))
    assert code == 1 and "Error: no AGENT.md" in output


@pytest.mark.spec("§16", "§11")
def test_the_base_agent_checks_clean(tmp_path: Path):
    """Baseline for every probe below: the base contract satisfies §16, §11 and the preflight."""
    code, rows = probes_kit.check(make_agent(tmp_path))
    assert (code, rows) == (0, []), rows


def test_json_and_text_output_shape_for_load_and_preflight_findings(tmp_path: Path):
    """docs/cli.md: `--json` prints a JSON list of `{kind: "load" | "preflight", severity, skill, tool, rule, path,
    message}`; without it one row per finding and the summary `AGENT_DIR: N error(s), M warning(s)`; exit 1."""
    agent = make_agent(
        tmp_path,
        contract_with(lambda c: c["tools"]["saveNote"].update(idempotencyKey=["titel"])),
        skills="[notes.keeper, notes.broken]",
    )
    contract_skill(agent / "skills", "broken", "notes.broken", {"mode": "plan"}, tools="[findNotes]")
    code, rows = probes_kit.check(agent)
    assert code == 1
    assert all(set(r) == {"kind", "severity", "skill", "tool", "rule", "path", "message"} for r in rows), rows
    assert {r["kind"] for r in rows} == {"load", "preflight"}
    assert all(r["severity"] in {"error", "warning"} and r["message"] for r in rows)
    result = skillyard_cli("agent", "check", str(agent))
    assert result.returncode == 1
    n_err, n_warn = len(errors(rows)), len(rows) - len(errors(rows))
    assert f"{agent}: {n_err} error(s), {n_warn} warning(s)" in result.stdout + result.stderr, result
    for needle in ("notes.broken", "§16.13", "mode", "notes.keeper", "preflight.idempotency_key", "titel"):
        assert needle in result.stdout, (needle, result.stdout)


@needs_db
def test_cli_run_and_resume(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = runtime_kit.make_agent(tmp_path, log)
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="季度总结"),
        tool("builtin_node_approval", summary="保存笔记", toolName="saveNote"),
        tool("builtin_node_finish", output="完成"),
    )
    runner = CliRunner()
    first = runner.invoke(
        cli_main,
        [
            "agent",
            "run",
            str(agent_dir),
            "--session",
            "cli-1",
            "--message",
            "保存季度总结",
            "--model",
            model,
            "--context",
            json.dumps(runtime_kit.IDENTITY),
            "--json",
        ],
    )
    assert first.exit_code == 0, first.output
    turn = json.loads(first.output)
    assert turn["status"] == "SUSPENDED" and turn["checkpoint"]["type"] == "APPROVAL"
    assert turn["observations"][0]["code"] == "agent_runtime.42221"
    assert turn["observations"][0]["sources"]["title"] == "USER"
    second = runner.invoke(cli_main, ["agent", "resume", "--session", "cli-1", "--action", "CONFIRM", "--json"])
    assert second.exit_code == 0, second.output
    assert json.loads(second.output)["status"] == "DONE"
    bad = runner.invoke(
        cli_main, ["agent", "run", str(agent_dir), "--session", "cli-2", "--message", "x", "--model", "nonsense"]
    )
    assert bad.exit_code != 0 and "script:" in bad.output and "Traceback" not in bad.output


@pytest.mark.parametrize(
    ("contract", "needle"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "is not UTF-8 text"),
        (b'{"tools": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested more than 64 levels deep"),
        (b"// comment\n{tools: " + b"[" * 3000 + b"]" * 3000 + b"}", "nested more than 64 levels deep"),
        (b"{" + b",".join(b'"t%d": {"sideEffect": "NONE"}' % i for i in range(100_000)) + b"}", "over the limit"),
    ],
    ids=["binary", "deep-json", "deep-json5", "huge"],
)
def test_cli_check_of_an_unreadable_contract_is_a_finding_not_a_crash(memo_agent: MemoAgent, contract, needle):
    """Hardening issue 17: binary, 100,000-deep and 100,000-tool contracts made `agent check` crash or hang."""
    (memo_agent.keeper / "contract.json").write_bytes(contract)
    started = time.monotonic()
    result = skillyard_cli("agent", "check", str(memo_agent.dir), "--json")
    assert time.monotonic() - started < 20
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert needle in result.stdout + result.stderr
