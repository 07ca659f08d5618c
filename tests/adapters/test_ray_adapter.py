"""The Ray adapter against the real test cluster: nodes, pinned submission, idempotent resubmission,
job listing, stop, logs, refusals; an unreachable address and the state API's lists of work."""

from __future__ import annotations

import json
import socket
import time
import uuid

import pytest
import requests

from job import log
from job.adapters.ray_cluster import RayCluster, RaySubmitRefused
from job.core.errors import NotFound, Unavailable
from job.core.observed import Bundle, PlacementGroup, Work
from job.core.resources import Resources

# Every test but the last two needs the local Ray test cluster.
needs_ray = pytest.mark.ray

# The cluster keeps its job history for the whole run (and longer, with JOB_TEST_RAY_ADDRESS).
RUN = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def cluster(ray_cluster) -> RayCluster:
    return RayCluster(ray_cluster.address, timeout_s=10.0)


def sid(name: str) -> str:
    return f"adapter-{RUN}-{name}"


def submit(cluster, name, node_id, entrypoint="true", resources=None, runtime_env=None) -> bool:
    return cluster.submit(submission_id=sid(name), entrypoint=entrypoint, node_id=node_id,
                          resources={"CPU": 0.1} if resources is None else resources,
                          runtime_env=runtime_env or {}, metadata={"test": name})


def wait_for(cluster, name, statuses, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        job = cluster.job(sid(name))
        if job is not None and job.status in statuses:
            return job
        assert time.monotonic() < deadline, f"{sid(name)} still {job and job.status}: {job and job.message}"
        time.sleep(0.5)


@needs_ray
def test_nodes_carry_labels_and_totals_and_the_head_only_when_allowed(cluster, ray_cluster):
    workers = {node.id: node for node in cluster.nodes({}, use_head_node=False)}
    assert set(workers) == {ray_cluster.a_id, ray_cluster.b_id}
    b = workers[ray_cluster.b_id]
    assert b.labels["pool"] == "b" and b.labels["ray.io/node-id"] == b.id and not b.is_head
    assert b.resources["CPU"] == 2 and b.resources["special"] == 1 and b.resources["memory"] > 0
    assert not any(name.startswith("node:") or name == "object_store_memory" for name in b.resources)
    assert "special" not in workers[ray_cluster.a_id].resources

    with_head = {node.id: node for node in cluster.nodes({}, use_head_node=True)}
    assert set(with_head) == {ray_cluster.head_id, ray_cluster.a_id, ray_cluster.b_id}
    assert with_head[ray_cluster.head_id].is_head and with_head[ray_cluster.head_id].resources["CPU"] == 1


@needs_ray
def test_label_selector_keeps_nodes_with_every_label(cluster, ray_cluster):
    assert [n.id for n in cluster.nodes({"pool": "a"}, use_head_node=True)] == [ray_cluster.a_id]
    assert [n.id for n in cluster.nodes({"ray.io/node-id": ray_cluster.b_id, "pool": "b"}, False)] == [ray_cluster.b_id]
    assert cluster.nodes({"ray.io/node-id": ray_cluster.b_id, "pool": "a"}, use_head_node=True) == []
    assert cluster.nodes({"pool": "nowhere"}, use_head_node=True) == []


@needs_ray
def test_submit_runs_on_the_chosen_node_once_and_is_listed(cluster, ray_cluster):
    assert submit(cluster, "pinned", ray_cluster.b_id, entrypoint="echo adapter says $((6 * 7))",
                  resources={"CPU": 0.5, "special": 0.5, "memory": 10 * 2**20})
    # The same submission id again, as after a lost answer: Ray already has it and keeps the first.
    assert submit(cluster, "pinned", ray_cluster.a_id, entrypoint="echo second submission") is False

    job = wait_for(cluster, "pinned", ("SUCCEEDED", "FAILED"))
    assert job.status == "SUCCEEDED", job.message
    assert job.driver_node_id == ray_cluster.b_id
    assert job.exit_code == 0
    assert job.start_time is not None and job.end_time is not None and job.start_time <= job.end_time
    assert job.start_time.utcoffset().total_seconds() == 0

    assert cluster.jobs([sid("pinned"), sid("never-submitted")]) == {sid("pinned"): job}
    logs = cluster.logs(sid("pinned"))
    assert "adapter says 42" in logs and "second submission" not in logs


@needs_ray
def test_unknown_job(cluster):
    assert cluster.job(sid("never-submitted")) is None
    assert cluster.stop(sid("never-submitted")) is False
    with pytest.raises(NotFound):
        cluster.logs(sid("never-submitted"))


@needs_ray
def test_stop_a_running_job(cluster, ray_cluster):
    before = cluster.supervisors()
    assert submit(cluster, "sleeper", ray_cluster.a_id, entrypoint="echo started; sleep 60")
    wait_for(cluster, "sleeper", ("RUNNING",))
    # Its job supervisor is what the loop's wait polls for a job's start or end (scheduler/wake.py).
    running = cluster.supervisors()
    assert len(running - before) == 1 and before <= running, (before, running)
    assert cluster.stop(sid("sleeper")) is True
    job = wait_for(cluster, "sleeper", ("STOPPED", "SUCCEEDED", "FAILED"), timeout=30)
    assert job.status == "STOPPED" and job.end_time is not None
    # Ray reports STOPPED a moment before its supervisor is gone; from then on there is nothing to stop.
    deadline = time.monotonic() + 30
    while cluster.stop(sid("sleeper")) is not False:
        assert time.monotonic() < deadline, "a stopped job still answers stop with True"
        time.sleep(0.5)
    assert cluster.job(sid("sleeper")).status == "STOPPED"
    deadline = time.monotonic() + 30
    while (left := cluster.supervisors()) & (running - before):
        assert time.monotonic() < deadline, f"the stopped job's supervisor is still listed alive: {left}"
        time.sleep(0.5)


@needs_ray
def test_a_submission_ray_refuses(cluster, ray_cluster, monkeypatch):
    # Ray's job agent validates the label selector and refuses this node id; the head wraps that
    # in an HTTP 500, which must not be mistaken for an outage (and retried).
    warnings = []
    monkeypatch.setattr(log, "warning", lambda event_name, **fields: warnings.append(event_name))
    with pytest.raises(RaySubmitRefused, match="Invalid label selector value"):
        submit(cluster, "bad-node", "not a node id!")
    assert "ray_retry" not in warnings
    assert cluster.job(sid("bad-node")) is None


@needs_ray
def test_free_resources_follow_what_runs_on_a_node(cluster, ray_cluster):
    def free_of(node_id):
        [node] = [n for n in cluster.nodes({}, use_head_node=True) if n.id == node_id]
        assert set(node.free) == set(node.resources)
        return node.free

    before = free_of(ray_cluster.b_id)
    assert submit(cluster, "holder", ray_cluster.b_id, entrypoint="sleep 60", resources={"CPU": 1, "special": 1})
    wait_for(cluster, "holder", ("RUNNING",))
    deadline = time.monotonic() + 30
    while (held := free_of(ray_cluster.b_id)) == before:
        assert time.monotonic() < deadline, "Ray's free resources did not change while a job ran"
        time.sleep(0.5)
    assert held["CPU"] == before["CPU"] - 1 and held["special"] == before["special"] - 1
    assert held["memory"] == before["memory"]
    assert cluster.stop(sid("holder"))
    wait_for(cluster, "holder", ("STOPPED",))


@needs_ray
@pytest.mark.parametrize("runtime_env, refusal", [
    ({"working_dir": "/etc"}, "runtime_env.working_dir: '/etc' is not a remote URI"),
    ({"py_modules": ["s3://bucket/m.zip", "."]}, "runtime_env.py_modules[1]: '.' is not a remote URI"),
    ({"pip": "requirements.txt"}, "runtime_env.pip: give a list of requirements"),
    ({"env_vars": {"N": 1}}, "runtime_env.env_vars.N: Input should be a valid string"),
    ({"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "600"}}, "runtime_env.env_vars.RAY_JOB_STOP_WAIT_TIME_S: Ray reads it"),
])
def test_a_runtime_env_written_around_submit_is_refused_before_ray(cluster, ray_cluster, runtime_env, refusal):
    with pytest.raises(RaySubmitRefused) as refused:
        submit(cluster, "bad-env", ray_cluster.a_id, runtime_env=runtime_env)
    assert str(refused.value).startswith(refusal)
    assert cluster.job(sid("bad-env")) is None


@needs_ray
def test_a_job_naming_a_file_of_the_scheduler_reaches_ray_without_its_content(cluster, ray_cluster, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2-" + RUN)
    runtime_env = {"pip": [str(secret)], "env_vars": {"FILE": str(secret)}, "excludes": [str(secret)]}
    # No CPU: Ray builds the pip environment after the stop below, 30 s here and over two minutes
    # on a slow machine, and its supervisor, not alive yet (not listed), would hold what it asked
    # for all along, keeping the next Ray test waiting for an idle cluster.
    assert cluster.submit(submission_id=sid("names-a-file"), entrypoint="true", node_id=ray_cluster.a_id,
                          resources={"CPU": 0}, runtime_env=runtime_env, metadata={"file": str(secret)})
    details = requests.get(f"{ray_cluster.address}/api/jobs/{sid('names-a-file')}", timeout=30).json()
    # Ray has the names as they were sent, and nothing of what the file holds.
    assert details["runtime_env"] == runtime_env and details["metadata"]["file"] == str(secret)
    assert "hunter2" not in json.dumps(details)
    cluster.stop(sid("names-a-file"))


# Needs no Ray cluster: nothing listens at the address.
def test_unreachable_address_is_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cluster = RayCluster(f"http://127.0.0.1:{port}", timeout_s=2.0)
    with pytest.raises(Unavailable, match=rf"ray at http://127.0.0.1:{port} unreachable: connection failed"):
        cluster.jobs(["anything"])


# Needs no Ray cluster: the state API's answers are canned, in its shape.
def test_work_reads_three_filtered_lists_and_names_those_ray_truncated(monkeypatch):
    asked = {}
    actor = {"job_id": "04000000", "node_id": "n1", "required_resources": {"CPU": 1.0}, "placement_group_id": None,
             "name": ""}
    group = {"placement_group_id": "pg1", "creator_job_id": "04000000", "state": "PENDING",
             "bundles": [{"bundle_id": {"placement_group_id": "pg1", "bundle_index": 0}, "unit_resources": {"CPU": 0.5},
                          "node_id": None, "label_selector": {}}]}
    # (records, total, num_after_truncation, num_filtered, partial_failure_warning)
    listed = {"actors": ([actor], 8, 8, 1, ""), "tasks": ([], 30_000, 30_000, 10_001, ""),
              "placement_groups": ([group], 10_001, 10_000, 1, "")}

    def call(self, what, method, path, *, params=None, **_):
        kind = path.rsplit("/", 1)[-1]
        asked[kind] = list(zip(params["filter_keys"], params["filter_predicates"], params["filter_values"], strict=True))
        result, total, kept, passed, warning = listed[kind]
        return {"result": True, "msg": "", "data": {"result": {
            "total": total, "num_after_truncation": kept, "num_filtered": passed,
            "partial_failure_warning": warning, "warnings": None, "result": result}}}

    monkeypatch.setattr(RayCluster, "_call", call)
    work = RayCluster("http://ray.invalid:8265", timeout_s=1.0).work()
    assert asked == {"actors": [("state", "=", "ALIVE")],
                     "tasks": [("state", "=", "RUNNING"), ("type", "=", "NORMAL_TASK")],
                     "placement_groups": [("state", "!=", "REMOVED")]}
    assert work.actors == (Work("04000000", "n1", Resources.of({"CPU": 1})),)
    assert work.placement_groups == (PlacementGroup("pg1", "04000000", "PENDING",
                                                    (Bundle(None, Resources.of({"CPU": 0.5})),)),)
    # Dead actors count in `total` too: only a total above what Ray kept is a truncation, or more
    # records passing the filters than the answer holds.
    assert work.truncated == ("tasks", "placement_groups")


# Needs no Ray cluster: a local server answers every state API list with an error, or a body that
# is not a list's; the tick counts its jobs as declared then (tests/scheduler/test_observe_step.py).
@pytest.mark.parametrize("status, body, said", [
    (500, "Internal Server Error", "HTTP 500"),
    (200, '{"result": true, "msg": "", "data": {}}', "state API answer listing actors lacks 'result'"),
    (200, '{"result": false, "msg": "GCS unavailable", "data": {}}', "state API error listing actors: GCS unavailable"),
])
def test_a_state_api_that_fails_is_unavailable_for_the_work_lists(status, body, said):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cluster = RayCluster(f"http://127.0.0.1:{server.server_port}", timeout_s=1.0, retry_s=0.2)
        with pytest.raises(Unavailable, match=said):
            cluster.work()
    finally:
        server.shutdown()
