"""A turn's failure budget (§6.1.4): 2 consecutive failures ban, 4 in total wrap up, 3 identical calls loop."""

from __future__ import annotations

from skillyard import SkillYard

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
