"""A job with bundles on the real local cluster (issue 20): it waits, saying what is missing, while
a worker is busy with another queue job; is placed whole once the worker frees; its driver's own
placement group of the planned bundles is ready within seconds; and no other job is placed on its
room while it runs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from cli_helpers import run_process
from tick_helpers import add_group, jobs, run_tick, tick_until

from job.api import cancel, submit

pytestmark = pytest.mark.ray

DRIVER = Path(__file__).resolve().parents[1] / "examples" / "gang_driver.py"


def test_a_gang_waits_then_runs_whole_and_holds_its_room(ray, conn):
    add_group(conn, ray.address)
    busy = submit(user="alice", group="main", entrypoint="sleep 60", resources={"CPU": 2}, node_labels={"pool": "a"})
    [result] = run_tick()
    assert result.placed == 1
    submitted = run_process("submit", "--user", "bob", "--group", "main", "--cpus", "0",
                            "--bundle", "2xCPU=2", "--bundle-strategy", "STRICT_SPREAD",
                            "--entrypoint", f"{sys.executable} {DRIVER} 6")
    assert submitted.status == 0, submitted.err
    gang = int(submitted.out)
    run_tick()
    waiting = jobs(conn)[gang]
    assert (waiting["state"], waiting["reason"]) == ("PENDING", "Resources")
    assert "2 bundles of CPU 2 on separate nodes; 1 node has room" in waiting["message"], waiting["message"]

    cancel([busy])
    rows = tick_until(conn, lambda rows: rows[gang]["state"] != "PENDING", timeout=30)
    assert sorted(rows[gang]["bundle_nodes"]) == sorted([ray.a_id, ray.b_id])
    assert rows[busy]["state"] == "STOPPED"
    shown = run_process("show", str(gang))
    assert f"CPU=2 on {ray.a_id}" in shown.out and f"CPU=2 on {ray.b_id}" in shown.out, shown.out

    tick_until(conn, lambda rows: rows[gang]["state"] == "RUNNING", timeout=30)
    other = submit(user="carol", group="main", entrypoint="true", resources={"CPU": 1})
    run_tick()
    assert (jobs(conn)[other]["state"], jobs(conn)[other]["reason"]) == ("PENDING", "Resources"), (
        jobs(conn)[other]["node"], jobs(conn)[gang], ray)

    def held_while_running(rows):
        if rows[gang]["state"] == "RUNNING":
            assert rows[other]["state"] == "PENDING", f"job {other} placed on the gang's room"

    rows = tick_until(conn, lambda rows: rows[gang]["state"] not in ("SUBMITTED", "RUNNING"), timeout=40,
                      seen=held_while_running)
    assert rows[gang]["state"] == "SUCCEEDED", rows[gang]["ray_message"]
    logs = run_process("logs", str(gang))
    ready = re.search(r"placement group ready=True after ([0-9.]+) s", logs.out)
    assert ready and float(ready[1]) < 10, logs.out
    print(logs.out, shown.out, waiting["message"])
    cancel([other])
