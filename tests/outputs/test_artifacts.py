"""Artifacts (§6.3, outputs/artifacts.py): files a skill returns are registered as session attachments, stray files
in the workspace root collected; media types and reference ids."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from support.outputs_probes import URLS, echo_skill, listed, result_skill, sha, sid, writer

WRITER = """
from pathlib import Path
async def execute(input, ctx):
    ws = Path(ctx["workspace_dir"])
    (ws / "chart.png").write_bytes(b"\\x89PNG fake")
    return {"ok": True, "local_path": str(ws / "chart.png"), "media": "image", "filename": "chart.png"}
"""

STRAY = """
for n in ("keep.txt", "movie.mp4", "a.py", "b.js", "c.sh", "d.log", "e.tmp", "f.srt", "g.pyc", "UPPER.PY"):
    (ws / n).write_text(n)
(ws / "work").mkdir(exist_ok=True)
(ws / "work" / "part_import_1.json").write_text("{}")
(ws / "work" / "nested.png").write_bytes(b"png")
return {"ok": True}
"""


async def test_declared_artifacts_get_refs_and_are_listed(make_skill, yard_for, db_env):
    make_skill("writer", files={"handler.py": WRITER})
    make_skill(
        "arrays",
        files={
            "handler.py": """
        from pathlib import Path
        async def execute(input, ctx):
            ws = Path(ctx["workspace_dir"])
            (ws / "a.mp4").write_bytes(b"v")
            (ws / "notes.pdf").write_bytes(b"%PDF")
            return {"videos": [{"local_path": str(ws / "a.mp4")}], "files": [str(ws / "notes.pdf")],
                    "images": [{"url": "gone", "local_path": str(ws / "missing.png")}]}
    """
        },
    )
    async with yard_for() as yard:
        first = await yard.run("writer", context={"session_id": "art-1"})
        again = await yard.run("writer", context={"session_id": "art-1"})
        arrays = await yard.run("arrays", context={"session_id": "art-1"})
        listed = await yard.attachments.for_session("art-1")
    assert first["ref"] == "img_1" and again["ref"] == "img_1"
    assert arrays["videos"][0]["ref"] == "video_1" and arrays["files"][0]["ref"] == "file_1"
    assert "ref" not in arrays["images"][0]
    assert [(a.ref, a.type, a.filename, a.skill) for a in listed] == [
        ("img_1", "image", "chart.png", "writer"),
        ("video_1", "video", "a.mp4", "arrays"),
        ("file_1", "file", "notes.pdf", "arrays"),
    ]
    assert listed[0].size == len(b"\x89PNG fake") and len(listed[0].sha256 or "") == 64


async def test_stray_files_in_the_workspace_root_are_collected(make_skill, yard_for, db_env):
    make_skill(
        "stray",
        files={
            "handler.py": """
        from pathlib import Path
        async def execute(input, ctx):
            ws = Path(ctx["workspace_dir"])
            (ws / "report.txt").write_text("r")
            (ws / "helper.py").write_text("x = 1")
            (ws / "run.log").write_text("log")
            (ws / "work").mkdir(exist_ok=True)
            (ws / "work" / "import_1.json").write_text("{}")
            (ws / ".hidden").write_text("h")
            return {"ok": True}
    """
        },
    )
    async with yard_for() as yard:
        plain = await yard.run("stray", context={"session_id": "stray-1"})
        scripted = await yard.run("stray", context={"session_id": "stray-2", "raw_input": "write me a python script"})
    assert [f["filename"] for f in plain["files"]] == ["report.txt"] and plain["files"][0]["collected"] is True
    assert {f["filename"] for f in scripted["files"]} == {"report.txt", "helper.py", "run.log"}


async def test_files_from_before_the_run_are_not_collected(make_skill, yard_for, db_env, home):
    ws = home / "workspaces" / "old-1"
    ws.mkdir(parents=True)
    (ws / "earlier.txt").write_text("from yesterday")
    make_skill("noop", files={"handler.py": "async def execute(i, c):\n    return {}\n"})
    async with yard_for() as yard:
        env = await yard.run("noop", context={"session_id": "old-1"})
    assert "files" not in env


async def test_artifacts_of_a_turn_are_listed_on_it(make_skill, yard_for, db_env):
    make_skill("writer", files={"handler.py": WRITER})
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="turn-art", channel="web")
        await yard.run("writer", turn=turn)
    assert [a["ref"] for a in turn.artifacts] == ["img_1"] and turn.artifacts[0]["type"] == "image"


async def test_top_level_artifact_media_from_extension_and_stated_media(make_skill, yard_for, db_env):
    result_skill(
        make_skill,
        "vid",
        """
(ws / "clip.mp4").write_bytes(b"mp4")
return {"ok": True, "local_path": str(ws / "clip.mp4")}
""",
    )
    result_skill(
        make_skill,
        "snd",
        """
(ws / "voice.bin").write_bytes(b"raw")
return {"ok": True, "local_path": str(ws / "voice.bin"), "media": "audio"}
""",
    )
    result_skill(
        make_skill,
        "named",
        """
(ws / "report.xlsx").write_bytes(b"PK")
return {"ok": True, "filename": "report.xlsx"}
""",
    )
    async with yard_for() as yard:
        v = await yard.run("vid", context={"session_id": "art-a"})
        s = await yard.run("snd", context={"session_id": "art-a"})
        n = await yard.run("named", context={"session_id": "art-a"})
        listed = await yard.attachments.for_session("art-a")
    assert v["ref"] == "video_1" and s["ref"] == "audio_1" and n["ref"] == "file_1"
    assert [(a.ref, a.type, a.skill) for a in listed] == [
        ("video_1", "video", "vid"),
        ("audio_1", "audio", "snd"),
        ("file_1", "file", "named"),
    ]


async def test_array_items_are_registered_with_media_per_array(make_skill, yard_for, db_env):
    result_skill(
        make_skill,
        "multi",
        """
for n in ("a.png", "b.wav", "c.mp4", "d.csv"):
    (ws / n).write_bytes(n.encode())
return {"ok": True, "images": [str(ws / "a.png")], "audios": [{"local_path": str(ws / "b.wav")}],
        "videos": [{"local_path": str(ws / "c.mp4"), "media": "video"}], "files": [{"local_path": str(ws / "d.csv")}]}
""",
    )
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="art-b", channel="web")
        env = await yard.run("multi", turn=turn)
    assert env["images"][0]["ref"] == "img_1" and env["audios"][0]["ref"] == "audio_1"
    assert env["videos"][0]["ref"] == "video_1" and env["files"][0]["ref"] == "file_1"
    assert sorted(a["ref"] for a in turn.artifacts) == ["audio_1", "file_1", "img_1", "video_1"]


async def test_relative_declared_artifact_is_registered_once_not_collected_again(make_skill, yard_for, db_env):
    """A result may name its artifact relative to the workspace; declaring it must keep it out of the
    fallback collection (it is declared), so it appears once in the result and once in turn.artifacts."""
    result_skill(
        make_skill,
        "relart",
        """
(ws / "chart.png").write_bytes(b"\\x89PNG")
return {"ok": True, "images": ["chart.png"]}
""",
    )
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="art-c", channel="web")
        env = await yard.run("relart", turn=turn)
    assert [i.get("ref") for i in env["images"]] == ["img_1"], env["images"]
    assert [a["ref"] for a in turn.artifacts] == ["img_1"]


async def test_relative_top_level_local_path_is_not_collected_twice(make_skill, yard_for, db_env):
    result_skill(
        make_skill,
        "relpath",
        """
(ws / "report.pdf").write_bytes(b"%PDF")
return {"ok": True, "local_path": "report.pdf", "media": "file"}
""",
    )
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="art-d", channel="web")
        env = await yard.run("relpath", turn=turn)
    assert env["ref"] == "file_1"
    assert "files" not in env, env.get("files")
    assert [a["ref"] for a in turn.artifacts] == ["file_1"]


async def test_collection_skips_excluded_extensions_and_subdirectories(make_skill, yard_for, db_env):
    result_skill(make_skill, "stray", STRAY)
    async with yard_for() as yard:
        env = await yard.run("stray", context={"session_id": "col-1", "raw_input": "剪一个视频给我"})
    names = sorted(i["filename"] for arr in ("files", "videos", "images") for i in env.get(arr, []))
    assert names == ["keep.txt", "movie.mp4"]
    assert env["videos"][0]["ref"] == "video_1" and env["videos"][0].get("collected") is True


@pytest.mark.parametrize("raw", ["帮我写个脚本把图片转黑白", "write me a python script", "give me the code"])
async def test_collection_includes_scripts_when_user_asked_for_one(make_skill, yard_for, db_env, raw):
    result_skill(make_skill, "stray", STRAY)
    async with yard_for() as yard:
        env = await yard.run("stray", context={"session_id": "col-2", "raw_input": raw})
    names = {i["filename"] for i in env.get("files", [])}
    assert {"a.py", "b.js", "c.sh"} <= names


@pytest.mark.parametrize(
    "raw", ["Write a short description of this photo", "please make a transcript of the meeting", "subscribe me"]
)
async def test_collection_does_not_treat_words_containing_script_as_a_request(make_skill, yard_for, db_env, raw):
    """docs/decisions.md: "the user asked for a script" is a *word* match on the turn's raw text. A request for a
    description (or a transcript) is not a request for a script, so .py/.sh/.log files stay uncollected."""
    result_skill(make_skill, "stray", STRAY)
    async with yard_for() as yard:
        env = await yard.run("stray", context={"session_id": "col-3", "raw_input": raw})
    names = {i["filename"] for i in env.get("files", [])}
    assert not names & {"a.py", "b.js", "c.sh", "d.log", "f.srt"}, names


async def test_collection_includes_files_modified_during_the_run(make_skill, yard_for, db_env, home):
    """A file that existed before the run and is rewritten by it was modified during the run: collected. File
    timestamps come from the kernel's coarse clock (one tick, ~4 ms, behind time.time_ns()), so a rewrite early
    in the run must not be missed."""
    result_skill(make_skill, "touch", 'with open(ws / "old.txt", "a") as f:\n    f.write("new")\nreturn {"ok": True}')
    missed = []
    async with yard_for() as yard:
        for n in range(8):
            ws = home / "workspaces" / f"col-4-{n}"
            ws.mkdir(parents=True)
            (ws / "old.txt").write_text("old")
            (ws / "untouched.txt").write_text("u")
            past = time.time() - 3600
            os.utime(ws / "old.txt", (past, past))
            os.utime(ws / "untouched.txt", (past, past))
            env = await yard.run("touch", context={"session_id": f"col-4-{n}"})
            if [i["filename"] for i in env.get("files", [])] != ["old.txt"]:
                missed.append((n, env.get("files")))
    assert missed == []


async def test_collection_of_an_immediate_write_is_reliable(make_skill, yard_for, db_env):
    """A skill that writes its file right away must still be collected (timestamps are coarse)."""
    make_skill(
        "quick",
        files={
            "handler.py": "from pathlib import Path\ndef execute(i, ctx):\n"
            "    (Path(ctx['workspace_dir']) / 'r.txt').write_text('x')\n    return {}\n"
        },
    )
    misses = []
    async with yard_for() as yard:
        for n in range(25):
            env = await yard.run("quick", context={"session_id": f"quick-{n}"})
            if not env.get("files"):
                misses.append(n)
    assert misses == []


async def test_shell_skill_media_path_line_is_one_artifact(make_skill, yard_for, db_env):
    make_skill(
        "render_sh",
        frontmatter="name: render_sh\ndescription: d\nexec:\n  config: run.sh",
        files={"run.sh": "printf 'PNG' > frame.png\necho frame.png\n"},
    )
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="sh-1", channel="web")
        env = await yard.run("render_sh", turn=turn)
    assert env["ok"] is True, env
    assert env["ref"] == "img_1" and env["media"] == "image"
    assert "images" not in env
    assert [a["ref"] for a in turn.artifacts] == ["img_1"]


async def test_relative_artifact_name_with_dotdot_does_not_register_files_outside_workspace(
    make_skill, yard_for, db_env, home, tmp_path
):
    """A skill echoing a model-chosen file name ({"filename": "../../x"}) must not make the platform build a path
    out of the session workspace: the issue's "a model-built path must never escape the session workspace"."""
    secret = home / "secret.txt"  # next to workspaces/, two levels above the session workspace
    secret.write_text("top secret")
    other = home / "workspaces" / "victim-2"
    other.mkdir(parents=True)
    (other / "private.pdf").write_bytes(b"%PDF private")
    make_skill(
        "namer",
        files={"handler.py": "async def execute(i, c):\n    return {'ok': True, 'filename': i['name']}\n"},
    )
    make_skill(
        "lister",
        files={"handler.py": "async def execute(i, c):\n    return {'ok': True, 'files': [i['name']]}\n"},
    )
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="esc-1", channel="web")
        a = await yard.run("namer", {"name": "../../secret.txt"}, turn=turn)
        b = await yard.run("lister", {"name": "../victim-2/private.pdf"}, turn=turn)
    # since the hardening issue such input is refused before the skill runs (it names a file under SKILLYARD_HOME)
    assert "ref" not in a and "ref" not in (b.get("files") or [{}])[0]
    assert turn.artifacts == []


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


@pytest.fixture
async def empty_default_session(db_env: str) -> None:
    """The session ``default`` without attachments: the test database is shared by the whole pytest session, and
    other session-less runs (tests/cli/test_artifacts.py) register files there too."""
    import asyncpg

    from support.datatable import asyncpg_dsn

    conn = await asyncpg.connect(asyncpg_dsn(db_env))
    try:
        if await conn.fetchval("SELECT to_regclass('skillyard.attachments') IS NOT NULL"):
            await conn.execute("DELETE FROM skillyard.attachments WHERE session_id = 'default'")
    finally:
        await conn.close()


@pytest.mark.spec("§4.7")
async def test_a_sessionless_artifact_is_a_ref_for_the_next_sessionless_run(
    db_env, make_skill, yard_for, empty_default_session
):
    """docs: "runs without a session use `default`" — a session-less run's artifact is registered (img_1) in that
    session; the next session-less run works in the same workspace and session, so img_1 must name that file
    and its attachments list must show it (§4.7: the list holds earlier artifacts)."""
    result_skill(
        make_skill,
        "draw",
        """
(ws / "chart.png").write_bytes(b"\\x89PNG")
return {"ok": True, "local_path": str(ws / "chart.png")}
""",
    )
    echo_skill(make_skill)
    async with yard_for() as yard:
        drawn = await yard.run("draw")
        env = await yard.run("echo", {"image": drawn["ref"]})
    assert env["got"]["image"] == drawn["local_path"], (drawn, env["got"])
    assert [a["ref"] for a in env["attachments"]] == [drawn["ref"]]


async def test_collection_ignores_links_and_hidden_files(db_env, make_skill, yard_for, tmp_path):
    """The fallback collects files the run created in the workspace root. A symlink the skill leaves there
    (pointing at a file outside) is not a file in the workspace — collecting it would register and deliver an
    outside file — and hidden files are not collected (docs)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    result_skill(
        make_skill,
        "links",
        f"""
os.symlink({str(secret)!r}, ws / "looks_fine.txt")
(ws / ".cache.txt").write_text("hidden")
(ws / "real.txt").write_text("real")
return {{"ok": True}}
""",
    )
    async with yard_for() as yard:
        env = await yard.run("links", context={"session_id": sid("coll")})
    assert [i["filename"] for i in env.get("files", [])] == ["real.txt"]


@pytest.mark.spec("§6.3")
async def test_collected_uppercase_image_is_an_image(db_env, make_skill, yard_for):
    """§6.3 "按 media / 扩展名": PHOTO.JPG is an image whatever the case of its extension."""
    result_skill(make_skill, "cam", '(ws / "PHOTO.JPG").write_bytes(b"jpg")\nreturn {"ok": True}')
    async with yard_for() as yard:
        env = await yard.run("cam", context={"session_id": sid("upper")})
    assert [i["ref"] for i in env.get("images", [])] == ["img_1"], env


async def test_a_declared_file_in_a_subdirectory_is_registered(db_env, make_skill, yard_for):
    """Only the fallback skips subdirectories; a declared artifact anywhere in the workspace is registered."""
    result_skill(
        make_skill,
        "deep",
        """
(ws / "out").mkdir(exist_ok=True)
(ws / "out" / "final.mp4").write_bytes(b"mp4")
(ws / "out" / "scratch.mp4").write_bytes(b"tmp")
return {"ok": True, "videos": [str(ws / "out" / "final.mp4")]}
""",
    )
    async with yard_for() as yard:
        env = await yard.run("deep", context={"session_id": sid("deep")})
    assert [i["ref"] for i in env["videos"]] == ["video_1"]
    assert len(env["videos"]) == 1 and "files" not in env


@pytest.mark.spec("§9.1")
async def test_call_skill_child_result_is_not_registered_or_collected(db_env, make_skill, yard_for):
    """§9.1 (4): 产物后处理不生效 — a child's artifacts get no ref and no collected entries in the child's result."""
    result_skill(
        make_skill,
        "child",
        """
(ws / "made.png").write_bytes(b"png")
(ws / "stray.txt").write_text("stray")
return {"ok": True, "local_path": str(ws / "made.png")}
""",
    )
    make_skill(
        "parent",
        files={
            "handler.py": "async def execute(i, ctx):\n"
            "    r = await ctx['call_skill']('child', {})\n"
            "    return {'ok': True, 'child': r}\n"
        },
    )
    async with yard_for() as yard:
        env = await yard.run("parent", context={"session_id": sid("child")})
    child = env["child"]
    assert "ref" not in child and "images" not in child and "files" not in child, child


@pytest.mark.parametrize("how", ["relative-link", "absolute"])
async def test_declared_artifact_in_another_session_is_not_registered(db_env, make_skill, yard_for, home, how):
    """docs: a relative artifact path "may not leave [the workspace] (`..` or a symlink out of it: not
    registered)"; "An absolute path may point anywhere but into another session's workspace"."""
    victim = home / "workspaces" / sid("victim")
    victim.mkdir(parents=True)
    (victim / "private.pdf").write_bytes(b"%PDF private")
    session = sid("steal")
    ws = home / "workspaces" / session
    ws.mkdir(parents=True)
    if how == "relative-link":
        (ws / "mine.pdf").symlink_to(victim / "private.pdf")
        value = "mine.pdf"
    else:
        value = str(victim / "private.pdf")
    make_skill("thief", files={"handler.py": "async def execute(i, c):\n    return {'ok': True, 'files': [i['p']]}\n"})
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=session, channel="web")
        env = await yard.run("thief", {"p": value}, turn=turn)
    assert "ref" not in (env.get("files") or [{}])[0], env  # an absolute one is refused as input since hardening
    assert turn.artifacts == []
    assert await listed(session) == []


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


@pytest.mark.spec("§6.3")
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


async def test_an_absolute_declared_path_outside_the_workspace_is_refused(db_env, make_skill, yard_for, tmp_path):
    """Hardening issue: "register only files inside the session's workspace; a declared file elsewhere is refused
    with a warning in the envelope" (it was registered before: /etc/passwd became downloadable)."""
    target = tmp_path / "exports" / "report.pdf"
    target.parent.mkdir()
    target.write_bytes(b"%PDF-1.4 report")
    writer(make_skill)
    session = sid("absout")
    async with yard_for() as yard:
        env = await yard.run(
            "writer",
            {"result": {"ok": True, "files": [{"local_path": str(target)}, {"local_path": "/etc/passwd"}]}},
            context={"session_id": session},
        )
    assert env["ok"] is True and all("ref" not in f for f in env["files"]), env
    assert sum("is outside the session's workspace" in w for w in env["warnings"]) == 2
    assert await listed(session) == []


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


@pytest.mark.spec("§6.3")
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


@pytest.mark.spec("§6.1")
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


@pytest.mark.spec("§6.3")
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


@pytest.mark.spec("§2.3")
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


@pytest.mark.spec("§6.3")
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
