"""An array's throttle in the tick, with the pending rows kept from tick to tick as the loop keeps
them (real PostgreSQL; Ray is the table of tests/fake_ray.py: the subject is what the tick gives
the planner and writes): the tasks past the throttle wait with ArrayThrottle, each task sent to Ray
knows its array and its index."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fake_ray import FakeRay, finished, running
from tick_helpers import ACTIVE, add_group, jobs

from job.api import submit
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.scheduler.pending import PendingRows


class Recording(FakeRay):
    """The fake cluster, keeping the environment each submission was sent with."""

    def __init__(self) -> None:
        super().__init__()
        self.env_vars: dict[str, dict[str, str]] = {}

    def submit(self, *, submission_id: str, entrypoint: str, runtime_env: dict, **rest: Any) -> None:
        self.env_vars[submission_id] = runtime_env["env_vars"]
        super().submit(submission_id=submission_id, entrypoint=entrypoint, **rest)


def test_the_throttle_holds_back_the_rest_and_lets_one_in_as_one_ends(conn, database_url, monkeypatch):
    add_group(conn, "http://ray.invalid:8265")
    ray = Recording()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    kept = PendingRows()

    def run() -> dict[int, dict]:
        [result] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "main",
                                 pending=kept)
        assert result.status == "ticked", result.cause
        return jobs(conn)

    array_id = submit(user="alice", group="main", entrypoint="python task.py", array="10-14%2")
    lone = submit(user="bob", group="main", entrypoint="true")
    rows = run()
    tasks = [job_id for job_id in rows if rows[job_id]["array_id"] == array_id]
    assert [rows[task]["state"] in ACTIVE for task in tasks] == [True, True, False, False, False]
    assert rows[lone]["state"] in ACTIVE
    held = {(rows[task]["reason"], rows[task]["message"]) for task in tasks[2:]}
    assert held == {("ArrayThrottle", f"array {array_id} runs 2 of at most 2")}
    sent = [ray.env_vars[rows[task]["submission_id"]] for task in tasks[:2]]
    assert [{name: env[name] for name in ("JOB_ID", "JOB_ARRAY_ID", "JOB_ARRAY_INDEX")} for env in sent] == [
        {"JOB_ID": str(task), "JOB_ARRAY_ID": str(array_id), "JOB_ARRAY_INDEX": str(index)}
        for task, index in zip(tasks[:2], (10, 11), strict=True)]
    assert "JOB_ARRAY_ID" not in ray.env_vars[rows[lone]["submission_id"]]

    # Nothing ended: nothing more. The first ends: the third goes.
    assert sum(row["state"] in ACTIVE for task, row in run().items() if task in tasks) == 2
    first = rows[tasks[0]]["submission_id"]
    ray.known[first] = finished(first, "node-a")
    rows = run()
    assert rows[tasks[0]]["state"] == "SUCCEEDED" and rows[tasks[2]]["state"] in ACTIVE
    assert rows[tasks[3]]["reason"] == "ArrayThrottle"
    assert sum(rows[task]["state"] in ACTIVE for task in tasks) == 2


def test_the_tasks_past_the_throttle_are_estimated_to_start_as_rooms_come_free(conn, database_url, monkeypatch):
    add_group(conn, "http://ray.invalid:8265")
    ray = FakeRay()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    array_id = submit(user="alice", group="main", entrypoint="python task.py", array="0-4%2", max_runtime="10m")
    tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "main")
    for row in jobs(conn).values():
        if row["state"] == "SUBMITTED":
            ray.known[row["submission_id"]] = running(row["submission_id"], row["node"], minutes=0)
    tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "main")
    rows = sorted(jobs(conn).values(), key=lambda row: row["array_index"])
    assert [row["state"] for row in rows] == ["RUNNING", "RUNNING", "PENDING", "PENDING", "PENDING"]
    started = max(row["started_at"] for row in rows[:2])
    # Two rooms: tasks 2 and 3 take them as the first two end, task 4 as task 2 ends.
    expected = [started + timedelta(minutes=10), started + timedelta(minutes=10), started + timedelta(minutes=20)]
    for row, when in zip(rows[2:], expected, strict=True):
        assert abs(row["estimated_start_at"] - when) <= timedelta(seconds=61), (row["id"], row["estimated_start_at"], when)
        assert row["estimate_basis"] == f"when a task of array {array_id} should end (its throttle)"
