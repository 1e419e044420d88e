"""File parameters (§3.3, §3.4): path normalization into the workspace, attachment references, raw prompts."""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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


# field sets ------------------------------------------------------------------------------------------------
def test_field_sets_follow_the_spec():
    assert {"image", "files", "bgm", "input_file", "file_path", "src", "dst"} <= PATH_FIELDS
    assert {"output", "dst", "output_path", "out"} == OUTPUT_FIELDS
    assert OUTPUT_FIELDS <= PATH_FIELDS
    assert {"code", "command", "script", "cmd", "instruction", "shell", "bash"} == CODE_FIELDS


# absolute paths --------------------------------------------------------------------------------------------
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


# NUL bytes -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["a\0.png", "/tmp/a\0.png", "file:///tmp/a%00.png"])
def test_nul_byte_is_refused(disk, value):
    assert "NUL" in str(refused(disk, "image", value))


def test_nul_byte_is_refused_in_outputs_and_lists(disk):
    refused(disk, "output", "out\0.mp4")
    refused(disk, "images", ["ok.png", "bad\0.png"])


# relative paths --------------------------------------------------------------------------------------------
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


# .. and ~ --------------------------------------------------------------------------------------------------
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


# outputs ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field", sorted(OUTPUT_FIELDS))
def test_outputs_always_land_in_the_workspace(disk, field):
    assert disk.norm(**{field: "result.mp4"}) == {field: str(disk.ws / "result.mp4")}
    assert disk.norm(**{field: "renders/final/result.mp4"}) == {field: str(disk.ws / "result.mp4")}
    assert disk.norm(**{field: str(disk.elsewhere / "result.mp4")}) == {field: str(disk.ws / "result.mp4")}


def test_output_symlink_leading_outside_is_refused(disk):
    target = touch(disk.elsewhere / "important.txt")
    (disk.ws / "out.txt").symlink_to(target)
    assert "symbolic link" in str(refused(disk, "output", "out.txt"))


# symlinks --------------------------------------------------------------------------------------------------
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


# values left alone -----------------------------------------------------------------------------------------
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


# file: URLs ------------------------------------------------------------------------------------------------
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


# lists -----------------------------------------------------------------------------------------------------
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


# attachment references -------------------------------------------------------------------------------------
REFS = {"img_1": "/att/cat.png", "img_10": "/att/dog.png", "file_2": "/att/my report.pdf", "video_3": "/att/v.mp4"}


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


# raw prompt ------------------------------------------------------------------------------------------------
SCHEMA = {
    "type": "object",
    "properties": {"prompt": {"type": "string"}, "size": {"type": "string"}},
    "required": ["prompt", "size"],
}


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
