"""Memory sizes, amounts, durations and times as people type them, each either storable or
refused with one line; and the one way amounts and durations are shown."""

from __future__ import annotations

import math
import re
import sys
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job.cli.output import format_resources
from job.core.errors import quoted
from job.core.units import (
    LATEST_TIME,
    MAX_AMOUNT,
    MAX_DURATION_S,
    format_duration,
    parse_amount,
    parse_duration,
    parse_memory,
    parse_time,
)

KIB, MIB, GIB, TIB, PIB = 2**10, 2**20, 2**30, 2**40, 2**50


@pytest.mark.parametrize("text, size", [
    ("512MiB", 512 * MIB),
    ("4GiB", 4 * GIB),
    ("4 GiB", 4 * GIB),
    ("  4GiB ", 4 * GIB),
    ("4gib", 4 * GIB),
    ("4GIB", 4 * GIB),
    ("2G", 2 * 10**9),
    ("2GB", 2 * 10**9),
    ("2gb", 2 * 10**9),
    ("3k", 3000),
    ("1.5Gi", 3 * GIB // 2),  # Kubernetes' suffixes
    ("1Ki", KIB),
    ("1Mi", MIB),
    ("2Ti", 2 * TIB),
    ("1Pi", PIB),
    ("1PB", 10**15),
    ("2.01KB", 2010),  # exact: not 2009, as a truncated float product would give
    ("1.1MB", 1_100_000),
    ("0.5KiB", 512),
    ("100B", 100),
    ("100 b", 100),
    ("1024", 1024),
    ("0", 0),
    (1024, 1024),
    (0, 0),
    (2.0, 2),
    (1e12, 10**12),
    (4 * GIB, 4 * GIB),
])
def test_accepted_sizes(text, size):
    parsed = parse_memory(text)
    assert parsed == size and type(parsed) is int


@pytest.mark.parametrize("text, message", [
    ("4 gigs", "not a memory size: '4 gigs'"),
    ("", "not a memory size"),
    ("GiB", "not a memory size"),
    ("-1", "not a memory size"),
    ("-1GiB", "not a memory size"),
    ("5.GiB", "not a memory size"),
    (".5GiB", "not a memory size"),
    ("4 G B", "not a memory size"),
    ("1e3", "not a memory size"),
    ("inf", "not a memory size"),
    ("2EiB", "not a memory size"),
    ("1Gbit", "not a memory size"),
    ("4GiB extra", "not a memory size"),
    (True, "not a memory size"),
    (None, "not a memory size"),
    (-1, "memory must be finite and not negative, got -1"),
    (-0.5, "memory must be finite and not negative"),
    (float("inf"), "memory must be finite and not negative, got inf"),
    (float("nan"), "memory must be finite and not negative"),
    (10**400, "memory must be finite and not negative"),
    ("9" * 400 + "PiB", "memory must be finite and not negative"),
    ("1.5B", "memory must be a whole number of bytes, got '1.5B'"),
    ("1.5", "memory must be a whole number of bytes"),
    ("0.1KiB", "memory must be a whole number of bytes"),
    ("1.0000001KiB", "memory must be a whole number of bytes"),
    (1.5, "memory must be a whole number of bytes, got 1.5"),
])
def test_refused_sizes(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_memory(text)


@pytest.mark.parametrize("resources, text", [
    (None, "-"),
    ({}, "-"),
    ({"CPU": 2, "memory": 4 * GIB, "special": 0.5}, "CPU=2,memory=4 GiB,special=0.5"),
    ({"CPU": 2.0, "GPU": 0.0001, "memory": 1.5 * GIB}, "CPU=2,GPU=0.0001,memory=1.5 GiB"),
    ({"memory": 512}, "memory=512 B"),
    ({"tokens": 1_000_000}, "tokens=1000000"),
])
def test_format_resources_shows_amounts_as_messages_do(resources, text):
    assert format_resources(resources) == text


@pytest.mark.parametrize("seconds, parts, text", [
    (0, 4, "0s"),
    (45, 4, "45s"),
    (0.5, 4, "0.5s"),
    (245, 4, "4m5s"),
    (600, 4, "10m"),
    (3600 + 5, 4, "1h5s"),
    (86400 + 3 * 3600 + 25 * 60 + 7, 4, "1d3h25m7s"),
    (5400 + 45, 2, "1h30m"),
    (3900, 2, "1h5m"),
    (86400 + 7, 2, "1d7s"),
])
def test_format_duration(seconds, parts, text):
    assert format_duration(seconds, parts) == text


@pytest.mark.parametrize("seconds", [0, 1, 59, 60, 61, 3599, 3600, 86399, 86400, 10 * 86400 + 1])
def test_a_duration_shown_reads_back(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


HUGE = 10**3999  # 4,000 digits: more than a float holds, fewer than int() refuses to read


@pytest.mark.parametrize("parse, text, message", [
    (parse_time, "9999-12-31T23:59:59-14:00", "'9999-12-31T23:59:59-14:00' is out of range: give a time in year 1 to 2999"),
    # Before year 1 in UTC: the message named only the upper bound.
    (parse_time, "0001-01-01T00:00:00+14:00", "is out of range: give a time in year 1 to 2999 in UTC"),
    (parse_time, "3000-01-01T00:00:00Z", "is out of range"),
    (parse_time, datetime(9999, 12, 31, tzinfo=timezone(-timedelta(hours=14))), "is out of range"),
    (parse_time, "2026-11-29T08:00:00\x00", "not a time: '2026-11-29T08:00:00\\x00'"),
    (parse_time, "9" * 4000, "not a time: '99999999"),
    (parse_duration, "9" * 4000, "a duration must be at most 100 years (3153600000 s), got '999999"),
    (parse_duration, HUGE, "a duration must be at most 100 years"),
    (parse_duration, 10**5000, "got a number too long to show"),  # more digits than Python writes
    (parse_duration, "1000000000w", "a duration must be at most 100 years"),
    (parse_duration, 1e308, "a duration must be at most 100 years"),
    (parse_duration, math.inf, "a duration must be at most 100 years (3153600000 s), got inf"),
    (parse_duration, math.nan, "a duration must be a number and not negative, got nan"),
    (parse_duration, -0.0, "a duration must be a number and not negative, got -0.0"),
    (parse_duration, "-0", "not a duration: '-0'"),
    (parse_amount, "9" * 4000, "at most 922337203685477 (the most Ray can count), got inf"),
    (parse_amount, HUGE, "at most 922337203685477"),
    (parse_amount, "1e400", "at most 922337203685477"),
    (parse_amount, "nan", "must be finite and not negative, got 'nan'"),
    (parse_amount, -0.0, "must be finite and not negative, got -0.0"),
    (parse_amount, "-0", "must be finite and not negative, got '-0'"),
    (parse_amount, True, "not a number: True"),
    (parse_amount, [1], "not a number: [1]"),
    (parse_memory, "9" * 5000, "memory must be finite and not negative, got '9999"),  # more digits than int() reads
], ids=lambda value: value.__name__ if callable(value) else quoted(value, 30))
def test_out_of_range_is_refused_in_one_short_line(parse, text, message):
    with pytest.raises(ValueError) as refused:
        parse(text)
    assert message in str(refused.value) and "\n" not in str(refused.value) and len(str(refused.value)) < 200


@pytest.mark.parametrize("parse, text, value", [
    (parse_time, "2999-12-31T23:59:59+14:00", datetime(2999, 12, 31, 9, 59, 59, tzinfo=UTC)),
    (parse_time, "0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=UTC)),
    (parse_duration, "5214w", 5214 * 604800.0),
    (parse_duration, MAX_DURATION_S, MAX_DURATION_S),
    (parse_amount, MAX_AMOUNT, float(MAX_AMOUNT)),
    (parse_amount, "0", 0.0),
])
def test_the_edges_of_the_ranges_are_taken(parse, text, value):
    assert parse(text) == value


numbers = st.one_of(st.integers(), st.builds(lambda digits: 10**digits, st.integers(0, 4299)), st.floats())
number_texts = st.from_regex(r"\A[ +-]?[0-9]{0,40}(\.[0-9]{0,5})?(e[+-]?[0-9]{1,4})?( ?[a-zA-Z]{0,3})*\s?\Z")
times = st.builds(lambda moment, offset: moment.isoformat() + offset, st.datetimes(),
                  st.sampled_from(["", "Z", "+14:00", "-14:00", "+23:59", "-00:30"]))
anything = st.one_of(st.text(), number_texts, numbers, times, st.builds(str, numbers),
                     st.builds(lambda n: "9" * n, st.integers(4000, 5000)))


@settings(max_examples=1500)
@given(text=anything)
def test_any_amount_duration_or_time_is_storable_or_refused(text):
    """Whatever a submitter sends, each parse either returns what PostgreSQL stores and the tick can
    add to, or refuses it (ValueError, named by the caller): never another exception."""
    for parse, storable in ((parse_amount, lambda v: 0 <= v <= MAX_AMOUNT and math.copysign(1, v) > 0),
                            (parse_memory, lambda v: type(v) is int and 0 <= v <= sys.float_info.max),
                            (parse_duration, lambda v: 0 <= v <= MAX_DURATION_S and math.copysign(1, v) > 0),
                            (parse_time, lambda v: v.utcoffset() == timedelta(0) and v < LATEST_TIME
                             and v + timedelta(seconds=MAX_DURATION_S) < datetime.max.replace(tzinfo=UTC))):
        try:
            value = parse(text)
        except ValueError as refused:
            assert "\n" not in str(refused) and len(str(refused)) < 200, (parse.__name__, text)
            continue
        assert storable(value), (parse.__name__, text, value)
