"""Position and estimated start: the run times they rest on and how each is explained (pure), and
what a tick stores with the jobs (real PostgreSQL; Ray is the table of tests/fake_ray.py, as the
estimate is the store's and the planner's, and crosses Ray nowhere)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from cli_helpers import run_cli
from fake_ray import FakeRay
from hypothesis import given
from hypothesis import strategies as st

from job.adapters.ray_cluster import RayJob
from job.core import states
from job.core.estimates import GROUP, MAX_RUNTIMES, NOTHING, Finished, RunTime, RunTimes, Stored, changes, explain
from job.core.forecast import Estimate
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.store import tick_jobs

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
CPU4 = {"CPU": 4}

RECENT = [Finished("bob", CPU4, 500), Finished("bob", {"CPU": 1}, 50), Finished("bob", CPU4, 700),
          Finished("carol", CPU4, 100), Finished("bob", CPU4, 600)]

RUN_TIMES = {
    "a max runtime first, whatever the history": ("bob", CPU4, 30, RunTime(30.0, MAX_RUNTIMES)),
    "the median of the user's runs of the same request": ("bob", CPU4, None, RunTime(600.0, "bob's recent run times")),
    "another request of the user: its own runs": ("bob", {"CPU": 1}, None, RunTime(50.0, "bob's recent run times")),
    "no run of the user's with this request: the group's median": ("alice", CPU4, None, RunTime(500.0, GROUP)),
}


@pytest.mark.parametrize("user, request_, max_runtime, expected", RUN_TIMES.values(), ids=RUN_TIMES.keys())
def test_run_times(user, request_, max_runtime, expected):
    assert RunTimes(RECENT).of(user, request_, max_runtime) == expected


def test_no_history_and_no_max_runtime_is_unknown_and_says_so():
    assert RunTimes([]).of("bob", CPU4, None) == RunTime(None, "no max runtime and no recent finished job in the group")


def test_only_the_users_last_runs_make_the_median():
    recent = [Finished("bob", CPU4, 10)] * 20 + [Finished("bob", CPU4, 1000)] * 30
    assert RunTimes(recent).of("bob", CPU4, None).seconds == 10


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


EXPLAIN = {
    "placed jobs are out of line: positions count from the first left waiting": (
        [Estimate("p1", 1, NOW), Estimate("p2", 2, at(60))], {}, {"p1": RunTime(60, MAX_RUNTIMES), "p2": RunTime(1, GROUP)},
        1, {"p2": Stored(1, at(60), "from max runtimes")}),
    "the bases of what runs and what is ahead": (
        [Estimate("p1", 1, at(60)), Estimate("p2", 2, at(120))], {"r1": RunTime(60, "bob's recent run times")},
        {"p1": RunTime(60, MAX_RUNTIMES), "p2": RunTime(None, "why")},
        0, {"p1": Stored(1, at(60), "from bob's recent run times"),
            "p2": Stored(2, at(120), "from bob's recent run times, max runtimes")}),
    "unknown: past the last time the queue plans for": (
        [Estimate("p1", 1, None, later=True)], {}, {"p1": RunTime(5, GROUP)},
        0, {"p1": Stored(1, None, "unknown: later than 3000-01-01, the last time the queue plans for")}),
    "unknown: names the first job ahead whose run time is not known": (
        [Estimate("p1", 1, None)], {"r1": RunTime(60, MAX_RUNTIMES), "r2": RunTime(None, "no max runtime")},
        {"p1": RunTime(5, GROUP)},
        0, {"p1": Stored(1, None, "unknown: waits on job r2, whose run time is not known (no max runtime)")}),
    "nothing runs and nothing is ahead, not placed (e.g. not before a time)": (
        [Estimate("p1", 1, at(30))], {}, {"p1": RunTime(5, GROUP)},
        0, {"p1": Stored(1, at(30), "from the plan: nothing ahead of it runs")}),
}


@pytest.mark.parametrize("estimates, running, pending, placed, expected", EXPLAIN.values(), ids=EXPLAIN.keys())
def test_explain(estimates, running, pending, placed, expected):
    assert explain(estimates, running, pending, placed) == expected


def test_changes_are_the_rows_to_write_rounded_to_the_minute():
    before = {1: Stored(1, at(60), "from max runtimes"), 2: Stored(2, at(120), "b"), 3: Stored(3, at(180), "c")}
    after = {"1": Stored(1, at(70), "from max runtimes"), "2": Stored(2, at(100), "b2"), "4": Stored(3, None, "unknown")}
    # 1: 08:01:10 is still about 08:01, nothing to write; 3 left the head of the line: cleared.
    assert changes(before, after) == {2: Stored(2, at(120), "b2"), 3: NOTHING, 4: Stored(3, None, "unknown")}


_STORED = st.builds(Stored, st.one_of(st.none(), st.integers(1, 5)),
                    st.one_of(st.none(), st.integers(0, 3600).map(at)), st.sampled_from([None, "a", "b"]))


@given(st.dictionaries(st.integers(1, 8), _STORED), st.dictionaries(st.integers(1, 8).map(str), _STORED))
def test_changes_applied_to_what_was_stored_give_what_is_estimated(before, after):
    written = changes(before, after)
    result = {**before, **written}
    for job_id in before.keys() | {int(job) for job in after}:
        expected = after.get(str(job_id), NOTHING)
        if expected.start is not None:
            assert result[job_id].start.second == 0 and abs(result[job_id].start - expected.start) <= timedelta(seconds=30)
            expected = Stored(expected.position, result[job_id].start, expected.basis)
        assert result.get(job_id, NOTHING) == expected
    # Nothing written that was already so.
    assert all(before.get(job_id, NOTHING) != stored for job_id, stored in written.items())


# --- what a tick stores ----------------------------------------------------------------------------

FAKE = "http://fake-ray.invalid:8265"


@pytest.fixture
def group(conn):
    conn.execute("INSERT INTO resource_groups (name, clusters, policy) "
                 "VALUES ('main', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %s::text)), 'fifo')", (FAKE,))
    conn.execute("INSERT INTO users (name) VALUES ('alice'), ('bob'), ('carol')")
    # Started at 20 s past a minute, 8 to 9 min ago: ends at whole minutes of run time fall at 20 s
    # past a minute too (from 10 min on, in the future), and the virtual tick right after (5 s
    # apart) still rounds to that minute.
    return datetime.now(UTC).replace(second=20, microsecond=0) - timedelta(minutes=9)


def running(conn, user: str, node: str, started: datetime, max_runtime_s: int | None) -> tuple[int, RayJob]:
    job_id = conn.execute(
        """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, attempt, submission_id, node,
                             started_at, max_runtime_s, submitted_at)
           VALUES (%s, 'main', 'RUNNING', 'true', '{"CPU": 4}', 1, 'run-' || %s, %s, %s, %s, %s) RETURNING id""",
        (user, user, node, started, max_runtime_s, started)).fetchone()["id"]
    return job_id, RayJob(f"run-{user}", states.RAY_RUNNING, node, started, None, None, None)


def pending(conn, user: str, max_runtime_s: int | None, submitted: datetime) -> int:
    return conn.execute(
        """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, max_runtime_s, submitted_at)
           VALUES (%s, 'main', 'PENDING', 'true', '{"CPU": 4}', %s, %s) RETURNING id""",
        (user, max_runtime_s, submitted)).fetchone()["id"]


def stored(conn, job_id: int) -> tuple:
    row = conn.execute("SELECT state, queue_position, estimated_start_at, estimate_basis FROM jobs WHERE id = %s",
                       (job_id,)).fetchone()
    return row["state"], row["queue_position"], row["estimated_start_at"], row["estimate_basis"]


def run(database_url, monkeypatch, ray: FakeRay) -> None:
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    [result] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "main")
    assert result.status == "ticked", result.cause


def test_known_run_times_give_exact_estimates_and_an_unknown_one_none_saying_why(conn, database_url, monkeypatch, group):
    started = group
    # Both nodes (4 CPUs each) full: alice's job for 10 min more at most, bob's of unknown run time.
    _r1, ray1 = running(conn, "alice", "node-a", started, 1200)
    r2, ray2 = running(conn, "bob", "node-b", started, None)
    p1 = pending(conn, "alice", 300, started)
    p2 = pending(conn, "carol", None, started + timedelta(seconds=1))
    p3 = pending(conn, "alice", 60, started + timedelta(seconds=2))
    ray = FakeRay(ray1, ray2)
    run(database_url, monkeypatch, ray)
    end = lambda seconds: (started + timedelta(seconds=seconds)).replace(second=0)  # noqa: E731
    assert stored(conn, p1) == ("PENDING", 1, end(1200), "from max runtimes")
    # carol's run time is not known: what comes after her job on node-a waits on it or on bob's.
    assert stored(conn, p2) == ("PENDING", 2, end(1500), "from max runtimes")
    assert stored(conn, p3) == ("PENDING", 3, None, f"unknown: waits on job {r2}, whose run time is not known "
                                                     "(no max runtime and no recent finished job in the group)")
    # The next tick finds the same: no row written again (a row rewritten gets a new xmin).
    xmin = {job: conn.execute("SELECT xmin::text FROM jobs WHERE id = %s", (job,)).fetchone()["xmin"] for job in (p1, p2, p3)}
    run(database_url, monkeypatch, ray)
    assert {job: conn.execute("SELECT xmin::text FROM jobs WHERE id = %s", (job,)).fetchone()["xmin"]
            for job in (p1, p2, p3)} == xmin
    # alice's job ends: p1 is placed and leaves the line, its estimate with it; p2 is first. Her job
    # is the group's first finished one: its run time (10 min) stands for those not known.
    ray.known[ray1.submission_id] = RayJob(ray1.submission_id, states.SUCCEEDED, "node-a", started,
                                           started + timedelta(minutes=10), None, 0)
    run(database_url, monkeypatch, ray)
    assert stored(conn, p1) == ("SUBMITTED", None, None, None)
    assert stored(conn, p2)[:2] == ("PENDING", 1)
    assert stored(conn, p2)[3] == stored(conn, p3)[3] == "from max runtimes, the group's recent run times"
    # bob's job is taken to end 10 min after its start: both get a time, carol's first.
    assert stored(conn, p3)[1] == 2 and None not in (stored(conn, p2)[2], stored(conn, p3)[2])
    assert stored(conn, p2)[2] <= stored(conn, p3)[2]


def test_estimates_from_the_users_recent_run_times(conn, database_url, monkeypatch, group):
    started = group
    for seconds in (500, 600, 700):
        conn.execute(
            """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, attempt, submission_id, node,
                                 started_at, finished_at, submitted_at)
               VALUES ('bob', 'main', 'SUCCEEDED', 'true', '{"CPU": 4}', 1, 'old-' || %s, 'node-a',
                       now() - interval '2 hours', now() - interval '2 hours' + make_interval(secs => %s),
                       now() - interval '3 hours')""", (seconds, seconds))
    _, ray1 = running(conn, "bob", "node-a", started, None)
    _, ray2 = running(conn, "alice", "node-b", started, 3600)
    p1 = pending(conn, "alice", 300, started)
    p2 = pending(conn, "bob", None, started + timedelta(seconds=1))
    run(database_url, monkeypatch, FakeRay(ray1, ray2))
    end = lambda seconds: (started + timedelta(seconds=seconds)).replace(second=0)  # noqa: E731
    # bob's job runs about 600 s as his last three did: alice's starts then, bob's next after it.
    assert stored(conn, p1) == ("PENDING", 1, end(600), "from bob's recent run times, max runtimes")
    assert stored(conn, p2) == ("PENDING", 2, end(900), "from bob's recent run times, max runtimes")


def test_jobs_and_show_print_the_estimate(conn, database_url, capsys, group):
    soon = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(hours=2)
    first, second, cancelled = (pending(conn, "bob", 60, group) for _ in range(3))
    tick_jobs.set_estimates(conn, {first: (1, soon, "from bob's recent run times"),
                                   second: (2, None, "unknown: waits on job 7, whose run time is not known (why)"),
                                   cancelled: (3, soon, "from max runtimes")})
    conn.execute("UPDATE jobs SET state = 'CANCELLED', finished_at = now() WHERE id = %s", (cancelled,))
    table = run_cli(capsys, "jobs")
    assert table.status == 0, table.err
    header, *lines = table.out.splitlines()
    columns = header.split()
    assert columns[-3:] == ["POS", "EST_START", "WHY"]
    cells = {int(line.split()[0]): line for line in lines}
    at_ = header.index("POS")
    assert cells[first][at_:].split()[:3] == ["1", soon.strftime("%H:%M"), "UTC"]
    assert cells[second][at_:].split()[:2] == ["2", "unknown"]
    # A job that left the line keeps its columns in the row, not its place in line.
    assert cells[cancelled][at_:].split()[:2] == ["-", "-"]
    shown = run_cli(capsys, "show", str(first))
    assert re.search(rf"\nposition: +1\nestimated start: +about {soon:%H:%M} UTC, from bob's recent run times\n",
                     shown.out), shown.out
    shown = run_cli(capsys, "show", str(second))
    assert re.search(r"\nestimated start: +unknown: waits on job 7, whose run time is not known \(why\)\n", shown.out)
    assert "estimated start" not in run_cli(capsys, "show", str(cancelled)).out
    listed = {job["id"]: job for job in json.loads(run_cli(capsys, "jobs", "--json").out)}
    assert (listed[first]["position"], listed[first]["estimated_start_at"], listed[first]["estimate_basis"]) == (
        1, soon.isoformat().replace("+00:00", "Z"), "from bob's recent run times")
    assert listed[second]["estimated_start_at"] is None and listed[cancelled]["position"] is None
