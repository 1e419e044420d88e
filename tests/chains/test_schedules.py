"""Schedules (skillyard.chains.schedules): cron of five fields or six with trailing seconds, IANA zones, overlap
policies, and the ticks due in a window as croniter computes them, daylight-saving jumps included."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from skillyard.chains.schedules import (
    MAX_TICKS_PER_EVALUATION,
    OVERLAP,
    ScheduleInvalid,
    check_cron,
    check_overlap,
    check_zone,
    due_ticks,
    latest_tick,
    next_tick,
)
from skillyard.errors import SkillyardError

UTC = dt.UTC
BERLIN = ZoneInfo("Europe/Berlin")


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def ticks(cron: str, zone: ZoneInfo, after: dt.datetime, now: dt.datetime) -> list[str]:
    return [t.isoformat() for t in due_ticks(cron, zone, after, now)]


# check_cron ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    ["* * * * *", "*/5 * * * *", "0 9 * * 1-5", "30 2 1 1 *", "0 0 29 2 *", "0 0 L * *", "0 12 * * mon"],
)
def test_five_fields_are_a_cron(expression):
    assert check_cron(expression) == expression


@pytest.mark.parametrize("expression", ["* * * * * */2", "0 0 * * * 30", "* * * * * 5-10", "*/5 * * * * 0"])
def test_six_fields_have_trailing_seconds(expression):
    assert check_cron(expression) == expression


def test_every_two_seconds():
    """'* * * * * */2' is every two seconds (the seconds field is the sixth, not the first)."""
    assert ticks("* * * * * */2", ZoneInfo("UTC"), utc(2024, 1, 1), utc(2024, 1, 1, 0, 0, 7)) == [
        "2024-01-01T00:00:02+00:00",
        "2024-01-01T00:00:04+00:00",
        "2024-01-01T00:00:06+00:00",
    ]


def test_extra_spaces_are_normalized():
    assert check_cron("  */5   *  * * *  ") == "*/5 * * * *"
    assert check_cron("*\t*\t*\t*\t*") == "* * * * *"


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "   ",
        "garbage",
        "a b c d e",
        "* * * *",
        "* * * * * * *",  # seven fields (a year) is not accepted
        "0 0 * * * 2020",  # six fields where the sixth is a year, not seconds: 2020 is no second
        "60 * * * *",
        "* 24 * * *",
        "* * 32 * *",
        "* * * 13 *",
        "* * * * 8",
        "* * * * * 61",
        "@daily",
        "@reboot",
        "*/0 * * * *",
        "1-x * * * *",
    ],
)
def test_garbage_is_refused_with_the_fix(expression):
    with pytest.raises(ScheduleInvalid) as caught:
        check_cron(expression)
    message = str(caught.value)
    assert message.startswith(f"--cron {expression!r} is not a cron expression")
    assert "five fields" in message and "'* * * * * */2' is every two seconds" in message


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6,9,11 *"])
def test_a_cron_that_never_fires_is_refused(expression):
    """croniter reads '0 0 30 2 *', yet can compute no next time: stored, it would fail `schedule list` and the
    ticker on every evaluation."""
    with pytest.raises(ScheduleInvalid, match="never fires"):
        check_cron(expression)


def test_schedule_errors_are_skillyard_errors():
    """The CLI turns a SkillyardError into exit 2 with its message."""
    assert issubclass(ScheduleInvalid, SkillyardError)


# check_zone / check_overlap --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["UTC", "Europe/Berlin", "Asia/Shanghai", "America/New_York", "Etc/GMT+5"])
def test_iana_zones(name):
    assert check_zone(name) == ZoneInfo(name)


@pytest.mark.parametrize(
    "name",
    ["", "Mars/Olympus", "Berlin", "europe/berlin_x", "../etc/passwd", "/etc/localtime", "Europe/../UTC", "+02:00"],
)
def test_unknown_zones_are_refused_with_examples(name):
    with pytest.raises(ScheduleInvalid) as caught:
        check_zone(name)
    assert str(caught.value) == (
        f"--tz {name!r} is not a time zone: give an IANA name such as UTC, Europe/Berlin or Asia/Shanghai"
    )


@pytest.mark.parametrize("policy", ["skip", "queue", "allow"])
def test_overlap_policies(policy):
    assert check_overlap(policy) == policy


@pytest.mark.parametrize("policy", ["", "SKIP", "replace", "skip "])
def test_unknown_overlap_is_refused(policy):
    with pytest.raises(ScheduleInvalid, match=r"is not a policy: use skip, queue, allow"):
        check_overlap(policy)
    assert OVERLAP == ("skip", "queue", "allow")


# due_ticks -------------------------------------------------------------------------------------------------------


def test_due_ticks_are_the_half_open_window_oldest_first_in_utc():
    found = list(due_ticks("*/5 * * * *", ZoneInfo("UTC"), utc(2024, 1, 1, 0, 5), utc(2024, 1, 1, 0, 20)))
    assert [t.isoformat() for t in found] == [  # (after, now]: 00:05 is not due again, 00:20 is
        "2024-01-01T00:10:00+00:00",
        "2024-01-01T00:15:00+00:00",
        "2024-01-01T00:20:00+00:00",
    ]
    assert all(t.tzinfo is UTC for t in found)


def test_no_tick_in_the_window():
    assert ticks("0 9 * * *", ZoneInfo("UTC"), utc(2024, 1, 1, 10), utc(2024, 1, 1, 11)) == []
    assert ticks("* * * * *", ZoneInfo("UTC"), utc(2024, 1, 1, 10), utc(2024, 1, 1, 10)) == []


def test_ticks_are_wall_clock_times_of_the_zone():
    """09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer; in Shanghai always 01:00 UTC."""
    assert ticks("0 9 * * *", BERLIN, utc(2024, 1, 15), utc(2024, 1, 16)) == ["2024-01-15T08:00:00+00:00"]
    assert ticks("0 9 * * *", BERLIN, utc(2024, 7, 15), utc(2024, 7, 16)) == ["2024-07-15T07:00:00+00:00"]
    assert ticks("0 9 * * *", ZoneInfo("Asia/Shanghai"), utc(2024, 7, 15), utc(2024, 7, 16)) == [
        "2024-07-15T01:00:00+00:00"
    ]


def test_after_and_now_in_other_zones_are_the_same_instants():
    after = utc(2024, 1, 15).astimezone(ZoneInfo("Asia/Tokyo"))
    now = utc(2024, 1, 16).astimezone(ZoneInfo("America/New_York"))
    assert ticks("0 9 * * *", BERLIN, after, now) == ["2024-01-15T08:00:00+00:00"]


def test_spring_forward_a_skipped_time_fires_once_right_after_the_jump():
    """Europe/Berlin, 2024-03-31: clocks go from 02:00 CET to 03:00 CEST, so 02:30 does not exist that day.
    croniter (what the ticker uses) fires a daily 02:30 job at 03:00 CEST (01:00 UTC) instead, once; on the days
    around it, 02:30 local as usual (01:30 UTC in CET, 00:30 UTC in CEST)."""
    assert ticks("30 2 * * *", BERLIN, utc(2024, 3, 30), utc(2024, 4, 1, 12)) == [
        "2024-03-30T01:30:00+00:00",
        "2024-03-31T01:00:00+00:00",
        "2024-04-01T00:30:00+00:00",
    ]


def test_spring_forward_an_interval_schedule_keeps_its_real_interval():
    """Every 30 minutes across the jump: one tick each 30 real minutes, none lost and none doubled (01:00 UTC is
    both 02:00 CET that never happens and 03:00 CEST)."""
    assert ticks("*/30 * * * *", BERLIN, utc(2024, 3, 31, 0, 0), utc(2024, 3, 31, 2, 0)) == [
        "2024-03-31T00:30:00+00:00",
        "2024-03-31T01:00:00+00:00",
        "2024-03-31T01:30:00+00:00",
        "2024-03-31T02:00:00+00:00",
    ]


def test_fall_back_an_interval_schedule_fires_in_both_repeated_hours():
    """Europe/Berlin, 2024-10-27: clocks go from 03:00 CEST back to 02:00 CET, so 02:00-02:59 happens twice.
    croniter fires an every-30-minutes job in both passes: every 30 real minutes, as an interval should."""
    assert ticks("*/30 * * * *", BERLIN, utc(2024, 10, 26, 23, 30), utc(2024, 10, 27, 2, 0)) == [
        "2024-10-27T00:00:00+00:00",  # 02:00 CEST
        "2024-10-27T00:30:00+00:00",  # 02:30 CEST
        "2024-10-27T01:00:00+00:00",  # 02:00 CET
        "2024-10-27T01:30:00+00:00",  # 02:30 CET
        "2024-10-27T02:00:00+00:00",  # 03:00 CET
    ]


def test_croniter_itself_gives_a_daily_time_in_the_repeated_hour_twice():
    """What croniter does: a daily 02:30 job at 02:30 CEST and again at 02:30 CET (00:30 and 01:30 UTC) on
    2024-10-27; due_ticks leaves the second one out (below)."""
    it = croniter("30 2 * * *", utc(2024, 10, 26, 12).astimezone(BERLIN))
    got = [it.get_next(dt.datetime).astimezone(dt.UTC).isoformat() for _ in range(2)]
    assert got == ["2024-10-27T00:30:00+00:00", "2024-10-27T01:30:00+00:00"]


def test_fall_back_a_daily_time_in_the_repeated_hour_fires_once():
    assert ticks("30 2 * * *", BERLIN, utc(2024, 10, 26, 12), utc(2024, 10, 27, 12)) == ["2024-10-27T00:30:00+00:00"]


def test_fall_back_the_repeat_is_left_out_in_a_later_evaluation_too():
    """The ticker evaluates from the schedule's last claimed tick: starting at the first 02:30, the second is not
    due either."""
    assert ticks("30 2 * * *", BERLIN, utc(2024, 10, 27, 0, 30), utc(2024, 10, 27, 12)) == []


def test_due_ticks_is_bounded_per_evaluation():
    """An every-second schedule over a whole day yields at most MAX_TICKS_PER_EVALUATION ticks, the oldest."""
    found = list(due_ticks("* * * * * *", ZoneInfo("UTC"), utc(2024, 1, 1), utc(2024, 1, 2)))
    assert MAX_TICKS_PER_EVALUATION == 120
    assert len(found) == MAX_TICKS_PER_EVALUATION
    assert found[0] == utc(2024, 1, 1, 0, 0, 1) and found[-1] == utc(2024, 1, 1, 0, 2, 0)


def test_due_ticks_below_the_bound_are_all_given():
    assert len(list(due_ticks("* * * * * *", ZoneInfo("UTC"), utc(2024, 1, 1), utc(2024, 1, 1, 0, 1)))) == 60
    assert len(list(due_ticks("* * * * *", ZoneInfo("UTC"), utc(2024, 1, 1), utc(2024, 1, 1, 2)))) == 120


def test_due_ticks_is_lazy():
    """A generator: a caller that stops early does not make croniter compute the rest."""
    iterator = due_ticks("* * * * * *", ZoneInfo("UTC"), utc(2024, 1, 1), utc(2030, 1, 1))
    assert next(iterator) == utc(2024, 1, 1, 0, 0, 1)


# latest_tick / next_tick -----------------------------------------------------------------------------------------


def test_latest_tick_at_or_before_now():
    zone = ZoneInfo("UTC")
    assert latest_tick("*/5 * * * *", zone, utc(2024, 1, 1, 0, 12)) == utc(2024, 1, 1, 0, 10)
    assert latest_tick("*/5 * * * *", zone, utc(2024, 1, 1, 0, 10)) == utc(2024, 1, 1, 0, 10)  # at: included
    assert latest_tick("*/5 * * * *", zone, utc(2024, 1, 1, 0, 9, 59, 999999)) == utc(2024, 1, 1, 0, 5)
    assert latest_tick("* * * * * */2", zone, utc(2024, 1, 1, 0, 0, 7)) == utc(2024, 1, 1, 0, 0, 6)


def test_latest_tick_in_a_zone_and_across_dst():
    assert latest_tick("0 9 * * *", BERLIN, utc(2024, 7, 15, 12)) == utc(2024, 7, 15, 7)
    assert latest_tick("30 2 * * *", BERLIN, utc(2024, 3, 31, 12)) == utc(2024, 3, 31, 1)  # 03:00 CEST, see above
    assert latest_tick("30 2 * * *", BERLIN, utc(2024, 10, 27, 12)) == utc(2024, 10, 27, 1, 30)  # 02:30 CET


def test_latest_tick_is_utc():
    assert latest_tick("0 9 * * *", BERLIN, utc(2024, 7, 15, 12)).tzinfo is UTC


def test_next_tick():
    assert next_tick("0 9 * * *", BERLIN, utc(2024, 1, 15, 7, 59)) == utc(2024, 1, 15, 8)
    assert next_tick("0 9 * * *", BERLIN, utc(2024, 1, 15, 8)) == utc(2024, 1, 16, 8)  # strictly after
    assert next_tick("0 0 29 2 *", ZoneInfo("UTC"), utc(2025, 1, 1)) == utc(2028, 2, 29)
