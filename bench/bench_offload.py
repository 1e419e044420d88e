"""Offload of a 5 MB result: yard.run of a skill returning it (the offload processor writes it to the workspace
and returns a receipt) versus the same skill with ``offload: false`` plus a plain ``json.dumps`` and file write
of the same result. Prints MB/s and the ratio; target >= 0.8x."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from _common import isolate

TARGET = 0.8
ROUNDS = 7
HANDLER = """
ROWS = [{"id": i, "name": f"row {i}", "text": "x" * 480} for i in range(10_000)]
async def execute(input, ctx):
    return {"ok": True, "rows": ROWS, "count": len(ROWS)}
"""


def make_skill(root: Path, name: str, offload: bool) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    flag = "" if offload else "offload: false\n"
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: returns 5 MB\n{flag}---\n", encoding="utf-8")
    (folder / "handler.py").write_text(HANDLER, encoding="utf-8")


async def main() -> None:
    _tmp, base = isolate("offload")
    from skillyard import SkillYard

    root = base / "skills"
    make_skill(root, "big", offload=True)
    make_skill(root, "big_inline", offload=False)
    plain_dir = base / "plain"
    plain_dir.mkdir()
    async with SkillYard(skills_dirs=[root], include_builtin=False) as yard:
        receipt = await yard.run("big", context={"session_id": "bench"})
        if not receipt.get("offloaded"):
            sys.exit(f"wrong result: the 5 MB result was not offloaded: {list(receipt)}")
        size_mb = Path(receipt["offload_file"]).stat().st_size / 1e6
        best_ours = best_plain = float("inf")
        for i in range(ROUNDS):
            start = time.perf_counter()
            await yard.run("big", context={"session_id": "bench"})
            best_ours = min(best_ours, time.perf_counter() - start)
            start = time.perf_counter()
            inline = await yard.run("big_inline", context={"session_id": "bench"})
            (plain_dir / f"r{i}.json").write_text(json.dumps(inline, ensure_ascii=False), encoding="utf-8")
            best_plain = min(best_plain, time.perf_counter() - start)
    ratio = (size_mb / best_ours) / (size_mb / best_plain)
    print(f"python {sys.version.split()[0]}; best of {ROUNDS} interleaved rounds; result of {size_mb:.1f} MB")
    print(f"ours   run + offload (safe write, receipt):   {best_ours * 1000:8.1f} ms  {size_mb / best_ours:7.1f} MB/s")
    print(
        f"plain  run inline + json.dumps + write_text:  {best_plain * 1000:8.1f} ms  {size_mb / best_plain:7.1f} MB/s"
    )
    print(f"ours/plain throughput = {ratio:.2f}x; target >= {TARGET}x: target {'met' if ratio >= TARGET else 'missed'}")


if __name__ == "__main__":
    asyncio.run(main())
