"""runtime_context (§4, §5.1, invoke/context.py): fixed fields, the platform segment, admin fill, configs in four
places, a session's attachments."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.invoke.context import ACTOR_KEYS, FIXED_FIELDS
from support.outputs_probes import echo_skill, make_files, result_skill, sid
from support.skills import run_skill, yard_of

DUMP = """
async def execute(input, ctx):
    plain = (str, int, float, bool, list, dict, type(None))
    return {"ctx": {k: v for k, v in ctx.items() if isinstance(v, plain) and not k.startswith("_")}}
"""


@pytest.fixture
def dump_yard(make_skill, skills_root):
    make_skill("dump", files={"handler.py": DUMP})
    return SkillYard(skills_dirs=[skills_root], include_builtin=False)


FIXED = {
    "raw_input": "str",
    "attachments": "list",
    "actor_name": "str",
    "actor_emp_no": "str",
    "actor_department": "str",
    "actor_department_path": "str",
    "actor_position": "str",
    "actor_title": "str",
    "actor_phone": "str",
    "actor_email": "str",
    "actor_tags": "list",
    "actor_key": "str",
    "channel": "str",
    "triggered_at": "float",
    "triggered_at_str": "str",
    "actor_id": "str",
    "actor_is_admin": "bool",
}

PLATFORM = {
    "org_id": "str",
    "role_id": "str",
    "session_id": "str",
    "user_id": "str",
    "team_id": "str",
    "team_role": "str",
    "is_admin": "bool",
    "chat_mode": "bool",
    "allow_sql": "bool",
    "workspace_dir": "str",
}

CONTEXT_KEYS = {"type", "att_type", "filename", "local_path", "url", "ref"}


async def _insert_row(database_url: str, session: str, path: Path) -> None:
    """Another process registering a file: its row, then a new generation of the session (storage/attachments.py)."""
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
    generation = Path(os.environ["SKILLYARD_HOME"]) / "attachments" / session
    generation.parent.mkdir(parents=True, exist_ok=True)
    generation.write_bytes(os.urandom(16))


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


async def test_fixed_fields_always_present_with_typed_empties(dump_yard):
    async with dump_yard as yard:
        ctx = (await yard.run("dump"))["ctx"]
    for key, empty in FIXED_FIELDS.items():
        assert key in ctx
        if key not in ("triggered_at", "triggered_at_str"):
            assert ctx[key] == empty and type(ctx[key]) is type(empty), key
    assert isinstance(ctx["triggered_at"], float) and ctx["triggered_at"] > 0
    assert len(ctx["triggered_at_str"]) == 16 and ctx["triggered_at_str"][4] == "-"
    for key in ("org_id", "role_id", "session_id", "user_id", "team_id", "team_role"):
        assert ctx[key] == ""
    assert ctx["allow_sql"] is True and ctx["is_admin"] is False
    assert os.path.isdir(ctx["workspace_dir"])


async def test_given_context_is_typed_and_normalized(dump_yard):
    async with dump_yard as yard:
        ctx = (
            await yard.run(
                "dump",
                context={
                    "triggered_at": "1700000000",
                    "actor_tags": "a, b",
                    "is_admin": "yes",
                    "session_id": "s1",
                    "actor_department_path": "总部/销售中心//销售一部",
                    "org_name": "Acme",
                },
            )
        )["ctx"]
    assert ctx["triggered_at"] == 1700000000.0 and ctx["triggered_at_str"] == "2023-11-14 22:13"
    assert ctx["actor_tags"] == ["a", "b"] and ctx["is_admin"] is True
    assert ctx["actor_department_path"] == "/总部/销售中心/销售一部/"
    assert ctx["org_name"] == "Acme"
    assert ctx["workspace_dir"].endswith(os.path.join("workspaces", "s1"))


async def test_admin_fill_clears_identity_but_keeps_audit_fields(dump_yard):
    given = {k: "v" for k in ACTOR_KEYS} | {"actor_tags": ["t"], "actor_id": "42", "actor_is_admin": True}
    async with dump_yard as yard:
        ctx = (await yard.run("dump", context=given))["ctx"]
    for key in (
        "actor_title",
        "actor_department",
        "actor_department_path",
        "actor_position",
        "actor_key",
        "actor_id",
        "actor_emp_no",
    ):
        assert ctx[key] == "", key
    assert ctx["actor_tags"] == []
    assert (ctx["actor_name"], ctx["actor_phone"], ctx["actor_email"]) == ("v", "v", "v")


async def test_bad_session_id_is_refused(dump_yard):
    from skillyard import InvalidInput

    async with dump_yard as yard:
        with pytest.raises(InvalidInput, match="not a safe name"):
            await yard.run("dump", context={"session_id": "../etc"})


async def test_configs_in_four_places_with_cli_style_keys(dump_yard):
    async with dump_yard as yard:
        ctx = (await yard.run("dump", context={"skill_args": {"--api-token": "t0k", "region": "eu"}, "role_id": "r1"}))[
            "ctx"
        ]
    assert ctx["skill_configs"]["dump"]["api_token"] == "t0k"
    assert ctx["skill_configs"]["api_token"] == "t0k"
    assert ctx["skill_args"]["api_token"] == "t0k"
    assert ctx["api_token"] == "t0k" and ctx["region"] == "eu"


async def test_configs_never_replace_platform_fields(dump_yard):
    async with dump_yard as yard:
        ctx = (await yard.run("dump", context={"skill_args": {"org_id": "evil"}, "org_id": "o1"}))["ctx"]
    assert ctx["org_id"] == "o1" and ctx["skill_args"]["org_id"] == "evil"


async def test_fixed_fields_always_present_typed(dump_skill):
    """Issue: 'the fixed fields always present with typed empty values (`triggered_at` float, `triggered_at_str`
    `YYYY-MM-DD HH:MM` UTC, lists as lists)'."""
    env = await run_skill(dump_skill, "dump")
    for k, t in {**FIXED, **PLATFORM}.items():
        assert env["types"].get(k) == t, (k, env["types"].get(k))
    ctx = env["ctx"]
    assert ctx["attachments"] == [] and ctx["actor_tags"] == [] and ctx["actor_is_admin"] is False
    assert ctx["allow_sql"] is True and ctx["chat_mode"] is False
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", ctx["triggered_at_str"])
    expect = datetime.fromtimestamp(ctx["triggered_at"], tz=UTC).strftime("%Y-%m-%d %H:%M")
    assert ctx["triggered_at_str"] == expect


@pytest.mark.spec("§4.2")
async def test_triggered_at_str_derived_from_given_triggered_at(dump_skill):
    """Spec §4.2: 'triggered_at_str ... YYYY-MM-DD HH:MM，UTC'."""
    env = await run_skill(dump_skill, "dump", triggered_at=0.0 + 86400 * 365)
    assert env["ctx"]["triggered_at_str"] in ("1971-01-01 00:00",)


async def test_coercion_of_given_values(dump_skill):
    """docs/authoring.md: 'Values the caller passes are coerced to these types: `"yes"` → `True`, `"a, b"` → `["a",
    "b"]`, `"12"` → `12.0`.'"""
    env = await run_skill(
        dump_skill, "dump", actor_is_admin="no", actor_tags="a, b", triggered_at="12", is_admin="yes", actor_name=None
    )
    ctx = env["ctx"]
    assert ctx["actor_tags"] == ["a", "b"] and ctx["triggered_at"] == 12.0 and ctx["is_admin"] is True
    assert ctx["actor_is_admin"] is False and ctx["actor_name"] == ""


@pytest.mark.spec("§4.4")
async def test_admin_fill_clears_identity(dump_skill):
    """Issue: 'admin-fill clearing (§4.4)'; spec: '清空：actor_title, actor_department, actor_department_path,
    actor_position, actor_tags, actor_key, actor_id, actor_emp_no 保留：actor_name, actor_phone, actor_email'."""
    given = {
        "actor_is_admin": True,
        "actor_title": "VP",
        "actor_department": "Sales",
        "actor_department_path": "/HQ/Sales/",
        "actor_position": "lead",
        "actor_tags": ["x"],
        "actor_key": "k",
        "actor_id": "9",
        "actor_emp_no": "E1",
        "actor_name": "Ada",
        "actor_phone": "123",
        "actor_email": "a@x",
    }
    ctx = (await run_skill(dump_skill, "dump", **given))["ctx"]
    for k in (
        "actor_title",
        "actor_department",
        "actor_department_path",
        "actor_position",
        "actor_key",
        "actor_id",
        "actor_emp_no",
    ):
        assert ctx[k] == "", k
    assert ctx["actor_tags"] == []
    assert (ctx["actor_name"], ctx["actor_phone"], ctx["actor_email"]) == ("Ada", "123", "a@x")


@pytest.mark.spec("§4.5")
async def test_department_path_normalized_in_context(dump_skill):
    """Issue: '`actor_department_path` normalized to `/top/…/own/` (leading and trailing slash, at most 20 levels,
    §4.5)'."""
    ctx = (await run_skill(dump_skill, "dump", actor_department_path="总部/销售中心//销售一部"))["ctx"]
    assert ctx["actor_department_path"] == "/总部/销售中心/销售一部/"


@pytest.mark.spec("§5.1")
async def test_configs_in_four_places_and_normalized(dump_skill):
    """Issue: 'configs injected in the four places of §5.1 with CLI-style `--api-token` normalized to `api_token`'."""
    ctx = (await run_skill(dump_skill, "dump", skill_configs={"--api-token": "T1", "region": "eu"}))["ctx"]
    assert ctx["skill_configs"]["dump"]["api_token"] == "T1"
    assert ctx["skill_configs"]["api_token"] == "T1"
    assert ctx["skill_args"]["api_token"] == "T1"
    assert ctx["api_token"] == "T1" and ctx["region"] == "eu"


async def test_config_never_replaces_fixed_field(dump_skill):
    """docs/authoring.md: '`ctx["api_token"]` ... top-level copy; never replaces a fixed or platform field'."""
    ctx = (
        await run_skill(
            dump_skill, "dump", channel="web", skill_configs={"channel": "evil", "org_id": "evil"}, org_id="acme"
        )
    )["ctx"]
    assert ctx["channel"] == "web" and ctx["org_id"] == "acme"


async def test_call_skill_and_db_keys_in_process(dump_skill):
    """docs/authoring.md platform fields: '`call_skill` async callable in-process Python skills only'; '`db`,
    `db_factory` ... otherwise `None`'."""
    env = await run_skill(dump_skill, "dump")
    assert env["types"]["call_skill"] in ("function", "method", "partial", "coroutine") or env["ctx"][
        "call_skill"
    ].startswith("<")
    assert env["ctx"].get("db") is None and env["ctx"].get("db_factory") is None


async def test_extra_caller_keys_kept(dump_skill):
    """docs/authoring.md: 'Extra keys the caller passes (e.g. `org_name`) are kept.'"""
    ctx = (await run_skill(dump_skill, "dump", org_name="Acme Ltd"))["ctx"]
    assert ctx["org_name"] == "Acme Ltd"


async def test_unsafe_session_id_refused(dump_skill):
    """docs/authoring.md: 'A `session_id` must be 1-128 letters, digits, `_`, `-` or `.`, starting with a letter or
    digit.'"""
    try:
        env = await run_skill(dump_skill, "dump", session_id="../../etc")
    except Exception:
        return
    assert env["ok"] is False


@pytest.mark.spec("§5.1")
async def test_stored_configs_four_places_and_cache_invalidation(dump_skill, db_env):
    """Issue: 'configs injected in the four places of §5.1 with CLI-style `--api-token` normalized to `api_token`' and
    'configs cached per (role, skill) with invalidation on change'."""
    async with SkillYard(skills_dirs=[dump_skill], include_builtin=False) as yard:
        await yard.configs.set("rA", "dump", {"--api-token": "v1", "units": "metric"})
        ctx = (await yard.run("dump", {}, context={"role_id": "rA"}))["ctx"]
        assert ctx["api_token"] == "v1" and ctx["skill_args"]["api_token"] == "v1"
        assert ctx["skill_configs"]["dump"]["api_token"] == "v1" and ctx["skill_configs"]["api_token"] == "v1"
        await yard.configs.set("rA", "dump", {"api_token": "v2"})
        ctx2 = (await yard.run("dump", {}, context={"role_id": "rA"}))["ctx"]
        assert ctx2["api_token"] == "v2"
        other = (await yard.run("dump", {}, context={"role_id": "rB"}))["ctx"]
        assert "api_token" not in other and "v2" not in json.dumps(other)


async def test_run_context_values_are_not_mutated(echo_root):
    """authoring.md: 'Treat `context` as read-only' — the host must not change the caller's mapping either."""
    ctx = {"channel": "web", "actor_tags": "a, b"}
    snapshot = json.dumps(ctx, sort_keys=True)
    inp = {"x": 1}
    async with yard_of(echo_root) as yard:
        await yard.run("dump", inp, context=ctx)
    assert json.dumps(ctx, sort_keys=True) == snapshot and inp == {"x": 1}


@pytest.mark.spec("§4.7")
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


async def test_attachments_are_read_once_per_turn_not_mid_turn(db_env, make_skill, tmp_path, yard_for):
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


@pytest.mark.spec("§4.7")
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


@pytest.mark.spec("§4.7")
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
