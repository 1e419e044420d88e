"""Review probes for issue 3 (files in, artifacts out): black-box checks through the public interfaces
(SkillYard.run / turns / attach, the CLI, the result JSON) against the issue text, spec §3.3, §3.4, §4.7,
§6.2-§6.4, §8 and doc-runtime-contracts 安全落盘. Real PostgreSQL (db_env), real files, a real HTTP server
bound to 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from skillyard import safe_write
from support.cli import invoke
from support.outputs_probes import ECHO, PNG, echo_skill, files_in, listed, result_skill, url_skill

# --- helpers ----------------------------------------------------------------------------------------------------


ALL_PATH_FIELDS = [
    *("input", "output", "file", "path", "video", "audio", "image", "src", "dst"),
    *("inputs", "files", "videos", "images", "clips", "sources", "paths", "bgm", "input_file", "file_path"),
    *("output_path", "out"),
]
LIST_FIELDS = ["inputs", "files", "videos", "images", "clips", "sources", "paths"]
OUTPUT_FIELDS = ["output", "dst", "output_path", "out"]


# =================================================================================================================
# Input side: path normalization (§3.3)
# =================================================================================================================


@pytest.mark.parametrize("field", ALL_PATH_FIELDS)
async def test_every_path_field_relative_value_lands_in_workspace(make_skill, yard_for, home, field):
    echo_skill(make_skill)
    ws = home / "workspaces" / "pn-1"
    ws.mkdir(parents=True)
    (ws / "clip.mp4").write_bytes(b"x")
    async with yard_for() as yard:
        env = await yard.run("echo", {field: "models/made/this/clip.mp4"}, context={"session_id": "pn-1"})
    assert env["ok"] is True, env
    assert env["got"][field] == str(ws / "clip.mp4")


@pytest.mark.parametrize("field", LIST_FIELDS)
async def test_array_items_of_list_fields_are_normalized_and_deduplicated(make_skill, yard_for, home, field):
    echo_skill(make_skill)
    ws = home / "workspaces" / "pn-2"
    ws.mkdir(parents=True)
    (ws / "a.png").write_bytes(b"a")
    async with yard_for() as yard:
        env = await yard.run(
            "echo",
            {field: ["x/a.png", "a.png", "../../etc/passwd", "~/.ssh/id_rsa", "/abs/elsewhere.png"]},
            context={"session_id": "pn-2"},
        )
    assert env["got"][field] == [str(ws / "a.png"), str(ws / "passwd"), str(ws / "id_rsa"), "/abs/elsewhere.png"]


@pytest.mark.parametrize("field", OUTPUT_FIELDS)
async def test_output_fields_always_land_in_workspace(make_skill, yard_for, home, tmp_path, field):
    echo_skill(make_skill)
    async with yard_for() as yard:
        env = await yard.run("echo", {field: str(tmp_path / "elsewhere" / "final.mp4")}, context={"session_id": "pn-3"})
        rel = await yard.run("echo", {field: "renders/v2/final.mp4"}, context={"session_id": "pn-3"})
    ws = home / "workspaces" / "pn-3"
    assert env["got"][field] == str(ws / "final.mp4")
    assert rel["got"][field] == str(ws / "final.mp4")


async def test_missing_non_output_relative_file_keeps_its_value(make_skill, yard_for):
    echo_skill(make_skill)
    async with yard_for() as yard:
        env = await yard.run("echo", {"image": "dir/missing.png", "bgm": "song.mp3"}, context={"session_id": "pn-4"})
    assert env["got"]["image"] == "dir/missing.png" and env["got"]["bgm"] == "song.mp3"


@pytest.mark.parametrize(
    "value, name",
    [
        ("../../../etc/hosts", "hosts"),
        ("~/secret.txt", "secret.txt"),
        ("a/../../b.csv", "b.csv"),
        ("~root/x.db", "x.db"),
    ],
)
async def test_dotdot_and_tilde_become_workspace_basename_even_when_missing(make_skill, yard_for, home, value, name):
    echo_skill(make_skill)
    async with yard_for() as yard:
        env = await yard.run("echo", {"input_file": value, "sources": [value]}, context={"session_id": "pn-5"})
    ws = home / "workspaces" / "pn-5"
    assert env["got"]["input_file"] == str(ws / name)
    assert env["got"]["sources"] == [str(ws / name)]


@pytest.mark.parametrize("field", ["file_path", "clips", "bgm", "out"])
async def test_nul_byte_is_refused_with_clear_error(make_skill, yard_for, field):
    echo_skill(make_skill)
    value: Any = ["ok.mp4", "bad\x00.mp4"] if field == "clips" else "bad\x00name.mp4"
    async with yard_for() as yard:
        env = await yard.run("echo", {field: value}, context={"session_id": "pn-6"})
    assert env["ok"] is False and env["need_param"] == field
    assert "NUL" in env["error"]


async def test_absolute_path_into_other_session_is_refused_in_lists_and_file_urls(make_skill, yard_for, home):
    echo_skill(make_skill)
    other = home / "workspaces" / "victim"
    other.mkdir(parents=True)
    (other / "secret.png").write_bytes(b"s")
    async with yard_for() as yard:
        listed = await yard.run("echo", {"images": [str(other / "secret.png")]}, context={"session_id": "pn-7"})
        url = await yard.run("echo", {"src": "file://" + str(other / "secret.png")}, context={"session_id": "pn-7"})
        missing = await yard.run("echo", {"path": str(other / "future.txt")}, context={"session_id": "pn-7"})
    for env, field in ((listed, "images"), (url, "src"), (missing, "path")):
        assert env["ok"] is False and env["need_param"] == field, env
        assert "another session" in env["error"]


async def test_symlink_pointing_outside_is_refused_for_list_items(make_skill, yard_for, home, tmp_path):
    echo_skill(make_skill)
    ws = home / "workspaces" / "pn-8"
    ws.mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (ws / "link.txt").symlink_to(outside)
    async with yard_for() as yard:
        env = await yard.run("echo", {"files": ["link.txt"]}, context={"session_id": "pn-8"})
        abs_env = await yard.run("echo", {"file_path": str(ws / "link.txt")}, context={"session_id": "pn-8"})
    assert env["ok"] is False and env["need_param"] == "files"
    assert abs_env["ok"] is False and abs_env["need_param"] == "file_path"


@pytest.mark.parametrize("session", ["../etc", "a/b", ".hidden", "x" * 200, "sp ace", "..", "a\x00b"])
async def test_unsafe_session_ids_are_rejected_clearly(make_skill, yard_for, home, session):
    echo_skill(make_skill)
    async with yard_for() as yard:
        try:
            env = await yard.run("echo", {}, context={"session_id": session})
        except Exception as exc:  # a clear error is fine either way
            assert "session" in str(exc).lower()
        else:
            assert env["ok"] is False and "session" in env["error"].lower()
    assert not (home / "etc").exists()
    root = home / "workspaces"
    assert not root.exists() or [p.name for p in root.iterdir()] == []


async def test_workspace_dir_is_per_session_under_home(make_skill, yard_for, home):
    echo_skill(make_skill)
    async with yard_for() as yard:
        a = await yard.run("echo", {}, context={"session_id": "s-a"})
        b = await yard.run("echo", {}, context={"session_id": "s-b"})
    assert Path(a["ws"]) == home / "workspaces" / "s-a" and Path(a["ws"]).is_dir()
    assert Path(b["ws"]) == home / "workspaces" / "s-b"


# =================================================================================================================
# Input side: attachment references (§3.3) and force_raw_prompt (§3.4)
# =================================================================================================================


async def test_refs_exact_code_substrings_quoting_and_dedup(make_skill, yard_for, db_env, tmp_path):
    echo_skill(make_skill)
    spaced = tmp_path / "my photo.png"
    spaced.write_bytes(b"p")
    plain = tmp_path / "doc.pdf"
    plain.write_bytes(b"%PDF")
    async with yard_for() as yard:
        items = await yard.attach("ref-1", [spaced, plain])
        assert [i["ref"] for i in items] == ["img_1", "file_1"]
        env = await yard.run(
            "echo",
            {
                "image": "img_1",
                "images": ["img_1", "img_1", str(spaced.resolve())],
                "attachments_list": ["file_1", "file_1"],
                "bash": "cp img_1 /tmp/x && wc -c file_1",
                "instruction": "把img_1转成黑白",
                "caption": "see img_1 for details",
            },
            context={"session_id": "ref-1"},
        )
    got = env["got"]
    sp, pl = str(spaced.resolve()), str(plain.resolve())
    assert got["image"] == sp
    assert got["images"] == [sp]
    assert got["attachments_list"] == [pl]
    assert got["bash"] == f"cp '{sp}' /tmp/x && wc -c {pl}"
    assert got["instruction"] == f"把'{sp}'转成黑白"
    assert got["caption"] == "see img_1 for details"


async def test_artifact_of_an_earlier_run_is_a_ref_for_later_runs(make_skill, yard_for, db_env):
    result_skill(
        make_skill,
        "draw",
        """
(ws / "chart.png").write_bytes(b"\\x89PNG chart")
return {"ok": True, "local_path": str(ws / "chart.png")}
""",
    )
    make_skill(
        "look",
        files={
            "handler.py": "async def execute(i, ctx):\n"
            "    return {'image': i.get('image'), 'refs': [a['ref'] for a in ctx['attachments']]}\n",
            "schema.json": json.dumps({"type": "object", "properties": {"image": {"type": "string"}}}),
        },
    )
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="ref-2", channel="web")
        drawn = await yard.run("draw", turn=turn)
        same_turn = await yard.run("look", {"image": "img_1"}, turn=turn)
        next_turn = await yard.run("look", {"image": "img_1"}, turn=yard.new_turn(session_id="ref-2"))
    assert drawn["ref"] == "img_1"
    assert same_turn["refs"] == ["img_1"] and same_turn["image"] == drawn["local_path"]
    assert next_turn["refs"] == ["img_1"] and next_turn["image"] == drawn["local_path"]


PAINT_SCHEMA = {
    "type": "object",
    "properties": {"size": {"type": "string"}, "text": {"type": "string"}, "style": {"type": "string"}},
    "required": ["text", "size"],
}


async def test_force_raw_prompt_uses_first_required_not_first_property(make_skill, yard_for):
    echo_skill(
        make_skill, "paint", frontmatter="name: paint\ndescription: d\nforce_raw_prompt: true", schema=PAINT_SCHEMA
    )
    echo_skill(make_skill, "plain_paint", schema=PAINT_SCHEMA)
    async with yard_for() as yard:
        env = await yard.run(
            "paint", {"text": "a cat, 8k", "size": "1x1", "style": "s"}, context={"raw_input": "画一只猫，要可爱"}
        )
        off = await yard.run("plain_paint", {"text": "a cat, 8k", "size": "1x1"}, context={"raw_input": "画一只猫"})
    assert env["got"] == {"text": "画一只猫，要可爱", "size": "1x1", "style": "s"}
    assert off["got"]["text"] == "a cat, 8k"


async def test_force_raw_prompt_not_applied_through_call_skill_even_nested(make_skill, yard_for):
    echo_skill(
        make_skill, "paint", frontmatter="name: paint\ndescription: d\nforce_raw_prompt: true", schema=PAINT_SCHEMA
    )
    make_skill(
        "boss",
        files={
            "handler.py": """
        async def execute(i, ctx):
            r = await ctx["call_skill"]("paint", {"text": "from upstream", "size": "2x2"})
            return {"inner": r}
    """
        },
    )
    async with yard_for() as yard:
        env = await yard.run("boss", context={"raw_input": "user words", "channel": "web"})
    assert env["inner"]["got"]["text"] == "from upstream"


# =================================================================================================================
# Output side: artifacts (§6.3)
# =================================================================================================================


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


# --- fallback collection ---------------------------------------------------------------------------------------

STRAY = """
for n in ("keep.txt", "movie.mp4", "a.py", "b.js", "c.sh", "d.log", "e.tmp", "f.srt", "g.pyc", "UPPER.PY"):
    (ws / n).write_text(n)
(ws / "work").mkdir(exist_ok=True)
(ws / "work" / "part_import_1.json").write_text("{}")
(ws / "work" / "nested.png").write_bytes(b"png")
return {"ok": True}
"""


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


# =================================================================================================================
# Offload (§6.4)
# =================================================================================================================


BIG = """
(ws / "cover.png").write_bytes(b"\\x89PNG")
rows = [{"i": i, "text": "x" * 100} for i in range(int(input.get("n", 200)))]
return {"ok": True, "rows": rows, "count": len(rows), "filename": "cover.png", "local_path": str(ws / "cover.png"),
        "media": "image", "download_url": "", "abs_url": "", "images": [str(ws / "cover.png")],
        "display_md": "**rows**", "tags": ["a", "b"]}
"""


async def test_offload_receipt_fields(make_skill, yard_for, db_env):
    result_skill(make_skill, "big", BIG)
    async with yard_for() as yard:
        env = await yard.run("big", context={"session_id": "off-a"})
    assert env["offloaded"] is True
    path = Path(env["offload_file"])
    assert path.is_absolute() and path.is_file()
    ws = Path(env["local_path"]).parent
    assert path.parent != ws and ws in path.parents  # in a subdirectory of the workspace
    full = json.loads(path.read_text())
    assert len(full["rows"]) == 200 and full["count"] == 200
    assert "rows" not in env
    assert {"rows", "count", "filename", "local_path", "media", "images", "display_md", "tags"} <= set(env["fields"])
    assert env["arrays"]["rows"]["count"] == 200 and env["arrays"]["rows"]["sample"] == {"i": 0, "text": "x" * 100}
    assert env["arrays"]["tags"]["count"] == 2
    for kept in ("filename", "local_path", "media", "ok", "display_md", "download_url", "abs_url"):
        assert env[kept] == full[kept]
    assert env["images"] == full["images"] and env["images"][0]["ref"] == "img_1"
    assert len(json.dumps(env)) < 12_000
    # the offload file is not a user artifact
    attachments = await listed("off-a")
    assert [a["filename"] for a in attachments] == ["cover.png"]


async def test_offload_threshold_is_12000_characters(make_skill, yard_for):
    make_skill(
        "sized",
        files={"handler.py": "async def execute(i, c):\n    return {'ok': True, 'blob': 'y' * int(i['n'])}\n"},
    )
    async with yard_for() as yard:
        base = len(json.dumps({"ok": True, "blob": "", "success": True}))
        under = await yard.run("sized", {"n": 12_000 - base - 50}, context={"session_id": "off-b"})
        over = await yard.run("sized", {"n": 12_000 - base + 50}, context={"session_id": "off-b"})
    assert "offloaded" not in under
    assert over.get("offloaded") is True


async def test_offload_opt_out_and_failures_untouched(make_skill, yard_for):
    make_skill(
        "reader",
        frontmatter="name: reader\ndescription: d\noffload: false",
        files={"handler.py": "async def execute(i, c):\n    return {'ok': True, 'page': 'p' * 30000}\n"},
    )
    async with yard_for() as yard:
        env = await yard.run("reader", context={"session_id": "off-c"})
    assert "offloaded" not in env and len(env["page"]) == 30000


async def test_two_offloads_in_the_same_second_never_clobber(make_skill, yard_for):
    make_skill(
        "dump",
        files={"handler.py": "async def execute(i, c):\n    return {'ok': True, 'n': i['n'], 'blob': 'z' * 20000}\n"},
    )
    async with yard_for() as yard:
        a = await yard.run("dump", {"n": 1}, context={"session_id": "off-d"})
        b = await yard.run("dump", {"n": 2}, context={"session_id": "off-d"})
    assert a["offload_file"] != b["offload_file"]
    assert json.loads(Path(a["offload_file"]).read_text())["n"] == 1
    assert json.loads(Path(b["offload_file"]).read_text())["n"] == 2
    leftovers = [p.name for p in Path(a["offload_file"]).parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []


async def test_offloaded_display_only_block_still_replaces_text(make_skill, yard_for):
    """§6.2: a display_only block replaces the model's text. A result large enough to be offloaded (§6.4 keeps
    display_md in the receipt) must not lose its display_only flag on the way to the turn's display merge."""
    make_skill(
        "status",
        files={
            "handler.py": "async def execute(i, c):\n"
            "    return {'ok': True, 'rows': ['r' * 100] * 200, 'display_md': '| a | b |', 'display_only': True}\n"
        },
    )
    make_skill("plain", files={"handler.py": "async def execute(i, c):\n    return {'display_md': 'PLAIN'}\n"})
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="off-e", channel="web")
        await yard.run("plain", turn=turn)
        env = await yard.run("status", turn=turn)
    assert env.get("offloaded") is True
    block = turn.display_md()
    assert block.markdown == "| a | b |" and block.replaces_text is True


# =================================================================================================================
# Display blocks (§6.2)
# =================================================================================================================


async def test_display_merge_rules_and_channels(make_skill, yard_for):
    make_skill("plain", files={"handler.py": "async def execute(i, c):\n    return {'display_md': i['md']}\n"})
    make_skill(
        "only",
        files={"handler.py": "async def execute(i, c):\n    return {'display_md': i['md'], 'display_only': True}\n"},
    )
    async with yard_for() as yard:
        admin = yard.new_turn(session_id="dm-1", channel="web_admin")
        await yard.run("plain", {"md": "P1"}, turn=admin)
        await yard.run("only", {"md": "X1"}, turn=admin)
        await yard.run("plain", {"md": "P2"}, turn=admin)
        await yard.run("only", {"md": "X2"}, turn=admin)
        markdown, replaces = admin.display_md()
        assert replaces is True and "P1" not in markdown and "X1" in markdown and "X2" in markdown
        assert "P2" not in markdown

        web = yard.new_turn(session_id="dm-2", channel="web")
        await yard.run("plain", {"md": "A"}, turn=web)
        assert web.display_md() == ("A", False)

        text = yard.new_turn(session_id="dm-3", channel="wecom")
        await yard.run("plain", {"md": "A"}, turn=text)
        await yard.run("only", {"md": "B"}, turn=text)
        assert text.display_md().markdown == "" and text.display_md().replaces_text is False

        fresh = yard.new_turn(session_id="dm-4", channel="web")
        assert fresh.display_md() == ("", False)


# =================================================================================================================
# URL materialization (§6.3 step 1) through the run pipeline
# =================================================================================================================


async def test_private_addresses_refused_by_default(make_skill, yard_for, db_env, server, seen, monkeypatch):
    monkeypatch.delenv("SKILLYARD_ALLOW_PRIVATE_URLS", raising=False)
    url_skill(make_skill)
    target = f"{server}/img/cat.png"
    localhost = target.replace("127.0.0.1", "localhost")
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "image_url": target, "download_url": localhost}},
            context={"session_id": "mat-1"},
        )
    assert env["ok"] is True
    assert env["image_url"] == target and env["download_url"] == localhost
    assert seen == []
    assert len(env.get("warnings", [])) == 2
    assert "images" not in env and "files" not in env


async def test_explicit_field_downloaded_registered_with_url(
    make_skill, yard_for, db_env, server, seen, allow_private, home
):
    url_skill(make_skill)
    target = f"{server}/img/cat.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "image_url": target}}, context={"session_id": "mat-2"})
    [item] = env["images"]
    path = Path(item["local_path"])
    assert path.read_bytes() == PNG and path.parent == home / "workspaces" / "mat-2"
    assert item["media"] == "image" and item["ref"] == "img_1"
    listed = json.loads((await asyncio.to_thread(invoke, "artifacts", "--session", "mat-2", "--json")).stdout)
    [row] = listed
    assert row["url"] == target and row["ref"] == "img_1" and row["type"] == "image"
    assert row["sha256"] == hashlib.sha256(PNG).hexdigest() and row["size"] == len(PNG) and row["skill"] == "urls"


async def test_ambiguous_fields_and_text_links_probed_pages_skipped(
    make_skill, yard_for, db_env, server, seen, allow_private
):
    url_skill(make_skill)
    result = {
        "ok": True,
        "url": f"{server}/page/index",
        "link": f"{server}/json/api",
        "href": f"{server}/lie/html-as-png",
        "src": f"{server}/lie/json-as-jpeg",
        "image": f"{server}/img/real.png",
        "summary": f"生成完成：{server}/img/from-text.png，请查收",
    }
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": "mat-3"})
    names = sorted(Path(i["local_path"]).name for i in env.get("images", []))
    assert names == ["from-text.png", "real.png"]
    assert "files" not in env and not env.get("warnings")
    for key in ("url", "link", "href", "src", "image", "summary"):
        assert env[key] == result[key]


async def test_at_most_eight_probed_links_per_result(make_skill, yard_for, db_env, server, seen, allow_private):
    url_skill(make_skill)
    text = " ".join(f"{server}/img/t{n}.png" for n in range(12))
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "text": text, "image_urls": [f"{server}/img/e{n}.png" for n in range(10)]}},
            context={"session_id": "mat-4"},
        )
    assert len([p for p in seen if p.startswith("/img/t")]) == 8
    assert len([p for p in seen if p.startswith("/img/e")]) == 10
    assert len(env["images"]) == 18


async def test_size_cap_is_configurable_and_leaves_nothing(
    make_skill, yard_for, db_env, server, seen, allow_private, monkeypatch, home
):
    monkeypatch.setenv("SKILLYARD_MAX_DOWNLOAD_MB", "1")
    url_skill(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {
                "result": {
                    "ok": True,
                    "file_url": f"{server}/big/{2 * 1024 * 1024}",
                    "download_url": f"{server}/bigstream/{2 * 1024 * 1024}",
                    "oss_url": f"{server}/big/{512 * 1024}",
                }
            },
            context={"session_id": "mat-5"},
        )
    assert env["ok"] is True
    assert len(env["warnings"]) == 2
    assert files_in(home / "workspaces" / "mat-5") == [str(512 * 1024)]


async def test_failed_downloads_leave_url_and_warning_never_fail(
    make_skill, yard_for, db_env, server, seen, allow_private, home
):
    url_skill(make_skill)
    result = {
        "ok": True,
        "video_url": f"{server}/status/404",
        "audio_url": f"{server}/truncated/a.png",
        "cdn_url": f"{server}/loop/start",
        "result_url": "ftp://example.invalid/file.bin",
    }
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": result}, context={"session_id": "mat-6"})
    assert env["ok"] is True and env["success"] is True
    for key, value in result.items():
        assert env[key] == value
    assert len(env["warnings"]) == 4
    assert files_in(home / "workspaces" / "mat-6") == []


async def test_redirects_followed_for_downloads(make_skill, yard_for, db_env, server, seen, allow_private):
    url_skill(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "output_url": f"{server}/redirect?to=/img/final.png"}},
            context={"session_id": "mat-7"},
        )
    [item] = env["images"]
    assert Path(item["local_path"]).read_bytes() == PNG


async def test_top_level_entry_with_existing_local_path_is_not_downloaded_again(
    make_skill, yard_for, db_env, server, seen, allow_private, home
):
    """§6.3: "已带存在的 local_path 的条目跳过，幂等" — a single top-level artifact (§6.3 allows top level) that
    already has its file in the workspace, plus the download_url it was fetched from, is skipped."""
    result_skill(
        make_skill,
        "saved",
        """
(ws / "cat.png").write_bytes(input["png"].encode("latin-1"))
return {"ok": True, "local_path": str(ws / "cat.png"), "filename": "cat.png", "media": "image",
        "download_url": input["url"]}
""",
    )
    async with yard_for() as yard:
        env = await yard.run(
            "saved",
            {"png": PNG.decode("latin-1"), "url": f"{server}/img/cat.png"},
            context={"session_id": "mat-8"},
        )
    assert seen == []
    assert files_in(home / "workspaces" / "mat-8") == ["cat.png"]
    assert "images" not in env


async def test_items_with_existing_local_path_skip_download(
    make_skill, yard_for, db_env, server, seen, allow_private, home
):
    result_skill(
        make_skill,
        "saved_items",
        """
(ws / "dog.png").write_bytes(b"dog")
return {"ok": True, "images": [{"url": input["url"], "local_path": str(ws / "dog.png")}]}
""",
    )
    async with yard_for() as yard:
        env = await yard.run("saved_items", {"url": f"{server}/img/dog.png"}, context={"session_id": "mat-9"})
    assert seen == [] and len(env["images"]) == 1 and env["images"][0]["ref"] == "img_1"


async def test_call_skill_results_skip_post_processing(make_skill, yard_for, db_env, server, seen, allow_private):
    result_skill(make_skill, "inner", "return {'ok': True, 'image_url': input['u'], 'blob': 'q' * 20000}")
    make_skill(
        "outer",
        files={
            "handler.py": """
        async def execute(i, ctx):
            r = await ctx["call_skill"]("inner", {"u": i["u"]})
            seen = {"seen_offloaded": r.get("offloaded"), "seen_images": r.get("images")}
            return {"ok": True, **seen, "n": len(r["blob"])}
    """
        },
    )
    async with yard_for() as yard:
        env = await yard.run("outer", {"u": f"{server}/img/x.png"}, context={"session_id": "mat-10"})
    assert env["seen_offloaded"] is None and env["seen_images"] is None and env["n"] == 20000
    assert seen == []


# =================================================================================================================
# Async skills and the wall clock (§8)
# =================================================================================================================


SLOW = """
await asyncio.sleep(float(input.get("sleep", 0.2)))
(ws / "render.mp4").write_bytes(b"mp4")
return {"ok": True, "local_path": str(ws / "render.mp4"), "user_message": "done"}
"""


async def test_async_skill_on_web_admin_runs_in_the_foreground(make_skill, yard_for, db_env, recording_channel):
    result_skill(make_skill, "render", SLOW, frontmatter="name: render\ndescription: d\nasync: true")
    async with yard_for() as yard:
        env = await yard.run("render", context={"session_id": "as-1", "channel": "web_admin"})
    assert env["ok"] is True and "async" not in env and env["ref"] == "video_1"
    assert recording_channel.sent == []


async def test_async_skill_through_call_skill_runs_synchronously(make_skill, yard_for, db_env, recording_channel):
    result_skill(make_skill, "render", SLOW, frontmatter="name: render\ndescription: d\nasync: true")
    make_skill(
        "caller",
        files={
            "handler.py": """
        async def execute(i, ctx):
            return {"inner": await ctx["call_skill"]("render", {})}
    """
        },
    )
    async with yard_for() as yard:
        env = await yard.run("caller", context={"session_id": "as-2", "channel": "dingtalk"})
        await yard.background.drain()
    assert env["inner"]["ok"] is True and "async" not in env["inner"] and env["inner"]["user_message"] == "done"


async def test_background_failure_is_pushed_to_the_channel(make_skill, yard_for, db_env, recording_channel):
    result_skill(
        make_skill, "boom", "raise RuntimeError('kaput')", frontmatter="name: boom\ndescription: d\nasync: true"
    )
    async with yard_for() as yard:
        ack = await yard.run("boom", context={"session_id": "as-3", "channel": "dingtalk", "user_id": "u9"})
        await yard.background.drain()
    assert ack["ok"] is True and ack["async"] is True and isinstance(ack["message"], str)
    [(recipient, text, files)] = recording_channel.sent
    assert recipient["user_id"] == "u9" and "kaput" in text and files == []


async def test_background_run_is_not_bound_by_the_wall_clock(
    make_skill, yard_for, db_env, recording_channel, monkeypatch
):
    """§8: only skills that do not declare async are bound by the per-tool wall clock (default 240 s); async
    skills exist precisely because they take longer than a conversation can wait."""
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", "0.3")
    result_skill(make_skill, "render", SLOW, frontmatter="name: render\ndescription: d\nasync: true")
    async with yard_for() as yard:
        await yard.run("render", {"sleep": 1.0}, context={"session_id": "as-4", "channel": "dingtalk"})
        await yard.background.drain()
    [(_, text, files)] = recording_channel.sent
    assert text.startswith("render finished"), text
    assert files and files[0]["ref"] == "video_1"


async def test_non_async_skill_ignoring_abort_is_cancelled_at_wall_clock(make_skill, yard_for, monkeypatch):
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", "0.4")
    result_skill(make_skill, "stubborn", "await asyncio.sleep(10)\nreturn {'ok': True}")
    async with yard_for() as yard:
        start = time.monotonic()
        env = await yard.run("stubborn")
        took = time.monotonic() - start
    assert env["ok"] is False and env.get("timed_out") is True and took < 3


async def test_abort_signal_is_an_event_the_caller_sets(make_skill, yard_for):
    result_skill(
        make_skill,
        "poller",
        """
ev = ctx["abort_signal"]
assert isinstance(ev, asyncio.Event)
for n in range(300):
    if ev.is_set():
        return {"ok": True, "stopped": n}
    await asyncio.sleep(0.01)
return {"ok": True, "stopped": None}
""",
    )
    async with yard_for() as yard:
        plain = await yard.run("poller", {}, context={"abort_signal": _set_event()})
    assert plain["stopped"] == 0


def _set_event() -> asyncio.Event:
    ev = asyncio.Event()
    ev.set()
    return ev


# =================================================================================================================
# Safe output (doc-runtime-contracts 安全落盘)
# =================================================================================================================


def test_safe_write_no_clobber_and_workspace_relative(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    first = safe_write(ws, "exports/report.json", "1")
    second = safe_write(ws, "exports/report.json", "2")
    assert first == ws / "exports" / "report.json" and second == ws / "exports" / "report-1.json"
    assert first.read_text() == "1" and second.read_text() == "2"
    for bad in ("../x.txt", "/etc/x.txt", "a\x00b"):
        with pytest.raises(ValueError):
            safe_write(ws, bad, "x")
    assert files_in(ws) == ["exports/report-1.json", "exports/report.json"]


# =================================================================================================================
# CLI
# =================================================================================================================


def test_cli_attach_many_and_list_json(make_skill, skills_root, db_env, tmp_path):
    echo_skill(
        make_skill,
        schema={
            "type": "object",
            "properties": {"images": {"type": "array", "items": {"type": "string"}}, "cmd": {"type": "string"}},
        },
    )
    a = tmp_path / "a b.png"
    a.write_bytes(b"png")
    c = tmp_path / "c.mp3"
    c.write_bytes(b"mp3")
    result = invoke(
        "run",
        "echo",
        "--skills-dir",
        str(skills_root),
        "--session",
        "cli-r",
        "--attach",
        str(a),
        "--attach",
        str(c),
        "--input",
        json.dumps({"images": ["img_1", "img_1"], "cmd": "ffmpeg -i audio_1 -i img_1 out.mp4"}),
    )
    assert result.exit_code == 0, result.output
    assert "img_1" in result.stderr and "audio_1" in result.stderr
    got = json.loads(result.stdout)["got"]
    assert got["images"] == [str(a.resolve())]
    assert got["cmd"] == f"ffmpeg -i {c.resolve()} -i '{a.resolve()}' out.mp4"
    listed = json.loads(invoke("artifacts", "--session", "cli-r", "--json").stdout)
    assert [(i["ref"], i["type"], i["skill"] or "") for i in listed] == [
        ("img_1", "image", ""),
        ("audio_1", "audio", ""),
    ]
    for item in listed:
        assert {"ref", "type", "filename", "local_path", "url", "size", "sha256", "skill", "created_at"} <= set(item)


def test_cli_run_with_unsafe_session_is_a_usage_error(make_skill, skills_root):
    echo_skill(make_skill)
    result = invoke("run", "echo", "--skills-dir", str(skills_root), "--session", "../../etc")
    assert result.exit_code == 2 and "not a safe name" in result.output


# =================================================================================================================
# More probes
# =================================================================================================================


async def test_force_raw_prompt_uses_the_subcommand_schema(make_skill, yard_for):
    """§3.2: a fanned-out subcommand is validated against its own schema; §3.4 overwrites "the first required
    field of the schema" — for a subcommand tool that is the subcommand's schema."""
    make_skill(
        "gen",
        frontmatter="""
name: gen
description: d
force_raw_prompt: true
cli_commands:
  draw:
    properties: {prompt: {type: string}, size: {type: string}}
    required: [prompt]
  list: {}
""",
        files={"handler.py": ECHO},
    )
    async with yard_for() as yard:
        env = await yard.run("gen__draw", {"prompt": "a cat, 8k", "size": "s"}, context={"raw_input": "画一只猫"})
    assert env["ok"] is True, env
    assert env["got"]["prompt"] == "画一只猫"


async def test_force_raw_prompt_applies_to_background_runs(make_skill, yard_for, db_env, recording_channel):
    make_skill(
        "slowpaint",
        frontmatter="name: slowpaint\ndescription: d\nasync: true\nforce_raw_prompt: true",
        files={
            "handler.py": "async def execute(i, c):\n    return {'ok': True, 'user_message': i['prompt']}\n",
            "schema.json": json.dumps(
                {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}
            ),
        },
    )
    async with yard_for() as yard:
        ack = await yard.run(
            "slowpaint", {"prompt": "model words"}, context={"channel": "dingtalk", "raw_input": "用户原话"}
        )
        await yard.background.drain()
    assert ack["async"] is True
    assert recording_channel.sent[0][1] == "slowpaint finished. 用户原话"


async def test_materialized_downloads_are_turn_artifacts_and_survive_offload(
    make_skill, yard_for, db_env, server, seen, allow_private
):
    url_skill(make_skill)
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="mat-11", channel="web")
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "image_url": f"{server}/img/p.png", "rows": ["r" * 100] * 200}},
            turn=turn,
        )
    assert env["offloaded"] is True
    assert env["images"][0]["ref"] == "img_1" and Path(env["images"][0]["local_path"]).is_file()
    assert [a["ref"] for a in turn.artifacts] == ["img_1"]


def test_processor_chain_order_is_documented_order(yard_for):
    yard = yard_for()
    names = [p.name for p in yard.registries.processors]
    assert names == ["materialize_urls", "register_artifacts", "collect_artifacts", "offload_large_result"]


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
    assert "ref" not in a and "ref" not in b["files"][0]
    assert turn.artifacts == []
