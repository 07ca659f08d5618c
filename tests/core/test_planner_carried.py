"""The carried picture (core/planner/carried.py): a plan from it is the plan of the snapshot it
stands for, plan after plan, and each plan gives it back as it found it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import structs
from planner_helpers import PROPERTY, snapshot, snapshots

from job.core.planner import Snapshot, plan
from job.core.planner.carried import Carried
from job.core.planner.snapshot import Running


def _fresh(document: Snapshot, carried_jobs: list[Running]) -> dict:
    """The plan of the snapshot the carried picture stands for: its jobs first."""
    whole = document.model_copy(update={"running": [*carried_jobs, *document.running]})
    return plan(whole).model_dump(mode="json")


def _frees(carried: Carried) -> dict[str, dict[str, int]]:
    return {node.id: node.free for node in carried.nodes}


@PROPERTY
@given(snapshots(), st.data())
def test_a_plan_from_the_carried_picture_is_the_plan_of_the_whole_snapshot(document, data):
    whole = Snapshot.model_validate(document)
    kept = data.draw(st.lists(st.booleans(), min_size=len(whole.running), max_size=len(whole.running)))
    carried = Carried(whole.nodes, whole.group)
    for job, keep in zip(whole.running, kept, strict=True):
        if keep:
            carried.put(job)
    rest = whole.model_copy(update={"running": [job for job, keep in zip(whole.running, kept, strict=True) if not keep]})
    before = {ident: dict(free) for ident, free in _frees(carried).items()}
    assert plan(rest, carried).model_dump(mode="json") == plan(whole).model_dump(mode="json")
    assert _frees(carried) == before


@PROPERTY
@given(snapshots(), st.data())
def test_plan_after_plan_with_jobs_started_and_ended_between(document, data):
    """Each plan's placements start, some running jobs end, its reservations and state go into the
    next plan: every plan from the one carried picture is that of a fresh planner, and the picture
    is that of one made from the jobs then running."""
    current = Snapshot.model_validate(document)
    carried = Carried(current.nodes, current.group)
    held: list[Running] = []
    for job in current.running:
        if data.draw(st.booleans()):
            carried.put(job)
            held.append(job)
    current = current.model_copy(update={"running": [job for job in current.running if job not in held]})
    for _ in range(3):
        result = plan(current, carried)
        assert result.model_dump(mode="json") == _fresh(current, held)
        again = Carried(current.nodes, current.group)
        for job in held:
            again.put(job)
        assert _frees(carried) == _frees(again)
        pending = {job.id: job for job in current.pending}
        for placement in result.placements:
            job = pending.pop(placement["job"])
            started = Running(id=job.id, user=job.user, node=placement["node"], resources=job.resources)
            carried.put(started)
            held.append(started)
        for job in list(held):
            change = data.draw(st.sampled_from(["keep", "end", "grow"]))
            if change == "end":
                carried.drop(job.id)
                held.remove(job)
            elif change == "grow":
                # As a node's sum of running jobs changes: the job of that id, put again.
                grown = structs.replace(job, resources={**job.resources, "CPU": job.resources.get("CPU", 0) + 1})
                carried.put(grown)
                held[held.index(job)] = grown
        current = current.model_copy(update={"pending": list(pending.values()), "state": {**current.state, **result.state},
                                             "reservations": result.reservations or []})


def test_the_picture_holds_plain_jobs_of_a_group_that_does_not_preempt():
    document = Snapshot.model_validate(snapshot(nodes={"a": {"CPU": 4}}, pending=[("1", "ann", {"CPU": 1})]))
    carried = Carried(document.nodes, document.group)
    with pytest.raises(ValueError, match="plain jobs"):
        carried.put(Running(id="r1", user="ann", node="a", resources={"CPU": 1}, bundles=[{"CPU": 1}]))
    carried.put(Running(id="r1", user="ann", node="a", resources={"CPU": 2}))
    # Put again, the job of that id is replaced.
    carried.put(Running(id="r1", user="ann", node="a", resources={"CPU": 1}))
    preempting = document.model_copy(update={"group": document.group.model_copy(update={"preemption": "priority"})})
    with pytest.raises(ValueError, match="does not preempt"):
        plan(preempting, carried)
    # A refused plan leaves the picture as it was.
    assert _frees(carried) == {"a": {"CPU": 30000}}


def test_a_job_that_ends_gives_back_a_resource_the_node_has_not():
    document = Snapshot.model_validate(snapshot(nodes={"a": {"CPU": 4}}))
    carried = Carried(document.nodes, document.group)
    carried.put(Running(id="r1", user="ann", node="a", resources={"CPU": 1, "GPU": 1}))
    assert _frees(carried) == {"a": {"CPU": 30000, "GPU": -10000}}
    carried.drop("r1")
    assert _frees(carried) == {"a": {"CPU": 40000}}


@pytest.mark.parametrize("selector, node", [("dispersed", "b"), ("concentrated", "a")])
def test_the_kept_selector_hears_of_the_snapshots_own_running_jobs(selector, node):
    """Plan after plan with the same picture, a running job of the snapshot's own (not the
    picture's) on node a: the most free is b, the least a, every time."""
    document = Snapshot.model_validate(snapshot(
        selector=selector, nodes={"a": {"CPU": 8}, "b": {"CPU": 8}}, running=[("r1", "bob", "a", {"CPU": 2})],
        pending=[("1", "ann", {"CPU": 1})]))
    carried = Carried(document.nodes, document.group)
    for _ in range(3):
        assert [(p["job"], p["node"]) for p in plan(document, carried).placements] == [("1", node)]
