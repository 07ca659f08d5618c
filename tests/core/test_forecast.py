"""The forecast: the first jobs in line, their position and when they start, from a snapshot and
the expected ends and run times; exact where every run time is known."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import chain, islice

import pytest

from job.core.forecast import Estimate, among, forecast
from job.core.planner import Snapshot, plan
from job.core.simulate.engine import RunningAtStart, Start, simulate
from job.core.simulate.trace import TraceJob
from job.core.units import MAX_DURATION_S

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def at(seconds: float | None) -> datetime | None:
    return None if seconds is None else NOW + timedelta(seconds=seconds)


def snapshot(policy="fifo", nodes=(("n1", 4),), running=(), pending=(), **group) -> Snapshot:
    return Snapshot.model_validate({
        "group": {"policy": policy, "selector": "dispersed", **group},
        "now": NOW,
        "nodes": [{"id": ident, "resources": {"CPU": cpu}} for ident, cpu in nodes],
        "running": [{"id": ident, "user": user, "node": node, "resources": {"CPU": cpu}, "started_at": at(-60)}
                    for ident, user, node, cpu in running],
        "pending": [{"id": ident, "user": user, "resources": {"CPU": cpu}, "submitted_at": at(submitted), **extra}
                    for ident, user, cpu, submitted, extra in pending],
    })


CASES = {
    "an empty node: everything that fits starts now, the rest as the first end": (
        snapshot(pending=[("p1", "a", 2, -30, {}), ("p2", "b", 2, -20, {}), ("p3", "a", 4, -10, {})]),
        {}, {"p1": 100, "p2": 40, "p3": 10},
        10, [("p1", 1, 0), ("p2", 2, 0), ("p3", 3, 100)]),
    "the running job's end on the tick grid: a job that ends at 12 s frees its node at the 15 s tick": (
        snapshot(running=[("r1", "a", "n1", 4)], pending=[("p1", "b", 4, -5, {})]),
        {"r1": at(12)}, {"p1": 30},
        10, [("p1", 1, 15)]),
    "an unknown run time: what waits for it has no estimate, what does not, has one": (
        snapshot(running=[("r1", "a", "n1", 4)],
                 pending=[("p1", "b", 2, -30, {}), ("p2", "c", 4, -20, {}), ("p3", "c", 2, -10, {})]),
        {"r1": at(100)}, {"p1": 60, "p2": 300, "p3": None},
        10, [("p1", 1, 100), ("p2", 2, None), ("p3", 3, 100)]),
    "a running job of unknown end holds its node for good": (
        snapshot(nodes=[("n1", 4), ("n2", 2)], running=[("r1", "a", "n1", 4)],
                 pending=[("p1", "b", 4, -30, {}), ("p2", "b", 2, -20, {})]),
        {}, {"p1": 60, "p2": 60},
        10, [("p2", 1, 0), ("p1", 2, None)]),
    "not_before: planned from that time on": (
        snapshot(pending=[("p1", "a", 4, -30, {"not_before": at(30)}), ("p2", "b", 2, -10, {})]),
        {}, {"p1": 10, "p2": 10},
        10, [("p2", 1, 0), ("p1", 2, 30)]),
    "drf: the plan's order is by dominant share, and so are the starts": (
        snapshot(policy="drf", nodes=[("n1", 2)],
                 pending=[("a1", "a", 1, -30, {}), ("a2", "a", 1, -29, {}), ("a3", "a", 1, -28, {}), ("b1", "b", 1, -10, {})]),
        {}, {"a1": 20, "a2": 20, "a3": 20, "b1": 20},
        10, [("a1", 1, 0), ("b1", 2, 0), ("a2", 3, 20), ("a3", 4, 20)]),
    "first: only the head of the line": (
        snapshot(pending=[(f"p{n}", "a", 4, n - 10, {}) for n in range(5)]),
        {}, {f"p{n}": 10 for n in range(5)},
        2, [("p0", 1, 0), ("p1", 2, 10)]),
}


@pytest.mark.parametrize("shot, ends, runs, first, expected", CASES.values(), ids=CASES.keys())
def test_forecast(shot, ends, runs, first, expected):
    assert forecast(shot, ends, runs, first=first) == [Estimate(job, position, at(start)) for job, position, start in expected]


@pytest.mark.parametrize("shot, ends, runs, first, expected", CASES.values(), ids=CASES.keys())
def test_a_head_carried_as_picked_out_by_the_caller_is_forecast_alike(shot, ends, runs, first, expected):
    """As the tick's estimates carry it: the head of the line, picked out of the pending jobs once."""
    order = plan(shot)
    head = {entry["job"] for entry in islice(chain(order.placements, order.waiting), first)}
    carried = list(among(shot.pending, head))
    assert (forecast(shot, ends, runs, first=first, carried=first, order=order, carried_jobs=carried)
            == forecast(shot, ends, runs, first=first, carried=first, order=order)
            == [Estimate(job, position, at(start)) for job, position, start in expected])


def test_preemption_is_forecast_too():
    # b's high-class job preempts a's running one: it stops at the 5 s tick, b's starts there.
    classes = [{"name": "high", "value": 10, "preemptible": False}, {"name": "low", "value": 0, "preemptible": True}]
    shot = Snapshot.model_validate({
        "group": {"policy": "drf", "selector": "dispersed", "preemption": "priority", "min_runtime_s": 0,
                  "priority_classes": classes, "default_class": "low"},
        "now": NOW, "nodes": [{"id": "n1", "resources": {"CPU": 4}}],
        "running": [{"id": "r1", "user": "a", "node": "n1", "resources": {"CPU": 4}, "started_at": at(-60)}],
        "pending": [{"id": "p1", "user": "b", "resources": {"CPU": 4}, "submitted_at": at(-1), "class": "high"}],
    })
    assert forecast(shot, {"r1": at(1000)}, {"p1": 50}) == [Estimate("p1", 1, at(5))]


def test_a_start_past_the_last_time_planned_for_is_not_given():
    # A line of jobs of the longest max runtime (100 years) each: the 11th would start past 3000
    # (the 80th past what a datetime holds), and is given no time.
    shot = snapshot(pending=[(f"p{i}", "a", 4, -100 + i, {}) for i in range(100)])
    found = forecast(shot, {}, {f"p{i}": MAX_DURATION_S for i in range(100)}, first=100)
    assert [estimate.start for estimate in found[:10]] == [at(i * MAX_DURATION_S) for i in range(10)]
    assert all(estimate.start is None and estimate.later for estimate in found[10:])


def test_a_snapshot_without_now_is_refused():
    shot = Snapshot.model_validate({"group": {"policy": "fifo", "selector": "dispersed"}})
    with pytest.raises(ValueError, match="now"):
        forecast(shot, {}, {})


def test_the_forecast_keeps_a_reservation_for_the_head_of_the_line():
    # big (4 CPUs) is first in line and waited past reserve_after; r1 ends at 100 s. small's job
    # of unknown max runtime would take the room r2 frees at 10 s and delay big: it keeps off n1.
    shot = snapshot(running=[("r1", "a", "n1", 2), ("r2", "a", "n1", 2)],
                    pending=[("big", "b", 4, -600, {}), ("small", "a", 2, -10, {})])
    ends = {"r1": at(100), "r2": at(10)}
    assert forecast(shot, ends, {"big": 50, "small": 50}) == [Estimate("big", 1, at(100)), Estimate("small", 2, at(150))]
    without = snapshot(running=[("r1", "a", "n1", 2), ("r2", "a", "n1", 2)],
                       pending=[("big", "b", 4, -600, {}), ("small", "a", 2, -10, {})], max_reservations=0)
    assert forecast(without, ends, {"big": 50, "small": 50})[1] == Estimate("small", 2, at(10))


def test_the_forecast_keeps_a_stored_reservation_on_its_node():
    # n1 frees at 100 s, n2 at 300 s: big holds n2 (a reservation of an earlier tick) and starts there.
    shot = snapshot(nodes=[("n1", 4), ("n2", 4)], running=[("r1", "a", "n1", 4), ("r2", "a", "n2", 4)],
                    pending=[("big", "b", 4, -600, {"waiting_since": at(-600)})])
    shot.reservations = [{"job": "big", "node": "n2", "kind": "head"}]
    assert forecast(shot, {"r1": at(100), "r2": at(300)}, {"big": 50}) == [Estimate("big", 1, at(300))]
    shot.reservations = []
    assert forecast(shot, {"r1": at(100), "r2": at(300)}, {"big": 50}) == [Estimate("big", 1, at(100))]


def test_the_forecast_counts_a_job_s_wait_from_its_waiting_since():
    # big was submitted an hour ago but began waiting for resources just now (requeued): it has
    # not waited reserve_after, so small takes the room r2 frees at 10 s, and big starts when
    # both r1 and small have ended.
    shot = snapshot(running=[("r1", "a", "n1", 2), ("r2", "a", "n1", 2)],
                    pending=[("big", "b", 4, -3600, {"waiting_since": NOW}), ("small", "a", 2, -10, {})])
    assert forecast(shot, {"r1": at(100), "r2": at(10)}, {"big": 50, "small": 50}) == [
        Estimate("big", 1, at(100)), Estimate("small", 2, at(10))]
def gang_snapshot(pending: list[dict]) -> Snapshot:
    """Two nodes of 4 CPUs; r1's driver (CPU 1) on n1, its bundle of CPU 4 on n2, until 100 s."""
    return Snapshot.model_validate({
        "group": {"policy": "fifo", "selector": "dispersed", "max_reservations": 0}, "now": NOW,
        "nodes": [{"id": "n1", "resources": {"CPU": 4}}, {"id": "n2", "resources": {"CPU": 4}}],
        "running": [{"id": "r1", "user": "a", "node": "n1", "resources": {"CPU": 1}, "started_at": at(-60),
                     "bundles": [{"CPU": 4}], "bundle_strategy": "PACK", "bundle_nodes": ["n2"]}],
        "pending": [{"user": "b", "submitted_at": at(n - 10), **job} for n, job in enumerate(pending)]})


GANG_CASES = {
    # Only its driver held, n2 would look empty and p1 start at once.
    "a running gang holds its bundle's node: a job of a whole node starts as it ends": (
        [{"id": "p1", "resources": {"CPU": 4}}], {"p1": 10}, [("p1", 1, 100)]),
    "beside a running gang, what its nodes have left is free: a job of CPU 3 starts on n1 now": (
        [{"id": "p1", "resources": {"CPU": 3}}], {"p1": 10}, [("p1", 1, 0)]),
    # Its driver alone would fit n1's CPU 3 now: its two bundles on separate nodes wait for n2.
    "a pending gang is placed whole: STRICT_SPREAD waits for a second node": (
        [{"id": "p1", "resources": {"CPU": 0}, "bundles": [{"CPU": 3}, {"CPU": 3}], "bundle_strategy": "STRICT_SPREAD"}],
        {"p1": 10}, [("p1", 1, 100)]),
    "a gang placed in the forecast holds its whole footprint: the job after it waits for its end": (
        [{"id": "p1", "resources": {"CPU": 0}, "bundles": [{"CPU": 3}, {"CPU": 3}], "bundle_strategy": "STRICT_SPREAD"},
         {"id": "p2", "resources": {"CPU": 4}}],
        {"p1": 50, "p2": 10}, [("p1", 1, 100), ("p2", 2, 150)]),
}


@pytest.mark.parametrize("pending, runs, expected", GANG_CASES.values(), ids=GANG_CASES.keys())
def test_the_forecast_counts_gangs_whole(pending, runs, expected):
    shot = gang_snapshot(pending)
    assert forecast(shot, {"r1": at(100)}, runs) == [Estimate(job, position, at(start)) for job, position, start in expected]



@pytest.mark.parametrize("end_s, preemption, plans, start_s", [
    # Nothing is to end: past reserve_after (240 s on), big could only reserve; no second plan.
    (None, "off", 1, None),
    # r1 ends at 900 s: plans at 0, at 240 s (big reserves n1), at 245 s, and at 900 s, where it starts.
    (900.0, "off", 4, 900.0),
    # Under preemption, time alone may make r1 a victim: every tick is planned, 0 to 240 s.
    (None, "fairshare", 49, None),
])
def test_the_simulation_ends_when_no_job_can_start_again(end_s, preemption, plans, start_s):
    """A forecast's simulation stops once no job can start again: over 10,000 nodes where nothing
    is to end, a plan saved per tick (engine._upcoming)."""
    shot = snapshot(running=[("r1", "a", "n1", 4)], pending=[("big", "b", 4, -60, {})], preemption=preemption,
                    min_runtime_s=0)
    outcome = simulate([TraceJob(shot.pending[0], 50.0)], shot.nodes, shot.group,
                       start=Start(epoch=NOW, running=[RunningAtStart(shot.running[0], end_s)]))
    big = next(record for record in outcome.records if record.job.id == "big")
    assert (outcome.plans, big.start_s) == (plans, start_s)
