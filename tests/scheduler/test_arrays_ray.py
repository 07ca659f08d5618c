"""An array on a real local Ray cluster and a real PostgreSQL: each task's driver learns its index
and its array in its environment, and the throttle is never exceeded, in the queue or in Ray."""

from __future__ import annotations

import pytest
from tick_helpers import ACTIVE, add_group, all_final, ray_submissions, tick_until

from job.adapters.ray_cluster import cluster_for
from job.api import submit

pytestmark = pytest.mark.ray

# Ray's statuses of a submission not ended: the driver waits for its node, or runs.
NOT_ENDED_IN_RAY = ("PENDING", "RUNNING")


def test_an_array_of_six_runs_at_most_two_at_once_each_task_knowing_its_index(ray, conn):
    add_group(conn, ray.address)
    # Six tasks of half a CPU fit the cluster's four CPUs at once: the throttle alone holds them back.
    array_id = submit(user="alice", group="main", entrypoint="echo index=$JOB_ARRAY_INDEX of=$JOB_ARRAY_ID; sleep 2",
                      resources={"CPU": 0.5}, array="0-5%2")
    tasks = [row["id"] for row in conn.execute("SELECT id FROM jobs WHERE array_id = %s ORDER BY id", (array_id,))]
    assert len(tasks) == 6 and tasks[0] == array_id
    in_queue, in_ray, held = [], [], []

    def sample(rows):
        in_queue.append(sum(rows[task]["state"] in ACTIVE for task in tasks))
        seen = ray_submissions(ray.address, conn)
        in_ray.append(sum(status in NOT_ENDED_IN_RAY for task in tasks for status in seen.get(task, {}).values()))
        held.extend((rows[task]["reason"], rows[task]["message"]) for task in tasks if rows[task]["state"] == "PENDING")

    rows = tick_until(conn, all_final, seen=sample)
    assert [rows[task]["state"] for task in tasks] == ["SUCCEEDED"] * 6, {
        task: (rows[task]["reason"], rows[task]["message"], rows[task]["ray_message"]) for task in tasks}
    # Never more than two, in the queue's books or in Ray's; and two at once at some tick.
    assert max(in_queue) == 2 and max(in_ray) <= 2, (in_queue, in_ray)
    assert ("ArrayThrottle", f"array {array_id} runs 2 of at most 2") in held

    cluster = cluster_for(ray.address, 10.0)
    for index, task in enumerate(tasks):
        assert (rows[task]["array_index"], rows[task]["array_id"]) == (index, array_id)
        assert f"index={index} of={array_id}" in cluster.logs(rows[task]["submission_id"])
