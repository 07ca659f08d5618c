"""A job its dependencies hold out of the plan is estimated to start at the latest expected end of
what it waits for, and a job held back for want of a room (an array's task by its throttle, a job
by a cluster's driver cap) as its rooms come free: table-driven over the ends the forecast and the running jobs give."""

from datetime import UTC, datetime, timedelta

import pytest

from job.core.estimates import Room, Rooms, RunTimes, WaitingOn, after_ends, room_ends

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


def minutes(stored) -> dict[str, float]:
    return {job: (estimate.start - NOW) / timedelta(minutes=1) for job, estimate in stored.items()}


@pytest.mark.parametrize(("holding", "waiting", "expected"), [
    # Two rooms, freed at 10 and 20 minutes; each waiting task runs 5 minutes.
    ({"r1": NOW + timedelta(minutes=10), "r2": NOW + timedelta(minutes=20)}, ["w1", "w2", "w3"],
     {"w1": 10, "w2": 15, "w3": 20}),
    # A room whose end is not known never comes free.
    ({"r1": NOW + timedelta(minutes=10), "r2": None}, ["w1", "w2", "w3"], {"w1": 10, "w2": 15, "w3": 20}),
    ({"r1": None, "r2": None}, ["w1"], {}),
    # Three hold a room of two (a cap lowered since): the first comes free when two have ended.
    ({"r1": NOW + timedelta(minutes=10), "r2": NOW + timedelta(minutes=20), "r3": NOW + timedelta(minutes=30)},
     ["w1", "w2"], {"w1": 20, "w2": 25}),
    ({"r1": NOW + timedelta(minutes=10), "r2": None, "r3": None}, ["w1"], {}),
])
def test_the_jobs_waiting_for_a_room_take_it_as_it_comes_free(holding, waiting, expected):
    rooms = Rooms({"array 7": Room(2, list(holding), "when a task of array 7 should end (its throttle)")},
                  [(job, ["array 7"], held()) for job in waiting])
    stored = room_ends(rooms, dict(holding), KNOWN)
    assert minutes(stored) == expected
    assert all(estimate.position is None and estimate.basis == "when a task of array 7 should end (its throttle)"
               for estimate in stored.values())


def test_a_job_that_may_take_several_rooms_takes_the_first_to_come_free():
    ends = {"e1": NOW + timedelta(minutes=30), "w1": NOW + timedelta(minutes=10)}
    rooms = Rooms({"east": Room(1, ["e1"], "east"), "west": Room(1, ["w1"], "west")},
                  [("a", ["east"], held()), ("b", ["east", "west"], held()), ("c", ["east", "west"], held()),
                   ("d", ["west"], held(runtime=None)), ("e", ["west"], held())])
    stored = room_ends(rooms, ends, KNOWN)
    # a: east's only room; b: west's, sooner; c: west's again after b's 5 minutes; d: west's after
    # c, of unknown run time, so that e finds no room coming free.
    assert minutes(stored) == {"a": 30, "b": 10, "c": 15, "d": 20}
    assert [stored[job].basis for job in "abcd"] == ["east", "west", "west", "west"]
    assert ends["c"] == NOW + timedelta(minutes=20) and "d" not in ends
