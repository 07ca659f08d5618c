"""bench/chaos.py as a test: one loop process, 20 jobs, on a private PostgreSQL and a Ray cluster of
the script's own; the postmaster killed and started again, then the dashboard, then a worker killed
under a running job. Every job succeeds exactly once, the loop is the same process throughout and
exits 0, no traceback; the stall of each fault is printed (the script measures it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

CHAOS = Path(__file__).resolve().parents[2] / "bench" / "chaos.py"


@pytest.mark.timeout(660)
def test_one_loop_rides_out_a_postmaster_a_dashboard_and_a_worker_killed():
    done = subprocess.run([sys.executable, str(CHAOS)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(done.stdout.splitlines()[-1])
    print(json.dumps(summary["faults"]))
    jobs = summary["jobs"]
    assert jobs == 20
    assert summary["succeeded"] == summary["succeeded_once_in_ray"] == summary["jobs_run_to_completion_once"] == jobs
    assert summary["completed_runs"] == jobs, "a job ran to completion twice"
    assert summary["same_loop_process"] and summary["loop_rc"] == 0, summary
    [finished] = summary["loop_finished"]
    assert finished["status"] == 0 and finished["reason"] == "sigterm", finished
    assert summary["database_unavailable_lines"] == 1
    assert summary["tracebacks"] == 0 and summary["not_json"] == [], summary
    faults = {fault["fault"]: fault for fault in summary["faults"]}
    assert set(faults) == {"postmaster killed", "dashboard killed", "worker killed"}
    for fault in faults.values():
        assert fault["stall_s"] > 0
