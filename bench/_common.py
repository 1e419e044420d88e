"""Shared by the bench/ scripts: an isolated environment, best-of-N timing and the report lines.

Import this before ``skillyard``: ``isolate()`` sets the environment the host reads when a SkillYard is built.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

AsyncCall = Callable[[], Awaitable[object]]


def isolate(prefix: str) -> tuple[tempfile.TemporaryDirectory[str], Path]:
    """A temporary SKILLYARD_HOME, no database configured (the embedded one starts only when a script starts it),
    no extra plugins, no tracing.

    Returns the TemporaryDirectory (keep a reference; it is removed when collected) and its path.
    """
    tmp = tempfile.TemporaryDirectory(prefix=f"skillyard-bench-{prefix}-")
    base = Path(tmp.name)
    (base / "home").mkdir()
    os.environ["SKILLYARD_HOME"] = str(base / "home")
    os.environ["SKILLYARD_LOAD_PLUGINS"] = ""  # only the built-in plugins: measure the platform, not what's installed
    for name in ("SKILLYARD_DATABASE_URL", "SKILLYARD_SKILLS_PATH", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING"):
        os.environ.pop(name, None)
    return tmp, base


async def _loop(call: AsyncCall, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await call()
    return time.perf_counter() - start


async def calibrate(call: AsyncCall, target_s: float = 0.2, max_n: int = 1 << 22) -> int:
    """How many calls make one repetition last about ``target_s`` seconds."""
    n = 1
    while n < max_n:
        if await _loop(call, n) >= target_s / 4:
            break
        n *= 2
    elapsed = await _loop(call, n)
    return max(1, min(max_n, int(n * target_s / max(elapsed, 1e-9))))


async def best_per_call(
    calls: dict[str, AsyncCall], reps: int, target_s: float = 0.2, fixed_n: int | None = None
) -> dict[str, float]:
    """Seconds per call for each contender: the best of ``reps`` repetitions, contenders interleaved per round."""
    sizes = {name: fixed_n or await calibrate(call, target_s) for name, call in calls.items()}
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(reps):
        for name, call in calls.items():
            best[name] = min(best[name], await _loop(call, sizes[name]) / sizes[name])
    return best


def best_of_each(
    fns: Mapping[str, Callable[[], object]],
    rounds: int,
    budget_s: float | None = None,
    min_rounds: int = 3,
    repeat: dict[str, int] | None = None,
) -> dict[str, float]:
    """Wall-clock seconds of the fastest run of each synchronous contender, contenders interleaved per round.

    ``repeat`` runs some contenders several times a round. With ``budget_s``, stops early (after at least
    ``min_rounds`` rounds) once that many seconds were spent.
    """
    best = dict.fromkeys(fns, float("inf"))
    spent = 0.0
    for done in range(1, rounds + 1):
        for name, fn in fns.items():
            for _ in range((repeat or {}).get(name, 1)):
                start = time.perf_counter()
                fn()
                elapsed = time.perf_counter() - start
                spent += elapsed
                best[name] = min(best[name], elapsed)
        if budget_s is not None and done >= min_rounds and spent >= budget_s:
            break
    return best


def verdict(met: bool) -> str:
    return "target met" if met else "target missed"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.2f} µs"
