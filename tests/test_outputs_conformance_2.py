"""Second review round for issue 3 (files in, artifacts out): black-box probes through the public interfaces
(SkillYard.run / turns / attach, the CLI in real subprocesses, runtime_context) of what the first round
(tests/test_outputs_conformance.py) left out: attachments in PostgreSQL (numbering, processes, concurrency, the
per-turn cache), Alembic on first open, --attach, reference substitution, URL materialization details, safe
output, and async skills (§8). Real PostgreSQL (db_env), real files, real HTTP servers bound to 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpcore
import pytest

from skillyard import safe_write
from support import REPO
from support.cli import cli_popen, invoke
from support.outputs_probes import (
    HTML,
    JSON_BODY,
    PNG,
    URLS,
    attach_and_close,
    echo_skill,
    files_in,
    listed,
    make_files,
    result_skill,
    sha,
    sid,
)

MIGRATIONS = REPO / "platform" / "skillyard" / "storage" / "migrations" / "versions"


# --- skills -----------------------------------------------------------------------------------------------------


# =================================================================================================================
# Attachments in PostgreSQL: reference ids per session and type, across processes, under concurrency
# =================================================================================================================


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


async def test_artifacts_json_fields_have_documented_types(db_env, make_skill, skills_root, tmp_path, yard_for):
    """docs/cli.md: ref, type, filename, local_path, url, size, sha256, skill (empty for uploads) and created_at
    (ISO 8601, UTC), for uploads and for files a skill produced alike."""
    result_skill(
        make_skill,
        "draw",
        """
(ws / "out.png").write_bytes(b"drawn")
return {"ok": True, "local_path": str(ws / "out.png")}
""",
    )
    session = sid("json")
    [upload] = make_files(tmp_path / "up", ["voice memo.mp3"])
    async with yard_for() as yard:
        await yard.attach(session, [upload])
        drawn = await yard.run("draw", context={"session_id": session})
    proc = await asyncio.to_thread(invoke, "artifacts", "--session", session, "--json")
    assert proc.exit_code == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["ref"] for r in rows] == ["audio_1", "img_1"]
    up, art = rows
    assert up["type"] == "audio" and up["filename"] == "voice memo.mp3" and up["skill"] == ""
    assert up["local_path"] == str(upload.resolve()) and up["size"] == upload.stat().st_size
    assert up["sha256"] == sha(upload.read_bytes())
    assert art["type"] == "image" and art["skill"] == "draw" and art["local_path"] == drawn["local_path"]
    assert art["size"] == 5 and art["sha256"] == sha(b"drawn") and art["filename"] == "out.png"
    for row in rows:
        assert not row["url"]
        stamp = dt.datetime.fromisoformat(row["created_at"])
        assert stamp.utcoffset() == dt.timedelta(0)
        assert abs((dt.datetime.now(dt.UTC) - stamp).total_seconds()) < 300


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


# --- runtime_context["attachments"] -----------------------------------------------------------------------------


CONTEXT_KEYS = {"type", "att_type", "filename", "local_path", "url", "ref"}


async def test_context_attachments_follow_4_7_plus_ref_in_turn_and_next_turn(db_env, make_skill, tmp_path, yard_for):
    """§4.7 items (type, att_type, filename, local_path, url; empty strings, not null) plus ref: for an upload, for
    an artifact added to the turn by an earlier run, and the same items when read from the database next turn."""
    echo_skill(make_skill)
    result_skill(
        make_skill,
        "draw",
        """
(ws / "chart.png").write_bytes(b"chart")
return {"ok": True, "images": [{"local_path": str(ws / "chart.png"), "url": "https://cdn.example/chart.png"}]}
""",
    )
    session = sid("ctx")
    [upload] = make_files(tmp_path / "up", ["报销单.pdf"])
    async with yard_for() as yard:
        await yard.attach(session, [upload])
        turn = yard.new_turn(session_id=session, channel="web")
        await yard.run("draw", turn=turn)
        same = (await yard.run("echo", turn=turn))["attachments"]
        later = (await yard.run("echo", turn=yard.new_turn(session_id=session, channel="web")))["attachments"]
    assert same == later, (same, later)
    assert [a["ref"] for a in later] == ["file_1", "img_1"]
    for item in later:
        assert set(item) == CONTEXT_KEYS, item
        assert item["type"] == item["att_type"] and isinstance(item["url"], str)
    doc, chart = later
    assert doc == {
        "type": "file",
        "att_type": "file",
        "filename": "报销单.pdf",
        "local_path": str(upload.resolve()),
        "url": "",
        "ref": "file_1",
    }
    assert chart["type"] == "image" and chart["filename"] == "chart.png"
    assert chart["url"] == "https://cdn.example/chart.png"


async def _insert_row(database_url: str, session: str, path: Path) -> None:
    import asyncpg

    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(
            "INSERT INTO skillyard.attachments (session_id, ref, type, filename, local_path) "
            "VALUES ($1, $2, $3, $4, $5)",
            session,
            "file_9",
            "file",
            path.name,
            str(path),
        )
    finally:
        await conn.close()


async def test_attachments_are_read_once_per_turn(db_env, make_skill, tmp_path, yard_for):
    """Issue: "A session's attachments are read once per turn and cached". A row that appears in the database
    between two runs of one turn (another process registered it) is seen from the next turn on, not mid-turn."""
    echo_skill(make_skill)
    session = sid("cache")
    [upload, other] = make_files(tmp_path / "up", ["a.png", "b.pdf"])
    async with yard_for() as yard:
        await yard.attach(session, [upload])
        turn = yard.new_turn(session_id=session, channel="web")
        first = await yard.run("echo", {"n": 1}, turn=turn)
        await _insert_row(db_env, session, other)
        second = await yard.run("echo", {"n": 2}, turn=turn)
        fresh = await yard.run("echo", {"n": 3}, turn=yard.new_turn(session_id=session, channel="web"))
    assert [a["ref"] for a in first["attachments"]] == ["img_1"]
    assert [a["ref"] for a in second["attachments"]] == ["img_1"]
    assert [a["ref"] for a in fresh["attachments"]] == ["img_1", "file_9"]


async def test_a_skill_changing_its_attachments_list_does_not_change_the_turns(db_env, make_skill, tmp_path, yard_for):
    """The cached list belongs to the turn; one run's context is that run's. A skill that edits
    ctx["attachments"] (pops, appends) must not hide the session's files from the next run of the same turn."""
    make_skill(
        "greedy",
        files={"handler.py": "async def execute(i, ctx):\n    ctx['attachments'].clear()\n    return {'ok': True}\n"},
    )
    echo_skill(make_skill)
    session = sid("mut")
    [upload] = make_files(tmp_path / "up", ["a.png"])
    async with yard_for() as yard:
        await yard.attach(session, [upload])
        turn = yard.new_turn(session_id=session, channel="web")
        await yard.run("greedy", turn=turn)
        env = await yard.run("echo", {"image": "img_1"}, turn=turn)
    assert [a["ref"] for a in env["attachments"]] == ["img_1"]
    assert env["got"]["image"] == str(upload.resolve())


# =================================================================================================================
# Alembic: migrations run when the database is first opened; opening at once from several places is safe
# =================================================================================================================


def head_revision() -> str:
    return max(p.name.split("_", 1)[0] for p in MIGRATIONS.glob("[0-9]*.py"))


@pytest.fixture
async def fresh_database(db_env, monkeypatch):
    """A brand-new, empty database on the session's PostgreSQL server; SKILLYARD_DATABASE_URL points at it."""
    import asyncpg
    from sqlalchemy.engine import make_url

    name = "r2_" + uuid.uuid4().hex[:12]
    admin = await asyncpg.connect(db_env.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = make_url(db_env).set(database=name).render_as_string(hide_password=False)
        monkeypatch.setenv("SKILLYARD_DATABASE_URL", url)
        yield url
    finally:
        with contextlib.suppress(Exception):
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


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


async def test_first_open_of_an_empty_database_migrates_it_to_head(fresh_database, tmp_path, yard_for):
    [upload] = make_files(tmp_path / "up", ["a.png"])
    async with yard_for() as yard:
        assert [i["ref"] for i in await yard.attach("fresh", [upload])] == ["img_1"]
    versions, tables = await _schema_state(fresh_database)
    assert versions == [head_revision()]
    assert {"attachments", "skill_configs", "runs", "alembic_version"} <= tables


async def test_two_hosts_opening_an_empty_database_at_once_in_one_process(fresh_database, tmp_path, yard_for):
    files = make_files(tmp_path / "up", ["a.png", "b.png"])
    async with yard_for() as one, yard_for() as two:
        got = await asyncio.gather(one.attach("twice", [files[0]]), two.attach("twice", [files[1]]))
    assert sorted(i["ref"] for batch in got for i in batch) == ["img_1", "img_2"]
    assert (await _schema_state(fresh_database))[0] == [head_revision()]


def test_processes_opening_an_empty_database_at_once(fresh_database, make_skill, skills_root, tmp_path):
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
    assert asyncio.run(_schema_state(fresh_database))[0] == [head_revision()]


def test_reopening_a_migrated_database_from_a_new_process_keeps_its_rows(fresh_database, tmp_path):
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


# =================================================================================================================
# CLI: skillyard run … --session ID --attach PATH…  and  skillyard artifacts (real subprocesses)
# =================================================================================================================


@pytest.fixture
def cli_echo(make_skill, skills_root):
    echo_skill(make_skill)
    return str(skills_root)


def test_cli_attach_prints_ids_on_stderr_and_the_ref_works_in_input(db_env, cli_echo, tmp_path):
    session = sid("cli")
    photo, notes = make_files(tmp_path / "my uploads", ["cat photo.jpg", "notes.txt"])
    proc = invoke(
        "run", "echo", "--skills-dir", cli_echo, "--session", session, "--attach", str(photo), "--attach", str(notes),
        "--input", json.dumps({"image": "img_1", "files": ["file_1", "img_1"], "command": "wc -c file_1 img_1"}),
    )  # fmt: skip
    assert proc.exit_code == 0, proc.stderr
    assert f"attached img_1: {photo.resolve()}" in proc.stderr.splitlines()
    assert f"attached file_1: {notes.resolve()}" in proc.stderr.splitlines()
    got = json.loads(proc.stdout)["got"]
    assert got["image"] == str(photo.resolve())
    assert got["files"] == [str(notes.resolve()), str(photo.resolve())]
    assert got["command"] == f"wc -c '{notes.resolve()}' '{photo.resolve()}'"


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_cli_attach_of_a_missing_file_or_a_directory_is_a_clear_usage_error(db_env, cli_echo, tmp_path, kind):
    session = sid("clibad")
    target = tmp_path / ("nope.png" if kind == "missing" else "a folder")
    if kind == "directory":
        target.mkdir()
    proc = invoke("run", "echo", "--skills-dir", cli_echo, "--session", session, "--attach", str(target))
    assert proc.exit_code == 2, (proc.exit_code, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert str(target) in proc.stderr
    assert ("does not exist" if kind == "missing" else "directory") in proc.stderr
    assert asyncio.run(listed(session)) == []


def test_cli_attach_without_a_session_is_a_usage_error(db_env, cli_echo, tmp_path):
    [photo] = make_files(tmp_path / "up", ["a.png"])
    proc = invoke("run", "echo", "--skills-dir", cli_echo, "--attach", str(photo))
    assert proc.exit_code == 2 and "--session" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_attach_one_good_one_missing_registers_nothing(db_env, cli_echo, tmp_path):
    """A usage error stops the command before the run; no half of the uploads is left registered."""
    session = sid("clihalf")
    [photo] = make_files(tmp_path / "up", ["a.png"])
    proc = invoke(
        "run", "echo", "--skills-dir", cli_echo, "--session", session,
        "--attach", str(photo), "--attach", str(tmp_path / "missing.pdf"),
    )  # fmt: skip
    assert proc.exit_code == 2 and "Traceback" not in proc.stderr
    assert asyncio.run(listed(session)) == []


def test_cli_artifacts_table_and_unsafe_session(db_env, tmp_path):
    session = sid("table")
    [photo] = make_files(tmp_path / "up", ["a b.png"])
    asyncio.run(attach_and_close(session, photo))
    table = invoke("artifacts", "--session", session)
    assert table.exit_code == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["REF", "TYPE", "FILENAME", "SIZE", "SKILL", "PATH"]
    assert row.startswith("img_1") and "(upload)" in row and str(photo.resolve()) in row
    empty = invoke("artifacts", "--session", sid("none"), "--json")
    assert empty.exit_code == 0 and json.loads(empty.stdout) == []
    bad = invoke("artifacts", "--session", "../etc", "--json")
    assert bad.exit_code == 2 and "not a safe name" in bad.stderr and "Traceback" not in bad.stderr


# =================================================================================================================
# Attachment references in input (§3.3)
# =================================================================================================================

TRICKY_NAMES = ["my photo.png", "it's mine.png", "a$HOME b.png", "semi;colon&.png", "中文 图片.png", 'say "hi".png']


@pytest.mark.parametrize("style", ["bare", "double", "single", "option"])
async def test_substituted_shell_command_names_the_file_for_a_posix_shell(
    db_env, make_skill, tmp_path, yard_for, style
):
    """§3.3: substrings in code fields become POSIX paths, quoted when they contain spaces — so the command a
    shell runs names exactly the attached file, whatever the name and however the author quoted the id."""
    echo_skill(make_skill)
    session = sid("sh")
    files = make_files(tmp_path / "up dir", TRICKY_NAMES)
    command = {"bare": "cat {ref}", "double": 'cat "{ref}"', "single": "cat '{ref}'", "option": "cat --  {ref}"}[style]
    async with yard_for() as yard:
        refs = [i["ref"] for i in await yard.attach(session, files)]
        for ref, path in zip(refs, files, strict=True):
            env = await yard.run("echo", {"bash": command.format(ref=ref)}, context={"session_id": session})
            proc = await asyncio.to_thread(subprocess.run, ["sh", "-c", env["got"]["bash"]], capture_output=True)
            assert proc.returncode == 0 and proc.stdout == path.read_bytes(), (path.name, env["got"]["bash"])


async def test_refs_are_whole_tokens_and_each_id_gets_its_own_file(db_env, make_skill, tmp_path, yard_for):
    echo_skill(make_skill)
    session = sid("tok")
    files = make_files(tmp_path / "up", [f"p{n}.png" for n in range(1, 12)])
    async with yard_for() as yard:
        await yard.attach(session, files)
        env = await yard.run(
            "echo",
            {"script": "cp img_1 img_10 img_11; ls img_1.png out/img_1/ my_img_1 img_12", "code": "f(img_1,img_2)"},
            context={"session_id": session},
        )
    p = {n: str(files[n - 1].resolve()) for n in (1, 2, 10, 11)}
    assert env["got"]["script"] == f"cp {p[1]} {p[10]} {p[11]}; ls img_1.png out/img_1/ my_img_1 img_12"
    assert env["got"]["code"] == f"f({p[1]},{p[2]})"


async def test_refs_of_another_session_are_not_substituted(db_env, make_skill, tmp_path, yard_for):
    echo_skill(make_skill)
    mine, theirs = sid("mine"), sid("theirs")
    [secret] = make_files(tmp_path / "theirs", ["secret.png"])
    [own] = make_files(tmp_path / "mine", ["own.pdf"])
    raw = {"image": "img_1", "files": ["img_1", "file_1"], "cmd": "cat img_1 file_1", "note": "img_1"}
    async with yard_for() as yard:
        await yard.attach(theirs, [secret])
        await yard.attach(mine, [own])
        env = await yard.run("echo", raw, context={"session_id": mine})
        turn = yard.new_turn(session_id=mine, channel="web")
        in_turn = await yard.run("echo", raw, turn=turn)
    for got in (env["got"], in_turn["got"]):
        assert str(secret.resolve()) not in json.dumps(got)
        assert got["cmd"] == f"cat img_1 {own.resolve()}"
        assert got["files"] == ["img_1", str(own.resolve())]


async def test_an_artifact_of_another_session_made_during_a_turn_is_not_a_ref_of_the_turns_session(
    db_env, make_skill, yard_for
):
    """A run inside a turn may name another session (context overrides the turn's). What it registers belongs to
    that other session; the turn's own session must not resolve img_1 to it."""
    echo_skill(make_skill)
    result_skill(
        make_skill,
        "draw",
        """
(ws / "x.png").write_bytes(b"x")
return {"ok": True, "local_path": str(ws / "x.png")}
""",
    )
    mine, other = sid("turn-a"), sid("turn-b")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=mine, channel="web")
        await yard.run("echo", turn=turn)
        drawn = await yard.run("draw", turn=turn, context={"session_id": other})
        env = await yard.run("echo", {"cmd": "cat img_1"}, turn=turn)
    assert drawn["ref"] == "img_1" and other in drawn["local_path"]
    assert env["got"]["cmd"] == "cat img_1", env["got"]
    assert env["attachments"] == []


@pytest.mark.parametrize(
    "value, expected",
    [
        ({"clips": [{"src": "video_1", "start": 0}, {"src": "video_1", "start": 5}]}, "clips"),
        ({"options": {"reference_image": "img_1"}}, "options"),
        ({"steps": [{"cmd": "ffmpeg -i video_1 out.mp4"}]}, "steps"),
    ],
    ids=["object-items-of-an-array", "nested-object", "code-field-inside-an-array"],
)
async def test_refs_inside_nested_objects_are_substituted(db_env, make_skill, tmp_path, yard_for, value, expected):
    """§3.3: "字段值或数组项精确等于引用 ID → 替换成真实 local_path" and code fields are replaced inside; a field of
    an object in an array (clips: [{src: video_1}]) is a field value all the same."""
    echo_skill(make_skill)
    session = sid("nest")
    [clip] = make_files(tmp_path / "up", ["clip.mp4"])
    [photo] = make_files(tmp_path / "up", ["ref.png"])
    async with yard_for() as yard:
        await yard.attach(session, [clip, photo])
        env = await yard.run("echo", value, context={"session_id": session})
    text = json.dumps(env["got"][expected])
    assert "video_1" not in text and "img_1" not in text, text
    assert str(clip.resolve()) in text or str(photo.resolve()) in text


# =================================================================================================================
# URL materialization details (§6.3 step 1)
# =================================================================================================================


def cd_url(server: str, disposition: str, name: str = "x") -> str:
    return f"{server}/cd/{name}?v={quote(disposition)}"


async def test_content_disposition_filename_star_is_decoded(db_env, make_skill, yard_for, server, allow_private):
    result_skill(make_skill, "urls", URLS)
    url = cd_url(server, "attachment; filename*=UTF-8''%E6%8A%A5%E5%91%8A%202024.png")
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "file_url": url}}, context={"session_id": sid("cd1")})
    [item] = env["images"]
    assert item["filename"] == "报告 2024.png" and Path(item["local_path"]).name == "报告 2024.png"


async def test_content_disposition_filename_star_wins_over_plain_filename(
    db_env, make_skill, yard_for, server, allow_private
):
    """RFC 6266 §4.3 (the header RFC 5987 parameters live in): when both filename and filename* are present,
    recipients pick filename* — servers send both so that old clients get an ASCII fallback."""
    result_skill(make_skill, "urls", URLS)
    url = cd_url(server, "attachment; filename=\"report.png\"; filename*=UTF-8''%E6%8A%A5%E5%91%8A.png")
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "file_url": url}}, context={"session_id": sid("cd2")})
    [item] = env["images"]
    assert item["filename"] == "报告.png", item


UNSAFE_DISPOSITIONS = [
    'attachment; filename="../../../etc/cron.d/evil.png"',
    'attachment; filename=".bashrc.png"',
    'attachment; filename="..\\\\..\\\\win.png"',
    'attachment; filename="/abs/path.png"',
    "attachment; filename*=UTF-8''..%2F..%2Fup.png",
    'attachment; filename="' + "n" * 400 + '.png"',
    'attachment; filename=".."',
]


async def test_unsafe_download_names_stay_plain_visible_files_in_the_workspace(
    db_env, make_skill, yard_for, server, allow_private, home
):
    result_skill(make_skill, "urls", URLS)
    session = sid("unsafe")
    urls = [cd_url(server, d, name=f"u{n}") for n, d in enumerate(UNSAFE_DISPOSITIONS)]
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "image_urls": urls}}, context={"session_id": session})
    ws = home / "workspaces" / session
    items = env["images"]
    assert len(items) == len(urls) and not env.get("warnings")
    for item in items:
        path = Path(item["local_path"])
        assert path.parent == ws and path.read_bytes() == PNG
        assert not path.name.startswith(".") and len(path.name.encode()) <= 255, path.name
    assert len({i["ref"] for i in items}) == len(urls)
    assert sorted(p.name for p in ws.iterdir()) == sorted(Path(i["local_path"]).name for i in items)
    assert not (home / "etc").exists() and not (home / "workspaces" / "up.png").exists()


async def test_same_name_twice_never_clobbers(db_env, make_skill, yard_for, server, allow_private, home):
    """安全落盘: default no-clobber — two downloads named cat.png and an earlier artifact called cat.png all stay."""
    result_skill(make_skill, "urls", URLS)
    session = sid("clob")
    ws = home / "workspaces" / session
    ws.mkdir(parents=True)
    (ws / "cat.png").write_bytes(b"the user's own cat")
    urls = [f"{server}/img/a/cat.png", f"{server}/img/b/cat.png"]
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "image_urls": urls}}, context={"session_id": session})
        again = await yard.run(
            "urls", {"result": {"ok": True, "image_url": f"{server}/img/c/cat.png"}}, context={"session_id": session}
        )
    assert (ws / "cat.png").read_bytes() == b"the user's own cat"
    paths = [Path(i["local_path"]) for i in env["images"] + again["images"]]
    assert len(set(paths)) == 3 and ws / "cat.png" not in paths
    assert all(p.read_bytes() == PNG for p in paths)
    assert [i["ref"] for i in env["images"] + again["images"]] == ["img_1", "img_2", "img_3"]


PUBLIC_IP = "93.184.215.14"  # a global address; connections to it are routed to the local server below


@pytest.fixture
def public_host(monkeypatch, server):
    """Make PUBLIC_IP:port reach the 127.0.0.1 test server, as the internet would reach a real public host: the
    download guard sees a global address; only the socket underneath is pointed at the local server."""
    original = httpcore.AnyIOBackend.connect_tcp

    async def routed(self, host, port, timeout=None, local_address=None, socket_options=None):
        if host == PUBLIC_IP:
            host = "127.0.0.1"
        return await original(
            self, host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", routed)
    return server.replace("127.0.0.1", PUBLIC_IP)


@pytest.mark.parametrize("target", ["http://127.0.0.1:{port}", "http://localhost:{port}", "http://[::1]:{port}"])
async def test_redirect_from_a_public_host_to_loopback_is_refused(
    db_env, make_skill, yard_for, server, public_host, seen, deny_private, home, target
):
    result_skill(make_skill, "urls", URLS)
    session = sid("ssrf")
    port = urlsplit(server).port
    inner = target.format(port=port) + "/img/internal.png"
    control = f"{public_host}/redirect?to={quote(public_host + '/img/public.png')}"
    evil = f"{public_host}/redirect?to={quote(inner)}"
    async with yard_for() as yard:
        env = await yard.run(
            "urls", {"result": {"ok": True, "image_urls": [control, evil]}}, context={"session_id": session}
        )
    assert "/img/public.png" in seen, seen  # the public host itself is reached (the routing works)
    assert "/img/internal.png" not in seen
    assert [Path(i["local_path"]).name for i in env["images"]] == ["public.png"]
    [warning] = env["warnings"]
    assert "redirect" in warning and "loopback" in warning, warning
    assert files_in(home / "workspaces" / session) == ["public.png"]


@pytest.mark.parametrize(
    "host",
    ["[::1]", "[::ffff:127.0.0.1]", "0.0.0.0", "127.1", "2130706433", "169.254.169.254", "[fe80::1]", "10.0.0.1"],
)
async def test_loopback_private_and_link_local_spellings_are_refused(
    db_env, make_skill, yard_for, server, seen, deny_private, host
):
    result_skill(make_skill, "urls", URLS)
    port = urlsplit(server).port
    url = f"http://{host}:{port}/img/x.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "download_url": url}}, context={"session_id": sid("v6")})
    assert seen == [] and "files" not in env and "images" not in env
    [warning] = env["warnings"]
    kinds = ("loopback", "private", "link-local", "unspecified", "non-public", "reserved")
    assert any(kind in warning for kind in kinds), warning


@pytest.mark.parametrize(
    "url",
    [
        "http://alice:s3cr3t-pw@127.0.0.1:{port}/status/404",
        "http://alice:s3cr3t-pw@127.0.0.1:{port}/redirect?to=/status/500",
        "http://127.0.0.1:{port}/redirect?to=http%3A%2F%2Falice%3As3cr3t-pw%40127.0.0.1%3A{port}%2Fstatus%2F503",
        "http://alice:s3cr3t-pw@127.0.0.1:1/unreachable.png",
        "http://alice:s3cr3t-pw@127.0.0.1:99999/bad-port.png",
        "ftp://alice:s3cr3t-pw@127.0.0.1/file.bin",
    ],
)
async def test_credentials_in_a_url_never_appear_in_warnings(db_env, make_skill, yard_for, server, allow_private, url):
    result_skill(make_skill, "urls", URLS)
    port = str(urlsplit(server).port)
    link = url.replace("{port}", port)
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "download_url": link, "text": f"also at {link.replace('ftp:', 'http:')} ok"}},
            context={"session_id": sid("cred")},
        )
    assert env["ok"] is True and env.get("warnings"), env
    joined = json.dumps(env["warnings"])
    assert "s3cr3t-pw" not in joined and "alice" not in joined, joined


async def test_at_most_eight_probes_across_ambiguous_fields_and_text(
    db_env, make_skill, yard_for, server, seen, allow_private
):
    result_skill(make_skill, "urls", URLS)
    fields = ("url", "link", "href", "src", "image", "video", "audio", "file")
    result: dict[str, Any] = {"ok": True, **{f: f"{server}/img/f-{f}.png" for f in fields}}
    result["summary"] = " ".join(f"{server}/page/t{n}" for n in range(5))
    result["images"] = [{"url": f"{server}/img/item{n}.png"} for n in range(3)]
    result["download_url"] = f"{server}/img/explicit.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": sid("eight")})
    probed = [p for p in seen if p != "/img/explicit.png"]
    assert len(probed) == 8, seen
    assert "/img/explicit.png" in seen
    assert len(env["images"]) == 3 + 5 + 1  # items keep their place; 5 more probes; the explicit file


async def test_explicit_fields_are_downloaded_even_when_the_server_sends_a_page(
    db_env, make_skill, yard_for, server, seen, allow_private
):
    result_skill(make_skill, "urls", URLS)
    result = {
        "ok": True,
        "download_url": f"{server}/page/report.html",
        "file_urls": [f"{server}/json/data", f"{server}/page/other"],
        "files": [{"oss_url": f"{server}/json/export"}],
    }
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": sid("explicit")})
    assert not env.get("warnings")
    assert sorted(seen) == ["/json/data", "/json/export", "/page/other", "/page/report.html"]
    bodies = sorted(Path(i["local_path"]).read_bytes() for i in env["files"])
    assert bodies == sorted([HTML, HTML, JSON_BODY, JSON_BODY])
    assert all(i.get("ref", "").startswith("file_") for i in env["files"])


async def test_a_download_in_progress_is_never_visible_under_a_final_name(
    db_env, make_skill, yard_for, server, allow_private, home
):
    """安全落盘: a temp file, then an atomic publish — nobody looking at the workspace meanwhile sees a partial
    file under a name that looks like the final product, and nothing temporary is left afterwards."""
    result_skill(make_skill, "urls", URLS)
    session = sid("vis")
    ws = home / "workspaces" / session
    ws.mkdir(parents=True)
    sightings: list[tuple[str, int]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                for entry in os.scandir(ws):
                    if not entry.name.startswith("."):
                        sightings.append((entry.name, entry.stat().st_size))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        async with yard_for() as yard:
            env = await yard.run(
                "urls", {"result": {"ok": True, "file_url": f"{server}/slow/big.bin"}}, context={"session_id": session}
            )
        await asyncio.sleep(0.05)  # let the watcher see the published file too
    finally:
        stop.set()
        watcher.join()
    [item] = env["files"]
    assert item["size"] == 10 * 65536
    assert sightings and all(size == 10 * 65536 for _, size in sightings), sorted(set(sightings))[:5]
    assert files_in(ws) == ["big.bin"]


# =================================================================================================================
# Safe output (doc-runtime-contracts 安全落盘)
# =================================================================================================================


def test_a_failed_write_leaves_nothing(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(TypeError):
        safe_write(ws, "exports/report.json", 12345)  # type: ignore[arg-type]
    assert files_in(ws) == []


def test_writes_through_a_symlink_out_of_the_workspace_are_refused(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "exports").symlink_to(outside)
    (ws / "inside").mkdir()
    (ws / "inside" / "up").symlink_to(tmp_path)
    for bad in ("exports/r.json", "inside/up/outside/r.json", "exports/../r.json"):
        with pytest.raises(ValueError):
            safe_write(ws, bad, "x")
    assert list(outside.iterdir()) == []
    assert safe_write(ws, "inside/../ok.json", "fine") == ws / "ok.json"


def test_concurrent_writers_of_one_name_all_keep_their_content(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    results: list[Path] = []
    lock = threading.Lock()

    def write(n: int) -> None:
        path = safe_write(ws, "out/report.txt", f"writer {n}")
        with lock:
            results.append(path)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 16
    assert sorted(p.read_text() for p in results) == sorted(f"writer {n}" for n in range(16))
    assert files_in(ws) == sorted(p.relative_to(ws).as_posix() for p in results)  # no temp file left


@pytest.mark.parametrize("obstacle", ["file", "symlink-out"])
async def test_offload_with_a_workspace_entry_called_offload_never_breaks_the_run(
    db_env, make_skill, yard_for, home, tmp_path, obstacle
):
    """A skill may leave anything in the workspace (an artifact with no extension called "offload", a link). The
    platform's offload must neither crash the run (SkillYard.run returns an envelope) nor write outside."""
    make_skill("big", files={"handler.py": "async def execute(i, c):\n    return {'ok': True, 'blob': 'b' * 20000}\n"})
    session = sid("obst")
    ws = home / "workspaces" / session
    ws.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    if obstacle == "file":
        (ws / "offload").write_text("a user's file")
        os.utime(ws / "offload", (time.time() - 3600, time.time() - 3600))  # an earlier run's artifact
    else:
        (ws / "offload").symlink_to(outside)
    async with yard_for() as yard:
        env = await yard.run("big", context={"session_id": session})
    assert env["ok"] is True
    assert list(outside.iterdir()) == []
    if obstacle == "file":
        assert (ws / "offload").read_text() == "a user's file"
    if env.get("offloaded"):
        path = Path(env["offload_file"])
        assert path.is_file() and ws.resolve() in path.resolve().parents


# =================================================================================================================
# Async skills on non-web channels (§8)
# =================================================================================================================


RENDER = """
await asyncio.sleep(float(input.get("sleep", 0.5)))
seen = {k: ctx[k] is None for k in ("request", "channel_registry", "abort_signal")}
cfg = {"nested": ctx["skill_configs"].get("render", {}).get("model"), "flat": ctx["skill_configs"].get("model"),
       "args": ctx["skill_args"].get("model"), "top": ctx.get("model"), "style": ctx["skill_args"].get("style")}
(ws / "render.mp4").write_bytes(b"mp4 data")
(ws / "thumb.png").write_bytes(b"png data")
return {"ok": True, "local_path": str(ws / "render.mp4"), "user_message": json.dumps({"none": seen, "cfg": cfg})}
"""
ASYNC_FM = "name: render\ndescription: d\nasync: true"


async def test_ack_comes_at_once_and_artifacts_reach_the_channel(db_env, make_skill, yard_for, recording_channel):
    result_skill(make_skill, "render", RENDER, frontmatter=ASYNC_FM)
    session = sid("async")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=session, channel="dingtalk", user_id="u1", reply_to="msg-7")
        start = time.monotonic()
        ack = await yard.run("render", {"sleep": 1.5}, turn=turn)
        took = time.monotonic() - start
        assert recording_channel.sent == []
        await yard.background.drain()
    assert took < 1.0, took
    assert set(ack) <= {"ok", "success", "async", "message"} and ack["ok"] is True and ack["async"] is True
    assert isinstance(ack["message"], str) and ack["message"]
    [(recipient, _, files)] = recording_channel.sent
    assert recipient["channel"] == "dingtalk" and recipient["session_id"] == session
    assert recipient["user_id"] == "u1" and recipient["reply_to"] == "msg-7"
    delivered = sorted((Path(f["local_path"]).name, f["ref"]) for f in files)
    assert delivered == [("render.mp4", "video_1"), ("thumb.png", "img_1")], files
    assert {a["ref"] for a in await listed(session)} == {"video_1", "img_1"}


async def test_background_run_gets_no_live_objects_and_prefetched_configs(
    db_env, make_skill, yard_for, recording_channel
):
    """§8: request / channel_registry / abort_signal are None in the background; configs were fetched before
    dispatch and sit in the four places of §5.1 — a change made while the run is going is not what it sees."""
    result_skill(make_skill, "render", RENDER, frontmatter=ASYNC_FM)
    async with yard_for() as yard:
        await yard.configs.set("r1", "render", {"model": "m-1", "style": "noir"})
        ack = await yard.run(
            "render", {"sleep": 0.5}, context={"channel": "dingtalk", "role_id": "r1", "session_id": sid("cfg")}
        )
        await yard.configs.set("r1", "render", {"model": "m-2", "style": "pop"})
        await yard.background.drain()
    assert ack["async"] is True
    [(_, text, _)] = recording_channel.sent
    report = json.loads(text.split(" ", 2)[2])
    assert report["none"] == {"request": True, "channel_registry": True, "abort_signal": True}
    assert report["cfg"] == {"nested": "m-1", "flat": "m-1", "args": "m-1", "top": "m-1", "style": "noir"}


@pytest.mark.parametrize("channel", ["web", ""])
async def test_async_skill_on_web_or_without_channel_runs_synchronously(
    db_env, make_skill, yard_for, recording_channel, channel
):
    result_skill(make_skill, "render", RENDER, frontmatter=ASYNC_FM)
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=sid("sync"), channel=channel)
        env = await yard.run("render", {"sleep": 0.1}, turn=turn)
        await yard.background.drain()
    assert env["ok"] is True and "async" not in env
    assert env["ref"] == "video_1" and [a["ref"] for a in turn.artifacts] == ["video_1", "img_1"]
    report = json.loads(env["user_message"])
    assert report["none"]["abort_signal"] is False  # a foreground run has its Event
    assert recording_channel.sent == []


# =================================================================================================================
# More probes
# =================================================================================================================


async def test_subprocess_skills_see_the_same_attachment_items(db_env, make_skill, tmp_path, yard_for):
    """§4.7 items plus ref reach subprocess skills too (SKILL_CONTEXT), in the same shape as in-process ones."""
    echo_skill(make_skill)
    make_skill(
        "ctxdump",
        frontmatter="name: ctxdump\ndescription: d\nexec:\n  config: run.sh",
        files={
            "run.sh": "printf '%s' \"$SKILL_CONTEXT\" | python3 -c 'import json,sys; c=json.load(sys.stdin); "
            'print(json.dumps({"ok": True, "items": c["attachments"]}))\'\n'
        },
    )
    session = sid("subctx")
    [upload] = make_files(tmp_path / "up", ["clip one.mp4"])
    async with yard_for() as yard:
        await yard.attach(session, [upload])
        sub = await yard.run("ctxdump", context={"session_id": session})
        inproc = await yard.run("echo", context={"session_id": session})
    assert sub["ok"] is True, sub
    assert sub["items"] == inproc["attachments"]
    assert [set(i) for i in sub["items"]] == [CONTEXT_KEYS]


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


async def test_parallel_runs_of_one_turn_all_feed_the_turns_attachments(db_env, make_skill, yard_for):
    """Models call tools in parallel: artifacts of two runs of one turn that ran at once are both refs for the
    turn's next run, and turn.artifacts ("lists what the turn produced") names each file once — even though the
    slower run saw the quicker one's file appear in the shared workspace root while it was running."""
    echo_skill(make_skill)
    result_skill(
        make_skill,
        "draw",
        """
await asyncio.sleep(input["sleep"])
(ws / f"d{input['n']}.png").write_bytes(b"d" * (input["n"] + 1))
return {"ok": True, "images": [str(ws / f"d{input['n']}.png")]}
""",
    )
    session = sid("par")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=session, channel="web")
        slow = yard.run("draw", {"n": 0, "sleep": 0.4}, turn=turn)
        quick = yard.run("draw", {"n": 1, "sleep": 0}, turn=turn)
        await asyncio.gather(slow, quick)
        env = await yard.run("echo", turn=turn)
    assert sorted(a["ref"] for a in env["attachments"]) == ["img_1", "img_2"]
    refs = [a["ref"] for a in turn.artifacts]
    assert sorted(refs) == ["img_1", "img_2"], refs
