"""Migrations (storage/migrate.py): run when a database is first opened, safe when several hosts or processes
open it at once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from skillyard import SkillYard
from support import REPO
from support.cli import cli_popen
from support.outputs_probes import attach_and_close, listed, make_files

MIGRATIONS = REPO / "platform" / "skillyard" / "storage" / "migrations" / "versions"


def head_revision() -> str:
    return max(p.name.split("_", 1)[0] for p in MIGRATIONS.glob("[0-9]*.py"))


async def _schema_state(url: str) -> tuple[list[str], set[str]]:
    import asyncpg

    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        versions = [r[0] for r in await conn.fetch("SELECT version_num FROM skillyard.alembic_version")]
        tables = {
            r[0]
            for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", "skillyard"
            )
        }
    finally:
        await conn.close()
    return versions, tables


async def test_two_hosts_migrate_the_same_database_concurrently(db_env):
    yards = [SkillYard(include_builtin=False) for _ in range(3)]
    await asyncio.gather(*(y.database.engine() for y in yards))
    for y in yards:
        await y.close()


async def test_first_open_of_an_empty_database_migrates_it_to_head(empty_database, tmp_path, yard_for):
    [upload] = make_files(tmp_path / "up", ["a.png"])
    async with yard_for() as yard:
        assert [i["ref"] for i in await yard.attach("fresh", [upload])] == ["img_1"]
    versions, tables = await _schema_state(empty_database)
    assert versions == [head_revision()]
    assert {"attachments", "skill_configs", "runs", "alembic_version"} <= tables


async def test_two_hosts_opening_an_empty_database_at_once_in_one_process(empty_database, tmp_path, yard_for):
    files = make_files(tmp_path / "up", ["a.png", "b.png"])
    async with yard_for() as one, yard_for() as two:
        got = await asyncio.gather(one.attach("twice", [files[0]]), two.attach("twice", [files[1]]))
    assert sorted(i["ref"] for batch in got for i in batch) == ["img_1", "img_2"]
    assert (await _schema_state(empty_database))[0] == [head_revision()]


def test_processes_opening_an_empty_database_at_once(empty_database, make_skill, skills_root, tmp_path):
    make_skill("noop", files={"handler.py": "def execute(i):\n    return {'ok': True}\n"})
    files = make_files(tmp_path / "up", [f"f{n}.pdf" for n in range(3)])
    # Separate processes racing on one database: what one process shares in memory cannot serialise them.
    procs = [cli_popen("artifacts", "--session", "racing", "--json") for _ in range(3)]
    procs += [
        cli_popen("run", "noop", "--skills-dir", str(skills_root), "--session", "racing", "--attach", str(f))
        for f in files
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, outs
    assert all("Traceback" not in err for _, err in outs), outs
    rows = asyncio.run(listed("racing"))
    assert sorted(r["ref"] for r in rows) == ["file_1", "file_2", "file_3"]
    assert asyncio.run(_schema_state(empty_database))[0] == [head_revision()]


def test_reopening_a_migrated_database_from_a_new_process_keeps_its_rows(empty_database, tmp_path):
    [upload] = make_files(tmp_path / "up", ["keep.png"])
    assert asyncio.run(attach_and_close("again", upload)) == ["img_1"]
    # A new process: migrations are remembered once per process (storage/migrate.py), so only a fresh process
    # opens the migrated database cold.
    proc = subprocess.run(
        [sys.executable, "-m", "skillyard", "artifacts", "--session", "again", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert [r["ref"] for r in json.loads(proc.stdout)] == ["img_1"]
