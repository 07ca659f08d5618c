"""The gateway with the local Ray cluster and real ticks: a waiting `ray job submit` streams the
job's output once the queue runs it and exits as Ray's would (0, or 1 when the job failed), a
`--working-dir` folder reaches the job through the gateway's package forwarding, logs come from
Ray, and a running job stopped through the gateway is stopped in Ray by the next tick."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import ALICE, GROUP, RAY, headers, ray_cli
from ray.job_submission import JobStatus, JobSubmissionClient
from tick_helpers import add_group, run_tick, tick_until, wait_for

pytestmark = pytest.mark.ray


@pytest.fixture
def group(conn, ray):
    add_group(conn, ray.address, name=GROUP, users=(), use_head_node=False)
    return GROUP


def submit_and_follow(gateway, token, *argv: str, cwd=None) -> subprocess.Popen:
    """`ray job submit ...` without --no-wait: it follows the job's log until the job ends."""
    return subprocess.Popen([RAY, "job", "submit", "--address", gateway.address(), "--headers",
                             json.dumps(headers(token)), *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=cwd)


def named(conn) -> dict[str, dict]:
    return {row["gateway_id"]: row for row in conn.execute(
        "SELECT j.*, s.submission_id AS gateway_id FROM gateway_submissions s JOIN jobs j ON j.id = s.job_id")}


def test_a_waiting_ray_job_submit_streams_the_output_once_the_queue_runs_it(gateway, users, group, conn, tmp_path):
    token = users[ALICE]
    code = tmp_path / "code"
    code.mkdir()
    (code / "data.txt").write_text("read from the working dir\n")
    (code / "run.py").write_text("print(open('data.txt').read().strip(), flush=True)\n")
    followers = {
        "ok": submit_and_follow(gateway, token, "--submission-id", "ok", "--", "python", "-c",
                                "print('hello from the queue')"),
        "fails": submit_and_follow(gateway, token, "--submission-id", "fails", "--", "python", "-c",
                                   "import sys; print('about to fail', flush=True); sys.exit(3)"),
        "workdir": submit_and_follow(gateway, token, "--submission-id", "workdir", "--working-dir", str(code), "--",
                                     "python", "run.py"),
    }
    sdk = JobSubmissionClient(gateway.address(), headers=headers(token))
    sdk.submit_job(entrypoint="python -c 'print(1)'", submission_id="too-big", entrypoint_num_cpus=64)
    wait_for(lambda: len(named(conn)) == 4)
    assert all(p.poll() is None for p in followers.values()), "a waiting submit must follow its job, not exit"
    assert named(conn)["workdir"]["runtime_env"]["working_dir"].startswith("gcs://_ray_pkg_")

    run_tick()
    big = sdk.get_job_info("too-big")
    assert big.status == JobStatus.PENDING and big.message.startswith(named(conn)["too-big"]["reason"] + ": "), big
    assert "CPU 64" in big.message
    assert sdk.stop_job("too-big")

    tick_until(conn, lambda rows: all(row["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") for row in rows.values()))
    outputs = {name: process.communicate(timeout=60)[0] for name, process in followers.items()}
    codes = {name: process.returncode for name, process in followers.items()}
    assert codes == {"ok": 0, "fails": 1, "workdir": 0}, outputs
    assert "hello from the queue" in outputs["ok"] and "Job 'ok' succeeded" in outputs["ok"]
    assert "about to fail" in outputs["fails"] and "Job 'fails' failed" in outputs["fails"]
    assert "read from the working dir" in outputs["workdir"]

    assert sdk.get_job_status("ok") == JobStatus.SUCCEEDED
    assert sdk.get_job_info("fails").driver_exit_code == 3
    logs = ray_cli(gateway, token, "logs", "ok")
    assert logs.status == 0 and "hello from the queue" in logs.out, logs
    assert {job.submission_id: job.status for job in sdk.list_jobs()} == {
        "ok": JobStatus.SUCCEEDED, "fails": JobStatus.FAILED, "workdir": JobStatus.SUCCEEDED, "too-big": JobStatus.STOPPED}


def test_stop_of_a_running_job_is_carried_out_in_ray(gateway, users, group, conn):
    token = users[ALICE]
    sdk = JobSubmissionClient(gateway.address(), headers=headers(token))
    sdk.submit_job(entrypoint="python -c \"import time; print('started', flush=True); time.sleep(120)\"",
                   submission_id="long")
    tick_until(conn, lambda rows: [row["state"] for row in rows.values()] == ["RUNNING"])
    wait_for(lambda: "started" in sdk.get_job_logs("long"))
    # `ray job stop` waits until the job has ended, which the ticks meanwhile carry out in Ray.
    stopping = subprocess.Popen([RAY, "job", "stop", "--address", gateway.address(), "--headers",
                                 json.dumps(headers(token)), "long"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: conn.execute("SELECT cancel_requested_at FROM jobs").fetchone()["cancel_requested_at"])
    tick_until(conn, lambda rows: [row["state"] for row in rows.values()] == ["STOPPED"])
    out, _ = stopping.communicate(timeout=60)
    assert stopping.returncode == 0 and "Job 'long' was stopped" in out, out
    assert sdk.get_job_status("long") == JobStatus.STOPPED
