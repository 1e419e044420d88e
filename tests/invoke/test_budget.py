"""A turn (§6.1.4, invoke/budget.py): its failure budget (2 in a row ban, 4 in total wrap up, 3 identical calls
loop) and what ``yard.new_turn`` sets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from skillyard import SkillYard, Turn
from skillyard.errors import SkillyardError
from support.skills import FAIL, OK_HANDLER, RET, assert_failure, run_or_error, yard_of

FLAKY = """
async def execute(input, ctx):
    if input.get("fail"):
        return {"ok": False, "error": "asked to fail", "non_retriable": bool(input.get("fatal"))}
    return {"ok": True}
"""


def flaky_yard(make_skill, skills_root, names=("a", "b", "c")) -> SkillYard:
    for name in names:
        make_skill(name, files={"handler.py": FLAKY})
    return SkillYard(skills_dirs=[skills_root], include_builtin=False)


@pytest.fixture
def budget_root(make_skill, skills_root):
    counter = skills_root / "count.txt"
    code = f"""
        async def execute(i, c):
            with open({str(counter)!r}, "a") as fh:
                fh.write(c["session_id"] + "\\n")
            return i.get("ret", {{"ok": True}})
    """
    for n in ("f1", "f2", "f3", "f4", "f5"):
        make_skill(n, files={"handler.py": code})
    make_skill(
        "strict",
        files={
            "handler.py": code,
            "schema.json": json.dumps(
                {"type": "object", "properties": {"ret": {}, "need": {"type": "string"}}, "required": ["need"]}
            ),
        },
    )
    return skills_root


def runs_made(root: Path) -> int:
    p = root / "count.txt"
    return len(p.read_text().splitlines()) if p.exists() else 0


async def test_two_consecutive_failures_ban_the_skill_for_the_turn(make_skill, skills_root):
    async with flaky_yard(make_skill, skills_root) as yard:
        turn = yard.new_turn(session_id="s1", channel="web")
        await yard.run("a", {"fail": 1, "n": 1}, turn=turn)
        await yard.run("a", {"fail": 1, "n": 2}, turn=turn)
        banned = await yard.run("a", {"n": 3}, turn=turn)
        assert banned["ok"] is False and banned["banned"] is True
        assert turn.runs == 2  # the refused call was not a run
        assert (await yard.run("b", {}, turn=turn))["ok"] is True
        fresh = yard.new_turn(session_id="s1")
        assert (await yard.run("a", {"n": 3}, turn=fresh))["ok"] is True


async def test_a_success_resets_the_consecutive_count(make_skill, skills_root):
    async with flaky_yard(make_skill, skills_root) as yard:
        turn = yard.new_turn()
        await yard.run("a", {"fail": 1, "n": 1}, turn=turn)
        await yard.run("a", {"n": 2}, turn=turn)
        await yard.run("a", {"fail": 1, "n": 3}, turn=turn)
        assert (await yard.run("a", {"n": 4}, turn=turn))["ok"] is True


async def test_non_retriable_bans_at_once(make_skill, skills_root):
    async with flaky_yard(make_skill, skills_root) as yard:
        turn = yard.new_turn()
        await yard.run("a", {"fail": 1, "fatal": 1}, turn=turn)
        assert (await yard.run("a", {}, turn=turn))["banned"] is True


async def test_four_failures_in_total_tell_the_turn_to_wrap_up(make_skill, skills_root):
    async with flaky_yard(make_skill, skills_root, names=("a", "b", "c", "d", "e")) as yard:
        turn = yard.new_turn()
        for name in ("a", "b", "c"):
            env = await yard.run(name, {"fail": 1}, turn=turn)
            assert "wrap_up" not in env
        fourth = await yard.run("d", {"fail": 1}, turn=turn)
        assert fourth["wrap_up"] is True and turn.must_wrap_up
        after = await yard.run("e", {}, turn=turn)
        assert after["ok"] is False and after["wrap_up"] is True and turn.runs == 4


async def test_the_same_call_three_times_is_a_loop(make_skill, skills_root):
    async with flaky_yard(make_skill, skills_root) as yard:
        turn = yard.new_turn()
        assert (await yard.run("a", {"q": 1}, turn=turn))["ok"] is True
        assert (await yard.run("a", {"q": 1}, turn=turn))["ok"] is True
        looped = await yard.run("a", {"q": 1}, turn=turn)
        assert looped["ok"] is False and looped["loop_detected"] is True
        assert (await yard.run("a", {"q": 2}, turn=turn))["ok"] is True


async def test_without_a_turn_nothing_is_budgeted(make_skill, skills_root):
    async with flaky_yard(make_skill, skills_root) as yard:
        for _ in range(5):
            assert (await yard.run("a", {"fail": 1}))["ok"] is False
        assert (await yard.run("a", {}))["ok"] is True


async def test_turn_sets_session_channel_and_chat_mode(make_skill, skills_root):
    make_skill(
        "ctx",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"s": ctx["session_id"], "c": ctx["channel"], "chat": ctx["chat_mode"]}
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="sess-1", channel="telegram")
        env = await yard.run("ctx", turn=turn)
    assert (env["s"], env["c"], env["chat"]) == ("sess-1", "telegram", True)


@pytest.mark.spec("§6.1.4")
async def test_two_consecutive_failures_ban(budget_root):
    """Issue §6.1.4: '2 consecutive failures of a skill → banned for the turn'."""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t1")
        await yard.run("f1", {"ret": FAIL, "n": 1}, turn=turn)
        await yard.run("f1", {"ret": FAIL, "n": 2}, turn=turn)
        third = await yard.run("f1", {"n": 3}, turn=turn)
        other = await yard.run("f2", {"n": 4}, turn=turn)
    assert third["ok"] is False and third["banned"] is True
    assert other["ok"] is True
    assert runs_made(budget_root) == 3


async def test_success_resets_consecutive(budget_root):
    """decisions.md: 'a success resets a skill's consecutive-failure count. "Two in a row" means two in a row.'"""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t2")
        await yard.run("f1", {"ret": FAIL, "n": 1}, turn=turn)
        await yard.run("f1", {"n": 2}, turn=turn)
        await yard.run("f1", {"ret": FAIL, "n": 3}, turn=turn)
        env = await yard.run("f1", {"n": 4}, turn=turn)
    assert env["ok"] is True and not env.get("banned")


async def test_four_failures_wrap_up(budget_root):
    """Issue: '4 in total → the turn is told to wrap up'."""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t3")
        envs = [await yard.run(n, {"ret": FAIL}, turn=turn) for n in ("f1", "f2", "f3", "f4")]
        after = await yard.run("f5", {}, turn=turn)
    assert not envs[2].get("wrap_up") and envs[3]["wrap_up"] is True
    assert after["wrap_up"] is True and after["ok"] is False
    assert runs_made(budget_root) == 4


async def test_same_input_three_times_loop(budget_root):
    """Issue: 'the same (skill, input) 3 times → loop detected'."""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t4")
        a = await yard.run("f1", {"x": 1, "y": 2}, turn=turn)
        b = await yard.run("f1", {"y": 2, "x": 1}, turn=turn)
        c = await yard.run("f1", {"x": 1, "y": 2}, turn=turn)
    assert a["ok"] and b["ok"] and c["ok"] is False and c["loop_detected"] is True
    assert runs_made(budget_root) == 2


async def test_non_retriable_failure_bans_at_once(budget_root):
    """Issue: '`non_retriable` bans the skill at once'."""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t5")
        await yard.run("f1", {"ret": {**FAIL, "non_retriable": True}}, turn=turn)
        env = await yard.run("f1", {"n": 2}, turn=turn)
    assert env["banned"] is True and runs_made(budget_root) == 1


async def test_validation_refusals_do_not_count(budget_root):
    """Issue: 'Only real runs of a skill count.'"""
    async with SkillYard(skills_dirs=[budget_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t6")
        for i in range(5):
            r = await yard.run("strict", {"need": "", "i": i}, turn=turn)
            assert r["need_param"] == "need"
        env = await yard.run("strict", {"need": "x"}, turn=turn)
    assert env["ok"] is True and runs_made(budget_root) == 1


async def test_gating_refusals_do_not_count(make_skill, skills_root, monkeypatch):
    """Issue: 'Only real runs of a skill count.'; docs: 'calls refused by the budget, gating or input validation do
    not'."""
    monkeypatch.delenv("GATE_T", raising=False)
    make_skill(
        "gt",
        frontmatter="name: gt\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [GATE_T]",
        files={"handler.py": OK_HANDLER},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="t7")
        for i in range(3):
            await yard.run("gt", {"i": i}, turn=turn)
        env = await yard.run("gt", {"i": 9}, turn=turn, context={"skill_configs": {"GATE_T": "v"}})
    assert env["ok"] is True and not env.get("banned") and not env.get("wrap_up")


async def test_turn_sets_chat_mode_and_session(dump_skill):
    """docs: '`yard.new_turn()` sets `chat_mode: true`'; issue: 'turn = yard.new_turn(session_id=…, channel=…)'."""
    async with SkillYard(skills_dirs=[dump_skill], include_builtin=False) as yard:
        turn = yard.new_turn(session_id="sess9", channel="wecom")
        env = await yard.run("dump", {}, turn=turn)
    ctx = env["ctx"]
    assert ctx["chat_mode"] is True and ctx["session_id"] == "sess9" and ctx["channel"] == "wecom"


async def test_new_turn_returns_turn_and_sets_context(echo_root):
    """Issue: '`turn = yard.new_turn(session_id=…, channel=…)`'; decisions: '`chat_mode` is ... `true` for runs in a
    `yard.new_turn()`'."""
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="sess1", channel="wecom")
        assert isinstance(turn, Turn)
        ctx = (await yard.run("dump", {}, turn=turn))["ctx"]
    assert ctx["session_id"] == "sess1" and ctx["channel"] == "wecom" and ctx["chat_mode"] is True


async def test_new_turn_positional_session(echo_root):
    """authoring.md: '`turn = yard.new_turn(session_id)`'."""
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn("sess2")
        ctx = (await yard.run("dump", {}, turn=turn))["ctx"]
    assert ctx["session_id"] == "sess2"


@pytest.mark.parametrize("sid", ["../escape", "a/b", ".hidden", "x" * 129])
def test_new_turn_unsafe_session_refused(echo_root, sid):
    """authoring.md: 'A `session_id` must be 1-128 letters, digits, `_`, `-` or `.`, starting with a letter or digit';
    files-and-artifacts.md: 'anything else is refused with that explanation'."""
    yard = yard_of(echo_root)
    try:
        turn = yard.new_turn(session_id=sid)
    except SkillyardError:
        return

    async def go():
        async with yard:
            return await yard.run("echo", {}, turn=turn)

    out = asyncio.run(run_or_error(go()))
    assert "session" in str(out if isinstance(out, Exception) else out["error"]).lower()


async def test_new_turn_session_id_none_is_clear(echo_root):
    """Brief: `new_turn(session_id=None)` is a clear error or the default session."""
    async with yard_of(echo_root) as yard:
        try:
            turn = yard.new_turn(session_id=None)
        except SkillyardError:
            return
        env = await yard.run("echo", {}, turn=turn)
    assert env["ok"] is True


async def test_turn_ban_applies_to_alias(echo_root):
    """authoring.md: 'A skill that fails twice in a row ... is banned for the rest of the turn: further calls answer
    `banned: true`' — a ban is on the skill, whatever name is used."""
    (echo_root / "echo" / "handler.py").write_text(RET)
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="ban1")
        await yard.run("echo", {"ret": FAIL, "n": 1}, turn=turn)
        await yard.run("echo", {"ret": FAIL, "n": 2}, turn=turn)
        env = await yard.run("parrot", {"n": 3}, turn=turn)
    assert_failure(env)
    assert env["banned"] is True


async def test_turn_ban_applies_to_fanout_names(echo_root):
    """authoring.md: 'A skill that fails twice in a row ... is banned for the rest of the turn'."""
    (echo_root / "notes" / "handler.py").write_text(RET)
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="ban2")
        await yard.run("notes__list", {"ret": FAIL, "n": 1}, turn=turn)
        await yard.run("notes__add", {"text": "t", "ret": FAIL}, turn=turn)
        env = await yard.run("notes", {"_subcommand": "list"}, turn=turn)
    assert_failure(env)
    assert env["banned"] is True


async def test_exceptions_count_as_failures(make_skill, skills_root):
    """Issue: '2 consecutive failures of a skill → banned for the turn' — an exception is a failure envelope."""
    make_skill("boom", files={"handler.py": "async def execute(i, c):\n    raise ValueError('bad')\n"})
    async with yard_of(skills_root) as yard:
        turn = yard.new_turn(session_id="exc")
        await yard.run("boom", {"n": 1}, turn=turn)
        await yard.run("boom", {"n": 2}, turn=turn)
        env = await yard.run("boom", {"n": 3}, turn=turn)
    assert env["banned"] is True


async def test_timeouts_count_as_failures(make_skill, skills_root):
    """Issue: '2 consecutive failures of a skill → banned' — a run stopped by its wall clock is a failure."""
    make_skill(
        "slow",
        frontmatter="name: slow\ndescription: slow\nexec:\n  timeout: 0.2",
        files={"handler.py": "import asyncio\nasync def execute(i, c):\n    await asyncio.sleep(30)\n"},
    )
    async with yard_of(skills_root) as yard:
        turn = yard.new_turn(session_id="slow")
        a = await yard.run("slow", {"n": 1}, turn=turn)
        await yard.run("slow", {"n": 2}, turn=turn)
        env = await yard.run("slow", {"n": 3}, turn=turn)
    assert a["timed_out"] is True
    assert env["banned"] is True


async def test_ban_does_not_cross_turns(echo_root):
    """authoring.md: 'banned for the rest of the turn' — a new turn starts clean."""
    async with yard_of(echo_root) as yard:
        t1 = yard.new_turn(session_id="x1")
        await yard.run("ret", {"ret": FAIL, "n": 1}, turn=t1)
        await yard.run("ret", {"ret": FAIL, "n": 2}, turn=t1)
        t2 = yard.new_turn(session_id="x1")
        env = await yard.run("ret", {"n": 3}, turn=t2)
    assert env["ok"] is True


async def test_runs_without_turn_have_no_budget(echo_root):
    """authoring.md: '`skillyard run` and `call_skill` runs have no turn' — plain yard.run without a turn is never
    banned or loop-refused."""
    async with yard_of(echo_root) as yard:
        for _ in range(5):
            env = await yard.run("ret", {"ret": FAIL})
    assert env["ok"] is False and not env.get("banned") and not env.get("loop_detected") and not env.get("wrap_up")


async def test_loop_refusal_does_not_count_as_failure(echo_root, make_skill):
    """authoring.md: 'Only real runs count: calls refused by the budget ... do not.'"""
    for n in ("g1", "g2", "g3", "g4"):
        make_skill(n, files={"handler.py": RET})
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="loopcount")
        await yard.run("echo", {"same": 1}, turn=turn)
        await yard.run("echo", {"same": 1}, turn=turn)
        loop = await yard.run("echo", {"same": 1}, turn=turn)
        fails = [await yard.run(n, {"ret": FAIL}, turn=turn) for n in ("g1", "g2", "g3")]
        last = await yard.run("g4", {"ret": FAIL}, turn=turn)
    assert loop["loop_detected"] is True
    assert not any(f.get("wrap_up") for f in fails)
    assert last["wrap_up"] is True


@pytest.mark.spec("§6.1.4")
async def test_loop_is_per_skill(echo_root):
    """Spec §6.1.4: '同一 (工具, 参数) 组合出现 3 次判定死循环' — the same input to different skills is no loop."""
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="loopskill")
        await yard.run("echo", {"q": 1}, turn=turn)
        await yard.run("echo", {"q": 1}, turn=turn)
        other = await yard.run("ret", {"q": 1}, turn=turn)
    assert other["ok"] is True and not other.get("loop_detected")


async def test_loop_via_alias_is_same_tool(echo_root):
    """authoring.md: 'The 3rd call of the same skill with the same input in a turn is refused with
    `loop_detected: true`'."""
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="loopalias")
        await yard.run("echo", {"q": 1}, turn=turn)
        await yard.run("parrot", {"q": 1}, turn=turn)
        third = await yard.run("echo", {"q": 1}, turn=turn)
    assert third.get("loop_detected") is True and third["ok"] is False


async def test_budget_refusals_have_failure_shape(echo_root):
    """authoring.md: the envelope of every failure has `error` (required) and `skill` set by the platform."""
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="shape")
        await yard.run("ret", {"ret": FAIL, "n": 1}, turn=turn)
        await yard.run("ret", {"ret": FAIL, "n": 2}, turn=turn)
        env = await yard.run("ret", {"n": 3}, turn=turn)
    assert_failure(env)
    assert env["skill"] == "ret" and env["banned"] is True


async def test_non_retriable_string_bans(echo_root):
    """authoring.md: '`non_retriable` | `true`: the same call will always fail; the skill is banned for the rest of
    the turn'."""
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="nr")
        await yard.run("ret", {"ret": {"ok": False, "error": "x", "non_retriable": True}}, turn=turn)
        env = await yard.run("ret", {"n": 2}, turn=turn)
    assert env["banned"] is True


async def test_processor_failure_failing_run_counts(echo_root, plugin_reg):
    """Brief probe: a turn's counters live on the Turn: `total_failures` counts real failed runs."""
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="tot")
        await yard.run("ret", {"ret": FAIL, "n": 1}, turn=turn)
        await yard.run("echo", {"n": 1}, turn=turn)
    assert turn.total_failures == 1
