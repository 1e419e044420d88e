"""Agent runtime settings (settings.py): defaults, settings.toml [agent] / [agent.model], environment overrides, bad
values, and what each setting changes in a run."""

from __future__ import annotations

import json
import logging
import os
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.runner import AgentError
from skillyard.agent.settings import (
    DEFAULT_PLATFORM_HIDDEN,
    AgentSettings,
    AgentSettingsError,
    ModelSettings,
    parse_duration,
)
from skillyard.agent.turn import TurnResult
from support.agent import desk as desk_kit
from support.agent import runtime as runtime_kit
from support.agent.desk import APPROVAL_REQUIRED, FINGERPRINT_TRIP, DeskAgent, run_cli
from support.agent.folder import age_checkpoint
from support.agent.memo import IDENTITY, MemoAgent, changed, last, run_builtin, send_once
from support.agent.probes import call, codes, needs_db, no_traceback, say, skillyard_cli
from support.agent.runtime import calls, make_agent, script, tool


def _passport_contract(c: dict[str, Any]) -> None:
    c["tools"]["pickTool"]["args"]["d"] = {"from": "platform.passportId", "required": False}


async def send_once_desk(env: DeskAgent, message: str, *turns: dict[str, Any], session: str = "once") -> TurnResult:
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        return await agent.send(env.sid(session), message, identity=desk_kit.IDENTITY)


def write_settings(home: Path, text: str) -> Path:
    path = home / "settings.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("file", "environ", "age_minutes", "runs"),
    [
        ('reconfirm_after = "1h"', None, 70, False),
        ('reconfirm_after = "1h"', None, 50, True),
        ('reconfirm_after = "1h"', "90m", 70, True),  # the environment wins over the file
        ("reconfirm_after = 600", None, 11, False),  # seconds
    ],
    ids=["file-expired", "file-fresh", "env-wins", "seconds"],
)
@needs_db
async def test_reconfirm_after_from_the_settings(
    memo_agent: MemoAgent,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    file: str,
    environ: str | None,
    age_minutes: int,
    runs: bool,
):
    (home / "settings.toml").write_text(f"[agent]\n{file}\n", encoding="utf-8")
    if environ:
        monkeypatch.setenv("SKILLYARD_AGENT_RECONFIRM_AFTER", environ)
    script = memo_agent.script(
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "发了"}),
    )
    session = memo_agent.sid("re")
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        await agent.send(session, "发备忘：开会", identity=IDENTITY)
    await age_checkpoint(session, age_minutes * 60)
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        turn = await agent.resume(session, "CONFIRM")
    if runs:
        assert turn.status == "DONE" and len(memo_agent.calls("sendMemo")) == 1
    else:
        assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "APPROVAL"
        assert memo_agent.calls() == []


@needs_db
async def test_write_confirm_bypass_tools_from_the_settings_file(memo_agent: MemoAgent, home: Path, monkeypatch):
    monkeypatch.delenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS")
    (home / "settings.toml").write_text('[agent]\nwrite_confirm_bypass_tools = ["quickWrite"]\n', encoding="utf-8")
    turn = await run_builtin(memo_agent, "quickWrite", {"q": "x"})
    assert last(turn).ok and len(memo_agent.calls("quickWrite")) == 1


@needs_db
async def test_fingerprint_limit_from_the_environment(memo_agent: MemoAgent, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "1")
    same = call("findNotes", {"q": "a"})
    turn = await send_once(memo_agent, "找", same, same, say("never"))
    assert codes(turn) == [None, "agent_runtime.40026"] and turn.status == "FAILED"


@needs_db
async def test_an_empty_platform_hidden_opens_every_field(memo_agent: MemoAgent, home: Path):
    (home / "settings.toml").write_text("[agent]\nplatform_hidden = []\n", encoding="utf-8")
    memo_agent.contract(changed(_passport_contract))
    script = memo_agent.script(call("pickTool", {}), say("ok"))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        assert agent.loaded.errors == []
        turn = await agent.send(memo_agent.sid("open"), "x", identity={**IDENTITY, "passport_id": "P-1"})
    assert turn.observations[0].sources["d"] == "PLATFORM"
    assert memo_agent.calls("pickTool")[0]["input"]["d"] == "P-1"
    check = skillyard_cli("agent", "check", str(memo_agent.dir), "--json")
    assert check.returncode == 0, check.stdout
    assert not [r for r in json.loads(check.stdout) if r["rule"] == "§16.10"]


@needs_db
async def test_skillyard_model_environment_variable_is_the_default_model(memo_agent: MemoAgent, monkeypatch):
    monkeypatch.setenv("SKILLYARD_MODEL", memo_agent.script(say("环境里的模型")))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir)
        turn = await agent.send(memo_agent.sid("envm"), "hi", identity=IDENTITY)
    assert turn.reply == "环境里的模型"


@needs_db
async def test_an_unknown_agent_setting_is_only_a_warning(memo_agent: MemoAgent, home: Path):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limt = 2\n", encoding="utf-8")
    turn = await send_once(memo_agent, "x", say("ok"))
    assert turn.reply == "ok"


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[agent]\nfingerprint_limit = -1\n", "fingerprint_limit"),
        ('[agent]\nreconfirm_after = "soon"\n', "reconfirm_after"),
        ("[agent]\ndelegate_max_depth = -1\n", "delegate_max_depth"),
        ("[agent]\nplatform_hidden = 5\n", "platform_hidden"),
        ("[agent]\nwrite_confirm_bypass_tools = 3\n", "write_confirm_bypass_tools"),
        ('[agent.model]\nbase_url = "ftp://example.invalid"\n', "base_url"),
        ("[agent.model]\ntimeout = 0\n", "timeout"),
    ],
    ids=lambda v: v if "=" not in str(v) else str(v).split("\n")[1].split("=")[0].strip(),
)
async def test_settings_bad_file_value_stops_yard_agent_naming_file_and_key(
    desk_agent: DeskAgent, home: Path, toml: str, key: str
):
    (home / "settings.toml").write_text(toml, encoding="utf-8")
    async with SkillYard() as yard:
        with pytest.raises(AgentSettingsError) as info:
            await yard.agent(desk_agent.dir, model=desk_agent.script(say("x")))
    assert key in str(info.value) and "settings.toml" in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("toml", "variable"),
    [
        ("[agent]\nreconfirm_after = inf\n", None),
        ("[agent]\nreconfirm_after = nan\n", None),
        pytest.param(
            '[agent]\nreconfirm_after = "99999999999d"\n',
            None,
        ),
        ("", "inf"),
        ("", "nan"),
    ],
    ids=["file-inf", "file-nan", "file-huge", "env-inf", "env-nan"],
)
async def test_settings_a_non_finite_or_huge_reconfirm_after_is_a_clear_error(
    desk_agent: DeskAgent, home: Path, monkeypatch: pytest.MonkeyPatch, toml: str, variable: str | None
):
    if toml:
        (home / "settings.toml").write_text(toml, encoding="utf-8")
    if variable:
        monkeypatch.setenv("SKILLYARD_AGENT_RECONFIRM_AFTER", variable)
    async with SkillYard() as yard:
        with pytest.raises(AgentSettingsError) as info:
            await yard.agent(desk_agent.dir, model=desk_agent.script(say("x")))
    assert ("SKILLYARD_AGENT_RECONFIRM_AFTER" if variable else "reconfirm_after") in str(info.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "-2"),
        ("SKILLYARD_AGENT_RECONFIRM_AFTER", "soon"),
        ("SKILLYARD_AGENT_DELEGATE_MAX_DEPTH", "two"),
        pytest.param(
            "SKILLYARD_AGENT_RECONFIRM_AFTER",
            "99999999999d",
        ),
        ("SKILLYARD_MODEL_TIMEOUT", "abc"),
    ],
)
@needs_db
def test_settings_bad_environment_value_is_a_clean_cli_error_naming_the_variable(
    desk_agent: DeskAgent, name: str, value: str
):
    result = run_cli(desk_agent, "badenv", "x", "--model", desk_agent.script(say("x")), extra_env={name: value})
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert name in result.stderr, result.stderr
    assert desk_agent.calls() == []


@needs_db
def test_settings_invalid_toml_is_a_clean_cli_error_with_the_line(desk_agent: DeskAgent, home: Path):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 3\nreconfirm_after = \n", encoding="utf-8")
    result = run_cli(desk_agent, "badtoml", "x", "--model", desk_agent.script(say("x")))
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert "settings.toml" in result.stderr and "line 3" in result.stderr, result.stderr


@needs_db
def test_settings_bad_value_also_stops_resume_cleanly(desk_agent: DeskAgent, home: Path):
    model = desk_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
    )
    first = run_cli(desk_agent, "resbad", "保存季度总结", "--model", model, "--context", json.dumps(desk_kit.IDENTITY))
    assert first.returncode == 0, first.stderr
    (Path(os.environ["SKILLYARD_HOME"]) / "settings.toml").write_text('[agent]\nreconfirm_after = "soon"\n')
    result = skillyard_cli("agent", "resume", "--session", desk_agent.sid("resbad"), "--action", "CONFIRM")
    assert result.returncode == 1 and no_traceback(result) and "reconfirm_after" in result.stderr, result.stderr
    assert desk_agent.calls() == []


@needs_db
async def test_settings_environment_fingerprint_limit_beats_the_file(desk_agent: DeskAgent, home: Path, monkeypatch):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 5\n", encoding="utf-8")
    monkeypatch.setenv("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "1")
    same = call("findNotes", {"q": "a"})
    turn = await send_once_desk(desk_agent, "找", same, same, say("never"))
    assert codes(turn) == [None, FINGERPRINT_TRIP] and turn.status == "FAILED"


@needs_db
async def test_settings_an_empty_environment_variable_leaves_the_file_value(
    desk_agent: DeskAgent, home: Path, monkeypatch
):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 1\n", encoding="utf-8")
    monkeypatch.setenv("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "")
    same = call("findNotes", {"q": "a"})
    turn = await send_once_desk(desk_agent, "找", same, same, say("never"))
    assert codes(turn) == [None, FINGERPRINT_TRIP]


@needs_db
async def test_settings_fingerprint_limit_in_the_file_allows_that_many_identical_calls(
    desk_agent: DeskAgent, home: Path
):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 5\n", encoding="utf-8")
    same = call("findNotes", {"q": "a"})
    turn = await send_once_desk(desk_agent, "找", *[same] * 6, say("never"))
    assert codes(turn) == [None] * 5 + [FINGERPRINT_TRIP] and len(desk_agent.calls()) == 5


@needs_db
async def test_settings_bypass_tools_from_the_environment_are_comma_separated(desk_agent: DeskAgent, monkeypatch):
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "otherTool, quickWrite")
    turn = await send_once_desk(desk_agent, "写", call("quickWrite", {"q": "x"}), say("ok"))
    assert codes(turn) == [None] and len(desk_agent.calls("quickWrite")) == 1


@needs_db
async def test_settings_without_the_bypass_setting_a_confirm_false_write_needs_approval(desk_agent: DeskAgent):
    turn = await send_once_desk(desk_agent, "写", call("quickWrite", {"q": "x"}), say("ok"))
    assert codes(turn) == [APPROVAL_REQUIRED] and desk_agent.calls() == []


@needs_db
async def test_settings_platform_hidden_from_the_environment_opens_passport_id(desk_agent: DeskAgent, monkeypatch):
    monkeypatch.setenv("SKILLYARD_AGENT_PLATFORM_HIDDEN", "clientId,sessionType")
    desk_agent.contract(
        desk_kit.changed(lambda c: c["tools"]["pickTool"]["args"].update(d={"from": "platform.passportId"}))
    )
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=desk_agent.script(call("pickTool", {"a": "x"}), say("ok")))
        assert agent.loaded.errors == []
        turn = await agent.send(desk_agent.sid("pp"), "挑", identity={**desk_kit.IDENTITY, "passport_id": "P-9"})
    assert turn.observations[0].sources["d"] == "PLATFORM"
    assert desk_agent.calls("pickTool")[0]["input"]["d"] == "P-9"


@needs_db
async def test_settings_by_default_a_hidden_field_fails_the_skill_at_load(desk_agent: DeskAgent):
    desk_agent.contract(
        desk_kit.changed(lambda c: c["tools"]["pickTool"]["args"].update(d={"from": "platform.passportId"}))
    )
    async with SkillYard() as yard:
        with pytest.raises(AgentError):
            await yard.agent(desk_agent.dir, model=desk_agent.script(say("x")))


def test_settings_platform_hidden_can_close_an_open_field(desk_agent: DeskAgent):
    result = skillyard_cli(
        "agent", "check", str(desk_agent.dir), "--json", extra_env={"SKILLYARD_AGENT_PLATFORM_HIDDEN": "userId"}
    )
    assert result.returncode == 1, result.stdout + result.stderr
    rows = json.loads(result.stdout)
    assert any(r["rule"] == "§16.10" and "owner" in r["path"] for r in rows), rows


@needs_db
def test_settings_model_spec_in_the_file_is_the_default_model(desk_agent: DeskAgent, home: Path):
    model = desk_agent.script(say("文件里的模型"))
    (home / "settings.toml").write_text(f"[agent.model]\nspec = {json.dumps(model)}\n", encoding="utf-8")
    result = run_cli(desk_agent, "specfile", "x", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "文件里的模型"


@needs_db
def test_settings_skillyard_model_beats_the_file_spec(desk_agent: DeskAgent, home: Path):
    (home / "settings.toml").write_text(
        f"[agent.model]\nspec = {json.dumps(desk_agent.script(say('文件')))}\n", encoding="utf-8"
    )
    result = run_cli(
        desk_agent, "specenv", "x", "--json", extra_env={"SKILLYARD_MODEL": desk_agent.script(say("环境"))}
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "环境"


@needs_db
def test_settings_an_api_key_of_the_wrong_type_is_never_echoed_by_the_cli(desk_agent: DeskAgent, home: Path):
    (home / "settings.toml").write_text("[agent.model]\napi_key = 123456789987654321\n", encoding="utf-8")
    result = run_cli(desk_agent, "keytype", "x", "--model", desk_agent.script(say("x")))
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert "api_key" in result.stderr and "123456789987654321" not in result.stdout + result.stderr


@needs_db
async def test_default_model_comes_from_the_settings(tmp_path: Path, home: Path) -> None:
    agent_dir = make_agent(tmp_path, tmp_path / "calls.jsonl")
    async with SkillYard() as yard:
        with pytest.raises(AgentError, match="no model"):
            await yard.agent(agent_dir)
    spec = script(tmp_path / "turns.yaml", {"text": "你好"})
    (home / "settings.toml").write_text(f'[agent.model]\nspec = "{spec}"\n', encoding="utf-8")
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir)
        turn = await agent.send("s-default-model", "hi", identity=runtime_kit.IDENTITY)
    assert turn.reply == "你好"


@needs_db
async def test_platform_hidden_closes_and_opens_fields(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    contract_file = agent_dir / "skills" / "keeper" / "contract.json"
    contract = json.loads(contract_file.read_text(encoding="utf-8"))
    contract["tools"]["saveNote"]["args"]["owner"] = {"from": "platform.passportId", "label": "Owner"}
    contract_file.write_text(json.dumps(contract), encoding="utf-8")
    async with SkillYard() as yard:
        with pytest.raises(AgentError) as closed:
            await yard.agent(agent_dir, model="script:x.yaml")
    assert "passportId" in str(closed.value) and "§16.10" in str(closed.value)

    monkeypatch.setenv("SKILLYARD_AGENT_PLATFORM_HIDDEN", "clientId")  # passportId no longer hidden
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="季度总结"),
        tool("builtin_node_approval", summary="保存", toolName="saveNote"),
        tool("builtin_node_finish", output="ok"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        asked = await agent.send("s-hidden", "保存季度总结", identity={**runtime_kit.IDENTITY, "passport_id": "P-9"})
        assert asked.observations[0].sources["owner"] == "PLATFORM"
        await agent.resume("s-hidden", "CONFIRM")
    assert calls(log)[0]["title"] == "季度总结"


def test_defaults_without_a_settings_file(home: Path) -> None:
    settings = AgentSettings.load(home, environ={})
    assert settings.write_confirm_bypass_tools == frozenset()
    assert settings.reconfirm_after == timedelta(hours=24)
    assert settings.delegate_max_depth == 2
    assert settings.fingerprint_limit == 3
    assert settings.platform_hidden == {"passportId", "clientId", "sessionType", "adminUser", "adminCompany"}
    assert settings.model == ModelSettings(base_url="https://api.openai.com/v1", api_key=None, timeout=60.0, retries=2)
    assert AgentSettings() == settings


def test_home_defaults_to_skillyard_home_from_the_environment(home: Path) -> None:
    write_settings(home, "[agent]\nfingerprint_limit = 7\n")
    assert AgentSettings.load(environ={"SKILLYARD_HOME": str(home)}).fingerprint_limit == 7
    assert AgentSettings.load().fingerprint_limit == 7  # conftest sets SKILLYARD_HOME in os.environ


def test_values_from_settings_toml(home: Path) -> None:
    write_settings(
        home,
        """
        [agent]
        write_confirm_bypass_tools = ["notes_write", "todo_add"]
        reconfirm_after = "90m"
        delegate_max_depth = 0
        fingerprint_limit = 5
        platform_hidden = ["tenantId"]

        [agent.model]
        base_url = "http://127.0.0.1:8000/v1/"
        api_key = "file-key"
        timeout = 12.5
        retries = 0
        """,
    )
    settings = AgentSettings.load(home, environ={})
    assert settings.write_confirm_bypass_tools == {"notes_write", "todo_add"}
    assert settings.reconfirm_after == timedelta(minutes=90)
    assert settings.delegate_max_depth == 0
    assert settings.fingerprint_limit == 5
    assert settings.platform_hidden == {"tenantId"}
    assert settings.model == ModelSettings("http://127.0.0.1:8000/v1", "file-key", 12.5, 0)


def test_environment_overrides_win(home: Path) -> None:
    write_settings(
        home,
        """
        [agent]
        write_confirm_bypass_tools = ["notes_write"]
        reconfirm_after = 60
        delegate_max_depth = 1
        fingerprint_limit = 5
        platform_hidden = ["tenantId"]
        [agent.model]
        base_url = "http://127.0.0.1:8000/v1"
        api_key = "file-key"
        timeout = 12
        retries = 1
        """,
    )
    env = {
        "SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS": " a_write, b_write ,,",
        "SKILLYARD_AGENT_RECONFIRM_AFTER": "1d",
        "SKILLYARD_AGENT_DELEGATE_MAX_DEPTH": "4",
        "SKILLYARD_AGENT_FINGERPRINT_LIMIT": "9",
        "SKILLYARD_AGENT_PLATFORM_HIDDEN": "userId,orgId",
        "SKILLYARD_MODEL_BASE_URL": "http://127.0.0.1:9000/v1",
        "SKILLYARD_MODEL_API_KEY": "env-key",
        "SKILLYARD_MODEL_TIMEOUT": "3",
        "SKILLYARD_MODEL_RETRIES": "5",
        "OPENAI_API_KEY": "openai-key",
    }
    settings = AgentSettings.load(home, environ=env)
    assert settings.write_confirm_bypass_tools == {"a_write", "b_write"}
    assert settings.reconfirm_after == timedelta(days=1)
    assert settings.delegate_max_depth == 4
    assert settings.fingerprint_limit == 9
    assert settings.platform_hidden == {"userId", "orgId"}
    assert settings.model == ModelSettings("http://127.0.0.1:9000/v1", "env-key", 3.0, 5)


def test_empty_environment_variables_count_as_unset(home: Path) -> None:
    env = {"SKILLYARD_AGENT_FINGERPRINT_LIMIT": "", "SKILLYARD_AGENT_PLATFORM_HIDDEN": "  "}
    settings = AgentSettings.load(home, environ=env)
    assert settings.fingerprint_limit == 3
    assert settings.platform_hidden == DEFAULT_PLATFORM_HIDDEN


def test_api_key_precedence_and_openai_fallbacks(home: Path) -> None:
    assert AgentSettings.load(home, environ={"OPENAI_API_KEY": "o"}).model.api_key == "o"
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:7/v1"}
    assert AgentSettings.load(home, environ=env).model.base_url == "http://127.0.0.1:7/v1"
    write_settings(home, '[agent.model]\napi_key = "f"\nbase_url = "http://127.0.0.1:8/v1"\n')
    # the file beats the generic OPENAI_* variables, SKILLYARD_MODEL_* beats the file
    both = {"OPENAI_API_KEY": "o", "OPENAI_BASE_URL": "http://127.0.0.1:7/v1"}
    assert AgentSettings.load(home, environ=both).model.api_key == "f"
    assert AgentSettings.load(home, environ=both).model.base_url == "http://127.0.0.1:8/v1"
    assert AgentSettings.load(home, environ={**both, "SKILLYARD_MODEL_API_KEY": "s"}).model.api_key == "s"


def test_api_key_is_not_in_repr(home: Path) -> None:
    write_settings(home, '[agent.model]\napi_key = "sk-very-secret"\n')
    settings = AgentSettings.load(home, environ={})
    assert settings.model.api_key == "sk-very-secret"
    assert "sk-very-secret" not in repr(settings)
    assert "sk-very-secret" not in repr(settings.model)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("24h", timedelta(hours=24)),
        ("90m", timedelta(minutes=90)),
        ("30s", timedelta(seconds=30)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(minutes=90)),
        (" 2H ", timedelta(hours=2)),
        ("45", timedelta(seconds=45)),
        ("1.5", timedelta(seconds=1.5)),
        (3600, timedelta(hours=1)),
        (0, timedelta(0)),
    ],
)
def test_parse_duration(value: str | int, expected: timedelta) -> None:
    assert parse_duration(value) == expected


@pytest.mark.parametrize("value", ["", "soon", "24x", "h", "-5", "1h-3m", "24h junk", "nan", "inf"])
def test_parse_duration_rejects(value: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[agent]\nreconfirm_after = "tomorrow"\n', "reconfirm_after"),
        ("[agent]\nreconfirm_after = true\n", "reconfirm_after"),
        ('[agent]\nfingerprint_limit = "3"\n', "fingerprint_limit"),
        ("[agent]\nfingerprint_limit = 0\n", "fingerprint_limit"),
        ("[agent]\ndelegate_max_depth = -1\n", "delegate_max_depth"),
        ("[agent]\ndelegate_max_depth = true\n", "delegate_max_depth"),
        ("[agent]\ndelegate_max_depth = 1.5\n", "delegate_max_depth"),
        ('[agent]\nwrite_confirm_bypass_tools = "notes_write"\n', "write_confirm_bypass_tools"),
        ("[agent]\nplatform_hidden = [1, 2]\n", "platform_hidden"),
        ('[agent.model]\nbase_url = "127.0.0.1:8000"\n', "base_url"),
        ("[agent.model]\ntimeout = 0\n", "timeout"),
        ('[agent.model]\ntimeout = "slow"\n', "timeout"),
        ("[agent.model]\nretries = -1\n", "retries"),
    ],
)
def test_bad_toml_values_name_file_key_and_fix(home: Path, toml: str, key: str) -> None:
    path = write_settings(home, toml)
    with pytest.raises(AgentSettingsError) as info:
        AgentSettings.load(home, environ={})
    message = str(info.value)
    assert str(path) in message
    assert f"] {key} = " in message
    assert "e.g." in message


def test_bad_api_key_type_does_not_echo_the_value(home: Path) -> None:
    write_settings(home, "[agent.model]\napi_key = 12345678\n")
    with pytest.raises(AgentSettingsError) as info:
        AgentSettings.load(home, environ={})
    assert "12345678" not in str(info.value)
    assert "api_key" in str(info.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[agent\nfingerprint_limit = 3\n", "invalid TOML"),
        ('agent = "yes"\n', "[agent] header"),
        ('[agent]\nmodel = "gpt"\n', "[agent.model] header"),
    ],
)
def test_malformed_settings_file(home: Path, text: str, fragment: str) -> None:
    path = write_settings(home, text)
    with pytest.raises(AgentSettingsError) as info:
        AgentSettings.load(home, environ={})
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


def test_non_utf8_settings_file(home: Path) -> None:
    (home / "settings.toml").write_bytes(b"[agent]\nx = '\xff'\n")
    with pytest.raises(AgentSettingsError, match="UTF-8"):
        AgentSettings.load(home, environ={})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "three"),
        ("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "0"),
        ("SKILLYARD_AGENT_DELEGATE_MAX_DEPTH", "-1"),
        ("SKILLYARD_AGENT_RECONFIRM_AFTER", "a while"),
        ("SKILLYARD_MODEL_TIMEOUT", "0"),
        ("SKILLYARD_MODEL_TIMEOUT", "fast"),
        ("SKILLYARD_MODEL_RETRIES", "x"),
        ("SKILLYARD_MODEL_BASE_URL", "localhost:8000"),
    ],
)
def test_bad_environment_values_name_the_variable_and_fix(home: Path, name: str, value: str) -> None:
    with pytest.raises(AgentSettingsError) as info:
        AgentSettings.load(home, environ={name: value})
    message = str(info.value)
    assert f"{name}={value!r}" in message
    assert "e.g." in message


def test_unknown_keys_are_ignored_with_a_warning(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_settings(
        home,
        """
        [agent]
        fingerprint_limt = 9
        fingerprint_limit = 4
        [agent.model]
        temperature = 0.2
        [server]
        port = 1
        """,
    )
    with caplog.at_level(logging.WARNING, logger="skillyard.agent.settings"):
        settings = AgentSettings.load(home, environ={})
    assert settings.fingerprint_limit == 4
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(path) in w and "[agent] fingerprint_limt" in w for w in warnings)
    assert any("[agent.model] temperature" in w for w in warnings)
    assert not any("server" in w for w in warnings)  # other sections belong to other parts of skillyard
