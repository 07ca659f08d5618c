"""Gang placement: a job's driver and bundles placed all or nothing (docs/planner.md, "Bundles")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from planner_helpers import PROPERTY, at, reference, run, snapshot, snapshots
from pydantic import ValidationError

from job.core.planner import Snapshot, plan
from job.core.planner.snapshot import MAX_BUNDLES, describe_error
from job.core.resources import Resources, footprint, to_units

SELECTORS = ("legacy", "dispersed", "concentrated", "roundrobin")
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


def gang(ident, bundles, strategy="PACK", resources=None, user="u", **extra):
    return (ident, user, resources or {}, {"bundles": bundles, "bundle_strategy": strategy, **extra})


def placed(document: dict) -> dict:
    """The plan's document, its placements by job."""
    result = plan(Snapshot.model_validate(document)).document()
    return {p["job"]: p for p in result["placements"]}, {w["job"]: w for w in result["waiting"]}


# (strategy, selector, nodes, bundles, driver, the bundles' nodes, the driver's node)
PLACEMENTS = [
    # PACK: one node if one holds them all, whatever the selector.
    *[("PACK", sel, {"a": {"CPU": 4}, "b": {"CPU": 8}}, [{"CPU": 2}] * 2, {"CPU": 1}, None, None) for sel in SELECTORS],
    ("PACK", "concentrated", {"a": {"CPU": 4}, "b": {"CPU": 8}}, [{"CPU": 2}] * 2, {"CPU": 1}, ["a", "a"], "b"),
    ("PACK", "dispersed", {"a": {"CPU": 4}, "b": {"CPU": 8}}, [{"CPU": 2}] * 2, {"CPU": 1}, ["b", "b"], "a"),
    # PACK, fragmented: as few nodes as possible.
    ("PACK", "dispersed", {"a": {"CPU": 2}, "b": {"CPU": 4}}, [{"CPU": 2}] * 3, {}, ["b", "b", "a"], "a"),
    # SPREAD: distinct nodes while there are, then reuse.
    ("SPREAD", "legacy", {"a": {"CPU": 8}, "b": {"CPU": 8}}, [{"CPU": 2}] * 3, {}, ["a", "b", "a"], "a"),
    ("SPREAD", "roundrobin", {"a": {"CPU": 8}, "b": {"CPU": 8}, "c": {"CPU": 8}}, [{"CPU": 2}] * 2, {}, ["a", "b"], "a"),
    # STRICT_PACK: one node, the selector's.
    ("STRICT_PACK", "concentrated", {"a": {"CPU": 4}, "b": {"CPU": 8}}, [{"CPU": 2}] * 2, {}, ["a", "a"], "a"),
    ("STRICT_PACK", "legacy", {"a": {"CPU": 4}, "b": {"CPU": 8}}, [{"CPU": 2}] * 2, {}, ["b", "b"], "b"),
    # STRICT_SPREAD: each on its own node, the driver beside them.
    *[("STRICT_SPREAD", sel, {"a": {"CPU": 2}, "b": {"CPU": 2}, "c": {"CPU": 1}}, [{"CPU": 2}] * 2, {"CPU": 1},
       ["a", "b"], "c") for sel in SELECTORS],
]


@pytest.mark.parametrize("strategy, selector, nodes, bundles, driver, bundle_nodes, node", PLACEMENTS)
def test_a_gang_is_placed_by_its_strategy_and_the_selector(strategy, selector, nodes, bundles, driver, bundle_nodes, node):
    placements, waiting = placed(snapshot(selector=selector, nodes=nodes, pending=[gang("1", bundles, strategy, driver)]))
    assert not waiting
    got = placements["1"]
    assert len(got["bundle_nodes"]) == len(bundles)
    if strategy in ("PACK", "STRICT_PACK") and bundle_nodes is None:
        assert len(set(got["bundle_nodes"])) == 1
    if bundle_nodes is not None:
        assert (got["bundle_nodes"], got["node"]) == (bundle_nodes, node)


# (strategy, nodes, running (node, CPU), bundles, reason, message)
WAITS = [
    ("STRICT_SPREAD", {"a": {"CPU": 4}, "b": {"CPU": 4}}, [("a", 3)], [{"CPU": 2}] * 2, "Resources",
     "needs 2 bundles of CPU 2 on separate nodes; 1 node has room"),
    ("STRICT_SPREAD", {"a": {"CPU": 4}}, [], [{"CPU": 2}] * 2, "Unschedulable",
     "needs 2 bundles of CPU 2 on separate nodes; in group g, 1 node has room even when empty"),
    ("STRICT_PACK", {"a": {"CPU": 4}, "b": {"CPU": 4}}, [("a", 2), ("b", 2)], [{"CPU": 2}] * 2, "Resources",
     "needs 2 bundles of CPU 2 on one node; its bundles need CPU 4 on one node; the most free on any node is CPU 2"),
    ("STRICT_PACK", {"a": {"CPU": 2}, "b": {"CPU": 2}}, [], [{"CPU": 2}] * 2, "Unschedulable",
     "needs 2 bundles of CPU 2 on one node; in group g, its bundles need CPU 4 on one node; the most on any node is CPU 2"),
    ("PACK", {"a": {"CPU": 4}, "b": {"CPU": 4}}, [("a", 3), ("b", 1)], [{"CPU": 2}] * 3, "Resources",
     "needs 3 bundles of CPU 2; the nodes have room for 1 of its 3 bundles"),
    ("SPREAD", {"a": {"CPU": 2}}, [], [{"CPU": 2}, {"GPU": 1}], "Unschedulable",
     "needs 1 bundle of CPU 2 and 1 bundle of GPU 1 spread over nodes; in group g, the nodes have room for 1 of its 2 bundles"
     " even when empty"),
]


@pytest.mark.parametrize("strategy, nodes, running, bundles, reason, message", WAITS)
def test_a_gang_that_does_not_fit_waits_whole_and_says_what_is_missing(strategy, nodes, running, bundles, reason, message):
    document = snapshot(nodes=nodes, running=[(f"r{i}", "v", n, {"CPU": c}) for i, (n, c) in enumerate(running)],
                        pending=[gang("1", bundles, strategy), ("2", "w", {"CPU": 1})])
    placements, waiting = placed(document)
    assert "1" not in placements
    assert (waiting["1"]["reason"], waiting["1"]["message"]) == (reason, message)


def test_the_driver_must_fit_beside_the_bundles_or_nothing_is_placed():
    document = snapshot(nodes={"a": {"CPU": 2}, "b": {"CPU": 2}},
                        pending=[gang("1", [{"CPU": 2}] * 2, "STRICT_SPREAD", {"CPU": 1}), ("2", "w", {"CPU": 2})])
    placements, waiting = placed(document)
    assert waiting["1"]["message"].endswith("its bundles and its driver do not all fit at once even when empty")
    # Nothing of job 1 was held: job 2 takes a whole node.
    assert placements["2"]["node"] in ("a", "b")


def test_labels_apply_to_bundles():
    nodes = {"a": ({"CPU": 8}, {"zone": "x"}), "b": ({"CPU": 8}, {"zone": "y"}), "c": ({"CPU": 8}, {"zone": "y"})}
    placements, _ = placed(snapshot(nodes=nodes,
                                    pending=[gang("1", [{"CPU": 2}] * 2, "STRICT_SPREAD", node_labels={"zone": "y"})]))
    assert sorted(placements["1"]["bundle_nodes"]) == ["b", "c"] and placements["1"]["node"] in ("b", "c")
    _, waiting = placed(snapshot(nodes=nodes, pending=[gang("1", [{"CPU": 2}] * 3, "STRICT_SPREAD", node_labels={"zone": "y"})]))
    assert waiting["1"]["reason"] == "Unschedulable"
    assert "on separate nodes on nodes labelled zone=y" in waiting["1"]["message"]


def test_a_running_gang_holds_its_bundles_on_their_nodes_and_its_user_is_charged_all_of_it():
    document = snapshot(policy="drf", nodes={"a": {"CPU": 4}, "b": {"CPU": 4}},
                        pending=[("1", "ann", {"CPU": 1}), ("2", "bob", {"CPU": 3})])
    document["running"] = [{"id": "r", "user": "ann", "node": "a", "resources": {"CPU": 1},
                            "bundles": [{"CPU": 2}, {"CPU": 1}], "bundle_nodes": ["a", "b"]}]
    placements, _waiting = placed(document)
    # ann holds CPU 4 of 8: bob goes first, and only b has 3 free; then a has 1 left for ann.
    assert [(p["job"], p["node"]) for p in placements.values()] == [("2", "b"), ("1", "a")]


def test_a_user_limit_counts_the_whole_footprint():
    document = snapshot(nodes={"a": {"CPU": 8}, "b": {"CPU": 8}}, users={"u": {"max_resources": {"CPU": 4}}},
                        pending=[gang("1", [{"CPU": 2}] * 2, "SPREAD", {"CPU": 1}), gang("2", [{"CPU": 2}] * 2, "SPREAD")])
    placements, waiting = placed(document)
    assert "2" in placements
    assert waiting["1"]["reason"] == "UserResourceLimit"
    assert waiting["1"]["message"] == ("needs CPU 1 for its driver and 2 bundles of CPU 2 spread over nodes; "
                                       "user u already uses CPU 4 of at most 4")


def _preempting(bundles, strategy, running):
    document = snapshot(nodes={"a": {"CPU": 4}, "b": {"CPU": 4}}, preemption="priority",
                        priority_classes=[{"name": "low", "value": 0}, {"name": "high", "value": 10}], default_class="low",
                        pending=[gang("1", bundles, strategy, {"CPU": 1}, **{"class": "high"})])
    document["running"] = [{"id": i, "user": "v", "node": n, "resources": {"CPU": c}, "started_at": at(-60), **extra}
                           for i, n, c, extra in running]
    return plan(Snapshot.model_validate(document)).document()


def test_preemption_makes_room_for_the_whole_footprint():
    result = _preempting([{"CPU": 1}] * 2, "PACK",
                         [("r1", "a", 2, {}), ("r2", "a", 2, {}), ("r3", "b", 2, {}), ("r4", "b", 2, {})])
    # Driver and bundles, CPU 3, on one node: two victims there.
    assert result["preemptions"] == [{"job": "1", "node": "a", "victims": ["r2", "r1"]}] or \
        [len(p["victims"]) for p in result["preemptions"]] == [2]
    node = result["preemptions"][0]["node"]
    assert result["reservations"] == [{"job": "1", "node": node}]


def test_a_victim_with_bundles_frees_its_whole_footprint_once():
    gang_victim = {"bundles": [{"CPU": 3}, {"CPU": 3}], "bundle_nodes": ["a", "b"]}
    result = _preempting([{"CPU": 1}, {"CPU": 1}], "PACK", [("g", "a", 1, gang_victim)])
    assert result["preemptions"] == [{"job": "1", "node": "a", "victims": ["g"]}]


def test_a_reserved_gang_starts_whole_on_its_node():
    document = snapshot(nodes={"a": {"CPU": 4}, "b": {"CPU": 4}}, pending=[gang("1", [{"CPU": 1}] * 2, "SPREAD", {"CPU": 1})])
    document["reservations"] = [{"job": "1", "node": "b"}]
    placements, _ = placed(document)
    assert placements["1"] == {"job": "1", "node": "b", "bundle_nodes": ["b", "b"]}


@pytest.mark.parametrize("field, value, error", [
    ("bundles", [], "pending[0].bundles: List should have at least 1 item after validation, not 0"),
    ("bundles", [{"CPU": 1}] * (MAX_BUNDLES + 1), f"pending[0].bundles: List should have at most {MAX_BUNDLES} items"),
    ("bundles", [{"CPU": 1}, {"CPU": 0}], "pending[0].bundles[1]: a bundle must ask for some resource"),
    ("bundle_strategy", "PACKED",
     "pending[0].bundle_strategy: Input should be 'PACK', 'SPREAD', 'STRICT_PACK' or 'STRICT_SPREAD'"),
])
def test_bad_bundles_are_refused_naming_the_field(field, value, error):
    document = snapshot(nodes={"a": {"CPU": 4}}, pending=[("1", "u", {}, {field: value})])
    with pytest.raises(ValidationError) as caught:
        Snapshot.model_validate(document)
    assert describe_error(caught.value).startswith(error)
    assert "\n" not in describe_error(caught.value)


@pytest.mark.parametrize("extra, error", [
    ({"bundles": [{"CPU": 1}]}, "running[0].bundle_nodes: required, since running[0].bundles is set"),
    ({"bundles": [{"CPU": 1}], "bundle_nodes": ["a", "a"]}, "running[0].bundle_nodes: 2 nodes for 1 bundles, one per bundle"),
    ({"bundle_nodes": ["a"]}, "running[0].bundle_nodes: 1 nodes for 0 bundles, one per bundle"),
])
def test_a_running_gang_names_one_node_per_bundle(extra, error):
    document = snapshot(nodes={"a": {"CPU": 4}})
    document["running"] = [{"id": "r", "user": "u", "node": "a", "resources": {}, **extra}]
    with pytest.raises(ValidationError) as caught:
        Snapshot.model_validate(document)
    assert describe_error(caught.value) == error


def test_the_footprint_is_the_driver_and_every_bundle():
    assert (footprint({"resources": {"CPU": 0.5}, "bundles": [{"CPU": 2, "GPU": 1}, {"CPU": 2}]})
            == Resources.of({"CPU": 4.5, "GPU": 1}))
    assert footprint({"resources": {"CPU": 1}}) == Resources.of({"CPU": 1})


# Property tests: random snapshots, some of whose jobs have bundles.
BUNDLE_SETS = [[{"CPU": 1}], [{"CPU": 1}] * 2, [{"CPU": 2}] * 3, [{"CPU": 1, "memory": 2**30}, {"GPU": 1}], [{"CPU": 4}] * 2]


@st.composite
def gang_snapshots(draw):
    document = draw(snapshots())
    for job in document["pending"]:
        if draw(st.booleans()):
            job["bundles"] = draw(st.sampled_from(BUNDLE_SETS))
            job["bundle_strategy"] = draw(st.sampled_from(STRATEGIES))
    return document


def _units_on(parts, nodes) -> dict[str, dict[str, int]]:
    held: dict[str, dict[str, int]] = {node: {} for node in nodes}
    for node, amounts in parts:
        for name, amount in amounts.items():
            if node in held:
                held[node][name] = held[node].get(name, 0) + to_units(amount)
    return held


@PROPERTY
@given(gang_snapshots())
def test_no_node_is_over_committed_counting_every_driver_and_bundle(document):
    result = plan(Snapshot.model_validate(document)).document()
    jobs = {job["id"]: job for job in document["pending"]}
    parts = []
    for placement in result["placements"]:
        job = jobs[placement["job"]]
        parts += [(placement["node"], job["resources"]),
                  *zip(placement.get("bundle_nodes", []), job.get("bundles", []), strict=True)]
    ids = [node["id"] for node in document["nodes"]]
    placed_units = _units_on(parts, ids)
    running = _units_on([(job["node"], job["resources"]) for job in document["running"]], ids)
    for node in document["nodes"]:
        for name, amount in placed_units[node["id"]].items():
            total = to_units(node["resources"].get(name, 0))
            room = total - min(to_units(node.get("outside", {}).get(name, 0)), total) - running[node["id"]].get(name, 0)
            assert amount <= max(room, 0), (node["id"], name, amount, room)


@PROPERTY
@given(gang_snapshots())
def test_all_or_nothing_each_placed_gang_has_one_node_per_bundle_by_its_strategy(document):
    result = plan(Snapshot.model_validate(document)).document()
    jobs = {job["id"]: job for job in document["pending"]}
    labels = {node["id"]: node["labels"] for node in document["nodes"]}
    assert sorted([p["job"] for p in result["placements"]] + [w["job"] for w in result["waiting"]]) == sorted(jobs)
    for placement in result["placements"]:
        job = jobs[placement["job"]]
        bundle_nodes = placement.get("bundle_nodes")
        assert (bundle_nodes is None) == ("bundles" not in job)
        if bundle_nodes is None:
            continue
        assert len(bundle_nodes) == len(job["bundles"])
        for node in [placement["node"], *bundle_nodes]:
            assert all(labels[node].get(k) == v for k, v in (job.get("node_labels") or {}).items())
        if job["bundle_strategy"] == "STRICT_SPREAD" and not any(r["job"] == job["id"] for r in document.get("reservations", [])):
            assert len(set(bundle_nodes)) == len(bundle_nodes)
        if job["bundle_strategy"] == "STRICT_PACK":
            assert len(set(bundle_nodes)) == 1


@PROPERTY
@given(snapshots())
def test_jobs_without_bundles_plan_as_the_reference_planner_says(document):
    # The reference planner knows no reservations for the head of the line.
    document["group"]["max_reservations"] = 0
    assert run(document) == reference(document)
