"""The tick against a real local Ray cluster and a real PostgreSQL: placement, the lifecycle,
fairness, cancels and limits, crashes at each failpoint, overlapping ticks, and outages."""

from __future__ import annotations

import json
import time

import psycopg
import pytest
from cli_helpers import run_process
from tick_helpers import FINAL, add_group, all_final, jobs, ray_submissions, run_tick, tick_until

from job.api import submit
from job.store.groups import TICK_LOCK_CLASS

pytestmark = pytest.mark.ray

def test_submitted_job_runs_on_the_planned_node_and_succeeds(ray, conn):
    add_group(conn, ray.address)
    job_id = submit(user="alice", group="main", entrypoint="echo hello from the scheduler", resources={"special": 1})
    [result] = run_tick()
    assert result.status == "ticked" and result.placed == 1
    planned = jobs(conn)[job_id]
    assert planned["state"] == "SUBMITTED" and planned["node"] == ray.b_id and planned["attempt"] == 1

    rows = tick_until(conn, all_final)
    assert rows[job_id]["state"] == "SUCCEEDED" and rows[job_id]["exit_code"] == 0
    assert rows[job_id]["started_at"] is not None and rows[job_id]["finished_at"] is not None
    from job.adapters.ray_cluster import cluster_for

    ray_job = cluster_for(ray.address, 10.0).job(planned["submission_id"])
    assert ray_job.driver_node_id == ray.b_id
    logs = run_process("logs", str(job_id))
    assert logs.status == 0 and "hello from the scheduler" in logs.out


def test_round_robin_continues_from_its_row_also_in_a_new_process(ray, conn):
    add_group(conn, ray.address, selector="roundrobin")
    first = submit(user="alice", group="main", entrypoint="true", resources={"CPU": 0.1})
    run_tick()
    second = submit(user="alice", group="main", entrypoint="true", resources={"CPU": 0.1})
    ticked = run_process("tick")
    assert ticked.status == 0, ticked.err
    third = submit(user="alice", group="main", entrypoint="true", resources={"CPU": 0.1})
    run_tick()
    rows = jobs(conn)
    workers = sorted([ray.a_id, ray.b_id])
    assert [rows[first]["node"], rows[second]["node"], rows[third]["node"]] == [workers[0], workers[1], workers[0]]
    state = conn.execute("SELECT document FROM group_state WHERE name = 'selector.roundrobin'").fetchone()
    assert state["document"] == {"next_index": {"": 1}}
    tick_until(conn, all_final)


def test_fair_order_across_users_on_a_saturated_group(ray, conn):
    add_group(conn, ray.address, policy="fairshare", half_life_s=3600)
    # Four CPUs in the group; alice queues first, yet bob gets half as soon as he asks.
    alice = [submit(user="alice", group="main", entrypoint="sleep 4", resources={"CPU": 1}) for _ in range(4)]
    bob = [submit(user="bob", group="main", entrypoint="sleep 4", resources={"CPU": 1}) for _ in range(4)]
    run_tick()
    rows = jobs(conn)
    started = {job_id for job_id, row in rows.items() if row["state"] != "PENDING"}
    assert len(started & set(alice)) == 2 and len(started & set(bob)) == 2
    waiting = [rows[job_id] for job_id in alice + bob if job_id not in started]
    assert all(row["reason"] == "Resources" for row in waiting)
    # Over the next ticks each user's next job takes the next free CPU, alternating.
    rows = tick_until(conn, all_final, timeout=120)
    assert all(rows[job_id]["state"] == "SUCCEEDED" for job_id in alice + bob)
    # Both were charged for what they held, alike: the same work at the same shares.
    usage = {row["user_name"]: row["usage"] for row in conn.execute("SELECT user_name, usage FROM user_usage")}
    assert usage["alice"] > 0 and usage["bob"] > 0
    assert 0.5 < usage["alice"] / usage["bob"] < 2


def test_cancel_pending_and_running_and_max_runtime(ray, conn):
    add_group(conn, ray.address)
    running = submit(user="alice", group="main", entrypoint="sleep 60")
    limited = submit(user="bob", group="main", entrypoint="sleep 60", max_runtime="2s")
    pending = submit(user="carol", group="main", entrypoint="true", not_before="2100-01-01T00:00:00Z")
    run_tick()
    assert jobs(conn)[pending]["reason"] == "NotBefore"
    assert run_process("cancel", str(pending)).status == 0
    assert jobs(conn)[pending]["state"] == "CANCELLED"
    tick_until(conn, lambda rows: rows[running]["state"] == "RUNNING")
    assert run_process("cancel", str(running)).status == 0
    rows = tick_until(conn, all_final)
    assert (rows[running]["state"], rows[running]["reason"]) == ("STOPPED", "Cancelled")
    assert (rows[limited]["state"], rows[limited]["reason"]) == ("STOPPED", "RuntimeLimit")
    assert rows[pending]["submission_id"] is None


@pytest.mark.parametrize("failpoint", ["after-intent", "after-submit"])
def test_crash_at_a_failpoint_loses_nothing_and_runs_nothing_twice(ray, conn, failpoint):
    add_group(conn, ray.address, max_attempts=3)
    ids = [submit(user=user, group="main", entrypoint="true", resources={"CPU": 0.5})
           for user in ("alice", "bob", "alice", "carol")]
    crashed = run_process("tick", env={"JOB_FAILPOINT": failpoint})
    assert crashed.status == -9, crashed.err
    assert "event=failpoint" in crashed.err
    assert {row["state"] for row in jobs(conn).values()} == {"SUBMITTING"}
    rows = tick_until(conn, all_final)
    assert all(row["state"] == "SUCCEEDED" for row in rows.values())
    submissions = ray_submissions(ray.address, conn)
    assert sorted(submissions) == sorted(ids)
    for job_id in ids:
        # One Ray submission, of the first attempt: an intent Ray never got is sent again under its
        # own submission id, not as a new attempt.
        assert list(submissions[job_id]) == [rows[job_id]["submission_id"]]
        assert rows[job_id]["attempt"] == 1


def test_a_tick_skips_a_group_another_tick_holds(ray, conn, database_url):
    add_group(conn, ray.address)
    job_id = submit(user="alice", group="main", entrypoint="true")
    with psycopg.connect(database_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, hashtext('main'))", (TICK_LOCK_CLASS,))
        skipped = run_process("tick")
        assert skipped.status == 0 and "event=group_skipped group=main reason=locked" in skipped.err
        assert jobs(conn)[job_id]["state"] == "PENDING"
    tick_until(conn, all_final)


def test_two_ticks_at_once_submit_each_job_once(ray, conn, database_url):
    import subprocess
    import sys

    add_group(conn, ray.address)
    ids = [submit(user="alice", group="main", entrypoint="true", resources={"CPU": 0.2}) for _ in range(6)]
    both = [subprocess.Popen([sys.executable, "-m", "job", "tick"], stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=120)[1] for process in both]
    assert [process.returncode for process in both] == [0, 0], outputs
    rows = tick_until(conn, all_final)
    submissions = ray_submissions(ray.address, conn)
    assert all(len(submissions[job_id]) == 1 and rows[job_id]["attempt"] == 1 for job_id in ids)


def test_unschedulable_job_waits_and_does_not_block_others(ray, conn):
    add_group(conn, ray.address)
    huge = submit(user="alice", group="main", entrypoint="true", resources={"CPU": 64})
    small = submit(user="alice", group="main", entrypoint="true")
    run_tick()
    rows = jobs(conn)
    assert rows[huge]["state"] == "PENDING" and rows[huge]["reason"] == "Unschedulable"
    assert "CPU 64" in rows[huge]["message"]
    assert rows[small]["state"] == "SUBMITTED"
    shown = json.loads(run_process("show", str(huge), "--json").out)
    assert shown["reason"] == "Unschedulable"
    tick_until(conn, lambda rows: rows[small]["state"] in FINAL)


def test_ray_unreachable_fails_the_group_and_changes_nothing(ray, conn):
    add_group(conn, "http://127.0.0.1:9", name="gone")
    add_group(conn, ray.address, name="main")
    lost = submit(user="alice", group="gone", entrypoint="true")
    fine = submit(user="bob", group="main", entrypoint="true")
    result = run_process("tick")
    assert result.status == 1
    failed = [line for line in result.err.splitlines() if "event=group_failed" in line]
    assert len(failed) == 1 and "group=gone" in failed[0] and "unreachable" in failed[0]
    assert "Traceback" not in result.err
    rows = jobs(conn)
    assert rows[lost]["state"] == "PENDING" and rows[lost]["attempt"] == 0
    assert rows[fine]["state"] == "SUBMITTED"
    tick_until(conn, lambda rows: rows[fine]["state"] in FINAL, group="main")


def test_postgres_unreachable_exits_1_with_a_clear_line():
    result = run_process("tick", env={"JOB_DATABASE_URL": "postgresql://scheduler:hunter2@127.0.0.1:9/jobs"})
    assert result.status == 1
    assert "PostgreSQL at postgresql://scheduler:***@127.0.0.1:9/jobs unreachable" in result.err
    assert "hunter2" not in result.err and "Traceback" not in result.err


def test_dry_run_prints_the_plan_and_changes_nothing(ray, conn):
    add_group(conn, ray.address)
    job_id = submit(user="alice", group="main", entrypoint="true", resources={"special": 1})
    before = jobs(conn)
    result = run_process("tick", "--dry-run")
    assert result.status == 0, result.err
    [line] = result.out.splitlines()
    printed = json.loads(line)
    assert printed["group"] == "main" and printed["placements"] == [{"job": str(job_id), "node": ray.b_id}]
    assert jobs(conn) == before
    assert conn.execute("SELECT count(*) AS n FROM group_state").fetchone()["n"] == 0


def test_loop_ticks_until_its_deadline(ray, conn):
    add_group(conn, ray.address)
    job_id = submit(user="alice", group="main", entrypoint="true")
    result = run_process("loop", "--for", "12s", "--every", "1s")
    assert result.status == 0, result.err
    finished = [line for line in result.err.splitlines() if "event=loop_finished" in line]
    assert len(finished) == 1 and "reason=deadline" in finished[0]
    assert result.err.count("event=group_ticked") >= 2
    assert jobs(conn)[job_id]["state"] != "PENDING"
    tick_until(conn, all_final)


def test_loop_finishes_its_tick_on_sigterm_and_exits_0(ray, conn):
    import signal
    import subprocess
    import sys

    add_group(conn, ray.address)
    job_id = submit(user="alice", group="main", entrypoint="true")
    process = subprocess.Popen([sys.executable, "-m", "job", "loop", "--for", "120s", "--every", "1s"],
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while jobs(conn)[job_id]["state"] == "PENDING":
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "reason=sigterm" in err and "Traceback" not in err
    tick_until(conn, all_final)


def test_bad_row_fails_that_job_not_the_tick(ray, conn):
    add_group(conn, ray.address)
    good = submit(user="alice", group="main", entrypoint="true")
    bad = conn.execute("""INSERT INTO jobs (user_name, group_name, entrypoint, resources)
                          VALUES ('bob', 'main', 'true', '{"CPU": -2}') RETURNING id""").fetchone()["id"]
    [result] = run_tick()
    assert result.status == "ticked"
    rows = jobs(conn)
    assert rows[bad]["state"] == "FAILED" and rows[bad]["reason"] == "InvalidJob" and "CPU" in rows[bad]["message"]
    assert rows[good]["state"] == "SUBMITTED"
    tick_until(conn, all_final)


def test_a_raycluster_not_ready_skips_its_group_and_the_others_go_on(ray, conn, api):
    add_group(conn, "raycluster://ml/absent", name="absent")
    add_group(conn, "raycluster://ml/starting", name="starting")
    add_group(conn, ray.address, name="main")
    api.put("ml", "starting", {})  # just created: KubeRay has written no status yet
    waiting = submit(user="alice", group="absent", entrypoint="true")
    placed = submit(user="bob", group="main", entrypoint="true")
    results = {result.group: result for result in run_tick()}
    assert (results["absent"].status, results["absent"].cause) == ("skipped", "raycluster ml/absent not found")
    assert results["starting"].status == "skipped" and "not ready" in results["starting"].cause
    assert results["main"].status == "ticked"
    rows = jobs(conn)
    assert rows[waiting]["state"] == "PENDING" and rows[placed]["state"] == "SUBMITTED"
    tick_until(conn, lambda rows: rows[placed]["state"] in FINAL, group="main")
