"""The run log (storage/runlog.py): one row per real run, written behind the response, never inputs, outputs or
secrets."""

from __future__ import annotations

import json

from sqlalchemy import text

from skillyard import SkillYard
from support.outputs_probes import result_skill, sid, writer


async def _run_rows(database_url: str, session: str) -> list[str]:
    import asyncpg

    from support.datatable import asyncpg_dsn

    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        rows = await connection.fetch("SELECT row_to_json(r)::text AS j FROM skillyard.runs r")
    finally:
        await connection.close()
    return [r["j"] for r in rows if session in r["j"]]


async def test_run_log_is_written_in_batches_without_inputs(make_skill, skills_root, db_env):
    make_skill(
        "logged",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"ok": not input.get("fail"), "error": "nope" if input.get("fail") else None}
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        await yard.database.engine()
        async with await yard.database.session() as s:
            await s.execute(text("DELETE FROM skillyard.runs WHERE skill = 'logged'"))
            await s.commit()
        for i in range(5):
            await yard.run("logged", {"fail": i == 4, "password_hint": "hunter2"}, context={"session_id": "s9"})
    async with SkillYard(include_builtin=False) as yard, await yard.database.session() as s:
        rows = (
            await s.execute(text("SELECT ok, session_id FROM skillyard.runs WHERE skill = 'logged' ORDER BY id"))
        ).all()
        dump = str((await s.execute(text("SELECT * FROM skillyard.runs"))).all())
    assert [r.ok for r in rows] == [True, True, True, True, False]
    assert {r.session_id for r in rows} == {"s9"}
    assert "hunter2" not in dump


async def test_run_records_written(make_skill, skills_root, db_env):
    """Issue: 'run records written behind the response in batches'; configuration.md: 'one row per run: skill, role,
    session, ok, `error_type`, `exception_type`, `timed_out` ... Inputs, outputs and configs are never recorded.' 'not
    for runs refused by gating, input validation'."""
    from sqlalchemy import text

    make_skill(
        "rec1",
        files={
            "handler.py": "async def execute(i, c):\n    if i.get('boom'):\n        raise OSError('x')\n    return {'ok': True, 'out': 'OUTPUT-MARK'}\n",  # noqa: E501 (a skill file's text)
            "schema.json": json.dumps({"type": "object", "properties": {"boom": {}, "must": {}}, "required": ["must"]}),
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        await yard.run(
            "rec1",
            {"must": "INPUT-MARK"},
            context={"role_id": "rr", "session_id": "recs", "skill_configs": {"pw": "CONF-MARK"}},
        )
        await yard.run("rec1", {"must": "y", "boom": True}, context={"role_id": "rr", "session_id": "recs"})
        await yard.run("rec1", {"must": ""}, context={"role_id": "rr", "session_id": "recs"})
    async with SkillYard(include_builtin=False) as yard, await yard.database.session() as s:
        rows = (
            (
                await s.execute(
                    text("SELECT * FROM skillyard.runs WHERE skill = 'rec1' AND session_id = 'recs' ORDER BY id")
                )
            )
            .mappings()
            .all()
        )
    assert len(rows) == 2
    assert [r["ok"] for r in rows] == [True, False]
    assert rows[1]["exception_type"] == "OSError" and rows[0]["role_id" if "role_id" in rows[0] else "role"] == "rr"
    dump = str([dict(r) for r in rows])
    assert "INPUT-MARK" not in dump and "OUTPUT-MARK" not in dump and "CONF-MARK" not in dump


async def test_runs_that_produce_artifacts_are_logged_without_inputs_or_outputs(db_env, make_skill, yard_for):
    """configuration.md: `skillyard.runs`: "one row per run: skill, role, session, ok, … Inputs, outputs and configs
    are never recorded"."""
    writer(make_skill)
    session = sid("log")
    async with yard_for() as yard:
        await yard.run(
            "writer",
            {"files": {"marker-input-7731.png": "p"}, "result": {"ok": True, "note": "marker-output-5519"}},
            context={"session_id": session, "role_id": "r-log"},
        )
    rows = await _run_rows(db_env, session)
    assert len(rows) == 1, rows
    assert "writer" in rows[0] and "r-log" in rows[0]
    assert "marker-input-7731" not in rows[0] and "marker-output-5519" not in rows[0]


async def test_secrets_never_reach_the_run_log(db_env, make_skill, yard_for):
    """configuration.md: "Inputs, outputs and configs are never recorded"; authoring.md: credential values "are
    replaced by `***` in `error`" — a credential a failing skill echoes is in neither the envelope nor the log."""
    result_skill(
        make_skill,
        "leaky",
        """
token = ctx["skill_configs"]["leaky"]["api_token"]
(ws / "out.png").write_bytes(b"x")
raise RuntimeError("upstream rejected " + token)
""",
    )
    session = sid("secret")
    async with yard_for() as yard:
        await yard.configs.set("r-sec", "leaky", {"api_token": "tok-SUPERSECRET-4242"})
        env = await yard.run("leaky", context={"session_id": session, "role_id": "r-sec"})
    assert env["ok"] is False and "tok-SUPERSECRET-4242" not in json.dumps(env), env
    rows = await _run_rows(db_env, session)
    assert len(rows) == 1 and "SUPERSECRET" not in rows[0], rows


async def test_a_background_run_is_in_the_run_log(db_env, make_skill, yard_for, recording_channel):
    """configuration.md: "A record is written for every run that actually executed" — the background run of an
    async skill executed."""
    writer(make_skill, "bglog", frontmatter="name: bglog\ndescription: d\nasync: true")
    session = sid("bglog")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=session, channel="chat-t")
        await yard.run("bglog", {"files": {"x.png": "x"}}, turn=turn)
        await yard.background.drain()
    rows = await _run_rows(db_env, session)
    assert rows and all("bglog" in r for r in rows), rows
    assert any('"ok": true' in r.replace('":true', '": true') for r in rows), rows
