"""A write killed half-way leaves a hidden temp file; the next host to open removes it once it is stale."""

from __future__ import annotations

import os
import time

from skillyard import SkillYard
from skillyard.outputs.safe_write import remove_stale_temp_files


def _age(path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


async def test_the_next_host_removes_stale_part_files_and_keeps_the_rest(home):
    workspace = home / "workspaces" / "s1" / "offload"
    workspace.mkdir(parents=True)
    stale = workspace / ".result.json.0a1b2c3d.part"
    fresh = workspace / ".other.json.0a1b2c3e.part"
    mine = workspace / ".notes.part"  # not a name our writes make: left alone
    kept = workspace / "result.json"
    for path in (stale, fresh, mine, kept):
        path.write_bytes(b"x" * 1000)
    for path in (stale, mine, kept):
        _age(path, 3600)
    async with SkillYard(include_builtin=False):
        pass
    assert not stale.exists() and fresh.exists() and mine.exists() and kept.exists()
    _age(fresh, 3600)
    async with SkillYard(include_builtin=False):  # swept at most once per wall clock: still there
        pass
    assert fresh.exists()
    _age(home / "workspaces" / ".temp-files-swept", 3600)
    async with SkillYard(include_builtin=False):
        pass
    assert not fresh.exists()


def test_symlinked_folders_are_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / ".x.0a1b2c3d.part"
    victim.write_bytes(b"x")
    _age(victim, 3600)
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside)
    assert remove_stale_temp_files(root, 60) == 0 and victim.exists()
