"""Failure classes against a real local Ray cluster and a real PostgreSQL: a driver Ray cannot start
on a busy node is stopped and requeued (NodeBusy), a driver whose runtime environment Ray builds is
left to start, and a node that dies under a running job requeues it (InfraFailure); each then
succeeds on another node, one Ray submission per attempt. A node that dies under one of a gang's
bundles requeues it too, and it then waits for the nodes it needs."""

from __future__ import annotations

import http.server
import io
import sys
import threading
import time
import uuid
import zipfile
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from fixtures_ray import HEAD, WORKER_A, WORKER_B
from tick_helpers import FINAL, add_group, jobs, ray_submissions, run_tick, tick_until, wait_for

from job import log
from job.adapters.ray_cluster import RayCluster
from job.api import cancel, submit
from job.devtools.local_ray import LocalRayCluster
from job.scheduler import submit as submit_step

pytestmark = pytest.mark.ray

@pytest.fixture
def requeued(monkeypatch):
    """The `requeued` log lines of the test's ticks, as their fields."""
    lines = []
    warning = log.warning

    def record(event_name, **fields):
        if event_name == "requeued":
            lines.append(fields)
        warning(event_name, **fields)

    monkeypatch.setattr(log, "warning", record)
    return lines


# --- node death, on a cluster of the test's own ----------------------------------------------------


@pytest.fixture
def own_cluster():
    """A head and two workers (pool=a, pool=b) for this test alone: it kills a node. At the end,
    every process of it ends, those the dead node left behind too."""
    local = LocalRayCluster(HEAD, [WORKER_A, WORKER_B])
    left: list[psutil.Process] = []
    try:
        local.start()
        yield local, left
    finally:
        left.extend(local.processes())
        local.stop()
        for process in left:
            try:
                if process.is_running():
                    process.kill()
            except psutil.NoSuchProcess:
                pass


def raylet_of(local: LocalRayCluster, pool: str) -> psutil.Process:
    """The raylet of the node labelled pool=POOL, among the cluster's processes: the child of the
    `ray start` that was given that label."""
    [start] = [p for p in local.processes() if "start" in _cmdline(p) and f"pool={pool}" in _cmdline(p)]
    [raylet] = [p for p in start.children(recursive=True) if p.name() == "raylet"]
    return raylet


def _cmdline(process: psutil.Process) -> list[str]:
    """Its command line; none for a process that ended since it was listed (a worker Ray let go)."""
    try:
        return process.cmdline()
    except psutil.NoSuchProcess:
        return []


def test_a_node_that_dies_under_a_running_job_requeues_it_and_it_runs_on_the_other(own_cluster, conn, tmp_path,
                                                                                     requeued):
    local, left = own_cluster
    add_group(conn, local.dashboard_url)
    marker = Path(tmp_path) / "first-attempt"
    # The first attempt runs until its node dies; the next one finds the marker and ends.
    entrypoint = f"if [ -e {marker} ]; then echo again; else touch {marker} && exec sleep 600; fi"
    job_id = submit(user="alice", group="main", entrypoint=entrypoint, resources={"CPU": 1})
    rows = tick_until(conn, lambda rows: rows[job_id]["state"] == "RUNNING" and marker.exists())
    first = rows[job_id]
    cluster = RayCluster(local.dashboard_url, timeout_s=10.0)
    [node] = [n for n in cluster.nodes({}, use_head_node=False) if n.id == first["node"]]
    other = [n.id for n in cluster.nodes({}, use_head_node=False) if n.id != node.id]
    raylet = raylet_of(local, node.labels["pool"])
    # What the dead node leaves behind (its driver among them) is ended at the end of the test.
    left.extend(local.processes())
    raylet.kill()

    rows = tick_until(conn, lambda rows: rows[job_id]["state"] in FINAL, timeout=180)
    assert len(requeued) == 1, requeued
    [line] = requeued
    assert line["job"] == job_id and line["reason"] == "InfraFailure" and line["state"] == "PENDING"
    assert line["message"].startswith(f"its node {node.id} died under it (JOB_SUPERVISOR_ACTOR_DIED): ")
    done = rows[job_id]
    assert (done["state"], done["exit_code"]) == ("SUCCEEDED", 0)
    assert [done["node"]] == other and done["attempt"] == 2 and done["requeues"] == 1
    assert done["submitted_at"] == first["submitted_at"]
    assert ray_submissions(local.dashboard_url, conn)[job_id] == {first["submission_id"]: "FAILED",
                                                                  done["submission_id"]: "SUCCEEDED"}
    assert cluster.job(first["submission_id"]).error_type == "JOB_SUPERVISOR_ACTOR_DIED"


GANG_DRIVER = Path(__file__).resolve().parents[1] / "examples" / "gang_driver.py"


def test_a_node_that_dies_under_a_gang_s_bundle_requeues_it_and_it_waits_for_two_nodes(own_cluster, conn, requeued):
    local, left = own_cluster
    add_group(conn, local.dashboard_url)
    cluster = RayCluster(local.dashboard_url, timeout_s=10.0)
    job_id = submit(user="bob", group="main", entrypoint=f"{sys.executable} {GANG_DRIVER} 600", resources={"CPU": 0},
                    bundles=[{"CPU": 2}, {"CPU": 2}], bundle_strategy="STRICT_SPREAD")
    rows = tick_until(conn, lambda rows: rows[job_id]["state"] == "RUNNING", timeout=60)
    first = rows[job_id]
    workers = {node.id: node for node in cluster.nodes({}, use_head_node=False)}
    assert sorted(first["bundle_nodes"]) == sorted(workers) and first["node"] in workers

    def claimed():
        """the driver's own placement group, created on both workers"""
        return [group for group in cluster.work().placement_groups
                if group.state == "CREATED" and sorted(bundle.node for bundle in group.bundles) == sorted(workers)]

    wait_for(claimed, timeout=60)
    [dead] = [node_id for node_id in workers if node_id != first["node"]]
    raylet = raylet_of(local, workers[dead].labels["pool"])
    left.extend(local.processes())
    raylet.kill()

    # Ray keeps the driver running and its placement group waits for a node: only the tick, once
    # Ray's alive nodes lack the dead one, stops the job and puts it back in the queue.
    rows = tick_until(conn, lambda rows: rows[job_id]["state"] == "PENDING", timeout=120)
    [line] = requeued
    assert line["job"] == job_id and line["reason"] == "InfraFailure" and line["state"] == "PENDING"
    assert line["message"].startswith(f"its bundle's node {dead} died under it (gone from the group's alive nodes"), line
    # STRICT_SPREAD needs two workers; one is left.
    rows = tick_until(conn, lambda rows: rows[job_id]["reason"] == "Unschedulable", timeout=30)
    waiting = rows[job_id]
    assert waiting["message"] == "needs 2 bundles of CPU 2 on separate nodes; in group main, 1 node has room even when empty"
    assert (waiting["state"], waiting["attempt"], waiting["requeues"]) == ("PENDING", 1, 1)
    assert waiting["submitted_at"] == first["submitted_at"]
    assert (waiting["node"], waiting["bundle_nodes"]) == (None, None), "a requeued job keeps no planned node"

    def stopped():
        submissions = ray_submissions(local.dashboard_url, conn)[job_id]
        return submissions if submissions.get(first["submission_id"]) == "STOPPED" else None

    # One submission for its one attempt, stopped by the tick (Ray did not fail it on its own).
    assert wait_for(stopped) == {first["submission_id"]: "STOPPED"}
    print(line["message"], waiting["message"], sep="\n")
    cancel([job_id])
    assert jobs(conn)[job_id]["state"] == "CANCELLED"


# --- start timeout ------------------------------------------------------------------------------


def test_a_driver_ray_cannot_start_on_a_busy_node_is_requeued_and_runs_elsewhere(ray, conn, monkeypatch, requeued):
    # Short, but longer than Ray takes to start a driver on this busy two-core machine.
    add_group(conn, ray.address, start_timeout_s=20)
    cluster = RayCluster(ray.address, timeout_s=10.0)
    job_id = submit(user="alice", group="main", entrypoint="sleep 1 && echo ran", resources={"CPU": 2})
    outside = f"outside-{uuid.uuid4().hex[:8]}"
    submit_intents = submit_step.submit_intents

    def busy_first(ray_cluster, group, intents, concurrency):
        # Right after the plan, before the submission reaches Ray: work outside the queue takes
        # every CPU of the node the job was placed on.
        [intent] = intents
        cluster.submit(submission_id=outside, entrypoint="sleep 300", node_id=intent.node, resources={"CPU": 2},
                       runtime_env={}, metadata={})
        wait_for(lambda: cluster.job(outside).status == "RUNNING")
        return submit_intents(ray_cluster, group, intents, concurrency)

    monkeypatch.setattr(submit_step, "submit_intents", busy_first)
    try:
        run_tick()
        monkeypatch.setattr(submit_step, "submit_intents", submit_intents)
        first = jobs(conn)[job_id]
        assert (first["state"], first["attempt"]) == ("SUBMITTED", 1) and first["accepted_at"] is not None
        busy_node = first["node"]

        said = []

        def seen(rows):
            row = rows[job_id]
            if row["state"] == "SUBMITTED" and row["attempt"] == 1:
                said.append((row["reason"], row["message"]))

        rows = tick_until(conn, lambda rows: rows[job_id]["state"] in FINAL, seen=seen)
        # While Ray held it, the job said why (once Ray's report of the node's free CPUs caught up).
        assert any(reason == "NodeBusy" and message.startswith("Ray has not started the driver for ")
                   and "the node's CPUs are held by work outside the queue (free CPU 0; it needs CPU 2)" in message
                   for reason, message in said), said
        assert len(requeued) == 1, requeued
        [line] = requeued
        assert line["job"] == job_id and line["reason"] == "NodeBusy" and line["state"] == "PENDING"
        assert line["message"].startswith("Ray did not start the driver within the group's start timeout of 20s "
                                          f"on node {busy_node}: the node's CPUs are held by work outside the queue")
        done = rows[job_id]
        assert (done["state"], done["exit_code"]) == ("SUCCEEDED", 0)
        assert done["node"] != busy_node and done["attempt"] == 2 and done["requeues"] == 1
        assert done["submitted_at"] == first["submitted_at"]
    finally:
        cluster.stop(outside)
    # One Ray submission per attempt: the first, stopped in Ray (Ray ends it once the node frees),
    # and the second, which ran.
    first_id, second_id = first["submission_id"], done["submission_id"]

    def first_stopped():
        submissions = ray_submissions(ray.address, conn)[job_id]
        return submissions if submissions.get(first_id) == "STOPPED" else None

    assert wait_for(first_stopped) == {first_id: "STOPPED", second_id: "SUCCEEDED"}


class _SlowZip(http.server.BaseHTTPRequestHandler):
    """A working_dir package served after `delay` seconds: Ray builds the runtime env that long."""

    delay = 0.0
    body = b""

    def do_GET(self):
        time.sleep(self.delay)
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@contextmanager
def slow_working_dir(delay_s: float):
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("code/marker.txt", "built\n")
    handler = type("Handler", (_SlowZip,), {"delay": delay_s, "body": package.getvalue()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # A new name each time: Ray caches a package by its URI on each node.
        yield f"http://127.0.0.1:{server.server_address[1]}/code-{uuid.uuid4().hex[:8]}.zip"
    finally:
        server.shutdown()
        server.server_close()


def test_a_driver_whose_runtime_env_ray_builds_is_not_a_busy_node(ray, conn, requeued):
    # Ray holds the driver's two CPUs while it builds its runtime env: the node shows nothing free,
    # yet nothing outside the queue holds it, and it is not requeued however long the build takes.
    add_group(conn, ray.address, start_timeout_s=3)
    with slow_working_dir(15) as url:
        job_id = submit(user="alice", group="main", entrypoint="cat marker.txt || cat code/marker.txt",
                        resources={"CPU": 2},
                        runtime_env={"working_dir": url})
        said = []

        def seen(rows):
            row = rows[job_id]
            if row["state"] == "SUBMITTED":
                said.append((row["reason"], row["message"], (row["updated_at"] - row["accepted_at"]).total_seconds()))

        rows = tick_until(conn, lambda rows: rows[job_id]["state"] in FINAL, seen=seen)
    assert requeued == []
    done = rows[job_id]
    assert (done["state"], done["attempt"], done["requeues"]) == ("SUCCEEDED", 1, 0)
    # Seen waiting past its start timeout, and said so.
    assert any(reason == "RuntimeEnv" and waited > 3 and message.startswith("Ray has not started the driver for ")
               and message.endswith(": its runtime environment is being set up") for reason, message, waited in said), said
    # Before its first reconciliation, just accepted, it has no reason yet.
    assert {reason for reason, _, _ in said} <= {"RuntimeEnv", "Starting", None}, said
