"""Reading a subprocess skill's stdout (§2.3, executors/stdout.py): whole JSON, last-line JSON, a media path
line, plain output."""

from __future__ import annotations

import logging

import pytest

from support.skills import inline_shell_skill, run_skill, shell_skill


async def test_stdout_whole_json_document(make_skill, skills_root):
    inline_shell_skill(make_skill, "whole", """printf '{\\n  "a": 1,\\n  "b": [1, 2]\\n}\\n'""")
    env = await run_skill(skills_root, "whole")
    assert env == {"a": 1, "b": [1, 2], "ok": True, "success": True}


async def test_stdout_last_line_json(make_skill, skills_root):
    inline_shell_skill(
        make_skill,
        "lastline",
        """
echo "starting"
echo "{not json"
echo '{"answer": 42}'
""",
    )
    env = await run_skill(skills_root, "lastline")
    assert env == {"answer": 42, "ok": True, "success": True}


@pytest.mark.parametrize(("levels", "first_line"), [(900, ""), (5000, ""), (5000, "echo starting\n")])
async def test_stdout_json_nested_past_what_is_read_is_a_clean_failure(make_skill, skills_root, levels, first_line):
    """Past json's depth (5000, as the whole stdout or its last line) or the result limit (900): a failure naming
    it, not the host's RecursionError."""
    deep = '{"a":' * levels + "1" + "}" * levels
    shell_skill(make_skill, "deep", f"{first_line}echo '{deep}'\n")
    env = await run_skill(skills_root, "deep")
    assert env["ok"] is False and "nested" in env["error"] and "flatter" in env["error"], env
    assert "RecursionError" not in env["error"]


async def test_stdout_media_path_line(db_env, make_skill, skills_root, tmp_path):
    inline_shell_skill(
        make_skill,
        "chart",
        """
printf 'PNG' > chart.png
echo "rendered the chart"
echo chart.png
""",
    )
    workspace = tmp_path / "ws"
    env = await run_skill(skills_root, "chart", workspace_dir=str(workspace))
    assert env["ok"] is True
    assert env["local_path"] == str((workspace / "chart.png").resolve())
    assert env["media"] == "image" and env["filename"] == "chart.png"


async def test_stdout_plain_text_and_stderr_to_the_log(make_skill, skills_root, caplog):
    inline_shell_skill(
        make_skill,
        "plain",
        """
echo "progress: half way" >&2
echo "hello world"
echo "second line"
""",
    )
    with caplog.at_level(logging.INFO, logger="skillyard.subprocess"):
        env = await run_skill(skills_root, "plain")
    assert env == {"output": "hello world\nsecond line\n", "ok": True, "success": True}
    assert "progress: half way" in caplog.text


@pytest.mark.parametrize(
    ("script", "check"),
    [
        ('printf \'{\\n  "a": 1,\\n  "b": [1, 2]\\n}\\n\'\n', lambda e: e["a"] == 1 and e["b"] == [1, 2]),
        ('echo "progress 1"\necho "progress 2"\necho \'{"last": true}\'\n', lambda e: e["last"] is True),
        ('echo "just text"\necho "more text"\n', lambda e: "just text" in e["output"] and "more text" in e["output"]),
        ('echo "[1, 2, 3]"\n', lambda e: e["result"] == [1, 2, 3]),
        ('echo "counted"\necho 42\n', lambda e: "42" in e["output"]),
        ("", lambda e: e.get("output") == ""),
    ],
    ids=["whole-json", "last-line-json", "plain", "whole-array", "bare-number-last", "empty"],
)
async def test_stdout_parse_order(make_skill, skills_root, script, check):
    """Issue: 'stdout parsed in order: whole JSON → last line JSON → media path line → `{"output": stdout}`'."""
    shell_skill(make_skill, "out", script)
    env = await run_skill(skills_root, "out")
    assert env["ok"] is True and check(env), env


async def test_stdout_media_path_line_after_text(db_env, make_skill, skills_root, tmp_path):
    """Issue: 'stdout parsed in order: ... → media path line'."""
    ws = tmp_path / "ws_media"
    shell_skill(make_skill, "media", "printf 'PNGDATA' > pic.png\necho 'made it'\necho pic.png\n")
    env = await run_skill(skills_root, "media", workspace_dir=str(ws))
    assert env["ok"] is True and env["local_path"].endswith("pic.png") and env["media"] == "image"
