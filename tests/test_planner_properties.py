"""Properties of the planner over random small snapshots (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from job.planner import Snapshot, plan
from job.planner.resources import fits, to_units
from test_planner_support import GIB, at, reference, run, snapshot

NODE_IDS = ["n1", "n2", "n3", "n4", "n5", "n10"]
USERS = ["ann", "bob", "cy"]

amounts = {
    "CPU": st.sampled_from([0, 0.5, 1, 2, 3, 4, 8]),
    "GPU": st.sampled_from([0, 0, 1, 2]),
    "memory": st.sampled_from([0, 1 * GIB, 2 * GIB, 4 * GIB, 16 * GIB]),
    "licence": st.sampled_from([0, 0, 0, 1]),
}


def resources(scale: int = 1):
    return st.fixed_dictionaries({name: values.map(lambda v: v * scale) for name, values in amounts.items()}).map(
        lambda r: {k: v for k, v in r.items() if v}
    )


labels = st.sampled_from([{}, {}, {"zone": "a"}, {"zone": "b"}, {"zone": "a", "gpu": "yes"}])


@st.composite
def snapshots(draw, policy=None):
    node_ids = draw(st.lists(st.sampled_from(NODE_IDS), min_size=1, max_size=5, unique=True))
    nodes = {ident: (draw(resources(scale=draw(st.sampled_from([1, 2, 4])))), draw(labels)) for ident in node_ids}
    running = [
        (f"r{i}", draw(st.sampled_from(USERS)), draw(st.sampled_from(node_ids + ["gone"])), draw(resources()))
        for i in range(draw(st.integers(0, 4)))
    ]
    pending = []
    for i in range(draw(st.integers(0, 12))):
        extra = {
            "priority": draw(st.sampled_from([0, 0, 1])),
            "submitted_at": draw(st.sampled_from([None, at(-30), at(-30), at(-10)])),
            "not_before": draw(st.sampled_from([None, None, at(-5), at(5)])),
            "node_labels": draw(st.sampled_from([{}, {}, {}, {"zone": "a"}, {"gpu": "yes"}])),
        }
        pending.append((str(draw(st.sampled_from([i, i + 8]))) if i < 2 else str(i + 2), draw(st.sampled_from(USERS)), draw(resources()), extra))
    users = {
        name: {
            "shares": draw(st.sampled_from([1, 1, 2])),
            "usage": draw(st.sampled_from([0, 0, 1800, 7200])),
            **draw(st.sampled_from([{}, {}, {"max_running": 2}, {"max_resources": {"CPU": 4}}])),
        }
        for name in draw(st.lists(st.sampled_from(USERS), unique=True))
    }
    group = {
        "resource_priority": draw(st.sampled_from([["GPU", "CPU", "memory"], ["CPU", "memory"], ["memory", "GPU", "CPU"]])),
        "half_life_s": draw(st.sampled_from([0, 3600])),
        "strict_order": draw(st.booleans()),
        "max_running_per_user": draw(st.sampled_from([None, None, 3])),
        "max_resources_per_user": draw(st.sampled_from([None, None, {"GPU": 1}])),
    }
    state = draw(st.sampled_from([{}, {"selector.roundrobin": {"next_index": {"": 3, "zone=a": 1}}}]))
    return snapshot(
        policy=policy or draw(st.sampled_from(["fifo", "lifo", "drf", "fairshare"])),
        selector=draw(st.sampled_from(["legacy", "concentrated", "dispersed", "roundrobin"])),
        nodes=nodes,
        running=running,
        pending=pending,
        users=users,
        state=state,
        **group,
    )


def _unique_ids(document: dict) -> bool:
    ids = [job["id"] for job in document["pending"]]
    return len(set(ids)) == len(ids)


# Modest counts: the planner tests stay well under a minute on two shared cores.
PROPERTY = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@settings(PROPERTY, max_examples=120)
@given(snapshots().filter(_unique_ids))
def test_agrees_with_the_reference_planner(document):
    assert run(document) == reference(document)


@PROPERTY
@given(snapshots().filter(_unique_ids))
def test_every_pending_job_is_placed_or_waits_exactly_once(document):
    placements, waiting, _ = run(document)
    placed = [job for job, _ in placements]
    assert len(placed) == len(set(placed))
    assert not set(placed) & set(waiting)
    assert sorted(placed + list(waiting)) == sorted(job["id"] for job in document["pending"])


def _free_after(document: dict, placements) -> dict[str, dict[str, int]]:
    free = {n["id"]: {r: to_units(a) for r, a in n["resources"].items()} for n in document["nodes"]}
    needs = {job["id"]: job["resources"] for job in document["pending"]}
    held = [(job["node"], job["resources"]) for job in document["running"]]
    for node, resources in held + [(node, needs[job]) for job, node in placements]:
        for r, a in resources.items():
            if node in free:
                free[node][r] = free[node].get(r, 0) - to_units(a)
    return free


@PROPERTY
@given(snapshots().filter(_unique_ids))
def test_no_node_is_over_committed_by_placements(document):
    placements, _, _ = run(document)
    free = _free_after(document, placements)
    needs = {job["id"]: job["resources"] for job in document["pending"]}
    for job, node in placements:
        for r in needs[job]:
            assert free[node].get(r, 0) >= 0, (job, node, r)


@PROPERTY
@given(snapshots().filter(_unique_ids))
def test_no_job_waits_for_resources_that_a_candidate_node_has_free(document):
    placements, waiting, _ = run(document)
    free = _free_after(document, placements)
    for job in document["pending"]:
        if waiting.get(job["id"]) != "Resources":
            continue
        need = [(r, to_units(a)) for r, a in job["resources"].items()]
        labels = job.get("node_labels") or {}
        for node in document["nodes"]:
            if all(node["labels"].get(k) == v for k, v in labels.items()):
                assert not fits(need, free[node["id"]]), (job["id"], node["id"])


@PROPERTY
@given(snapshots(policy="fairshare").filter(_unique_ids))
def test_fairshare_with_half_life_zero_plans_as_drf(document):
    document["group"]["half_life_s"] = 0
    as_fairshare = plan(Snapshot.model_validate(document)).model_dump_json()
    document["group"]["policy"] = "drf"
    assert plan(Snapshot.model_validate(document)).model_dump_json() == as_fairshare


@settings(PROPERTY, max_examples=30)
@given(snapshots().filter(_unique_ids))
def test_the_same_snapshot_gives_byte_identical_output(document):
    snap = Snapshot.model_validate(document)
    first = plan(snap).model_dump_json()
    assert plan(snap).model_dump_json() == first
    # Also from its own JSON, as `python -m job plan` reads it.
    assert plan(Snapshot.model_validate_json(snap.model_dump_json())).model_dump_json() == first
