"""Subprocess run of a trivial Python CLI skill through yard.run, against a bare
asyncio.create_subprocess_exec of the same script reading its stdout.

    python bench/bench_subprocess.py

Target: our time / bare time <= 1.3.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import textwrap
import time
from pathlib import Path

from _common import isolate, verdict

TMP, BASE = isolate("subprocess")
os.environ["SKILLYARD_SANDBOX"] = "off"  # the platform's own overhead; bench_sandbox.py measures each sandbox tier

from skillyard.yard import SkillYard  # noqa: E402  (after isolate(): the host reads the environment)

PAIRS = 60  # one run of each, alternating, per pair: both see the same machine load
TARGET = 1.3
SCRIPT = textwrap.dedent(
    """\
    import argparse
    import json


    def main():
        parser = argparse.ArgumentParser(description="Echo the given text back.")
        parser.add_argument("--text", required=True)
        args = parser.parse_args()
        print(json.dumps({"echo": args.text}))


    if __name__ == "__main__":
        main()
    """
)


def make_skill(root: Path) -> Path:
    folder = root / "echo-cli"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: echo-cli\ndescription: Echo the given text back (a CLI).\n---\n")
    (folder / "handler.py").write_text(SCRIPT)
    return folder / "handler.py"


async def bare(script: Path) -> object:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), "--text", "hi", stdout=asyncio.subprocess.PIPE
    )
    stdout, _ = await proc.communicate()
    return json.loads(stdout)


async def main() -> None:
    root = BASE / "skills"
    script = make_skill(root)
    async with SkillYard(skills_dirs=[root], include_builtin=False) as yard:
        skill = yard.skill("echo-cli")
        if not skill.exec.python_cli:
            sys.exit(f"the skill was not detected as a Python CLI: exec={skill.exec!r}")
        result = await yard.run("echo-cli", {"text": "hi"})
        if result != {"echo": "hi", "ok": True, "success": True}:
            sys.exit(f"unexpected envelope from yard.run: {result!r}")
        if await bare(script) != {"echo": "hi"}:
            sys.exit("the bare subprocess did not print the expected JSON")
        for _ in range(3):  # warm up: page cache, the interpreter's own .pyc files
            await yard.run("echo-cli", {"text": "hi"})
            await bare(script)
        samples: dict[str, list[float]] = {"ours": [], "bare": []}
        for _ in range(PAIRS):
            for name, call in (("ours", lambda: yard.run("echo-cli", {"text": "hi"})), ("bare", lambda: bare(script))):
                start = time.perf_counter()
                await call()
                samples[name].append(time.perf_counter() - start)

    ours, base = min(samples["ours"]), min(samples["bare"])
    ours_med, base_med = statistics.median(samples["ours"]), statistics.median(samples["bare"])
    ratio = ours / base
    print(f"python {sys.version.split()[0]}; {PAIRS} runs of each, interleaved; best (median)")
    print(f"ours  yard.run('echo-cli', {{'text': 'hi'}}):         {ours * 1e3:6.2f} ms/run ({ours_med * 1e3:6.2f} ms)")
    print(f"bare  asyncio.create_subprocess_exec + communicate: {base * 1e3:6.2f} ms/run ({base_med * 1e3:6.2f} ms)")
    print(
        f"ours/bare = {ratio:.3f}x on the best runs (overhead {(ours - base) * 1e3:.2f} ms/run); "
        f"{ours_med / base_med:.3f}x on the medians"
    )
    print(f"target: ours/bare <= {TARGET:g}x (best runs): {verdict(ratio <= TARGET)}")


if __name__ == "__main__":
    asyncio.run(main())
