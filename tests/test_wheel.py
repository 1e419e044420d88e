"""The wheel ships the built-in skills: build it, install it into a fresh venv, and list them from there."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _project_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
        return [REPO / line for line in out.splitlines() if (REPO / line).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [p for p in REPO.rglob("*") if p.is_file() and ".git" not in p.parts]


@pytest.mark.slow
def test_wheel_contains_builtin_skills_and_list_finds_them(tmp_path):
    src = tmp_path / "src"
    for path in _project_files():
        target = src / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    probe = src / "skills" / "probe_builtin"
    probe.mkdir(parents=True)
    (probe / "SKILL.md").write_text("---\nname: probe_builtin\ndescription: A probe\n---\nBody\n")
    (probe / "handler.py").write_text("async def execute(input, ctx):\n    return {'probe': True}\n")
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(dist.glob("skillyard-*.whl"))
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "skillyard/builtin_skills/probe_builtin/SKILL.md" in names
    assert "skillyard/builtin_skills/probe_builtin/handler.py" in names
    assert {"skillyard/sandbox/launch.sh", "skillyard/sandbox/stage.sh", "skillyard/sandbox/bwrap.args"} <= set(names)
    assert any(n.startswith("skillyard/storage/migrations/versions/0001") for n in names)

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True, timeout=900
    )
    if install.returncode != 0 and (
        "NewConnectionError" in install.stderr or "No matching distribution" in install.stderr
    ):
        pytest.skip(
            f"the package registry is not reachable to install the wheel's dependencies: {install.stderr[-300:]}"
        )
    assert install.returncode == 0, install.stderr[-2000:]
    listed = subprocess.run(
        [str(env_dir / "bin" / "skillyard"), "list", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SKILLYARD_HOME": str(tmp_path / "home")},
    )
    assert listed.returncode == 0, listed.stderr
    items = {i["name"]: i for i in json.loads(listed.stdout)}
    assert items["probe_builtin"]["source"] == "builtin"
    assert str(env_dir) in items["probe_builtin"]["dir"]
    ran = subprocess.run(
        [str(env_dir / "bin" / "skillyard"), "run", "probe_builtin"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SKILLYARD_HOME": str(tmp_path / "home")},
    )
    assert ran.returncode == 0 and json.loads(ran.stdout)["probe"] is True
    shell = tmp_path / "shell_skills" / "hi"  # a shell skill runs through the installed sandbox/launch.sh
    shell.mkdir(parents=True)
    (shell / "SKILL.md").write_text("---\nname: hi\ndescription: x\nexec:\n  config: run.sh\n---\n")
    (shell / "run.sh").write_text("echo '{\"hi\": true}'\n")
    sandboxed = subprocess.run(
        [str(env_dir / "bin" / "skillyard"), "run", "hi", "--skills-dir", str(shell.parent)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SKILLYARD_HOME": str(tmp_path / "home")},
    )
    assert sandboxed.returncode == 0 and json.loads(sandboxed.stdout)["hi"] is True, sandboxed.stdout


def test_every_platform_package_is_listed_for_the_wheel() -> None:
    """pyproject lists packages explicitly (skills/ is mapped in too); a new package missing there is not shipped."""
    import tomllib

    root = Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(root / "platform").parts)
        for init in (root / "platform" / "skillyard").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
