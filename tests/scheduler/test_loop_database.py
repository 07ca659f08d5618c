"""The loop rides out its database: on a private PostgreSQL (the embedded server's binaries) whose
postmaster is killed (SIGKILL) and started again while the loop runs, the loop waits with one
`database_unavailable` line, goes on in the same process once the database answers, schedules the
jobs submitted meanwhile, and exits 0. A database that never answers in the whole window is the one
case of exit status 1. Ray is the table-driven fake: its side is not the point here."""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from pathlib import Path

import psutil
import psycopg
import pytest
from fake_ray import FakeRay
from psycopg.rows import dict_row
from tick_helpers import wait_for

from job import api, log
from job.devtools.local_postgres import start_embedded, with_database
from job.scheduler import loop as loop_module
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.store.migrations import migrate


@pytest.fixture
def private_pg():
    """A PostgreSQL server of this test alone, which it may kill: (url of a migrated database, server)."""
    url, server = start_embedded(Path(tempfile.mkdtemp(prefix="jobpgl")) / "data")
    try:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE loop")
        url = with_database(url, "loop")
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            migrate(conn)
            conn.execute("INSERT INTO users (name) VALUES ('alice')")
            conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('main', '[{\"name\": \"c\", \"address\": \"http://ray:8265\"}]')")
        yield url, server
    finally:
        server.cleanup()


@pytest.fixture
def lines(monkeypatch):
    """Every log line of the test, as (event, fields)."""
    seen = []
    for level in ("event", "warning", "error"):
        original = getattr(log, level)

        def record(event_name, _original=original, **fields):
            seen.append((event_name, fields))
            _original(event_name, **fields)

        monkeypatch.setattr(log, level, record)
    return seen


def named(lines, name):
    return [fields for event_name, fields in lines if event_name == name]


def test_the_loop_rides_out_a_killed_postmaster_and_schedules_after_it(private_pg, lines, monkeypatch):
    url, server = private_pg
    ray = FakeRay()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    first = api.submit(user="alice", group="main", entrypoint="true", database_url=url)
    later, times = [], {}

    def outage():
        while not ray.submitted:
            time.sleep(0.1)
        postmaster = psutil.Process(server.get_pid())
        postmaster.kill()
        postmaster.wait(10)
        times["killed"] = time.monotonic()
        time.sleep(3)
        server.ensure_postgres_running()
        times["back"] = time.monotonic()
        later.append(api.submit(user="alice", group="main", entrypoint="true", database_url=url))

    fault = threading.Thread(target=outage)
    fault.start()
    status = loop_module.loop(TickConfig(database_url=url, submit_concurrency=2, ray_timeout_s=5.0), 15.0, 0.5)
    fault.join()

    assert status == 0
    [down] = named(lines, "database_unavailable")
    assert "unreachable" in down["cause"] or "terminat" in down["cause"] or "closed" in down["cause"], down
    [back] = named(lines, "database_available")
    # Resumed within a backoff step or two of the server's return (a restarted server may refuse
    # its first connections while it recovers), not at the end of the window.
    assert back["down_s"] < times["back"] - times["killed"] + 2 * loop_module.RETRY_MAX_S + 1, (back, times)
    assert not named(lines, "database_still_unavailable")
    [finished] = named(lines, "loop_finished")
    assert finished["reason"] == "deadline" and finished["scheduled"] > 5, finished
    with psycopg.connect(url, row_factory=dict_row) as conn:
        states = {row["id"]: row["state"] for row in conn.execute("SELECT id, state FROM jobs")}
    assert states == {first: "SUBMITTED", later[0]: "SUBMITTED"}
    assert len(ray.submitted) == 2
    # Placed by this same loop, after the database came back.
    order = [event_name for event_name, _ in lines]
    [placed_later] = [i for i, (event_name, fields) in enumerate(lines)
                      if event_name == "placed" and fields["job"] == later[0]]
    assert order.index("database_available") < placed_later


def test_a_database_that_never_answers_is_exit_status_1_and_one_line(lines, monkeypatch):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"postgresql://job:secret@127.0.0.1:{closed.getsockname()[1]}/job"
        status = loop_module.loop(TickConfig(database_url=url, submit_concurrency=2, ray_timeout_s=5.0), 3.0, 0.5)
    assert status == 1
    [down] = named(lines, "database_unavailable")
    assert "secret" not in str(lines) and down["retry_for_s"] <= 3.0
    [still] = named(lines, "database_still_unavailable")
    assert still["tries"] >= 3 and 2.5 < still["down_s"] < 4, still
    [finished] = named(lines, "loop_finished")
    assert (finished["status"], finished["scheduled"]) == (1, 0), finished


def test_a_tick_whose_connection_is_cut_after_its_intents_writes_nothing_more_and_the_next_resumes(
        conn, database_url, monkeypatch):
    """The connection, with the group's advisory lock, is cut while Ray takes the submission: the
    tick writes nothing without its lock (its group fails), and the next tick, on a new connection,
    takes the lock again, finds the submission in Ray and marks it, without sending it twice."""
    conn.execute("INSERT INTO users (name) VALUES ('alice')")
    conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('main', '[{\"name\": \"c\", \"address\": \"http://ray:8265\"}]')")
    job_id = api.submit(user="alice", group="main", entrypoint="true", database_url=database_url)
    ray = FakeRay()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    taken = ray.submit

    def submit_and_cut(**request):
        taken(**request)
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE datname = current_database() AND pid <> pg_backend_pid()")

    monkeypatch.setattr(ray, "submit", submit_and_cut)
    config = TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0)
    [cut] = tick.run_tick(config)
    assert cut.status == "failed", cut
    row = conn.execute("SELECT state, submission_id FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row["state"] == "SUBMITTING" and row["submission_id"] in ray.known

    def lock_gone():
        """the cut connection's lock gone with it"""
        # pg_terminate_backend only signals: the backend lets its locks go as it exits, a moment
        # later on a busy machine. pg_locks is the server's: only this database's count.
        return conn.execute("SELECT count(*) = 0 AS gone FROM pg_locks WHERE locktype = 'advisory' "
                            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                            ).fetchone()["gone"]

    wait_for(lock_gone, timeout=10)

    monkeypatch.setattr(ray, "submit", taken)
    [after] = tick.run_tick(config)
    assert after.status == "ticked", after
    row = conn.execute("SELECT state FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row["state"] == "SUBMITTED" and len(ray.submitted) == 1


def test_the_loop_keeps_the_pending_rows_between_its_ticks(conn, database_url, monkeypatch, whole_reads):
    """Read whole at its first tick, then only the rows written since (scheduler/pending.py): the
    jobs submitted while it runs are placed all the same, and no row is read whole again."""
    conn.execute("INSERT INTO users (name) VALUES ('alice')")
    conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('main', '[{\"name\": \"c\", \"address\": \"http://ray:8265\"}]')")
    first = api.submit(user="alice", group="main", entrypoint="true", database_url=database_url)
    ray = FakeRay()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    later = []

    def submit_meanwhile():
        for _ in range(3):
            time.sleep(0.5)
            later.append(api.submit(user="alice", group="main", entrypoint="true", database_url=database_url))

    submitter = threading.Thread(target=submit_meanwhile)
    submitter.start()
    status = loop_module.loop(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), 3.0, 0.2)
    submitter.join()
    assert status == 0
    assert whole_reads == ["main"]
    states = {row["id"]: row["state"] for row in conn.execute("SELECT id, state FROM jobs")}
    assert states == dict.fromkeys([first, *later], "SUBMITTED")
    assert len(ray.submitted) == 4
