"""File parameters (§3.3, §3.4, invoke/paths.py): path fields pinned to the session workspace, attachment
references replaced by their paths, the user's raw text for ``force_raw_prompt`` skills."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from skillyard.invoke.paths import (
    CODE_FIELDS,
    OUTPUT_FIELDS,
    PATH_FIELDS,
    InputPathError,
    apply_raw_prompt,
    normalize_paths,
    substitute_refs,
)
from support.outputs_probes import ECHO, echo_skill, make_files, result_skill, sid

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


@dataclass
class Disk:
    """Real folders: this session's workspace, another session's, and a folder elsewhere on disk."""

    root: Path
    ws: Path
    other: Path
    elsewhere: Path

    def norm(self, **input: object) -> dict[str, object]:
        return normalize_paths(dict(input), self.ws, self.root)


@pytest.fixture
def disk(tmp_path: Path) -> Disk:
    root = tmp_path / "workspaces"
    folders = Disk(root, root / "s1", root / "s2", tmp_path / "elsewhere")
    for folder in (folders.ws, folders.other, folders.elsewhere):
        folder.mkdir(parents=True)
    return folders


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def refused(disk: Disk, field: str, value: object) -> InputPathError:
    with pytest.raises(InputPathError) as caught:
        disk.norm(**{field: value})
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError)
    return caught.value


REFS = {"img_1": "/att/cat.png", "img_10": "/att/dog.png", "file_2": "/att/my report.pdf", "video_3": "/att/v.mp4"}

SCHEMA = {
    "type": "object",
    "properties": {"prompt": {"type": "string"}, "size": {"type": "string"}},
    "required": ["prompt", "size"],
}

ALL_PATH_FIELDS = [
    *("input", "output", "file", "path", "video", "audio", "image", "src", "dst"),
    *("inputs", "files", "videos", "images", "clips", "sources", "paths", "bgm", "input_file", "file_path"),
    *("output_path", "out"),
]

LIST_FIELDS = ["inputs", "files", "videos", "images", "clips", "sources", "paths"]

OUTPUT_FIELD_NAMES = ["output", "dst", "output_path", "out"]

PAINT_SCHEMA = {
    "type": "object",
    "properties": {"size": {"type": "string"}, "text": {"type": "string"}, "style": {"type": "string"}},
    "required": ["text", "size"],
}

TRICKY_NAMES = ["my photo.png", "it's mine.png", "a$HOME b.png", "semi;colon&.png", "中文 图片.png", 'say "hi".png']


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


def test_field_sets_follow_the_spec():
    assert {"image", "files", "bgm", "input_file", "file_path", "src", "dst"} <= PATH_FIELDS
    assert {"output", "dst", "output_path", "out"} == OUTPUT_FIELDS
    assert OUTPUT_FIELDS <= PATH_FIELDS
    assert {"code", "command", "script", "cmd", "instruction", "shell", "bash"} == CODE_FIELDS


def test_absolute_plain_file_elsewhere_is_kept(disk):
    photo = touch(disk.elsewhere / "photo.png")
    assert disk.norm(image=str(photo)) == {"image": str(photo)}


def test_absolute_missing_file_elsewhere_is_kept(disk):
    assert disk.norm(file="/no/such/place/a.csv") == {"file": "/no/such/place/a.csv"}


def test_absolute_file_in_own_workspace_is_kept(disk):
    clip = touch(disk.ws / "deep" / "clip.mp4")
    assert disk.norm(video=str(clip)) == {"video": str(clip)}


@pytest.mark.parametrize("field", ["image", "src", "output", "dst"])
def test_another_sessions_workspace_is_refused(disk, field):
    secret = touch(disk.other / "secret.png")
    error = refused(disk, field, str(secret))
    assert "another session's workspace" in str(error) and str(disk.ws) in str(error)


def test_another_sessions_missing_file_and_the_root_itself_are_refused(disk):
    refused(disk, "file", str(disk.other / "not-yet.txt"))
    refused(disk, "path", str(disk.root))
    refused(disk, "path", str(disk.root) + "/")


def test_workspace_name_prefix_is_not_the_workspace(disk):
    sibling = touch(disk.root / "s1x" / "a.png")  # starts with "s1" but is another session
    refused(disk, "image", str(sibling))


def test_symlink_elsewhere_into_another_workspace_is_refused(disk):
    touch(disk.other / "secret.png")
    (disk.elsewhere / "door").symlink_to(disk.other)
    refused(disk, "image", str(disk.elsewhere / "door" / "secret.png"))


def test_symlink_elsewhere_into_own_workspace_is_kept(disk):
    touch(disk.ws / "a.png")
    (disk.elsewhere / "door").symlink_to(disk.ws)
    assert disk.norm(image=str(disk.elsewhere / "door" / "a.png"))["image"] == str(disk.elsewhere / "door" / "a.png")


def test_workspace_given_through_a_symlink(disk, tmp_path):
    touch(disk.ws / "a.png")
    alias = tmp_path / "alias"
    alias.symlink_to(disk.ws)
    result = normalize_paths({"image": "x/a.png", "out": "b.png"}, alias, disk.root)
    assert result == {"image": str(alias / "a.png"), "out": str(alias / "b.png")}


@pytest.mark.parametrize("value", ["a\0.png", "/tmp/a\0.png", "file:///tmp/a%00.png"])
def test_nul_byte_is_refused(disk, value):
    assert "NUL" in str(refused(disk, "image", value))


def test_nul_byte_is_refused_in_outputs_and_lists(disk):
    refused(disk, "output", "out\0.mp4")
    refused(disk, "images", ["ok.png", "bad\0.png"])


def test_relative_path_keeps_only_the_basename_in_the_workspace(disk):
    touch(disk.ws / "a.png")
    assert disk.norm(image="sub/dir/a.png") == {"image": str(disk.ws / "a.png")}
    assert disk.norm(image="a.png") == {"image": str(disk.ws / "a.png")}
    assert disk.norm(image="./a.png") == {"image": str(disk.ws / "a.png")}


def test_relative_path_that_exists_as_written_is_that_file(disk):
    """A model-built prefix is dropped, but a path the workspace holds as written names that file."""
    touch(disk.ws / "rows.json")
    touch(disk.ws / "imports" / "rows.json")
    assert disk.norm(file="imports/rows.json") == {"file": str(disk.ws / "imports" / "rows.json")}
    assert disk.norm(file="./imports/rows.json") == {"file": str(disk.ws / "imports" / "rows.json")}
    assert disk.norm(file="other/rows.json") == {"file": str(disk.ws / "rows.json")}


def test_relative_windows_prefix_is_dropped(disk):
    touch(disk.ws / "a.png")
    assert disk.norm(image="C:\\Users\\me\\a.png") == {"image": str(disk.ws / "a.png")}


def test_missing_relative_file_keeps_the_original_value(disk):
    assert disk.norm(image="sub/dir/missing.png", bgm="song.mp3") == {"image": "sub/dir/missing.png", "bgm": "song.mp3"}


@pytest.mark.parametrize(
    "value, name",
    [
        ("../../etc/passwd", "passwd"),
        ("a/../../b.png", "b.png"),
        ("..\\..\\secret.txt", "secret.txt"),
        ("/etc/../etc/passwd", "passwd"),
        ("~/photo.png", "photo.png"),
        ("~root/.ssh/id_rsa", "id_rsa"),
    ],
)
def test_dotdot_and_tilde_always_land_in_the_workspace(disk, value, name):
    # Never passed through, whether or not the workspace file exists.
    assert disk.norm(file=value) == {"file": str(disk.ws / name)}
    touch(disk.ws / name)
    assert disk.norm(file=value) == {"file": str(disk.ws / name)}


@pytest.mark.parametrize("value", ["..", "../", "~", "~/"])
def test_dotdot_or_tilde_alone_means_the_workspace(disk, value):
    assert disk.norm(path=value) == {"path": str(disk.ws)}


def test_dotdot_into_another_session_is_rewritten_not_followed(disk):
    touch(disk.other / "secret.png")
    assert disk.norm(image="../s2/secret.png") == {"image": str(disk.ws / "secret.png")}


@pytest.mark.parametrize("field", sorted(OUTPUT_FIELDS))
def test_outputs_always_land_in_the_workspace(disk, field):
    assert disk.norm(**{field: "result.mp4"}) == {field: str(disk.ws / "result.mp4")}
    assert disk.norm(**{field: "renders/final/result.mp4"}) == {field: str(disk.ws / "result.mp4")}
    assert disk.norm(**{field: str(disk.elsewhere / "result.mp4")}) == {field: str(disk.ws / "result.mp4")}


def test_output_symlink_leading_outside_is_refused(disk):
    target = touch(disk.elsewhere / "important.txt")
    (disk.ws / "out.txt").symlink_to(target)
    assert "symbolic link" in str(refused(disk, "output", "out.txt"))


def test_symlink_inside_pointing_inside_is_fine(disk):
    touch(disk.ws / "real" / "a.png")
    (disk.ws / "link.png").symlink_to(disk.ws / "real" / "a.png")
    (disk.ws / "dirlink").symlink_to(disk.ws / "real")
    assert disk.norm(image="link.png") == {"image": str(disk.ws / "link.png")}
    assert disk.norm(image=str(disk.ws / "dirlink" / "a.png")) == {"image": str(disk.ws / "dirlink" / "a.png")}


def test_symlink_inside_pointing_outside_is_refused(disk):
    target = touch(disk.elsewhere / "passwd")
    (disk.ws / "link.png").symlink_to(target)
    refused(disk, "image", "link.png")
    refused(disk, "image", "some/prefix/link.png")
    refused(disk, "image", str(disk.ws / "link.png"))


def test_dangling_symlink_pointing_outside_is_refused(disk):
    (disk.ws / "link.png").symlink_to(disk.elsewhere / "not-there.png")
    refused(disk, "image", "link.png")


def test_parent_directory_symlink_escaping_is_refused(disk):
    touch(disk.elsewhere / "x.png")
    (disk.ws / "sub").symlink_to(disk.elsewhere)
    refused(disk, "image", "sub/x.png")  # no <workspace>/x.png, so the original goes through <workspace>/sub
    refused(disk, "image", str(disk.ws / "sub" / "x.png"))
    refused(disk, "image", str(disk.ws / "sub" / "missing.png"))


def test_symlink_into_another_workspace_is_refused(disk):
    touch(disk.other / "secret.png")
    (disk.ws / "secret.png").symlink_to(disk.other / "secret.png")
    assert "another session's workspace" in str(refused(disk, "image", "secret.png"))


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "http://example.com/../a.png",
        "https://example.com/a.png",
        "HTTPS://EXAMPLE.COM/A.PNG",
        "data:image/png;base64,iVBORw0KGgo=",
        42,
        None,
        True,
        {"note": "../x"},  # an object's own fields are normalized only when they are path fields
    ],
)
def test_empty_non_string_and_url_values_are_left_alone(disk, value):
    assert disk.norm(image=value, output=value) == {"image": value, "output": value}


def test_path_fields_of_objects_inside_path_fields_are_normalized(disk):
    """``{"clips": [{"src": "../../etc/passwd"}]}``: a path field nested in a path field's value never passes
    ``..`` or ``~`` through; objects under other fields (a record's ``path`` column) are data and stay as given."""
    given = {
        "clips": [{"src": "../../etc/passwd", "start": 3}, {"src": "~/.ssh/id_rsa"}, "../c.mp4"],
        "input": {"output": "/abs/elsewhere/out.mp4", "file": {"path": "../../deep.txt"}},
        "records": [{"path": "../keep/as/data.txt"}],
    }
    result = normalize_paths(given, disk.ws, disk.root)
    ws = str(disk.ws)
    assert result["clips"] == [{"src": f"{ws}/passwd", "start": 3}, {"src": f"{ws}/id_rsa"}, f"{ws}/c.mp4"]
    assert result["input"] == {"output": f"{ws}/out.mp4", "file": {"path": f"{ws}/deep.txt"}}
    assert result["records"] == [{"path": "../keep/as/data.txt"}]
    assert given["clips"][0]["src"] == "../../etc/passwd"  # the caller's input is not changed


def test_a_nested_path_into_another_session_is_refused(disk):
    other = disk.root / "other-session"
    other.mkdir(parents=True, exist_ok=True)
    with pytest.raises(InputPathError):
        normalize_paths({"clips": [{"src": str(other / "a.mp4")}]}, disk.ws, disk.root)


def test_fields_outside_path_fields_are_untouched_and_input_is_not_mutated(disk):
    given = {"prompt": "../../etc/passwd", "image": "a/b.png", "images": ["~/c.png"]}
    result = normalize_paths(given, disk.ws, disk.root)
    assert result["prompt"] == "../../etc/passwd"
    assert given == {"prompt": "../../etc/passwd", "image": "a/b.png", "images": ["~/c.png"]}


def test_file_url_is_read_as_its_local_path(disk):
    photo = touch(disk.elsewhere / "my photo.png")
    url = "file://" + str(photo).replace(" ", "%20")
    assert disk.norm(image=url) == {"image": str(photo)}
    assert disk.norm(image="file://localhost" + str(photo)) == {"image": str(photo)}
    assert disk.norm(output=url) == {"output": str(disk.ws / "my photo.png")}


def test_file_url_cannot_slip_past_the_rules(disk):
    touch(disk.other / "secret.png")
    refused(disk, "image", "file://" + str(disk.other / "secret.png"))
    assert disk.norm(file="file:///etc/%2e%2e/etc/passwd") == {"file": str(disk.ws / "passwd")}


def test_file_url_on_another_host_is_refused(disk):
    assert "host" in str(refused(disk, "file", "file://fileserver/share/a.png"))
    refused(disk, "file", "file://[broken/a.png")


def test_values_naming_no_file_mean_the_workspace(disk):
    assert disk.norm(output="/", out="renders/", path=".") == {
        "output": str(disk.ws),
        "out": str(disk.ws / "renders"),
        "path": str(disk.ws),
    }


def test_list_items_are_normalized_one_by_one(disk):
    touch(disk.ws / "a.png")
    plain = touch(disk.elsewhere / "b.png")
    result = disk.norm(images=["x/a.png", str(plain), "missing.png", "../c.png", 7, "https://e.com/d.png"])
    assert result == {
        "images": [str(disk.ws / "a.png"), str(plain), "missing.png", str(disk.ws / "c.png"), 7, "https://e.com/d.png"]
    }


def test_one_bad_list_item_refuses_the_field(disk):
    touch(disk.other / "secret.png")
    refused(disk, "files", ["fine.txt", str(disk.other / "secret.png")])


def test_exact_ref_values_and_list_items_become_paths():
    result = substitute_refs({"image": "img_1", "file": "file_2", "sources": ["img_1", "video_3", 5]}, REFS)
    assert result == {
        "image": "/att/cat.png",
        "file": "/att/my report.pdf",
        "sources": ["/att/cat.png", "/att/v.mp4", 5],
    }


def test_exact_ref_in_any_field_but_not_inside_plain_text():
    result = substitute_refs({"photo": "img_1", "caption": "see img_1", "reference": "img_10"}, REFS)
    assert result == {"photo": "/att/cat.png", "caption": "see img_1", "reference": "/att/dog.png"}


def test_unknown_ids_and_non_ref_keys_are_left_alone():
    given = {"image": "img_7", "a": "a", "code": "cat a img_7"}
    assert substitute_refs(given, {"a": "/etc/passwd", "img_1": "/att/cat.png"}) == given
    assert substitute_refs(given, {}) == given


def test_code_fields_replace_whole_tokens_only():
    code = "convert img_1 img_10 my_img_1x img_1.png out/img_1 img_1/x .img_1 img_1_b img_1, (img_1) $img_1."
    result = substitute_refs({"command": code}, REFS)["command"]
    assert result == (
        "convert /att/cat.png /att/dog.png my_img_1x img_1.png out/img_1 img_1/x .img_1 img_1_b "
        "/att/cat.png, (/att/cat.png) $/att/cat.png."
    )


def test_code_field_tokens_next_to_chinese_text():
    result = substitute_refs({"instruction": "把img_1转成黑白，再和video_3拼接"}, REFS)
    assert result == {"instruction": "把/att/cat.png转成黑白，再和/att/v.mp4拼接"}


@pytest.mark.parametrize("field", sorted(CODE_FIELDS))
def test_paths_with_spaces_are_single_quoted_in_every_code_field(field):
    assert substitute_refs({field: "cat file_2"}, REFS) == {field: "cat '/att/my report.pdf'"}


def test_code_paths_with_single_quotes_survive_the_shell(tmp_path):
    weird = touch(tmp_path / "it's a $HOME `x`.txt")
    weird.write_text("found")
    command = substitute_refs({"shell": "cat file_1"}, {"file_1": str(weird)})["shell"]
    assert shlex.split(command) == ["cat", str(weird)]
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert done.stdout == "found"


def test_ref_already_inside_quotes_gets_the_bare_path():
    result = substitute_refs({"code": "open(\"file_2\"); open('file_2'); run(file_2)"}, REFS)
    assert result == {"code": "open(\"/att/my report.pdf\"); open('/att/my report.pdf'); run('/att/my report.pdf')"}


@pytest.mark.parametrize("quote", ["'", '"'])
def test_ref_inside_quotes_with_awkward_path_closes_the_quotes(tmp_path, quote):
    weird = touch(tmp_path / 'say "hi" it\'s $HOME.txt')
    weird.write_text("found")
    refs = {"file_1": str(weird)}
    shell = substitute_refs({"bash": f"cat {quote}file_1{quote}"}, refs)["bash"]
    assert subprocess.run(["sh", "-c", shell], capture_output=True, text=True, check=True).stdout == "found"
    if quote == '"':  # Python joins ""'...'"" as adjacent literals (not so inside single quotes)
        code = substitute_refs({"code": 'print(open("file_1").read(), end="")'}, refs)["code"]
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert done.stdout == "found"


def test_code_paths_use_posix_slashes():
    result = substitute_refs({"script": "python run.py img_1"}, {"img_1": str(Path("/att") / "sub" / "cat.png")})
    assert result == {"script": "python run.py /att/sub/cat.png"}


def test_path_lists_and_ref_lists_are_deduplicated_in_order():
    result = substitute_refs(
        {
            "images": ["img_1", "/att/cat.png", "img_10", "img_1"],
            "photos": ["img_1", "img_10", "img_1"],
            "files": ["/a.txt", "/a.txt", 1, 1],
        },
        REFS,
    )
    assert result == {
        "images": ["/att/cat.png", "/att/dog.png"],
        "photos": ["/att/cat.png", "/att/dog.png"],
        "files": ["/a.txt", 1, 1],
    }


def test_other_lists_keep_their_repeats():
    given = {"args": ["-i", "img_1", "-i", "img_10"], "values": [1, 1, 2], "cmd": ["cp", "img_1", "img_1"]}
    assert substitute_refs(given, REFS) == {
        "args": ["-i", "/att/cat.png", "-i", "/att/dog.png"],
        "values": [1, 1, 2],
        "cmd": ["cp", "/att/cat.png", "/att/cat.png"],
    }


def test_substitute_refs_does_not_mutate_its_input():
    given = {"images": ["img_1", "img_1"], "code": "cat img_1"}
    substitute_refs(given, REFS)
    assert given == {"images": ["img_1", "img_1"], "code": "cat img_1"}


def test_refs_then_normalize_keep_attachment_paths(disk):
    photo = touch(disk.elsewhere / "upload.png")
    data = substitute_refs({"image": "img_1", "output": "renders/out.png"}, {"img_1": str(photo)})
    assert normalize_paths(data, disk.ws, disk.root) == {"image": str(photo), "output": str(disk.ws / "out.png")}


def test_raw_prompt_overwrites_the_first_required_field():
    given = {"prompt": "a cat, photorealistic, 8k", "size": "1024x1024"}
    result = apply_raw_prompt(given, SCHEMA, "画一只猫 ")
    assert result == {"prompt": "画一只猫 ", "size": "1024x1024"}
    assert given["prompt"] == "a cat, photorealistic, 8k"
    assert apply_raw_prompt({}, SCHEMA, "draw") == {"prompt": "draw"}


@pytest.mark.parametrize("raw", ["", "  \n"])
def test_raw_prompt_empty_text_is_a_no_op(raw):
    assert apply_raw_prompt({"prompt": "p"}, SCHEMA, raw) == {"prompt": "p"}


@pytest.mark.parametrize("schema", [{"type": "object"}, {"required": []}, {"required": "prompt"}, {"required": [3]}])
def test_raw_prompt_without_required_fields_is_a_no_op(schema):
    assert apply_raw_prompt({"prompt": "p"}, schema, "user text") == {"prompt": "p"}


@pytest.mark.parametrize("field", ALL_PATH_FIELDS)
async def test_every_path_field_relative_value_lands_in_workspace(db_env, make_skill, yard_for, home, field):
    echo_skill(make_skill)
    ws = home / "workspaces" / "pn-1"
    ws.mkdir(parents=True)
    (ws / "clip.mp4").write_bytes(b"x")
    async with yard_for() as yard:
        env = await yard.run("echo", {field: "models/made/this/clip.mp4"}, context={"session_id": "pn-1"})
    assert env["ok"] is True, env
    assert env["got"][field] == str(ws / "clip.mp4")


@pytest.mark.parametrize("field", LIST_FIELDS)
async def test_array_items_of_list_fields_are_normalized_and_deduplicated(db_env, make_skill, yard_for, home, field):
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


@pytest.mark.parametrize("field", OUTPUT_FIELD_NAMES)
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


@pytest.mark.spec("§3.2")
@pytest.mark.spec("§3.4")
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


@pytest.mark.spec("§3.3")
@pytest.mark.parametrize("style", ["bare", "double", "single", "option"])
async def test_substituted_shell_command_names_the_file_for_a_posix_shell(
    db_env, make_skill, tmp_path, yard_for, style
):
    """§3.3: substrings in code fields become POSIX paths, quoted when they contain spaces — so the command a
    shell runs names exactly the attached file, whatever the name and however the author quoted the id."""
    echo_skill(make_skill)
    session = sid("sh")
    files = make_files(tmp_path / "up dir", TRICKY_NAMES)
    command = {"bare": "cat {ref}", "double": 'cat "{ref}"', "single": "cat '{ref}'", "option": "cat --  {ref}"}[style]
    async with yard_for() as yard:
        refs = [i["ref"] for i in await yard.attach(session, files)]
        for ref, path in zip(refs, files, strict=True):
            env = await yard.run("echo", {"bash": command.format(ref=ref)}, context={"session_id": session})
            proc = await asyncio.to_thread(subprocess.run, ["sh", "-c", env["got"]["bash"]], capture_output=True)
            assert proc.returncode == 0 and proc.stdout == path.read_bytes(), (path.name, env["got"]["bash"])


async def test_refs_are_whole_tokens_and_each_id_gets_its_own_file(db_env, make_skill, tmp_path, yard_for):
    echo_skill(make_skill)
    session = sid("tok")
    files = make_files(tmp_path / "up", [f"p{n}.png" for n in range(1, 12)])
    async with yard_for() as yard:
        await yard.attach(session, files)
        env = await yard.run(
            "echo",
            {"script": "cp img_1 img_10 img_11; ls img_1.png out/img_1/ my_img_1 img_12", "code": "f(img_1,img_2)"},
            context={"session_id": session},
        )
    p = {n: str(files[n - 1].resolve()) for n in (1, 2, 10, 11)}
    assert env["got"]["script"] == f"cp {p[1]} {p[10]} {p[11]}; ls img_1.png out/img_1/ my_img_1 img_12"
    assert env["got"]["code"] == f"f({p[1]},{p[2]})"


async def test_refs_of_another_session_are_not_substituted(db_env, make_skill, tmp_path, yard_for):
    echo_skill(make_skill)
    mine, theirs = sid("mine"), sid("theirs")
    [secret] = make_files(tmp_path / "theirs", ["secret.png"])
    [own] = make_files(tmp_path / "mine", ["own.pdf"])
    raw = {"image": "img_1", "files": ["img_1", "file_1"], "cmd": "cat img_1 file_1", "note": "img_1"}
    async with yard_for() as yard:
        await yard.attach(theirs, [secret])
        await yard.attach(mine, [own])
        env = await yard.run("echo", raw, context={"session_id": mine})
        turn = yard.new_turn(session_id=mine, channel="web")
        in_turn = await yard.run("echo", raw, turn=turn)
    for got in (env["got"], in_turn["got"]):
        assert str(secret.resolve()) not in json.dumps(got)
        assert got["cmd"] == f"cat img_1 {own.resolve()}"
        assert got["files"] == ["img_1", str(own.resolve())]


async def test_an_artifact_of_another_session_made_during_a_turn_is_not_a_ref_of_the_turns_session(
    db_env, make_skill, yard_for
):
    """A run inside a turn may name another session (context overrides the turn's). What it registers belongs to
    that other session; the turn's own session must not resolve img_1 to it."""
    echo_skill(make_skill)
    result_skill(
        make_skill,
        "draw",
        """
(ws / "x.png").write_bytes(b"x")
return {"ok": True, "local_path": str(ws / "x.png")}
""",
    )
    mine, other = sid("turn-a"), sid("turn-b")
    async with yard_for() as yard:
        turn = yard.new_turn(session_id=mine, channel="web")
        await yard.run("echo", turn=turn)
        drawn = await yard.run("draw", turn=turn, context={"session_id": other})
        env = await yard.run("echo", {"cmd": "cat img_1"}, turn=turn)
    assert drawn["ref"] == "img_1" and other in drawn["local_path"]
    assert env["got"]["cmd"] == "cat img_1", env["got"]
    assert env["attachments"] == []


@pytest.mark.spec("§3.3")
@pytest.mark.parametrize(
    "value, expected",
    [
        ({"clips": [{"src": "video_1", "start": 0}, {"src": "video_1", "start": 5}]}, "clips"),
        ({"options": {"reference_image": "img_1"}}, "options"),
        ({"steps": [{"cmd": "ffmpeg -i video_1 out.mp4"}]}, "steps"),
    ],
    ids=["object-items-of-an-array", "nested-object", "code-field-inside-an-array"],
)
async def test_refs_inside_nested_objects_are_substituted(db_env, make_skill, tmp_path, yard_for, value, expected):
    """§3.3: "字段值或数组项精确等于引用 ID → 替换成真实 local_path" and code fields are replaced inside; a field of
    an object in an array (clips: [{src: video_1}]) is a field value all the same."""
    echo_skill(make_skill)
    session = sid("nest")
    [clip] = make_files(tmp_path / "up", ["clip.mp4"])
    [photo] = make_files(tmp_path / "up", ["ref.png"])
    async with yard_for() as yard:
        await yard.attach(session, [clip, photo])
        env = await yard.run("echo", value, context={"session_id": session})
    text = json.dumps(env["got"][expected])
    assert "video_1" not in text and "img_1" not in text, text
    assert str(clip.resolve()) in text or str(photo.resolve()) in text


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


@pytest.mark.spec("§3.3")
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


@pytest.mark.spec("§3.3")
async def test_fields_outside_the_list_are_left_alone(make_skill, yard_for):
    """§3.3 lists the path fields; other fields (a caption, a title) are text and keep their value."""
    echo_skill(make_skill)
    async with yard_for() as yard:
        env = await yard.run(
            "echo", {"caption": "../../etc/passwd", "title": "~/x.png", "note": "a/b/c.png"}, context={}
        )
    assert env["got"] == {"caption": "../../etc/passwd", "title": "~/x.png", "note": "a/b/c.png"}


@pytest.mark.spec("§3.3")
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


@pytest.mark.spec("§3.3")
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


@pytest.mark.spec("§3.4")
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


async def test_symlink_that_stays_inside_the_workspace_is_accepted(db_env, make_skill, yard_for, home):
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
