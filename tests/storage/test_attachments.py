"""Session attachments in PostgreSQL (storage/attachments.py): reference ids per session and type, across hosts,
processes and concurrent runs; ``yard.attach``; the per-process cache a plain run reads, kept true across
processes by the generation file."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import event

from skillyard import SkillYard
from skillyard.errors import SkillyardError
from support.cli import cli_popen, invoke
from support.outputs_probes import listed, make_files, result_skill, sha, sid, writer
from support.skills import yard_of


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


async def test_refs_count_per_session_and_per_type(db_env, tmp_path, yard_for):
    a, b = sid("num-a"), sid("num-b")
    files = make_files(tmp_path / "up", ["p1.png", "d1.pdf", "p2.jpg", "s1.mp3", "v1.mp4", "d2.csv", "s2.wav"])
    async with yard_for() as yard:
        got_a = await yard.attach(a, files)
        got_b = await yard.attach(b, [files[1], files[0]])
    assert [i["ref"] for i in got_a] == ["img_1", "file_1", "img_2", "audio_1", "video_1", "file_2", "audio_2"]
    assert [i["ref"] for i in got_b] == ["file_1", "img_1"]


async def test_a_new_skillyard_on_the_same_database_continues_the_numbering(
    db_env, make_skill, skills_root, tmp_path, yard_for
):
    make_skill("noop", files={"handler.py": "def execute(i):\n    return {'ok': True}\n"})
    session = sid("cont")
    first, second, third = make_files(tmp_path / "up", ["a.png", "b.png", "c.png"])
    async with yard_for() as yard:
        assert [i["ref"] for i in await yard.attach(session, [first])] == ["img_1"]
    async with yard_for() as yard:  # a new host: a new engine, nothing remembered in memory
        assert [i["ref"] for i in await yard.attach(session, [second])] == ["img_2"]
        assert [i["ref"] for i in await yard.attach(session, [first])] == ["img_1"]  # registered: keeps its id
    proc = await asyncio.to_thread(
        invoke, "run", "noop", "--skills-dir", str(skills_root), "--session", session, "--attach", str(third)
    )
    assert proc.exit_code == 0 and "attached img_3: " in proc.stderr, proc.stderr


async def test_concurrent_runs_registering_at_once_get_distinct_refs(db_env, make_skill, yard_for):
    result_skill(
        make_skill,
        "draw",
        """
name = f"pic-{input['n']}.png"
(ws / name).write_bytes(b"png" * (input["n"] + 1))
await asyncio.sleep(0)
return {"ok": True, "local_path": str(ws / name)}
""",
    )
    session = sid("conc")
    async with yard_for() as one, yard_for() as two:  # two hosts, two connection pools, one database
        runs = [(one if n % 2 else two).run("draw", {"n": n}, context={"session_id": session}) for n in range(12)]
        envs = await asyncio.gather(*runs)
    refs = [e["ref"] for e in envs]
    assert sorted(refs, key=lambda r: int(r.split("_")[1])) == [f"img_{n}" for n in range(1, 13)], refs
    rows = await listed(session)
    assert len(rows) == 12 and len({r["ref"] for r in rows}) == 12


def test_two_processes_attaching_at_once_get_distinct_refs(db_env, make_skill, skills_root, tmp_path):
    make_skill("noop", files={"handler.py": "def execute(i):\n    return {'ok': True}\n"})
    session = sid("procs")
    files = make_files(tmp_path / "up", [f"p{n}.png" for n in range(4)])
    # Separate processes racing on one database: what one process shares in memory cannot serialise them.
    procs = [
        cli_popen("run", "noop", "--skills-dir", str(skills_root), "--session", session, "--attach", str(f))
        for f in files
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outs
    refs = sorted(line.split(":")[0].split()[-1] for _, err in outs for line in err.splitlines() if "attached" in line)
    assert refs == ["img_1", "img_2", "img_3", "img_4"], outs
    rows = asyncio.run(listed(session))
    assert sorted(r["local_path"] for r in rows) == sorted(str(f.resolve()) for f in files)


async def test_listing_describes_the_file_after_a_later_run_rewrites_it(db_env, make_skill, yard_for):
    """An artifact a later run writes again keeps its ref (docs: "A file already registered keeps its id"), but
    the row's size and sha256 are the file's: a listing must not describe content that no longer exists."""
    result_skill(
        make_skill,
        "report",
        """
(ws / "report.csv").write_text(input["text"])
return {"ok": True, "local_path": str(ws / "report.csv")}
""",
    )
    session = sid("rewrite")
    async with yard_for() as yard:
        first = await yard.run("report", {"text": "a,b\n"}, context={"session_id": session})
        second = await yard.run("report", {"text": "a,b\n1,2\n3,4\n"}, context={"session_id": session})
    assert first["ref"] == second["ref"] == "file_1"
    [row] = await listed(session)
    assert row["size"] == len("a,b\n1,2\n3,4\n")
    assert row["sha256"] == sha(b"a,b\n1,2\n3,4\n")


async def test_attach_refuses_unsafe_sessions_and_missing_files_and_registers_nothing(db_env, tmp_path, yard_for):
    [good] = make_files(tmp_path / "up", ["a.png"])
    session = sid("api")
    async with yard_for() as yard:
        with pytest.raises(Exception, match="safe name"):
            await yard.attach("../" + session, [good])
        with pytest.raises(Exception, match=r"no such file|does not exist"):
            await yard.attach(session, [good, tmp_path / "missing.png"])
        with pytest.raises(Exception, match=r"directory|folder|not a file|no such file"):
            await yard.attach(session, [tmp_path / "up"])
        assert await yard.attachments.for_session(session) == []


async def test_the_same_file_registered_at_once_by_two_hosts_is_one_attachment(db_env, tmp_path, yard_for):
    [photo] = make_files(tmp_path / "up", ["same.png"])
    session = sid("same")
    async with yard_for() as one, yard_for() as two:
        got = await asyncio.gather(*(y.attach(session, [photo]) for y in (one, two, one, two)))
    assert {batch[0]["ref"] for batch in got} == {"img_1"}
    assert [r["ref"] for r in await listed(session)] == ["img_1"]


async def test_refs_count_per_type_across_uploads_and_runs(db_env, make_skill, tmp_path, yard_for):
    """decisions.md: "Reference ids count per session and type (img_1, video_1, audio_1, file_1)" — an upload
    img_1, then a run's csv is file_1 (not file_2) and its png img_2."""
    writer(make_skill)
    session = sid("types")
    [upload] = make_files(tmp_path / "up", ["cover.png"])
    async with yard_for() as yard:
        await yard.attach(session, [upload])
        env = await yard.run(
            "writer",
            {
                "files": {"t.csv": "a", "p.png": "b"},
                "result": {"ok": True, "files": ["{ws}/t.csv"], "images": ["{ws}/p.png"]},
            },
            context={"session_id": session},
        )
    assert env["files"][0]["ref"] == "file_1" and env["images"][0]["ref"] == "img_2", env
    assert sorted(r["ref"] for r in await listed(session)) == ["file_1", "img_1", "img_2"]


async def test_attach_returns_the_documented_fields(db_env, tmp_path, yard_for):
    """docs: `yard.attach(session_id, [paths])` does the same as --attach; each row has "`ref`, `type`, `filename`,
    `local_path`, `url`, `size`, `sha256`, `skill` (empty for uploads) and `created_at`"."""
    [upload] = make_files(tmp_path / "up", ["clip.mp4"])
    async with yard_for() as yard:
        [row] = await yard.attach(sid("pyatt"), [upload])
    assert {"ref", "type", "filename", "local_path", "url", "size", "sha256", "skill", "created_at"} <= set(row)
    assert row["ref"] == "video_1" and row["type"] == "video" and row["skill"] == ""
    assert row["sha256"] == sha(upload.read_bytes()) and row["size"] == upload.stat().st_size


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


async def test_an_unreadable_generation_file_falls_back_to_the_database(
    make_skill, skills_root, db_env, home, tmp_path
):
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
