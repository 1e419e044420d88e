"""The ``skillyard`` console script and ``python -m skillyard`` as real processes: what only a process shows (the
exit code a shell sees, the two streams of a terminal, logging configured by -v, --version)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from support import REPO


def proc(*args: str, module: bool = False) -> subprocess.CompletedProcess[str]:
    """A real ``skillyard`` process (or ``python -m skillyard``), with this test's environment."""
    cmd = [sys.executable, "-m", "skillyard", *args] if module else ["skillyard", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=str(REPO))


def test_console_script_prints_envelope_and_logs_to_stderr(hello, skills_root):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "skillyard",
            "run",
            "hello",
            "--skills-dir",
            str(skills_root),
            "--input",
            '{"who": "proc"}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["greeting"] == "hello proc"


def test_cli_run_exception_no_traceback(cli_root):
    """Issue: '(traceback to the log only)'; brief: error messages never a traceback."""
    # A real process: the exit code and the terminal's two streams as a shell sees them.
    res = subprocess.run(
        ["skillyard", "run", "raiser", "--skills-dir", str(cli_root)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 1
    assert json.loads(res.stdout)["exception_type"] == "ValueError"
    assert "Traceback" not in res.stdout


def test_version_prints_name_and_version():
    """`--version` | print `skillyard, version X` and exit"""
    out = proc("--version")
    assert out.returncode == 0 and re.fullmatch(r"skillyard, version \S+\n", out.stdout), out.stdout + out.stderr


def test_python_dash_m_runs_the_cli():
    """python -m skillyard …          (the same CLI)"""
    out = proc("list", "--no-builtin", "--json", module=True)
    assert out.returncode == 0 and json.loads(out.stdout) == []


def test_python_dash_m_version_is_the_same():
    """`--version` | print `skillyard, version X` and exit; python -m skillyard …          (the same CLI)"""
    assert proc("--version", module=True).stdout == proc("--version").stdout


def test_verbose_logs_subprocess_stderr_lines(root):
    """`-v`, `--verbose` | log to stderr: `-v` info (subprocess stderr lines, …); default: warnings only"""
    # A real process: -v configures logging of a fresh process (in pytest's, the root logger has handlers already).
    loud = proc("-v", "run", "noisy", "--skills-dir", str(root))
    quiet = proc("run", "noisy", "--skills-dir", str(root))
    assert loud.returncode == 0 and quiet.returncode == 0
    assert "NOISY_STDERR_MARK" in loud.stderr and "NOISY_STDERR_MARK" not in quiet.stderr
    assert "NOISY_STDERR_MARK" not in loud.stdout


def test_run_logs_go_to_stderr(root):
    """prints its envelope as one line of JSON on stdout. Logs go to stderr."""
    # A real process: stdout exactly one JSON line while -v logging goes to the terminal's stderr.
    out = proc("-v", "run", "noisy", "--skills-dir", str(root))
    assert out.returncode == 0 and json.loads(out.stdout)["said"] == "yes" and out.stdout.count("\n") == 1
