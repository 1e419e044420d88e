"""Start-up of the command line: ``skillyard --version`` and ``skillyard --help`` as a user runs them.

    python bench/bench_cli_startup.py

Each command runs 15 times as a fresh process, interleaved with a bare ``python -c pass`` (the interpreter's own
start-up, the floor nothing can go under); best and median wall clock. Then the slowest imports of ``--help``,
from ``python -X importtime``, so a regression shows where it came from.
Target: --version and --help <= 0.25 s (best run).
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time

from _common import isolate, verdict

TMP, BASE = isolate("cli")
RUNS = 15
TARGET_S = 0.25
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "skillyard --version": [sys.executable, "-m", "skillyard", "--version"],
    "skillyard --help": [sys.executable, "-m", "skillyard", "--help"],
}


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv[1:])} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return elapsed


def slowest_imports(argv: list[str], n: int = 8) -> list[tuple[float, str]]:
    """The top-level imports of a run with the largest cumulative time (ms), from ``-X importtime``."""
    err = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True).stderr
    rows = []
    for line in err.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)", line)
        if match and len(match.group(2)) <= 1:  # top-level or one level down
            rows.append((int(match.group(1)) / 1000, match.group(3)))
    return sorted(rows, reverse=True)[:n]


def main() -> None:
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(RUNS):
        for name, argv in COMMANDS.items():
            times[name].append(timed(argv))
    print(f"python {sys.version.split()[0]}; {RUNS} fresh processes each, interleaved")
    for name, values in times.items():
        print(f"{name:22} best {min(values):.3f} s  median {statistics.median(values):.3f} s")
    worst = max(min(times["skillyard --version"]), min(times["skillyard --help"]))
    print(f"target: --version and --help <= {TARGET_S} s (best run): {verdict(worst <= TARGET_S)}")
    print("slowest imports of --help (cumulative ms):")
    for ms, module in slowest_imports(COMMANDS["skillyard --help"]):
        print(f"  {ms:7.1f}  {module}")


if __name__ == "__main__":
    main()
