"""A group over several clusters, the pure part: when a cluster is lost, what a cluster that comes
back must stop first, the driver caps, and a gang never split across clusters."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job.core.clusters import CLUSTER_LABEL, Unanswered, judge, with_requeued, with_stopped
from job.core.driver_caps import capped, default_cap, driver_rooms, drivers_left, held_by_caps, replaced
from job.core.errors import BadInput
from job.core.planner import Snapshot, plan
from job.core.specs import ClusterSpec, GroupSpec, validated

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("since_s", "lost"), [(None, False), (30, False), (119, False), (120, True), (900, True)])
def test_a_cluster_is_lost_once_it_did_not_answer_for_the_grace(since_s, lost):
    before = Unanswered() if since_s is None else Unanswered({"east": NOW - timedelta(seconds=since_s)})
    verdict = judge(before, ["west"], {"east": "connection refused"}, NOW, 120)
    assert verdict.lost == ({"east"} if lost else set())
    assert verdict.state.since["east"] == (NOW if since_s is None else NOW - timedelta(seconds=since_s))
    assert "connection refused" in verdict.warnings["east"]
    assert (": lost," in verdict.warnings["east"]) == lost


def test_a_cluster_that_answers_again_is_no_longer_counted_silent_but_its_requeued_jobs_are_kept():
    before = with_requeued(Unanswered({"east": NOW - timedelta(minutes=5)}), "east", ["i-1-1", "i-2-1"])
    verdict = judge(before, ["west", "east"], {}, NOW, 120)
    assert verdict.lost == set() and verdict.warnings == {} and verdict.state.since == {}
    assert verdict.state.requeued == {"east": ["i-1-1", "i-2-1"]}
    forgotten = with_stopped(verdict.state, "east", ["i-1-1", "i-2-1"])
    assert forgotten.document() == {"since": {}, "requeued": {}}


def test_the_document_reads_back_the_same():
    state = with_requeued(Unanswered({"east": NOW}), "east", ["b", "a"])
    assert Unanswered.of(state.document()) == state
    assert state.requeued == {"east": ["a", "b"]}


def test_a_cluster_dropped_from_the_group_leaves_the_document():
    before = with_requeued(Unanswered({"gone": NOW}), "gone", ["x"])
    assert judge(before, ["west"], {}, NOW, 120).state.document() == {"since": {}, "requeued": {}}


@pytest.mark.parametrize(("memory", "cap"), [(None, None), (0, None), (1 << 30, 10), (50e6, 1), (16e9, 160)])
def test_the_default_cap_is_the_heads_memory_over_100_mb(memory, cap):
    assert default_cap(memory, 100_000_000) == cap


def test_drivers_left_and_the_placements_past_a_cap_wait():
    left = drivers_left({"east": 3, "west": 5}, ["east", "east", "west"])
    assert left == {"east": 1, "west": 4}
    placements = [("1", "e1"), ("2", "e2"), ("3", "w1"), ("4", "e1"), ("5", "x1")]
    kept, held = capped(placements, {"e1": "east", "e2": "east", "w1": "west"}, {"east": 3, "west": 5}, left)
    assert kept == [("1", "e1"), ("3", "w1"), ("5", "x1")]
    assert set(held) == {"2", "4"}
    assert "cluster east runs its most drivers of ours at once (3" in held["2"]


@pytest.mark.parametrize(("given", "expected"), [
    ("http://10.0.0.5:8265", ("10-0-0-5-8265", "http://10.0.0.5:8265")),
    ("east=http://ray-east:8265/", ("east", "http://ray-east:8265")),
    ("raycluster://ml/shared", ("shared", "raycluster://ml/shared")),
    ({"name": "b", "address": "https://b.example"}, ("b", "https://b.example")),
])
def test_a_cluster_is_named_or_gets_a_name(given, expected):
    cluster = ClusterSpec.model_validate(given)
    assert (cluster.name, cluster.address) == expected


@pytest.mark.parametrize(("clusters", "message"), [
    ([], "clusters: List should have at least 1 item"),
    (["http://a:1", "http://a:1"], "cluster name 'a-1' is given more than once (name each: --ray-address NAME=URL)"),
    (["x=http://a:1", "y=http://a:1"], "cluster address 'http://a:1' is given more than once"),
    (["x=localhost:1"], "clusters.0.address: 'localhost:1': use http://host:port"),
    ([{"name": "x", "address": "http://a:1", "removing": True}], "every cluster is being removed"),
])
def test_bad_clusters_are_refused_naming_the_field(clusters, message):
    with pytest.raises(BadInput) as refused:
        validated(GroupSpec, {"name": "g", "clusters": clusters})
    assert message in str(refused.value)


def _snapshot(nodes, bundles, strategy):
    return Snapshot.model_validate({
        "group": {"policy": "fifo", "selector": "dispersed"},
        "nodes": [{"id": node, "resources": {"CPU": cpus}, "labels": {CLUSTER_LABEL: cluster}}
                  for node, (cluster, cpus) in nodes.items()],
        "pending": [{"id": "gang", "user": "u", "resources": {"CPU": 1}, "bundles": bundles,
                     "bundle_strategy": strategy}],
    })


@pytest.mark.parametrize(("nodes", "bundles", "strategy", "cluster"), [
    # East has room for the bundles but not for the driver beside them: the whole gang goes west.
    ({"e1": ("east", 2), "e2": ("east", 2), "w1": ("west", 3), "w2": ("west", 3)},
     [{"CPU": 2}, {"CPU": 2}], "SPREAD", "west"),
    # Three nodes are needed apart: only west has three.
    ({"e1": ("east", 8), "e2": ("east", 8), "w1": ("west", 2), "w2": ("west", 2), "w3": ("west", 2)},
     [{"CPU": 1}] * 3, "STRICT_SPREAD", "west"),
    # Together on one node: east's big node.
    ({"e1": ("east", 8), "w1": ("west", 2), "w2": ("west", 2)}, [{"CPU": 2}] * 3, "STRICT_PACK", "east"),
])
def test_a_gang_is_placed_within_one_cluster(nodes, bundles, strategy, cluster):
    decided = plan(_snapshot(nodes, bundles, strategy))
    [placement] = decided.placements
    used = {placement["node"], *placement["bundle_nodes"]}
    assert {nodes[node][0] for node in used} == {cluster}


def test_a_gang_that_fits_only_across_clusters_waits():
    nodes = {"e1": ("east", 2), "w1": ("west", 2)}
    decided = plan(_snapshot(nodes, [{"CPU": 1}, {"CPU": 1}], "STRICT_SPREAD"))
    assert decided.placements == [] and decided.waiting[0]["job"] == "gang"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 4)), min_size=1, max_size=7),
       st.lists(st.integers(1, 3), min_size=1, max_size=4), st.sampled_from(["PACK", "SPREAD", "STRICT_SPREAD"]))
def test_no_gang_is_ever_split_across_clusters(nodes, bundles, strategy):
    named = {f"n{i}": node for i, node in enumerate(nodes)}
    decided = plan(_snapshot(named, [{"CPU": cpus} for cpus in bundles], strategy))
    for placement in decided.placements:
        used = {placement["node"], *placement["bundle_nodes"]}
        assert len({named[node][0] for node in used}) == 1


def two_clusters(pending: list[dict], selector: str = "concentrated", **group) -> Snapshot:
    nodes = [{"id": node, "resources": {"CPU": 8}, "labels": {CLUSTER_LABEL: cluster}}
             for node, cluster in (("e1", "east"), ("e2", "east"), ("w1", "west"), ("w2", "west"))]
    return Snapshot.model_validate({"group": {"policy": "fifo", "selector": selector, **group}, "now": NOW, "nodes": nodes,
                                    "pending": pending})


CLUSTER_OF = {"e1": "east", "e2": "east", "w1": "west", "w2": "west"}


def test_placements_past_a_cap_go_to_the_cluster_with_room_gangs_whole():
    pending = [{"id": str(n), "user": "a", "resources": {"CPU": 1}} for n in range(1, 4)]
    pending.append({"id": "4", "user": "a", "resources": {"CPU": 1}, "bundles": [{"CPU": 2}, {"CPU": 2}],
                    "bundle_strategy": "STRICT_SPREAD"})
    snapshot = two_clusters(pending)
    decided = plan(snapshot)
    # The selector packs east: every job there, one more than east takes.
    assert {CLUSTER_OF[p["node"]] for p in decided.placements} == {"east"}
    decisions, held = replaced(snapshot, decided, CLUSTER_OF, {"east": 3, "west": 3}, {"east": 2, "west": 3})
    assert held == {}
    where = dict(decisions.placements)
    assert ([CLUSTER_OF[where[job]] for job in (1, 2, 3, 4)]) == ["east", "east", "west", "west"]
    assert sorted(decisions.bundle_nodes[4]) == ["w1", "w2"]


def test_a_job_no_cluster_has_a_driver_left_for_waits_saying_so():
    snapshot = two_clusters([{"id": str(n), "user": "a", "resources": {"CPU": 1}} for n in range(1, 4)])
    decisions, held = replaced(snapshot, plan(snapshot), CLUSTER_OF, {"east": 1, "west": 1}, {"east": 1, "west": 1})
    assert [CLUSTER_OF[node] for _, node in decisions.placements] == ["east", "west"]
    assert list(held) == [3] and "runs its most drivers of ours at once (1" in held[3]


def test_a_job_held_by_a_cap_waits_for_a_driver_of_the_cluster_the_plan_chose():
    snapshot = two_clusters([{"id": str(n), "user": "a", "resources": {"CPU": 1}} for n in range(1, 5)])
    decided = plan(snapshot)
    decisions, held = replaced(snapshot, decided, CLUSTER_OF, {"east": 2, "west": 1}, {"east": 1, "west": 1})
    assert sorted(held) == [3, 4]
    # Job 100 runs in east already; the plan chose east for 3 and 4 (the selector packs).
    rooms = driver_rooms(decided, held, decisions.placements, {"100": "east"}, CLUSTER_OF, {"east": 2, "west": 1},
                         lambda job: job)  # type: ignore[arg-type, return-value]
    assert {name: (room.size, sorted(room.holding)) for name, room in rooms.rooms.items()} == {
        "cluster east": (2, ["1", "100"]), "cluster west": (1, ["2"])}
    assert rooms.waiting == [("3", ["cluster east"], 3), ("4", ["cluster east"], 4)]
    assert rooms.rooms["cluster east"].basis == "when a driver of ours in cluster east should end (its driver cap)"


def test_a_job_only_a_full_cluster_could_hold_waits_for_a_driver_of_any_full_one():
    decided = plan(two_clusters([{"id": "7", "user": "a", "resources": {"CPU": 1}}]))
    unplanned = decided.model_copy(update={"placements": [], "waiting": [{"job": "7", "reason": "Unschedulable"}]})
    rooms = driver_rooms(unplanned, {7: "every cluster ..."}, [], {"1": "east", "2": "west"}, CLUSTER_OF,
                         {"east": 1, "west": 1, "north": 3}, lambda job: job)  # type: ignore[arg-type, return-value]
    assert list(rooms.rooms) == ["cluster east", "cluster west"]
    assert rooms.waiting == [("7", ["cluster east", "cluster west"], 7)]


def test_a_second_plan_takes_no_node_the_first_reserved():
    # Job 10 waits for west and reserves w2, where a running job ends in an hour; 11 and 12 go to
    # east, which takes one. w2's 4 free CPUs would hold 12, but they are 10's: 12 waits.
    hour = timedelta(hours=1)
    running = [{"id": "101", "user": "x", "node": "w1", "resources": {"CPU": 8}, "started_at": NOW - hour},
               {"id": "102", "user": "x", "node": "w2", "resources": {"CPU": 4}, "started_at": NOW - hour,
                "expected_end": NOW + hour}]
    pending = [{"id": "10", "user": "b", "resources": {"CPU": 8}, "node_labels": {CLUSTER_LABEL: "west"},
                "submitted_at": NOW - hour, "waiting_since": NOW - hour},
               *({"id": ident, "user": "c", "resources": {"CPU": 1}, "submitted_at": NOW - hour / 2} for ident in ("11", "12"))]
    snapshot = Snapshot.model_validate({**two_clusters([]).model_dump(), "running": running, "pending": pending})
    decided = plan(snapshot)
    assert [(r["job"], r["node"]) for r in decided.reservations] == [("10", "w2")]
    decisions, held = replaced(snapshot, decided, CLUSTER_OF, {"east": 1, "west": 5}, {"east": 1, "west": 3})
    assert [(job, CLUSTER_OF[node]) for job, node in decisions.placements] == [(11, "east")]
    assert list(held) == [12]


def test_only_a_full_cluster_could_hold_it():
    snapshot = two_clusters([{"id": "1", "user": "a", "resources": {"CPU": 1}},
                             {"id": "2", "user": "a", "resources": {"CPU": 64}}])
    empty = snapshot.model_copy(update={"nodes": []})
    assert held_by_caps(empty, plan(empty), snapshot.nodes[:2]) == {"1"}


_CLUSTERS = ("east", "west", "north")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_CLUSTERS), st.integers(1, 6)), min_size=1, max_size=6),
       st.dictionaries(st.sampled_from(_CLUSTERS), st.tuples(st.integers(0, 3), st.integers(0, 3))),
       st.lists(st.tuples(st.integers(1, 3), st.sampled_from([0, 0, 2, 3])), min_size=1, max_size=9),
       st.sampled_from(["concentrated", "dispersed"]))
def test_the_caps_are_kept_and_no_planned_job_is_lost_or_placed_twice(nodes, caps_left, jobs, selector):
    named = {f"n{i}": node for i, node in enumerate(nodes)}
    cluster_of = {node: cluster for node, (cluster, _) in named.items()}
    pending = [{"id": str(n), "user": "a", "resources": {"CPU": cpus},
                **({"bundles": [{"CPU": 1}] * gang, "bundle_strategy": "SPREAD"} if gang else {})}
               for n, (cpus, gang) in enumerate(jobs, start=1)]
    snapshot = Snapshot.model_validate({
        "group": {"policy": "fifo", "selector": selector}, "now": NOW, "pending": pending,
        "nodes": [{"id": node, "resources": {"CPU": cpus}, "labels": {CLUSTER_LABEL: cluster}}
                  for node, (cluster, cpus) in named.items()]})
    caps = {cluster: cap for cluster, (cap, _) in caps_left.items()}
    left = {cluster: min(more, cap) for cluster, (cap, more) in caps_left.items()}
    decided = plan(snapshot)
    decisions, held = replaced(snapshot, decided, cluster_of, caps, left)
    placed = [job for job, _ in decisions.placements]
    # Each planned job is placed once, or held back saying why; nothing else is placed.
    assert len(placed) == len(set(placed))
    assert set(placed) | set(held) == {int(p["job"]) for p in decided.placements} and not set(placed) & set(held)
    assert all("runs its most drivers of ours at once" in message for message in held.values())
    # No capped cluster takes more drivers than it has left.
    for cluster, more in left.items():
        assert sum(cluster_of[node] == cluster for _, node in decisions.placements) <= more
    # No node holds more than it has, drivers and bundles alike, and a gang stays in one cluster.
    used = dict.fromkeys(named, 0)
    for job, node in decisions.placements:
        cpus, gang = jobs[job - 1]
        used[node] += cpus
        homes = decisions.bundle_nodes.get(job, [])
        assert len(homes) == gang and {cluster_of[home] for home in homes} <= {cluster_of[node]}
        for home in homes:
            used[home] += 1
    assert all(used[node] <= cpus for node, (_, cpus) in named.items())
