"""Session attachments on a plain run: cached per process, kept true across processes by the generation file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from sqlalchemy import event

from skillyard import SkillYard

LISTER = """
async def execute(input, ctx):
    return {"refs": [a["ref"] for a in ctx["attachments"]]}
"""


def _lister(make_skill) -> None:
    make_skill("lister", files={"handler.py": LISTER})


async def _statements_during(yard: SkillYard, runs: int, context: dict[str, str]) -> list[str]:
    """The SQL the platform sends while ``runs`` runs of ``lister`` happen (the run log's own inserts left out)."""
    engine = await yard.database.engine()
    sent: list[str] = []

    def record(conn, cursor, statement, parameters, context_, executemany):
        if "skillyard.runs" not in statement:
            sent.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        for _ in range(runs):
            assert (await yard.run("lister", {}, context=context))["ok"] is True
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)
    return sent


async def test_a_plain_run_sends_no_query_once_warm(make_skill, skills_root, db_env):
    _lister(make_skill)
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        await yard.run("lister", {})  # the first run reads the configs and the session's attachments once
        assert await _statements_during(yard, 20, {}) == []
        assert await _statements_during(yard, 20, {"session_id": "s-plain"}) != []  # a new session: read once
        assert await _statements_during(yard, 20, {"session_id": "s-plain"}) == []


async def test_an_attachment_of_this_process_is_seen_by_its_next_run(make_skill, skills_root, db_env, tmp_path):
    _lister(make_skill)
    upload = tmp_path / "a.txt"
    upload.write_text("x", encoding="utf-8")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("lister", {}, context={"session_id": "s-own"}))["refs"] == []
        await yard.attach("s-own", [upload])
        assert (await yard.run("lister", {}, context={"session_id": "s-own"}))["refs"] == ["file_1"]


async def test_a_file_registered_by_another_process_is_seen_by_the_next_run(make_skill, skills_root, db_env, tmp_path):
    """The other process shares SKILLYARD_HOME and the database: its registration rewrites the session's
    generation file, so this process's cached (empty) list is not used again."""
    _lister(make_skill)
    upload = tmp_path / "b.txt"
    upload.write_text("y", encoding="utf-8")
    other = textwrap.dedent(
        f"""
        import asyncio, json
        from skillyard import SkillYard

        async def main():
            async with SkillYard(include_builtin=False) as yard:
                print(json.dumps(await yard.attach("s-shared", [{str(upload)!r}])))

        asyncio.run(main())
        """
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        for _ in range(3):
            assert (await yard.run("lister", {}, context={"session_id": "s-shared"}))["refs"] == []
        done = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)[0]["ref"] == "file_1"
        assert (await yard.run("lister", {}, context={"session_id": "s-shared"}))["refs"] == ["file_1"]


async def test_an_unreadable_generation_file_falls_back_to_the_database(make_skill, skills_root, db_env, home, tmp_path):
    _lister(make_skill)
    upload = tmp_path / "c.txt"
    upload.write_text("z", encoding="utf-8")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        await yard.attach("s-odd", [upload])
        generation = Path(home) / "attachments" / "s-odd"
        generation.unlink()
        generation.mkdir()  # a folder where the file should be: read fails, so every run asks the database
        assert (await yard.run("lister", {}, context={"session_id": "s-odd"}))["refs"] == ["file_1"]
        assert await _statements_during(yard, 2, {"session_id": "s-odd"}) != []
