"""build_snapshot: the planner's snapshot from what a tick read: the outside load of each node (its
total, less what Ray reports free, less what our started jobs hold there), classes, reservations
and victims being stopped. Pure: no database, no Ray."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from msgspec import UNSET
from snapshot_helpers import GIB, GROUP, NOW, Node, job, node

from job.core.estimates import Finished, RunTimes
from job.core.group import GroupConfig
from job.core.group_snapshot import (
    RELEASE_S,
    RELEASING,
    Decisions,
    Held,
    PendingRow,
    build_snapshot,
    releasing,
    reservation_changes,
    running_of,
)
from job.core.job import FIELDS
from job.core.observed import SUPERVISOR_PREFIX, ClusterWork, RunningJob, Work, observe
from job.core.planner import plan
from job.core.resources import Resources


def outside(nodes: list[Node], active: list[dict]) -> dict[str, dict[str, float]]:
    snapshot, _ = build_snapshot(GROUP, NOW, nodes, active, [], [], {})
    return {n.id: n.outside for n in snapshot.nodes}


# (name, nodes, active jobs, expected outside per node)
CASES = [
    ("nothing held: none", [node("a", {"CPU": 4}, {"CPU": 4})], [], {"a": {}}),
    ("what Ray counts used and no job of ours holds", [node("a", {"CPU": 4, "memory": 8 * GIB}, {"CPU": 2, "memory": 7 * GIB})],
     [], {"a": {"CPU": 2, "memory": GIB}}),
    ("a RUNNING job of ours is not outside load", [node("a", {"CPU": 4}, {"CPU": 1})], [job(1, "RUNNING", "a", {"CPU": 2})],
     {"a": {"CPU": 1}}),
    ("a SUBMITTED job is not counted by Ray yet: what is used is outside", [node("a", {"CPU": 4}, {"CPU": 2})],
     [job(1, "SUBMITTED", "a", {"CPU": 2})], {"a": {"CPU": 2}}),
    ("nor a SUBMITTING one", [node("a", {"CPU": 4}, {"CPU": 2})], [job(1, "SUBMITTING", "a", {"CPU": 2})], {"a": {"CPU": 2}}),
    ("a job on another node does not count here", [node("a", {"CPU": 4}, {"CPU": 2}), node("b", {"CPU": 4}, {"CPU": 2})],
     [job(1, "RUNNING", "b", {"CPU": 2})], {"a": {"CPU": 2}, "b": {}}),
    ("several RUNNING jobs add up", [node("a", {"CPU": 4, "GPU": 1}, {"CPU": 0.5, "GPU": 0})],
     [job(1, "RUNNING", "a", {"CPU": 1, "GPU": 1}), job(2, "RUNNING", "a", {"CPU": 1.5})], {"a": {"CPU": 1}}),
    ("free unknown: none", [node("a", {"CPU": 4}, None)], [], {"a": {}}),
    ("never below zero: a started job Ray does not count yet", [node("a", {"CPU": 4}, {"CPU": 4})],
     [job(1, "RUNNING", "a", {"CPU": 2})], {"a": {}}),
    ("never below zero, per resource", [node("a", {"CPU": 4, "memory": 8 * GIB}, {"CPU": 4, "memory": 6 * GIB})],
     [job(1, "RUNNING", "a", {"CPU": 1})], {"a": {"memory": 2 * GIB}}),
    ("never below zero: Ray reports more free than the total", [node("a", {"CPU": 4}, {"CPU": 5})], [], {"a": {}}),
    ("fixed point: float noise in what Ray reports is no load",
     [node("a", {"CPU": 4, "memory": 8 * GIB}, {"CPU": 3.99999999999, "memory": 8 * GIB - 3e-5})],
     [], {"a": {}}),
    ("fixed point: our jobs' amounts as Ray sums them", [node("a", {"CPU": 1}, {"CPU": 1 - (0.1 + 0.2)})],
     [job(1, "RUNNING", "a", {"CPU": 0.1}), job(2, "RUNNING", "a", {"CPU": 0.2})], {"a": {}}),
    ("fixed point: the least amount Ray has is load", [node("a", {"CPU": 4}, {"CPU": 3.9999})], [], {"a": {"CPU": 0.0001}}),
    ("a resource Ray does not report free is taken as free", [node("a", {"CPU": 4, "licence": 2}, {"CPU": 3})], [],
     {"a": {"CPU": 1}}),
]


@pytest.mark.parametrize("nodes, active, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_outside_load(nodes, active, expected):
    assert outside(nodes, active) == expected


def test_outside_load_is_left_out_of_the_snapshot_where_there_is_none():
    snapshot, _ = build_snapshot(GROUP, NOW, [node("a", {"CPU": 4}, {"CPU": 4}), node("b", {"CPU": 4}, None),
                                              node("c", {"CPU": 4}, {"CPU": 1})],
                                 [], [], [], {})
    assert snapshot.model_dump(exclude_unset=True)["nodes"] == [
        {"id": "a", "resources": {"CPU": 4}, "labels": {}},
        {"id": "b", "resources": {"CPU": 4}, "labels": {}},
        {"id": "c", "resources": {"CPU": 4}, "labels": {}, "outside": {"CPU": 3}},
    ]


def test_amounts_in_bytes_are_exact():
    amounts = outside([node("a", {"memory": 64 * GIB}, {"memory": 5 * GIB + 3})], [job(1, "RUNNING", "a", {"memory": GIB})])["a"]
    assert amounts == {"memory": 58 * GIB - 3}


def test_the_plan_keeps_outside_load_free():
    # The cluster: workers a and b with 2 CPUs each; a plain Ray job holds both CPUs of a.
    nodes = [node("a", {"CPU": 2}, {"CPU": 0}), node("b", {"CPU": 2}, {"CPU": 2})]
    pending = [PendingRow(i, "u", '{"CPU": 1}', "{}", 0, NOW, None, None, None) for i in range(1, 5)]
    snapshot, invalid = build_snapshot(GROUP, NOW, nodes, [], pending, [], {})
    decided = plan(snapshot)
    assert invalid == {}
    assert decided.placements == [{"job": "1", "node": "b"}, {"job": "2", "node": "b"}]
    assert {w["job"]: w["message"] for w in decided.waiting} == {
        job: "needs CPU 1; the most free on any node is CPU 0 (work outside the queue holds CPU 2 on node a)"
        for job in ("3", "4")}


# --- Priority classes, reservations and victims being stopped -----------------------------------

CLASSES_GROUP = GroupConfig(**{**GROUP.options(), "priority_classes": [{"name": "low", "value": 0, "preemptible": True},
                                                                       {"name": "high", "value": 10, "preemptible": True}],
                                 "default_class": "low", "preemption": "priority", "start_timeout_s": 300})


def row(ident: int, **fields) -> PendingRow:
    return PendingRow(ident, "u", '{"CPU": 1}', "{}", 0, NOW, None, None, None)._replace(**fields)


def test_a_pending_job_of_a_class_the_group_dropped_is_not_planned_and_says_why():
    snapshot, invalid = build_snapshot(CLASSES_GROUP, NOW, [node("a", {"CPU": 1}, {"CPU": 1})], [],
                                       [row(1, priority_class="high"), row(2, priority_class="gone"), row(3)], [], {})
    assert [job.id for job in snapshot.pending] == ["1", "3"]
    assert snapshot.pending[0].priority_class == "high" and snapshot.pending[1].priority_class is UNSET
    assert invalid == {2: "priority_class: 'gone' is no longer a class of group 'g' (its classes: high, low)"}


def test_a_running_job_of_a_dropped_class_counts_as_of_the_default_one():
    active = [job(1, "RUNNING", "a", {"CPU": 1}, priority_class="gone", started_at=NOW),
              job(2, "SUBMITTED", "a", {"CPU": 1}, priority_class="high")]
    snapshot, _ = build_snapshot(CLASSES_GROUP, NOW, [node("a", {"CPU": 2}, {"CPU": 1})], active, [], [], {})
    assert [(j.id, j.priority_class, j.started_at) for j in snapshot.running] == [("1", UNSET, NOW), ("2", "high", None)]


@pytest.mark.parametrize("fields, stopping", [
    ({}, False),
    ({"cancel_requested_at": NOW}, True),
    ({"preempted_at": NOW}, True),
    ({"reason": "RuntimeLimit"}, True),
    ({"reason": "Starting"}, False),
])
def test_a_job_asked_to_stop_is_never_a_victim_again(fields, stopping):
    active = [job(1, "RUNNING", "a", {"CPU": 1}, **{"started_at": NOW, **fields})]
    snapshot, _ = build_snapshot(CLASSES_GROUP, NOW, [node("a", {"CPU": 2}, {"CPU": 1})], active, [], [], {})
    assert snapshot.running[0].stopping is stopping


@pytest.mark.parametrize("age_s, kept", [(0, True), (299, True), (300, True), (301, False)])
def test_a_reservation_ends_past_the_start_timeout(age_s, kept):
    # Node a's CPU is held by a victim still being stopped.
    victim = job(9, "RUNNING", "a", {"CPU": 1}, started_at=NOW, preempted_at=NOW)
    pending = [row(1, reserved_node="a", reserved_at=NOW - timedelta(seconds=age_s), priority_class="high")]
    snapshot, _ = build_snapshot(CLASSES_GROUP, NOW, [node("a", {"CPU": 1}, {"CPU": 0})], [victim], pending, [], {})
    assert snapshot.reservations == ([{"job": "1", "node": "a", "kind": "preemption"}] if kept else [])
    decided = plan(snapshot)
    assert decided.waiting[0]["reason"] == ("Preempting" if kept else "Resources")
    assert reservation_changes(pending, Decisions.of(decided).reservations) == ({} if kept else {1: None})


def test_reservation_changes_are_only_what_the_plan_changed():
    pending = [row(1, reserved_node="a", reserved_at=NOW), row(2, reserved_node="b", reserved_at=NOW), row(3),
               row(4, reserved_node="a", reserved_bundle_nodes=["a", "b"], reserved_at=NOW),
               row(5, reserved_node="a", reserved_bundle_nodes=["a", "b"], reserved_at=NOW)]
    after = {1: Held("a"), 3: Held("c"), 4: Held("a", bundle_nodes=("a", "b")), 5: Held("a", bundle_nodes=("a", "c"))}
    assert reservation_changes(pending, after) == {2: None, 3: Held("c"), 5: Held("a", bundle_nodes=("a", "c"))}


def test_a_gang_reserving_several_nodes_keeps_them_all_from_one_tick_to_the_next():
    # Tick 1: the STRICT_SPREAD gang stops a victim on each of a and b (both CPU 2).
    gang = {"bundles": '[{"CPU": 2}, {"CPU": 2}]', "bundle_strategy": "STRICT_SPREAD", "resources": "{}",
            "priority_class": "high"}
    nodes = [node("a", {"CPU": 2}, {"CPU": 0}), node("b", {"CPU": 2}, {"CPU": 0})]
    victims = [job(9, "RUNNING", "a", {"CPU": 2}, started_at=NOW - timedelta(hours=1)),
               job(8, "RUNNING", "b", {"CPU": 2}, started_at=NOW - timedelta(hours=1))]
    pending = [row(1, **gang)]
    snapshot, _ = build_snapshot(CLASSES_GROUP, NOW, nodes, victims, pending, [], {})
    held = Decisions.of(plan(snapshot)).reservations
    assert held == {1: Held("a", "preemption", ("a", "b"))}
    assert reservation_changes(pending, held) == {1: Held("a", "preemption", ("a", "b"))}
    # Tick 2, as the store reads it back: the victims stopping, the reservation holds both nodes.
    stopping = [job(9, "RUNNING", "a", {"CPU": 2}, started_at=NOW - timedelta(hours=1), preempted_at=NOW),
                job(8, "RUNNING", "b", {"CPU": 2}, started_at=NOW - timedelta(hours=1), preempted_at=NOW)]
    pending = [row(1, reserved_node="a", reserved_kind="preemption", reserved_bundle_nodes=["a", "b"], reserved_at=NOW, **gang)]
    snapshot, _ = build_snapshot(CLASSES_GROUP, NOW, nodes, stopping, pending, [], {})
    assert snapshot.reservations == [{"job": "1", "node": "a", "kind": "preemption", "bundle_nodes": ["a", "b"]}]
    decided = plan(snapshot)
    assert decided.waiting[0]["reason"] == "Preempting" and not decided.preemptions
    assert reservation_changes(pending, Decisions.of(decided).reservations) == {}


@pytest.mark.parametrize("age_s, outside", [(0, {}), (5, {}), (29, {}), (31, {"CPU": 2})])
def test_a_job_that_ended_is_not_outside_load_while_ray_frees_its_resources(age_s, outside):
    # Ray still counts the ended job's CPU 2 as used on node a; for RELEASE_S they are ours.
    ended_at = NOW - timedelta(seconds=age_s)
    if age_s == 0:
        state, ended = {}, [("a", {"CPU": 2})]
    else:
        until = (ended_at + timedelta(seconds=RELEASE_S)).isoformat()
        state, ended = {RELEASING: {"jobs": [{"node": "a", "resources": {"CPU": 2}, "until": until}]}}, []
    snapshot, _ = build_snapshot(CLASSES_GROUP, NOW, [node("a", {"CPU": 2}, {"CPU": 0})], [], [row(1)], [], state, ended)
    assert snapshot.nodes[0].outside == outside
    # What the next ticks keep: the entries still within RELEASE_S.
    assert len(snapshot.state[RELEASING]["jobs"]) == (0 if outside else 1)
    assert plan(snapshot).placements == ([] if outside else [{"job": "1", "node": "a"}])


def test_releasing_keeps_entries_until_release_s_after_they_ended():
    freeing, document = releasing({}, [("a", {"CPU": 1}), ("b", {"GPU": 1})], NOW)
    assert freeing == [("a", {"CPU": 1}), ("b", {"GPU": 1})]
    later, kept = releasing(document, [("c", {"CPU": 2})], NOW + timedelta(seconds=RELEASE_S - 1))
    assert later == [("a", {"CPU": 1}), ("b", {"GPU": 1}), ("c", {"CPU": 2})]
    assert releasing(kept, [], NOW + timedelta(seconds=RELEASE_S))[0] == [("c", {"CPU": 2})]


def test_what_reservations_count_on_a_running_job_s_expected_end_and_a_pending_job_s_max_runtime():
    active = [job(1, "RUNNING", "a", {"CPU": 2}, started_at=NOW - timedelta(minutes=5), max_runtime_s=600),
              job(2, "RUNNING", "a", {"CPU": 2}, started_at=NOW),
              job(3, "SUBMITTED", "a", {"CPU": 2}, max_runtime_s=600)]
    pending = [row(4, resources='{"CPU": 4}', submitted_at=NOW - timedelta(minutes=10),
                   waiting_since=NOW - timedelta(minutes=6)), row(5, max_runtime_s=60)]
    snapshot, _ = build_snapshot(GROUP, NOW, [node("a", {"CPU": 6}, {"CPU": 0})], active, pending, [], {})
    # Job 3, not started yet, starts now at the earliest.
    assert [j.expected_end for j in snapshot.running] == [NOW + timedelta(minutes=5), None, NOW + timedelta(minutes=10)]
    assert [j.max_runtime_s for j in snapshot.pending] == [None, 60]
    decided = plan(snapshot)
    # Job 4 is first in line and reserves node a, its start not known: job 2 has no end.
    assert decided.reservations == [{"job": "4", "node": "a", "kind": "head", "expected_start": None}]
    # Stored by the tick, with its kind, for the next plan to keep.
    assert reservation_changes(pending, Decisions.of(decided).reservations) == {4: Held("a", "head")}


def test_a_running_job_without_a_max_runtime_is_expected_to_end_as_the_tick_estimates():
    active = [job(1, "RUNNING", "a", {"CPU": 2}, started_at=NOW - timedelta(minutes=5), max_runtime_s=600),
              job(2, "RUNNING", "a", {"CPU": 2}, started_at=NOW - timedelta(minutes=1)),
              job(3, "RUNNING", "a", {"CPU": 1}, started_at=NOW)]
    # Job 2's user ran jobs of its request for 11 minutes of late; no one ran one of job 3's.
    recent = RunTimes([Finished("u", {"CPU": 2}, 660), Finished("u", {"CPU": 2}, 600), Finished("u", {"CPU": 2}, 720)])
    pending = [row(4, resources='{"CPU": 4}', submitted_at=NOW - timedelta(minutes=10),
                   waiting_since=NOW - timedelta(minutes=6))]
    snapshot, _ = build_snapshot(GROUP, NOW, [node("a", {"CPU": 6}, {"CPU": 1})], active[:2], pending, [], {},
                                 run_times=recent)
    assert [j.expected_end for j in snapshot.running] == [NOW + timedelta(minutes=5), NOW + timedelta(minutes=10)]
    # Job 4 starts once both have ended (its max runtime, its estimate): the later, in 10 minutes.
    assert Decisions.of(plan(snapshot)).reservations == {4: Held("a", "head", None, NOW + timedelta(minutes=10))}
    # The group's median stands for a request its user has not run of late.
    snapshot, _ = build_snapshot(GROUP, NOW, [node("a", {"CPU": 6}, {"CPU": 0})], active, [], [], {}, run_times=recent)
    assert snapshot.running[2].expected_end == NOW + timedelta(minutes=11)


@pytest.mark.parametrize("waiting_since, reserves", [
    (None, False),  # requeued a moment ago: its wait for resources begins with this tick
    (NOW - timedelta(minutes=4), False),  # its not_before passed 4 minutes ago
    (NOW - timedelta(minutes=5), True),
])
def test_reserve_after_counts_from_when_the_job_began_waiting_for_resources(waiting_since, reserves):
    # Submitted an hour ago: its submission is not when its wait began.
    pending = [row(4, resources='{"CPU": 4}', submitted_at=NOW - timedelta(hours=1), waiting_since=waiting_since)]
    active = [job(1, "RUNNING", "a", {"CPU": 2}, started_at=NOW, max_runtime_s=600)]
    snapshot, _ = build_snapshot(GROUP, NOW, [node("a", {"CPU": 4}, {"CPU": 2})], active, pending, [], {})
    assert snapshot.pending[0].waiting_since == (waiting_since or NOW)
    held = Decisions.of(plan(snapshot)).reservations
    assert held == ({4: Held("a", "head", None, NOW + timedelta(minutes=10))} if reserves else {})


def head_row(**fields) -> PendingRow:
    """Job 4, first in line for CPU 4, holding a head-of-line reservation on node b."""
    held = {"reserved_node": "b", "reserved_kind": "head", "reserved_at": NOW - timedelta(minutes=30), **fields}
    return row(4, resources='{"CPU": 4}', submitted_at=NOW - timedelta(hours=1), waiting_since=NOW - timedelta(hours=1),
               **held)


def test_a_stored_head_of_line_reservation_is_kept_on_its_node_though_another_would_free_sooner():
    # Node a frees in 1 minute, node b in 20: a fresh judgement would choose a.
    active = [job(1, "RUNNING", "a", {"CPU": 2}, started_at=NOW - timedelta(minutes=9), max_runtime_s=600),
              job(2, "RUNNING", "b", {"CPU": 2}, started_at=NOW, max_runtime_s=1200)]
    nodes = [node("a", {"CPU": 4}, {"CPU": 2}), node("b", {"CPU": 4}, {"CPU": 2})]
    fresh, _ = build_snapshot(GROUP, NOW, nodes, active, [head_row()._replace(reserved_node=None)], [], {})
    assert Decisions.of(plan(fresh)).reservations == {4: Held("a", "head", None, NOW + timedelta(minutes=1))}
    pending = [head_row(reserved_start=NOW + timedelta(minutes=20))]
    snapshot, _ = build_snapshot(GROUP, NOW, nodes, active, pending, [], {})
    assert snapshot.reservations == [{"job": "4", "node": "b", "kind": "head"}]
    decided = plan(snapshot)
    assert Decisions.of(decided).reservations == {4: Held("b", "head", None, NOW + timedelta(minutes=20))}
    assert reservation_changes(pending, Decisions.of(decided).reservations) == {}


@pytest.mark.parametrize("kind, start, at, kept", [
    # One rule: the start timeout (300 s) past its due time.
    ("preemption", None, NOW - timedelta(seconds=300), True),
    ("preemption", None, NOW - timedelta(seconds=301), False),
    ("preemption", NOW - timedelta(seconds=301), NOW - timedelta(seconds=301), False),
    ("head", NOW - timedelta(seconds=300), NOW - timedelta(hours=2), True),
    ("head", NOW - timedelta(seconds=301), NOW - timedelta(hours=2), False),
    ("head", None, NOW - timedelta(hours=2), True),  # its start is not known: not due
])
def test_one_expiry_rule_for_both_kinds_of_reservation(kind, start, at, kept):
    pending = [head_row(reserved_kind=kind, reserved_start=start, reserved_at=at)]
    snapshot, _ = build_snapshot(GROUP, NOW, [node("b", {"CPU": 4}, {"CPU": 0})], [], pending, [], {})
    assert [r["node"] for r in snapshot.reservations] == (["b"] if kept else [])


# --- Observed use (core/observed.py) -----------------------------------------------------------

@dataclass
class RayJob:
    status: str
    driver_node_id: str | None
    driver_job_id: str | None = None


def greedy_use(active):
    """Job 1 declared CPU 0.5 on a, its driver there, three 1-CPU actors: one on a, two on b."""
    work = ClusterWork(actors=(
        Work("01000000", "a", Resources.of({"CPU": 0.5}), name=SUPERVISOR_PREFIX + "s1"),
        *(Work("04000000", node_id, Resources.of({"CPU": 1})) for node_id in ("a", "b", "b"))))
    running = running_of(active, {"s1": RayJob("RUNNING", "a", "04000000"), "s2": RayJob("PENDING", None)})
    return running, observe(running, work)


NODES_OF_GREEDY = [node("a", {"CPU": 2}, {"CPU": 0.5}), node("b", {"CPU": 2}, {"CPU": 0})]


def test_the_running_jobs_observed_are_those_ray_runs_on_the_node_it_runs_them():
    active = [job(1, "SUBMITTED", "a", {"CPU": 0.5}), job(2, "SUBMITTED", "b", {"CPU": 1})]
    running, _ = greedy_use(active)
    assert running == [RunningJob(1, "u", "s1", "04000000", "a", Resources.of({"CPU": 0.5}))]


def test_a_jobs_own_actors_are_ours_not_outside_load_and_what_it_holds_beyond_its_declaration_is_named():
    active = [job(1, "RUNNING", "a", {"CPU": 0.5})]
    _, use = greedy_use(active)
    snapshot, _ = build_snapshot(GROUP, NOW, NODES_OF_GREEDY, active, [], [], {}, use=use)
    assert {n.id: (n.outside, n.held) for n in snapshot.nodes} == {
        "a": ({}, [{"job": "1", "resources": {"CPU": 1}}]), "b": ({}, [{"job": "1", "resources": {"CPU": 2}}])}
    assert snapshot.running[0].uses == {"CPU": 3.5}
    # Declared only, the same actors are work outside the queue.
    assert outside(NODES_OF_GREEDY, active) == {"a": {"CPU": 1}, "b": {"CPU": 2}}


def test_a_job_that_ended_in_this_tick_is_releasing_not_observed_twice():
    _, use = greedy_use([job(1, "RUNNING", "a", {"CPU": 0.5})])
    snapshot, _ = build_snapshot(GROUP, NOW, NODES_OF_GREEDY, [], [], [], {}, [("a", {"CPU": 0.5})], use=use)
    # Only its driver is in the books while Ray frees it; its actors show as outside until Ray drops them.
    assert {n.id: n.outside for n in snapshot.nodes} == {"a": {"CPU": 1}, "b": {"CPU": 2}}
    assert all(not n.held for n in snapshot.nodes) and snapshot.running == []


def test_every_field_the_planner_reads_reaches_its_job_from_the_pending_row():
    # Each `planned` field of the job's table, by column: its value in the row, and the planner's
    # job's field and value. A field the table adds fails here until it is given.
    given = {
        "user_name": ("ann", "user", "ann"),
        "resources": ('{"CPU": 2}', "resources", {"CPU": 2.0}),
        "node_labels": ('{"zone": "a"}', "node_labels", {"zone": "a"}),
        "bundles": ('[{"CPU": 1}]', "bundles", [{"CPU": 1.0}]),
        "bundle_strategy": ("SPREAD", "bundle_strategy", "SPREAD"),
        "priority": (7, "priority", 7),
        "priority_class": ("high", "priority_class", "high"),
        "submitted_at": (NOW - timedelta(hours=1), "submitted_at", NOW - timedelta(hours=1)),
        "not_before": (NOW + timedelta(hours=1), "not_before", NOW + timedelta(hours=1)),
        "max_runtime_s": (90.0, "max_runtime_s", 90.0),
    }
    assert set(given) == {field.column for field in FIELDS if field.planned}
    snapshot, invalid = build_snapshot(CLASSES_GROUP, NOW, [], [], [row(1, **{c: v for c, (v, _, _) in given.items()})],
                                       [], {})
    assert invalid == {}
    [pending] = snapshot.pending
    assert {column: getattr(pending, name) for column, (_, name, _) in given.items()} == {
        column: value for column, (_, _, value) in given.items()}


def test_a_pending_row_whose_stored_max_runtime_is_out_of_bounds_is_not_planned_and_says_why():
    snapshot, invalid = build_snapshot(GROUP, NOW, [], [], [row(1, max_runtime_s=-5.0), row(2, max_runtime_s=5.0)], [], {})
    assert [job.id for job in snapshot.pending] == ["2"]
    assert invalid == {1: "max_runtime_s: Input should be greater than 0 (stored: -5.0)"}
