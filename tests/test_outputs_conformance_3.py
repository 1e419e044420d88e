"""Third review round for issue 3 (files in, artifacts out): black-box probes through the public interfaces
(SkillYard.run / turns / attach, the real ``python -m skillyard`` CLI, runtime_context, the result JSON) of what the
first two rounds (tests/test_outputs_conformance.py, tests/test_outputs_conformance_2.py) probed least: hostile
paths nested in objects and through symlinks, the CLI's --attach/--session edges and the README's artifact example,
the exact offload threshold and receipt of the §6.1 envelope shape, display merging with call_skill, fallback
collection of links and hidden files, async skills from the CLI, background delivery, exec.timeout and
abort_signal. Real PostgreSQL (db_env), real files, real subprocesses."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from support import EXAMPLES
from support.cli import invoke
from support.outputs_probes import echo_skill, listed, result_skill, sid

# =================================================================================================================
# Input side: hostile paths (§3.3 + issue "a model-built path must never escape the session workspace")
# =================================================================================================================


@pytest.mark.parametrize(
    "value, pick, name",
    [
        ({"clips": [{"src": "../../../etc/passwd", "start": 0}]}, lambda g: g["clips"][0]["src"], "passwd"),
        ({"clips": [{"src": "~/.ssh/id_rsa"}]}, lambda g: g["clips"][0]["src"], "id_rsa"),
    ],
    ids=["clips-object-src-dotdot", "clips-object-src-tilde"],
)
async def test_listed_field_inside_array_objects_never_passes_dotdot_or_tilde(
    make_skill, yard_for, home, value, pick, name
):
    """Issue: "a value with `..` segments or a leading `~` is never passed through: it becomes the workspace path
    of its basename", for "the listed field names (and array items)". `src` is a listed name, and the docs' own
    example of clips is a list of objects ({"clips": [{"src": "video_1"}]}): a model-built `src` there must not
    escape the workspace any more than a top-level one."""
    echo_skill(make_skill)
    session = "nest-path"
    async with yard_for() as yard:
        env = await yard.run("echo", value, context={"session_id": session})
    assert env["ok"] is True, env
    assert pick(env["got"]) == str(home / "workspaces" / session / name)


async def test_file_url_and_backslash_dotdot_land_in_workspace(make_skill, yard_for, home):
    """§3.3/issue: `..` segments never pass through — whatever the spelling (a file: URL, Windows separators)."""
    echo_skill(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "echo",
            {"input_file": "file:///tmp/../../etc/hosts", "file_path": "..\\..\\secret.txt"},
            context={"session_id": "bs-1"},
        )
    ws = home / "workspaces" / "bs-1"
    assert env["got"]["input_file"] == str(ws / "hosts")
    assert env["got"]["file_path"] == str(ws / "secret.txt")


async def test_output_field_onto_a_dangling_symlink_out_of_the_workspace_is_refused(
    make_skill, yard_for, home, tmp_path
):
    """Issue: symlinks pointing outside are rejected. An output file is written by the skill: a link in the
    workspace named like the output, pointing at a file outside that does not exist yet, would make the skill
    create a file outside the workspace."""
    echo_skill(make_skill)
    ws = home / "workspaces" / "dl-1"
    ws.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "final.mp4").symlink_to(outside / "final.mp4")
    async with yard_for() as yard:
        env = await yard.run("echo", {"output": "final.mp4"}, context={"session_id": "dl-1"})
    assert env["ok"] is False and env.get("need_param") == "output", env


async def test_relative_path_through_a_symlinked_folder_out_of_the_workspace_is_refused(
    make_skill, yard_for, home, tmp_path
):
    echo_skill(make_skill)
    ws = home / "workspaces" / "dl-2"
    ws.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.png").write_bytes(b"secret")
    (ws / "sub").symlink_to(outside)
    async with yard_for() as yard:
        env = await yard.run("echo", {"image": "sub/a.png"}, context={"session_id": "dl-2"})
    assert env["ok"] is False and env.get("need_param") == "image", env


async def test_absolute_path_into_another_session_through_an_alias_is_refused(make_skill, yard_for, home, tmp_path):
    """Issue: "absolute paths into other sessions' workspaces are rejected" — also when spelled through a
    symlink that lives outside the workspaces folder."""
    echo_skill(make_skill)
    victim = home / "workspaces" / "victim-3"
    victim.mkdir(parents=True)
    (victim / "secret.png").write_bytes(b"s")
    alias = tmp_path / "alias"
    alias.symlink_to(victim)
    async with yard_for() as yard:
        env = await yard.run("echo", {"images": [str(alias / "secret.png")]}, context={"session_id": "al-1"})
    assert env["ok"] is False and env.get("need_param") == "images", env
    assert "another session" in env["error"]


async def test_fields_outside_the_list_are_left_alone(make_skill, yard_for):
    """§3.3 lists the path fields; other fields (a caption, a title) are text and keep their value."""
    echo_skill(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "echo", {"caption": "../../etc/passwd", "title": "~/x.png", "note": "a/b/c.png"}, context={}
        )
    assert env["got"] == {"caption": "../../etc/passwd", "title": "~/x.png", "note": "a/b/c.png"}


async def test_ref_used_as_output_still_lands_in_the_workspace(db_env, make_skill, yard_for, home, tmp_path):
    """§3.3: refs become local paths, and output fields always land in the workspace (they are files to create):
    an output named by an upload's ref must not overwrite the user's original upload outside the workspace."""
    echo_skill(make_skill)
    session = sid("outref")
    upload = tmp_path / "up" / "clip.mp4"
    upload.parent.mkdir()
    upload.write_bytes(b"original")
    async with yard_for() as yard:
        await yard.attach(session, [upload])
        env = await yard.run("echo", {"output": "video_1"}, context={"session_id": session})
    assert env["got"]["output"] == str(home / "workspaces" / session / "clip.mp4")


async def test_argv_list_under_a_code_field_gets_the_bare_path(db_env, make_skill, yard_for, tmp_path):
    """§3.3: a list item exactly equal to a ref becomes the real local_path; quoting is for refs inside text. An
    argv list item is passed to exec as is, so quotes there would become part of the file name."""
    echo_skill(make_skill)
    session = sid("argv")
    photo = tmp_path / "my photos" / "a b.png"
    photo.parent.mkdir()
    photo.write_bytes(b"png")
    async with yard_for() as yard:
        await yard.attach(session, [photo])
        env = await yard.run("echo", {"cmd": ["identify", "img_1"]}, context={"session_id": session})
    assert env["got"]["cmd"] == ["identify", str(photo.resolve())]


async def test_force_raw_prompt_fills_a_required_field_the_model_left_out(make_skill, yard_for):
    """§3.4: the first required field is overwritten with the user's raw text — so a model that left it out does
    not make the run fail the required check."""
    echo_skill(
        make_skill,
        "paint",
        frontmatter="name: paint\ndescription: d\nforce_raw_prompt: true",
        schema={"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
    )
    async with yard_for() as yard:
        env = await yard.run("paint", {}, context={"raw_input": "画一只橘猫"})
    assert env["ok"] is True, env
    assert env["got"]["prompt"] == "画一只橘猫"


# =================================================================================================================
# Sessions without an id
# =================================================================================================================


async def test_a_sessionless_artifact_is_a_ref_for_the_next_sessionless_run(db_env, make_skill, yard_for):
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


# =================================================================================================================
# Fallback collection (§6.3)
# =================================================================================================================


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


# =================================================================================================================
# Offload (§6.4)
# =================================================================================================================


SIZED = "async def execute(i, c):\n    return {'ok': True, 'blob': i['ch'] * int(i['n'])}\n"


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


# =================================================================================================================
# Display blocks (§6.2)
# =================================================================================================================


PLAIN = "async def execute(i, c):\n    return {'display_md': i['md'], 'display_only': i.get('only', False)}\n"


async def test_plain_blocks_are_appended_in_call_order(make_skill, yard_for):
    make_skill("plain", files={"handler.py": PLAIN})
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="dm3-1", channel="web")
        for md in ("first", "second", "third"):
            await yard.run("plain", {"md": md}, turn=turn)
    markdown, replaces = turn.display_md()
    assert replaces is False
    assert markdown.index("first") < markdown.index("second") < markdown.index("third")


async def test_display_only_false_string_is_a_plain_block(make_skill, yard_for):
    """A skill returning display_only "false" (a string, as shell skills do) has not asked for replacement."""
    make_skill("plain", files={"handler.py": PLAIN})
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="dm3-2", channel="web_admin")
        await yard.run("plain", {"md": "A"}, turn=turn)
        await yard.run("plain", {"md": "B", "only": "false"}, turn=turn)
    markdown, replaces = turn.display_md()
    assert replaces is False and "A" in markdown and "B" in markdown


async def test_call_skill_display_blocks_do_not_reach_the_turn(make_skill, yard_for):
    """§9.1: call_skill results skip the output side; the caller decides what it returns. A child's exclusive
    block must not replace the model's text of a turn whose top-level skill returned no block."""
    make_skill("plain", files={"handler.py": PLAIN})
    make_skill(
        "boss",
        files={
            "handler.py": "async def execute(i, ctx):\n"
            "    r = await ctx['call_skill']('plain', {'md': 'CHILD', 'only': True})\n"
            "    return {'ok': True, 'child_ok': r.get('ok')}\n"
        },
    )
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="dm3-3", channel="web")
        env = await yard.run("boss", turn=turn)
    assert env["child_ok"] is True
    assert turn.display_md() == ("", False)


async def test_exclusive_block_clears_plain_and_a_new_turn_starts_afresh(make_skill, yard_for):
    """The first exclusive block clears earlier plain blocks of the same turn; a later turn starts afresh."""
    make_skill("plain", files={"handler.py": PLAIN})
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="dm3-4", channel="web")
        await yard.run("plain", {"md": "P"}, turn=turn)
        await yard.run("plain", {"md": "X", "only": True}, turn=turn)
        assert turn.display_md() == ("X", True)
        nxt = yard.new_turn(session_id="dm3-4", channel="web")
        await yard.run("plain", {"md": "Q"}, turn=nxt)
        assert nxt.display_md() == ("Q", False)


# =================================================================================================================
# Async skills, wall clock, abort_signal (§8)
# =================================================================================================================


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
        ack = await yard.run("render", context={"session_id": sid("push"), "channel": "dingtalk"})
        await yard.background.drain()
    assert ack["async"] is True
    [(_, _, files)] = recording_channel.sent
    assert files, "the thumbnail was produced"
    for item in files:
        assert Path(item["local_path"]).is_file(), item
        assert item.get("ref"), item


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
        ack = await yard.run("dbjob", context={"session_id": sid("dbbg"), "channel": "dingtalk"})
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
        await yard.run("hang", context={"session_id": sid("bgto"), "channel": "dingtalk"})
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


async def test_a_set_abort_signal_stops_a_subprocess_skill(make_skill, yard_for, tmp_path):
    """Issue: "`abort_signal` is an `asyncio.Event` the caller can set to stop a run". A subprocess skill cannot
    poll the Event (it is in-process only), so the platform must act on it: a run whose caller already set the
    signal must not carry on to its end."""
    marker = tmp_path / "reached-the-end"
    make_skill(
        "sleeper",
        frontmatter="name: sleeper\ndescription: d\nexec:\n  config: run.sh\n  timeout: 30",
        files={"run.sh": f"sleep 2\ntouch '{marker}'\necho '{{\"ok\": true}}'\n"},
    )
    stop = asyncio.Event()
    stop.set()
    async with yard_for() as yard:
        env = await yard.run("sleeper", context={"abort_signal": stop})
    assert not marker.exists(), "the skill ran to its end although the caller had set abort_signal"
    assert env["ok"] is False


async def test_call_skill_child_sees_the_callers_abort_signal(make_skill, yard_for):
    """§9.1: abort_signal is passed to the callee (whitelist); setting it stops the whole chain."""
    result_skill(
        make_skill,
        "poller",
        """
for n in range(300):
    if ctx["abort_signal"] is not None and ctx["abort_signal"].is_set():
        return {"ok": True, "stopped": n}
    await asyncio.sleep(0.01)
return {"ok": True, "stopped": None}
""",
    )
    make_skill(
        "boss",
        files={
            "handler.py": "async def execute(i, ctx):\n    return {'inner': await ctx['call_skill']('poller', {})}\n"
        },
    )
    stop = asyncio.Event()
    stop.set()
    async with yard_for() as yard:
        env = await yard.run("boss", context={"abort_signal": stop})
    assert env["inner"]["stopped"] == 0, env


# =================================================================================================================
# CLI (real subprocesses)
# =================================================================================================================


def test_cli_readme_word_report_example_registers_file_1(db_env):
    """README: `skillyard run word_report --skills-dir examples --session demo --input …` writes a CSV that is
    registered as `file_1`, then `skillyard artifacts --session demo` lists it."""
    session = sid("readme")
    run = invoke(
        "run", "word_report", "--skills-dir", str(EXAMPLES), "--session", session, "--input", '{"text": "a b a"}'
    )
    assert run.exit_code == 0, run.stderr
    env = json.loads(run.stdout)
    assert env["ref"] == "file_1"
    table = invoke("artifacts", "--session", session)
    assert table.exit_code == 0, table.stderr
    _header, row = table.stdout.splitlines()
    assert row.split()[0] == "file_1" and "word_report" in row and env["local_path"] in row
    [item] = json.loads(invoke("artifacts", "--session", session, "--json").stdout)
    data = Path(item["local_path"]).read_bytes()
    assert item["skill"] == "word_report" and item["size"] == len(data)
    assert item["sha256"] == hashlib.sha256(data).hexdigest()
    assert Path(item["local_path"]).parent.name == session


def test_cli_attach_uses_the_session_given_in_context(db_env, make_skill, skills_root, tmp_path):
    """docs/cli.md: --session is the "same as "session_id" in --context"; --attach needs a session."""
    echo_skill(make_skill)
    session = sid("ctxsess")
    photo = tmp_path / "a.png"
    photo.write_bytes(b"png")
    proc = invoke(
        "run", "echo", "--skills-dir", str(skills_root), "--context", json.dumps({"session_id": session}),
        "--attach", str(photo), "--input", '{"image": "img_1"}',
    )  # fmt: skip
    assert proc.exit_code == 0, proc.stderr
    assert f"attached img_1: {photo.resolve()}" in proc.stderr
    assert json.loads(proc.stdout)["got"]["image"] == str(photo.resolve())


def test_cli_attach_relative_path_is_printed_and_stored_absolute(
    db_env, make_skill, skills_root, tmp_path, monkeypatch
):
    echo_skill(make_skill)
    session = sid("rel")
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "voice memo.m4a").write_bytes(b"m4a")
    monkeypatch.chdir(tmp_path / "cwd")
    proc = invoke("run", "echo", "--skills-dir", str(skills_root), "--session", session, "--attach", "voice memo.m4a")
    assert proc.exit_code == 0, proc.stderr
    path = str((tmp_path / "cwd" / "voice memo.m4a").resolve())
    assert f"attached audio_1: {path}" in proc.stderr.splitlines()
    [item] = json.loads(proc.stdout)["attachments"]
    assert item["local_path"] == path and item["ref"] == "audio_1"


def test_cli_attach_of_the_same_file_twice_is_one_attachment(db_env, make_skill, skills_root, tmp_path):
    """docs: "A file already registered keeps its id"."""
    echo_skill(make_skill)
    session = sid("twice")
    photo = tmp_path / "a.png"
    photo.write_bytes(b"png")
    proc = invoke(
        "run", "echo", "--skills-dir", str(skills_root), "--session", session,
        "--attach", str(photo), "--attach", str(photo),
    )  # fmt: skip
    assert proc.exit_code == 0, proc.stderr
    assert "img_2" not in proc.stderr
    assert [a["ref"] for a in json.loads(proc.stdout)["attachments"]] == ["img_1"]


def test_cli_run_with_an_empty_session_id_is_a_usage_error(db_env, make_skill, skills_root, tmp_path):
    """Issue: "A session id that is not a safe name is rejected with a clear error"; docs/files-and-artifacts.md:
    "a session id must be 1–128 letters …" — an empty `--session ""` is not one; it must not silently run (and
    attach) in another session."""
    echo_skill(make_skill)
    proc = invoke("run", "echo", "--skills-dir", str(skills_root), "--session", "")
    assert proc.exit_code == 2, (proc.exit_code, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr


def test_cli_artifacts_needs_a_session_and_refuses_an_empty_one(db_env):
    missing = invoke("artifacts", "--json")
    assert missing.exit_code == 2 and "--session" in missing.stderr
    empty = invoke("artifacts", "--session", "", "--json")
    assert empty.exit_code == 2 and "Traceback" not in empty.stderr


def test_cli_async_skill_on_a_chat_channel_finishes_before_the_command_exits(db_env, make_skill, skills_root):
    """docs: an async skill on a non-web channel answers at once and runs as a task of the host; "close() waits
    for it". From the CLI (--context channel) the background run must still finish and register its file
    before the process exits, rather than being dropped with the event loop."""
    result_skill(
        make_skill,
        "render",
        """
await asyncio.sleep(1.0)
(ws / "render.mp4").write_bytes(b"mp4")
return {"ok": True, "local_path": str(ws / "render.mp4")}
""",
        frontmatter="name: render\ndescription: d\nasync: true",
    )
    session = sid("cliasync")
    proc = invoke(
        "run", "render", "--skills-dir", str(skills_root), "--session", session,
        "--context", json.dumps({"channel": "dingtalk"}),
    )  # fmt: skip
    assert proc.exit_code == 0, proc.stderr
    ack = json.loads(proc.stdout)
    assert ack["ok"] is True and ack["async"] is True and isinstance(ack["message"], str)
    listing = json.loads(invoke("artifacts", "--session", session, "--json").stdout)
    assert [(i["ref"], i["skill"]) for i in listing] == [("video_1", "render")]
    assert Path(listing[0]["local_path"]).is_file()


# =================================================================================================================
# More probes
# =================================================================================================================


async def test_output_field_into_another_sessions_workspace_is_refused(make_skill, yard_for, home):
    """Issue: absolute paths into other sessions' workspaces are rejected with a clear error — output fields too
    (silently rewriting them would hide that the model aimed at someone else's files)."""
    echo_skill(make_skill)
    victim = home / "workspaces" / "victim-4"
    victim.mkdir(parents=True)
    async with yard_for() as yard:
        env = await yard.run("echo", {"dst": str(victim / "x.mp4")}, context={"session_id": "od-1"})
    assert env["ok"] is False and env.get("need_param") == "dst", env
    assert "another session" in env["error"]


async def test_symlink_that_stays_inside_the_workspace_is_accepted(make_skill, yard_for, home):
    """Only links leading *outside* are refused; a link to another file of the same workspace is fine."""
    echo_skill(make_skill)
    ws = home / "workspaces" / "in-link"
    ws.mkdir(parents=True)
    (ws / "real.png").write_bytes(b"png")
    (ws / "alias.png").symlink_to(ws / "real.png")
    async with yard_for() as yard:
        env = await yard.run("echo", {"image": "alias.png"}, context={"session_id": "in-link"})
    assert env["ok"] is True, env
    assert env["got"]["image"] == str(ws / "alias.png")


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
    assert "ref" not in env["files"][0], env
    assert turn.artifacts == []
    assert await listed(session) == []


def test_cli_workspace_and_session_register_artifacts_of_that_session(db_env, make_skill, skills_root, tmp_path):
    """docs/cli.md: --workspace picks the run's folder, --session its attachments: the artifact written in the
    given folder is listed under the session."""
    result_skill(
        make_skill,
        "draw",
        '(ws / "chart.png").write_bytes(b"png")\nreturn {"ok": True, "local_path": str(ws / "chart.png")}',
    )
    session = sid("cliws")
    folder = tmp_path / "my ws"
    proc = invoke("run", "draw", "--skills-dir", str(skills_root), "--session", session, "--workspace", str(folder))
    assert proc.exit_code == 0, proc.stderr
    env = json.loads(proc.stdout)
    assert env["ref"] == "img_1" and Path(env["local_path"]).parent == folder.resolve()
    listing = json.loads(invoke("artifacts", "--session", session, "--json").stdout)
    assert [(i["ref"], i["local_path"]) for i in listing] == [("img_1", env["local_path"])]
