"""Queue policies, table-driven: which job goes first."""

from __future__ import annotations

import math

import pytest
from planner_helpers import at, run, snapshot

from job.core.usage import charge_usage

ONE_NODE = {"n1": {"CPU": 2}}

# (name, policy, pending, users, running, expected placements in order)
CASES = [
    ("fifo oldest first", "fifo",
     [("1", "a", {"CPU": 1}, {"submitted_at": at(-1)}), ("2", "a", {"CPU": 1}, {"submitted_at": at(-3)}),
      ("3", "b", {"CPU": 1}, {"submitted_at": at(-2)})],
     {}, [], ["2", "3"]),
    ("fifo higher priority first", "fifo",
     [("1", "a", {"CPU": 1}, {"submitted_at": at(-3)}), ("2", "a", {"CPU": 1}, {"submitted_at": at(-1), "priority": 5}),
      ("3", "a", {"CPU": 1}, {"submitted_at": at(-2)})],
     {}, [], ["2", "1"]),
    ("fifo list order without submitted_at", "fifo",
     [("9", "a", {"CPU": 1}), ("1", "a", {"CPU": 1}), ("5", "a", {"CPU": 1})], {}, [], ["9", "1"]),
    ("fifo ties on time by id, numerically", "fifo",
     [("10", "a", {"CPU": 1}, {"submitted_at": at(-1)}), ("9", "a", {"CPU": 1}, {"submitted_at": at(-1)}),
      ("11", "a", {"CPU": 1}, {"submitted_at": at(-1)})],
     {}, [], ["9", "10"]),
    ("lifo newest first", "lifo",
     [("1", "a", {"CPU": 1}, {"submitted_at": at(-1)}), ("2", "a", {"CPU": 1}, {"submitted_at": at(-3)}),
      ("3", "b", {"CPU": 1}, {"submitted_at": at(-2)})],
     {}, [], ["1", "3"]),
    ("lifo higher priority still first", "lifo",
     [("1", "a", {"CPU": 1}, {"submitted_at": at(-1)}), ("2", "a", {"CPU": 1}, {"submitted_at": at(-3), "priority": 1}),
      ("3", "a", {"CPU": 1}, {"submitted_at": at(-2), "priority": 1})],
     {}, [], ["3", "2"]),
    ("lifo ties on time by id, highest first", "lifo",
     [("9", "a", {"CPU": 1}, {"submitted_at": at(-1)}), ("10", "a", {"CPU": 1}, {"submitted_at": at(-1)}),
      ("8", "a", {"CPU": 1}, {"submitted_at": at(-1)})],
     {}, [], ["10", "9"]),
    ("drf lowest dominant share first", "drf",
     [("a1", "a", {"CPU": 1}), ("b1", "b", {"CPU": 1}), ("b2", "b", {"CPU": 1})],
     {}, [("r", "a", "n1", {"CPU": 0})], ["a1", "b1"]),
    ("drf counts running jobs", "drf",
     [("a1", "a", {"CPU": 1}), ("b1", "b", {"CPU": 1})],
     {}, [("r", "a", "gone", {"CPU": 1})], ["b1", "a1"]),
    ("drf alternates as picks raise shares", "drf",
     [("a1", "a", {"CPU": 0.5}), ("a2", "a", {"CPU": 0.5}), ("b1", "b", {"CPU": 0.5}), ("b2", "b", {"CPU": 0.5})],
     {}, [], ["a1", "b1", "a2", "b2"]),
    ("drf divides by shares", "drf",
     [("a1", "a", {"CPU": 0.5}), ("a2", "a", {"CPU": 0.5}), ("a3", "a", {"CPU": 0.5}), ("b1", "b", {"CPU": 0.5})],
     {"a": {"shares": 3}}, [], ["a1", "b1", "a2", "a3"]),
    ("drf ties by user name", "drf",
     [("b1", "bob", {"CPU": 1}), ("a1", "al", {"CPU": 1})], {}, [], ["a1", "b1"]),
    ("drf within a user: priority then age", "drf",
     [("1", "a", {"CPU": 1}, {"submitted_at": at(-9)}), ("2", "a", {"CPU": 1}, {"submitted_at": at(-1), "priority": 1}),
      ("3", "a", {"CPU": 1}, {"submitted_at": at(-5)})],
     {}, [], ["2", "1"]),
    ("fairshare: recent usage waits", "fairshare",
     [("a1", "a", {"CPU": 1}), ("b1", "b", {"CPU": 1}), ("c1", "c", {"CPU": 1})],
     {"a": {"usage": 1000}, "b": {"usage": 10}}, [], ["c1", "b1"]),
    ("fairshare: current share counts too", "fairshare",
     [("a1", "a", {"CPU": 1}), ("b1", "b", {"CPU": 1})],
     {"a": {"usage": 0}, "b": {"usage": 1000}}, [("r", "a", "gone", {"CPU": 2})], ["b1", "a1"]),
    ("fairshare: shares divide usage too", "fairshare",
     [("a1", "a", {"CPU": 1}), ("b1", "b", {"CPU": 1})],
     {"a": {"usage": 1000, "shares": 4}, "b": {"usage": 600}}, [], ["a1", "b1"]),
]


@pytest.mark.parametrize("policy, pending, users, running, expected", [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_policy_order(policy, pending, users, running, expected):
    placements, waiting, _ = run(snapshot(policy, "legacy", nodes=ONE_NODE, pending=pending, users=users, running=running,
                                          half_life_s=3600))
    assert [job for job, _ in placements] == expected
    assert set(waiting) == {job[0] for job in pending} - set(expected)


def test_fairshare_with_half_life_zero_forgets_usage():
    document = snapshot("fairshare", "legacy", nodes={"n1": {"CPU": 1}},
                        pending=[("a1", "a", {"CPU": 1}), ("b1", "b", {"CPU": 1})],
                        users={"a": {"usage": 1e9}}, half_life_s=0)
    assert run(document)[0] == [("a1", "n1")]


# (usage, dominant share, elapsed, half life, expected)
USAGE = [
    ("half life 0 keeps nothing", 50.0, 1.0, 60.0, 0.0, 0.0),
    ("one half life halves", 100.0, 0.0, 60.0, 60.0, 50.0),
    ("two half lives quarter", 100.0, 0.0, 120.0, 60.0, 25.0),
    ("no time, no change", 7.0, 1.0, 0.0, 60.0, 7.0),
    ("clocks going back charge nothing", 7.0, 1.0, -5.0, 60.0, 7.0),
    ("share held for ever tends to D·H/ln 2", 0.0, 0.5, 1e9, 60.0, 0.5 * 60 / math.log(2)),
    ("short tick charges about D·Δ", 0.0, 0.25, 1.0, 3600.0, 0.25 * 1.0),
]


@pytest.mark.parametrize("usage, share, elapsed, half_life, expected", [u[1:] for u in USAGE], ids=[u[0] for u in USAGE])
def test_charge_usage(usage, share, elapsed, half_life, expected):
    assert charge_usage(usage, share, elapsed, half_life) == pytest.approx(expected, rel=1e-4, abs=1e-12)


def test_charging_in_steps_equals_charging_at_once():
    once = charge_usage(10.0, 0.3, 90.0, 60.0)
    stepped = 10.0
    for _ in range(9):
        stepped = charge_usage(stepped, 0.3, 10.0, 60.0)
    assert stepped == pytest.approx(once, rel=1e-12)
