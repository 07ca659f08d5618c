"""Properties of the planner over random small snapshots (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from planner_helpers import PROPERTY, reference, run, said_as_waiting, snapshots

from job.core.planner import Snapshot, plan
from job.core.resources import fits, to_units


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
    free = {n["id"]: {r: to_units(a) - min(to_units(n.get("outside", {}).get(r, 0)), to_units(a))
                      for r, a in n["resources"].items()}
            for n in document["nodes"]}
    needs = {job["id"]: job["resources"] for job in document["pending"]}
    held = [(job["node"], job["resources"]) for job in document["running"]]
    for node, resources in held + [(node, needs[job]) for job, node in placements]:
        for r, a in resources.items():
            if node in free:
                free[node][r] = free[node].get(r, 0) - to_units(a)
    return free


@PROPERTY
@given(snapshots(loaded=True))
def test_the_grouped_waiting_records_are_the_waiting_records(document):
    assert said_as_waiting(plan(Snapshot.model_validate(document)))


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
