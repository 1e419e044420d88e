"""Offloading large results (§6.4, outputs/offload.py): over 12,000 characters a result goes to a workspace file
and the caller gets a receipt."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from support.outputs_probes import BIG_ROWS, listed, result_skill, sid, writer

BIG = """
(ws / "cover.png").write_bytes(b"\\x89PNG")
rows = [{"i": i, "text": "x" * 100} for i in range(int(input.get("n", 200)))]
return {"ok": True, "rows": rows, "count": len(rows), "filename": "cover.png", "local_path": str(ws / "cover.png"),
        "media": "image", "download_url": "", "abs_url": "", "images": [str(ws / "cover.png")],
        "display_md": "**rows**", "tags": ["a", "b"]}
"""

SIZED = "async def execute(i, c):\n    return {'ok': True, 'blob': i['ch'] * int(i['n'])}\n"


async def test_large_results_are_offloaded_to_a_receipt(make_skill, yard_for):
    make_skill(
        "big",
        files={
            "handler.py": """
        async def execute(input, ctx):
            rows = [{"i": i, "text": "x" * 100} for i in range(200)]
            return {"ok": True, "rows": rows, "count": 200, "display_md": "**200 rows**", "media": "file"}
    """
        },
    )
    make_skill(
        "reader",
        frontmatter="name: reader\ndescription: d\noffload: false",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"ok": True, "page": "y" * 20000}
    """
        },
    )
    make_skill(
        "bigfail",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"ok": False, "error": "e", "dump": "z" * 20000}
    """
        },
    )
    async with yard_for() as yard:
        env = await yard.run("big", context={"session_id": "off-1"})
        reader = await yard.run("reader", context={"session_id": "off-1"})
        failed = await yard.run("bigfail", context={"session_id": "off-1"})
    assert env["offloaded"] is True and env["ok"] is True and env["display_md"] == "**200 rows**"
    assert env["media"] == "file" and env["fields"] == ["ok", "rows", "count", "display_md", "media", "success"]
    assert env["arrays"]["rows"]["count"] == 200 and env["arrays"]["rows"]["sample"] == {"i": 0, "text": "x" * 100}
    path = Path(env["offload_file"])
    assert path.parent.name == "offload" and json.loads(path.read_text())["rows"][199]["i"] == 199
    assert "rows" not in env and len(json.dumps(env)) < 12_000
    assert "offloaded" not in reader and len(reader["page"]) == 20000
    assert "offloaded" not in failed


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


@pytest.mark.spec("§6.2")
@pytest.mark.spec("§6.4")
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


async def test_offload_threshold_is_exactly_over_12000_characters(make_skill, yard_for):
    """Issue: "a successful result whose JSON exceeds 12,000 characters" — 12,000 stays, 12,001 is offloaded."""
    make_skill("sized", files={"handler.py": SIZED})
    async with yard_for() as yard:
        probe = await yard.run("sized", {"ch": "y", "n": 11_000}, context={"session_id": "th-1"})
        size = len(json.dumps(probe, ensure_ascii=False))
        n = 11_000 + 12_000 - size
        exact = await yard.run("sized", {"ch": "y", "n": n}, context={"session_id": "th-1"})
        over = await yard.run("sized", {"ch": "y", "n": n + 1}, context={"session_id": "th-1"})
    assert len(json.dumps(exact, ensure_ascii=False)) == 12_000
    assert "offloaded" not in exact
    assert over.get("offloaded") is True


@pytest.mark.spec("§6.4")
async def test_offload_counts_characters_not_escaped_bytes(make_skill, yard_for):
    """§6.4 counts characters of the serialized result: 11,000 Chinese characters are under the limit (they would
    be 66,000 characters only if escaped as \\uXXXX)."""
    make_skill("sized", files={"handler.py": SIZED})
    async with yard_for() as yard:
        env = await yard.run("sized", {"ch": "字", "n": 11_000}, context={"session_id": "th-2"})
    assert "offloaded" not in env and len(env["blob"]) == 11_000


async def test_failed_large_result_is_not_offloaded(make_skill, yard_for):
    """Only a *successful* result is offloaded; a failure keeps its error text for the model."""
    make_skill(
        "loud",
        files={
            "handler.py": "async def execute(i, c):\n"
            "    return {'ok': False, 'error': 'bad input: ' + 'e' * 20000, 'error_type': 'recoverable'}\n"
        },
    )
    async with yard_for() as yard:
        env = await yard.run("loud", context={"session_id": "th-3"})
    assert env["ok"] is False and "offloaded" not in env and len(env["error"]) > 20000


@pytest.mark.spec("§6.1")
@pytest.mark.spec("§6.4")
async def test_offload_receipt_describes_arrays_of_the_standard_envelope(make_skill, yard_for):
    """§6.1's envelope is {"success": True, "data": {...}}; §6.4's receipt keeps "数组计数与首条样例". For a
    result shaped the way the spec tells skills to shape it, the big array sits in `data`: a receipt that
    counts no array at all tells the model nothing about what it has to read."""
    make_skill(
        "table",
        files={
            "handler.py": "async def execute(i, c):\n"
            "    rows = [{'id': n, 'text': 'r' * 100} for n in range(200)]\n"
            "    return {'success': True, 'data': {'rows': rows, 'total': 200}}\n"
        },
    )
    async with yard_for() as yard:
        env = await yard.run("table", context={"session_id": "th-4"})
    assert env.get("offloaded") is True
    counts = {json.dumps(v.get("sample"), sort_keys=True): v.get("count") for v in env["arrays"].values()}
    assert counts.get(json.dumps({"id": 0, "text": "r" * 100}, sort_keys=True)) == 200, env["arrays"]


async def test_offload_receipt_has_counts_and_samples_for_nested_arrays_of_arrays(make_skill, yard_for):
    """An array whose items are arrays (a matrix) is counted with its first row as the sample."""
    make_skill(
        "matrix",
        files={
            "handler.py": "async def execute(i, c):\n"
            "    return {'ok': True, 'grid': [[n, 'c' * 60] for n in range(300)]}\n"
        },
    )
    async with yard_for() as yard:
        env = await yard.run("matrix", context={"session_id": "th-5"})
    assert env.get("offloaded") is True
    assert env["arrays"]["grid"] == {"count": 300, "sample": [0, "c" * 60]}
    assert json.loads(Path(env["offload_file"]).read_text())["grid"][299][0] == 299


@pytest.mark.spec("§6.4")
async def test_offload_false_applies_to_array_results_too(make_skill, yard_for):
    """§6.4: readers page their own output and opt out with offload: false — whatever the result's shape."""
    make_skill(
        "reader",
        frontmatter="name: reader\ndescription: d\noffload: false",
        files={
            "handler.py": "async def execute(i, c):\n    return {'ok': True, 'lines': ['l' * 80] * 400, 'next': 400}\n"
        },
    )
    async with yard_for() as yard:
        env = await yard.run("reader", context={"session_id": "th-6"})
    assert "offloaded" not in env and len(env["lines"]) == 400


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


@pytest.mark.spec("§6.1")
@pytest.mark.spec("§6.4")
async def test_a_large_result_without_ok_is_offloaded(db_env, make_skill, yard_for):
    """§6.1: "缺省或 None 不算失败"; §6.4: "成功且序列化后超过 12000 字符的返回会被写入工作区文件" — a result that
    states no ok is a success and is offloaded."""
    writer(make_skill)
    async with yard_for() as yard:
        env = await yard.run("writer", {"result": {"rows": BIG_ROWS}}, context={"session_id": sid("offnook")})
    assert env.get("offloaded") is True, list(env)


@pytest.mark.spec("§6.4")
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


@pytest.mark.spec("§6.3")
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


@pytest.mark.spec("§2.3")
@pytest.mark.spec("§6.4")
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


@pytest.mark.spec("§6.4")
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
