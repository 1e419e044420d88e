"""Schedules: cron expressions in a time zone, evaluated by the ticker every second, each tick claimed once.

procrastinate's own periodic tasks are registered in code and know no time zones, so schedules live in a table and
one periodic ticker task reads them. A tick is a ``(schedule, time)`` row: whichever worker inserts it first starts
the run, every other sees the conflict and does nothing. Ticks are wall-clock times of the schedule's zone, as
croniter computes them: a time that a daylight-saving jump skips fires at the first time after the jump (02:30 in
Europe/Berlin on the spring-forward day fires at 03:00), and a repeated hour fires once. A tick more than
:data:`MISSED_AFTER_S` late is recorded as missed, not run (no catch-up).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from ..errors import SkillyardError

MISSED_AFTER_S = 60.0
OVERLAP = ("skip", "queue", "allow")
#: More ticks than this between two evaluations are not enumerated one by one (an every-second schedule after a
#: long outage): the newest late one is recorded as missed.
MAX_TICKS_PER_EVALUATION = 120


class ScheduleInvalid(SkillyardError):
    """A cron expression, time zone or overlap policy that cannot be used."""


def check_cron(expression: str) -> str:
    """The expression when croniter reads it as five fields, or six with trailing seconds; else the fix."""
    text = " ".join(expression.split()) if isinstance(expression, str) else ""
    fields = len(text.split(" ")) if text else 0
    if fields not in (5, 6) or not croniter.is_valid(text):
        raise ScheduleInvalid(
            f"--cron {expression!r} is not a cron expression: give five fields (minute hour day month weekday, "
            "e.g. '*/5 * * * *') or six with trailing seconds ('* * * * * */2' is every two seconds)"
        )
    try:  # '0 0 30 2 *' is read, yet has no next time: the ticker and `schedule list` could never compute one
        croniter(text, dt.datetime(2000, 1, 1, tzinfo=dt.UTC)).get_next(dt.datetime)
    except CroniterBadDateError:
        raise ScheduleInvalid(
            f"--cron {expression!r} never fires (a day that no month has, such as 30 February): fix its day and month"
        ) from None
    return text


def check_zone(name: str) -> ZoneInfo:
    try:
        if not isinstance(name, str):
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
        raise ScheduleInvalid(
            f"--tz {name!r} is not a time zone: give an IANA name such as UTC, Europe/Berlin or Asia/Shanghai"
        ) from None


def check_overlap(policy: str) -> str:
    if policy not in OVERLAP:
        raise ScheduleInvalid(f"--overlap {policy!r} is not a policy: use {', '.join(OVERLAP)}")
    return policy


def due_ticks(cron: str, zone: ZoneInfo, after: dt.datetime, now: dt.datetime) -> Iterator[dt.datetime]:
    """The ticks in ``(after, now]``, oldest first, as UTC datetimes (at most MAX_TICKS_PER_EVALUATION).

    A tick at the same wall-clock time as the one before it (the repeated hour when clocks fall back: croniter
    gives a daily 02:30 twice that night) is left out, so a wall-clock time fires once.
    """
    start = after.astimezone(zone)
    previous = start.replace(tzinfo=None)
    iterator = croniter(cron, start)
    for _ in range(MAX_TICKS_PER_EVALUATION):
        tick: dt.datetime = iterator.get_next(dt.datetime)
        if tick > now:
            return
        wall = tick.replace(tzinfo=None)
        if wall != previous:
            yield tick.astimezone(dt.UTC)
        previous = wall


def latest_tick(cron: str, zone: ZoneInfo, now: dt.datetime) -> dt.datetime:
    """The newest tick at or before ``now`` (UTC)."""
    tick: dt.datetime = croniter(cron, now.astimezone(zone) + dt.timedelta(microseconds=1)).get_prev(dt.datetime)
    return tick.astimezone(dt.UTC)


def next_tick(cron: str, zone: ZoneInfo, now: dt.datetime) -> dt.datetime:
    tick: dt.datetime = croniter(cron, now.astimezone(zone)).get_next(dt.datetime)
    return tick.astimezone(dt.UTC)
