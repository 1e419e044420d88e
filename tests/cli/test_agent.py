"""``skillyard agent check | run | resume`` (docs/cli.md), the agent plugin's commands, on a real PostgreSQL."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from support import EXAMPLES, REPO
from support.cli import invoke, no_traceback, usage_error

NOTES_AGENT = EXAMPLES / "agents" / "notes"


@pytest.fixture
def broken_agent(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    shutil.copytree(NOTES_AGENT, agent)
    contract = json.dumps(
        {
            "target": "save_note",
            "tools": {
                "save_note": {
                    "sideEffect": "WRITE",
                    "args": {"title": {"sources": ["USER"]}, "no_such_field": {"sources": ["USER"]}},
                    "success": {"path": "saved", "op": "EQ", "value": True},
                },
                "find_note": {"args": {"title": {"sources": ["USER", "MODEL"]}}},
            },
        }
    )
    (agent / "skills" / "keeper" / "contract.json").write_text(contract, encoding="utf-8")
    return agent


FINDING_KEYS = {"kind", "severity", "skill", "tool", "rule", "path", "message"}

DEMO_MESSAGE = "把标题为季度总结的笔记保存下来：收入增长 12%"


def new_session() -> str:
    return "ag-" + uuid.uuid4().hex[:10]


def agent_run(session: str, *extra: str, message: str = DEMO_MESSAGE, agent: Path = NOTES_AGENT) -> Result:
    return invoke("agent", "run", str(agent), "--session", session, "--message", message, *extra)


DEMO_MODEL = f"script:{NOTES_AGENT / 'demo.yaml'}"

TURN_KEYS = {"session_id", "status", "reply", "checkpoint", "observations", "evidence", "events", "task_id", "node_id"}

OBSERVATION_KEYS = {"tool", "arguments", "ok", "code", "next_step", "sources", "evidence_id", "content"}


#: The notes agent has two skills, so a new task is planned first: one node of notes.keeper.
PLAN_NODE = {"id": "n1", "skillKey": "notes.keeper", "goal": "save the note"}
PLAN_TURN = {"tool_calls": [{"name": "builtin_plan", "arguments": {"nodes": [PLAN_NODE]}}]}


def write_script(tmp_path: Path, turns: list[dict[str, Any]]) -> str:
    """A scripted model for the notes agent: the planning turn, then ``turns``."""
    path = tmp_path / f"script-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps({"turns": [PLAN_TURN, *turns]}, ensure_ascii=False), encoding="utf-8")  # JSON is YAML
    return f"script:{path}"


def test_agent_check_example_exit_0():
    """skillyard agent check examples/agents/notes … summary line `AGENT_DIR: N error(s), M warning(s)`"""
    out = invoke("agent", "check", str(NOTES_AGENT))
    assert out.exit_code == 0, out.output
    assert re.search(r": 0 error\(s\), \d+ warning\(s\)\s*$", out.stdout.strip()), out.stdout


def test_agent_check_example_json():
    """`--json` | print a JSON list of findings"""
    out = invoke("agent", "check", str(NOTES_AGENT), "--json")
    assert out.exit_code == 0 and isinstance(json.loads(out.stdout), list)


def test_agent_check_preflight_error_exit_1(broken_agent):
    """Exit 1 when any finding is an error"""
    out = invoke("agent", "check", str(broken_agent))
    assert out.exit_code == 1 and no_traceback(out)
    assert "P0.arg_path_missing" in out.stdout and "1 error(s), 0 warning(s)" in out.output


def test_agent_check_json_findings(broken_agent):
    """`--json` | print a JSON list of findings: `{kind: "load" | "preflight", severity, skill, tool, rule, path,
    message}`"""
    out = invoke("agent", "check", str(broken_agent), "--json")
    findings = json.loads(out.stdout)
    assert out.exit_code == 1 and findings and all(set(f) == FINDING_KEYS for f in findings)
    error = next(f for f in findings if f["severity"] == "error")
    assert error["kind"] == "preflight" and error["rule"] == "P0.arg_path_missing" and error["tool"] == "save_note"


def test_agent_check_load_error(tmp_path):
    """`{kind: "load" | "preflight", …}`; Exit code 1 when any skill fails to load"""
    agent = tmp_path / "agent"
    shutil.copytree(NOTES_AGENT, agent)
    (agent / "skills" / "keeper" / "contract.json").write_text('{"target": "find_note", "tools": {}}', encoding="utf-8")
    out = invoke("agent", "check", str(agent), "--json")
    findings = json.loads(out.stdout)
    assert out.exit_code == 1 and any(f["kind"] == "load" and f["severity"] == "error" for f in findings), findings


def test_agent_check_missing_dir_exit_2(tmp_path):
    """`AGENT_DIR` | the agent folder (with `AGENT.md`); must exist"""
    usage_error(invoke("agent", "check", str(tmp_path / "nope")))


def test_agent_check_file_exit_2(tmp_path):
    """`AGENT_DIR` | the agent folder (with `AGENT.md`); must exist"""
    (tmp_path / "f").write_text("x")
    usage_error(invoke("agent", "check", str(tmp_path / "f")))


def test_agent_check_no_agent_md_exit_1(tmp_path):
    """A missing `AGENT.md` … raises `AgentProfileError` (`skillyard agent check` prints it and exits 1)."""
    (tmp_path / "empty").mkdir()
    out = invoke("agent", "check", str(tmp_path / "empty"))
    assert out.exit_code == 1 and no_traceback(out) and "AGENT.md" in out.output


def test_agent_check_missing_agent_code_exit_1(tmp_path):
    """a missing `agent_code` … raises `AgentProfileError` (`skillyard agent check` prints it and exits 1)."""
    agent = tmp_path / "agent"
    shutil.copytree(NOTES_AGENT, agent)
    (agent / "AGENT.md").write_text(
        "---\nagent_name: x\nskills: [notes.keeper]\n---\n# Identity\nx\n", encoding="utf-8"
    )
    out = invoke("agent", "check", str(agent))
    assert out.exit_code == 1 and no_traceback(out) and "agent_code" in out.output


def test_agent_check_inactive_agent_exit_1(tmp_path):
    """status: … any other value: the agent does not load (… agent check exits 1)"""
    agent = tmp_path / "agent"
    shutil.copytree(NOTES_AGENT, agent)
    text = (
        (agent / "AGENT.md")
        .read_text(encoding="utf-8")
        .replace("agent_code: notes", "agent_code: notes\nstatus: DRAFT")
    )
    (agent / "AGENT.md").write_text(text, encoding="utf-8")
    out = invoke("agent", "check", str(agent))
    assert out.exit_code == 1 and no_traceback(out)


def test_agent_check_skills_dir_missing_exit_2(tmp_path):
    """Commands that search for skills take `--skills-dir DIR` (repeatable). … A `--skills-dir` that does not exist
    is a usage error."""
    usage_error(invoke("agent", "check", str(NOTES_AGENT), "--skills-dir", str(tmp_path / "nope")))


def test_agent_check_skills_dir_missing_no_traceback(tmp_path):
    """the message is printed, no traceback"""
    out = invoke("agent", "check", str(NOTES_AGENT), "--skills-dir", str(tmp_path / "nope"))
    assert out.exit_code != 0 and no_traceback(out) and "nope" in out.output


def test_agent_run_demo_text(db_env):
    """Without `--json`, `run` and `resume` print `status: …`, one `  … LABEL` line per tool event, one `  TOOL: ok`
    (or `  TOOL: CODE`) line per observation, `checkpoint: TYPE (expects FIELDS)` when suspended, and the reply."""
    out = agent_run(new_session(), "--model", DEMO_MODEL, "--context", '{"actor_name": "Ada"}')
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0] == "status: SUSPENDED"
    assert "  … Looking the note up" in lines
    assert "  builtin_node_approval: ok" in lines
    assert "  save_note: agent_runtime.42221" in lines
    assert any(line.startswith("checkpoint: APPROVAL") for line in lines)
    assert "标题：季度总结" in out.stdout


def test_agent_run_demo_json(db_env):
    """`--json` prints `TurnResult.as_dict()` (session_id, status, reply, checkpoint, observations, evidence, events,
    task_id, node_id)"""
    session = new_session()
    out = agent_run(session, "--model", DEMO_MODEL, "--context", '{"actor_name": "Ada"}', "--json")
    turn = json.loads(out.stdout)
    assert out.exit_code == 0 and set(turn) >= TURN_KEYS
    assert turn["session_id"] == session and turn["status"] == "SUSPENDED"
    assert set(turn["checkpoint"]) == {"type", "question", "expected_fields", "suggestions", "tool"}
    assert turn["checkpoint"]["type"] == "APPROVAL" and turn["checkpoint"]["tool"] == "save_note"
    assert all(set(o) >= OBSERVATION_KEYS for o in turn["observations"])
    codes = [o["code"] for o in turn["observations"]]
    assert "agent_runtime.42221" in codes
    assert all(set(e) == {"id", "tool", "status", "business_ok"} for e in turn["evidence"])
    assert all(e["type"] == "tool" and set(e) == {"type", "tool", "label"} for e in turn["events"])
    assert turn["task_id"] and turn["node_id"]


def test_agent_resume_confirm_done(db_env):
    """skillyard agent resume --session demo --action CONFIRM   # saves the note once, finishes"""
    session = new_session()
    assert agent_run(session, "--model", DEMO_MODEL, "--context", '{"actor_name": "Ada"}').exit_code == 0
    out = invoke("agent", "resume", "--session", session, "--action", "CONFIRM", "--json")
    turn = json.loads(out.stdout)
    assert out.exit_code == 0 and turn["status"] == "DONE" and turn["reply"] == "已保存笔记《季度总结》"
    assert [e["tool"] for e in turn["events"]] == ["save_note"]


def test_agent_resume_action_any_case(db_env):
    """`--action` | required, any case: `CONFIRM`, `REJECT`, `REPLY` or `CANCEL`"""
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL)
    out = invoke("agent", "resume", "--session", session, "--action", "cancel")
    assert out.exit_code == 0 and out.stdout.splitlines()[0] == "status: CANCELLED", out.output


def test_agent_resume_reject(db_env):
    """`REJECT` | task cancelled; the reply names the write that did not run"""
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL)
    out = invoke("agent", "resume", "--session", session, "--action", "Reject", "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["status"] == "CANCELLED"


def test_agent_resume_without_open_node_exit_1(db_env):
    """1 when … the command could not run (… no open node to resume …: the message is printed, no traceback)"""
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL)
    invoke("agent", "resume", "--session", session, "--action", "CANCEL")
    out = invoke("agent", "resume", "--session", session, "--action", "CONFIRM")
    assert out.exit_code == 1 and no_traceback(out) and out.output.strip()


def test_agent_resume_unknown_session_exit_1(db_env):
    """1 when … the command could not run (`AgentError`, …: the message is printed, no traceback)"""
    out = invoke("agent", "resume", "--session", new_session(), "--action", "CONFIRM")
    assert out.exit_code == 1 and no_traceback(out) and out.output.strip()


def test_agent_resume_unknown_action_exit_2():
    """2 for usage errors (missing `--session`, an unknown `--action`, a bad `--context`)."""
    usage_error(invoke("agent", "resume", "--session", "s1", "--action", "APPROVE"))


def test_agent_resume_missing_session_exit_2():
    """2 for usage errors (missing `--session`, …)"""
    usage_error(invoke("agent", "resume", "--action", "CONFIRM"), "--session")


def test_agent_resume_missing_action_exit_2():
    """`--action` | required"""
    usage_error(invoke("agent", "resume", "--session", "s1"), "--action")


def test_agent_run_missing_session_exit_2():
    """`--session ID` | required … 2 for usage errors (missing `--session`, …)"""
    usage_error(invoke("agent", "run", str(NOTES_AGENT), "--message", "hi", "--model", DEMO_MODEL), "--session")


def test_agent_run_missing_message_exit_2():
    """`--message TEXT` | required: the user's message"""
    usage_error(invoke("agent", "run", str(NOTES_AGENT), "--session", "s1", "--model", DEMO_MODEL), "--message")


@pytest.mark.parametrize("context", ["{bad", "[1, 2]", '"text"', "7"])
def test_agent_run_bad_context_exit_2(context):
    """`--context JSON` | … not JSON or not an object is a usage error (exit 2)"""
    out = invoke(
        "agent",
        "run",
        str(NOTES_AGENT),
        "--session",
        "s1",
        "--message",
        "hi",
        "--model",
        DEMO_MODEL,
        "--context",
        context,
    )
    usage_error(out, "--context")


def test_agent_run_missing_agent_dir_exit_2(tmp_path):
    """`AGENT_DIR` | the agent folder; must exist"""
    usage_error(
        invoke("agent", "run", str(tmp_path / "nope"), "--session", "s1", "--message", "hi", "--model", DEMO_MODEL)
    )


def test_agent_run_without_model_exit_1(db_env, monkeypatch):
    """a new session without `--model` fails: no model"""
    monkeypatch.delenv("SKILLYARD_MODEL", raising=False)
    out = agent_run(new_session())
    assert out.exit_code == 1 and no_traceback(out) and "model" in out.output


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "anthropic:claude"])
def test_agent_run_bad_model_spec_exit_1(db_env, spec):
    """1 when … the command could not run (…, a bad model spec, …); Anything else … is rejected with a message listing
    the two forms."""
    out = agent_run(new_session(), "--model", spec)
    assert out.exit_code == 1 and no_traceback(out) and "script:" in out.output and "openai:" in out.output


def test_agent_run_missing_script_file_exit_1(db_env, tmp_path):
    """1 when … the command could not run (… a bad model spec …: the message is printed, no traceback)"""
    out = agent_run(new_session(), "--model", f"script:{tmp_path / 'missing.yaml'}")
    assert out.exit_code == 1 and no_traceback(out) and out.output.strip()


def test_agent_run_script_out_of_turns_exit_1(db_env, tmp_path):
    """1 when … the command could not run (… a scripted model out of turns …: the message is printed, no traceback)"""
    model = write_script(tmp_path, [{"text": "hello there"}])
    session = new_session()
    first = agent_run(session, "--model", model)
    assert first.exit_code == 0 and first.stdout.splitlines()[0] == "status: RUNNING", first.output
    second = agent_run(session, message="and again")
    assert second.exit_code == 1 and no_traceback(second) and second.output.strip()


def test_agent_run_text_reply_is_running(db_env, tmp_path):
    """`status` | `RUNNING` (the model answered with text; send the next message)"""
    model = write_script(tmp_path, [{"text": "a plain answer"}])
    out = agent_run(new_session(), "--model", model, "--json")
    turn = json.loads(out.stdout)
    assert out.exit_code == 0 and turn["status"] == "RUNNING" and turn["reply"] == "a plain answer"
    assert turn["checkpoint"] is None


def test_agent_run_failed_node_exit_1(db_env, tmp_path):
    """Exit codes: 0 when the turn ended (any status but `FAILED`), 1 when the node `FAILED`"""
    model = write_script(
        tmp_path, [{"tool_calls": [{"name": "builtin_node_fail", "arguments": {"reason": "cannot do"}}]}]
    )
    out = agent_run(new_session(), "--model", model, "--json")
    assert (
        out.exit_code == 1
        and json.loads(out.stdout)["status"] == "FAILED"
        and json.loads(out.stdout)["reply"] == "cannot do"
    )


def test_agent_run_follow_up_checkpoint_text(db_env, tmp_path):
    """`checkpoint: TYPE (expects FIELDS)` when suspended"""
    call = {"name": "builtin_node_follow_up", "arguments": {"question": "Which title?", "expectedFields": ["title"]}}
    model = write_script(tmp_path, [{"tool_calls": [call]}])
    out = agent_run(new_session(), "--model", model, message="save a note please")
    assert out.exit_code == 0, out.output
    assert "checkpoint: FOLLOW_UP (expects title)" in out.stdout.splitlines(), out.stdout
    assert "Which title?" in out.stdout


def test_agent_resume_reply_at_follow_up(db_env, tmp_path):
    """`--text TEXT` | the user's answer (needed for `REPLY` at a `FOLLOW_UP`)"""
    call = {"name": "builtin_node_follow_up", "arguments": {"question": "Which title?", "expectedFields": ["title"]}}
    model = write_script(tmp_path, [{"tool_calls": [call]}, {"text": "noted"}])
    session = new_session()
    agent_run(session, "--model", model, message="save a note please")
    out = invoke("agent", "resume", "--session", session, "--action", "REPLY", "--text", "周报", "--json")
    assert (
        out.exit_code == 0
        and json.loads(out.stdout)["status"] == "RUNNING"
        and json.loads(out.stdout)["reply"] == "noted"
    )


def test_agent_resume_reply_without_text_exit_1(db_env, tmp_path):
    """empty text raises `AgentError` … (`AgentError` …: the message is printed, no traceback)"""
    call = {"name": "builtin_node_follow_up", "arguments": {"question": "Which title?", "expectedFields": ["title"]}}
    model = write_script(tmp_path, [{"tool_calls": [call]}, {"text": "noted"}])
    session = new_session()
    agent_run(session, "--model", model, message="save a note please")
    out = invoke("agent", "resume", "--session", session, "--action", "REPLY")
    assert out.exit_code in (1, 2) and no_traceback(out) and out.output.strip()


def test_agent_run_message_while_suspended_is_reply(db_env):
    """A message sent while a node is suspended is its REPLY. … at APPROVAL it drops the gated write"""
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL)
    out = agent_run(session, "--json", message="算了，不保存了")
    assert out.exit_code in (0, 1) and no_traceback(out)


def test_agent_run_unsafe_session_no_traceback(db_env):
    """A session id is checked before anything runs …: `send`/`resume` raise `AgentError`, the CLI exits with the
    message."""
    out = agent_run("../escape", "--model", DEMO_MODEL)
    assert out.exit_code in (1, 2) and no_traceback(out) and "session" in out.output


def test_agent_resume_works_from_another_directory(db_env, tmp_path, monkeypatch):
    """A session stores its agent folder and a `script:` model path as absolute paths, so `agent resume` works from
    any working directory."""
    session = new_session()
    monkeypatch.chdir(REPO)
    relative_model = "script:examples/agents/notes/demo.yaml"
    out = invoke(
        "agent",
        "run",
        "examples/agents/notes",
        "--session",
        session,
        "--message",
        DEMO_MESSAGE,
        "--model",
        relative_model,
    )
    assert out.exit_code == 0, out.output
    monkeypatch.chdir(tmp_path)
    resumed = invoke("agent", "resume", "--session", session, "--action", "CONFIRM", "--json")
    assert resumed.exit_code == 0 and json.loads(resumed.stdout)["status"] == "DONE", resumed.output


def test_agent_session_belongs_to_one_agent(db_env, tmp_path):
    """A session belongs to one agent (another agent's session id raises `AgentError`)."""
    other = tmp_path / "other"
    shutil.copytree(NOTES_AGENT, other)
    text = (other / "AGENT.md").read_text(encoding="utf-8").replace("agent_code: notes", "agent_code: other_notes")
    (other / "AGENT.md").write_text(text, encoding="utf-8")
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL)
    out = agent_run(session, "--model", DEMO_MODEL, agent=other)
    assert out.exit_code == 1 and no_traceback(out) and out.output.strip()


def test_agent_run_skills_dir_missing_no_traceback(db_env, tmp_path):
    """`--skills-dir DIR` | another skill root (repeatable); A `--skills-dir` that does not exist is a usage error."""
    out = agent_run(new_session(), "--model", DEMO_MODEL, "--skills-dir", str(tmp_path / "nope"))
    assert out.exit_code != 0 and no_traceback(out)


def test_agent_run_unknown_skill_key_exit_1(db_env):
    """`--skill KEY` | the contract skill (`skill_key`) a new task runs; … an unknown key raises `AgentError`"""
    out = agent_run(new_session(), "--model", DEMO_MODEL, "--skill", "no.such.key")
    assert out.exit_code == 1 and no_traceback(out) and "no.such.key" in out.output


def test_agent_run_skill_key_given(db_env):
    """`--skill KEY` | the contract skill (`skill_key`) a new task runs; default: the agent's first loaded skill"""
    out = agent_run(new_session(), "--model", DEMO_MODEL, "--skill", "notes.keeper", "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["status"] == "SUSPENDED"


def test_agent_context_merged_into_identity(db_env):
    """`--context JSON` | the caller's identity as a JSON object …, merged into the session's identity"""
    session = new_session()
    agent_run(session, "--model", DEMO_MODEL, "--context", '{"actor_name": "Grace"}')
    turn = json.loads(invoke("agent", "resume", "--session", session, "--action", "CONFIRM", "--json").stdout)
    saved = next(o for o in turn["observations"] if o["tool"] == "save_note")
    assert saved["arguments"]["owner"] == "Grace" and saved["sources"]["owner"] == "PLATFORM"


def test_agent_openai_unreachable_never_shows_key(db_env, monkeypatch):
    """`api_key` … never logged or shown; 1 when … the command could not run (… the message is printed, no traceback)"""
    monkeypatch.setenv("SKILLYARD_MODEL_BASE_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("SKILLYARD_MODEL_API_KEY", "sk-never-print-this-123")
    monkeypatch.setenv("SKILLYARD_MODEL_RETRIES", "0")
    monkeypatch.setenv("SKILLYARD_MODEL_TIMEOUT", "5")
    out = agent_run(new_session(), "--model", "openai:probe-model")
    assert (
        out.exit_code == 1 and no_traceback(out) and "sk-never-print-this-123" not in out.output and out.output.strip()
    )


def test_agent_bad_settings_names_file(db_env, home):
    """A malformed file or value stops with an `AgentSettingsError` naming the file (or variable), the key and the
    fix"""
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 0\n", encoding="utf-8")
    out = agent_run(new_session(), "--model", DEMO_MODEL)
    assert out.exit_code in (1, 2) and no_traceback(out)
    assert "settings.toml" in out.output and "fingerprint_limit" in out.output


def test_agent_settings_api_key_never_echoed(db_env, home):
    """An `api_key` value is never echoed."""
    (home / "settings.toml").write_text('[agent.model]\napi_key = 12345678901\ntimeout = "x"\n', encoding="utf-8")
    out = agent_run(new_session(), "--model", DEMO_MODEL)
    assert no_traceback(out) and "12345678901" not in out.output


def test_agent_run_unreachable_database_no_traceback(monkeypatch):
    """`run` and `resume` keep their state in the platform's database …; the message is printed, no traceback"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:agent-pass-3@127.0.0.1:1/db")
    out = agent_run(new_session(), "--model", DEMO_MODEL)
    assert out.exit_code in (1, 2) and no_traceback(out) and "agent-pass-3" not in out.output


def test_agent_resume_skills_dir_missing_no_traceback(db_env, tmp_path):
    """`--skills-dir DIR` | another skill root (repeatable)"""
    out = invoke(
        "agent", "resume", "--session", new_session(), "--action", "CONFIRM", "--skills-dir", str(tmp_path / "no")
    )
    assert out.exit_code != 0 and no_traceback(out)


def test_agent_run_skills_dir_missing_exit_2(db_env, tmp_path):
    """Commands that search for skills take `--skills-dir DIR` (repeatable). … A `--skills-dir` that does not exist
    is a usage error."""
    usage_error(agent_run(new_session(), "--model", DEMO_MODEL, "--skills-dir", str(tmp_path / "nope")))
