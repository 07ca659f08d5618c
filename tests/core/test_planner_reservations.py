"""Reservations for the head of the line and backfill (docs/planner.md, "Reservations and
backfill"): where the first job in line reserves, who may use the room it holds, when a
reservation ends, how it meets preemption; and the issue's starving workload in simulation."""

from __future__ import annotations

import math
from contextlib import contextmanager
from datetime import timedelta
from unittest.mock import patch

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job.core.planner import Snapshot, plan
from job.core.planner.reservations import may_backfill
from job.core.planner.snapshot import Group, Node, Pending, started
from job.core.simulate import engine
from job.core.simulate.engine import EPOCH, simulate
from job.core.simulate.metrics import summarise, windows
from job.core.simulate.trace import TraceJob
from tests.core.planner_helpers import NOW, at

BIG = {"CPU": 8}


def running(ident, node, cpu, ends_in=None, **extra):
    """A running job on `node`, expected to end `ends_in` minutes from now (None: not known)."""
    job = {"id": ident, "user": "small", "node": node, "resources": {"CPU": cpu}, "started_at": at(-1), **extra}
    if ends_in is not None:
        job["expected_end"] = at(ends_in)
    return job


def pending(ident, user, cpu, waited=10, max_runtime=None, **extra):
    job = {"id": ident, "user": user, "resources": {"CPU": cpu}, "submitted_at": at(-waited), **extra}
    if max_runtime is not None:
        job["max_runtime_s"] = max_runtime * 60
    return job


def document(nodes, running_jobs=(), pending_jobs=(), reservations=(), **group):
    return {"group": {"name": "g", "policy": "fifo", "selector": "dispersed", **group}, "now": NOW.isoformat(),
            "nodes": [{"id": ident, "resources": resources, "labels": labels} for ident, (resources, labels) in
                      ((ident, spec if isinstance(spec, tuple) else (spec, {})) for ident, spec in nodes.items())],
            "running": list(running_jobs), "pending": list(pending_jobs), "reservations": list(reservations)}


def run(doc) -> dict:
    return plan(Snapshot.model_validate(doc)).document()


def waiting(result) -> dict[str, tuple[str, str]]:
    return {w["job"]: (w["reason"], w["message"]) for w in result["waiting"]}


TWO = {"n-1": {"CPU": 8}, "n-3": {"CPU": 8}}


@pytest.mark.parametrize("name, nodes, running_jobs, job, node, message", [
    ("the node whose jobs end soonest", TWO,
     [running("a", "n-1", 8, 30), running("12", "n-3", 4, 10), running("15", "n-3", 4, 20)], pending("7", "big", 8),
     "n-3", "reserved node n-3; expected to start about 08:20 UTC, when jobs 12 and 15 end"),
    ("a node whose free room already covers part of it needs fewer ends", TWO,
     [running("a", "n-1", 8, 7), running("b", "n-3", 4, 6)], pending("7", "big", 8),
     "n-3", "reserved node n-3; expected to start about 08:06 UTC, when job b ends"),
    ("an end not known comes last", TWO,
     [running("a", "n-1", 8), running("b", "n-3", 8, 45)], pending("7", "big", 8),
     "n-3", "reserved node n-3; expected to start about 08:45 UTC, when job b ends"),
    ("no end known: the node with the fewest jobs in the way, its start not known", TWO,
     [running("a", "n-1", 4), running("b", "n-1", 4), running("c", "n-3", 8)], pending("7", "big", 8),
     "n-3", "reserved node n-3; to start once job c ends, at a time not known (no max runtime)"),
    ("only the nodes carrying its labels", {"n-1": {"CPU": 8}, "n-3": ({"CPU": 8}, {"pool": "x"})},
     [running("a", "n-1", 8, 1), running("b", "n-3", 8, 50)], pending("7", "big", 8, node_labels={"pool": "x"}),
     "n-3", "reserved node n-3; expected to start about 08:50 UTC, when job b ends"),
])
def test_the_head_of_the_line_reserves_where_it_fits_soonest(name, nodes, running_jobs, job, node, message):
    result = run(document(nodes, running_jobs, [job]))
    assert result["reservations"][0]["job"] == "7" and result["reservations"][0]["node"] == node, name
    assert waiting(result)["7"] == ("Resources", message)


def test_a_gang_reserves_the_nodes_of_its_bundles():
    nodes = {"n-1": {"CPU": 4}, "n-2": {"CPU": 4}, "n-3": {"CPU": 4}}
    jobs = [running("a", "n-1", 4, 30), running("b", "n-2", 4, 5), running("c", "n-3", 4, 10)]
    gang = {"id": "7", "user": "big", "resources": {}, "bundles": [{"CPU": 4}, {"CPU": 4}],
            "bundle_strategy": "STRICT_SPREAD", "submitted_at": at(-10)}
    result = run(document(nodes, jobs, [gang]))
    reservation = result["reservations"][0]
    assert sorted(reservation["bundle_nodes"]) == ["n-2", "n-3"] and reservation["kind"] == "head"
    assert waiting(result)["7"][1].startswith("reserved nodes n-")
    assert "when jobs b and c end" in waiting(result)["7"][1]


@pytest.mark.parametrize("name, waited, group, reserved", [
    ("waited past reserve_after", 10, {}, True),
    ("not yet", 4, {}, False),
    ("a group's own reserve_after", 4, {"reserve_after_s": 120}, True),
    ("max_reservations 0 turns it off", 10, {"max_reservations": 0}, False),
])
def test_only_a_job_that_waited_past_reserve_after_reserves(name, waited, group, reserved):
    result = run(document(TWO, [running("a", "n-1", 8, 5), running("b", "n-3", 8, 9)], [pending("7", "big", 8, waited)],
                          **group))
    assert bool(result.get("reservations")) == reserved, name


def test_only_the_first_in_line_reserves_and_at_most_max_reservations():
    jobs = [running("a", "n-1", 8, 5), running("b", "n-3", 8, 9)]
    two = [pending("7", "big", 8, 20), pending("8", "big", 8, 10)]
    assert [r["job"] for r in run(document(TWO, jobs, two))["reservations"]] == ["7"]
    classes = {"priority_classes": [{"name": "high", "value": 1}, {"name": "default", "value": 0}]}
    by_class = [pending("7", "big", 8, 20, **{"class": "high"}), pending("8", "big", 8, 10)]
    assert [r["job"] for r in run(document(TWO, jobs, by_class, max_reservations=2, **classes))["reservations"]] == ["7", "8"]
    assert [r["job"] for r in run(document(TWO, jobs, by_class, **classes))["reservations"]] == ["7"]


HELD = [{"job": "7", "node": "n-3", "kind": "head"}]
# n-3 has CPU 2 free now; the job holding it needs 8, and b frees 6 in 20 minutes.
BUSY = [running("a", "n-1", 8), running("b", "n-3", 6, 20)]


@pytest.mark.parametrize("name, job, reason, node", [
    ("ends before the start: backfilled", pending("9", "small", 2, 1, max_runtime=15), None, "n-3"),
    ("would end after the start", pending("9", "small", 2, 1, max_runtime=30), "Reserved", None),
    ("its end is not known", pending("9", "small", 2, 1), "Reserved", None),
    ("too big for the room either way", pending("9", "small", 4, 1, max_runtime=5), "Resources", None),
])
def test_backfill_may_use_the_held_room_only_if_it_ends_before_the_start(name, job, reason, node):
    result = run(document(TWO, BUSY, [pending("7", "big", 8, 20), job], HELD))
    placed = {p["job"]: p["node"] for p in result["placements"]}
    assert placed.get("9") == node, name
    if reason is not None:
        assert waiting(result)["9"][0] == reason
    if reason == "Reserved":
        assert waiting(result)["9"][1] == "would delay job 7's reservation on n-3"
    assert waiting(result)["7"][0] == "Resources"


def gang(ident, bundles, strategy, max_runtime=None, driver=None):
    job = {"id": ident, "user": "small", "resources": driver or {}, "bundles": bundles, "bundle_strategy": strategy,
           "submitted_at": at(-1)}
    if max_runtime is not None:
        job["max_runtime_s"] = max_runtime * 60
    return job


# n-1 has CPU 1 free; n-3 CPU 2, which job 7's reservation holds.
ONE_FREE = [running("a", "n-1", 7), running("b", "n-3", 6, 20)]


@pytest.mark.parametrize("name, running_jobs, job, reason, placement", [
    ("ends before the start: backfilled", BUSY, gang("9", [{"CPU": 1}] * 2, "STRICT_PACK", 15), None,
     # Its driver asks for nothing: the first node takes it.
     {"job": "9", "node": "n-1", "bundle_nodes": ["n-3", "n-3"]}),
    ("on free room and held room at once", ONE_FREE, gang("9", [{"CPU": 1}] * 2, "STRICT_SPREAD", 15, {"CPU": 1}), None,
     {"job": "9", "node": "n-3", "bundle_nodes": ["n-1", "n-3"]}),
    ("would end after the start", BUSY, gang("9", [{"CPU": 1}] * 2, "STRICT_PACK", 30), "Reserved", None),
    ("its end is not known", ONE_FREE, gang("9", [{"CPU": 1}] * 2, "STRICT_SPREAD"), "Reserved", None),
    ("too big for the room either way", BUSY, gang("9", [{"CPU": 2}] * 2, "PACK", 5), "Resources", None),
])
def test_a_gang_backfills_under_the_same_rule(name, running_jobs, job, reason, placement):
    result = run(document(TWO, running_jobs, [pending("7", "big", 8, 20), job], HELD))
    placed = [p for p in result["placements"] if p["job"] == "9"]
    assert placed == ([placement] if placement else []), name
    if reason is not None:
        assert waiting(result)["9"][0] == reason, name
    if reason == "Reserved":
        assert waiting(result)["9"][1] == "would delay job 7's reservation on n-3"
    assert waiting(result)["7"][0] == "Resources"
    assert result["reservations"] == [{"job": "7", "node": "n-3", "kind": "head", "expected_start": at(20)}]


def test_room_the_start_will_not_need_stays_free_for_anyone():
    nodes = {"n-1": {"CPU": 8}, "n-3": {"CPU": 12}}
    result = run(document(nodes, [running("a", "n-1", 8), running("b", "n-3", 8, 20)],
                          [pending("7", "big", 8, 20), pending("9", "small", 4, 1)], HELD))
    assert {p["job"]: p["node"] for p in result["placements"]} == {"9": "n-3"}


@pytest.mark.parametrize("name, pending_jobs, nodes, expected", [
    ("it starts: the reservation ends", [pending("7", "big", 8, 20)], TWO, []),
    ("its job is no longer pending", [pending("9", "small", 1)], {"n-1": {"CPU": 8}}, []),
    ("its node is gone", [pending("7", "big", 8, 20)], {"n-1": {"CPU": 4}}, []),
])
def test_a_reservation_ends(name, pending_jobs, nodes, expected):
    result = run(document(nodes, [], pending_jobs, HELD))
    assert [r["job"] for r in result.get("reservations", [])] == expected, name


def test_a_reservation_is_kept_and_judged_again_while_its_job_waits():
    result = run(document(TWO, BUSY, [pending("7", "big", 8, 20)], HELD))
    assert result["reservations"] == [{"job": "7", "node": "n-3", "kind": "head", "expected_start": at(20)}]
    assert run(document(TWO, BUSY, [pending("7", "big", 8, 20)], HELD, max_reservations=0)).get("reservations") == []


def test_preemption_comes_first_and_its_reservation_is_the_same_list():
    classes = {"priority_classes": [{"name": "high", "value": 1}, {"name": "low", "value": 0}], "default_class": "low",
               "preemption": "priority", "min_runtime_s": 0}
    jobs = [running("a", "n-1", 8, 30, **{"class": "low"}), running("b", "n-3", 8, 10, **{"class": "low"})]
    result = run(document(TWO, jobs, [pending("7", "big", 8, 20, **{"class": "high"}), pending("8", "big", 8, 20)], **classes))
    assert result["preemptions"][0]["job"] == "7"
    kinds = {r["job"]: r.get("kind", "preemption") for r in result["reservations"]}
    assert kinds == {"7": "preemption", "8": "head"}
    # The head's reservation keeps off the node the preemption holds.
    assert {r["job"]: r["node"] for r in result["reservations"]}["8"] != result["preemptions"][0]["node"]


def test_snapshot_fields_are_checked():
    bad = document(TWO, [], [pending("7", "big", 8, max_runtime=0)])
    with pytest.raises(ValueError, match="max_runtime_s"):
        Snapshot.model_validate(bad)
    with pytest.raises(ValueError, match="kind"):
        Snapshot.model_validate(document(TWO, [], [], [{"job": "7", "node": "n-3", "kind": "other"}]))


# The issue's workload: user small submits a 1-CPU 10-minute job every 20 s for 6 hours (max
# runtime 15 minutes), user big one 8-CPU job of an hour at 10 minutes, on two 8-CPU nodes.
def starving_trace(hours: float = 6) -> list[TraceJob]:
    jobs = [TraceJob.at(str(n + 1), "small", n * 20.0, {"CPU": 1}, 600.0, max_runtime_s=900.0)
            for n in range(int(hours * 3600 / 20))]
    return [*jobs, TraceJob.at("big", "big", 600.0, BIG, 3600.0, max_runtime_s=7200.0)]


NODES = [Node(id="n-1", resources={"CPU": 8}), Node(id="n-2", resources={"CPU": 8})]


def test_the_big_job_starts_within_20_minutes_and_the_cpus_stay_busy():
    outcome = simulate(starving_trace(), NODES, Group(policy="fairshare", selector="dispersed", half_life_s=3600))
    big = next(record for record in outcome.records if record.job.id == "big")
    assert big.start_s - big.submit_s <= 20 * 60
    assert summarise(outcome, windows(outcome, 3600))["utilization"]["CPU"] >= 0.9
    starved = simulate(starving_trace(), NODES, Group(policy="fairshare", selector="dispersed", half_life_s=3600,
                                                      max_reservations=0))
    assert next(r for r in starved.records if r.job.id == "big").start_s > 5 * 3600


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1200), st.integers(1, 4), st.integers(1, 20)), min_size=1, max_size=25),
       st.integers(0, 900))
def test_the_first_in_line_waits_no_longer_than_reserve_after_and_the_runs_in_its_way(smalls, big_at):
    """With reservations on, the big job, first in line under fifo once it is the oldest, starts at
    the latest reserve_after after it became first in line plus the longest run (max runtime) of
    the jobs running then, and a tick."""
    jobs = [TraceJob.at(str(n), "small", float(at_s), {"CPU": cpu}, minutes * 60.0, max_runtime_s=minutes * 60.0)
            for n, (at_s, cpu, minutes) in enumerate(smalls)]
    jobs.append(TraceJob.at("big", "big", float(big_at), BIG, 600.0, max_runtime_s=600.0))
    group = Group(policy="fifo", selector="dispersed", reserve_after_s=300)
    outcome = simulate(jobs, NODES, group)
    big = next(record for record in outcome.records if record.job.id == "big")
    # First in line once every job submitted before it has started.
    ahead = [r.start_s for r in outcome.records if r.submit_s < big_at and r.start_s is not None]
    first_s = max([big_at, *ahead])
    longest = max((j.pending.max_runtime_s for j in jobs if j.id != "big"), default=0)
    assert big.start_s is not None and not math.isinf(big.start_s)
    assert big.start_s - first_s <= group.reserve_after_s + longest + 2 * 5.0


def test_a_gang_starts_on_the_nodes_it_reserved_once_they_have_room():
    nodes = {"n-1": {"CPU": 4}, "n-2": {"CPU": 4}, "n-3": {"CPU": 4}}
    gang = {"id": "7", "user": "big", "resources": {"CPU": 1}, "bundles": [{"CPU": 4}, {"CPU": 3}],
            "bundle_strategy": "STRICT_SPREAD", "submitted_at": at(-10)}
    held = [{"job": "7", "node": "n-3", "kind": "head", "bundle_nodes": ["n-2", "n-3"]}]
    result = run(document(nodes, [running("a", "n-1", 1, 30)], [gang, pending("9", "small", 1, 1)], held))
    assert result["placements"][0] == {"job": "7", "node": "n-3", "bundle_nodes": ["n-2", "n-3"]}
    assert {p["job"]: p["node"] for p in result["placements"]}["9"] == "n-1"
    assert result["reservations"] == []


@contextmanager
def head_reservations():
    """The head-of-line reservations the simulation's plans make, as they are first made: job id ->
    (the plan's time in seconds, its nodes)."""
    made: dict[str, tuple[float, set[str]]] = {}
    real = engine.plan

    def recording(snapshot, carried=None, worded=True):
        result = real(snapshot, carried, worded)
        for held in result.reservations or ():
            if held.get("kind") == "head" and held["job"] not in made:
                made[held["job"]] = ((snapshot.now - EPOCH).total_seconds(), {held["node"], *held.get("bundle_nodes", ())})
        return result

    with patch.object(engine, "plan", recording):
        yield made


SIZES = [Node(id="n-1", resources={"CPU": 8}), Node(id="n-2", resources={"CPU": 4}), Node(id="n-3", resources={"CPU": 6})]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 900), st.sampled_from(["a", "b", "c"]), st.integers(1, 8), st.integers(1, 15),
                          st.integers(0, 5)), min_size=1, max_size=30),
       st.sampled_from([0, 60, 300]), st.sampled_from([1, 5]))
def test_no_job_first_in_line_waits_past_reserve_after_and_the_longest_expected_run_on_its_reserved_nodes(
        rows, reserve_after_s, every_s):
    """The issue's property: with reservations on, a job first in line (fifo: every job submitted
    before it has started) reserves once it has waited reserve_after (a plan later if the job
    reserving before it starts in that plan), and starts at the latest when the jobs then running
    on its reserved nodes are expected to end (their max runtimes; they may end sooner), a tick
    after each step."""
    jobs = [TraceJob.at(str(n), user, float(at_s), {"CPU": cpu}, max(minutes * 60.0 - short * 50.0, 1.0),
                     max_runtime_s=minutes * 60.0) for n, (at_s, user, cpu, minutes, short) in enumerate(rows)]
    group = Group(policy="fifo", selector="dispersed", reserve_after_s=reserve_after_s)
    with head_reservations() as made:
        outcome = simulate(jobs, SIZES, group, every_s=every_s)
    records = {record.job.id: record for record in outcome.records}
    assert all(record.start_s is not None for record in records.values())
    for record in records.values():
        job = record.job
        ahead = [other.start_s for other in records.values()
                 if (other.submit_s, int(other.job.id)) < (record.submit_s, int(job.id))]
        first_s = max([record.submit_s, *ahead])
        due_s = max(first_s, record.submit_s + reserve_after_s) + every_s
        if record.start_s <= due_s:
            continue
        assert job.id in made, (job.id, record.start_s, due_s)
        reserved_s, nodes = made[job.id]
        assert reserved_s <= due_s
        remaining = [other.start_s + other.job.pending.max_runtime_s - reserved_s for other in records.values()
                     if other.node in nodes and other.start_s <= reserved_s < other.end_s]
        assert record.start_s <= reserved_s + max(remaining, default=0.0) + every_s, (job.id, reserved_s, nodes)


def test_in_simulation_the_wait_reserve_after_counts_begins_at_a_job_s_not_before():
    # big may start at 600 s; r holds half the node until 1000 s. s (no max runtime) comes at
    # 700 s: big has waited 100 s for resources, not 300, so s takes the free half, and big then
    # reserves behind it. Counted from its submission, big would have reserved at 600 s and kept
    # s off until big had run.
    jobs = [TraceJob.at("r", "a", 0.0, {"CPU": 4}, 1000.0, max_runtime_s=1000.0),
            TraceJob.at("big", "b", 0.0, BIG, 100.0, not_before=EPOCH + timedelta(seconds=600)),
            TraceJob.at("s", "a", 700.0, {"CPU": 4}, 2000.0)]
    outcome = simulate(jobs, NODES[:1], Group(policy="fifo", selector="dispersed", reserve_after_s=300))
    starts = {record.job.id: record.start_s for record in outcome.records}
    assert starts == {"r": 0.0, "s": 700.0, "big": 2700.0}


@pytest.mark.parametrize("started_at, max_runtime_s, expected_end", [
    (None, 60.0, None),
    (NOW, None, None),
    (NOW, 90.0, NOW + timedelta(seconds=90)),
])
def test_a_started_job_ends_at_its_max_runtime_where_both_are_known(started_at, max_runtime_s, expected_end):
    """What a reservation counts on of a job a plan placed: the simulation's and the driver caps'
    running jobs are made the same way."""
    job = Pending(id="7", user="ann", resources={"CPU": 1.0}, max_runtime_s=max_runtime_s,
                  bundles=[{"GPU": 1.0}], bundle_strategy="SPREAD")
    running = started(job, "n1", ["n2"], started_at, default_class="low")
    assert (running.expected_end, running.started_at) == (expected_end, started_at)
    assert (running.node, running.bundle_nodes) == ("n1", ["n2"])
    assert (running.bundles, running.bundle_strategy) == ([{"GPU": 1.0}], "SPREAD")
    assert running.priority_class == "low"
    assert started(msgspec.structs.replace(job, priority_class="high"), "n1").priority_class == "high"
    assert may_backfill(job) is (max_runtime_s is not None)
