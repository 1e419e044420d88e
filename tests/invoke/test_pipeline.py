"""The run pipeline (invoke/pipeline.py): gating before a run, skills that may not run, unknown exec types, the
wall clock and abort_signal."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from skillyard import SkillYard
from support.outputs_probes import result_skill
from support.skills import OK_HANDLER, run_skill, write_raw


def _set_event() -> asyncio.Event:
    ev = asyncio.Event()
    ev.set()
    return ev


async def test_abort_signal_stops_a_cooperative_skill(make_skill, yard_for):
    make_skill(
        "loop",
        files={
            "handler.py": """
        import asyncio
        async def execute(input, ctx):
            for i in range(500):
                if ctx["abort_signal"].is_set():
                    return {"stopped_at": i}
                await asyncio.sleep(0.01)
            return {"stopped_at": None}
    """
        },
    )
    async with yard_for() as yard:
        abort = asyncio.Event()
        task = asyncio.create_task(yard.run("loop", context={"abort_signal": abort}))
        await asyncio.sleep(0.1)
        abort.set()
        env = await task
    assert env["stopped_at"] is not None and env["stopped_at"] < 100


async def test_missing_env_gives_needs_config_and_does_not_run(make_skill, skills_root, monkeypatch):
    monkeypatch.delenv("PRICE_API_KEY", raising=False)
    make_skill(
        "price",
        frontmatter="""
        name: price
        description: d
        metadata:
          openclaw:
            primaryEnv: PRICE_API_KEY
            requires:
              env: [PRICE_API_KEY, {name: OPTIONAL_X, required: false}]
    """,
        files={"handler.py": OK_HANDLER},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("price")
        assert env["ok"] is False and env["needs_config"] == ["PRICE_API_KEY"] and env["error_type"] == "config"
        configured = await yard.run("price", context={"skill_args": {"PRICE_API_KEY": "k"}})
        assert configured["ok"] is True
        monkeypatch.setenv("PRICE_API_KEY", "from-env")
        assert (await yard.run("price"))["ok"] is True


async def test_missing_bins_gate_except_for_container_skills(make_skill, skills_root):
    make_skill(
        "needs_bin",
        frontmatter="""
        name: needs_bin
        description: d
        metadata: {"openclaw": {"requires": {"bins": ["definitely-not-installed-xyz"]}}}
    """,
        files={"handler.py": OK_HANDLER},
    )
    make_skill(
        "container",
        frontmatter="""
        name: container
        description: d
        exec_mode: shell
        metadata: {"openclaw": {"requires": {"bins": ["definitely-not-installed-xyz"]}}}
    """,
        files={"handler.py": OK_HANDLER},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("needs_bin")
        assert env["ok"] is False and env["missing_bins"] == ["definitely-not-installed-xyz"]
        assert (await yard.run("container"))["ok"] is True


async def test_os_gate_is_not_bypassed_by_always(make_skill, skills_root):
    other = "win32" if sys.platform != "win32" else "linux"
    make_skill(
        "elsewhere",
        frontmatter=f"""
        name: elsewhere
        description: d
        metadata: {{"openclaw": {{"os": ["{other}"], "always": true}}}}
    """,
        files={"handler.py": OK_HANDLER},
    )
    make_skill(
        "always",
        frontmatter="""
        name: always
        description: d
        metadata: {"openclaw": {"always": true, "requires": {"env": ["NOPE_NOT_SET_ANYWHERE"]}}}
    """,
        files={"handler.py": OK_HANDLER},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("elsewhere")
        assert env["ok"] is False and env["os_supported"] is False
        assert (await yard.run("always"))["ok"] is True


async def test_skill_md_and_broken_skills_are_not_run(make_skill, skills_root):
    make_skill("doc")
    (skills_root / "broken").mkdir()
    (skills_root / "broken" / "SKILL.md").write_text("---\nname: broken\n")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        doc = await yard.run("doc")
        assert doc["ok"] is False and "skill_md" in doc["error"]
        broken = await yard.run("broken")
        assert broken["ok"] is False and "not terminated" in broken["error"]


async def test_wall_clock_applies_to_in_process_skills(make_skill, skills_root):
    make_skill(
        "slow",
        frontmatter="name: slow\ndescription: d\nexec:\n  timeout: 0.3",
        files={
            "handler.py": """
        import asyncio
        async def execute(input, ctx):
            await asyncio.sleep(30)
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("slow")
    assert env["ok"] is False and env["timed_out"] is True and "0.3" in env["error"]


async def test_global_wall_clock_setting(make_skill, skills_root, monkeypatch):
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", "0.2")
    make_skill(
        "slow",
        files={"handler.py": "import asyncio\nasync def execute(i, c):\n    await asyncio.sleep(30)\n"},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("slow"))["timed_out"] is True


async def test_stored_config_satisfies_requires_env(make_skill, skills_root, db_env, monkeypatch):
    monkeypatch.delenv("WEATHER_KEY", raising=False)
    make_skill(
        "w",
        frontmatter="name: w\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [WEATHER_KEY]",
        files={"handler.py": "async def execute(i, c):\n    return {}\n"},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("w", context={"role_id": "r"}))["needs_config"] == ["WEATHER_KEY"]
        await yard.configs.set("r", "w", {"WEATHER_KEY": "k"})
        assert (await yard.run("w", context={"role_id": "r"}))["ok"] is True


def test_error_skill_is_never_run(skills_root):
    """docs/authoring.md: 'A skill with a reading error (`error` in `skillyard list`) is never offered and never
    run.'"""
    write_raw(
        skills_root,
        "broken",
        '---\nname: broken\ndescription: d\nmetadata: {"openclaw": [[[\n---\n',
        files={"handler.py": "async def execute(i, c):\n    open('RAN', 'w').write('x')\n    return {'ok': True}\n"},
    )
    env = asyncio.run(run_skill(skills_root, "broken"))
    assert env["ok"] is False and env["success"] is False and env["error"]


async def test_needs_config_envelope_names_variables_and_skill_not_run(make_skill, skills_root, monkeypatch):
    """Issue: 'missing env ... → a `needs_config` envelope naming each missing variable, the skill not run'."""
    monkeypatch.delenv("NC_A", raising=False)
    monkeypatch.delenv("NC_B", raising=False)
    marker = skills_root / "ran.txt"
    make_skill(
        "nc",
        frontmatter="name: nc\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [NC_A, NC_B]",
        files={"handler.py": f"async def execute(i, c):\n    open({str(marker)!r}, 'w').write('x')\n    return {{}}\n"},
    )
    env = await run_skill(skills_root, "nc")
    assert env["ok"] is False and env["success"] is False
    assert sorted(env["needs_config"]) == ["NC_A", "NC_B"]
    assert "NC_A" in env["error"] and "NC_B" in env["error"]
    assert not marker.exists()


async def test_needs_config_satisfied_by_context_skill_configs(make_skill, skills_root, monkeypatch):
    """configuration.md: 'A caller may put a `skill_configs` or `skill_args` mapping in the context ... those values
    override the stored ones'."""
    monkeypatch.delenv("NC_C", raising=False)
    make_skill(
        "nc2",
        frontmatter="name: nc2\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [NC_C]",
        files={"handler.py": OK_HANDLER},
    )
    env = await run_skill(skills_root, "nc2", skill_configs={"NC_C": "v"})
    assert env["ok"] is True


async def test_missing_bins_envelope(make_skill, skills_root):
    """Issue: 'missing bins → the same for binaries'."""
    make_skill(
        "mb",
        frontmatter="name: mb\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      bins: [no_such_bin_q1]",
        files={"handler.py": OK_HANDLER},
    )
    env = await run_skill(skills_root, "mb")
    assert env["ok"] is False and env["missing_bins"] == ["no_such_bin_q1"]


@pytest.mark.parametrize("mode", ["shell", "runtime"])
async def test_exec_mode_skips_bins_check(make_skill, skills_root, mode):
    """Issue: 'missing bins → the same for binaries, except for skills with `exec_mode: shell` or `runtime`'."""
    make_skill(
        "em",
        frontmatter=f"name: em\ndescription: d\nexec_mode: {mode}\nmetadata:\n  openclaw:\n    requires:\n      bins: [no_such_bin_q2]",  # noqa: E501 (a skill file's text)
        files={"handler.py": OK_HANDLER},
    )
    env = await run_skill(skills_root, "em")
    assert env["ok"] is True


async def test_unknown_exec_type_config_failure_naming_known_types(make_skill, skills_root):
    """docs/authoring.md: 'A type no plugin registered answers a `config` failure naming the known types.'"""
    make_skill("unk", frontmatter="name: unk\ndescription: d\nexec:\n  primary:\n    type: TELEPATHY")
    env = await run_skill(skills_root, "unk")
    assert env["ok"] is False and env["error_type"] == "config" and "SHELL" in env["error"]


async def test_skill_md_run_is_config_failure(make_skill, skills_root):
    """docs/authoring.md: '`skill_md` ... `skillyard run` answers a `config` failure'."""
    make_skill("docsonly")
    env = await run_skill(skills_root, "docsonly")
    assert env["ok"] is False and env["error_type"] == "config"


async def test_non_async_skill_ignoring_abort_is_cancelled_at_wall_clock(make_skill, yard_for, monkeypatch):
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", "0.4")
    result_skill(make_skill, "stubborn", "await asyncio.sleep(10)\nreturn {'ok': True}")
    async with yard_for() as yard:
        start = time.monotonic()
        env = await yard.run("stubborn")
        took = time.monotonic() - start
    assert env["ok"] is False and env.get("timed_out") is True and took < 3


async def test_abort_signal_is_an_event_the_caller_sets(make_skill, yard_for):
    result_skill(
        make_skill,
        "poller",
        """
ev = ctx["abort_signal"]
assert isinstance(ev, asyncio.Event)
for n in range(300):
    if ev.is_set():
        return {"ok": True, "stopped": n}
    await asyncio.sleep(0.01)
return {"ok": True, "stopped": None}
""",
    )
    async with yard_for() as yard:
        plain = await yard.run("poller", {}, context={"abort_signal": _set_event()})
    assert plain["stopped"] == 0


async def test_setting_the_callers_abort_signal_mid_run_stops_a_polling_skill(make_skill, yard_for):
    result_skill(
        make_skill,
        "poller",
        """
for n in range(500):
    if ctx["abort_signal"].is_set():
        return {"ok": True, "stopped_after": n}
    await asyncio.sleep(0.01)
return {"ok": True, "stopped_after": None}
""",
    )
    stop = asyncio.Event()
    async with yard_for() as yard:
        asyncio.get_running_loop().call_later(0.2, stop.set)
        start = time.monotonic()
        env = await yard.run("poller", context={"abort_signal": stop})
    assert env["stopped_after"] is not None and time.monotonic() - start < 2
