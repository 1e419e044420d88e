"""The SkillYard API (yard.py): run arguments, lifecycle, skill / resolve / read_skill_file."""

from __future__ import annotations

import contextlib
import json
import os

import pytest

from skillyard import SkillYard
from skillyard.errors import SkillyardError, UnknownSkill
from support.skills import assert_failure, run_or_error, yard_of


def test_read_skill_file_is_confined_and_paged(make_skill, skills_root):
    make_skill("reader", files={"references/long.md": "a" * 50_000, "blob.bin": ""})
    (skills_root / "reader" / "blob.bin").write_bytes(b"\x00\x01binary")
    (skills_root / "secret.txt").write_text("outside")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    first = yard.read_skill_file("reader", "references/long.md")
    assert len(first["content"]) == 40_000 and first["next_offset"] == 40_000 and first["truncated"]
    rest = yard.read_skill_file("reader", "references/long.md", offset=40_000)
    assert len(rest["content"]) == 10_000 and rest["next_offset"] is None
    assert yard.read_skill_file("reader", "blob.bin")["binary"] is True
    assert "Instructions" in yard.read_skill_file("reader")["content"]
    with pytest.raises(SkillyardError, match="outside the folder"):
        yard.read_skill_file("reader", "../secret.txt")
    with pytest.raises(SkillyardError, match="no file"):
        yard.read_skill_file("reader", "missing.md")


def test_read_skill_file_caps_and_confines(make_skill, skills_root, tmp_path):
    """Issue: '`yard.read_skill_file(name, path, offset)` returns at most 40,000 characters per call, confined to the
    skill folder, with a stub for binary files.'"""
    make_skill("rf", files={"references/big.md": "y" * 100_000})
    (skills_root / "rf" / "img.bin").write_bytes(bytes(range(256)) * 10)
    (tmp_path / "outside.txt").write_text("secret")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    page = yard.read_skill_file("rf", "references/big.md")
    assert len(page["content"]) <= 40_000 and page["next_offset"]
    page2 = yard.read_skill_file("rf", "references/big.md", page["next_offset"])
    assert len(page2["content"]) <= 40_000
    binary = yard.read_skill_file("rf", "img.bin")
    assert binary["binary"] is True and "\x00" not in binary["content"]
    with pytest.raises(SkillyardError, match="outside the folder"):
        yard.read_skill_file("rf", "../../outside.txt")
    with pytest.raises(SkillyardError, match="outside the folder"):
        yard.read_skill_file("rf", str(tmp_path / "outside.txt"))


def test_read_skill_file_symlink_escape_refused(make_skill, skills_root, tmp_path):
    """Issue: 'confined to the skill folder'."""
    make_skill("rf2")
    (tmp_path / "outside.txt").write_text("TOPSECRET")
    os.symlink(tmp_path / "outside.txt", skills_root / "rf2" / "link.txt")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    try:
        out = yard.read_skill_file("rf2", "link.txt")
    except Exception:
        return
    assert "TOPSECRET" not in json.dumps(out)


async def test_run_returns_plain_dict_for_good_call(echo_root):
    """README: '`yard.run(name, input, context=..., turn=...)` ... always returns an envelope (a plain
    JSON-serializable dict)'."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("echo", {"a": 1}, context={"channel": "web"})
    assert type(env) is dict and env["ok"] is True and env["success"] is True and env["got"] == {"a": 1}
    json.dumps(env)


async def test_run_unknown_name_is_envelope_or_unknown_skill(echo_root):
    """README: 'a skill's failures never raise'; errors module: `UnknownSkill` is the documented error class."""
    async with yard_of(echo_root) as yard:
        try:
            env = await yard.run("no_such_skill", {})
        except UnknownSkill as exc:
            assert "no_such_skill" in str(exc)
            return
    assert_failure(env)
    assert "no_such_skill" in json.dumps(env)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "   ",
        None,
        42,
        ["echo"],
    ],
)
async def test_run_bad_name_types_are_clear_errors(echo_root, name):
    """Brief: a bad argument to a documented method gives a clear SkillyardError subclass or a failure envelope,
    never a bare TypeError/KeyError."""
    async with yard_of(echo_root) as yard:
        await run_or_error(yard.run(name, {}))


async def test_run_input_none_is_empty_input(echo_root):
    """Signature `run(name, input=None, ...)`: no input means an empty one."""
    async with yard_of(echo_root) as yard:
        env = await yard.run("echo")
        env2 = await yard.run("echo", None)
    assert env["ok"] is True and env["got"] == {} and env2["got"] == {}


@pytest.mark.parametrize("bad_ctx", [["role_id"], "role_id=x", 5])
async def test_run_non_mapping_context_is_clear(echo_root, bad_ctx):
    """Brief: a bad `context` argument is a clear error, not a traceback-worthy exception."""
    async with yard_of(echo_root) as yard:
        await run_or_error(yard.run("echo", {}, context=bad_ctx))


async def test_run_bad_turn_type_is_clear(echo_root):
    """Brief: `turn=` that is not a Turn is a clear error."""
    async with yard_of(echo_root) as yard:
        await run_or_error(yard.run("echo", {}, turn="not-a-turn"))


async def test_run_by_alias_and_fanout_tool_name(echo_root):
    """README: '`yard.run(...)` accepts a skill name, an alias or a tool name'."""
    async with yard_of(echo_root) as yard:
        a = await yard.run("parrot", {"x": 1})
        b = await yard.run("notes__add", {"text": "hi"})
    assert a["ok"] is True and a["got"] == {"x": 1}
    assert b["ok"] is True and b["got"]["_subcommand"] == "add"


async def test_run_unknown_fanout_subcommand(echo_root):
    """Brief: an unknown tool name `<skill>__<sub>` is an unknown name, reported clearly."""
    async with yard_of(echo_root) as yard:
        try:
            env = await yard.run("notes__nope", {})
        except UnknownSkill:
            return
    assert_failure(env)


async def test_run_without_async_with(echo_root):
    """README example uses `async with`; a plain instance must still run or fail clearly."""
    yard = yard_of(echo_root)
    try:
        env = await yard.run("echo", {"a": 1})
    except SkillyardError:
        return
    finally:
        await yard.close()
    assert env["ok"] is True


async def test_open_close_explicit(echo_root):
    """hooks.md: '`async with SkillYard(...)` or `await yard.open()`'."""
    yard = yard_of(echo_root)
    opened = await yard.open()
    assert opened is yard
    env = await yard.run("echo", {})
    await yard.close()
    assert env["ok"] is True


async def test_close_twice_is_harmless(echo_root):
    """Brief: closing twice must not raise a traceback-worthy exception."""
    yard = yard_of(echo_root)
    await yard.open()
    await yard.close()
    with contextlib.suppress(SkillyardError):
        await yard.close()


async def test_reuse_after_close(echo_root):
    """Brief: reuse after close either works or fails with a clear SkillyardError."""
    yard = yard_of(echo_root)
    async with yard:
        first = await yard.run("echo", {"n": 1})
    try:
        async with yard:
            second = await yard.run("echo", {"n": 2})
    except SkillyardError:
        return
    assert first["ok"] is True and second["ok"] is True and second["got"] == {"n": 2}


async def test_run_after_close_is_clear(echo_root):
    """Brief: a run on a closed host is a clear envelope or SkillyardError."""
    yard = yard_of(echo_root)
    async with yard:
        pass
    try:
        env = await yard.run("echo", {"n": 1})
    except SkillyardError:
        return
    finally:
        await yard.close()
    assert isinstance(env, dict) and "ok" in env


def test_skill_unknown_raises_unknown_skill(echo_root):
    """errors: `UnknownSkill` is a `SkillyardError`; `yard.skill(name)` on an unknown name raises it."""
    yard = yard_of(echo_root)
    with pytest.raises(UnknownSkill):
        yard.skill("no_such")
    assert issubclass(UnknownSkill, SkillyardError)


def test_resolve_shapes(echo_root):
    """authoring.md: '`yard.run` and `call_skill` accept the skill name, an alias or a tool name'; resolve returns
    (skill, subcommand) or None."""
    yard = yard_of(echo_root)
    skill, sub = yard.resolve("echo")
    assert skill.name == "echo" and sub is None
    assert yard.resolve("parrot")[0].name == "echo"
    skill, sub = yard.resolve("notes__list")
    assert skill.name == "notes" and sub == "list"
    assert yard.resolve("no_such") is None


@pytest.mark.parametrize("name", ["", None, 3])
def test_resolve_bad_names(echo_root, name):
    """Brief: bad names give None or a SkillyardError, never TypeError/AttributeError."""
    yard = yard_of(echo_root)
    with contextlib.suppress(SkillyardError):
        assert yard.resolve(name) is None


def test_read_skill_file_default_is_skill_md(echo_root):
    """Signature `read_skill_file(name, path='SKILL.md', offset=0)`; issue: 'returns at most 40,000 characters per
    call'."""
    page = yard_of(echo_root).read_skill_file("echo")
    assert "name: echo" in page["content"]


def test_read_skill_file_unknown_skill(echo_root):
    """Brief: unknown skill → a SkillyardError subclass."""
    with pytest.raises(SkillyardError):
        yard_of(echo_root).read_skill_file("no_such", "SKILL.md")


def test_read_skill_file_missing_file(echo_root):
    """Brief: a missing file → a clear SkillyardError (not FileNotFoundError)."""
    with pytest.raises(SkillyardError):
        yard_of(echo_root).read_skill_file("echo", "references/none.md")


def test_read_skill_file_directory(echo_root):
    """Brief: a folder path → a clear SkillyardError (not IsADirectoryError)."""
    (echo_root / "echo" / "references").mkdir()
    with pytest.raises(SkillyardError):
        yard_of(echo_root).read_skill_file("echo", "references")


@pytest.mark.parametrize(
    "offset",
    [
        -1,
        "10",
        None,
    ],
)
def test_read_skill_file_bad_offset(echo_root, offset):
    """Brief: a bad offset is clamped or refused with a SkillyardError, never TypeError."""
    try:
        page = yard_of(echo_root).read_skill_file("echo", "SKILL.md", offset)
    except SkillyardError:
        return
    assert isinstance(page["content"], str)


def test_read_skill_file_offset_past_end(echo_root):
    """Issue: paging with `offset`: past the end there is nothing more to read."""
    page = yard_of(echo_root).read_skill_file("echo", "SKILL.md", 10_000_000)
    assert page["content"] == "" and not page.get("next_offset")


def test_read_skill_file_pages_join_to_whole(make_skill, skills_root):
    """Issue: 'returns at most 40,000 characters per call' — successive pages give the whole file."""
    text = "".join(f"line {i:06d} é\n" for i in range(9000))
    make_skill("pg", files={"references/big.md": text})
    yard = yard_of(skills_root)
    out, offset = "", 0
    for _ in range(10):
        page = yard.read_skill_file("pg", "references/big.md", offset)
        assert len(page["content"]) <= 40_000
        out += page["content"]
        offset = page.get("next_offset")
        if not offset:
            break
    assert out == text


def test_read_skill_file_skill_md_has_fallback_for_non_default_lookup(skills_root):
    """authoring.md lookup: a README.md with frontmatter is the skill's SKILL.md; read_skill_file('x') defaults to
    SKILL.md — it must give the manual or a clear SkillyardError."""
    folder = skills_root / "rd"
    folder.mkdir()
    (folder / "README.md").write_text("---\nname: rd\ndescription: readme skill\n---\nManual body\n")
    yard = yard_of(skills_root)
    try:
        page = yard.read_skill_file("rd")
    except SkillyardError:
        return
    assert "Manual body" in page["content"]


def test_read_skill_file_matches_a_name_that_differs_only_in_case(make_skill, skills_root):
    """Issue 18 (9): SKILL.md files name `REFERENCE.md` while the file is `reference.md`; one match resolves, two
    (a case-sensitive folder with both spellings) resolve to none."""
    make_skill("cased", files={"references/reference.md": "the guide", "Notes.md": "a", "NOTES.md": "b"})
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert yard.read_skill_file("cased", "REFERENCES/REFERENCE.md")["content"] == "the guide"
    assert yard.read_skill_file("cased", "Notes.md")["content"] == "a"  # the exact name wins
    with pytest.raises(SkillyardError, match="no file"):
        yard.read_skill_file("cased", "notes.MD")


def test_read_skill_file_follows_a_link_to_a_sibling_skill_when_asked(make_skill, skills_root):
    """Issue 18 (9): `../other/SKILL.md` reads the sibling skill's file when that skill is in the catalog; a path to
    a folder that is no skill is refused."""
    make_skill("first")
    make_skill("other", files={"references/shared.md": "shared"})
    (skills_root / "not_a_skill").mkdir()
    (skills_root / "not_a_skill" / "x.md").write_text("private")
    yard = SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert "Instructions" in yard.read_skill_file("first", "../other/SKILL.md", siblings=True)["content"]
    assert yard.read_skill_file("first", "../other/references/shared.md", siblings=True)["content"] == "shared"
    with pytest.raises(SkillyardError, match="outside the folder"):
        yard.read_skill_file("first", "../not_a_skill/x.md", siblings=True)
    with pytest.raises(SkillyardError, match="outside the folder"):  # an agent reading its manual stays inside it
        yard.read_skill_file("first", "../other/SKILL.md")
