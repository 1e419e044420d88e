"""A fixed-window rate limit per token, counted in PostgreSQL so that every serve process shares it.

A process claims its requests from the window's row in blocks (1 % of the limit, at least one): one ``INSERT … ON
CONFLICT DO UPDATE`` per block instead of per request. The row counts what was claimed, so all processes together
never admit more than the limit in a window; a process may leave at most a block unused when the window ends.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

from sqlalchemy import text

from ..storage.database import Database
from .errors import ApiError

_CLAIM = text(
    """INSERT INTO skillyard.service_rate_windows (subject, window_start, used) VALUES (:s, :w, :n)
       ON CONFLICT (subject, window_start) DO UPDATE SET used = service_rate_windows.used + :n
       RETURNING used"""
)
_PRUNE = text("DELETE FROM skillyard.service_rate_windows WHERE window_start < :before")
PRUNE_EVERY_S = 300.0


@dataclass
class _Window:
    start: int
    left: int  # claimed by this process and not used yet
    spent: bool = False  # the row said the window is full


class RateLimiter:
    def __init__(self, database: Database, limit: int, window_s: int) -> None:
        self.database = database
        self.limit = limit
        self.window_s = window_s
        self.block = max(1, limit // 100)
        self._windows: dict[str, _Window] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._pruned_at = 0.0

    async def check(self, subject: str) -> None:
        """Count one request of ``subject``; 429 with Retry-After when its window is used up."""
        if self.limit <= 0:
            return
        now = time.time()
        start = int(now // self.window_s) * self.window_s
        window = self._windows.get(subject)
        if window is not None and window.start == start and window.left > 0:
            window.left -= 1
            return
        lock = self._locks.setdefault(subject, asyncio.Lock())
        async with lock:
            window = self._windows.get(subject)
            if window is None or window.start != start:
                window = self._windows[subject] = _Window(start, 0)
            if window.left <= 0 and not window.spent:
                window.left = await self._claim(subject, start)
                window.spent = window.left <= 0
            if window.left > 0:
                window.left -= 1
                return
        retry = max(1, math.ceil(start + self.window_s - now))
        raise ApiError(
            429,
            "rate_limited",
            f"token {subject!r} sent more than {self.limit} requests in {self.window_s} s",
            f"wait {retry} s (Retry-After), then send again",
            {"Retry-After": str(retry)},
        )

    async def _claim(self, subject: str, start: int) -> int:
        sessions = await self.database.session_factory()
        async with sessions() as session, session.begin():
            used = int((await session.execute(_CLAIM, {"s": subject, "w": start, "n": self.block})).scalar_one())
            if time.monotonic() - self._pruned_at > PRUNE_EVERY_S:
                self._pruned_at = time.monotonic()
                await session.execute(_PRUNE, {"before": start - self.window_s})
        over = max(0, used - self.limit)
        return max(0, self.block - over)
