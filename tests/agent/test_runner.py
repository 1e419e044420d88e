"""The ReAct node runner and the agent API (runner.py): turns, text replies, the step budget, restarts, bad arguments
of send / resume / resume_session, the model driving the loop."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillyard import SkillYard
from skillyard.agent.models import ModelError, ScriptExhausted
from skillyard.agent.runner import STEP_BUDGET, AgentError, resume_session
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult
from skillyard.errors import SkillyardError
from support.agent import desk as desk_kit
from support.agent import keeper as keeper_kit
from support.agent import memo as memo_kit
from support.agent import runtime as runtime_kit
from support.agent.desk import (
    API_KEY,
    APPROVAL_REQUIRED,
    DeskAgent,
    completion,
    openai_env,
    run_cli,
    tool_calls_message,
)
from support.agent.keeper import CONTRACT, KeeperAgent, Recorder
from support.agent.memo import MemoAgent, changed
from support.agent.notes import IDENTITY, NotesAgent, open_node, send_once
from support.agent.probes import call, calls, codes, needs_db, no_traceback, say, skillyard_cli
from support.agent.runtime import make_agent, script, tool


async def _suspend_at_approval(env: DeskAgent, session: str, *after: dict[str, Any]) -> str:
    model = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        *after,
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.send(session, "保存季度总结", identity=desk_kit.IDENTITY)
    assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "APPROVAL", turn
    return model


@needs_db
async def test_step_budget_fails_a_runaway_node(notes_agent: NotesAgent):
    turns = [call("findNotes", {"q": f"q{n}"}) for n in range(STEP_BUDGET + 1)]
    result = await send_once(notes_agent, "找笔记", *turns)
    assert result.status == "FAILED" and str(STEP_BUDGET) in (result.reply or "")
    assert len(result.observations) == STEP_BUDGET and len(notes_agent.calls("findNotes")) == STEP_BUDGET


@needs_db
async def test_text_keeps_the_node_open_across_messages(notes_agent: NotesAgent):
    script = notes_agent.script(say("要找什么？"), call("findNotes", {"q": "周报"}), say("找到了两篇"))
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        first = await agent.send(notes_agent.sid("open"), "找笔记", identity=IDENTITY)
        assert first.status == "RUNNING" and first.reply == "要找什么？" and first.observations == []
        assert await open_node(yard, notes_agent.sid("open")) == first.node_id
        second = await agent.send(notes_agent.sid("open"), "周报", identity=IDENTITY)
    assert second.status == "RUNNING" and second.node_id == first.node_id and second.reply == "找到了两篇"
    assert second.observations[0].ok and len(notes_agent.calls("findNotes")) == 1


@pytest.mark.spec("§17")
@needs_db
async def test_calls_after_a_checkpoint_in_the_same_reply_carry_a_code_and_next_step(keeper_agent: KeeperAgent):
    """Every observation the model sees carries a §17 code and a next step (the refused, not-run call too)."""
    result = await keeper_kit.send_once(
        keeper_agent,
        "帮我存个笔记",
        calls(
            ("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
            ("findNotes", {"q": "x"}),
        ),
    )
    assert result.status == "SUSPENDED"
    skipped = result.observations[1]
    assert not skipped.ok and keeper_agent.calls() == []
    assert (skipped.code or "").startswith("agent_runtime."), skipped
    assert skipped.next_step, skipped


@needs_db
async def test_calls_after_a_fingerprint_trip_in_the_same_reply_carry_a_code(keeper_agent: KeeperAgent):
    same = ("findNotes", {"q": "周报"})
    result = await keeper_kit.send_once(
        keeper_agent, "找周报", call(*same), call(*same), call(*same), calls(same, ("lookupOwner", {}))
    )
    assert codes(result)[3] == "agent_runtime.40026" and result.status == "FAILED"
    after = result.observations[4]
    assert not after.ok and (after.code or "").startswith("agent_runtime.") and after.next_step, after


@needs_db
async def test_the_core_failure_budget_does_not_apply_in_the_contract_runtime(keeper_agent: KeeperAgent):
    turns = [call("findNotes", {"q": f"q{n}", "mode": "io"}) for n in range(5)]
    turns += [call("findNotes", {"q": "same", "mode": "boom"})] * 3
    result = await keeper_kit.send_once(keeper_agent, "找", *turns, say("都失败了"))
    assert codes(result) == ["agent_runtime.40018"] * 5 + ["agent_runtime.40029"] * 3
    assert len(keeper_agent.calls("findNotes")) == 8


@needs_db
async def test_every_refusal_has_a_full_code_and_a_next_step(keeper_agent: KeeperAgent):
    result = await keeper_kit.send_once(
        keeper_agent,
        "保存季度总结",
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "x", "toolName": "sendMemo"}),
        call("builtin_output_set", {"key": "userId", "value": 1, "sourceType": "USER", "sourceRef": "u"}),
        call("builtin_node_finish", {"output": "x"}),
        call("findNotes", '{"q":'),
        say("stop"),
    )
    assert all(not o.ok for o in result.observations)
    for o in result.observations:
        assert o.code and o.code.startswith("agent_runtime.") and len(o.code) == len("agent_runtime.40000"), o
        assert o.next_step, o


@needs_db
async def test_inputs_bind_at_node_start_and_feed_from_inputs(keeper_agent: KeeperAgent):
    contract = json.loads(json.dumps(CONTRACT))
    contract["inputs"] = {
        "topic": {"from": "session.category"},
        "lastNote": {"from": "prior.note"},
        "absent": {"from": "session.nothing"},
    }
    contract["tools"]["findNotes"]["args"]["q"] = {"from": "inputs.topic", "sources": ["MODEL"]}
    keeper_agent.contract(contract)
    model = Recorder(
        keeper_agent.script(
            call("builtin_output_set", {"key": "category", "value": "工作", "sourceType": "USER", "sourceRef": "m"}),
            call("stampNote", {"title": "x"}),
            call("builtin_node_finish", {"output": "记住了"}),
            call("findNotes", {"q": "模型的"}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=model)
        assert (await agent.send(keeper_agent.sid("inp"), "分类用工作", identity=keeper_kit.IDENTITY)).status == "DONE"
        later = await agent.send(keeper_agent.sid("inp"), "找笔记", identity=keeper_kit.IDENTITY)
    assert later.observations[0].ok and later.observations[0].sources["q"] == "NODE_OUTPUT"
    assert keeper_agent.calls("findNotes")[0]["input"]["q"] == "工作"
    system = model.seen[-2][0][0]["content"]
    assert "topic" in system and "工作" in system and "absent" in system and "MISSING" in system


@pytest.mark.parametrize(
    ("command", "needle"),
    [(["check"], "fingerprint_limit"), (["run", "--session", "s-bad", "--message", "x"], "fingerprint_limit")],
    ids=["check", "run"],
)
@needs_db
def test_a_bad_setting_is_a_clean_error_naming_the_key(
    memo_agent: MemoAgent, home: Path, command: list[str], needle: str
):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 0\n", encoding="utf-8")
    args = ["agent", command[0], str(memo_agent.dir), *command[1:]]
    if command[0] == "run":
        args += ["--model", memo_agent.script(say("x"))]
    result = skillyard_cli(*args)
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert needle in result.stderr + result.stdout


@needs_db
async def test_identity_is_merged_across_sends(memo_agent: MemoAgent):
    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["pickTool"]["args"]["a"] = {"from": "platform.userId", "required": False}
        c["tools"]["pickTool"]["args"]["b"] = {"from": "platform.organId", "required": False}

    memo_agent.contract(changed(mutate))
    script = memo_agent.script(say("一"), call("pickTool", {}), say("二"))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        await agent.send(memo_agent.sid("merge"), "一", identity=memo_kit.IDENTITY)
        await agent.send(memo_agent.sid("merge"), "二", identity={"org_id": "8"})
    assert (
        memo_agent.calls("pickTool")[0]["input"]["a"] == "42" and memo_agent.calls("pickTool")[0]["input"]["b"] == "8"
    )


@needs_db
async def test_resume_without_a_checkpoint_raises(memo_agent: MemoAgent):
    script = memo_agent.script(say("还在想"))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        await agent.send(memo_agent.sid("norun"), "x", identity=memo_kit.IDENTITY)
        with pytest.raises(AgentError):
            await agent.resume(memo_agent.sid("norun"), "CONFIRM")
        with pytest.raises(AgentError):
            await agent.resume(memo_agent.sid("nothing-here"), "CONFIRM")
        with pytest.raises(AgentError):
            await agent.resume(memo_agent.sid("norun"), "APPROVE")


@needs_db
async def test_runner_a_model_http_error_is_a_model_error_and_runs_nothing(desk_agent: DeskAgent, chat, monkeypatch):
    plan, url = chat
    for k, v in openai_env(url).items():
        monkeypatch.setenv(k, v)
    plan.actions = [(500, {"error": {"message": "engine down"}})]
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model="openai:probe")
        with pytest.raises(ModelError) as info:
            await agent.send(desk_agent.sid("m500"), "找周报", identity=desk_kit.IDENTITY)
    assert "HTTP 500" in str(info.value) and API_KEY not in str(info.value)
    assert len(plan.seen) == 1 and desk_agent.calls() == []


@needs_db
async def test_runner_a_model_error_after_a_tool_ran_never_runs_the_tool_again(
    desk_agent: DeskAgent, chat, monkeypatch
):
    """Models: retry only for transport errors before any tool runs. The read ran once; the failing model call is
    not retried; the next message continues the node with the tool result in the conversation, and the tool is
    not run again."""
    plan, url = chat
    for k, v in openai_env(url).items():
        monkeypatch.setenv(k, v)
    plan.actions = [
        (200, completion(tool_calls_message(("c-1", "findNotes", '{"q": "周报"}')))),
        (500, {"error": {"message": "engine down"}}),
        (200, completion({"role": "assistant", "content": "找到一篇。"})),
    ]
    session = desk_agent.sid("after-tool")
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model="openai:probe")
        with pytest.raises(ModelError):
            await agent.send(session, "找周报", identity=desk_kit.IDENTITY)
    assert len(plan.seen) == 2 and len(desk_agent.calls("findNotes")) == 1
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model="openai:probe")
        turn = await agent.send(session, "然后呢？", identity=desk_kit.IDENTITY)
    assert turn.reply == "找到一篇。"
    assert len(desk_agent.calls("findNotes")) == 1
    messages = plan.seen[2]["body"]["messages"]
    assert any(m.get("role") == "tool" and m.get("tool_call_id") == "c-1" for m in messages), messages
    assert [m["content"] for m in messages if m["role"] == "user"][-1] == "然后呢？"


@needs_db
async def test_runner_a_read_timeout_after_a_tool_ran_is_not_retried(desk_agent: DeskAgent, chat, monkeypatch):
    plan, url = chat
    for k, v in openai_env(url, SKILLYARD_MODEL_TIMEOUT="0.3", SKILLYARD_MODEL_RETRIES="3").items():
        monkeypatch.setenv(k, v)
    plan.actions = [
        (200, completion(tool_calls_message(("c-1", "findNotes", '{"q": "周报"}')))),
        ("sleep", 1.0, completion({"content": "late"})),
    ]
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model="openai:probe")
        with pytest.raises(ModelError) as info:
            await agent.send(desk_agent.sid("slow"), "找周报", identity=desk_kit.IDENTITY)
    assert "timed out" in str(info.value) and "SKILLYARD_MODEL_TIMEOUT" in str(info.value)
    assert len(plan.seen) == 2 and len(desk_agent.calls("findNotes")) == 1


@needs_db
async def test_runner_keeps_the_key_out_of_logs_turns_and_the_stored_session(
    desk_agent: DeskAgent, chat, monkeypatch, caplog
):
    plan, url = chat
    for k, v in openai_env(url).items():
        monkeypatch.setenv(k, v)
    plan.actions = [
        (200, completion(tool_calls_message(("c-1", "findNotes", '{"q": "周报"}')))),
        (200, completion({"content": "找到。"})),
    ]
    session = desk_agent.sid("nokey")
    with caplog.at_level(logging.DEBUG):
        async with SkillYard() as yard:
            agent = await yard.agent(desk_agent.dir, model="openai:probe")
            turn = await agent.send(session, "找周报", identity=desk_kit.IDENTITY)
            stored = await AgentStore(yard.database).load_session(session)
    assert turn.reply == "找到。"
    assert API_KEY not in caplog.text
    assert API_KEY not in json.dumps(turn.as_dict(), ensure_ascii=False, default=str)
    assert API_KEY not in repr(stored) and API_KEY not in json.dumps(vars(stored), default=str)


@needs_db
def test_script_position_continues_when_a_later_run_passes_the_same_script_again(desk_agent: DeskAgent):
    """Models: the position is stored with the session, so later `run` calls continue the script — also when the
    second run names the same script file again (a new ScriptedModel instance)."""
    model = desk_agent.script(say("第一句"), say("第二句"), say("第三句"))
    first = run_cli(desk_agent, "again", "一", "--model", model, "--json")
    second = run_cli(desk_agent, "again", "二", "--model", model, "--json")
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert json.loads(first.stdout)["reply"] == "第一句"
    assert json.loads(second.stdout)["reply"] == "第二句"


@needs_db
async def test_script_position_continues_into_the_next_task_of_the_session(desk_agent: DeskAgent):
    model = desk_agent.script(
        call("findNotes", {"q": "a"}),
        call("builtin_node_finish", {"output": "第一件事完成"}),
        say("第二个任务的回答"),
    )
    session = desk_agent.sid("tasks")
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=model)
        done = await agent.send(session, "找一下", identity=desk_kit.IDENTITY)
    assert done.status == "DONE" and done.reply == "第一件事完成"
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=model)
        nxt = await agent.send(session, "再来", identity=desk_kit.IDENTITY)
    assert nxt.reply == "第二个任务的回答" and nxt.task_id != done.task_id


@needs_db
async def test_script_position_is_per_session(desk_agent: DeskAgent):
    model = desk_agent.script(say("甲"), say("乙"))
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=model)
        a1 = await agent.send(desk_agent.sid("sa"), "x", identity=desk_kit.IDENTITY)
        b1 = await agent.send(desk_agent.sid("sb"), "x", identity=desk_kit.IDENTITY)
        a2 = await agent.send(desk_agent.sid("sa"), "y", identity=desk_kit.IDENTITY)
    assert (a1.reply, b1.reply, a2.reply) == ("甲", "甲", "乙")


@needs_db
async def test_script_several_tool_calls_in_one_item_run_in_order_with_stable_ids(desk_agent: DeskAgent):
    model = desk_agent.script(
        {
            "tool_calls": [
                {"name": "findNotes", "arguments": {"q": "a"}},
                {"name": "pickTool", "arguments": {"a": "x"}},
                {"name": "findNotes", "arguments": {"q": "b"}, "id": "mine"},
            ]
        },
        say("三个都做了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=model)
        turn = await agent.send(desk_agent.sid("multi"), "做三件事", identity=desk_kit.IDENTITY)
    assert [o.tool for o in turn.observations] == ["findNotes", "pickTool", "findNotes"]
    assert [o.call_id for o in turn.observations] == ["call_1_1", "call_1_2", "mine"]
    assert [c["tool"] for c in desk_agent.calls()] == ["findNotes", "pickTool", "findNotes"]
    assert turn.reply == "三个都做了"


@needs_db
def test_script_exhausted_mid_turn_after_a_tool_ran_is_one_clean_error(desk_agent: DeskAgent):
    model = desk_agent.script(call("findNotes", {"q": "a"}))
    result = run_cli(desk_agent, "short", "找", "--model", model, "--json")
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert "turn 2" in result.stderr and "only 1 turn" in result.stderr, result.stderr
    assert len(desk_agent.calls("findNotes")) == 1


@needs_db
def test_script_exhausted_at_resume_is_one_clean_error(desk_agent: DeskAgent):
    model = desk_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
    )
    first = run_cli(desk_agent, "rx", "保存季度总结", "--model", model, "--context", json.dumps(desk_kit.IDENTITY))
    assert first.returncode == 0, first.stderr
    resumed = skillyard_cli("agent", "resume", "--session", desk_agent.sid("rx"), "--action", "CONFIRM")
    assert resumed.returncode == 1 and no_traceback(resumed), resumed.stderr
    assert "turn 3" in resumed.stderr and "only 2 turns" in resumed.stderr, resumed.stderr
    assert len(desk_agent.calls("saveNote")) == 1  # the confirmed write ran once before the model was asked again


@needs_db
async def test_script_exhaustion_through_the_python_api_is_a_skillyard_error(desk_agent: DeskAgent):
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=desk_agent.script(call("findNotes", {"q": "a"})))
        with pytest.raises(ScriptExhausted) as info:
            await agent.send(desk_agent.sid("pyx"), "找", identity=desk_kit.IDENTITY)
    assert isinstance(info.value, SkillyardError)
    assert "turn 2" in str(info.value)


@needs_db
def test_script_a_session_continues_after_the_script_was_extended(desk_agent: DeskAgent):
    """The script ran out mid-turn (a loud error); the author appends turns and runs again: the session's stored
    position and node continue — the read that already ran is not run again."""
    path = Path(desk_agent.script(call("findNotes", {"q": "a"})).removeprefix("script:"))
    first = run_cli(desk_agent, "extend", "找", "--model", f"script:{path}")
    assert first.returncode == 1 and no_traceback(first), first.stderr
    path.write_text(
        yaml.safe_dump({"turns": [call("findNotes", {"q": "a"}), say("补上了")]}, allow_unicode=True), encoding="utf-8"
    )
    again = run_cli(desk_agent, "extend", "继续", "--model", f"script:{path}", "--json")
    assert again.returncode == 0 and no_traceback(again), again.stderr
    assert json.loads(again.stdout)["reply"] == "补上了"
    assert len(desk_agent.calls("findNotes")) == 1


@pytest.mark.parametrize("session", ["", "s" * 129], ids=["empty", "129-chars"])
@needs_db
async def test_api_send_refuses_a_bad_session_id_with_agent_error(desk_agent: DeskAgent, session: str):
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=desk_agent.script(call("findNotes", {"q": "a"}), say("x")))
        with pytest.raises(AgentError):
            await agent.send(session, "x", identity=desk_kit.IDENTITY)
    assert desk_agent.calls() == []


@pytest.mark.parametrize("identity", [["user_id", "42"], "user_id=42"], ids=["list", "string"])
@needs_db
async def test_api_send_identity_not_a_mapping_is_a_skillyard_error(desk_agent: DeskAgent, identity: Any):
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=desk_agent.script(call("findNotes", {"q": "a"}), say("x")))
        with pytest.raises(SkillyardError) as info:
            await agent.send(desk_agent.sid("idn"), "x", identity=identity)
    assert "identity" in str(info.value)
    assert desk_agent.calls() == []


@needs_db
async def test_api_send_message_not_text_is_a_skillyard_error(desk_agent: DeskAgent):
    message: Any = 42
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=desk_agent.script(say("x")))
        with pytest.raises(SkillyardError):
            await agent.send(desk_agent.sid("msg"), message, identity=desk_kit.IDENTITY)


@pytest.mark.parametrize("session", [None, 42], ids=["none", "int"])
@needs_db
async def test_api_send_session_id_not_text_is_an_agent_error(desk_agent: DeskAgent, session: Any):
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=desk_agent.script(say("x")))
        with pytest.raises(AgentError):
            await agent.send(session, "x", identity=desk_kit.IDENTITY)


@pytest.mark.parametrize("action", ["APPROVE", "", None, 1], ids=["approve", "empty", "none", "int"])
@needs_db
async def test_api_resume_bad_action_is_an_agent_error_and_runs_nothing(desk_agent: DeskAgent, action: Any):
    session = desk_agent.sid("badact")
    model = await _suspend_at_approval(desk_agent, session, call("builtin_node_finish", {"output": "ok"}))
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=model)
        with pytest.raises(SkillyardError) as info:
            await agent.resume(session, action)
        assert not isinstance(info.value, ScriptExhausted)
        for word in ("CONFIRM", "REJECT", "REPLY", "CANCEL"):
            assert word in str(info.value), str(info.value)
        still = await agent.resume(session, "CANCEL")
    assert still.status == "CANCELLED"
    assert desk_agent.calls() == []


@needs_db
async def test_api_resume_accepts_a_lower_case_action(desk_agent: DeskAgent):
    session = desk_agent.sid("lower")
    model = await _suspend_at_approval(desk_agent, session, call("builtin_node_finish", {"output": "已保存"}))
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=model)
        turn = await agent.resume(session, "confirm")
    assert turn.status == "DONE" and turn.reply == "已保存" and len(desk_agent.calls("saveNote")) == 1


@needs_db
async def test_api_turn_reports_reply_status_checkpoint_and_observation_codes(desk_agent: DeskAgent):
    session = desk_agent.sid("report")
    model = desk_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存笔记", "toolName": "saveNote"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=model)
        turn = await agent.send(session, "保存季度总结", identity=desk_kit.IDENTITY)
    assert isinstance(turn, TurnResult)
    assert turn.status == "SUSPENDED" and turn.session_id == session
    assert turn.checkpoint is not None
    assert turn.checkpoint["type"] == "APPROVAL" and turn.checkpoint["tool"] == "saveNote"
    assert turn.checkpoint["question"].startswith("保存笔记\n") and "标题：季度总结" in turn.checkpoint["question"]
    assert "42" not in turn.checkpoint["question"]  # the platform-injected owner is hidden
    assert turn.checkpoint["expected_fields"] == []
    assert turn.reply == turn.checkpoint["question"]
    assert codes(turn) == [APPROVAL_REQUIRED, None]
    json.dumps(turn.as_dict(), ensure_ascii=False)


@needs_db
async def test_api_resume_reply_with_empty_text_at_follow_up_is_an_agent_error(desk_agent: DeskAgent):
    session = desk_agent.sid("empty-reply")
    model = desk_agent.script(
        call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]}), say("好")
    )
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=model)
        await agent.send(session, "存", identity=desk_kit.IDENTITY)
        for text in (None, "", "   "):
            with pytest.raises(AgentError):
                await agent.resume(session, "REPLY", text=text)
        turn = await agent.resume(session, "REPLY", text="周报")
    assert turn.status == "RUNNING" and turn.reply == "好"


@needs_db
async def test_api_resume_reply_text_not_a_string_is_a_skillyard_error(desk_agent: DeskAgent):
    session = desk_agent.sid("int-reply")
    model = desk_agent.script(
        call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]}), say("好")
    )
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=model)
        await agent.send(session, "存", identity=desk_kit.IDENTITY)
        with pytest.raises(SkillyardError):
            await agent.resume(session, "REPLY", text=42)  # type: ignore[arg-type]


@needs_db
async def test_api_missing_model_is_an_agent_error(desk_agent: DeskAgent):
    async with SkillYard() as yard:
        with pytest.raises(AgentError) as info:
            agent = await yard.agent(desk_agent.dir)
            await agent.send(desk_agent.sid("nomodel"), "x", identity=desk_kit.IDENTITY)
    assert "model" in str(info.value).lower()


@pytest.mark.parametrize("model", [42, object()], ids=["int", "object"])
async def test_api_a_model_without_complete_is_a_skillyard_error(desk_agent: DeskAgent, model: Any):
    async with SkillYard() as yard:
        with pytest.raises(SkillyardError):
            agent = await yard.agent(desk_agent.dir, model=model)
            await agent.send(desk_agent.sid("nocomplete"), "x", identity=desk_kit.IDENTITY)


async def test_api_a_missing_agent_folder_is_a_skillyard_error(desk_agent: DeskAgent):
    async with SkillYard() as yard:
        with pytest.raises(SkillyardError) as info:
            await yard.agent(desk_agent.root / "nowhere", model=desk_agent.script(say("x")))
    assert "nowhere" in str(info.value)


@needs_db
async def test_api_resume_session_of_a_chat_model_object_needs_model(desk_agent: DeskAgent):
    session = desk_agent.sid("objmodel")
    from skillyard.agent.models import ScriptedModel

    path = desk_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "好了"}),
    ).removeprefix("script:")
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=ScriptedModel(path))
        await agent.send(session, "保存季度总结", identity=desk_kit.IDENTITY)
    async with SkillYard() as yard:
        with pytest.raises(AgentError) as info:
            await resume_session(yard, session, "CONFIRM")
        assert "model" in str(info.value)
        turn = await resume_session(yard, session, "CONFIRM", model=ScriptedModel(path))
    assert turn.status == "DONE" and len(desk_agent.calls("saveNote")) == 1


@needs_db
async def test_api_resume_session_of_an_unknown_session_names_it(desk_agent: DeskAgent):
    async with SkillYard() as yard:
        with pytest.raises(AgentError) as info:
            await resume_session(yard, desk_agent.sid("nobody"), "CONFIRM")
    assert desk_agent.sid("nobody") in str(info.value)


@needs_db
async def test_api_resume_with_no_open_node_is_an_agent_error(desk_agent: DeskAgent):
    session = desk_agent.sid("closed")
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model=desk_agent.script(call("builtin_node_fail", {"reason": "no"})))
        failed = await agent.send(session, "x", identity=desk_kit.IDENTITY)
        assert failed.status == "FAILED"
        with pytest.raises(AgentError):
            await agent.resume(session, "CONFIRM")


@needs_db
async def test_model_text_keeps_the_node_open_and_the_script_continues(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(
        tmp_path / "turns.yaml",
        {"text": "要保存什么标题？"},
        tool("findNote", title="周报"),
        tool("builtin_node_fail", reason="没有找到"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        first = await agent.send("s-text", "帮我找笔记", identity=runtime_kit.IDENTITY)
        assert first.status == "RUNNING" and first.reply == "要保存什么标题？"
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        second = await agent.send("s-text", "周报", identity=runtime_kit.IDENTITY)
    assert second.status == "FAILED" and second.reply == "没有找到"
    assert second.observations[0].code == "agent_runtime.40004"  # TRUTHY on found=false: a business failure


@needs_db
async def test_a_write_started_by_a_dead_process_is_unknown_pre_call(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(tmp_path / "turns.yaml", {"text": "好的"}, tool("builtin_node_fail", reason="stop"))
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        first = await agent.send("s-dead", "保存 x", identity=runtime_kit.IDENTITY)
        store = AgentStore(yard.database)
        from skillyard.agent.state import Evidence, EvidenceStatus

        await store.save_evidence(
            Evidence(
                id="ev_dead",
                task_id=str(first.task_id),
                node_id=str(first.node_id),
                tool="saveNote",
                args={"title": "x"},
                write=True,
                status=EvidenceStatus.STARTED,
                seq=1,
            )
        )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        again = await agent.send("s-dead", "继续", identity=runtime_kit.IDENTITY)
    assert again.observations[0].tool == "findNote"  # verified first
    statuses = {e["id"]: e["status"] for e in again.evidence}
    assert statuses["ev_dead"] == "FAILED"  # the verify tool found nothing: the write did not happen


@needs_db
async def test_script_exhaustion_is_loud(tmp_path: Path) -> None:
    agent_dir = make_agent(tmp_path, tmp_path / "calls.jsonl")
    model = script(tmp_path / "turns.yaml", tool("findNote", title="a"))
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        with pytest.raises(ScriptExhausted, match="asked for turn 2 but the script has only 1"):
            await agent.send("s-short", "找 a", identity=runtime_kit.IDENTITY)


@pytest.mark.spec("§4")
@needs_db
async def test_progress_label_without_a_contract_label_is_the_default(notes_agent: NotesAgent):
    # §4 label: empty → the MCP tool title (a skill has none) → "正在处理"; the bare tool name was shown
    result = await send_once(notes_agent, "谁负责？", call("lookupOwner", {"q": "x"}), say("ada"))
    assert result.events == [{"type": "tool", "tool": "lookupOwner", "label": "正在处理"}]
