"""Async skills (§8, invoke/background.py): answered at once on chat channels, run in the background, results and
files pushed to the conversation."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from skillyard.chains import background_runs
from support.outputs_probes import BIG_ROWS, PNG, listed, make_files, result_skill, sid, writer

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

SLOW = """
await asyncio.sleep(float(input.get("sleep", 0.2)))
(ws / "render.mp4").write_bytes(b"mp4")
return {"ok": True, "local_path": str(ws / "render.mp4"), "user_message": "done"}
"""

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


async def test_async_skills_answer_at_once_and_push_results(make_skill, yard_for, db_env, recording_channel):
    make_skill("render", frontmatter="name: render\ndescription: d\nasync: true", files={"handler.py": SLOW_RENDER})
    async with yard_for() as yard:
        ack = await yard.run(
            "render",
            context={"session_id": "bg-1", "channel": "chat-t", "user_id": "u1", "skill_args": {"api_key": "k"}},
        )
        assert ack == {"ok": True, "success": True, "async": True, "run_id": ack["run_id"], "message": ack["message"]}
        assert recording_channel.sent == []
        running = await background_runs.read(yard, ack["run_id"])
        assert running is not None and running.session_id == "bg-1" and running.skill == "render"
        await yard.background.drain()
        done = await background_runs.read(yard, ack["run_id"])
        assert done is not None and done.status == "succeeded" and done.envelope["ok"] is True
        web = await yard.run("render", context={"session_id": "bg-2", "channel": "web", "skill_args": {"api_key": "k"}})
    [(recipient, text, files)] = recording_channel.sent
    assert recipient["channel"] == "chat-t" and recipient["session_id"] == "bg-1" and recipient["user_id"] == "u1"
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
        await yard.run("probe", context={"channel": "chat-t", "skill_args": {"api_key": "pre"}})
        await yard.background.drain()
    assert recording_channel.sent[0][1] == "probe finished. [None, None, None, 'pre', 'pre']"


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
        env = await yard.run("caller", context={"session_id": "as-2", "channel": "chat-d"})
        await yard.background.drain()
    assert env["inner"]["ok"] is True and "async" not in env["inner"] and env["inner"]["user_message"] == "done"


async def test_background_failure_is_pushed_to_the_channel(make_skill, yard_for, db_env, recording_channel):
    result_skill(
        make_skill, "boom", "raise RuntimeError('kaput')", frontmatter="name: boom\ndescription: d\nasync: true"
    )
    async with yard_for() as yard:
        ack = await yard.run("boom", context={"session_id": "as-3", "channel": "chat-d", "user_id": "u9"})
        await yard.background.drain()
    assert ack["ok"] is True and ack["async"] is True and isinstance(ack["message"], str)
    [(recipient, text, files)] = recording_channel.sent
    assert recipient["user_id"] == "u9" and "kaput" in text and files == []


@pytest.mark.spec("§8")
async def test_background_run_is_not_bound_by_the_wall_clock(
    make_skill, yard_for, db_env, recording_channel, monkeypatch
):
    """§8: only skills that do not declare async are bound by the per-tool wall clock (default 240 s); async
    skills exist precisely because they take longer than a conversation can wait."""
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", "0.3")
    result_skill(make_skill, "render", SLOW, frontmatter="name: render\ndescription: d\nasync: true")
    async with yard_for() as yard:
        await yard.run("render", {"sleep": 1.0}, context={"session_id": "as-4", "channel": "chat-d"})
        await yard.background.drain()
    [(_, text, files)] = recording_channel.sent
    assert text.startswith("render finished"), text
    assert files and files[0]["ref"] == "video_1"


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
            "slowpaint", {"prompt": "model words"}, context={"channel": "chat-d", "raw_input": "用户原话"}
        )
        await yard.background.drain()
    assert ack["async"] is True
    assert recording_channel.sent[0][1] == "slowpaint finished. 用户原话"


async def test_ack_comes_at_once_and_artifacts_reach_the_channel(db_env, make_skill, yard_for, recording_channel):
    result_skill(make_skill, "render", RENDER, frontmatter=ASYNC_FM)
    session = sid("async")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=session, channel="chat-d", user_id="u1", reply_to="msg-7")
        start = time.monotonic()
        ack = await yard.run("render", {"sleep": 1.5}, turn=turn)
        took = time.monotonic() - start
        assert recording_channel.sent == []
        await yard.background.drain()
    assert took < 1.0, took
    assert set(ack) <= {"ok", "success", "async", "run_id", "message"} and ack["ok"] is True and ack["async"] is True
    assert isinstance(ack["message"], str) and ack["message"]
    [(recipient, _, files)] = recording_channel.sent
    assert recipient["channel"] == "chat-d" and recipient["session_id"] == session
    assert recipient["user_id"] == "u1" and recipient["reply_to"] == "msg-7"
    delivered = sorted((Path(f["local_path"]).name, f["ref"]) for f in files)
    assert delivered == [("render.mp4", "video_1"), ("thumb.png", "img_1")], files
    assert {a["ref"] for a in await listed(session)} == {"video_1", "img_1"}


@pytest.mark.spec("§8")
@pytest.mark.spec("§5.1")
async def test_background_run_gets_no_live_objects_and_prefetched_configs(
    db_env, make_skill, yard_for, recording_channel
):
    """§8: request / channel_registry / abort_signal are None in the background; configs were fetched before
    dispatch and sit in the four places of §5.1 — a change made while the run is going is not what it sees."""
    result_skill(make_skill, "render", RENDER, frontmatter=ASYNC_FM)
    async with yard_for() as yard:
        await yard.configs.set("r1", "render", {"model": "m-1", "style": "noir"})
        ack = await yard.run(
            "render", {"sleep": 0.5}, context={"channel": "chat-d", "role_id": "r1", "session_id": sid("cfg")}
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


@pytest.mark.spec("§8")
async def test_background_push_holds_only_files_that_exist(db_env, make_skill, yard_for, recording_channel):
    """§8: when done, "the artifacts are pushed". A declared local_path the skill never wrote is not an artifact
    (it is not registered); a channel handed a path to nothing would fail to send or send an empty file."""
    result_skill(
        make_skill,
        "render",
        """
(ws / "thumb.png").write_bytes(b"png")
return {"ok": True, "local_path": str(ws / "never-written.mp4"), "images": [str(ws / "thumb.png")]}
""",
        frontmatter="name: render\ndescription: d\nasync: true",
    )
    async with yard_for() as yard:
        ack = await yard.run("render", context={"session_id": sid("push"), "channel": "chat-d"})
        await yard.background.drain()
    assert ack["async"] is True
    [(_, _, files)] = recording_channel.sent
    assert files, "the thumbnail was produced"
    for item in files:
        assert Path(item["local_path"]).is_file(), item
        assert item.get("ref"), item


@pytest.mark.spec("§8")
async def test_background_run_of_a_db_skill_gets_its_own_session_and_db_factory(
    db_env, make_skill, yard_for, recording_channel
):
    """§8: "后台 db 是独立会话，同时提供 db_factory"."""
    result_skill(
        make_skill,
        "dbjob",
        """
from sqlalchemy import text
value = (await ctx["db"].execute(text("select 41 + 1"))).scalar()
return {"ok": True, "user_message": json.dumps({"v": value, "factory": ctx.get("db_factory") is not None})}
""",
        frontmatter="name: dbjob\ndescription: d\nasync: true",
    )
    async with yard_for() as yard:
        ack = await yard.run("dbjob", context={"session_id": sid("dbbg"), "channel": "chat-d"})
        await yard.background.drain()
    assert ack["async"] is True
    [(_, text, _)] = recording_channel.sent
    assert json.loads(text.split(" ", 2)[2]) == {"v": 42, "factory": True}, text


async def test_background_run_keeps_the_skills_own_exec_timeout(db_env, make_skill, yard_for, recording_channel):
    """docs: the background run has no default wall clock, "an `exec.timeout` the skill sets still applies"."""
    result_skill(
        make_skill,
        "hang",
        "await asyncio.sleep(30)\nreturn {'ok': True}",
        frontmatter="name: hang\ndescription: d\nasync: true\nexec:\n  timeout: 0.5",
    )
    async with yard_for() as yard:
        await yard.run("hang", context={"session_id": sid("bgto"), "channel": "chat-d"})
        await yard.background.drain()
    [(_, text, files)] = recording_channel.sent
    assert text.startswith("hang failed"), text
    assert files == []


async def test_async_skill_on_web_is_bound_by_the_configured_wall_clock(make_skill, yard_for, monkeypatch):
    """docs: "An async skill run in the foreground (web, CLI, call_skill) keeps the wall clock"."""
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", "0.4")
    result_skill(
        make_skill, "hang", "await asyncio.sleep(30)\nreturn {'ok': True}", "name: hang\ndescription: d\nasync: true"
    )
    async with yard_for() as yard:
        env = await yard.run("hang", context={"channel": "web"})
    assert env["ok"] is False and env.get("timed_out") is True


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
        turn = yard.new_turn(session_id=session, channel="chat-t", user_id="u9")
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


@pytest.mark.spec("§3.3")
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
        turn = yard.new_turn(session_id=session, channel="chat-d")
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
        turn = yard.new_turn(session_id=sid("bgkeys"), channel="chat-t")
        await yard.run(
            "bg", {"files": {"song.mp3": "s"}, "result": {"ok": True, "audios": ["{ws}/song.mp3"]}}, turn=turn
        )
        await yard.background.drain()
    [(_, _, files)] = recording_channel.sent
    [item] = files
    assert {"local_path", "filename", "media", "ref"} <= set(item), item
    assert item["ref"] == "audio_1" and item["media"] == "audio" and item["filename"] == "song.mp3"


@pytest.mark.spec("§8")
@pytest.mark.spec("§6.4")
async def test_a_large_background_result_is_pushed_with_its_files(db_env, make_skill, yard_for, recording_channel):
    """§8 "完成后按发起渠道主动推送产物" with §6.4: a background result large enough to be offloaded still pushes its
    artifact (the receipt keeps `images`)."""
    writer(make_skill, "bigbg", frontmatter="name: bigbg\ndescription: d\nasync: true")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=sid("bgbig"), channel="chat-t")
        await yard.run(
            "bigbg",
            {"files": {"p.png": "p"}, "result": {"ok": True, "rows": BIG_ROWS, "images": ["{ws}/p.png"]}},
            turn=turn,
        )
        await yard.background.drain()
    [(_, _, files)] = recording_channel.sent
    assert [f["ref"] for f in files] == ["img_1"]


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
        turn = yard.new_turn(session_id=sid("bgsec"), channel="chat-t", role_id="r-bg")
        ack = await yard.run("bgleak", turn=turn)
        await yard.background.drain()
    assert ack["async"] is True
    [(_, text, _)] = recording_channel.sent
    assert "BGSECRET" not in text, text
