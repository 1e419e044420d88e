"""A trivial Python CLI skill run through yard.run at each sandbox tier this machine offers, against the same run
unsandboxed (SKILLYARD_SANDBOX=off).

    python bench/bench_sandbox.py

60 runs per tier, the tiers interleaved run by run so each sees the same machine load; best and median.
Target: tier A / unsandboxed <= 1.5 (best runs). B and C are reported without a target.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from contextlib import AsyncExitStack

from _common import isolate, verdict
from bench_subprocess import make_skill

TMP, BASE = isolate("sandbox")

from skillyard.executors.sandbox import machine  # noqa: E402  (after isolate(): the host reads the environment)
from skillyard.settings import SandboxSettings  # noqa: E402
from skillyard.yard import SkillYard  # noqa: E402

RUNS = 60
TARGET = 1.5
EXPECTED = {"echo": "hi", "ok": True, "success": True}


async def main() -> None:
    root = BASE / "skills"
    make_skill(root)
    for folder in (BASE, root, root / "echo-cli"):  # tier B runs as the sandbox user, without bind mounts
        folder.chmod(0o755)
    tiers = [*machine(SandboxSettings().user).available, "off"]
    async with AsyncExitStack() as stack:
        yards = {}
        for tier in tiers:
            os.environ["SKILLYARD_SANDBOX"] = tier  # read when a SkillYard is built
            yards[tier] = await stack.enter_async_context(SkillYard(skills_dirs=[root], include_builtin=False))
        for tier, yard in yards.items():
            result = await yard.run("echo-cli", {"text": "hi"})
            if {k: v for k, v in result.items() if k != "warnings"} != EXPECTED:
                sys.exit(f"unexpected envelope at tier {tier}: {result!r}")
            for _ in range(3):  # warm up: page cache, .pyc files
                await yard.run("echo-cli", {"text": "hi"})
        samples: dict[str, list[float]] = {tier: [] for tier in tiers}
        for _ in range(RUNS):
            for tier, yard in yards.items():
                start = time.perf_counter()
                await yard.run("echo-cli", {"text": "hi"})
                samples[tier].append(time.perf_counter() - start)
    off = min(samples["off"])
    root_host = os.geteuid() == 0
    print(f"python {sys.version.split()[0]}; {RUNS} runs per tier, interleaved; best (median); root host: {root_host}")
    for tier in tiers:
        best, median = min(samples[tier]), statistics.median(samples[tier])
        print(f"tier {tier:<3} {best * 1e3:6.2f} ms/run ({median * 1e3:6.2f} ms)   {best / off:5.2f}x unsandboxed")
    if "A" in samples:
        ratio = min(samples["A"]) / off
        print(f"target: tier A / unsandboxed <= {TARGET:g}x (best runs): {ratio:.2f}x, {verdict(ratio <= TARGET)}")
    else:
        print(f"tier A is not available here: {machine(SandboxSettings().user).reasons['A']}")


if __name__ == "__main__":
    asyncio.run(main())
