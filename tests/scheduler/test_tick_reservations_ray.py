"""A reservation for the head of the line against a real local Ray cluster and a real PostgreSQL:
a job that needs a whole node drains it while small jobs keep coming. Small jobs that end before
its expected start use the room it holds (backfill); those that would end later, or whose end is
not known, keep off it; and it starts there."""

from __future__ import annotations

import pytest
from tick_helpers import add_group, jobs, tick_until

from job.api import submit

pytestmark = pytest.mark.ray


def test_a_big_job_drains_its_reserved_node_while_small_jobs_keep_coming(ray, conn):
    # Reservations at once (reserve_after 0), so that the test is short.
    add_group(conn, ray.address, users=("small", "big"), reserve_after_s=0)
    # Worker A: two small jobs expected to end within 30 s (their max runtime), ending in 6 and
    # 14 s. Worker B: two that run past the test, their ends not known (no job has finished yet
    # to estimate them by; once one has, they look as if they end any moment, and the
    # reservation stays where it was made).
    on_a = [submit(user="small", group="main", entrypoint=f"sleep {seconds}", resources={"CPU": 1},
                   node_labels={"pool": "a"}, max_runtime=30) for seconds in (6, 14)]
    on_b = [submit(user="small", group="main", entrypoint="sleep 120", resources={"CPU": 1},
                   node_labels={"pool": "b"}) for _ in range(2)]
    tick_until(conn, lambda rows: all(rows[i]["state"] == "RUNNING" for i in on_a + on_b), timeout=60)

    # big's job needs a whole worker; its user holds nothing, so it is first in line under drf.
    big = submit(user="big", group="main", entrypoint="sleep 1", resources={"CPU": 2})
    coming: dict[str, list[int]] = {"no end": [], "ends late": [], "ends in time": []}
    seen = {"reserved": set(), "kept off": set(), "placed": {}}

    def tick_after_submitting(rows):
        """Each tick: the reservation's node, what small jobs were placed where, who was kept off
        it; and one more small job of each kind, until the big job has started."""
        if rows[big]["state"] != "PENDING":
            return
        if rows[big]["reserved_node"] is not None:
            seen["reserved"].add(rows[big]["reserved_node"])
        for kind, ids in coming.items():
            for job_id in ids:
                row = rows[job_id]
                if row["node"] is not None:
                    seen["placed"].setdefault(job_id, (kind, row["node"]))
                elif row["reason"] == "Reserved":
                    assert row["message"] == f"would delay job {big}'s reservation on {rows[big]['reserved_node']}"
                    seen["kept off"].add(kind)
        for kind, runtime in (("no end", None), ("ends late", 600), ("ends in time", 5)):
            coming[kind].append(submit(user="small", group="main", entrypoint="sleep 1", resources={"CPU": 1},
                                       max_runtime=runtime))

    rows = tick_until(conn, lambda rows: rows[big]["state"] in ("SUBMITTED", "RUNNING"), timeout=45,
                      seen=tick_after_submitting)
    # It kept one reservation, on worker A (its jobs' ends are known), and started there.
    assert seen["reserved"] == {ray.a_id} and rows[big]["node"] == ray.a_id
    # While it waited, only small jobs that end in time went to A; the others were kept off it.
    assert {kind for kind, node in seen["placed"].values() if node == ray.a_id} <= {"ends in time"}
    assert {"no end", "ends late"} <= seen["kept off"]
    assert any(kind == "ends in time" for kind, node in seen["placed"].values()), seen
    assert {row["node"] for row in jobs(conn).values() if row["state"] == "RUNNING"} <= {ray.a_id, ray.b_id}
