"""Fourth review round for issue 3 (files in, artifacts out): black-box probes through the public interfaces
(SkillYard.run / turns / attach, the real ``python -m skillyard`` CLI, runtime_context, the result JSON, the
documented storage tables) of what rounds 1-3 (tests/test_outputs_conformance*.py) left out: media types from
``media`` / the array / the extension, re-registration of one file under several spellings, declared files that
fallback collection would skip, offload receipts of more shapes and skill kinds, URL names with query strings and
encodings, Content-Type spellings, broken chunked bodies, concurrent downloads of one URL, ``materialize: false``,
--attach / artifacts output, async pushes of downloaded files, and the run log. Real PostgreSQL (db_env), real
files, real subprocesses, a real HTTP server bound to 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from support.cli import invoke
from support.local_http import serve
from support.outputs_probes import (
    BIG_ROWS,
    MP3,
    PNG,
    URLS,
    echo_skill,
    files_in,
    listed,
    make_files,
    result_skill,
    sha,
    sid,
    writer,
)

# --- skills -----------------------------------------------------------------------------------------------------


# writes input["files"] ({name: text}) into the workspace, then returns input["result"] with "{ws}" filled in
# =================================================================================================================
# Media types and reference ids (§6.3 fields; refs per session and per type)
# =================================================================================================================


@pytest.mark.parametrize(
    "name, ref",
    [
        ("photo.JPEG", "img_1"),
        ("anim.gif", "img_1"),
        ("pic.webp", "img_1"),
        ("clip.mov", "video_1"),
        ("clip.webm", "video_1"),
        ("clip.MKV", "video_1"),
        ("song.m4a", "audio_1"),
        ("song.ogg", "audio_1"),
        ("song.FLAC", "audio_1"),
        ("table.xlsx", "file_1"),
        ("notes.txt", "file_1"),
        ("README", "file_1"),
    ],
)
async def test_media_type_of_a_declared_file_comes_from_its_extension(db_env, make_skill, yard_for, name, ref):
    """Issue: artifact fields "are recognised and registered as session attachments, with media type from `media`
    or the extension" — common image/video/audio extensions in any letter case get their type's ref."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {name: "x"}, "result": {"ok": True, "local_path": "{ws}/" + name}},
            context={"session_id": sid("ext")},
        )
    assert env["ref"] == ref, env


@pytest.mark.parametrize("media, ref", [("video", "video_1"), ("audio", "audio_1"), ("image", "img_1")])
async def test_stated_media_wins_over_an_unknown_extension(db_env, make_skill, yard_for, media, ref):
    """§6.3: `"media": "file",  # image / video / audio / file`; issue: "media type from `media` or the
    extension" — a .bin file declared as video is a video."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {"render.bin": "x"}, "result": {"ok": True, "local_path": "{ws}/render.bin", "media": media}},
            context={"session_id": sid("media")},
        )
    assert env["ref"] == ref, env


@pytest.mark.parametrize(
    "array, ref", [("videos", "video_1"), ("audios", "audio_1"), ("images", "img_1"), ("files", "file_1")]
)
async def test_the_array_gives_the_type_of_an_unknown_extension(db_env, make_skill, yard_for, array, ref):
    """docs/files-and-artifacts.md: "the media type comes from `media`, the array, or the extension" — an item of
    `videos` with an extension that says nothing is a video."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {"blob.dat": "x"}, "result": {"ok": True, array: [{"local_path": "{ws}/blob.dat"}]}},
            context={"session_id": sid("arr")},
        )
    assert env[array][0]["ref"] == ref, env


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


# =================================================================================================================
# Re-registration of the same file
# =================================================================================================================


async def test_one_file_declared_twice_in_one_result_is_one_attachment(db_env, make_skill, yard_for):
    """docs: "A file already registered keeps its id"; turn.artifacts lists each file "once each" — a result naming
    its file both at the top level and in `images` is one attachment with one ref."""
    writer(make_skill)
    session = sid("twice")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=session, channel="web")
        env = await yard.run(
            "writer",
            {
                "files": {"chart.png": "c"},
                "result": {"ok": True, "local_path": "{ws}/chart.png", "images": [{"local_path": "{ws}/chart.png"}]},
            },
            turn=turn,
        )
    assert env["ref"] == env["images"][0]["ref"] == "img_1", env
    assert [a["ref"] for a in turn.artifacts] == ["img_1"]
    assert [r["ref"] for r in await listed(session)] == ["img_1"]


@pytest.mark.parametrize("spelling", ["{ws}/./chart.png", "{ws}//chart.png", "chart.png", "./chart.png"])
async def test_another_spelling_of_a_registered_path_keeps_its_ref(db_env, make_skill, yard_for, spelling):
    """docs: "A file already registered keeps its id (written again, its row gets the new size and sha256)" —
    `ws/./chart.png`, `ws//chart.png` or a relative name all name the registered `ws/chart.png`."""
    writer(make_skill)
    session = sid("spell")
    async with yard_for() as yard:
        first = await yard.run(
            "writer",
            {"files": {"chart.png": "c1"}, "result": {"ok": True, "local_path": "{ws}/chart.png"}},
            context={"session_id": session},
        )
        second = await yard.run(
            "writer",
            {"files": {"chart.png": "c2-longer"}, "result": {"ok": True, "images": [spelling]}},
            context={"session_id": session},
        )
    assert first["ref"] == "img_1"
    assert second["images"][0]["ref"] == "img_1", second
    [row] = await listed(session)
    assert row["size"] == len("c2-longer") and row["sha256"] == sha(b"c2-longer")


async def test_an_uploaded_file_returned_by_a_skill_keeps_its_upload_ref(db_env, make_skill, yard_for, home):
    """docs: "A file already registered keeps its id" — a skill that returns (e.g. edits in place) an uploaded
    file does not give it a second ref."""
    writer(make_skill)
    session = sid("upret")
    ws = home / "workspaces" / session
    ws.mkdir(parents=True)
    (ws / "photo.png").write_bytes(b"original")
    async with yard_for() as yard:
        [up] = await yard.attach(session, [ws / "photo.png"])
        env = await yard.run(
            "writer",
            {"files": {"photo.png": "edited"}, "result": {"ok": True, "images": ["{ws}/photo.png"]}},
            context={"session_id": session},
        )
    assert up["ref"] == "img_1" and env["images"][0]["ref"] == "img_1", env
    assert [r["ref"] for r in await listed(session)] == ["img_1"]


async def test_a_collected_file_declared_later_keeps_its_ref(db_env, make_skill, yard_for):
    """decisions.md: "a file already registered keeps its id. The model sees the same id for the same file all
    session long" — collected first, declared by a later run."""
    writer(make_skill)
    session = sid("coldecl")
    async with yard_for() as yard:
        first = await yard.run("writer", {"files": {"out.csv": "1"}}, context={"session_id": session})
        second = await yard.run(
            "writer",
            {"files": {"out.csv": "1,2"}, "result": {"ok": True, "local_path": "{ws}/out.csv"}},
            context={"session_id": session},
        )
    assert first["files"][0]["ref"] == "file_1" and first["files"][0]["collected"] is True
    assert second["ref"] == "file_1", second


# =================================================================================================================
# Declared vs collected artifacts
# =================================================================================================================


async def test_declared_and_undeclared_files_of_one_run(db_env, make_skill, yard_for):
    """docs: undeclared files in the root "are registered too and added to the matching array with
    `collected: true`" — a declared file has no such mark, and the turn lists both once."""
    writer(make_skill)
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=sid("mix"), channel="web")
        env = await yard.run(
            "writer",
            {
                "files": {"declared.png": "d", "extra.png": "e"},
                "result": {"ok": True, "images": [{"local_path": "{ws}/declared.png"}]},
            },
            turn=turn,
        )
    by_name = {Path(i["local_path"]).name: i for i in env["images"]}
    assert set(by_name) == {"declared.png", "extra.png"}, env
    assert not by_name["declared.png"].get("collected")
    assert by_name["extra.png"]["collected"] is True
    assert sorted(a["ref"] for a in turn.artifacts) == ["img_1", "img_2"]


@pytest.mark.parametrize(
    "name, array, ref",
    [
        ("voice.mp3", "audios", "audio_1"),
        ("movie.mp4", "videos", "video_1"),
        ("sheet.csv", "files", "file_1"),
        ("Makefile", "files", "file_1"),
        ("月度 报告.xlsx", "files", "file_1"),
    ],
)
async def test_collected_files_go_to_the_matching_array(db_env, make_skill, yard_for, name, array, ref):
    """docs: collected files are "added to the matching array with `collected: true`" — audio to `audios`, video
    to `videos`, others (no extension, spaces, unicode) to `files`, the name kept as written."""
    writer(make_skill)
    session = sid("colarr")
    async with yard_for() as yard:
        env = await yard.run("writer", {"files": {name: "x"}}, context={"session_id": session})
    [item] = env[array]
    assert item["ref"] == ref and item["collected"] is True and Path(item["local_path"]).name == name, env
    [row] = await listed(session)
    assert row["filename"] == name and row["skill"] == "writer"


@pytest.mark.parametrize("name", ["build.py", "run.log", "go.sh", "scratch.tmp", "subs.srt"])
async def test_a_declared_file_with_an_excluded_extension_is_registered(db_env, make_skill, yard_for, name):
    """docs: "Every one that exists as a file is registered" for declared artifact fields; the `.py .js .sh .log
    .tmp .srt .pyc` exclusion is for files "not declared" (fallback collection)."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {name: "x"}, "result": {"ok": True, "files": [{"local_path": "{ws}/" + name}]}},
            context={"session_id": sid("declx")},
        )
    assert env["files"][0].get("ref") == "file_1", env


async def test_a_declared_hidden_file_is_registered(db_env, make_skill, yard_for):
    """docs: declared artifact fields — "Every one that exists as a file is registered"; only fallback collection
    leaves out hidden files."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {".preview.png": "x"}, "result": {"ok": True, "images": ["{ws}/.preview.png"]}},
            context={"session_id": sid("hid")},
        )
    assert env["images"][0]["ref"] == "img_1", env


async def test_a_declared_directory_or_missing_file_is_not_registered(db_env, make_skill, yard_for):
    """docs: "Every one that exists as a file is registered" — a folder, or a file that was never written, is not
    an attachment, and the run still succeeds with its items in place."""
    writer(make_skill)
    session = sid("nofile")
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {
                "files": {"frames/f1.png": "x"},
                "result": {"ok": True, "images": [{"local_path": "{ws}/frames"}, {"local_path": "{ws}/never.png"}]},
            },
            context={"session_id": session},
        )
    assert env["ok"] is True
    assert [i.get("ref") for i in env["images"]] == [None, None], env
    assert await listed(session) == []


async def test_bare_relative_paths_in_files_are_registered_with_absolute_paths(db_env, make_skill, yard_for, home):
    """docs: "items are objects with `local_path`, or bare paths … A relative path is read in the session
    workspace" — both files become attachments whose local_path is absolute."""
    writer(make_skill)
    session = sid("bare")
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {"a.csv": "1", "b.csv": "2"}, "result": {"ok": True, "files": ["a.csv", "b.csv"]}},
            context={"session_id": session},
        )
    assert env["ok"] is True
    rows = await listed(session)
    ws = (home / "workspaces" / session).resolve()
    assert sorted(Path(r["local_path"]) for r in rows) == [ws / "a.csv", ws / "b.csv"]
    assert sorted(r["ref"] for r in rows) == ["file_1", "file_2"]


async def test_a_relative_declared_symlink_out_of_the_workspace_is_not_registered(
    db_env, make_skill, yard_for, tmp_path
):
    """docs: "A relative path is read in the session workspace and may not leave it (`..` or a symlink out of it:
    not registered)"."""
    secret = tmp_path / "outside" / "secret.png"
    secret.parent.mkdir()
    secret.write_bytes(b"not yours")
    result_skill(
        make_skill,
        "linker",
        f"""
os.symlink({str(secret)!r}, ws / "innocent.png")
return {{"ok": True, "images": ["innocent.png"]}}
""",
    )
    session = sid("symdecl")
    async with yard_for() as yard:
        env = await yard.run("linker", context={"session_id": session})
    assert env["ok"] is True
    assert await listed(session) == []


async def test_an_absolute_declared_path_outside_the_workspace_is_registered(db_env, make_skill, yard_for, tmp_path):
    """docs: "An absolute path may point anywhere but into another session's workspace"."""
    target = tmp_path / "exports" / "report.pdf"
    target.parent.mkdir()
    target.write_bytes(b"%PDF-1.4 report")
    writer(make_skill)
    session = sid("absout")
    async with yard_for() as yard:
        env = await yard.run(
            "writer", {"result": {"ok": True, "files": [{"local_path": str(target)}]}}, context={"session_id": session}
        )
    assert env["files"][0]["ref"] == "file_1", env
    [row] = await listed(session)
    assert row["local_path"] == str(target.resolve()) and row["sha256"] == sha(b"%PDF-1.4 report")


async def test_a_file_older_than_the_run_is_not_collected(db_env, make_skill, yard_for, home):
    """Issue: "files created or modified in the workspace root during this run and not declared become
    attachments" — a file left there earlier (old mtime) is not."""
    session = sid("old")
    ws = home / "workspaces" / session
    ws.mkdir(parents=True)
    (ws / "yesterday.png").write_bytes(b"old")
    past = time.time() - 3600
    os.utime(ws / "yesterday.png", (past, past))
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run("writer", {"files": {"today.png": "new"}}, context={"session_id": session})
    assert [Path(i["local_path"]).name for i in env["images"]] == ["today.png"]
    assert [r["filename"] for r in await listed(session)] == ["today.png"]


async def test_collection_uses_the_given_workspace_and_the_runs_session(db_env, make_skill, yard_for, tmp_path):
    """docs: `--workspace` / `context={"workspace_dir": …}` picks another folder — files left in that folder's root
    are collected as attachments of the run's session."""
    writer(make_skill)
    session = sid("wsdir")
    folder = tmp_path / "elsewhere"
    async with yard_for() as yard:
        env = await yard.run(
            "writer", {"files": {"made.png": "m"}}, context={"session_id": session, "workspace_dir": str(folder)}
        )
    [item] = env["images"]
    assert Path(item["local_path"]).resolve() == (folder / "made.png").resolve()
    [row] = await listed(session)
    assert row["ref"] == "img_1"


async def test_modifying_a_registered_file_in_a_later_run_keeps_its_ref_and_updates_the_row(
    db_env, make_skill, yard_for
):
    """docs: "A file already registered keeps its id (written again, its row gets the new size and sha256)" — also
    when the rewrite is only picked up by fallback collection."""
    writer(make_skill)
    session = sid("modcol")
    async with yard_for() as yard:
        await yard.run("writer", {"files": {"log.csv": "a"}}, context={"session_id": session})
        env = await yard.run("writer", {"files": {"log.csv": "a,b,c"}}, context={"session_id": session})
    assert env["files"][0]["ref"] == "file_1"
    [row] = await listed(session)
    assert row["size"] == 5 and row["sha256"] == sha(b"a,b,c")


async def test_turn_artifacts_list_a_file_rewritten_by_two_runs_once(db_env, make_skill, yard_for):
    """Issue: "`turn.artifacts` lists what the turn produced"; docs: artifacts "are added to that list (and to
    `turn.artifacts`, once each)"."""
    writer(make_skill)
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=sid("once"), channel="web")
        for text in ("v1", "v2"):
            await yard.run(
                "writer",
                {"files": {"draft.png": text}, "result": {"ok": True, "v": text, "images": ["draft.png"]}},
                turn=turn,
            )
    assert [a["ref"] for a in turn.artifacts] == ["img_1"]


# =================================================================================================================
# Offload (§6.4)
# =================================================================================================================


async def test_offload_file_is_named_after_the_skill_in_the_offload_folder(db_env, make_skill, yard_for, home):
    """docs: "written to `<workspace>/offload/<skill>-<time>.json`"."""
    writer(make_skill, "exporter")
    session = sid("offname")
    async with yard_for() as yard:
        env = await yard.run("exporter", {"result": {"ok": True, "rows": BIG_ROWS}}, context={"session_id": session})
    path = Path(env["offload_file"])
    assert path.parent == home / "workspaces" / session / "offload", path
    assert path.name.startswith("exporter-") and path.suffix == ".json"


async def test_offload_receipt_keeps_success_display_only_and_every_artifact_array(db_env, make_skill, yard_for):
    """docs: the receipt keeps, untouched, "filename local_path download_url abs_url media ok success images videos
    files audios display_md display_only"."""
    writer(make_skill)
    files = {"a.png": "a", "b.mp4": "b", "c.wav": "c", "d.csv": "d"}
    result = {
        "ok": True,
        "success": True,
        "rows": BIG_ROWS,
        "images": ["{ws}/a.png"],
        "videos": ["{ws}/b.mp4"],
        "audios": ["{ws}/c.wav"],
        "files": ["{ws}/d.csv"],
        "display_md": "**done**",
        "display_only": True,
    }
    async with yard_for() as yard:
        env = await yard.run("writer", {"files": files, "result": result}, context={"session_id": sid("offkeep")})
    assert env["offloaded"] is True
    full = json.loads(Path(env["offload_file"]).read_text())
    for key in ("success", "display_only", "display_md", "images", "videos", "audios", "files"):
        assert env[key] == full[key], key
    assert [env[a][0]["ref"] for a in ("images", "videos", "audios", "files")] == [
        "img_1",
        "video_1",
        "audio_1",
        "file_1",
    ]


async def test_offload_receipt_fields_list_every_field_and_arrays_count_empty_lists(db_env, make_skill, yard_for):
    """docs: `fields` (the result's field names), `arrays` (for each list … `count` and the first item as
    `sample`), a `note` — an empty list counts 0."""
    writer(make_skill)
    result = {"ok": True, "rows": BIG_ROWS, "empty": [], "meta": {"source": "db"}, "total": 200}
    async with yard_for() as yard:
        env = await yard.run("writer", {"result": result}, context={"session_id": sid("offfields")})
    assert env["offloaded"] is True
    assert {"ok", "rows", "empty", "meta", "total"} <= set(env["fields"]), env["fields"]
    assert env["arrays"]["rows"]["count"] == 200 and env["arrays"]["rows"]["sample"] == BIG_ROWS[0]
    assert env["arrays"]["empty"]["count"] == 0
    assert isinstance(env["note"], str) and env["note"]


async def test_a_large_result_without_ok_is_offloaded(db_env, make_skill, yard_for):
    """§6.1: "缺省或 None 不算失败"; §6.4: "成功且序列化后超过 12000 字符的返回会被写入工作区文件" — a result that
    states no ok is a success and is offloaded."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run("writer", {"result": {"rows": BIG_ROWS}}, context={"session_id": sid("offnook")})
    assert env.get("offloaded") is True, list(env)


async def test_a_large_subprocess_result_is_offloaded(db_env, make_skill, yard_for):
    """§6.4 applies to every top-level run, whatever runs the skill: a shell skill printing a 20,000-character JSON
    result gets a receipt."""
    make_skill(
        "dumper",
        frontmatter="name: dumper\ndescription: d\nexec:\n  config: run.sh",
        files={"run.sh": 'python3 -c \'import json; print(json.dumps({"ok": True, "rows": ["r" * 100] * 200}))\'\n'},
    )
    async with yard_for() as yard:
        env = await yard.run("dumper", context={"session_id": sid("offsub")})
    assert env.get("offloaded") is True, {k: env[k] for k in env if k != "rows"}
    assert env["arrays"]["rows"]["count"] == 200


async def test_offload_follows_the_given_workspace(db_env, make_skill, yard_for, tmp_path):
    """docs: the offload file is written to `<workspace>/offload/…` — the run's workspace, also when the caller
    gave one (`context={"workspace_dir": …}`)."""
    writer(make_skill)
    folder = tmp_path / "given"
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"result": {"ok": True, "rows": BIG_ROWS}},
            context={"session_id": sid("offws"), "workspace_dir": str(folder)},
        )
    assert Path(env["offload_file"]).resolve().parent == (folder / "offload").resolve()


async def test_offload_file_holds_the_whole_result_with_refs(db_env, make_skill, yard_for):
    """Issue: the result "is written to a workspace file … and replaced by a receipt" — the file has the whole
    result after registration (refs included), and is not an attachment."""
    writer(make_skill)
    session = sid("offfull")
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {"pic.png": "p"}, "result": {"ok": True, "rows": BIG_ROWS, "images": ["{ws}/pic.png"]}},
            context={"session_id": session},
        )
        again = await yard.run("writer", {"result": {"ok": True}}, context={"session_id": session})
    full = json.loads(Path(env["offload_file"]).read_text())
    assert full["rows"] == BIG_ROWS and full["images"][0]["ref"] == "img_1"
    assert "images" not in again and "files" not in again  # nothing more collected by the next run
    assert [r["filename"] for r in await listed(session)] == ["pic.png"]


def test_cli_run_prints_the_receipt_and_the_offload_file_exists(db_env, make_skill, skills_root):
    """docs/cli.md: `skillyard run` "prints its envelope as one line of JSON" — for a large result, the receipt."""
    writer(make_skill)
    proc = invoke(
        "run",
        "writer",
        "--skills-dir",
        str(skills_root),
        "--session",
        sid("offcli"),
        "--input",
        json.dumps({"result": {"ok": True, "rows": BIG_ROWS}}),
    )
    assert proc.exit_code == 0, proc.stderr
    env = json.loads(proc.stdout.strip().splitlines()[-1])
    assert env["offloaded"] is True and Path(env["offload_file"]).is_file()
    assert len(proc.stdout) < 12_000


async def test_offload_false_still_registers_artifacts(db_env, make_skill, yard_for):
    """Frontmatter `offload: false` opts out of offload only; registration (§6.3 step 2) still happens."""
    writer(make_skill, frontmatter="name: writer\ndescription: d\noffload: false")
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {"p.png": "p"}, "result": {"ok": True, "rows": BIG_ROWS, "images": ["{ws}/p.png"]}},
            context={"session_id": sid("offno")},
        )
    assert "offloaded" not in env and env["images"][0]["ref"] == "img_1"


# =================================================================================================================
# URL materialization (§6.3 step 1)
# =================================================================================================================


async def test_a_query_string_is_not_part_of_the_downloaded_name(db_env, make_skill, yard_for, server, allow_private):
    """docs: "the name comes from Content-Disposition … or the URL, made safe" — a signed CDN link's query string
    is not part of the file name, so the extension (and the media type) survive."""
    result_skill(make_skill, "urls", URLS)
    url = f"{server}/img/cat.png?X-Amz-Signature=abc123&Expires=99"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "image_url": url}}, context={"session_id": sid("qs")})
    [item] = env["images"]
    assert item["filename"] == "cat.png" and Path(item["local_path"]).name == "cat.png", item
    assert item["media"] == "image" and item["ref"] == "img_1"


async def test_a_percent_encoded_slash_in_the_url_name_stays_in_the_workspace(
    db_env, make_skill, yard_for, server, allow_private, home
):
    """Issue: "a model-built path must never escape the session workspace"; docs: names "made safe"."""
    result_skill(make_skill, "urls", URLS)
    session = sid("pct")
    url = f"{server}/img/..%2F..%2F..%2Fescaped.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "file_url": url}}, context={"session_id": session})
    ws = home / "workspaces" / session
    items = env.get("images", []) + env.get("files", [])
    assert len(items) == 1, env
    assert Path(items[0]["local_path"]).parent == ws
    assert not (home / "escaped.png").exists() and not (home / "workspaces" / "escaped.png").exists()


async def test_an_image_behind_a_url_without_extension_is_an_image(db_env, make_skill, yard_for, server, allow_private):
    """Issue: ambiguous fields "are probed by Content-Type first"; docs: a download becomes an item "{url,
    local_path, filename, media, size, sha256, content_type} in images/videos/audios/files" — an image/png body
    behind `/noext/photo` is an image, listed as such."""
    result_skill(make_skill, "urls", URLS)
    session = sid("noext")
    async with yard_for() as yard:
        env = await yard.run(
            "urls", {"result": {"ok": True, "image": f"{server}/noext/photo"}}, context={"session_id": session}
        )
    [item] = env["images"]
    assert item["media"] == "image" and item["ref"] == "img_1", item
    [row] = await listed(session)
    assert row["type"] == "image"


async def test_an_audio_file_url_without_extension_is_an_audio(db_env, make_skill, yard_for, server, allow_private):
    """docs: a downloaded file lands "in `images`/`videos`/`audios`/`files`" by its media: an audio/mpeg body is an
    audio, whatever explicit field named it."""
    result_skill(make_skill, "urls", URLS)
    async with yard_for() as yard:
        env = await yard.run(
            "urls", {"result": {"ok": True, "file_url": f"{server}/audio/track"}}, context={"session_id": sid("aud")}
        )
    [item] = env["audios"]
    assert item["media"] == "audio" and item["ref"] == "audio_1" and Path(item["local_path"]).read_bytes() == MP3


async def test_a_downloaded_item_has_every_documented_key(db_env, make_skill, yard_for, server, allow_private):
    """docs: "A downloaded file becomes an artifact item `{url, local_path, filename, media, size, sha256,
    content_type}`"."""
    result_skill(make_skill, "urls", URLS)
    url = f"{server}/img/full.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "download_url": url}}, context={"session_id": sid("k")})
    [item] = env["images"]
    assert {"url", "local_path", "filename", "media", "size", "sha256", "content_type", "ref"} <= set(item), item
    assert item["url"] == url and item["size"] == len(PNG) and item["sha256"] == sha(PNG)
    assert item["content_type"].startswith("image/png") and item["filename"] == "full.png"


async def test_a_download_fills_the_item_it_came_from(db_env, make_skill, yard_for, server, allow_private):
    """docs: a downloaded file becomes an item "(or fills the item the URL came from)" — the item keeps its other
    keys and gains local_path and ref."""
    result_skill(make_skill, "urls", URLS)
    result = {"ok": True, "files": [{"download_url": f"{server}/img/a.png", "title": "cover", "page": 3}]}
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": sid("fill")})
    items = env.get("files", []) + env.get("images", [])
    assert len(items) == 1, env
    [item] = items
    assert item["title"] == "cover" and item["page"] == 3
    assert Path(item["local_path"]).read_bytes() == PNG and item.get("ref")


@pytest.mark.parametrize("ctype", ["Image/PNG", "IMAGE/png; charset=binary", "image/png ;q=1"])
async def test_probe_reads_content_type_case_insensitively(db_env, make_skill, yard_for, server, allow_private, ctype):
    """Issue: "ambiguous fields and links found in text are probed by Content-Type first (HTML/JSON skipped)" —
    media types are case-insensitive (RFC 9110 §8.3.1), parameters aside."""
    result_skill(make_skill, "urls", URLS)
    url = f"{server}/ctype/{quote(ctype, safe='')}/shot"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "link": url}}, context={"session_id": sid("ci")})
    assert len(env.get("images", [])) == 1, env


@pytest.mark.parametrize(
    "ctype", ["TEXT/HTML", "application/xhtml+xml", "application/ld+json", "application/problem+json", "text/json"]
)
async def test_probe_skips_pages_and_json_in_every_spelling(
    db_env, make_skill, yard_for, server, allow_private, home, ctype
):
    """Issue: probed links with "HTML/JSON skipped" — XHTML pages and `+json` media types are pages and JSON."""
    result_skill(make_skill, "urls", URLS)
    session = sid("skip")
    url = f"{server}/ctype/{quote(ctype, safe='')}/thing"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "href": url}}, context={"session_id": session})
    assert "images" not in env and "files" not in env, env
    assert files_in(home / "workspaces" / session) == []


async def test_a_markdown_link_in_text_is_downloaded_without_the_closing_parenthesis(
    db_env, make_skill, yard_for, server, seen, allow_private
):
    """§6.3: "正文里发现的链接先探 Content-Type" — a link written as Markdown, `[chart](URL).`, is the URL without
    the `)` and `.` around it."""
    result_skill(make_skill, "urls", URLS)
    summary = f"Done: see [the chart]({server}/img/chart.png). Also <{server}/img/angle.png>."
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "summary": summary}}, context={"session_id": sid("md")})
    assert sorted(i["filename"] for i in env.get("images", [])) == ["angle.png", "chart.png"], env
    assert sorted(seen) == ["/img/angle.png", "/img/chart.png"]


async def test_materialize_false_downloads_nothing(db_env, make_skill, yard_for, server, seen, allow_private, home):
    """authoring.md: `materialize: false`: "links in the results are data, never downloaded"."""
    result_skill(make_skill, "urls", URLS, frontmatter="name: urls\ndescription: d\nmaterialize: false")
    session = sid("nomat")
    result = {"ok": True, "image_url": f"{server}/img/a.png", "summary": f"at {server}/img/b.png"}
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": session})
    assert seen == [] and "images" not in env and not env.get("warnings")
    assert env["image_url"] == result["image_url"]
    assert files_in(home / "workspaces" / session) == []


async def test_a_failed_download_adds_to_the_skills_own_warnings(db_env, make_skill, yard_for, server, allow_private):
    """Issue: "a failed download leaves the URL in place and adds a warning" — adds, so the skill's own warnings
    stay."""
    result_skill(make_skill, "urls", URLS)
    result = {"ok": True, "warnings": ["3 rows skipped"], "file_url": f"{server}/status/500"}
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": sid("warn")})
    assert env["warnings"][0] == "3 rows skipped" and len(env["warnings"]) == 2, env


async def test_a_failed_download_in_an_item_leaves_the_item_without_a_local_path(
    db_env, make_skill, yard_for, server, allow_private
):
    """Issue: "a failed download leaves the URL in place and adds a warning, never fails the skill"."""
    result_skill(make_skill, "urls", URLS)
    result = {"ok": True, "images": [{"image_url": f"{server}/status/404", "alt": "x"}]}
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": sid("itemfail")})
    assert env["ok"] is True and len(env["warnings"]) == 1
    [item] = env["images"]
    assert item["image_url"] == f"{server}/status/404" and item["alt"] == "x"
    assert not item.get("local_path") and not item.get("ref")


@pytest.mark.parametrize("route", ["chunked-cut/x.png", "hangup/x.png"])
async def test_a_broken_body_leaves_no_file_and_a_warning(
    db_env, make_skill, yard_for, server, allow_private, home, route
):
    """安全落盘: "失败时不得留下看似最终产物的半成品"; issue: a failed download "leaves the URL in place and adds a
    warning" — a chunked body cut before its last chunk, or a connection closed before any answer."""
    result_skill(make_skill, "urls", URLS)
    session = sid("cut")
    url = f"{server}/{route}"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "download_url": url}}, context={"session_id": session})
    assert env["ok"] is True and env["download_url"] == url and len(env.get("warnings", [])) == 1, env
    assert "images" not in env and "files" not in env
    assert files_in(home / "workspaces" / session) == []


async def test_concurrent_runs_downloading_one_url_each_get_a_whole_file(
    db_env, make_skill, yard_for, server, allow_private, home
):
    """安全落盘: "默认 no-clobber" and no half-written file — four runs of one session fetch the same URL at once:
    four whole files, four refs, nothing temporary left."""
    result_skill(make_skill, "urls", URLS)
    session = sid("samurl")
    url = f"{server}/slowpng/same.png"
    async with yard_for() as yard:
        envs = await asyncio.gather(
            *(
                yard.run("urls", {"result": {"ok": True, "image_url": url}}, context={"session_id": session})
                for _ in range(4)
            )
        )
    paths = [Path(e["images"][0]["local_path"]) for e in envs]
    assert len(set(paths)) == 4, paths
    assert all(p.read_bytes() == PNG for p in paths)
    assert sorted(e["images"][0]["ref"] for e in envs) == ["img_1", "img_2", "img_3", "img_4"]
    assert len(files_in(home / "workspaces" / session)) == 4


async def test_the_same_url_twice_in_one_result_leaves_whole_files(
    db_env, make_skill, yard_for, server, allow_private, home
):
    """安全落盘: downloads are published atomically and never clobber — one URL listed twice leaves only whole
    files, each item pointing at one."""
    result_skill(make_skill, "urls", URLS)
    session = sid("dupurl")
    url = f"{server}/slowpng/twice.png"
    async with yard_for() as yard:
        env = await yard.run(
            "urls", {"result": {"ok": True, "image_urls": [url, url]}}, context={"session_id": session}
        )
    assert not env.get("warnings"), env
    for item in env["images"]:
        assert Path(item["local_path"]).read_bytes() == PNG
    ws = home / "workspaces" / session
    assert all((ws / n).read_bytes() == PNG for n in files_in(ws))


@pytest.mark.parametrize(
    "host",
    ["LOCALHOST", "127.0.0.2", "[0:0:0:0:0:0:0:1]", "[::ffff:7f00:1]", "100.64.0.1", "[fd00::1]"],
)
async def test_more_non_public_spellings_are_refused(db_env, make_skill, yard_for, server, seen, deny_private, host):
    """Issue: "refusing private, loopback and link-local addresses — checked after DNS resolution"; docs: "Private,
    loopback, link-local and other non-public addresses are refused"."""
    result_skill(make_skill, "urls", URLS)
    port = urlsplit(server).port
    url = f"http://{host}:{port}/img/x.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "download_url": url}}, context={"session_id": sid("np")})
    assert seen == [] and "images" not in env and "files" not in env
    [warning] = env["warnings"]
    kinds = ("loopback", "private", "link-local", "unspecified", "non-public", "reserved", "shared")
    assert any(kind in warning for kind in kinds), warning


async def test_a_redirect_to_a_page_skips_a_probed_link(db_env, make_skill, yard_for, server, allow_private, home):
    """Issue: probed links skip HTML — the Content-Type that counts is the one of the page the link leads to."""
    result_skill(make_skill, "urls", URLS)
    session = sid("redpage")
    url = f"{server}/redirect?to=/page/landing"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "url": url}}, context={"session_id": session})
    assert "images" not in env and "files" not in env and not env.get("warnings"), env
    assert files_in(home / "workspaces" / session) == []


async def test_a_url_download_is_listed_with_its_url(db_env, make_skill, yard_for, server, allow_private):
    """Issue: attachments carry "filename, local_path, url, size, sha256" — `artifacts --json` of a download with a
    query string keeps the whole URL it came from."""
    result_skill(make_skill, "urls", URLS)
    session = sid("listurl")
    url = f"{server}/img/q.png?v=2"
    async with yard_for() as yard:
        await yard.run("urls", {"result": {"ok": True, "image_urls": [url]}}, context={"session_id": session})
    proc = await asyncio.to_thread(invoke, "artifacts", "--session", session, "--json")
    [row] = json.loads(proc.stdout)
    assert row["url"] == url and row["size"] == len(PNG) and row["sha256"] == sha(PNG) and row["skill"] == "urls"


# =================================================================================================================
# --attach and `skillyard artifacts`
# =================================================================================================================


def test_cli_attach_names_with_spaces_and_unicode(db_env, make_skill, skills_root, tmp_path):
    """docs/cli.md: ids "printed on stderr as `attached img_1: /abs/path`"; `artifacts --json` gives `filename`
    and `local_path` of each."""
    echo_skill(make_skill)
    session = sid("uni")
    photo, memo = make_files(tmp_path / "上传 目录", ["假期 照片.PNG", "voice memo.M4A"])
    proc = invoke(
        "run",
        "echo",
        "--skills-dir",
        str(skills_root),
        "--session",
        session,
        "--attach",
        str(photo),
        "--attach",
        str(memo),
    )
    assert proc.exit_code == 0, proc.stderr
    assert f"attached img_1: {photo.resolve()}" in proc.stderr.splitlines()
    assert f"attached audio_1: {memo.resolve()}" in proc.stderr.splitlines()
    listing = invoke("artifacts", "--session", session, "--json")
    rows = {r["ref"]: r for r in json.loads(listing.stdout)}
    assert rows["img_1"]["filename"] == "假期 照片.PNG" and rows["img_1"]["type"] == "image"
    assert rows["audio_1"]["local_path"] == str(memo.resolve()) and rows["audio_1"]["type"] == "audio"


def test_cli_attached_refs_in_a_list_field_and_a_command(db_env, make_skill, skills_root, tmp_path):
    """§3.3: "字段值或数组项精确等于引用 ID → 替换成真实 local_path"; in command fields "路径统一转 posix
    正斜杠，含空格时自动补引号" — from the CLI, with --attach."""
    echo_skill(make_skill)
    session = sid("clirefs")
    photo, sheet = make_files(tmp_path / "in", ["a b.png", "data.csv"])
    proc = invoke(
        "run",
        "echo",
        "--skills-dir",
        str(skills_root),
        "--session",
        session,
        "--attach",
        str(photo),
        "--attach",
        str(sheet),
        "--input",
        json.dumps({"files": ["img_1", "file_1", "img_1"], "cmd": "wc -c img_1 file_1"}),
    )
    assert proc.exit_code == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])["got"]
    assert got["files"] == [str(photo.resolve()), str(sheet.resolve())]
    assert str(sheet.resolve()) in got["cmd"] and "img_1" not in got["cmd"] and "file_1" not in got["cmd"]
    assert f"'{photo.resolve()}'" in got["cmd"] or f'"{photo.resolve()}"' in got["cmd"], got["cmd"]


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


def test_cli_run_prints_refs_of_produced_artifacts(db_env, make_skill, skills_root):
    """decisions.md: "Registered artifact items get their `ref` written into the result" — as printed by
    `skillyard run`."""
    writer(make_skill)
    proc = invoke(
        "run",
        "writer",
        "--skills-dir",
        str(skills_root),
        "--session",
        sid("cliref"),
        "--input",
        json.dumps({"files": {"a.png": "a"}, "result": {"ok": True, "images": ["a.png"]}}),
    )
    env = json.loads(proc.stdout.strip().splitlines()[-1])
    assert env["images"][0]["ref"] == "img_1" and Path(env["images"][0]["local_path"]).is_absolute()


async def test_attach_returns_the_documented_fields(db_env, tmp_path, yard_for):
    """docs: `yard.attach(session_id, [paths])` does the same as --attach; each row has "`ref`, `type`, `filename`,
    `local_path`, `url`, `size`, `sha256`, `skill` (empty for uploads) and `created_at`"."""
    [upload] = make_files(tmp_path / "up", ["clip.mp4"])
    async with yard_for() as yard:
        [row] = await yard.attach(sid("pyatt"), [upload])
    assert {"ref", "type", "filename", "local_path", "url", "size", "sha256", "skill", "created_at"} <= set(row)
    assert row["ref"] == "video_1" and row["type"] == "video" and row["skill"] == ""
    assert row["sha256"] == sha(upload.read_bytes()) and row["size"] == upload.stat().st_size


async def test_context_attachments_carry_the_type_and_att_type_of_each_upload(db_env, make_skill, tmp_path, yard_for):
    """§4.7: `{"type": "image", "att_type": "image", "filename": …, "local_path": …, "url": …}` plus `ref`."""
    echo_skill(make_skill)
    session = sid("ctxtype")
    files = make_files(tmp_path / "up", ["x.png", "y.wav", "z.mov", "w.zip"])
    async with yard_for() as yard:
        await yard.attach(session, files)
        env = await yard.run("echo", context={"session_id": session})
    got = {(a["ref"], a["type"], a["att_type"], a["filename"]) for a in env["attachments"]}
    assert got == {
        ("img_1", "image", "image", "x.png"),
        ("audio_1", "audio", "audio", "y.wav"),
        ("video_1", "video", "video", "z.mov"),
        ("file_1", "file", "file", "w.zip"),
    }


# =================================================================================================================
# Async skills (§8)
# =================================================================================================================


async def test_a_background_run_downloads_and_pushes_its_url_result(
    db_env, make_skill, yard_for, server, allow_private, recording_channel
):
    """Issue: async skills run in the background and "when done, the artifacts are pushed to the originating
    channel" — a result that is only a URL is materialized first (post-processing: materialize → register)."""
    result_skill(
        make_skill,
        "gen",
        "await asyncio.sleep(0.1)\nreturn {'ok': True, 'image_url': input['u']}",
        frontmatter="name: gen\ndescription: d\nasync: true",
    )
    session = sid("bgurl")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=session, channel="telegram", user_id="u9")
        ack = await yard.run("gen", {"u": f"{server}/img/gen.png"}, turn=turn)
        await yard.background.drain()
    assert ack["async"] is True
    [(recipient, _, files)] = recording_channel.sent
    assert recipient["session_id"] == session
    [pushed] = files
    assert Path(pushed["local_path"]).read_bytes() == PNG
    assert pushed["ref"] == "img_1" and pushed["media"] == "image" and pushed["filename"] == "gen.png"
    [row] = await listed(session)
    assert row["skill"] == "gen" and row["url"] == f"{server}/img/gen.png"


async def test_a_background_run_gets_refs_resolved_before_dispatch(
    db_env, make_skill, yard_for, tmp_path, recording_channel
):
    """§3.3: reference ids are replaced "平台在执行前" — for a background run too: the skill sees the path."""
    result_skill(
        make_skill,
        "edit",
        "return {'ok': True, 'user_message': input['image']}",
        frontmatter="name: edit\ndescription: d\nasync: true",
    )
    session = sid("bgref")
    [photo] = make_files(tmp_path / "up", ["face.png"])
    async with yard_for() as yard:
        await yard.attach(session, [photo])
        turn = yard.new_turn(session_id=session, channel="dingtalk")
        ack = await yard.run("edit", {"image": "img_1"}, turn=turn)
        await yard.background.drain()
    assert ack["async"] is True
    [(_, text, _)] = recording_channel.sent
    assert str(photo.resolve()) in text, text


async def test_a_background_push_carries_the_documented_attachment_keys(
    db_env, make_skill, yard_for, recording_channel
):
    """hooks.md: "`attachments` are artifact items (`local_path`, `filename`, `media`, `ref`)"."""
    writer(make_skill, "bg", frontmatter="name: bg\ndescription: d\nasync: true")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=sid("bgkeys"), channel="telegram")
        await yard.run(
            "bg", {"files": {"song.mp3": "s"}, "result": {"ok": True, "audios": ["{ws}/song.mp3"]}}, turn=turn
        )
        await yard.background.drain()
    [(_, _, files)] = recording_channel.sent
    [item] = files
    assert {"local_path", "filename", "media", "ref"} <= set(item), item
    assert item["ref"] == "audio_1" and item["media"] == "audio" and item["filename"] == "song.mp3"


async def test_a_large_background_result_is_pushed_with_its_files(db_env, make_skill, yard_for, recording_channel):
    """§8 "完成后按发起渠道主动推送产物" with §6.4: a background result large enough to be offloaded still pushes its
    artifact (the receipt keeps `images`)."""
    writer(make_skill, "bigbg", frontmatter="name: bigbg\ndescription: d\nasync: true")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=sid("bgbig"), channel="telegram")
        await yard.run(
            "bigbg",
            {"files": {"p.png": "p"}, "result": {"ok": True, "rows": BIG_ROWS, "images": ["{ws}/p.png"]}},
            turn=turn,
        )
        await yard.background.drain()
    [(_, _, files)] = recording_channel.sent
    assert [f["ref"] for f in files] == ["img_1"]


# =================================================================================================================
# Run records: artifacts' runs are logged; secrets never are
# =================================================================================================================


async def _run_rows(database_url: str, session: str) -> list[str]:
    import asyncpg

    from support.datatable import asyncpg_dsn

    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        rows = await connection.fetch("SELECT row_to_json(r)::text AS j FROM skillyard.runs r")
    finally:
        await connection.close()
    return [r["j"] for r in rows if session in r["j"]]


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


# =================================================================================================================
# Second batch: hostile shapes, names and encodings
# =================================================================================================================


@pytest.mark.parametrize(
    "raw",
    ["用python处理一下这个表格", "帮我生成bash命令批量改名", "给我一段代码", "写个convert.py把它转成csv"],
)
async def test_a_script_request_inside_chinese_text_collects_scripts(db_env, make_skill, yard_for, raw):
    """docs: scripts are collected when "the user's message this turn asks for a script or code, as a whole word:
    "script", "code", "python", "bash", "shell", "脚本", "代码" …"; decisions.md: "mentions script/code (脚本,
    代码, python, bash, a `.py` file, …)" — Chinese text has no spaces around such words."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {"convert.py": "print(1)", "rename.sh": "mv a b"}},
            context={"session_id": sid("zh"), "raw_input": raw},
        )
    names = {i["filename"] for i in env.get("files", [])}
    assert {"convert.py", "rename.sh"} <= names, (raw, names)


@pytest.mark.parametrize("name", ["RUN.LOG", "Build.PY", "x.Sh"])
async def test_excluded_extensions_are_excluded_in_any_letter_case(db_env, make_skill, yard_for, name):
    """Issue: fallback collection except "`.py .js .sh .log .tmp .srt .pyc`" — extensions in upper case name the
    same kinds of files (media types are read case-insensitively too)."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run("writer", {"files": {name: "x"}}, context={"session_id": sid("case")})
    assert "files" not in env, env


async def test_a_file_name_that_is_not_utf8_never_fails_the_run(db_env, make_skill, yard_for):
    """authoring.md: "Whatever a skill returns becomes one JSON-serializable dict"; §6.3: "平台的后处理链（技能无需自己
    做）"; issue: "It must hold against hostile input" — a name with invalid UTF-8 bytes in the workspace root (what
    unzipping a GBK-named archive leaves) must not turn the skill's success into an exception."""
    result_skill(
        make_skill,
        "oddname",
        """
with open(os.path.join(os.fsencode(str(ws)), b"bad\\xff name.png"), "wb") as f:
    f.write(b"x")
(ws / "good.png").write_bytes(b"g")
return {"ok": True}
""",
    )
    session = sid("badutf")
    async with yard_for() as yard:
        env = await yard.run("oddname", context={"session_id": session})
    assert env["ok"] is True, env
    assert "good.png" in {r["filename"] for r in await listed(session)}


@pytest.mark.parametrize(
    "result",
    [
        {"ok": True, "local_path": None, "filename": 5, "media": ["image"]},
        {"ok": True, "images": "chart.png"},
        {"ok": True, "images": {"local_path": "chart.png"}},
        {"ok": True, "files": [None, 3, ["x"], {"local_path": 7}]},
        {"ok": True, "local_path": "x" * 5000 + ".png"},
    ],
    ids=["wrong-types", "string-array", "object-array", "junk-items", "too-long"],
)
async def test_malformed_artifact_fields_never_fail_the_run(db_env, make_skill, yard_for, result):
    """Issue: post-processing turns results into artifacts; a result the skill shaped oddly is still the skill's
    success (§6.1 "缺省或 None 不算失败") — only `success`/`ok` false is a failure."""
    result_skill(make_skill, "odd", URLS)
    async with yard_for() as yard:
        env = await yard.run("odd", {"result": result}, context={"session_id": sid("odd")})
    assert env["ok"] is True and env["success"] is True, env


async def test_a_model_chosen_name_with_a_nul_byte_in_a_result_never_fails_the_run(db_env, make_skill, yard_for):
    """authoring.md: "Whatever a skill returns becomes one JSON-serializable dict"; issue: "It must hold against
    hostile input" and NUL bytes are "rejected with a clear error" on the input side — a skill that builds its
    artifact path from a model-given title (not a path field, so it reaches the skill as sent) still returns its
    envelope; docs: only a declared path that "exists as a file is registered"."""
    result_skill(
        make_skill,
        "titled",
        """
(ws / "real.png").write_bytes(b"r")
return {"ok": True, "local_path": str(ws / input["title"]), "images": [str(ws / "real.png")]}
""",
    )
    async with yard_for() as yard:
        env = await yard.run("titled", {"title": "cover\u0000.png"}, context={"session_id": sid("nul")})
    assert env["ok"] is True and env["images"][0]["ref"] == "img_1", env


async def test_an_unknown_media_value_falls_back_to_the_extension(db_env, make_skill, yard_for):
    """§6.3: `media` is one of "image / video / audio / file"; issue: "media type from `media` or the extension" —
    a value outside that list says nothing, the extension does."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {"p.png": "p"}, "result": {"ok": True, "local_path": "{ws}/p.png", "media": "picture"}},
            context={"session_id": sid("badmedia")},
        )
    assert env["ref"] == "img_1", env


async def test_a_file_url_in_an_explicit_field_is_never_read_from_disk(db_env, make_skill, yard_for, home, tmp_path):
    """Issue: "Remote URL materialization with httpx" — a `file://` URL is not remote: the host's files are never
    copied into the workspace because a result names them."""
    private = tmp_path / "host-secret.txt"
    private.write_text("host secret")
    result_skill(make_skill, "urls", URLS)
    session = sid("fileurl")
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "download_url": private.as_uri(), "image_urls": [private.as_uri()]}},
            context={"session_id": session},
        )
    assert env["ok"] is True
    assert files_in(home / "workspaces" / session) == []
    assert await listed(session) == []


async def test_raw_utf8_content_disposition_name_is_kept_readable_and_safe(
    db_env, make_skill, yard_for, server, allow_private
):
    """docs: "the name comes from Content-Disposition … made safe" — many servers send a raw UTF-8 `filename`;
    whatever is made of it, the name keeps its extension and holds no control characters."""
    result_skill(make_skill, "urls", URLS)
    raw = 'attachment; filename="报告.png"'.encode().decode("latin-1")
    url = f"{server}/cd/raw?v={quote(raw)}"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "file_url": url}}, context={"session_id": sid("rawcd")})
    [item] = env["images"]
    name = Path(item["local_path"]).name
    assert name.endswith(".png") and not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name), repr(name)


@pytest.mark.parametrize("where", ["path", "disposition"])
async def test_a_long_unicode_name_is_cut_to_a_valid_file_name(
    db_env, make_skill, yard_for, server, allow_private, where
):
    """docs: the download name is "made safe"; a file name is at most 255 bytes — 120 CJK characters (360 bytes)
    must still give a downloaded file, not a failed download."""
    result_skill(make_skill, "urls", URLS)
    long = "长" * 120 + ".png"
    if where == "path":
        url = f"{server}/img/{quote(long)}"
    else:
        url = f"{server}/cd/x?v={quote(chr(39).join(['attachment; filename*=UTF-8', '', quote(long)]))}"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "file_url": url}}, context={"session_id": sid("long")})
    assert not env.get("warnings"), env.get("warnings")
    [item] = env["images"]
    name = Path(item["local_path"]).name
    assert len(name.encode()) <= 255 and name.endswith(".png"), name
    assert Path(item["local_path"]).read_bytes() == PNG


class Counting(BaseHTTPRequestHandler):
    """Counts requests being answered at the same time."""

    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    active = 0
    peak = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.active += 1
            cls.peak = max(cls.peak, cls.active)
        try:
            time.sleep(0.4)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(PNG)))
            self.end_headers()
            self.wfile.write(PNG)
        finally:
            with cls.lock:
                cls.active -= 1


async def test_at_most_four_downloads_run_at_a_time(db_env, make_skill, yard_for, allow_private):
    """docs: "Four downloads run at a time"."""
    result_skill(make_skill, "urls", URLS)
    Counting.peak = 0
    with serve(Counting) as base:
        async with yard_for() as yard:
            env = await yard.run(
                "urls",
                {"result": {"ok": True, "image_urls": [f"{base}/p{n}.png" for n in range(10)]}},
                context={"session_id": sid("four")},
            )
    assert len(env["images"]) == 10
    assert 1 <= Counting.peak <= 4, Counting.peak


async def test_a_url_named_twice_in_one_result_is_fetched_once(
    db_env, make_skill, yard_for, server, seen, allow_private
):
    """§6.3: materialization is "幂等" — a link that is both an explicit field and in the text of the same result
    is one file, not two copies with two refs."""
    result_skill(make_skill, "urls", URLS)
    session = sid("once-url")
    url = f"{server}/img/one.png"
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "image_url": url, "summary": f"done: {url}"}},
            context={"session_id": session},
        )
    assert seen == ["/img/one.png"], seen
    assert len(await listed(session)) == 1, env


async def test_a_list_result_is_wrapped_then_offloaded(db_env, make_skill, yard_for):
    """§2.3: "非 dict 被包成 {"result": ...}"; §6.4 then offloads it when over 12,000 characters, counting the
    list."""
    make_skill(
        "lister",
        files={"handler.py": "async def execute(i, c):\n    return [{'n': n, 't': 'x' * 80} for n in range(300)]\n"},
    )
    async with yard_for() as yard:
        env = await yard.run("lister", context={"session_id": sid("offlist")})
    assert env["offloaded"] is True, list(env)
    assert env["arrays"]["result"]["count"] == 300


async def test_the_receipt_of_a_huge_first_row_stays_small(db_env, make_skill, yard_for):
    """§6.4: "上下文里只保留收据（offloaded=True、文件名、字段名清单、数组计数与首条样例）" — the receipt exists to
    keep the context small; a sample must not bring the whole result back."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"result": {"ok": True, "rows": [{"text": "y" * 30_000}, {"text": "z"}]}},
            context={"session_id": sid("offhuge")},
        )
    assert env["offloaded"] is True
    assert len(json.dumps(env, ensure_ascii=False)) <= 12_000, len(json.dumps(env, ensure_ascii=False))


async def test_an_offloaded_top_level_artifact_keeps_its_ref(db_env, make_skill, yard_for):
    """decisions.md: "Registered artifact items get their `ref` written into the result. The model can refer to a
    file it just produced without another lookup" — the receipt keeps `local_path`; the ref beside it too."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"files": {"r.xlsx": "r"}, "result": {"ok": True, "rows": BIG_ROWS, "local_path": "{ws}/r.xlsx"}},
            context={"session_id": sid("offref")},
        )
    assert env["offloaded"] is True
    assert env.get("ref") == "file_1", {k: env[k] for k in env if k not in ("arrays",)}


async def test_a_downloaded_file_is_an_attachment_with_its_url_for_the_next_run(
    db_env, make_skill, yard_for, server, allow_private
):
    """§4.7: attachment items carry `"url": "https://..."` and include "此前技能生成的产物"."""
    result_skill(make_skill, "urls", URLS)
    echo_skill(make_skill)
    session = sid("nexturl")
    url = f"{server}/img/next.png"
    async with yard_for() as yard:
        await yard.run("urls", {"result": {"ok": True, "image_url": url}}, context={"session_id": session})
        env = await yard.run("echo", context={"session_id": session})
    [item] = env["attachments"]
    assert item["url"] == url and item["ref"] == "img_1" and item["type"] == "image"
    assert Path(item["local_path"]).read_bytes() == PNG


async def test_a_background_failure_push_never_holds_a_credential(db_env, make_skill, yard_for, recording_channel):
    """authoring.md: credential values "are replaced by `***` in `error`, … `user_message`" — also in what a
    background run pushes to the chat."""
    result_skill(
        make_skill,
        "bgleak",
        'raise RuntimeError("rejected " + ctx["skill_configs"]["bgleak"]["api_token"])',
        frontmatter="name: bgleak\ndescription: d\nasync: true",
    )
    async with yard_for() as yard:
        await yard.configs.set("r-bg", "bgleak", {"api_token": "tok-BGSECRET-9911"})
        turn = yard.new_turn(session_id=sid("bgsec"), channel="telegram", role_id="r-bg")
        ack = await yard.run("bgleak", turn=turn)
        await yard.background.drain()
    assert ack["async"] is True
    [(_, text, _)] = recording_channel.sent
    assert "BGSECRET" not in text, text


@pytest.mark.parametrize("line", ["my clip.mp4", "{ws}/报告 final.pdf"])
async def test_a_subprocess_media_path_line_with_spaces_is_one_artifact(db_env, make_skill, yard_for, line):
    """§2.3: stdout is parsed "整个 stdout 为 JSON → 最后一行为 JSON → 媒体路径行 → 兜底" — a media path line naming a
    file with spaces (or CJK) is that file."""
    name = line.replace("{ws}/", "")
    shown = line.replace("{ws}", "$PWD")
    make_skill(
        "sh_art",
        frontmatter="name: sh_art\ndescription: d\nexec:\n  config: run.sh",
        files={"run.sh": f"printf 'data' > '{name}'\necho \"{shown}\"\n"},
    )
    async with yard_for() as yard:
        env = await yard.run("sh_art", context={"session_id": sid("shsp")})
    assert env["ok"] is True, env
    assert env.get("ref") in ("video_1", "file_1") and Path(env["local_path"]).name == name, env


@pytest.mark.parametrize(
    "array, item, ref",
    [("videos", {}, "video_1"), ("files", {"media": "audio"}, "audio_1")],
    ids=["array-says-video", "item-says-audio"],
)
async def test_a_downloaded_item_keeps_the_media_its_array_or_item_states(
    db_env, make_skill, yard_for, server, allow_private, array, item, ref
):
    """docs: "the media type comes from `media`, the array, or the extension"; a download "fills the item the URL
    came from" — a file fetched for an item of `videos` (served as application/octet-stream, no extension), or for
    an item stating `media: audio`, keeps that type."""
    result_skill(make_skill, "urls", URLS)
    url = f"{server}/ctype/{quote('application/octet-stream', safe='')}/clip"
    async with yard_for() as yard:
        env = await yard.run(
            "urls", {"result": {"ok": True, array: [{"download_url": url, **item}]}}, context={"session_id": sid("oct")}
        )
    [got] = env[array]
    assert got.get("ref") == ref and Path(got["local_path"]).is_file(), env


async def test_the_urls_field_downloads_each_link_by_its_type(db_env, make_skill, yard_for, server, allow_private):
    """Issue/§6.3: explicit fields (`urls` first among them) are always downloaded; each file lands in the array of
    its media."""
    result_skill(make_skill, "urls", URLS)
    links = [f"{server}/img/u1.png", f"{server}/audio/u2.mp3", f"{server}/json/u3.json"]
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "urls": links}}, context={"session_id": sid("urlsf")})
    assert env["urls"] == links and not env.get("warnings")
    assert [i["ref"] for i in env["images"]] == ["img_1"] and [i["ref"] for i in env["audios"]] == ["audio_1"]
    assert [i["ref"] for i in env["files"]] == ["file_1"]


@pytest.mark.parametrize("suffix", ["#page=2", "?a=1#frag", "?name=evil.exe"])
async def test_fragments_and_queries_never_reach_the_file_name(
    db_env, make_skill, yard_for, server, allow_private, suffix
):
    """docs: "the name comes from Content-Disposition … or the URL, made safe" — the file's name is the path's
    last segment."""
    result_skill(make_skill, "urls", URLS)
    url = f"{server}/img/shot.png{suffix}"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "image_url": url}}, context={"session_id": sid("frag")})
    [item] = env["images"]
    assert Path(item["local_path"]).name == "shot.png", item


async def test_a_top_level_filename_alone_declares_the_file(db_env, make_skill, yard_for):
    """§6.3: artifact fields are `filename` / `local_path` / `media` (top level, one file) — a result naming only
    `filename` of a file in its workspace declares it."""
    writer(make_skill)
    session = sid("fname")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=session, channel="web")
        env = await yard.run(
            "writer", {"files": {"report.xlsx": "r"}, "result": {"ok": True, "filename": "report.xlsx"}}, turn=turn
        )
    assert env["ref"] == "file_1" and "files" not in env, env
    assert [a["ref"] for a in turn.artifacts] == ["file_1"]


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


async def test_a_background_run_is_in_the_run_log(db_env, make_skill, yard_for, recording_channel):
    """configuration.md: "A record is written for every run that actually executed" — the background run of an
    async skill executed."""
    writer(make_skill, "bglog", frontmatter="name: bglog\ndescription: d\nasync: true")
    session = sid("bglog")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=session, channel="telegram")
        await yard.run("bglog", {"files": {"x.png": "x"}}, turn=turn)
        await yard.background.drain()
    rows = await _run_rows(db_env, session)
    assert rows and all("bglog" in r for r in rows), rows
    assert any('"ok": true' in r.replace('":true', '": true') for r in rows), rows
