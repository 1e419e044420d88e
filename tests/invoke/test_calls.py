"""call_skill (§9.1, invoke/calls.py): input priority, the context whitelist, fresh configs, depth, self-calls,
never raising."""

from __future__ import annotations

import asyncio
import json
import textwrap

import pytest

from skillyard import SkillYard, hookimpl
from support.outputs_probes import result_skill
from support.skills import CALLER, FAIL, OK_HANDLER, SCHEMA_WHO, assert_failure, run_skill, shell_skill, yard_of

CALLEE = """
async def execute(input, ctx):
    plain = (str, int, float, bool, list, dict, type(None))
    return {"input": input, "ctx": {k: v for k, v in ctx.items() if isinstance(v, plain) and not k.startswith("_")}}
"""


def caller(body: str) -> str:
    return "async def execute(input, ctx):\n    call = ctx['call_skill']\n" + "".join(
        f"    {line}\n" for line in textwrap.dedent(body).strip().splitlines()
    )


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


async def test_priority_explicit_over_template_over_passthrough(make_skill, skills_root):
    make_skill(
        "callee",
        files={
            "handler.py": CALLEE,
            "schema.json": json.dumps(
                {"type": "object", "properties": {"a": {}, "b": {}, "c": {}, "d": {}, "e": {}, "region": {}}}
            ),
        },
    )
    make_skill(
        "caller",
        files={
            "handler.py": caller("""
        src = {"a": "pa", "b": "pb", "c": "pc", "d": "pd", "n": 7}
        r = await call("callee", {"a": "explicit"}, source=src, template={"a": "t{n}", "b": "t-{b}", "e": "{n}"},
                       passthrough=True, c="kw")
        return {"got": r["input"]}
    """)
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("caller", context={"skill_args": {"region": "caller-config"}})
    got = env["got"]
    assert got["a"] == "explicit" and got["c"] == "kw"
    assert got["b"] == "t-pb" and got["e"] == 7 and got["d"] == "pd"
    assert "region" not in got  # the caller's configs are never inherited


async def test_callee_context_is_exactly_the_whitelist(make_skill, skills_root):
    make_skill("callee", files={"handler.py": CALLEE})
    make_skill(
        "caller",
        files={
            "handler.py": caller("""
        r = await call("callee")
        return {"ctx": r["ctx"]}
    """)
        },
    )
    given = {
        "role_id": "r1",
        "session_id": "s1",
        "org_id": "o1",
        "team_role": "admin",
        "actor_emp_no": "E7",
        "actor_name": "Ann",
        "actor_id": "9",
        "raw_input": "secret user text",
        "emp_no": "E7",
        "custom_key": "x",
        "chat_mode": True,
        "allow_sql": False,
        "skill_args": {"api_token": "caller-secret", "plain": "p"},
    }
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        ctx = (await yard.run("caller", context=given))["ctx"]
    assert (ctx["role_id"], ctx["session_id"], ctx["org_id"], ctx["team_role"]) == ("r1", "s1", "o1", "admin")
    assert (ctx["actor_emp_no"], ctx["actor_name"], ctx["actor_id"]) == ("E7", "Ann", "9")
    assert ctx["chat_mode"] is True and ctx["allow_sql"] is False
    assert ctx["raw_input"] == "" and "emp_no" not in ctx and "custom_key" not in ctx
    assert "caller-secret" not in json.dumps(ctx) and "plain" not in ctx
    assert ctx["skill_args"] == {} and ctx["skill_configs"] == {"callee": {}}


async def test_callee_configs_are_looked_up_afresh(make_skill, skills_root, db_env):
    make_skill(
        "callee",
        files={
            "handler.py": CALLEE,
            "schema.json": json.dumps({"type": "object", "properties": {"region": {"type": "string"}}}),
        },
    )
    make_skill(
        "caller",
        files={
            "handler.py": caller("""
        r = await call("callee")
        return {"r": r}
    """)
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        await yard.configs.set("role-a", "callee", {"region": "eu", "api_token": "callee-secret"})
        await yard.configs.set("role-a", "caller", {"caller_only": "x"})
        r = (await yard.run("caller", context={"role_id": "role-a"}))["r"]
    # the callee saw its secret; what it returns to its caller has it masked (another skill's context)
    assert r["ctx"]["skill_args"] == {"region": "eu", "api_token": "***"}
    assert "caller_only" not in r["ctx"]
    assert r["input"] == {"region": "eu"}  # the callee's own configs fill what the caller left out


async def test_depth_limit_self_call_unknown_and_failures_never_raise(make_skill, skills_root):
    make_skill(
        "chain",
        files={
            "handler.py": caller("""
        depth = input.get("depth", 0)
        if depth == 0:
            return {"self": await call("chain", {"depth": 1}), "deep": await call("level1", {})}
        return {}
    """)
        },
    )
    for i in (1, 2, 3):
        make_skill(
            f"level{i}",
            files={
                "handler.py": caller(f"""
        r = await call("level{i + 1}", {{}})
        return {{"level": {i}, "next": r}}
        """)
            },
        )
    make_skill("level4", files={"handler.py": "async def execute(input, ctx):\n    return {'level': 4}\n"})
    make_skill(
        "raiser",
        files={
            "handler.py": caller("""
        return {"missing": await call("nope"), "bad": await call("level4", "not a dict"),
                "fails": await call("thrower")}
    """)
        },
    )
    make_skill("thrower", files={"handler.py": "async def execute(i, c):\n    raise RuntimeError('x')\n"})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("chain")
        raiser = await yard.run("raiser")
    assert env["self"]["ok"] is False and "cannot call itself" in env["self"]["error"]
    deep = env["deep"]  # chain(0) → level1(1) → level2(2) → level3(3) → level4 refused
    assert deep["level"] == 1 and deep["next"]["level"] == 2 and deep["next"]["next"]["level"] == 3
    refused = deep["next"]["next"]["next"]
    assert refused["ok"] is False and "limited to 3 levels" in refused["error"] and refused["skill"] == "level4"
    assert raiser["ok"] is True
    assert raiser["missing"] == {
        "ok": False,
        "success": False,
        "error": "call_skill: no skill named 'nope'",
        "skill": "nope",
    }
    assert "must be a dict" in raiser["bad"]["error"]
    assert raiser["fails"]["ok"] is False and raiser["fails"]["exception_type"] == "RuntimeError"


async def test_call_skill_results_skip_post_processing(make_skill, skills_root):
    from skillyard.plugins import pm

    class Tagger:
        @hookimpl
        def register_result_processors(self, register):
            register(500, "tagger", lambda env, run: {**env, "tagged": True})

    make_skill("leaf", files={"handler.py": "async def execute(i, c):\n    return {'leaf': True}\n"})
    make_skill(
        "top",
        files={
            "handler.py": caller("""
        return {"inner": await call("leaf")}
    """)
        },
    )
    plugin = Tagger()
    pm.register(plugin, name="tagger-test")
    try:
        async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
            env = await yard.run("top")
    finally:
        pm.unregister(plugin)
    assert env["tagged"] is True and "tagged" not in env["inner"]


async def test_each_call_gets_its_own_db_session(make_skill, skills_root, db_env):
    make_skill(
        "writer",
        files={
            "handler.py": """
        from sqlalchemy import text
        async def execute(input, ctx):
            db = ctx["db"]
            await db.execute(text("CREATE TABLE IF NOT EXISTS call_iso (v int)"))
            await db.commit()
            await db.execute(text("INSERT INTO call_iso VALUES (1)"))
            await db.commit()
            r = await ctx["call_skill"]("bad_sql")
            n = (await db.execute(text("SELECT count(*) FROM call_iso"))).scalar()
            return {"callee_ok": r["ok"], "rows": n, "same": r.get("session_id") == id(db)}
    """
        },
    )
    make_skill(
        "bad_sql",
        files={
            "handler.py": """
        from sqlalchemy import text
        async def execute(input, ctx):
            await ctx["db"].execute(text("SELECT * FROM no_such_table_xyz"))
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("writer")
    assert env["ok"] is True and env["callee_ok"] is False and env["rows"] >= 1


@pytest.mark.spec("§9.1")
async def test_call_skill_context_whitelist(chain_root):
    """Issue §9.1: 'The callee's context passes exactly the whitelist ... never the caller's
    `skill_configs`/`skill_args`/flat keys or invented keys such as `emp_no`.'"""
    env = await run_skill(
        chain_root,
        "caller",
        {"target": "callee", "input": {"a": 1}},
        role_id="r1",
        session_id="s1",
        org_id="o1",
        actor_emp_no="E7",
        emp_no="E7",
        org_name="Acme",
        channel="web",
        actor_name="Ada",
        skill_configs={"caller_secret_cfg": "CFGV"},
        raw_input="hello there",
    )
    inner = env["inner"]
    assert inner["ok"] is True, inner
    ctx = inner["ctx"]
    assert (
        ctx["role_id"],
        ctx["session_id"],
        ctx["org_id"],
        ctx["actor_emp_no"],
        ctx["channel"],
        ctx["actor_name"],
    ) == ("r1", "s1", "o1", "E7", "web", "Ada")
    assert "emp_no" not in ctx and "org_name" not in ctx and "caller_secret_cfg" not in ctx
    assert "CFGV" not in json.dumps(ctx)
    assert ctx.get("raw_input", "") == ""
    assert inner["input"] == {"a": 1}


async def test_call_skill_unknown_never_raises(chain_root):
    """Issue: 'the result is the callee's normalized output dict, or `{"ok": False, "error": …, "skill": name}` — it
    never raises.'"""
    env = await run_skill(chain_root, "caller", {"target": "nope_missing"})
    inner = env["inner"]
    assert inner["ok"] is False and inner["error"] and inner["skill"] == "nope_missing"


async def test_call_skill_self_refused(chain_root):
    """Issue: 'a skill calling itself directly is refused'."""
    env = await run_skill(chain_root, "caller", {"target": "caller", "input": {"target": "callee"}})
    assert env["ok"] is True and env["inner"]["ok"] is False and env["inner"]["error"]


async def test_call_skill_depth_limit(make_skill, skills_root):
    """Issue: 'At most 3 levels deep'; decisions: 'a skill at depth 3 cannot call further'."""
    for i in range(1, 6):
        make_skill(
            f"c{i}",
            files={
                "handler.py": f"""
            async def execute(i, ctx):
                r = await ctx["call_skill"]("c{i + 1}", {{}})
                return {{"level": {i}, "next": r}}
        """
            },
        )
    env = await run_skill(skills_root, "c1")
    chain, depth = env, 0
    while isinstance(chain, dict) and "next" in chain:
        chain = chain["next"]
        depth += 1
    assert chain["ok"] is False and depth == 4  # c1→c2→c3→c4, c4's call refused


async def test_call_skill_input_priority(chain_root):
    """Issue: 'priority explicit dict/kwargs > template (`{field}` filled from source) > passthrough (the whole
    source)'."""
    kw = {
        "source": {"a": "src-a", "b": "src-b", "c": "src-c", "n": 5},
        "template": {"a": "tpl-{b}", "b": "tpl-{c}", "num": "{n}"},
        "passthrough": True,
        "d": "kwarg-d",
    }
    env = await run_skill(chain_root, "caller", {"target": "callee", "input": {"a": "explicit"}, "kw": kw})
    got = env["inner"]["input"]
    assert got["a"] == "explicit" and got["b"] == "tpl-src-c" and got["c"] == "src-c" and got["d"] == "kwarg-d"
    assert got["num"] == 5


async def test_call_skill_exception_in_callee(make_skill, chain_root):
    """Issue: 'it never raises'."""
    make_skill("raiser", files={"handler.py": "async def execute(i, c):\n    raise OSError('io')\n"})
    env = await run_skill(chain_root, "caller", {"target": "raiser"})
    assert env["ok"] is True and env["inner"]["ok"] is False and env["inner"]["exception_type"] == "OSError"


async def test_call_skill_validation_failure_envelope(make_skill, chain_root):
    """Issue: 'it never raises'; call_skill returns failure envelopes (invalid input)."""
    make_skill("needy", files={"handler.py": OK_HANDLER, "schema.json": json.dumps(SCHEMA_WHO)})
    env = await run_skill(chain_root, "caller", {"target": "needy", "input": {}})
    assert env["inner"]["ok"] is False and env["inner"]["need_param"] == "who"


@pytest.mark.spec("§9.3")
async def test_call_skill_subprocess_callee(make_skill, chain_root):
    """docs/authoring.md §9.3 pattern: an in-process skill calls a subprocess skill through call_skill."""
    shell_skill(make_skill, "shcallee", 'echo \'{"ok": true, "v": 42}\'\n')
    env = await run_skill(chain_root, "caller", {"target": "shcallee"})
    assert env["inner"]["ok"] is True and env["inner"]["v"] == 42


@pytest.mark.spec("§9.1")
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


@pytest.mark.spec("§9.1")
async def test_call_skill_request_not_passed(echo_root):
    """Spec §9.1 whitelist does not contain `request`: '词表外的 ... 不透传'."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "dump", "input": {}}, context={"request": {"path": "/x"}})
    ctx = env["inner"]["ctx"]
    assert ctx.get("request") in (None, "<NoneType>")


@pytest.mark.spec("§9.1")
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


@pytest.mark.spec("§9.1")
async def test_call_skill_chat_mode_passed_in_turn(echo_root):
    """Spec §9.1: `chat_mode` is on the whitelist; decisions: '`true` for runs in a `yard.new_turn()`'."""
    async with yard_of(echo_root) as yard:
        turn = yard.new_turn(session_id="cm", channel="web")
        env = await yard.run("caller", {"target": "dump", "input": {}}, turn=turn)
    ctx = env["inner"]["ctx"]
    assert ctx["chat_mode"] is True and ctx["channel"] == "web" and ctx["session_id"] == "cm"


@pytest.mark.spec("§9.1")
async def test_call_skill_workspace_dir_passed(echo_root, tmp_path):
    """Spec §9.1: `workspace_dir` is on the whitelist."""
    ws = tmp_path / "ws"
    ws.mkdir()
    async with yard_of(echo_root) as yard:
        env = await yard.run("caller", {"target": "dump", "input": {}}, context={"workspace_dir": str(ws)})
    assert env["inner"]["ctx"]["workspace_dir"] == str(ws)


@pytest.mark.spec("§4.4")
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


@pytest.mark.spec("§9.1")
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


@pytest.mark.spec("§9.1")
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


@pytest.mark.spec("§9.1")
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


@pytest.mark.spec("§9.1")
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


@pytest.mark.spec("§9.1")
async def test_call_skill_child_sees_the_callers_abort_signal(make_skill, yard_for):
    """§9.1: abort_signal is passed to the callee (whitelist); setting it stops the whole chain."""
    result_skill(
        make_skill,
        "poller",
        """
for n in range(300):
    if ctx["abort_signal"] is not None and ctx["abort_signal"].is_set():
        return {"ok": True, "stopped": n}
    await asyncio.sleep(0.01)
return {"ok": True, "stopped": None}
""",
    )
    make_skill(
        "boss",
        files={
            "handler.py": "async def execute(i, ctx):\n    return {'inner': await ctx['call_skill']('poller', {})}\n"
        },
    )
    stop = asyncio.Event()
    stop.set()
    async with yard_for() as yard:
        env = await yard.run("boss", context={"abort_signal": stop})
    assert env["inner"]["stopped"] == 0, env
