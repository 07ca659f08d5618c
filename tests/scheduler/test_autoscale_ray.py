"""The demand of an autoscaling group, registered in the real local Ray cluster and read back
through Ray's own cluster status: it follows the queue up and down, and leaves no job of ours in
Ray. The test cluster has no node with 8 CPUs; the group declares a node type that has them, so
its 8-CPU jobs wait for the cluster to grow (`ScalingUp`), as on a cluster scaled to no worker.
The cluster's autoscaler has no node provider here: nothing is launched, the request is only
recorded, which is what is checked."""

from __future__ import annotations

import json
import time

import pytest
import requests
from psycopg.types.json import Jsonb
from tick_helpers import add_group, jobs, run_tick

from job.api import cancel, submit

pytestmark = pytest.mark.ray

BIG = {"name": "big", "resources": {"CPU": 8}, "labels": {"pool": "big"}, "min": 0, "max": 2}


def requested(address: str) -> list:
    """The bundles request_resources registered, as Ray's cluster status reports them."""
    body = requests.get(f"{address}/api/cluster_status", timeout=10).json()
    report = ((body.get("data") or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}
    return sorted(([bundle, count] for bundle, count in report.get("requestDemand") or []), key=json.dumps)


def ours_in_ray(address: str, conn) -> list[str]:
    installation = conn.execute("SELECT id FROM installation").fetchone()["id"]
    return [job["submission_id"] for job in requests.get(f"{address}/api/jobs/", timeout=30).json()
            if (job.get("submission_id") or "").startswith(f"autoscale-{installation}-")]


def tick_until_requested(conn, address: str, expected: list, timeout: float = 90) -> list:
    deadline = time.monotonic() + timeout
    while True:
        result, = run_tick("scale")
        assert result.status == "ticked", result.cause
        seen = requested(address)
        if seen == expected and not ours_in_ray(address, conn):
            return seen
        assert time.monotonic() < deadline, (seen, result.demand, [
            requests.get(f"{address}/api/jobs/{sid}", timeout=10).json() for sid in ours_in_ray(address, conn)])
        time.sleep(1)


def test_demand_follows_the_queue_and_clears(ray, conn, info_log):
    add_group(conn, ray.address, name="scale", autoscale=True, node_types=Jsonb([BIG]))
    first, second = (submit(user="alice", group="scale", entrypoint="true", resources={"CPU": 8}) for _ in range(2))
    small = submit(user="bob", group="scale", entrypoint="sleep 600", resources={"CPU": 0.5})

    result, = run_tick("scale")
    rows = jobs(conn)
    assert [rows[i]["reason"] for i in (first, second)] == ["ScalingUp", "ScalingUp"]
    assert "waits for the cluster to add a node of type big" in rows[first]["message"]
    assert rows[small]["state"] in ("SUBMITTED", "RUNNING")
    # The running job's request counts too: the autoscaler sizes the cluster for all at once.
    assert result.demand == "1x{CPU 0.5}; 2x{CPU 8}" and result.demand_sent

    assert tick_until_requested(conn, ray.address, [[{"CPU": 0.5}, 1], [{"CPU": 8}, 2]])
    cancel([first], conn=conn)
    assert tick_until_requested(conn, ray.address, [[{"CPU": 0.5}, 1], [{"CPU": 8}, 1]])
    cancel([second], conn=conn)
    # Nothing waits: the request is emptied, so that the autoscaler may remove idle nodes.
    assert tick_until_requested(conn, ray.address, []) == []
    cancel([small], conn=conn)
