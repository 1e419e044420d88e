"""One run in progress (:class:`Run`), the session-id rule and the clock runs are stamped with.

Result processors, the run log and the background runner all see a run through :class:`Run`; they import it from
here rather than from the pipeline that builds it.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from .budget import DEFAULT_SESSION
from .policy import DEFAULT_POLICY, RunPolicy

if TYPE_CHECKING:
    from ..catalog.skill import Skill
    from ..yard import SkillYard
    from .budget import Turn


def _coarse_clock() -> int | None:
    """CLOCK_REALTIME_COARSE (5 in linux/time.h; the time module does not name it on Python 3.11), if this system
    has it."""
    clock = getattr(time, "CLOCK_REALTIME_COARSE", 5 if sys.platform.startswith("linux") else None)
    if clock is None:
        return None
    try:
        time.clock_gettime_ns(clock)
    except OSError:
        return None
    return int(clock)


_COARSE_CLOCK = _coarse_clock()


def file_clock_ns() -> int:
    """Now, on the clock file modification times are stamped with.

    Linux stamps mtimes from the coarse realtime clock, which lags ``time.time_ns()`` by up to one tick (a few
    ms): a file written just after a fine-grained start time can look older than the start. Read from the coarse
    clock, the start is never later than the mtime of anything written after it; a file written earlier in the same
    tick counts as written during the run (a window of one tick).
    """
    if _COARSE_CLOCK is not None:
        return time.clock_gettime_ns(_COARSE_CLOCK)
    return time.time_ns()


SAFE_SESSION = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}\Z")  # \Z, not $: "victim\n" is no safe name


@dataclass
class Run:
    """One run in progress: what result processors and the run log see."""

    yard: SkillYard
    skill: Skill
    subcommand: str | None
    input: dict[str, Any]
    context: dict[str, Any]
    turn: Turn | None
    depth: int
    started: float = field(default_factory=time.time)
    started_ns: int = field(default_factory=file_clock_ns)
    background: bool = False  # an async skill's background run (§8): no default wall clock
    policy: RunPolicy = DEFAULT_POLICY

    @property
    def session_id(self) -> str:
        """The session whose workspace and attachments the run uses (``default`` without one)."""
        return str(self.context.get("session_id") or DEFAULT_SESSION)

    def record_artifact(self, item: dict[str, Any]) -> None:
        """A file the run produced: listed on the turn (once), and visible to its later runs as an attachment —
        only when the run works in the turn's session (a ref names a file of one session)."""
        turn = self.turn
        if turn is None or self.session_id != turn.session:
            return
        if all(a.get("ref") != item["ref"] for a in turn.artifacts):
            turn.artifacts.append(item)
        if turn.attachments is not None and all(a["ref"] != item["ref"] for a in turn.attachments):
            turn.attachments.append(item)


def check_session_id(session_id: str) -> str:
    """The id itself when it is a safe folder name for a session's workspace; InvalidInput with the rule if not."""
    if not SAFE_SESSION.match(session_id) or session_id in (".", ".."):
        raise InvalidInput(
            f"session id {session_id!r} is not a safe name: use 1-128 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit"
        )
    return session_id
