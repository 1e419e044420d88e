"""A turn: its failure budget (§6.1.4), its display blocks (§6.2) and the artifacts it produced."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..envelope import failure
from ..outputs.display import DisplayBlock, DisplayMerge

CONSECUTIVE_FAILURES_BAN = 2
TOTAL_FAILURES_WRAP_UP = 4
SAME_CALL_LOOP = 3
#: The session of runs (and turns) that name none: its workspace and attachments are theirs.
DEFAULT_SESSION = "default"


def call_fingerprint(skill: str, input: Mapping[str, Any]) -> str:
    """A stable key for (skill, input)."""
    return skill + "\x00" + json.dumps(input, sort_keys=True, ensure_ascii=False, default=str)


@dataclass
class Turn:
    """One user turn: the runs it made and its failure budget. Only real runs of a skill count."""

    session_id: str = ""
    channel: str = ""
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    context: dict[str, Any] = field(default_factory=dict)
    consecutive_failures: Counter[str] = field(default_factory=Counter)
    total_failures: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    banned: dict[str, str] = field(default_factory=dict)
    runs: int = 0
    #: Files the turn's runs produced (the registered artifact items, with their ``ref``).
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    display: DisplayMerge = field(default_factory=DisplayMerge)
    #: The session's attachments, read once per turn (see ``SkillYard.attachments_for``).
    attachments: list[dict[str, Any]] | None = None

    @property
    def session(self) -> str:
        """The session the turn's runs use (``DEFAULT_SESSION`` when it names none)."""
        return self.session_id or DEFAULT_SESSION

    def display_md(self) -> DisplayBlock:
        """The turn's merged display block for its channel, and whether it replaces the model's text."""
        return self.display.render(self.channel)

    @property
    def must_wrap_up(self) -> bool:
        """True once the turn has failed too often: answer the user instead of trying more tools."""
        return self.total_failures >= TOTAL_FAILURES_WRAP_UP

    def refuse(self, skill: str, input: Mapping[str, Any]) -> dict[str, Any] | None:
        """The envelope refusing this run before it starts, or None when the budget allows it."""
        if skill in self.banned:
            return failure(
                skill,
                f"skill {skill!r} is banned for the rest of this turn: {self.banned[skill]}",
                banned=True,
                error_type="recoverable",
                non_retriable=True,
            )
        if self.must_wrap_up:
            return failure(
                skill,
                f"this turn already had {self.total_failures} failed skill runs; stop calling skills and "
                "tell the user what succeeded and what did not",
                wrap_up=True,
                error_type="recoverable",
            )
        if self.calls[call_fingerprint(skill, input)] + 1 >= SAME_CALL_LOOP:
            return failure(
                skill,
                f"loop detected: skill {skill!r} was already called {SAME_CALL_LOOP - 1} times with the same "
                "input in this turn; change the input or answer with what you have",
                loop_detected=True,
                error_type="recoverable",
            )
        return None

    def record(self, skill: str, input: Mapping[str, Any], envelope: dict[str, Any]) -> None:
        """Count a real run and update the bans; annotate the envelope when the budget tips."""
        self.runs += 1
        self.calls[call_fingerprint(skill, input)] += 1
        if envelope.get("ok"):
            self.consecutive_failures[skill] = 0
            return
        self.total_failures += 1
        self.consecutive_failures[skill] += 1
        if envelope.get("non_retriable"):
            self.banned[skill] = "it reported a failure that retrying cannot fix (non_retriable)"
        elif self.consecutive_failures[skill] >= CONSECUTIVE_FAILURES_BAN:
            self.banned[skill] = f"it failed {CONSECUTIVE_FAILURES_BAN} times in a row"
        if self.must_wrap_up:
            envelope["wrap_up"] = True
