"""What a job really uses, read from the real test cluster: a driver that declares CPU 0.5 and
starts three 1-CPU actors and a placement group is seen holding all of it, on the nodes Ray put it,
matched to its submission id; once stopped, none of it is left."""

from __future__ import annotations

import shlex
import time
import uuid

import pytest

from job.adapters.ray_cluster import RayCluster
from job.core import states
from job.core.group_snapshot import outside_load
from job.core.job import ActiveJob
from job.core.observed import RunningJob, held_by, observe
from job.core.resources import Resources

pytestmark = pytest.mark.ray

DRIVER = """
import time
import ray
from ray.util.placement_group import placement_group

ray.init()


@ray.remote(num_cpus=1)
class Holder:
    def ping(self):
        return 1


holders = [Holder.remote() for _ in range(3)]
ray.get([holder.ping.remote() for holder in holders])
group = placement_group([{"CPU": 0.5}, {"CPU": 0.5}])
ray.get(group.ready())
print(f"holding {len(holders)} actors", flush=True)
time.sleep(600)
"""
READY = "holding 3 actors"  # the entrypoint's echo of the script holds the f-string, not this


def running_job(cluster: RayCluster, submission_id: str, node: str) -> RunningJob:
    driver_job_id = cluster.jobs([submission_id])[submission_id].driver_job_id
    return RunningJob(id=42, user="greedy", submission_id=submission_id, driver_job_id=driver_job_id, node=node,
                      driver=Resources.of({"CPU": 0.5}))


def held_per_node(cluster: RayCluster) -> dict[str, Resources]:
    """What Ray itself counts as used on each node: total less free."""
    return {node.id: held for node in cluster.nodes({}, use_head_node=True)
            if (held := Resources.of(node.resources) - Resources.of(node.free or node.resources))}


def eventually(check, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_job_is_seen_using_its_actors_and_placement_group_until_it_stops(ray_cluster):
    cluster = RayCluster(ray_cluster.address, timeout_s=10.0)
    submission_id = f"observe-{uuid.uuid4().hex[:8]}"
    assert cluster.submit(submission_id=submission_id, entrypoint="python -c " + shlex.quote(DRIVER),
                          node_id=ray_cluster.a_id, resources={"CPU": 0.5}, runtime_env={}, metadata={})
    try:
        def started():
            assert READY in cluster.logs(submission_id)

        eventually(started, 40.0)
        job = running_job(cluster, submission_id, ray_cluster.a_id)
        assert job.driver_job_id

        def seen_whole():
            work = cluster.work()
            nodes = cluster.nodes({}, use_head_node=True)
            seen = observe([job], work)
            use = seen.jobs[42]
            assert not work.truncated and seen.fallback is None
            assert (use.placement_groups, use.actors, use.tasks) == (1, 3, 0)
            # The driver's 0.5 and three actors are 3.5; the group's two bundles another 1.
            assert Resources.total(use.observed.values()) == Resources.of({"CPU": 4.5})
            # Per node, Ray counts all of it as used there, and what else it counts is outside
            # load: work of others, which need not be in the lists (an earlier test's supervisor
            # still building its runtime env holds its request while PENDING_CREATION, nodeless).
            held = held_per_node(cluster)
            assert all(resources.fits_in(held.get(node, {})) for node, resources in use.observed.items())
            active = [ActiveJob(id=42, user_name="greedy", state=states.RUNNING, resources={"CPU": 0.5},
                                node=ray_cluster.a_id, attempt=1, submission_id=submission_id)]
            assert outside_load(nodes, active, (), seen) == {
                node: left.amounts() for node, resources in held.items()
                if (left := resources - use.observed.get(node, Resources()))}
            assert use.unclaimed == {}
            return work, use

        work, use = eventually(seen_whole)
        [group] = [g for g in work.placement_groups if g.creator_job_id == job.driver_job_id]
        assert group.state == "CREATED" and [b.resources for b in group.bundles] == [Resources.of({"CPU": 0.5})] * 2
        [driver] = [a for a in work.actors if a.name == f"_ray_internal_job_actor_{submission_id}"]
        assert driver.node == ray_cluster.a_id and driver.job_id != job.driver_job_id
        assert use.charged() == Resources.of({"CPU": 4.5})
        assert held_by(job, use) == "held by job 42 of greedy, which uses CPU 4.5 and declared CPU 0.5"
    finally:
        cluster.stop(submission_id)

    def gone():
        use = observe([job], cluster.work()).jobs[42]
        assert (use.observed, use.placement_groups, use.actors) == ({}, 0, 0)
        # Not running any more, its driver's request is only what the books would hold.
        assert use.unclaimed == {ray_cluster.a_id: Resources.of({"CPU": 0.5})}

    eventually(gone)
