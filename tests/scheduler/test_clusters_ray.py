"""A group over two real local Ray clusters and a real PostgreSQL: the run's shared cluster (east: a
head, workers pool=a and pool=b) and a second one started here (west: a head and one worker with
the label disk=ssd). Jobs spread over both; a label only west has is honoured; a gang is placed in
one cluster; west killed under a running job: every tick succeeds, the job is requeued once west is
lost, and it succeeds in east."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from psycopg.types.json import Jsonb
from tick_helpers import FINAL, add_group, jobs, run_tick

from job.api import submit
from job.devtools.local_ray import GIB, MIB, LocalRayCluster, NodeSpec

pytestmark = pytest.mark.ray

WEST_HEAD = NodeSpec(cpus=1, memory_bytes=1 * GIB, object_store_bytes=100 * MIB)
WEST_WORKER = NodeSpec(cpus=2, labels={"disk": "ssd"}, memory_bytes=1 * GIB, object_store_bytes=100 * MIB)
GANG_DRIVER = Path(__file__).resolve().parents[1] / "examples" / "gang_driver.py"
# Sleeps long on its first attempt (the one west runs when it is killed), briefly on the next.
FIRST_LONG = "python -c \"import os, time; time.sleep(600 if os.environ['JOB_ATTEMPT'] == '1' else 1)\""


@pytest.fixture
def west():
    cluster = LocalRayCluster(WEST_HEAD, [WEST_WORKER])
    try:
        yield cluster, cluster.start()
    finally:
        cluster.stop()


def ticked_until(conn, done, timeout=180):
    """Ticks once a second until `done(rows)`; every tick must succeed."""
    deadline = time.monotonic() + timeout
    while True:
        results = run_tick("main")
        assert [r.status for r in results] == ["ticked"], [(r.status, r.cause) for r in results]
        rows = jobs(conn)
        if done(rows):
            return rows
        assert time.monotonic() < deadline, {i: (r["state"], r["reason"], r["message"]) for i, r in rows.items()}
        time.sleep(1)


def test_one_queue_over_two_clusters(ray, conn, west):
    west_cluster, west_address = west
    add_group(conn, ray.address, clusters=Jsonb([{"name": "east", "address": ray.address},
                                                 {"name": "west", "address": west_address}]),
              cluster_lost_after_s=5, policy="fifo")
    plain = [submit(user="alice", group="main", entrypoint="sleep 2") for _ in range(3)]
    ssd = submit(user="bob", group="main", entrypoint="echo ssd", node_labels={"disk": "ssd"})
    # Two bundles on two nodes: only east has two workers.
    gang = submit(user="carol", group="main", entrypoint=f"python {GANG_DRIVER} 2", resources={"CPU": 0.5},
                  bundles=[{"CPU": 1}, {"CPU": 1}], bundle_strategy="STRICT_SPREAD")
    rows = ticked_until(conn, lambda rows: all(row["state"] in FINAL for row in rows.values()))
    assert {rows[job]["state"] for job in rows} == {"SUCCEEDED"}, rows
    assert {rows[job]["cluster"] for job in plain} == {"east", "west"}
    assert rows[ssd]["cluster"] == "west"
    east_nodes = {ray.a_id, ray.b_id}
    assert rows[gang]["cluster"] == "east"
    assert {rows[gang]["node"], *rows[gang]["bundle_nodes"]} <= east_nodes

    # East busy for a while; X has room only in west, where it runs when west is killed.
    busy = [submit(user="alice", group="main", entrypoint="sleep 10", resources={"CPU": 2}, node_labels={"pool": pool})
            for pool in ("a", "b")]
    x = submit(user="bob", group="main", entrypoint=FIRST_LONG, resources={"CPU": 2})
    rows = ticked_until(conn, lambda rows: rows[x]["state"] == "RUNNING" and rows[busy[0]]["state"] == "RUNNING")
    assert rows[x]["cluster"] == "west" and rows[x]["attempt"] == 1
    west_cluster.stop()
    rows = ticked_until(conn, lambda rows: rows[x]["state"] in FINAL, timeout=240)
    assert (rows[x]["state"], rows[x]["cluster"], rows[x]["attempt"], rows[x]["requeues"]) == ("SUCCEEDED", "east", 2, 1)
    reasons = [row["reason"] for row in conn.execute("SELECT reason FROM job_events WHERE job_id = %s AND kind = "
                                                     "'requeued'", (x,))]
    assert reasons == ["ClusterLost"]
