"""Files out (§6.2–6.4, §8): artifact registration, fallback collection, offload, display blocks, async skills."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from support.cli import invoke

WRITER = """
from pathlib import Path
async def execute(input, ctx):
    ws = Path(ctx["workspace_dir"])
    (ws / "chart.png").write_bytes(b"\\x89PNG fake")
    return {"ok": True, "local_path": str(ws / "chart.png"), "media": "image", "filename": "chart.png"}
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


async def test_display_blocks_merge_per_turn(make_skill, yard_for):
    make_skill("plain", files={"handler.py": "async def execute(i, c):\n    return {'display_md': i['md']}\n"})
    make_skill(
        "only",
        files={
            "handler.py": """
        async def execute(i, c):
            return {'display_md': i['md'], 'display_only': True}
    """
        },
    )
    async with yard_for() as yard:
        web = yard.new_turn(session_id="d1", channel="web")
        await yard.run("plain", {"md": "A"}, turn=web)
        await yard.run("plain", {"md": "B"}, turn=web)
        assert web.display_md().markdown == "A\n\nB" and web.display_md().replaces_text is False
        await yard.run("only", {"md": "ONLY"}, turn=web)
        await yard.run("plain", {"md": "C"}, turn=web)
        block = web.display_md()
        assert block.markdown == "ONLY" and block.replaces_text is True
        text = yard.new_turn(session_id="d2", channel="telegram")
        await yard.run("only", {"md": "X"}, turn=text)
        assert text.display_md().markdown == "" and text.display_md().replaces_text is False


async def test_attachments_reach_the_context_and_refs_become_paths(make_skill, yard_for, db_env, tmp_path):
    upload = tmp_path / "photo of me.jpg"
    upload.write_bytes(b"jpeg")
    make_skill(
        "look",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"image": input.get("image"), "cmd": input.get("command"), "atts": ctx["attachments"]}
    """,
            "schema.json": json.dumps(
                {"type": "object", "properties": {"image": {"type": "string"}, "command": {"type": "string"}}}
            ),
        },
    )
    async with yard_for() as yard:
        [item] = await yard.attach("ctx-1", [upload])
        turn = yard.new_turn(session_id="ctx-1", channel="web")
        env = await yard.run("look", {"image": "img_1", "command": "convert img_1 out.png"}, turn=turn)
    assert item["ref"] == "img_1"
    assert env["image"] == str(upload.resolve())
    assert env["cmd"] == f"convert '{upload.resolve().as_posix()}' out.png"
    att = env["atts"][0]
    assert {k: att[k] for k in ("type", "att_type", "filename", "ref")} == {
        "type": "image",
        "att_type": "image",
        "filename": "photo of me.jpg",
        "ref": "img_1",
    }
    assert turn.attachments is not None and turn.attachments[0]["ref"] == "img_1"


async def test_attachments_are_read_once_per_turn(make_skill, yard_for, db_env, tmp_path):
    make_skill("count", files={"handler.py": "async def execute(i, ctx):\n    return {'n': len(ctx['attachments'])}\n"})
    (tmp_path / "a.txt").write_text("a")
    async with yard_for() as yard:
        await yard.attach("once-1", [tmp_path / "a.txt"])
        turn = yard.new_turn(session_id="once-1")
        assert (await yard.run("count", turn=turn))["n"] == 1
        (tmp_path / "b.txt").write_text("b")
        await yard.attach("once-1", [tmp_path / "b.txt"])  # behind the turn's back
        assert (await yard.run("count", {"x": 1}, turn=turn))["n"] == 1
        assert (await yard.run("count", {"x": 2}, turn=yard.new_turn(session_id="once-1")))["n"] == 2


async def test_artifacts_of_a_turn_are_listed_on_it(make_skill, yard_for, db_env):
    make_skill("writer", files={"handler.py": WRITER})
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="turn-art", channel="web")
        await yard.run("writer", turn=turn)
    assert [a["ref"] for a in turn.artifacts] == ["img_1"] and turn.artifacts[0]["type"] == "image"


async def test_force_raw_prompt_overwrites_the_first_required_field(make_skill, yard_for):
    make_skill(
        "paint",
        frontmatter="name: paint\ndescription: d\nforce_raw_prompt: true",
        files={
            "handler.py": "async def execute(i, c):\n    return {'prompt': i['prompt']}\n",
            "schema.json": json.dumps(
                {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}
            ),
        },
    )
    make_skill(
        "delegator",
        files={
            "handler.py": """
        async def execute(i, ctx):
            return await ctx["call_skill"]("paint", {"prompt": "upstream text"})
    """
        },
    )
    async with yard_for() as yard:
        direct = await yard.run("paint", {"prompt": "a cat"}, context={"raw_input": "画一只戴帽子的猫"})
        delegated = await yard.run("delegator", context={"raw_input": "画一只戴帽子的猫"})
    assert direct["prompt"] == "画一只戴帽子的猫"
    assert delegated["prompt"] == "upstream text"


SLOW_RENDER = """
import asyncio
from pathlib import Path
async def execute(input, ctx):
    await asyncio.sleep(0.2)
    out = Path(ctx["workspace_dir"]) / "video.mp4"
    out.write_bytes(b"mp4")
    return {"ok": True, "local_path": str(out), "media": "video", "user_message": "rendered",
            "saw": [ctx["request"], ctx["channel_registry"], ctx["abort_signal"], ctx["api_key"]]}
"""


async def test_async_skills_answer_at_once_and_push_results(make_skill, yard_for, db_env, recording_channel):
    make_skill("render", frontmatter="name: render\ndescription: d\nasync: true", files={"handler.py": SLOW_RENDER})
    async with yard_for() as yard:
        ack = await yard.run(
            "render",
            context={"session_id": "bg-1", "channel": "telegram", "user_id": "u1", "skill_args": {"api_key": "k"}},
        )
        assert ack == {"ok": True, "success": True, "async": True, "message": ack["message"]}
        assert recording_channel.sent == []
        await yard.background.drain()
        web = await yard.run("render", context={"session_id": "bg-2", "channel": "web", "skill_args": {"api_key": "k"}})
    [(recipient, text, files)] = recording_channel.sent
    assert recipient["channel"] == "telegram" and recipient["session_id"] == "bg-1" and recipient["user_id"] == "u1"
    assert text == "render finished. rendered"
    assert files[0]["media"] == "video" and files[0]["ref"] == "video_1" and Path(files[0]["local_path"]).is_file()
    assert web["ok"] is True and "async" not in web and web["saw"][3] == "k"


async def test_background_runs_get_no_live_request_and_prefetched_configs(make_skill, yard_for, recording_channel):
    make_skill(
        "probe",
        frontmatter="name: probe\ndescription: d\nasync: true",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"user_message": repr([ctx["request"], ctx["channel_registry"], ctx["abort_signal"],
                                          ctx["api_key"], ctx["skill_configs"]["probe"]["api_key"]])}
    """
        },
    )
    async with yard_for() as yard:
        await yard.run("probe", context={"channel": "telegram", "skill_args": {"api_key": "pre"}})
        await yard.background.drain()
    assert recording_channel.sent[0][1] == "probe finished. [None, None, None, 'pre', 'pre']"


async def test_abort_signal_stops_a_cooperative_skill(make_skill, yard_for):
    make_skill(
        "loop",
        files={
            "handler.py": """
        import asyncio
        async def execute(input, ctx):
            for i in range(500):
                if ctx["abort_signal"].is_set():
                    return {"stopped_at": i}
                await asyncio.sleep(0.01)
            return {"stopped_at": None}
    """
        },
    )
    async with yard_for() as yard:
        abort = asyncio.Event()
        task = asyncio.create_task(yard.run("loop", context={"abort_signal": abort}))
        await asyncio.sleep(0.1)
        abort.set()
        env = await task
    assert env["stopped_at"] is not None and env["stopped_at"] < 100


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


PATHS = """
async def execute(input, ctx):
    return {"got": {k: input.get(k) for k in ("image", "output", "files")}, "ws": ctx["workspace_dir"]}
"""
PATHS_SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {
            "image": {"type": "string"},
            "output": {"type": "string"},
            "files": {"type": "array", "items": {"type": "string"}},
        },
    }
)


async def test_model_built_paths_land_in_the_session_workspace(make_skill, yard_for, home):
    make_skill("paths", files={"handler.py": PATHS, "schema.json": PATHS_SCHEMA})
    ws = home / "workspaces" / "p-1"
    ws.mkdir(parents=True)
    (ws / "in.png").write_bytes(b"png")
    async with yard_for() as yard:
        env = await yard.run(
            "paths",
            {
                "image": "some/dir/in.png",
                "output": "/etc/out.mp4",
                "files": ["../../etc/passwd", "~/secrets.txt", "in.png", "in.png"],
            },
            context={"session_id": "p-1"},
        )
        nul = await yard.run("paths", {"image": "a\x00b"}, context={"session_id": "p-1"})
        other = await yard.run(
            "paths", {"image": str(home / "workspaces" / "p-2" / "x.png")}, context={"session_id": "p-1"}
        )
    got = env["got"]
    assert got["image"] == str(ws / "in.png") and got["output"] == str(ws / "out.mp4")
    assert got["files"][0] == str(ws / "passwd") and got["files"][1] == str(ws / "secrets.txt")
    assert got["files"].count(str(ws / "in.png")) == 1
    assert nul["ok"] is False and nul["need_param"] == "image" and nul["error_type"] == "recoverable"
    assert other["ok"] is False and other["need_param"] == "image" and "another session" in other["error"].lower()


async def test_a_symlink_out_of_the_workspace_is_refused(make_skill, yard_for, home, tmp_path):
    make_skill("paths", files={"handler.py": PATHS, "schema.json": PATHS_SCHEMA})
    ws = home / "workspaces" / "p-3"
    ws.mkdir(parents=True)
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"s")
    (ws / "link.png").symlink_to(secret)
    async with yard_for() as yard:
        env = await yard.run("paths", {"image": "link.png"}, context={"session_id": "p-3"})
    assert env["ok"] is False and env["need_param"] == "image"


def test_display_block_unpacks():
    from skillyard.outputs.display import DisplayMerge

    merge = DisplayMerge()
    merge.add({"display_md": "X", "display_only": True})
    markdown, replaces = merge.render("web_admin")
    assert (markdown, replaces) == ("X", True)
