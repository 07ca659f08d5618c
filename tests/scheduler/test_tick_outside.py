"""Outside load on the real local Ray cluster: work the queue did not place (a plain Ray job) holds a
worker's CPUs; the tick plans around it, and uses that worker again once the work has ended."""

from __future__ import annotations

import time
import uuid

import pytest

from job.adapters.ray_cluster import cluster_for
from job.api import submit
from job.cli.scheduler import tick_config
from job.scheduler import tick

pytestmark = pytest.mark.ray


def add_group(conn, address):
    conn.execute("INSERT INTO resource_groups (name, clusters, policy, selector, half_life_s) "
                 "VALUES ('main', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %s::text)), "
                 "'fifo', 'dispersed', 0)", (address,))
    conn.execute("INSERT INTO users (name) VALUES ('alice') ON CONFLICT DO NOTHING")


def rows(conn, ids) -> dict[int, dict]:
    return {row["id"]: row for row in conn.execute("SELECT * FROM jobs WHERE id = ANY(%s)", (ids,))}


def wait_until(what, check, timeout=60):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"still not {what}"
        time.sleep(0.5)
    return found


def free_cpus(cluster, node_id) -> float:
    [node] = [n for n in cluster.nodes({}, use_head_node=True) if n.id == node_id]
    return node.free["CPU"]


def test_jobs_keep_off_a_worker_held_by_outside_load_until_it_ends(ray_cluster, conn):
    cluster = cluster_for(ray_cluster.address, 10.0)
    add_group(conn, ray_cluster.address)
    outside = f"outside-{uuid.uuid4().hex[:8]}"
    # A plain Ray job, not the queue's, holding both CPUs of worker a.
    assert cluster.submit(submission_id=outside, entrypoint="sleep 120", node_id=ray_cluster.a_id,
                          resources={"CPU": 2}, runtime_env={}, metadata={})
    try:
        wait_until("holding worker a", lambda: free_cpus(cluster, ray_cluster.a_id) == 0)
        ids = [submit(user="alice", group="main", entrypoint="sleep 30", resources={"CPU": 1}) for _ in range(4)]
        tick.run_tick(tick_config(), "main")
        placed = rows(conn, ids)
        # Dispersed would spread them two and two; worker a has no CPU free for them.
        assert sorted(row["node"] for row in placed.values() if row["state"] != "PENDING") == [ray_cluster.b_id] * 2
        waiting = [row for row in placed.values() if row["state"] == "PENDING"]
        assert len(waiting) == 2 and all(row["reason"] == "Resources" for row in waiting)
        assert all("outside" in row["message"] for row in waiting), [row["message"] for row in waiting]

        cluster.stop(outside)
        wait_until("worker a free again", lambda: free_cpus(cluster, ray_cluster.a_id) == 2)
        tick.run_tick(tick_config(), "main")
        now = rows(conn, ids)
        assert sorted(row["node"] for row in now.values()) == sorted([ray_cluster.a_id] * 2 + [ray_cluster.b_id] * 2)
    finally:
        cluster.stop(outside)
        for row in conn.execute("SELECT submission_id FROM jobs WHERE submission_id IS NOT NULL"):
            cluster.stop(row["submission_id"])
