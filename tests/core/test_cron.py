"""The cron parser and a schedule's slots: table-driven cases (names, steps, lists, the day fields'
OR, DST's skipped and repeated hours, refusals) and properties: the next slot is after now,
matches, and none is skipped on the way."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job.core.cron import Every, latest, parse_cron, parse_timezone


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), [
    ("* * * * *", "UTC", "2026-05-04T10:00:00Z", "2026-05-04T10:01:00Z"),
    ("* * * * *", "UTC", "2026-05-04T10:00:30Z", "2026-05-04T10:01:00Z"),
    ("*/15 * * * *", "UTC", "2026-05-04T10:16:00Z", "2026-05-04T10:30:00Z"),
    ("5,35 9-17/4 * * *", "UTC", "2026-05-04T13:36:00Z", "2026-05-04T17:05:00Z"),
    ("0 0 * * mon-fri", "UTC", "2026-05-08T12:00:00Z", "2026-05-11T00:00:00Z"),  # Friday: next Monday
    ("0 0 * * 7", "UTC", "2026-05-04T00:00:00Z", "2026-05-10T00:00:00Z"),  # 7 is Sunday
    ("0 12 1 jan,jul *", "UTC", "2026-02-01T00:00:00Z", "2026-07-01T12:00:00Z"),
    ("30 8 10/10 * *", "UTC", "2026-05-21T00:00:00Z", "2026-05-30T08:30:00Z"),  # a/n: from a to the end
    ("0 0 13 * fri", "UTC", "2026-05-04T00:00:00Z", "2026-05-08T00:00:00Z"),  # both restricted: either
    ("0 0 */10 * fri", "UTC", "2026-05-04T00:00:00Z", "2026-07-31T00:00:00Z"),  # `*`-led: both
    ("0 0 29 2 *", "UTC", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"),
    ("@daily", "UTC", "2026-05-04T10:00:00Z", "2026-05-05T00:00:00Z"),
    ("@hourly", "UTC", "2026-05-04T10:00:00Z", "2026-05-04T11:00:00Z"),
    ("0 9 * * *", "Asia/Tokyo", "2026-05-04T00:00:00Z", "2026-05-05T00:00:00Z"),
    # Spring forward in Paris (02:00 CET -> 03:00 CEST): 02:30 does not exist and runs at 03:30 CEST.
    ("30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z", "2026-03-29T01:30:00Z"),
    ("0 3 * * *", "Europe/Paris", "2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z"),
    # Fall back (03:00 CEST -> 02:00 CET): 02:30 occurs twice and runs once, at the first.
    ("30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z"),
    ("30 2 * * *", "Europe/Paris", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"),
    ("0 * * * *", "Europe/Paris", "2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z"),
])
def test_next_slot(expression, zone, after, expected):
    assert parse_cron(expression, zone).next_after(at(after)) == at(expected)


@pytest.mark.parametrize(("expression", "zone", "refusal"), [
    ("* * *", "UTC", "give 5 fields"),
    ("60 * * * *", "UTC", "minute: '60' is not 0..59"),
    ("* 24 * * *", "UTC", "hour: '24' is not 0..23"),
    ("* * 0 * *", "UTC", "day of month: '0' is not 1..31"),
    ("* * * 13 *", "UTC", "month: '13' is not 1..12 or jan..dec"),
    ("* * * * 8", "UTC", "day of week: '8' is not 0..7 or sun..sat"),
    ("* * * * funday", "UTC", "day of week: 'funday'"),
    ("*/0 * * * *", "UTC", "minute: a step must be 1 to 60"),
    ("5-1 * * * *", "UTC", "a range that ends before it starts"),
    ("1,,2 * * * *", "UTC", "minute: '' is not a value"),
    ("0 0 30 2 *", "UTC", "never runs"),
    ("* * * * *", "Mars/Olympus", "'Mars/Olympus' is not a time zone"),
    ("* * * * *", "../etc/passwd", "is not a time zone"),
])
def test_refusals_name_the_field(expression, zone, refusal):
    with pytest.raises(ValueError, match=None) as raised:
        parse_cron(expression, zone)
    assert refusal in str(raised.value)


def test_latest_is_the_one_slot_a_downtime_leaves():
    minutely = parse_cron("* * * * *")
    assert latest(minutely, at("2026-01-01T00:00:00Z"), at("2026-02-01T00:00:30Z")) == at("2026-02-01T00:00:00Z")
    assert latest(minutely, at("2026-02-01T00:00:00Z"), at("2026-02-01T00:00:30Z")) is None
    yearly = parse_cron("0 0 1 1 *")
    assert latest(yearly, at("2025-06-01T00:00:00Z"), at("2027-06-01T00:00:00Z")) == at("2027-01-01T00:00:00Z")
    assert latest(yearly, at("2027-01-01T00:00:00Z"), at("2027-06-01T00:00:00Z")) is None
    every = Every(10.0, at("2026-01-01T00:00:00Z"))
    assert latest(every, every.start, at("2026-01-01T00:00:05Z")) is None
    assert latest(every, every.start, at("2026-01-01T00:01:05Z")) == at("2026-01-01T00:01:00Z")
    assert every.next_after(at("2026-01-01T00:01:00Z")) == at("2026-01-01T00:01:10Z")


def _field(low: int, high: int):
    """A field's text and the values it allows (for checking the parser against itself)."""
    star = st.just(("*", set(range(low, high + 1))))
    step = st.integers(1, high - low + 1).map(lambda n: (f"*/{n}", set(range(low, high + 1, n))))
    values = st.sets(st.integers(low, high), min_size=1, max_size=4).map(
        lambda chosen: (",".join(map(str, sorted(chosen))), chosen))
    return st.one_of(star, step, values)


instants = st.datetimes(datetime(2020, 1, 1), datetime(2035, 1, 1)).map(lambda moment: moment.replace(tzinfo=UTC))


@settings(max_examples=200, deadline=None)
@given(minute=_field(0, 59), hour=_field(0, 23), weekday=_field(0, 6), now=instants)
def test_the_next_utc_slot_is_after_now_matches_and_skips_none(minute, hour, weekday, now):
    cron = parse_cron(f"{minute[0]} {hour[0]} * * {weekday[0]}")
    slot = cron.next_after(now)
    assert slot > now
    assert slot.minute in minute[1] and slot.hour in hour[1] and slot.isoweekday() % 7 in weekday[1]
    assert slot.second == 0 and slot.microsecond == 0
    # No slot between: any moment in [now, slot) has the same next slot.
    assert cron.next_after(slot - timedelta(seconds=1)) == slot
    assert cron.next_after(now + (slot - now) / 2) == slot


@settings(max_examples=200, deadline=None)
@given(minute=_field(0, 59), hour=_field(0, 23), zone=st.sampled_from(["Europe/Paris", "America/New_York",
                                                                         "Australia/Lord_Howe", "Asia/Kolkata"]),
       now=instants)
def test_the_next_slot_in_a_zone_is_after_now_and_its_wall_clock_matches(minute, hour, zone, now):
    cron = parse_cron(f"{minute[0]} {hour[0]} * * *", zone)
    slot = cron.next_after(now)
    assert slot > now
    local = slot.astimezone(parse_timezone(zone))
    # A slot's wall clock matches, but for a skipped local time, run after the change: then the time
    # an offset earlier does.
    shifted = (local - (local.utcoffset() - (slot - timedelta(hours=3)).astimezone(local.tzinfo).utcoffset()))
    assert (local.minute in minute[1] and local.hour in hour[1]) or (
        shifted.minute in minute[1] and shifted.hour in hour[1])
    later = latest(cron, now, slot)
    assert later == slot
