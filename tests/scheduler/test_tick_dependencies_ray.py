"""A chain of dependencies on a real local Ray cluster and a real PostgreSQL, its first job failing:
A, B after A, C after B:any, D after A:fail. B never runs, C and D run once A has ended, placed in
the tick that recorded A's end."""

from __future__ import annotations

import pytest
from tick_helpers import FINAL, add_group, all_final, tick_until

from job.api import submit

pytestmark = pytest.mark.ray


def test_a_chain_whose_first_job_fails(ray, conn):
    add_group(conn, ray.address)
    a = submit(user="alice", group="main", entrypoint="exit 1")
    b = submit(user="alice", group="main", entrypoint="echo b", after=[a])
    c = submit(user="alice", group="main", entrypoint="echo c", after=[f"{b}:any"])
    d = submit(user="bob", group="main", entrypoint="echo d", after=[f"{a}:fail"])
    ended_seen = []

    def seen(rows):
        if rows[a]["state"] not in FINAL:
            assert all(rows[job]["state"] == "PENDING" and rows[job]["attempt"] == 0 for job in (b, c, d)), rows
        elif not ended_seen:
            # The tick that recorded A's end judged its dependents in the same pass.
            ended_seen.append(rows)
            assert rows[b]["state"] == "FAILED"
            assert rows[c]["state"] != "PENDING" and rows[d]["state"] != "PENDING"

    rows = tick_until(conn, all_final, seen=seen)
    assert (rows[a]["state"], rows[a]["exit_code"]) == ("FAILED", 1)
    assert (rows[b]["state"], rows[b]["reason"], rows[b]["message"], rows[b]["attempt"]) == (
        "FAILED", "DependencyNeverSatisfied", f"job {a} ended FAILED, and this job waited for job {a} to succeed", 0)
    for job in (c, d):
        assert (rows[job]["state"], rows[job]["exit_code"]) == ("SUCCEEDED", 0)
        assert rows[job]["started_at"] >= rows[a]["finished_at"]
    kinds = [row["kind"] for row in conn.execute("SELECT kind FROM job_events WHERE job_id = %s ORDER BY id", (d,))]
    assert kinds[:4] == ["queued", "waiting", "dependency_satisfied", "placed"]
