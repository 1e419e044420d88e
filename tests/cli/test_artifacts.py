"""``skillyard artifacts`` (docs/cli.md): a session's attachments as JSON or a table, on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import uuid
from pathlib import Path

import pytest

from support import EXAMPLES
from support.cli import invoke, no_traceback, usage_error
from support.outputs_probes import attach_and_close, make_files, result_skill, sha, sid, writer


@pytest.fixture
def attached(db_env, root, tmp_path) -> tuple[str, Path]:
    session = "art-" + uuid.uuid4().hex[:8]
    image = tmp_path / "photo.png"
    image.write_bytes(b"\x89PNG-not-really")
    out = invoke(
        "run",
        "greet",
        "--skills-dir",
        str(root),
        "--input",
        '{"who": "x"}',
        "--session",
        session,
        "--attach",
        str(image),
    )
    assert out.exit_code == 0, out.output
    return session, image


def test_cli_attach_run_and_list_artifacts(make_skill, skills_root, db_env, tmp_path):
    upload = tmp_path / "scan.pdf"
    upload.write_bytes(b"%PDF-1.4")
    make_skill(
        "echo_file",
        files={
            "handler.py": "async def execute(i, c):\n    return {'got': i['file']}\n",
            "schema.json": json.dumps({"type": "object", "properties": {"file": {"type": "string"}}}),
        },
    )
    result = invoke(
        "run",
        "echo_file",
        "--skills-dir",
        str(skills_root),
        "--session",
        "cli-1",
        "--attach",
        str(upload),
        "--input",
        '{"file": "file_1"}',
    )
    assert result.exit_code == 0, result.output
    assert "attached file_1" in result.stderr and json.loads(result.stdout)["got"] == str(upload.resolve())
    listed = invoke("artifacts", "--session", "cli-1", "--json")
    [item] = json.loads(listed.stdout)
    assert {"ref", "type", "filename", "local_path", "url", "size", "sha256", "skill", "created_at"} <= set(item)
    assert (item["ref"], item["type"], item["size"]) == ("file_1", "file", 8)
    table = invoke("artifacts", "--session", "cli-1")
    assert "file_1" in table.output and "scan.pdf" in table.output
    no_session = invoke("run", "echo_file", "--skills-dir", str(skills_root), "--attach", str(upload))
    assert no_session.exit_code == 2 and "needs --session" in no_session.output
    bad = invoke("artifacts", "--session", "../etc")
    assert bad.exit_code == 2 and "not a safe name" in bad.output


def test_artifacts_needs_session():
    """skillyard artifacts --session ID [--json]"""
    usage_error(invoke("artifacts"))


@pytest.mark.parametrize("session", ["../x", "a b", ""])
def test_artifacts_unsafe_session_exit_2(session):
    """A session id that is not a safe name is a usage error (exit 2)."""
    usage_error(invoke("artifacts", "--session", session))


def test_artifacts_empty_session_json(db_env):
    """`--json` prints an array of objects"""
    out = invoke("artifacts", "--session", "empty-" + uuid.uuid4().hex[:8], "--json")
    assert out.exit_code == 0 and json.loads(out.stdout) == []


def test_artifacts_empty_session_text(db_env):
    """Lists a session's attachments (none: a line saying so, exit 0)"""
    out = invoke("artifacts", "--session", "empty-" + uuid.uuid4().hex[:8])
    assert out.exit_code == 0 and no_traceback(out)


def test_artifacts_json_fields(attached):
    """`--json` prints an array of objects with `ref`, `type`, `filename`, `local_path`, `url`, `size`, `sha256`,
    `skill` (empty for uploads) and `created_at` (ISO 8601, UTC)."""
    from datetime import datetime, timedelta

    session, image = attached
    items = json.loads(invoke("artifacts", "--session", session, "--json").stdout)
    assert len(items) == 1
    item = items[0]
    assert set(item) >= {"ref", "type", "filename", "local_path", "url", "size", "sha256", "skill", "created_at"}
    assert item["ref"] == "img_1" and item["type"] == "image" and item["filename"] == "photo.png"
    assert Path(item["local_path"]).resolve() == image.resolve() and item["skill"] == ""
    assert item["size"] == image.stat().st_size and item["sha256"] == hashlib.sha256(image.read_bytes()).hexdigest()
    created = datetime.fromisoformat(item["created_at"].replace("Z", "+00:00"))
    assert created.utcoffset() == timedelta(0)


def test_artifacts_table(attached):
    """The table shows ref, type, file name, size, producing skill and path"""
    session, image = attached
    out = invoke("artifacts", "--session", session)
    assert (
        out.exit_code == 0
        and "img_1" in out.stdout
        and "photo.png" in out.stdout
        and str(image.resolve()) in out.stdout
    )


def test_artifacts_lists_produced_files(db_env):
    """Lists a session's attachments: uploads (`--attach`, `yard.attach`) and the files its skills produced."""
    session = "rep-" + uuid.uuid4().hex[:8]
    out = invoke(
        "run", "word_report", "--skills-dir", str(EXAMPLES), "--session", session, "--input", '{"text": "a b a"}'
    )
    assert out.exit_code == 0, out.output
    items = json.loads(invoke("artifacts", "--session", session, "--json").stdout)
    assert [(i["ref"], i["type"], i["skill"]) for i in items] == [("file_1", "file", "word_report")]
    assert "word_report" in invoke("artifacts", "--session", session).stdout


def test_artifacts_unreachable_database_exit_2(monkeypatch):
    """2 | … host errors raised around a run (database unreachable, …)"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:art-pass-4@127.0.0.1:1/db")
    out = invoke("artifacts", "--session", "s1")
    usage_error(out)
    assert "art-pass-4" not in out.output


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


def test_cli_artifacts_needs_a_session_and_refuses_an_empty_one(db_env):
    missing = invoke("artifacts", "--json")
    assert missing.exit_code == 2 and "--session" in missing.stderr
    empty = invoke("artifacts", "--session", "", "--json")
    assert empty.exit_code == 2 and "Traceback" not in empty.stderr


def test_cli_artifacts_of_an_unknown_session_is_an_empty_list(db_env):
    """docs/cli.md: `skillyard artifacts --session ID --json` "prints an array of objects" — none for a session
    without files, and that is not an error."""
    proc = invoke("artifacts", "--session", sid("none"), "--json")
    assert proc.exit_code == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_cli_artifacts_table_shows_refs_names_and_skill(db_env, make_skill, skills_root, tmp_path):
    """docs/cli.md: "The table shows ref, type, file name, size, producing skill and path"."""
    writer(make_skill)
    session = sid("table")
    [upload] = make_files(tmp_path / "up", ["scan.pdf"])
    run = invoke(
        "run",
        "writer",
        "--skills-dir",
        str(skills_root),
        "--session",
        session,
        "--attach",
        str(upload),
        "--input",
        json.dumps({"files": {"chart.png": "c"}}),
    )
    assert run.exit_code == 0, run.stderr
    proc = invoke("artifacts", "--session", session)
    assert proc.exit_code == 0, proc.stderr
    lines = proc.stdout.splitlines()
    chart = next(line for line in lines if "chart.png" in line)
    scan = next(line for line in lines if "scan.pdf" in line)
    assert "img_1" in chart and "writer" in chart and "image" in chart
    assert "file_1" in scan and str(upload.resolve()) in scan


def test_cli_sessionless_artifacts_are_listed_under_default(make_skill, skills_root, home, db_env):
    """docs: "Runs without a session belong to the session `default`: its workspace, and its attachments"."""
    writer(make_skill)
    run = invoke("run", "writer", "--skills-dir", str(skills_root), "--input", json.dumps({"files": {"nos.png": "n"}}))
    assert run.exit_code == 0, run.stderr
    env = json.loads(run.stdout.strip().splitlines()[-1])
    assert Path(env["images"][0]["local_path"]).parent == home / "workspaces" / "default"
    proc = invoke("artifacts", "--session", "default", "--json")
    # the database is shared by the whole test session: other session-less runs may have registered files too
    listed = [r for r in json.loads(proc.stdout) if r["filename"] == "nos.png"]
    assert [r["local_path"] for r in listed] == [env["images"][0]["local_path"]]
