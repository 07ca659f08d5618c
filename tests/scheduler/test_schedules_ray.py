"""A schedule on the real Ray cluster: a tick that dies between a slot's intent and its submit, then
two loops ticking the group at once, make one job per slot, each submitted to Ray once, and every
one succeeds."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from cli_helpers import run_cli, run_process
from tick_helpers import add_group, all_final, jobs, ray_submissions, tick_until, wait_for

pytestmark = pytest.mark.ray


def scheduled(conn) -> int:
    return conn.execute("SELECT count(*) AS n FROM jobs WHERE schedule = 'often'").fetchone()["n"]


def test_two_loops_and_a_crash_make_one_job_per_slot_and_they_succeed(ray, conn, capsys):
    add_group(conn, ray.address)
    added = run_cli(capsys, "schedule", "add", "often", "--every", "2s", "--user", "alice", "--group", "main",
                    "--entrypoint", "echo scheduled", "--cpus", "0.2")
    assert added.status == 0, added.err

    # The first slot's tick dies once the slot's job is placed (its intent committed), before Ray
    # is asked: the slot row and its job were written together before that.
    wait_for(lambda: conn.execute("SELECT created_at + interval '2 s' < now() AS due FROM schedules").fetchone()["due"])
    crashed = run_process("tick", env={"JOB_FAILPOINT": "after-intent"})
    assert crashed.status == -9 and "event=failpoint name=after-intent" in crashed.err, crashed.err
    [first] = jobs(conn).values()
    assert (first["state"], first["schedule"], first["attempt"]) == ("SUBMITTING", "often", 1)

    loops = [subprocess.Popen([sys.executable, "-m", "job", "loop", "--for", "120s", "--every", "1s"],
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        wait_for(lambda: scheduled(conn) >= 5, timeout=90)
    finally:
        for loop in loops:
            loop.send_signal(signal.SIGTERM)
        errors = [loop.communicate(timeout=60)[1] for loop in loops]
    assert [loop.returncode for loop in loops] == [0, 0], errors
    assert all("event=group_ticked group=main" in err and "Traceback" not in err for err in errors), errors

    assert run_cli(capsys, "schedule", "pause", "often").status == 0
    rows = tick_until(conn, all_final)
    made = [row for row in rows.values() if row["schedule"] == "often"]
    slots = conn.execute("SELECT slot, job_id FROM schedule_slots WHERE outcome = 'submitted' ORDER BY slot").fetchall()
    # One job per slot, the slot's own; the slots 2 s apart from the schedule's creation.
    assert sorted((row["slot"], row["id"]) for row in made) == [(slot["slot"], slot["job_id"]) for slot in slots]
    assert len(made) == len(rows) >= 5
    created = conn.execute("SELECT created_at FROM schedules").fetchone()["created_at"]
    assert all((row["slot"] - created).total_seconds() % 2 == 0 for row in made)
    # Each ran once in Ray, under its first attempt (the crashed one sent again, not anew), and succeeded.
    submissions = ray_submissions(ray.address, conn)
    for row in made:
        assert row["state"] == "SUCCEEDED", row
        assert (list(submissions[row["id"]]), row["attempt"]) == ([row["submission_id"]], 1)
