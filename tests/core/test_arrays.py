"""Array specs in Slurm's syntax, read or refused in one line, shown back as the shortest spec; and
the throttle the tick applies before the planner."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from job.core.arrays import MAX_INDEX, MAX_TASKS, ArraySpec, describe, parse_array, throttle
from job.core.errors import BadInput


@pytest.mark.parametrize("text, indexes, limit", [
    ("0-3", (0, 1, 2, 3), None),
    ("1,3,5", (1, 3, 5), None),
    ("0-9:2", (0, 2, 4, 6, 8), None),
    ("0-9:4", (0, 4, 8), None),
    ("7", (7,), None),
    ("0-3%2", (0, 1, 2, 3), 2),
    ("1-3,10,20-24:2%1", (1, 2, 3, 10, 20, 22, 24), 1),
    (" 5,1 , 3 ", (1, 3, 5), None),  # sorted, spaces around items let be
    ("2,2,1-2", (1, 2), None),  # each index once
    (f"{MAX_INDEX}", (MAX_INDEX,), None),
    (f"0-{MAX_TASKS - 1}%{MAX_TASKS}", tuple(range(MAX_TASKS)), MAX_TASKS),
    ("0-999900:100", tuple(range(0, 999_901, 100)), None),  # 10,000 indexes
])
def test_parse(text, indexes, limit):
    assert parse_array(text) == ArraySpec(indexes, limit)


@pytest.mark.parametrize("text, says", [
    ("", "'' is not an index or a range"),
    ("a-b", "'a-b' is not an index or a range"),
    ("-1", "'-1' is not an index or a range"),
    ("1-", "'1-' is not an index or a range"),
    ("1,,2", "'' is not an index or a range"),
    ("0-9:", "'0-9:' is not an index or a range"),
    ("5:2", "'5:2' is not an index or a range"),
    ("+3", "'+3' is not an index or a range"),
    ("٣", "'٣' is not an index or a range"),  # a digit of another script
    ("9-3", "a range goes up"),
    ("0-9:0", "a step goes from 1 to 1000000"),
    ("5-5:1000001", "a step goes from 1 to 1000000"),
    ("5-5:99999999999", "a step goes from 1 to 1000000"),
    ("1000001", "indexes go from 0 to 1000000"),
    ("0-99999999", "'0-99999999': indexes go from 0 to 1000000"),
    ("9" * 5000, "indexes go from 0 to 1000000"),
    ("0-10000", "at most 10000 tasks an array, '0-10000' alone makes 10001"),
    ("0-1000000", "alone makes 1000001"),
    ("0-1000000:100", "alone makes 10001"),
    ("0-9999,10000", "at most 10000 tasks an array, got more"),
    ("0-9%0", "'0' after '%' is not a throttle"),
    ("0-9%", "'' after '%' is not a throttle"),
    ("0-9%10001", "'10001' after '%' is not a throttle"),
    ("0-9%2%3", "'2%3' after '%' is not a throttle"),
    ("1" * 100_001, "at most 100000 characters"),
    (12, "12 is not an array spec"),
])
def test_refused_in_one_line(text, says):
    with pytest.raises(BadInput) as raised:
        parse_array(text)
    message = str(raised.value)
    assert message.startswith("array: ") and says in message and "\n" not in message and len(message) < 200


@pytest.mark.parametrize("indexes, limit, text", [
    ((0,), None, "0"),
    (range(100), 10, "0-99%10"),
    (range(0, 100, 2), None, "0-98:2"),
    ((1, 3), None, "1,3"),
    ((1, 2), None, "1-2"),
    ((1, 3, 5, 6, 7), None, "1-5:2,6-7"),
    ((1, 2, 3, 10, 20, 22, 24), 1, "1-3,10,20-24:2%1"),
])
def test_describe(indexes, limit, text):
    assert describe(indexes, limit) == text


@given(st.sets(st.integers(0, MAX_INDEX), min_size=1, max_size=200), st.none() | st.integers(1, MAX_TASKS))
def test_describe_reads_back(indexes, limit):
    spec = ArraySpec(tuple(sorted(indexes)), limit)
    assert parse_array(str(spec)) == spec


@given(st.text(max_size=40))
def test_any_text_is_read_or_refused(text):
    try:
        spec = parse_array(text)
    except BadInput as exc:
        assert str(exc).startswith("array: ") and "\n" not in str(exc)
    else:
        assert 0 < len(spec.indexes) <= MAX_TASKS and all(0 <= i <= MAX_INDEX for i in spec.indexes)


class Row(NamedTuple):
    id: int
    user_name: str
    array_id: int | None = None
    array_throttle: int | None = None


class Running(NamedTuple):
    user_name: str
    array_id: int | None = None


@pytest.mark.parametrize("pending, active, planned, message", [
    # Nothing throttled: the rows as they came, the very list.
    ([Row(1, "u"), Row(2, "u", 2)], [], [1, 2], None),
    # 0-5%2 with none running: its first two tasks, about to run; the others wait.
    ([Row(i, "u", 1, 2) for i in range(1, 7)], [], [1, 2], "array 1 runs 2 of at most 2"),
    # One running: one more.
    ([Row(i, "u", 1, 2) for i in range(2, 7)], [Running("u", 1)], [2], "array 1 runs 2 of at most 2"),
    # More running than its throttle (a row changed by hand): none more.
    ([Row(4, "u", 1, 1)], [Running("u", 1), Running("u", 1)], [], "array 1 runs 2 of at most 1"),
    # At its throttle: none; another array and a lone job go on.
    ([Row(3, "u", 1, 2), Row(9, "u"), Row(10, "u", 10, 1)], [Running("u", 1), Running("u", 1)], [9, 10],
     "array 1 runs 2 of at most 2"),
    # Another user's rows naming the array count for their own user only.
    ([Row(3, "u", 1, 1), Row(4, "v", 1, 1)], [Running("v", 1)], [3], "array 1 runs 1 of at most 1"),
])
def test_throttle(pending, active, planned, message):
    result = throttle(pending, active)
    assert [row.id for row in result.planned] == planned
    held = [row.id for row in pending if row.id not in planned]
    assert [int(record["job"]) for record in result.waiting] == held
    assert all(record["reason"] == "ArrayThrottle" and record["message"] == message for record in result.waiting)
    assert result.said == ([("ArrayThrottle", message, result.waiting)] if held else [])
    if message is None:
        assert result.planned is pending


@given(st.lists(st.tuples(st.sampled_from(["u", "v"]), st.integers(1, 3), st.none() | st.integers(1, 4)), max_size=30),
       st.lists(st.tuples(st.sampled_from(["u", "v"]), st.integers(1, 3)), max_size=10))
def test_throttle_never_exceeded(rows, running):
    pending = [Row(i, user, array, limit) for i, (user, array, limit) in enumerate(rows)]
    active = [Running(user, array) for user, array in running]
    given_rows = throttle(pending, active).planned
    for row in pending:
        if row.array_throttle is None:
            continue
        key = (row.user_name, row.array_id)
        limit = {(r.user_name, r.array_id): r.array_throttle for r in pending if r.array_throttle is not None}[key]
        now = sum(1 for job in active if (job.user_name, job.array_id) == key)
        planned = sum(1 for r in given_rows if (r.user_name, r.array_id) == key)
        # Were every task given placed, the array would run no more than its throttle (or as many as already ran).
        assert now + planned <= max(limit, now)
