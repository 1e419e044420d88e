"""Second round of black-box conformance probes: the Python API and the plugin surface of the host core.

Each probe quotes the sentence it checks (issue 2, README, docs/, spec).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard, Turn, hookimpl
from skillyard.errors import DuplicateRegistration, SkillyardError, UnknownSkill
from support.cli import invoke
from support.skills import CALLER, CTX_DUMP, FAIL, OK_HANDLER, RET, assert_failure, run_or_error, yard_of

WHITELIST = {
    "role_id",
    "session_id",
    "user_id",
    "team_id",
    "org_id",
    "team_role",
    "is_admin",
    "channel",
    "chat_mode",
    "workspace_dir",
    "channel_registry",
    "db_factory",
    "abort_signal",
    "allow_sql",
    "actor_id",
    "actor_is_admin",
}


# ============================================================================ 1. SkillYard API: run arguments


async def test_run_returns_plain_dict_for_good_call(echo_root):
    """README: '`yard.run(name, input, context=..., turn=...)` ... always returns an envelope (a plain
    JSON-serializable dict)'."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("echo", {"a": 1}, context={"channel": "web"})
    assert type(env) is dict and env["ok"] is True and env["success"] is True and env["got"] == {"a": 1}
    json.dumps(env)


async def test_run_unknown_name_is_envelope_or_unknown_skill(echo_root):
    """README: 'a skill's failures never raise'; errors module: `UnknownSkill` is the documented error class."""
    async with yard_of(echo_root) as yard:
        try:
            env = await yard.run("no_such_skill", {})
        except UnknownSkill as exc:
            assert "no_such_skill" in str(exc)
            return
    assert_failure(env)
    assert "no_such_skill" in json.dumps(env)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "   ",
        None,
        42,
        ["echo"],
    ],
)
async def test_run_bad_name_types_are_clear_errors(echo_root, name):
    """Brief: a bad argument to a documented method gives a clear SkillyardError subclass or a failure envelope,
    never a bare TypeError/KeyError."""
    async with yard_of(echo_root) as yard:
        await run_or_error(yard.run(name, {}))


async def test_run_input_none_is_empty_input(echo_root):
    """Signature `run(name, input=None, ...)`: no input means an empty one."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("echo")
        env2 = await yard.run("echo", None)
    assert env["ok"] is True and env["got"] == {} and env2["got"] == {}


@pytest.mark.parametrize("bad_input", [[1, 2], "text", 7, b"bytes"])
async def test_run_non_mapping_input_is_clear(echo_root, bad_input):
    """Issue: 'A failed validation returns a recoverable failure envelope ... without running the skill.' A
    non-object input is not a valid input."""
    async with yard_of(echo_root) as yard:
        out = await run_or_error(yard.run("echo", bad_input))
    if isinstance(out, dict):
        assert out.get("error_type") in ("recoverable", None, "config")


@pytest.mark.parametrize("bad_ctx", [["role_id"], "role_id=x", 5])
async def test_run_non_mapping_context_is_clear(echo_root, bad_ctx):
    """Brief: a bad `context` argument is a clear error, not a traceback-worthy exception."""
    async with yard_of(echo_root) as yard:
        await run_or_error(yard.run("echo", {}, context=bad_ctx))


async def test_run_bad_turn_type_is_clear(echo_root):
    """Brief: `turn=` that is not a Turn is a clear error."""
    async with yard_of(echo_root) as yard:
        await run_or_error(yard.run("echo", {}, turn="not-a-turn"))


async def test_run_by_alias_and_fanout_tool_name(echo_root):
    """README: '`yard.run(...)` accepts a skill name, an alias or a tool name'."""
    async with yard_of(echo_root) as yard:
        a = await yard.run("parrot", {"x": 1})
        b = await yard.run("notes__add", {"text": "hi"})
    assert a["ok"] is True and a["got"] == {"x": 1}
    assert b["ok"] is True and b["got"]["_subcommand"] == "add"


async def test_run_fanout_validates_subcommand_schema(echo_root):
    """Issue: 'a call is restored to the skill with `input["_subcommand"]` and validated against that subcommand's
    schema'."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("notes__add", {})
    assert_failure(env)
    assert env["need_param"] == "text" and env["error_type"] == "recoverable"


async def test_run_unknown_fanout_subcommand(echo_root):
    """Brief: an unknown tool name `<skill>__<sub>` is an unknown name, reported clearly."""
    async with yard_of(echo_root) as yard:
        try:
            env = await yard.run("notes__nope", {})
        except UnknownSkill:
            return
    assert_failure(env)


async def test_run_context_values_are_not_mutated(echo_root):
    """authoring.md: 'Treat `context` as read-only' — the host must not change the caller's mapping either."""
    ctx = {"channel": "web", "actor_tags": "a, b"}
    snapshot = json.dumps(ctx, sort_keys=True)
    inp = {"x": 1}
    async with yard_of(echo_root) as yard:
        await yard.run("dump", inp, context=ctx)
    assert json.dumps(ctx, sort_keys=True) == snapshot and inp == {"x": 1}


async def test_run_without_async_with(echo_root):
    """README example uses `async with`; a plain instance must still run or fail clearly."""
    yard = yard_of(echo_root)
    try:
        env = await yard.run("echo", {"a": 1})
    except SkillyardError:
        return
    finally:
        await yard.close()
    assert env["ok"] is True


# ============================================================================ 2. lifecycle


async def test_open_close_explicit(echo_root):
    """hooks.md: '`async with SkillYard(...)` or `await yard.open()`'."""
    yard = yard_of(echo_root)
    opened = await yard.open()
    assert opened is yard
    env = await yard.run("echo", {})
    await yard.close()
    assert env["ok"] is True


async def test_close_twice_is_harmless(echo_root):
    """Brief: closing twice must not raise a traceback-worthy exception."""
    yard = yard_of(echo_root)
    await yard.open()
    await yard.close()
    with contextlib.suppress(SkillyardError):
        await yard.close()


async def test_reuse_after_close(echo_root):
    """Brief: reuse after close either works or fails with a clear SkillyardError."""
    yard = yard_of(echo_root)
    async with yard:
        first = await yard.run("echo", {"n": 1})
    try:
        async with yard:
            second = await yard.run("echo", {"n": 2})
    except SkillyardError:
        return
    assert first["ok"] is True and second["ok"] is True and second["got"] == {"n": 2}


async def test_run_after_close_is_clear(echo_root):
    """Brief: a run on a closed host is a clear envelope or SkillyardError."""
    yard = yard_of(echo_root)
    async with yard:
        pass
    try:
        env = await yard.run("echo", {"n": 1})
    except SkillyardError:
        return
    finally:
        await yard.close()
    assert isinstance(env, dict) and "ok" in env


async def test_startup_and_shutdown_once_per_open_close(echo_root, plugin_reg):
    """hooks.md: 'startup(yard) Called once when a `SkillYard` is opened'; 'shutdown(yard) Called once when an opened
    `SkillYard` is closed'."""
    calls: list[str] = []

    class P:
        @hookimpl
        def startup(self, yard):
            calls.append("start")

        @hookimpl
        def shutdown(self, yard):
            calls.append("stop")

    plugin_reg(P(), "probe2-life")
    yard = yard_of(echo_root)
    await yard.open()
    await yard.close()
    await yard.close()
    assert calls == ["start", "stop"]


async def test_shutdown_not_called_for_never_opened(echo_root, plugin_reg):
    """hooks.md: 'shutdown(yard) Called once when an opened `SkillYard` is closed'."""
    calls: list[str] = []

    class P:
        @hookimpl
        def shutdown(self, yard):
            calls.append("stop")

    plugin_reg(P(), "probe2-noopen")
    yard = yard_of(echo_root)
    await yard.close()
    assert calls == []


async def test_startup_callable_is_called(echo_root, plugin_reg):
    """hooks.md: 'May return an awaitable or a callable' and the `warm` example returning an async function."""
    seen: list[str] = []

    class P:
        @hookimpl
        def startup(self, yard):
            async def warm():
                yard.probe_client = "client"
                seen.append("warm")

            return warm

    plugin_reg(P(), "probe2-warm")
    async with yard_of(echo_root) as yard:
        assert seen == ["warm"] and yard.probe_client == "client"


async def test_shutdown_returning_none_ok(echo_root, plugin_reg):
    """hooks.md shutdown example: `return client.aclose() if client else None`."""

    class P:
        @hookimpl
        def shutdown(self, yard):
            return None

    plugin_reg(P(), "probe2-none")
    async with yard_of(echo_root) as yard:
        env = await yard.run("echo", {})
    assert env["ok"] is True


# ============================================================================ 3. construction and settings


def test_skills_dirs_missing_folder_is_clear(tmp_path):
    """docs/cli.md: a `--skills-dir` that does not exist is a usage error; SkillYard(skills_dirs=...) is the same
    option from Python — it must fail clearly or list nothing, never crash later."""
    try:
        yard = SkillYard(skills_dirs=[tmp_path / "missing"], include_builtin=False)
    except SkillyardError:
        return
    with pytest.raises(SkillyardError):
        yard.skill("anything")


@pytest.mark.parametrize("value", ["abc", "-1", "0", "inf", "nan"])
def test_bad_wall_clock_names_the_variable(monkeypatch, skills_root, value):
    """configuration.md: 'The timeouts ... must be numbers above 0 ...; anything else (text, a negative number, `inf`,
    `nan`) stops skillyard with a message naming the variable.'"""
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", value)
    with pytest.raises(SkillyardError, match="SKILLYARD_WALL_CLOCK"):
        SkillYard(skills_dirs=[skills_root], include_builtin=False)


def test_rescan_interval_negative_names_variable(monkeypatch, skills_root):
    """configuration.md: '(`SKILLYARD_RESCAN_INTERVAL` 0 or more); anything else ... stops skillyard with a message
    naming the variable'."""
    monkeypatch.setenv("SKILLYARD_RESCAN_INTERVAL", "-5")
    with pytest.raises(SkillyardError, match="SKILLYARD_RESCAN_INTERVAL"):
        SkillYard(skills_dirs=[skills_root], include_builtin=False)


def test_database_url_bad_scheme_is_an_error(monkeypatch, skills_root):
    """configuration.md: 'A PostgreSQL URL ... Any other scheme is an error.'"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "mysql://u:p@localhost/db")

    async def go():
        async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
            await yard.configs.get("r", "s")

    with pytest.raises(SkillyardError):
        asyncio.run(go())


# ============================================================================ 4. skill / resolve / read / rescan


def test_skill_unknown_raises_unknown_skill(echo_root):
    """errors: `UnknownSkill` is a `SkillyardError`; `yard.skill(name)` on an unknown name raises it."""
    yard = yard_of(echo_root)
    with pytest.raises(UnknownSkill):
        yard.skill("no_such")
    assert issubclass(UnknownSkill, SkillyardError)


def test_resolve_shapes(echo_root):
    """authoring.md: '`yard.run` and `call_skill` accept the skill name, an alias or a tool name'; resolve returns
    (skill, subcommand) or None."""
    yard = yard_of(echo_root)
    skill, sub = yard.resolve("echo")
    assert skill.name == "echo" and sub is None
    assert yard.resolve("parrot")[0].name == "echo"
    skill, sub = yard.resolve("notes__list")
    assert skill.name == "notes" and sub == "list"
    assert yard.resolve("no_such") is None


@pytest.mark.parametrize("name", ["", None, 3])
def test_resolve_bad_names(echo_root, name):
    """Brief: bad names give None or a SkillyardError, never TypeError/AttributeError."""
    yard = yard_of(echo_root)
    with contextlib.suppress(SkillyardError):
        assert yard.resolve(name) is None


def test_read_skill_file_default_is_skill_md(echo_root):
    """Signature `read_skill_file(name, path='SKILL.md', offset=0)`; issue: 'returns at most 40,000 characters per
    call'."""
    page = yard_of(echo_root).read_skill_file("echo")
    assert "name: echo" in page["content"]


def test_read_skill_file_unknown_skill(echo_root):
    """Brief: unknown skill → a SkillyardError subclass."""
    with pytest.raises(SkillyardError):
        yard_of(echo_root).read_skill_file("no_such", "SKILL.md")


def test_read_skill_file_missing_file(echo_root):
    """Brief: a missing file → a clear SkillyardError (not FileNotFoundError)."""
    with pytest.raises(SkillyardError):
        yard_of(echo_root).read_skill_file("echo", "references/none.md")


def test_read_skill_file_directory(echo_root):
    """Brief: a folder path → a clear SkillyardError (not IsADirectoryError)."""
    (echo_root / "echo" / "references").mkdir()
    with pytest.raises(SkillyardError):
        yard_of(echo_root).read_skill_file("echo", "references")


@pytest.mark.parametrize(
    "offset",
    [
        -1,
        "10",
        None,
    ],
)
def test_read_skill_file_bad_offset(echo_root, offset):
    """Brief: a bad offset is clamped or refused with a SkillyardError, never TypeError."""
    try:
        page = yard_of(echo_root).read_skill_file("echo", "SKILL.md", offset)
    except SkillyardError:
        return
    assert isinstance(page["content"], str)


def test_read_skill_file_offset_past_end(echo_root):
    """Issue: paging with `offset`: past the end there is nothing more to read."""
    page = yard_of(echo_root).read_skill_file("echo", "SKILL.md", 10_000_000)
    assert page["content"] == "" and not page.get("next_offset")


def test_read_skill_file_pages_join_to_whole(make_skill, skills_root):
    """Issue: 'returns at most 40,000 characters per call' — successive pages give the whole file."""
    text = "".join(f"line {i:06d} é\n" for i in range(9000))
    make_skill("pg", files={"references/big.md": text})
    yard = yard_of(skills_root)
    out, offset = "", 0
    for _ in range(10):
        page = yard.read_skill_file("pg", "references/big.md", offset)
        assert len(page["content"]) <= 40_000
        out += page["content"]
        offset = page.get("next_offset")
        if not offset:
            break
    assert out == text


def test_read_skill_file_skill_md_has_fallback_for_non_default_lookup(skills_root):
    """authoring.md lookup: a README.md with frontmatter is the skill's SKILL.md; read_skill_file('x') defaults to
    SKILL.md — it must give the manual or a clear SkillyardError."""
    folder = skills_root / "rd"
    folder.mkdir()
    (folder / "README.md").write_text("---\nname: rd\ndescription: readme skill\n---\nManual body\n")
    yard = yard_of(skills_root)
    try:
        page = yard.read_skill_file("rd")
    except SkillyardError:
        return
    assert "Manual body" in page["content"]


def test_rescan_returns_int_and_finds_new(echo_root, make_skill):
    """Issue: '`rescan()` ... picks up folders dropped in, changed or removed without a restart'."""
    yard = yard_of(echo_root)
    assert yard.resolve("later") is None
    make_skill("later", files={"handler.py": OK_HANDLER})
    n = yard.rescan()
    assert isinstance(n, int)
    assert yard.resolve("later") is not None


async def test_rescan_removed_skill_then_run(echo_root):
    """Issue: 'rescan() ... picks up folders ... removed'; a run of a removed skill is an unknown skill."""
    import shutil

    async with yard_of(echo_root) as yard:
        assert (await yard.run("ret", {}))["ok"] is True
        shutil.rmtree(echo_root / "ret")
        yard.rescan()
        try:
            env = await yard.run("ret", {})
        except UnknownSkill:
            return
    assert_failure(env)


# ============================================================================ 5. new_turn / Turn


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


# ============================================================================ 6. call_skill


async def test_call_skill_context_keys_exactly_whitelist(echo_root):
    """Spec §9.1: '精确白名单 ... 调用方的 skill_configs / skill_args / 扁平参数、以及词表外的自造键 ... 不透传'.
    The callee's context holds only the whitelist, the fixed fields, its own config segment and db/call_skill."""
    async with yard_of(echo_root) as yard:
        env = await yard.run(
            "caller",
            {"target": "dump", "input": {}},
            context={
                "role_id": "r1",
                "org_id": "o1",
                "org_name": "Acme",
                "custom_flag": True,
                "skill_args": {"zz": "1"},
                "actor_tags": ["t"],
                "allow_sql": False,
                "is_admin": True,
                "team_role": "owner",
                "user_id": "u1",
                "team_id": "tm",
            },
        )
    ctx = env["inner"]["ctx"]
    assert set(WHITELIST) <= set(ctx)
    assert "org_name" not in ctx and "custom_flag" not in ctx and "zz" not in ctx
    assert ctx["allow_sql"] is False and ctx["is_admin"] is True and ctx["team_role"] == "owner"
    assert ctx["user_id"] == "u1" and ctx["team_id"] == "tm" and ctx["actor_tags"] == ["t"]


async def test_call_skill_request_not_passed(echo_root):
    """Spec §9.1 whitelist does not contain `request`: '词表外的 ... 不透传'."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "dump", "input": {}}, context={"request": {"path": "/x"}})
    ctx = env["inner"]["ctx"]
    assert ctx.get("request") in (None, "<NoneType>")


async def test_call_skill_abort_signal_passed(make_skill, skills_root):
    """Spec §9.1: `abort_signal` is on the whitelist — the callee sees the caller's signal object."""
    make_skill(
        "sig_callee",
        files={"handler.py": "async def execute(i, c):\n    return {'same': id(c['abort_signal'])}\n"},
    )
    make_skill(
        "sig_caller",
        files={
            "handler.py": """
        async def execute(i, c):
            r = await c["call_skill"]("sig_callee", {})
            return {"mine": id(c["abort_signal"]), "theirs": r.get("same")}
    """
        },
    )
    ev = asyncio.Event()
    async with yard_of(skills_root) as yard:
        env = await yard.run("sig_caller", {}, context={"abort_signal": ev})
    assert env["mine"] == env["theirs"] == id(ev)


async def test_call_skill_chat_mode_passed_in_turn(echo_root):
    """Spec §9.1: `chat_mode` is on the whitelist; decisions: '`true` for runs in a `yard.new_turn()`'."""
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="cm", channel="web")
        env = await yard.run("caller", {"target": "dump", "input": {}}, turn=turn)
    ctx = env["inner"]["ctx"]
    assert ctx["chat_mode"] is True and ctx["channel"] == "web" and ctx["session_id"] == "cm"


async def test_call_skill_workspace_dir_passed(echo_root, tmp_path):
    """Spec §9.1: `workspace_dir` is on the whitelist."""
    ws = tmp_path / "ws"
    ws.mkdir()
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "dump", "input": {}}, context={"workspace_dir": str(ws)})
    assert env["inner"]["ctx"]["workspace_dir"] == str(ws)


async def test_call_skill_admin_fill_stays_cleared(echo_root):
    """Spec §4.4: with `actor_is_admin` the identity keys are cleared; the callee gets the same cleared actor_*."""
    async with yard_of(echo_root) as yard:
        env = await yard.run(
            "caller",
            {"target": "dump", "input": {}},
            context={"actor_is_admin": True, "actor_title": "VP", "actor_name": "Ada", "actor_emp_no": "E1"},
        )
    ctx = env["inner"]["ctx"]
    assert ctx["actor_is_admin"] is True and ctx["actor_title"] == "" and ctx["actor_emp_no"] == ""
    assert ctx["actor_name"] == "Ada"


async def test_call_skill_callee_gets_call_skill_and_fixed_fields(echo_root):
    """authoring.md: 'Every fixed field is always present' — also in a callee's context."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "dump", "input": {}})
    ctx = env["inner"]["ctx"]
    for key in ("raw_input", "attachments", "actor_name", "triggered_at", "triggered_at_str", "actor_is_admin"):
        assert key in ctx
    assert "call_skill" in ctx and isinstance(ctx["triggered_at"], float)


async def test_call_skill_callee_configs_from_its_own_role_and_name(echo_root, db_env):
    """Spec §9.1: '被调技能的 skill_configs 由平台按 role_id + 被调技能名 重新查库注入，不继承调用方的'."""
    async with yard_of(echo_root) as yard:
        await yard.configs.set("rc", "dump", {"units": "metric"})
        await yard.configs.set("rc", "caller", {"caller_only": "CALLERV"})
        env = await yard.run("caller", {"target": "dump", "input": {}}, context={"role_id": "rc"})
        other = await yard.run("caller", {"target": "dump", "input": {}}, context={"role_id": "rother"})
    ctx = env["inner"]["ctx"]
    assert ctx["units"] == "metric" and ctx["skill_configs"]["dump"]["units"] == "metric"
    assert "CALLERV" not in json.dumps(ctx)
    assert "units" not in other["inner"]["ctx"]


async def test_call_skill_callee_failure_without_error_gets_one(echo_root):
    """Spec §9.1: '失败 = {"ok": False, "error": "...", "skill": "..."}'; issue: 'a failure without `error` gets a
    specific one'."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "ret", "input": {"ret": {"ok": False}}})
    inner = env["inner"]
    assert_failure(inner)
    assert inner["skill"] == "ret"


async def test_call_skill_callee_needs_config(make_skill, skills_root, monkeypatch):
    """Issue: 'missing env (not in configs nor environment) → a `needs_config` envelope'; call_skill 'never raises'."""
    monkeypatch.delenv("PROBE_NEEDED_VAR", raising=False)
    make_skill(
        "gated",
        frontmatter="name: gated\ndescription: g\nmetadata: {openclaw: {requires: {env: [PROBE_NEEDED_VAR]}}}",
        files={"handler.py": OK_HANDLER},
    )
    make_skill("caller", files={"handler.py": CALLER})
    async with yard_of(skills_root) as yard:
        env = await yard.run("caller", {"target": "gated", "input": {}})
    inner = env["inner"]
    assert_failure(inner)
    assert inner["needs_config"] == ["PROBE_NEEDED_VAR"]


async def test_call_skill_callee_timeout(make_skill, skills_root):
    """Issue: 'a run stopped by its wall clock says `timed_out: true`' — also a callee's run."""
    make_skill(
        "slowc",
        frontmatter="name: slowc\ndescription: s\nexec:\n  timeout: 0.2",
        files={"handler.py": "import asyncio\nasync def execute(i, c):\n    await asyncio.sleep(30)\n"},
    )
    make_skill("caller", files={"handler.py": CALLER})
    async with yard_of(skills_root) as yard:
        env = await yard.run("caller", {"target": "slowc", "input": {}})
    assert env["ok"] is True
    assert_failure(env["inner"])
    assert env["inner"]["timed_out"] is True


@pytest.mark.parametrize("target", ["", None, 5])
async def test_call_skill_bad_name_never_raises(echo_root, target):
    """Spec §9.1: '不抛异常'; authoring.md: 'Every failure (unknown skill, invalid input, ...) is an envelope with at
    least `{"ok": false, "success": false, "error": "…", "skill": "…"}`'."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": target, "input": {}})
    assert env["ok"] is True, env
    assert_failure(env["inner"])
    assert "skill" in env["inner"]


@pytest.mark.parametrize("bad_input", [[1], "x", 3])
async def test_call_skill_bad_input_never_raises(echo_root, bad_input):
    """authoring.md: 'Never raises: ... Every failure (unknown skill, invalid input, an exception, the limits below)
    is an envelope'."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "echo", "input": bad_input})
    assert env["ok"] is True, env
    assert_failure(env["inner"])


async def test_call_skill_by_alias_and_tool_name(echo_root):
    """authoring.md: '"notify", # name, alias or tool name'."""
    async with yard_of(echo_root) as yard:
        a = await yard.run("caller", {"target": "parrot", "input": {"v": 1}})
        b = await yard.run("caller", {"target": "notes__add", "input": {"text": "t"}})
    assert a["inner"]["ok"] is True and a["inner"]["got"] == {"v": 1}
    assert b["inner"]["ok"] is True and b["inner"]["got"]["_subcommand"] == "add"


async def test_call_skill_self_via_alias_refused(echo_root, make_skill):
    """Issue: 'a skill calling itself directly is refused' — under an alias it is still itself."""
    make_skill("selfy", frontmatter="name: selfy\ndescription: s\naliases: [me_again]", files={"handler.py": CALLER})
    async with yard_of(echo_root) as yard:
        env = await yard.run("selfy", {"target": "me_again", "input": {"target": "echo"}})
    assert env["ok"] is True
    assert_failure(env["inner"])


async def test_call_skill_template_and_passthrough(echo_root):
    """authoring.md: 'explicit dict and keyword fields > `template` > `passthrough`'; 'A template value that is exactly
    `"{field}"` keeps the source value's type; other `{field}` references are replaced by text.'"""
    kw = {
        "source": {"id": 42, "status": "shipped", "extra": "E"},
        "template": {"title": "Order {id}: {status}", "num": "{id}"},
        "passthrough": True,
        "status": "explicit",
    }
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "echo", "input": {"id": 1}, "kw": kw})
    got = env["inner"]["got"]
    assert got["title"] == "Order 42: shipped" and got["num"] == 42
    assert got["id"] == 1 and got["status"] == "explicit" and got["extra"] == "E"


async def test_call_skill_template_missing_field_never_raises(echo_root):
    """authoring.md: call_skill 'Never raises' — a template naming a field the source lacks."""
    kw = {"source": {"a": 1}, "template": {"t": "{missing}"}}
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "echo", "input": {}, "kw": kw})
    assert env["ok"] is True
    assert isinstance(env["inner"], dict) and "ok" in env["inner"]


async def test_call_skill_failures_do_not_touch_turn_budget(echo_root):
    """decisions.md: 'call_skill runs skip result processors and the turn's failure budget.'"""
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="csb")
        for n in range(3):
            await yard.run("caller", {"target": "ret", "input": {"ret": FAIL, "n": n}}, turn=turn)
        env = await yard.run("ret", {"n": 9}, turn=turn)
    assert env["ok"] is True and not env.get("banned")
    assert turn.total_failures == 0


async def test_call_skill_depth_limit_envelope_shape(make_skill, skills_root):
    """authoring.md: 'calls nest at most 3 deep (a top-level skill → 1 → 2 → 3; the skill at depth 3 gets a failure
    when it calls)'."""
    chain = """
async def execute(i, c):
    nxt = i.get("chain", [])
    if not nxt:
        return {"ok": True, "leaf": True}
    r = await c["call_skill"](nxt[0], {"chain": nxt[1:]})
    return {"ok": True, "inner": r}
"""
    for n in ("d0", "d1", "d2", "d3", "d4"):
        make_skill(n, files={"handler.py": chain})
    async with yard_of(skills_root) as yard:
        ok = await yard.run("d0", {"chain": ["d1", "d2", "d3"]})
        too_deep = await yard.run("d0", {"chain": ["d1", "d2", "d3", "d4"]})
    assert ok["inner"]["inner"]["inner"]["leaf"] is True
    refused = too_deep["inner"]["inner"]["inner"]["inner"]
    assert_failure(refused)
    assert refused["skill"] == "d4"


async def test_call_skill_callee_db_session_independent(make_skill, skills_root, db_env):
    """Spec §9.1: '每次调用新开独立会话，子技能出错不会污染调用方事务'."""
    make_skill(
        "db_bad",
        files={
            "handler.py": """
        from sqlalchemy import text
        async def execute(i, ctx):
            await ctx["db"].execute(text("SELECT 1/0"))
            return {"ok": True}
    """
        },
    )
    make_skill(
        "db_caller",
        files={
            "handler.py": """
        from sqlalchemy import text
        async def execute(i, ctx):
            db = ctx["db"]
            await db.execute(text("SELECT 1"))
            r = await ctx["call_skill"]("db_bad", {})
            v = (await db.execute(text("SELECT 41 + 1"))).scalar()
            return {"ok": True, "inner_ok": r["ok"], "v": v}
    """
        },
    )
    async with yard_of(skills_root) as yard:
        env = await yard.run("db_caller", {})
    assert env["ok"] is True and env["inner_ok"] is False and env["v"] == 42


# ============================================================================ 7. hooks


async def test_exec_type_name_case_insensitive(make_skill, skills_root, plugin_reg):
    """hooks.md: '`name` is stored upper-cased and is what skills declare in `exec.primary.type`'."""

    class Ex:
        async def run(self, skill, input, ctx, *, yard):
            return {"by": "probe"}

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("probe_Mixed", Ex())

    plugin_reg(P(), "probe2-exec")
    make_skill("mx", frontmatter="name: mx\ndescription: m\nexec:\n  primary: {type: Probe_MIXED}")
    async with yard_of(skills_root) as yard:
        env = await yard.run("mx", {})
    assert env["ok"] is True and env["by"] == "probe"


@pytest.mark.parametrize(("ret", "expected"), [(None, {}), ("text", {"result": "text"}), ([1, 2], {"result": [1, 2]})])
async def test_executor_return_values_normalized(make_skill, skills_root, plugin_reg, ret, expected):
    """hooks.md: 'Return anything: the host normalizes it into an envelope'; issue: 'non-dict results wrapped as
    `{"result": …}`'."""

    class Ex:
        async def run(self, skill, input, ctx, *, yard):
            return ret

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("PROBE_RET", Ex())

    plugin_reg(P(), "probe2-ret")
    make_skill("rv", frontmatter="name: rv\ndescription: r\nexec:\n  primary: {type: PROBE_RET}")
    async with yard_of(skills_root) as yard:
        env = await yard.run("rv", {})
    assert env["ok"] is True
    for k, v in expected.items():
        assert env[k] == v


async def test_executor_gets_validated_input_and_context(make_skill, skills_root, plugin_reg):
    """hooks.md: '`input` the validated input, `ctx` the `runtime_context`'; credential parameters are 'removed from
    the caller's input, and filled in from the role's configs'."""
    seen: dict[str, Any] = {}

    class Ex:
        async def run(self, skill, input, ctx, *, yard):
            seen.update(input=dict(input), ctx_keys=set(ctx), yard=yard, skill=skill.name)
            return {"ok": True}

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("PROBE_SEE", Ex())

    plugin_reg(P(), "probe2-see")
    make_skill(
        "see",
        frontmatter="name: see\ndescription: s\nexec:\n  primary: {type: PROBE_SEE}",
        files={
            "schema.json": json.dumps(
                {"type": "object", "properties": {"q": {"type": "string"}, "api_token": {"type": "string"}}}
            )
        },
    )
    async with yard_of(skills_root) as yard:
        await yard.run("see", {"q": "x", "api_token": "FROM-MODEL"}, context={"skill_configs": {"api_token": "CFG"}})
        assert seen["yard"] is yard
    assert seen["input"].get("q") == "x" and seen["input"].get("api_token") in (None, "CFG")
    assert {"role_id", "session_id", "workspace_dir", "actor_name"} <= seen["ctx_keys"]


async def test_executor_registered_as_sync_hook_impl_module(make_skill, skills_root, plugin_reg):
    """hooks.md: plugins are 'a module (or object) with functions decorated with `skillyard.hookimpl`'."""
    import types

    mod = types.ModuleType("probe2_mod_plugin")

    class Ex:
        async def run(self, skill, input, ctx, *, yard):
            return {"mod": True}

    @hookimpl
    def register_exec_types(register):
        register("PROBE_MOD", Ex())

    mod.register_exec_types = register_exec_types  # type: ignore[attr-defined]
    plugin_reg(mod, "probe2-mod")
    make_skill("md", frontmatter="name: md\ndescription: m\nexec:\n  primary: {type: PROBE_MOD}")
    async with yard_of(skills_root) as yard:
        env = await yard.run("md", {})
    assert env["mod"] is True


def test_duplicate_result_processor_order_fails(skills_root, plugin_reg):
    """hooks.md: 'Two plugins ... with the same order number, make `SkillYard(...)` raise
    `skillyard.errors.DuplicateRegistration` with a message naming both plugins.'"""

    class A:
        @hookimpl
        def register_result_processors(self, register):
            register(777, "a-proc", lambda e, r: e)

    class B:
        @hookimpl
        def register_result_processors(self, register):
            register(777, "b-proc", lambda e, r: e)

    plugin_reg(A(), "probe2-pa")
    plugin_reg(B(), "probe2-pb")
    with pytest.raises(DuplicateRegistration) as info:
        SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert "probe2-pa" in str(info.value) and "probe2-pb" in str(info.value)


def test_duplicate_channel_fails(skills_root, plugin_reg):
    """hooks.md: 'A channel name registered twice fails at startup, naming both plugins.'"""

    class Ch:
        async def send(self, recipient, text, attachments):
            return None

    class A:
        @hookimpl
        def register_channels(self, register):
            register("probe-ch", Ch())

    class B:
        @hookimpl
        def register_channels(self, register):
            register("probe-ch", Ch())

    plugin_reg(A(), "probe2-ca")
    plugin_reg(B(), "probe2-cb")
    with pytest.raises(DuplicateRegistration) as info:
        SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert "probe2-ca" in str(info.value) and "probe2-cb" in str(info.value)


def test_duplicate_exec_type_case_insensitive(skills_root, plugin_reg):
    """hooks.md: '`name` is stored upper-cased'; 'Registering a name that is already registered fails at startup.'"""

    class Ex:
        async def run(self, skill, input, ctx, *, yard):
            return {}

    class A:
        @hookimpl
        def register_exec_types(self, register):
            register("probe_dup", Ex())

    class B:
        @hookimpl
        def register_exec_types(self, register):
            register("PROBE_DUP", Ex())

    plugin_reg(A(), "probe2-da")
    plugin_reg(B(), "probe2-db")
    with pytest.raises(DuplicateRegistration):
        SkillYard(skills_dirs=[skills_root], include_builtin=False)


async def test_channel_registered_is_in_yard_channels(skills_root, plugin_reg):
    """hooks.md: 'The host uses the registry (`yard.channels`, ...)'."""
    box = object()

    class Ch:
        async def send(self, recipient, text, attachments):
            return None

    ch = Ch()

    class P:
        @hookimpl
        def register_channels(self, register):
            register("probe-outbox", ch)

    plugin_reg(P(), "probe2-outbox")
    async with yard_of(skills_root) as yard:
        reg = yard.channels
        found = reg.get("probe-outbox") if hasattr(reg, "get") else reg["probe-outbox"]
    assert found is ch and found is not box


async def test_result_processors_ascending_order_sync_and_async(echo_root, plugin_reg):
    """hooks.md: '`processor(envelope, run)` may be sync or async'; 'Processors run in ascending `order`'."""
    trail: list[str] = []

    def late(envelope, run):
        trail.append("late")
        return {**envelope, "late": True}

    async def early(envelope, run):
        trail.append("early")
        return {**envelope, "early": run.skill.name, "depth": run.depth}

    class P:
        @hookimpl
        def register_result_processors(self, register):
            register(9901, "probe-late", late)
            register(9801, "probe-early", early)

    plugin_reg(P(), "probe2-proc")
    async with yard_of(echo_root) as yard:
        env = await yard.run("echo", {})
    assert trail == ["early", "late"] and env["late"] is True and env["early"] == "echo" and env["depth"] == 0


async def test_result_processor_not_run_on_refused_runs(echo_root, plugin_reg):
    """hooks.md: 'Processors run ... on runs that actually executed (not on runs refused by gating, input validation
    or the failure budget)'."""
    trail: list[str] = []

    def proc(envelope, run):
        trail.append(run.skill.name)
        return envelope

    class P:
        @hookimpl
        def register_result_processors(self, register):
            register(9902, "probe-refused", proc)

    plugin_reg(P(), "probe2-refused")
    async with yard_of(echo_root) as yard:
        await yard.run("notes__add", {})
        turn = yard.new_turn(session_id="pr")
        await yard.run("ret", {"ret": FAIL, "n": 1}, turn=turn)
        await yard.run("ret", {"ret": FAIL, "n": 2}, turn=turn)
        await yard.run("ret", {"n": 3}, turn=turn)
    assert trail == ["ret", "ret"]


async def test_result_processor_run_object_fields(echo_root, plugin_reg):
    """hooks.md: '`run` is a `skillyard.invoke.pipeline.Run` with `skill`, `subcommand`, `input`, `context`, `turn`,
    `depth` and `started` (epoch seconds)'."""
    seen: dict[str, Any] = {}

    def proc(envelope, run):
        seen.update(
            skill=run.skill.name,
            sub=run.subcommand,
            input=dict(run.input),
            ctx=run.context["session_id"],
            turn=run.turn,
            depth=run.depth,
            started=run.started,
        )
        return envelope

    class P:
        @hookimpl
        def register_result_processors(self, register):
            register(9903, "probe-fields", proc)

    plugin_reg(P(), "probe2-fields")
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="rf")
        await yard.run("notes__add", {"text": "hi"}, turn=turn)
    assert seen["skill"] == "notes" and seen["sub"] == "add" and seen["input"]["text"] == "hi"
    assert seen["ctx"] == "rf" and seen["turn"] is turn and seen["depth"] == 0
    assert isinstance(seen["started"], float) and seen["started"] > 1e9


async def test_result_processor_raising_is_not_a_traceback(echo_root, plugin_reg):
    """README: '`yard.run` ... always returns an envelope ... a skill's failures never raise' — a faulty processor
    plugin must not turn a run into an uncaught exception."""

    def bad(envelope, run):
        raise RuntimeError("processor broke")

    class P:
        @hookimpl
        def register_result_processors(self, register):
            register(9904, "probe-bad", bad)

    plugin_reg(P(), "probe2-badproc")
    async with yard_of(echo_root) as yard:
        try:
            env = await yard.run("echo", {})
        except SkillyardError:
            return
    assert isinstance(env, dict) and "ok" in env


async def test_extra_context_sync_dict_and_no_overwrite(echo_root, plugin_reg):
    """hooks.md: 'Returns extra `runtime_context` keys ...: a dict ... Keys the context already has are never
    overwritten.'"""

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            return {"tenant": "acme", "org_id": "EVIL", "channel": "EVIL", "actor_name": "EVIL"}

    plugin_reg(P(), "probe2-ec")
    async with yard_of(echo_root) as yard:
        ctx = (await yard.run("dump", {}, context={"org_id": "o1", "channel": "web"}))["ctx"]
    assert ctx["tenant"] == "acme" and ctx["org_id"] == "o1" and ctx["channel"] == "web"
    assert ctx["actor_name"] == ""


async def test_extra_context_none_and_callable(echo_root, plugin_reg):
    """hooks.md: 'a dict, a callable returning one, an awaitable, or `None`'."""

    class A:
        @hookimpl
        def extra_context(self, skill, context):
            return None

    class B:
        @hookimpl
        def extra_context(self, skill, context):
            return lambda: {"from_callable": skill.name}

    plugin_reg(A(), "probe2-ecn")
    plugin_reg(B(), "probe2-ecc")
    async with yard_of(echo_root) as yard:
        ctx = (await yard.run("dump", {}))["ctx"]
    assert ctx["from_callable"] == "dump"


async def test_extra_context_async_def_impl(echo_root, plugin_reg):
    """Issue: 'Async hook implementations must work (await what a hook returns when it is awaitable).'"""

    class P:
        @hookimpl
        async def extra_context(self, skill, context):
            await asyncio.sleep(0)
            return {"async_key": context["session_id"] or "none"}

    plugin_reg(P(), "probe2-eca")
    async with yard_of(echo_root) as yard:
        ctx = (await yard.run("dump", {}, context={"session_id": "aa"}))["ctx"]
    assert ctx["async_key"] == "aa"


async def test_extra_context_for_call_skill_runs(echo_root, plugin_reg):
    """hooks.md: 'Called for every run, `call_skill` runs included'."""
    names: list[str] = []

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            names.append(skill.name)
            return {"hooked": True}

    plugin_reg(P(), "probe2-eccs")
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "dump", "input": {}})
    assert names == ["caller", "dump"] and env["inner"]["ctx"]["hooked"] is True


async def test_extra_context_sees_configs(echo_root, plugin_reg):
    """hooks.md: 'Called ... after the platform fields and configs are in place.'"""
    seen: dict[str, Any] = {}

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            seen["units"] = context.get("units")
            seen["role"] = context.get("role_id")
            return None

    plugin_reg(P(), "probe2-eccfg")
    async with yard_of(echo_root) as yard:
        await yard.run("dump", {}, context={"role_id": "r9", "skill_configs": {"units": "metric"}})
    assert seen == {"units": "metric", "role": "r9"}


async def test_extra_context_raising_gives_envelope(echo_root, plugin_reg):
    """README: '`yard.run` ... always returns an envelope'. A raising extra_context hook must not escape as a bare
    exception."""

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            raise RuntimeError("hook broke")

    plugin_reg(P(), "probe2-ecr")
    async with yard_of(echo_root) as yard:
        try:
            env = await yard.run("echo", {})
        except SkillyardError:
            return
    assert isinstance(env, dict) and "ok" in env


async def test_extra_context_non_json_value_subprocess_ok(make_skill, skills_root, plugin_reg):
    """hooks.md: 'values that are not JSON-serializable are also left out of `SKILL_CONTEXT`'."""
    make_skill(
        "sub_ctx",
        frontmatter="name: sub_ctx\ndescription: s\nexec:\n  config: run.sh",
        files={"run.sh": 'printf "%s" "$SKILL_CONTEXT"\n'},
    )

    class P:
        @hookimpl
        def extra_context(self, skill, context):
            return {"opaque": object(), "plain": "P1", "_private": "HIDDEN"}

    plugin_reg(P(), "probe2-ecsub")
    async with yard_of(skills_root) as yard:
        env = await yard.run("sub_ctx", {})
    assert env["ok"] is True, env
    assert env["plain"] == "P1" and "opaque" not in env and "_private" not in env


async def test_skill_roots_none_missing_and_source(make_skill, tmp_path, skills_root, plugin_reg):
    """hooks.md: 'Returns a list of extra folders ..., or `None`'; 'Folders that do not exist are ignored'; 'their
    skills get `source: plugin` unless they declare one'."""
    proot = tmp_path / "proot"
    make_skill("plugged", files={"handler.py": OK_HANDLER}, root=proot)

    class A:
        @hookimpl
        def skill_roots(self, yard):
            return None

    class B:
        @hookimpl
        def skill_roots(self, yard):
            return [str(tmp_path / "nope"), str(proot)]

    plugin_reg(A(), "probe2-sra")
    plugin_reg(B(), "probe2-srb")
    async with yard_of(skills_root) as yard:
        env = await yard.run("plugged", {})
        skill = yard.skill("plugged")
    assert env["ok"] is True and skill.source == "plugin"


async def test_skill_roots_accept_path_objects(make_skill, tmp_path, skills_root, plugin_reg):
    """hooks.md example returns `str(Path(...))`; a plugin returning a `Path` must not crash the host."""
    proot = tmp_path / "proot2"
    make_skill("plugged2", files={"handler.py": OK_HANDLER}, root=proot)

    class P:
        @hookimpl
        def skill_roots(self, yard):
            return [proot]

    plugin_reg(P(), "probe2-srp")
    try:
        yard = yard_of(skills_root)
    except SkillyardError:
        return
    async with yard:
        env = await yard.run("plugged2", {})
    assert env["ok"] is True


def test_register_commands_plugin_command(plugin_reg, capsys):
    """hooks.md: 'Adds commands to the `skillyard` CLI. `cli` is the root `click.Group`; called before click parses the
    command line.'"""
    import click

    class P:
        @hookimpl
        def register_commands(self, cli):
            @cli.command(name="probe2-hello")
            @click.argument("who", default="world")
            def hello(who):
                click.echo(f"hello {who}")

    plugin_reg(P(), "probe2-cmd")
    from skillyard.cli import cli, main

    try:
        with pytest.raises(SystemExit) as info, pytest.MonkeyPatch.context() as mp:
            mp.setattr("sys.argv", ["skillyard", "probe2-hello", "Ada"])
            main()
        assert info.value.code in (0, None)
    finally:
        cli.commands.pop("probe2-hello", None)
    assert "hello Ada" in capsys.readouterr().out


def test_doctor_plugin_raising_is_fail_check(plugin_reg, db_env, skills_root):
    """hooks.md: 'a hook that raises, hangs or returns another shape becomes a `fail` check named
    `<plugin>.doctor_checks`, and the other plugins' checks still run.'"""

    class Bad:
        @hookimpl
        def doctor_checks(self, yard):
            raise RuntimeError("doctor broke")

    class Shape:
        @hookimpl
        def doctor_checks(self, yard):
            return {"not": "a list"}

    class Good:
        @hookimpl
        def doctor_checks(self, yard):
            async def go():
                return [{"name": "probe2.good", "status": "ok", "detail": "fine", "fix": None}]

            return go

    plugin_reg(Bad(), "probe2-bad")
    plugin_reg(Shape(), "probe2-shape")
    plugin_reg(Good(), "probe2-good")
    res = invoke("doctor", "--json", "--skills-dir", str(skills_root))
    data = json.loads(res.stdout)
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["probe2-bad.doctor_checks"]["status"] == "fail"
    assert checks["probe2-shape.doctor_checks"]["status"] == "fail"
    assert checks["probe2.good"]["status"] == "ok" and checks["probe2.good"]["plugin"] == "probe2-good"
    assert res.exit_code == 1


def test_doctor_plugin_returning_none(plugin_reg, db_env, skills_root):
    """hooks.md: 'Return a list of checks, or a callable or awaitable giving one, or `None`.'"""

    class P:
        @hookimpl
        def doctor_checks(self, yard):
            return None

    plugin_reg(P(), "probe2-dnone")
    res = invoke("doctor", "--json", "--skills-dir", str(skills_root))
    data = json.loads(res.stdout)
    assert not any(c["name"].startswith("probe2-dnone") for c in data["checks"])


# ============================================================================ 8. configs API


async def test_configs_set_get_unset_roundtrip(skills_root, db_env):
    """configuration.md: '`await yard.configs.set(role, skill, {...})`, `yard.configs.unset(...)`'; 'Keys are
    normalized: ... (`--api-token` → `api_token`). Case is kept.'"""
    async with yard_of(skills_root) as yard:
        await yard.configs.set("cr1", "wx", {"--api-token": "SECRETVALUE", "Units": "metric"})
        got = await yard.configs.get("cr1", "wx")
        assert got == {"api_token": "SECRETVALUE", "Units": "metric"}
        await yard.configs.unset("cr1", "wx", ["Units"])
        assert await yard.configs.get("cr1", "wx") == {"api_token": "SECRETVALUE"}
        await yard.configs.unset("cr1", "wx")
        assert await yard.configs.get("cr1", "wx") == {}


async def test_configs_credential_keys_encrypted_at_rest(skills_root, db_env):
    """configuration.md: 'A key containing `key`, `token`, `secret`, `password`, `credential` or `auth` (any case,
    anywhere in the name) is stored encrypted ... Other keys are stored as plain text.'"""
    from sqlalchemy import text

    values = {"MyAuthor": "AUTHORVAL1", "db_PASSWORD": "PWVAL12345", "units": "PLAINVAL1"}
    async with yard_of(skills_root) as yard:
        await yard.configs.set("enc1", "wx", values)
        async with await yard.database.session() as s:
            rows = (
                await s.execute(text("SELECT * FROM skillyard.skill_configs WHERE role_id = 'enc1' AND skill = 'wx'"))
            ).mappings()
            dump = {r["key"]: json.dumps({k: str(v) for k, v in r.items()}) for r in rows}
    assert "AUTHORVAL1" not in dump["MyAuthor"] and "PWVAL12345" not in dump["db_PASSWORD"]
    assert "PLAINVAL1" in dump["units"]


async def test_configs_role_scoping_no_fallback(skills_root, db_env):
    """configuration.md: 'there is no fallback from a role to the default role.'"""
    async with yard_of(skills_root) as yard:
        await yard.configs.set("", "wx2", {"units": "default-role"})
        assert await yard.configs.get("someone", "wx2") == {}
        assert await yard.configs.get("", "wx2") == {"units": "default-role"}


async def test_configs_wrong_secret_key_says_so(skills_root, db_env, monkeypatch):
    """configuration.md: 'reading them with another key fails with a message saying so (set them again, or restore
    the key)'."""
    from cryptography.fernet import Fernet

    monkeypatch.setenv("SKILLYARD_SECRET_KEY", Fernet.generate_key().decode())
    async with yard_of(skills_root) as yard:
        await yard.configs.set("wk", "wx3", {"api_key": "ORIGINAL"})
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", Fernet.generate_key().decode())
    async with yard_of(skills_root) as yard:
        with pytest.raises(SkillyardError, match=r"(?i)key"):
            await yard.configs.get("wk", "wx3")


async def test_configs_set_invalidates_cache_for_runs(make_skill, skills_root, db_env):
    """configuration.md: '`set` and `unset` through the same `SkillYard` ... drop that entry.'"""
    make_skill("cfgd", files={"handler.py": CTX_DUMP})
    async with yard_of(skills_root) as yard:
        await yard.configs.set("ci", "cfgd", {"units": "a"})
        assert (await yard.run("cfgd", {}, context={"role_id": "ci"}))["ctx"]["units"] == "a"
        await yard.configs.unset("ci", "cfgd", ["units"])
        ctx = (await yard.run("cfgd", {}, context={"role_id": "ci"}))["ctx"]
    assert "units" not in ctx


@pytest.mark.parametrize(
    ("role", "skill", "values"),
    [(None, "wx", {"a": "1"}), ("r", "", {"a": "1"}), ("r", None, {"a": "1"}), ("r", "wx", ["a=1"]), ("r", "wx", None)],
)
async def test_configs_set_bad_arguments(skills_root, db_env, role, skill, values):
    """Brief: bad arguments to `yard.configs.set` give a clear SkillyardError, never TypeError/AttributeError."""
    async with yard_of(skills_root) as yard:
        with pytest.raises(SkillyardError):
            await yard.configs.set(role, skill, values)


async def test_configs_set_empty_key_refused(skills_root, db_env):
    """configuration.md: 'Keys are normalized: surrounding `-` removed' — a key that normalizes to nothing is refused
    clearly."""
    async with yard_of(skills_root) as yard:
        with pytest.raises(SkillyardError):
            await yard.configs.set("r", "wx", {"--": "v"})


async def test_configs_set_non_string_value(skills_root, db_env):
    """configuration.md: 'Skill configs are key/value strings' — a number is stored as its text or refused clearly."""
    async with yard_of(skills_root) as yard:
        try:
            await yard.configs.set("nv", "wx", {"limit": 5})
        except SkillyardError:
            return
        assert (await yard.configs.get("nv", "wx"))["limit"] == "5"


async def test_configs_invalidate_sees_external_change(make_skill, skills_root, db_env):
    """configuration.md: 'Changes made elsewhere ... are seen after `yard.configs.invalidate(role_id=None,
    skill=None)`'."""
    make_skill("cfge", files={"handler.py": CTX_DUMP})
    async with yard_of(skills_root) as a, yard_of(skills_root) as b:
        await a.configs.set("ext", "cfge", {"units": "one"})
        assert (await b.run("cfge", {}, context={"role_id": "ext"}))["ctx"]["units"] == "one"
        await a.configs.set("ext", "cfge", {"units": "two"})
        b.configs.invalidate(role_id="ext")
        ctx = (await b.run("cfge", {}, context={"role_id": "ext"}))["ctx"]
    assert ctx["units"] == "two"


# ============================================================================ 9. attach


async def test_attach_registers_and_returns_refs(skills_root, db_env, tmp_path):
    """files-and-artifacts.md: '`yard.attach(session_id, [paths])` does the same from Python' — rows have `ref`,
    `type`, `filename`, `local_path`."""
    f = tmp_path / "photo.png"
    f.write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 32)
    g = tmp_path / "notes.txt"
    g.write_text("hello")
    async with yard_of(skills_root) as yard:
        items = await yard.attach("att1", [f, str(g)])
    assert [i["ref"] for i in items] == ["img_1", "file_1"]
    assert items[0]["filename"] == "photo.png" and Path(items[0]["local_path"]).is_absolute()


async def test_attach_missing_file_is_clear(skills_root, db_env, tmp_path):
    """Brief: attaching a path that does not exist gives a clear SkillyardError."""
    async with yard_of(skills_root) as yard:
        with pytest.raises(SkillyardError):
            await yard.attach("att2", [tmp_path / "missing.png"])


async def test_attach_unsafe_session_refused(skills_root, tmp_path):
    """files-and-artifacts.md: 'A session id must be 1–128 letters, digits, ... anything else is refused with that
    explanation.'"""
    f = tmp_path / "a.txt"
    f.write_text("x")
    async with yard_of(skills_root) as yard:
        with pytest.raises(SkillyardError):
            await yard.attach("../evil", [f])


async def test_attach_paths_as_single_string(skills_root, db_env, tmp_path):
    """Signature `attach(session_id, paths: Sequence[...])`: a bare string is a common mistake — it must not be
    iterated character by character."""
    f = tmp_path / "one.txt"
    f.write_text("x")
    async with yard_of(skills_root) as yard:
        try:
            items = await yard.attach("att3", str(f))
        except SkillyardError:
            return
    assert len(items) == 1 and items[0]["filename"] == "one.txt"
