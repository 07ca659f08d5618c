"""build_snapshot: the planner's snapshot from what a tick read; here, the outside load of each node
(its total, less what Ray reports free, less what our started jobs hold there). Pure: no database,
no Ray."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import NamedTuple

import pytest

from job.core.group_snapshot import PendingRow, build_snapshot
from job.core.planner import plan

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=timezone.utc)
GIB = 2**30
GROUP = {"name": "g", "policy": "fifo", "selector": "dispersed", "resource_priority": ["GPU", "CPU", "memory"], "half_life_s": 0,
         "max_running_per_user": None, "max_resources_per_user": None, "strict_order": False,
         "priority_classes": [{"name": "default", "value": 0, "preemptible": True}], "default_class": "default",
         "preemption": "off", "min_runtime_s": 600, "max_preemptions": 10, "start_timeout_s": 300}


class Node(NamedTuple):
    """A node as the Ray adapter gives it (the fields build_snapshot reads)."""

    id: str
    resources: dict[str, float]
    labels: dict[str, str]
    free: dict[str, float] | None


def node(ident: str, resources: dict[str, float], free: dict[str, float] | None) -> Node:
    return Node(ident, resources, {}, free)


def job(ident: int, state: str, node_id: str | None, resources: dict[str, float]) -> dict:
    return {"id": ident, "user_name": "u", "state": state, "node": node_id, "resources": resources, "priority_class": None,
            "started_at": None, "cancel_requested_at": None, "preempted_at": None, "reason": None}


def outside(nodes: list[Node], active: list[dict]) -> dict[str, dict[str, float]]:
    snapshot, _ = build_snapshot(GROUP, NOW, nodes, active, [], [], {})
    return {n.id: n.outside for n in snapshot.nodes}


# (name, nodes, active jobs, expected outside per node)
CASES = [
    ("nothing held: none", [node("a", {"CPU": 4}, {"CPU": 4})], [], {"a": {}}),
    ("what Ray counts used and no job of ours holds", [node("a", {"CPU": 4, "memory": 8 * GIB}, {"CPU": 2, "memory": 7 * GIB})], [],
     {"a": {"CPU": 2, "memory": GIB}}),
    ("a RUNNING job of ours is not outside load", [node("a", {"CPU": 4}, {"CPU": 1})], [job(1, "RUNNING", "a", {"CPU": 2})], {"a": {"CPU": 1}}),
    ("a SUBMITTED job is not counted by Ray yet: what is used is outside", [node("a", {"CPU": 4}, {"CPU": 2})],
     [job(1, "SUBMITTED", "a", {"CPU": 2})], {"a": {"CPU": 2}}),
    ("nor a SUBMITTING one", [node("a", {"CPU": 4}, {"CPU": 2})], [job(1, "SUBMITTING", "a", {"CPU": 2})], {"a": {"CPU": 2}}),
    ("a job on another node does not count here", [node("a", {"CPU": 4}, {"CPU": 2}), node("b", {"CPU": 4}, {"CPU": 2})],
     [job(1, "RUNNING", "b", {"CPU": 2})], {"a": {"CPU": 2}, "b": {}}),
    ("several RUNNING jobs add up", [node("a", {"CPU": 4, "GPU": 1}, {"CPU": 0.5, "GPU": 0})],
     [job(1, "RUNNING", "a", {"CPU": 1, "GPU": 1}), job(2, "RUNNING", "a", {"CPU": 1.5})], {"a": {"CPU": 1}}),
    ("free unknown: none", [node("a", {"CPU": 4}, None)], [], {"a": {}}),
    ("never below zero: a started job Ray does not count yet", [node("a", {"CPU": 4}, {"CPU": 4})], [job(1, "RUNNING", "a", {"CPU": 2})], {"a": {}}),
    ("never below zero, per resource", [node("a", {"CPU": 4, "memory": 8 * GIB}, {"CPU": 4, "memory": 6 * GIB})],
     [job(1, "RUNNING", "a", {"CPU": 1})], {"a": {"memory": 2 * GIB}}),
    ("never below zero: Ray reports more free than the total", [node("a", {"CPU": 4}, {"CPU": 5})], [], {"a": {}}),
    ("fixed point: float noise in what Ray reports is no load", [node("a", {"CPU": 4, "memory": 8 * GIB}, {"CPU": 3.99999999999, "memory": 8 * GIB - 3e-5})],
     [], {"a": {}}),
    ("fixed point: our jobs' amounts as Ray sums them", [node("a", {"CPU": 1}, {"CPU": 1 - (0.1 + 0.2)})],
     [job(1, "RUNNING", "a", {"CPU": 0.1}), job(2, "RUNNING", "a", {"CPU": 0.2})], {"a": {}}),
    ("fixed point: the least amount Ray has is load", [node("a", {"CPU": 4}, {"CPU": 3.9999})], [], {"a": {"CPU": 0.0001}}),
    ("a resource Ray does not report free is taken as free", [node("a", {"CPU": 4, "licence": 2}, {"CPU": 3})], [], {"a": {"CPU": 1}}),
]


@pytest.mark.parametrize("nodes, active, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_outside_load(nodes, active, expected):
    assert outside(nodes, active) == expected


def test_outside_load_is_left_out_of_the_snapshot_where_there_is_none():
    snapshot, _ = build_snapshot(GROUP, NOW, [node("a", {"CPU": 4}, {"CPU": 4}), node("b", {"CPU": 4}, None), node("c", {"CPU": 4}, {"CPU": 1})],
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
        job: "needs CPU 1; the most free on any node is CPU 0 (work outside the queue holds CPU 2 on node a)" for job in ("3", "4")}
