"""Captured output of subprocess skills is bounded: stdout up to SKILLYARD_STDOUT_LIMIT (more stops the run),
the last SKILLYARD_STDERR_TAIL bytes of stderr; the host never holds more."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from skillyard import SkillYard, SkillyardError
from skillyard.settings import Settings

SHELL = (
    "name: {name}\ndescription: d\noffload: false\nexec:\n  primary:\n    type: INLINE_SHELL\n    command: {command}"
)


def shell_skill(make_skill, name: str, command: str) -> None:
    make_skill(name, frontmatter=SHELL.format(name=name, command=json.dumps(command)))


def _peak_rss_mb(skills_root, env: dict[str, str], skill: str) -> tuple[dict, float]:
    """Run one skill in a fresh process; its envelope and the process's peak resident memory."""
    code = textwrap.dedent(
        f"""
        import asyncio, json
        from skillyard import SkillYard

        async def main():
            async with SkillYard(skills_dirs=[{str(skills_root)!r}], include_builtin=False) as yard:
                return await yard.run({skill!r}, {{}})

        envelope = asyncio.run(main())
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent (the test process)
        peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")).split()[1]
        print(json.dumps({{"envelope": envelope, "rss": int(peak)}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    return out["envelope"], out["rss"] / 1024


def test_too_much_stdout_stops_the_run_with_a_clear_failure(make_skill, skills_root, home, monkeypatch):
    shell_skill(make_skill, "flood", "head -c 200000000 /dev/zero | tr '\\0' x; echo done > after.txt")
    import os

    env = {**os.environ, "SKILLYARD_STDOUT_LIMIT": "1MB"}
    envelope, rss = _peak_rss_mb(skills_root, env, "flood")
    assert envelope["ok"] is False and envelope["stdout_limit_exceeded"] is True
    assert "more than 1 MB to stdout (SKILLYARD_STDOUT_LIMIT)" in envelope["error"]
    assert envelope["non_retriable"] is True
    assert rss < 150, f"the host grew to {rss:.0f} MB for 200 MB of stdout"


def test_a_huge_stderr_keeps_only_its_tail(make_skill, skills_root, home):
    shell_skill(
        make_skill, "noisy", "head -c 100000000 /dev/zero | tr '\\0' e >&2; echo LAST-LINE >&2; echo '{\"ok\": true}'"
    )
    import os

    env = {**os.environ, "SKILLYARD_STDERR_TAIL": "64KB"}
    envelope, rss = _peak_rss_mb(skills_root, env, "noisy")
    assert envelope == {"ok": True, "success": True}
    assert rss < 150, f"the host grew to {rss:.0f} MB for 100 MB of stderr"


async def test_a_failure_quotes_the_end_of_stderr(make_skill, skills_root, monkeypatch):
    monkeypatch.setenv("SKILLYARD_STDERR_TAIL", "4KB")
    shell_skill(
        make_skill, "fails", "head -c 50000 /dev/zero | tr '\\0' a >&2; echo >&2; echo the-real-cause >&2; exit 3"
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        envelope = await yard.run("fails", {})
    assert envelope["exit_code"] == 3 and "the-real-cause" in envelope["error"]
    assert envelope["stderr_tail"].endswith("the-real-cause\n") and len(envelope["stderr_tail"]) <= 2000


async def test_output_under_the_limit_is_read_whole(make_skill, skills_root, monkeypatch):
    monkeypatch.setenv("SKILLYARD_STDOUT_LIMIT", "2MB")
    shell_skill(make_skill, "big", "python3 -c \"import json; print(json.dumps({'text': 'y' * 1500000}))\"")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        envelope = await yard.run("big", {})
    assert envelope["ok"] is True and len(envelope["text"]) == 1_500_000


@pytest.mark.parametrize("value", ["0", "-5", "lots", "1TB", "nan"])
def test_a_bad_limit_setting_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("SKILLYARD_STDOUT_LIMIT", value)
    with pytest.raises(SkillyardError, match=r"SKILLYARD_STDOUT_LIMIT=.* must be a size above zero"):
        Settings.from_env()


@pytest.mark.parametrize(("value", "size"), [("65536", 65536), ("64KB", 65536), ("16 MB", 16 << 20), ("1GiB", 1 << 30)])
def test_limit_settings_take_bytes_or_units(monkeypatch, value, size):
    monkeypatch.setenv("SKILLYARD_STDERR_TAIL", value)
    assert Settings.from_env().stderr_tail == size
