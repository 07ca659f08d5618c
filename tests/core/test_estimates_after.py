"""A job its dependencies hold out of the plan is estimated to start at the latest expected end of
what it waits for, and an array's task its throttle holds back as its array's rooms come free:
table-driven over the ends the forecast and the running jobs give."""

from datetime import UTC, datetime, timedelta

import pytest

from job.core.estimates import RunTimes, ThrottledArray, WaitingOn, after_ends, throttled_ends

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
KNOWN = RunTimes([])


def held(*waits_for: str, runtime: float | None = 300.0) -> WaitingOn:
    return WaitingOn(list(waits_for), "alice", {"CPU": 1}, runtime)


@pytest.mark.parametrize(("ends", "jobs", "expected"), [
    # Waits for a running job: starts at its end.
    ({"a": NOW + timedelta(minutes=10)}, {"b": held("a")}, {"b": NOW + timedelta(minutes=10)}),
    # A chain: c follows b's expected end, b's start plus its max runtime.
    ({"a": NOW + timedelta(minutes=10)}, {"c": held("b"), "b": held("a")},
     {"b": NOW + timedelta(minutes=10), "c": NOW + timedelta(minutes=15)}),
    # All must hold: the latest end.
    ({"a": NOW + timedelta(minutes=10), "x": NOW + timedelta(minutes=20)}, {"b": held("a", "x")},
     {"b": NOW + timedelta(minutes=20)}),
    # One end not known (not estimated, or of unknown run time): no estimate, nor for what follows.
    ({"a": NOW + timedelta(minutes=10), "x": None}, {"b": held("a", "x"), "c": held("b")}, {}),
    ({"a": NOW}, {"b": held("a", "elsewhere")}, {}),
    # A held job of unknown run time is estimated, what waits for it is not.
    ({"a": NOW}, {"b": held("a", runtime=None), "c": held("b")}, {"b": NOW}),
])
def test_a_held_job_starts_after_what_it_waits_for(ends, jobs, expected):
    stored = after_ends(jobs, ends, KNOWN)
    assert {job: estimate.start for job, estimate in stored.items()} == expected
    assert all(estimate.position is None and estimate.basis.startswith("after the expected end of job")
               for estimate in stored.values())


@pytest.mark.parametrize(("holding", "waiting", "expected"), [
    # Two rooms, freed at 10 and 20 minutes; each waiting task runs 5 minutes.
    ({"r1": NOW + timedelta(minutes=10), "r2": NOW + timedelta(minutes=20)}, ["w1", "w2", "w3"],
     {"w1": 10, "w2": 15, "w3": 20}),
    # A room whose end is not known never comes free.
    ({"r1": NOW + timedelta(minutes=10), "r2": None}, ["w1", "w2", "w3"], {"w1": 10, "w2": 15, "w3": 20}),
    ({"r1": None, "r2": None}, ["w1"], {}),
])
def test_an_array_s_throttled_tasks_take_the_rooms_as_they_come_free(holding, waiting, expected):
    array = ThrottledArray(7, 2, list(holding), [(job, held()) for job in waiting])
    stored = throttled_ends(array, dict(holding), KNOWN)
    assert {job: (estimate.start - NOW) / timedelta(minutes=1) for job, estimate in stored.items()} == expected
