"""What our running jobs really hold (core/observed.py): per job, per node, from the state API's
records; ours and, beside it, outside load per node; the fallback when Ray truncated a list; the charge."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job.core import states
from job.core.group_snapshot import outside_load
from job.core.job import ActiveJob
from job.core.observed import (
    SUPERVISOR_PREFIX,
    Bundle,
    ClusterWork,
    Observed,
    PlacementGroup,
    RunningJob,
    Work,
    held_by,
    observe,
    over,
    record,
)
from job.core.resources import Resources


@dataclass(frozen=True)
class Node:
    id: str
    resources: dict[str, float]
    free: dict[str, float] | None


def cpu(amount: float) -> Resources:
    return Resources.of({"CPU": amount})


def ours(seen: Observed) -> dict[str, Resources]:
    """What counts as ours on each node: every job's use there and what it has not claimed yet."""
    parts: dict[str, list[Resources]] = {}
    for use in seen.jobs.values():
        for node, held in use.held().items():
            parts.setdefault(node, []).append(held)
    return {node: Resources.total(held) for node, held in parts.items()}


def outside(nodes: list[Node], jobs: list[RunningJob], seen: Observed) -> dict[str, dict[str, float]]:
    """The outside load the tick's snapshot gives the nodes beside these running jobs' use."""
    active = [ActiveJob(id=job.id, user_name=job.user, state=states.RUNNING, resources={}, node=job.node, attempt=1,
                        submission_id=job.submission_id) for job in jobs]
    return outside_load(nodes, active, (), seen)


def supervisor(submission_id: str, node: str, amount: float) -> Work:
    # Its job id is the dashboard's, shared by every supervisor: never the driver's.
    return Work(job_id="01000000", node=node, resources=cpu(amount), name=SUPERVISOR_PREFIX + submission_id)


GREEDY = RunningJob(id=42, user="greedy", submission_id="q-42-1", driver_job_id="04000000", node="a", driver=cpu(0.5))
GANG = RunningJob(id=7, user="gang", submission_id="q-7-1", driver_job_id="05000000", node="a", driver=cpu(0.5),
                  bundles=(Bundle("a", cpu(1)), Bundle("b", cpu(1))))

# Greedy's driver on a, its three 1-CPU actors on a, b and the head, a placement group of two
# 0.5 bundles on b, a task in that group (on its bundle, not counted again) and one outside it.
GREEDY_WORK = ClusterWork(
    actors=(supervisor("q-42-1", "a", 0.5), *(Work("04000000", node, cpu(1)) for node in ("a", "b", "head")),
            Work("04000000", "b", cpu(0.5), placement_group="pg1")),
    tasks=(Work("04000000", "b", cpu(0.25), placement_group="pg1"), Work("04000000", "a", cpu(0.25))),
    placement_groups=(PlacementGroup("pg1", "04000000", "CREATED", (Bundle("b", cpu(0.5)), Bundle("b", cpu(0.5)))),),
)
NODES = [Node("a", {"CPU": 2}, {"CPU": 0.25}), Node("b", {"CPU": 2}, {"CPU": 0}), Node("head", {"CPU": 1}, {"CPU": 0})]


def test_a_job_is_charged_its_driver_placement_groups_actors_and_tasks_on_their_nodes():
    seen = observe([GREEDY], GREEDY_WORK)
    use = seen.jobs[42]
    assert use.observed == {"a": cpu(1.75), "b": cpu(2), "head": cpu(1)}
    assert use.declared == {"a": cpu(0.5)} and use.unclaimed == {}
    assert (use.placement_groups, use.actors, use.tasks) == (1, 3, 1)
    assert use.charged() == cpu(4.75)
    assert ours(seen) == use.observed and seen.fallback is None
    # Node a: 2 - 0.25 free - 1.75 ours is nothing outside; the others are all ours.
    assert outside(NODES, [GREEDY], seen) == {}


def test_outside_load_is_what_ray_holds_beyond_ours_never_negative():
    other = Work("09000000", "a", cpu(1))  # a job of nobody in the queue
    seen = observe([GREEDY], ClusterWork(actors=(supervisor("q-42-1", "a", 0.5), other)))
    assert ours(seen) == {"a": cpu(0.5)}
    nodes = [Node("a", {"CPU": 2, "GPU": 1}, {"CPU": 0.5, "GPU": 1}), Node("b", {"CPU": 2}, {"CPU": 2.5}),
             Node("c", {"CPU": 2}, None)]
    assert outside(nodes, [GREEDY], seen) == {"a": {"CPU": 1}}


def test_declared_bundles_stay_in_the_books_until_the_jobs_own_work_covers_them():
    nothing_yet = observe([GANG], ClusterWork(actors=(supervisor("q-7-1", "a", 0.5),))).jobs[7]
    assert nothing_yet.unclaimed == {"a": cpu(1), "b": cpu(1)}
    assert nothing_yet.held() == {"a": cpu(1.5), "b": cpu(1)}

    # Its own placement group, of its own shape and wherever Ray put it, covers the first bundle.
    one_pg = ClusterWork(actors=(supervisor("q-7-1", "a", 0.5),), placement_groups=(
        PlacementGroup("pg", "05000000", "CREATED", (Bundle("c", cpu(0.5)), Bundle("c", cpu(0.5)))),))
    use = observe([GANG], one_pg).jobs[7]
    assert use.observed == {"a": cpu(0.5), "c": cpu(1)} and use.unclaimed == {"b": cpu(1)}
    assert use.charged() == cpu(2.5)

    # A pending placement group holds nothing yet: the books still do.
    pending = ClusterWork(actors=(supervisor("q-7-1", "a", 0.5),), placement_groups=(
        PlacementGroup("pg", "05000000", "PENDING", (Bundle(None, cpu(1)), Bundle(None, cpu(1)))),))
    assert observe([GANG], pending).jobs[7].unclaimed == {"a": cpu(1), "b": cpu(1)}


@pytest.mark.parametrize("driver_job_id, work, observed, unclaimed", [
    # Accepted, supervisor not yet alive: the driver's request is in the books on its node.
    (None, ClusterWork(), {}, {"a": cpu(0.5)}),
    # Supervisor alive, before ray.init(): the driver only; another job's actors are not its.
    (None, ClusterWork(actors=(supervisor("q-42-1", "a", 0.5), Work("04000000", "b", cpu(1)))), {"a": cpu(0.5)}, {}),
    # Another submission's supervisor is not its driver.
    ("04000000", ClusterWork(actors=(supervisor("q-42-2", "a", 0.5),)), {}, {"a": cpu(0.5)}),
])
def test_a_driver_is_its_supervisor_by_name_and_its_work_by_its_driver_job_id(driver_job_id, work, observed, unclaimed):
    job = RunningJob(id=42, user="greedy", submission_id="q-42-1", driver_job_id=driver_job_id, node="a",
                     driver=cpu(0.5))
    use = observe([job], work).jobs[42]
    assert (use.observed, use.unclaimed) == (observed, unclaimed)


def test_a_truncated_list_counts_every_job_as_declared_and_says_so():
    seen = observe([GREEDY, GANG], ClusterWork(actors=GREEDY_WORK.actors, truncated=("tasks",)))
    assert seen.fallback == "ray truncated its list of tasks: counting what each job declared, not what it uses"
    assert seen.jobs[42].held() == {"a": cpu(0.5)} and seen.jobs[42].observed == {}
    assert ours(seen) == {"a": cpu(2), "b": cpu(1)}
    assert seen.jobs[7].charged() == cpu(2.5)


def test_the_charge_is_the_larger_of_declared_and_observed_per_resource():
    job = RunningJob(id=1, user="u", submission_id="s", driver_job_id="02000000", node="a",
                     driver=Resources.of({"CPU": 4, "memory": 2**30}))
    work = ClusterWork(actors=(Work("01000000", "a", Resources.of({"CPU": 4, "memory": 2**30}), name=SUPERVISOR_PREFIX + "s"),
                               Work("02000000", "b", Resources.of({"GPU": 1}))))
    assert observe([job], work).jobs[1].charged() == Resources.of({"CPU": 4, "memory": 2**30, "GPU": 1})


def test_held_by_names_the_job_its_user_its_use_and_its_declaration():
    seen = observe([GREEDY], ClusterWork(actors=GREEDY_WORK.actors[:4]))
    assert held_by(GREEDY, seen.jobs[42]) == "held by job 42 of greedy, which uses CPU 3.5 and declared CPU 0.5"


NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def test_the_record_gives_declared_used_and_charged_what_ray_says_it_is_and_since_when_it_is_over():
    use = observe([GREEDY], GREEDY_WORK).jobs[42]
    assert over(use)
    assert record(use, None, NOW) == {
        "declared": {"CPU": 0.5}, "used": {"CPU": 4.75}, "charged": {"CPU": 4.75},
        "nodes": {"a": {"CPU": 1.75}, "b": {"CPU": 2}, "head": {"CPU": 1}},
        "placement_groups": 1, "actors": 3, "tasks": 1, "over_since": NOW.isoformat()}
    # Still over: since when is kept, so that the grace runs from the start.
    earlier = record(use, None, NOW - timedelta(seconds=30))
    assert record(use, earlier, NOW) == earlier


def test_a_job_within_its_declaration_is_not_over_and_its_record_says_since_nothing():
    use = observe([GREEDY], ClusterWork(actors=(supervisor("q-42-1", "a", 0.5),))).jobs[42]
    assert not over(use)
    was_over = {"over_since": (NOW - timedelta(minutes=5)).isoformat()}
    assert record(use, was_over, NOW)["over_since"] is None
    # Not yet started: in the books, observed nothing, never over.
    assert not over(observe([GREEDY], ClusterWork()).jobs[42])


# --- properties ----------------------------------------------------------------------------------

NODE_IDS = ("a", "b", "c")
JOB_IDS = ("02000000", "03000000", "04000000")
amounts = st.integers(min_value=0, max_value=8).map(lambda quarters: cpu(quarters / 4))
maybe_node = st.sampled_from((*NODE_IDS, None))
works = st.builds(Work, job_id=st.sampled_from((*JOB_IDS, "09000000")), node=maybe_node, resources=amounts,
                  placement_group=st.sampled_from((None, "pg")))
groups = st.builds(PlacementGroup, id=st.just("pg"), creator_job_id=st.sampled_from(JOB_IDS),
                   state=st.sampled_from(("CREATED", "PENDING")),
                   bundles=st.lists(st.builds(Bundle, node=maybe_node, resources=amounts), max_size=3).map(tuple))
cluster_work = st.builds(ClusterWork, actors=st.lists(works, max_size=6).map(tuple),
                         tasks=st.lists(works, max_size=6).map(tuple),
                         placement_groups=st.lists(groups, max_size=3).map(tuple),
                         truncated=st.sampled_from(((), ("tasks",))))
running = st.lists(st.builds(RunningJob, id=st.integers(0, 1000), user=st.just("u"), submission_id=st.just("s"),
                             driver_job_id=st.sampled_from((*JOB_IDS, None)), node=st.sampled_from(NODE_IDS),
                             driver=amounts,
                             bundles=st.lists(st.builds(Bundle, node=st.sampled_from(NODE_IDS), resources=amounts),
                                              max_size=3).map(tuple)),
                   max_size=3, unique_by=lambda job: job.id)
node_views = st.lists(st.tuples(st.integers(0, 16), st.integers(-4, 16)), min_size=3, max_size=3).map(
    lambda sizes: [Node(node_id, {"CPU": total / 4}, {"CPU": free / 4})
                   for node_id, (total, free) in zip(NODE_IDS, sizes, strict=True)])


@settings(max_examples=300, deadline=None)
@given(running, cluster_work, node_views)
def test_outside_load_is_never_negative_and_with_ours_covers_what_ray_holds(jobs, work, nodes):
    seen = observe(jobs, work)
    found = outside(nodes, jobs, seen)
    for node in nodes:
        held = cpu(node.resources["CPU"]).get("CPU") - cpu(node.free["CPU"]).get("CPU")
        load = cpu(found.get(node.id, {}).get("CPU", 0)).get("CPU")
        assert 0 <= load <= max(held, 0)
        assert ours(seen).get(node.id, Resources()).get("CPU") + load >= held


@settings(max_examples=300, deadline=None)
@given(running, cluster_work)
def test_each_job_is_charged_at_least_its_declaration_in_any_order_of_the_records(jobs, work):
    seen = observe(jobs, work)
    assert set(seen.jobs) == {job.id for job in jobs}
    for job in jobs:
        use = seen.jobs[job.id]
        declared = Resources.total([job.driver, *(bundle.resources for bundle in job.bundles)])
        observed = Resources.total(use.observed.values())
        assert all(use.charged().get(name) == max(declared.get(name), observed.get(name))
                   for name in {*declared, *observed})
        # What is ours of a job covers its declaration: claimed by its work, or still in the books.
        # (The generated work has no supervisor, whose request Ray makes exactly the declared one.)
        assert declared.fits_in(Resources.total(use.held().values()))
    # The same records in another order give the same answer.
    reversed_work = ClusterWork(work.actors[::-1], work.tasks[::-1], work.placement_groups[::-1], work.truncated)
    assert observe(jobs[::-1], reversed_work) == seen
