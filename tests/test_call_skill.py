"""call_skill (§9.1): input priority, the context whitelist, fresh configs, depth, self-calls, never raising."""

from __future__ import annotations

import json
import textwrap

from skillyard import SkillYard

CALLEE = """
async def execute(input, ctx):
    plain = (str, int, float, bool, list, dict, type(None))
    return {"input": input, "ctx": {k: v for k, v in ctx.items() if isinstance(v, plain) and not k.startswith("_")}}
"""


def caller(body: str) -> str:
    return "async def execute(input, ctx):\n    call = ctx['call_skill']\n" + "".join(
        f"    {line}\n" for line in textwrap.dedent(body).strip().splitlines()
    )


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
    assert r["ctx"]["skill_args"] == {"region": "eu", "api_token": "callee-secret"}
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
    from skillyard import hookimpl
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
