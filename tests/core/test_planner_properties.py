"""Properties of the planner over random small snapshots (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from job.core.planner import Snapshot, plan
from job.core.resources import fits, to_units
from planner_helpers import GIB, at, reference, run, snapshot

NODE_IDS = ["n1", "n2", "n3", "n4", "n5", "n10"]
USERS = ["ann", "bob", "cy"]

# Whole requests and options are drawn from short lists: one draw each keeps examples cheap.
REQUESTS = [
    {}, {"CPU": 1}, {"CPU": 0.5}, {"CPU": 2}, {"CPU": 3}, {"CPU": 4, "memory": 4 * GIB}, {"CPU": 1, "memory": 16 * GIB},
    {"GPU": 1}, {"GPU": 2, "CPU": 1}, {"memory": 2 * GIB}, {"CPU": 1, "licence": 1}, {"CPU": 8},
]
NODE_RESOURCES = [
    {"CPU": 4, "memory": 8 * GIB}, {"CPU": 8, "memory": 4 * GIB}, {"CPU": 2, "memory": 32 * GIB},
    {"CPU": 4, "memory": 16 * GIB, "GPU": 2}, {"CPU": 1, "GPU": 1}, {"CPU": 4, "licence": 2}, {"CPU": 8, "memory": 32 * GIB, "GPU": 1},
]
LABELS = [{}, {}, {"zone": "a"}, {"zone": "b"}, {"zone": "a", "gpu": "yes"}]
# What work outside the queue holds on a node: on resources the node may or may not have, and more
# than any node has.
OUTSIDE = [{"CPU": 1}, {"CPU": 2}, {"CPU": 0.5, "memory": 4 * GIB}, {"CPU": 99}, {"GPU": 1}, {"memory": 64 * GIB}, {"licence": 1}]
JOB_OPTIONS = [
    {"priority": priority, "submitted_at": submitted, "not_before": not_before, "node_labels": labels}
    for priority in (0, 0, 1)
    for submitted in (None, at(-30), at(-30), at(-10))
    for not_before in (None, None, at(-5), at(5))
    for labels in ({}, {}, {}, {"zone": "a"}, {"gpu": "yes"})
]
USER_OPTIONS = [
    {"shares": shares, "usage": usage, **limits}
    for shares in (1, 1, 2)
    for usage in (0, 0, 1800, 7200)
    for limits in ({}, {}, {"max_running": 2}, {"max_resources": {"CPU": 4}})
]
GROUP_OPTIONS = [
    {"resource_priority": priority, "half_life_s": half_life, "strict_order": strict, "max_running_per_user": max_running,
     "max_resources_per_user": max_resources}
    for priority in (["GPU", "CPU", "memory"], ["CPU", "memory"], ["memory", "GPU", "CPU"])
    for half_life in (0, 3600)
    for strict in (False, True)
    for max_running in (None, None, 3)
    for max_resources in (None, None, {"GPU": 1})
]


@st.composite
def snapshots(draw, policy=None, loaded=False):
    """A snapshot; `loaded`: the first node always has outside load."""
    node_ids = draw(st.lists(st.sampled_from(NODE_IDS), min_size=1, max_size=5, unique=True))
    nodes = {ident: (draw(st.sampled_from(NODE_RESOURCES)), draw(st.sampled_from(LABELS))) for ident in node_ids}
    outside = {ident: draw(st.sampled_from(OUTSIDE if loaded and ident == node_ids[0] else [{}, {}, *OUTSIDE])) for ident in node_ids}
    running = [
        (f"r{i}", draw(st.sampled_from(USERS)), draw(st.sampled_from(node_ids + ["gone"])), draw(st.sampled_from(REQUESTS)))
        for i in range(draw(st.integers(0, 4)))
    ]
    # Ids around 9 and 10: "10" must come after "9".
    ids = draw(st.lists(st.integers(1, 12), max_size=10, unique=True))
    pending = [
        (str(ident), draw(st.sampled_from(USERS)), draw(st.sampled_from(REQUESTS)), draw(st.sampled_from(JOB_OPTIONS)))
        for ident in ids
    ]
    users = {name: draw(st.sampled_from(USER_OPTIONS)) for name in draw(st.lists(st.sampled_from(USERS), unique=True))}
    state = draw(st.sampled_from([{}, {"selector.roundrobin": {"next_index": {"": 3, "zone=a": 1}}}]))
    return snapshot(
        policy=policy or draw(st.sampled_from(["fifo", "lifo", "drf", "fairshare"])),
        selector=draw(st.sampled_from(["legacy", "concentrated", "dispersed", "roundrobin"])),
        nodes=nodes,
        running=running,
        pending=pending,
        users=users,
        state=state,
        outside=outside,
        **draw(st.sampled_from(GROUP_OPTIONS)),
    )


# Modest counts: the planner tests stay well under a minute on two shared cores.
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(PROPERTY, max_examples=300)
@given(snapshots())
def test_agrees_with_the_reference_planner(document):
    # The reference planner knows no reservations for the head of the line.
    document["group"]["max_reservations"] = 0
    assert run(document) == reference(document)


@PROPERTY
@given(snapshots())
def test_every_pending_job_is_placed_or_waits_exactly_once(document):
    placements, waiting, _ = run(document)
    placed = [job for job, _ in placements]
    assert len(placed) == len(set(placed))
    assert not set(placed) & set(waiting)
    assert sorted(placed + list(waiting)) == sorted(job["id"] for job in document["pending"])


def _free_after(document: dict, placements) -> dict[str, dict[str, int]]:
    # Outside load holds at most what the node has.
    free = {n["id"]: {r: to_units(a) - min(to_units(n.get("outside", {}).get(r, 0)), to_units(a)) for r, a in n["resources"].items()}
            for n in document["nodes"]}
    needs = {job["id"]: job["resources"] for job in document["pending"]}
    held = [(job["node"], job["resources"]) for job in document["running"]]
    for node, resources in held + [(node, needs[job]) for job, node in placements]:
        for r, a in resources.items():
            if node in free:
                free[node][r] = free[node].get(r, 0) - to_units(a)
    return free


@PROPERTY
@given(snapshots())
def test_no_node_is_over_committed_by_placements(document):
    placements, _, _ = run(document)
    free = _free_after(document, placements)
    needs = {job["id"]: job["resources"] for job in document["pending"]}
    for job, node in placements:
        for r in needs[job]:
            assert free[node].get(r, 0) >= 0, (job, node, r)


@PROPERTY
@given(snapshots())
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
@given(snapshots(loaded=True))
def test_no_node_takes_more_than_its_total_less_outside_load_and_running_jobs(document):
    placements, _, _ = run(document)
    needs = {job["id"]: job["resources"] for job in document["pending"]}
    for node in document["nodes"]:
        room = {r: to_units(a) for r, a in node["resources"].items()}
        for r, a in node.get("outside", {}).items():
            room[r] = room.get(r, 0) - to_units(a)
        for job in document["running"]:
            if job["node"] == node["id"]:
                for r, a in job["resources"].items():
                    room[r] = room.get(r, 0) - to_units(a)
        placed: dict[str, int] = {}
        for job, where in placements:
            if where == node["id"]:
                for r, a in needs[job].items():
                    placed[r] = placed.get(r, 0) + to_units(a)
        for r, amount in placed.items():
            assert amount <= max(room.get(r, 0), 0), (node["id"], r, amount, room)


@PROPERTY
@given(snapshots(loaded=True))
def test_a_message_names_outside_load_exactly_when_it_keeps_the_job_off_a_node(document):
    # About the Resources message: a reservation's message says where the job will start instead.
    document["group"]["max_reservations"] = 0
    result = plan(Snapshot.model_validate(document)).model_dump(mode="json")
    free = _free_after(document, [(p["job"], p["node"]) for p in result["placements"]])
    jobs = {job["id"]: job for job in document["pending"]}
    for waiting in result["waiting"]:
        if waiting["reason"] != "Resources":
            continue
        job = jobs[waiting["job"]]
        need = [(r, to_units(a)) for r, a in job["resources"].items()]
        labels = job.get("node_labels") or {}
        but_for_outside = []
        for node in document["nodes"]:
            if all(node["labels"].get(k) == v for k, v in labels.items()):
                total = {r: to_units(a) for r, a in node["resources"].items()}
                held = {r: min(to_units(a), total.get(r, 0)) for r, a in node.get("outside", {}).items()}
                if fits(need, {r: free[node["id"]].get(r, 0) + held.get(r, 0) for r in total}):
                    but_for_outside.append(node["id"])
        said = waiting["message"].partition(" (work outside the queue holds ")[2]
        assert bool(said) == bool(but_for_outside), (waiting, but_for_outside)
        for ident in sorted(but_for_outside)[:3]:
            assert f" on node {ident}" in said


@PROPERTY
@given(snapshots(policy="fairshare"))
def test_fairshare_with_half_life_zero_plans_as_drf(document):
    document["group"]["half_life_s"] = 0
    as_fairshare = plan(Snapshot.model_validate(document)).model_dump_json()
    document["group"]["policy"] = "drf"
    assert plan(Snapshot.model_validate(document)).model_dump_json() == as_fairshare


@settings(PROPERTY, max_examples=30)
@given(snapshots())
def test_the_same_snapshot_gives_byte_identical_output(document):
    snap = Snapshot.model_validate(document)
    first = plan(snap).model_dump_json()
    assert plan(snap).model_dump_json() == first
    # Also from its own JSON, as `python -m job plan` reads it.
    assert plan(Snapshot.model_validate_json(snap.model_dump_json())).model_dump_json() == first
