"""Reservations for the head of the line as a tick stores them (real PostgreSQL; Ray is the table of
tests/fake_ray.py, two nodes of 4 CPUs, as what is stored is the store's and the planner's): kept
on the same node from tick to tick until the job starts, their start from the running jobs' max
runtimes or the tick's estimates, the wait that reserve_after counts, and what `jobs` and `show`
say of them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from cli_helpers import run_cli
from fake_ray import FakeRay

from job.adapters.ray_cluster import RayJob
from job.core import states
from job.core.units import time_of_day
from job.scheduler import tick
from job.scheduler.config import TickConfig

FAKE = "http://fake-ray.invalid:8265"


@pytest.fixture
def now(conn) -> datetime:
    conn.execute("INSERT INTO resource_groups (name, clusters, policy) "
                 "VALUES ('main', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %s::text)), 'fifo')", (FAKE,))
    conn.execute("INSERT INTO users (name) VALUES ('alice'), ('bob'), ('carol')")
    return datetime.now(UTC)


def running(conn, user: str, node: str, started: datetime, max_runtime_s: int | None) -> RayJob:
    conn.execute(
        """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, attempt, submission_id, node,
                             started_at, max_runtime_s, submitted_at)
           VALUES (%s, 'main', 'RUNNING', 'true', '{"CPU": 4}', 1, 'run-' || %s, %s, %s, %s, %s)""",
        (user, user, node, started, max_runtime_s, started))
    return RayJob(f"run-{user}", states.RAY_RUNNING, node, started, None, None, None)


def finished(conn, user: str, seconds: int, count: int) -> None:
    """`count` recent successful runs of `user`'s of CPU 4, `seconds` each: what its estimates rest on."""
    conn.execute(
        """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, attempt, submission_id, node,
                             started_at, finished_at, submitted_at)
           SELECT %s, 'main', 'SUCCEEDED', 'true', '{"CPU": 4}', 1, 'old-' || %s || '-' || n, 'node-a',
                  now() - interval '1 hour' + make_interval(secs => n - %s), now() - interval '1 hour' + make_interval(secs => n),
                  now() - interval '2 hours'
           FROM generate_series(1, %s) AS n""", (user, seconds, seconds, count))


def pending(conn, user: str, submitted: datetime, waiting_since: datetime | None = None, **columns) -> int:
    names = ", ".join(columns)
    return conn.execute(
        f"""INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, submitted_at, waiting_since
                              {', ' + names if names else ''})
            VALUES (%s, 'main', 'PENDING', 'true', '{{"CPU": 4}}', %s, %s {', %s' * len(columns)}) RETURNING id""",
        (user, submitted, waiting_since, *columns.values())).fetchone()["id"]


def run(database_url, monkeypatch, ray: FakeRay) -> None:
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    [result] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "main")
    assert result.status == "ticked", result.cause


def row(conn, job_id: int) -> dict:
    return conn.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()


def test_a_reservation_is_stored_kept_on_its_node_until_its_job_starts_there(conn, database_url, monkeypatch, capsys, now):
    started = now - timedelta(minutes=9)
    # node-a: alice's job, 11 minutes more at most. node-b: carol's, without a max runtime; her
    # last runs of CPU 4 took 10 minutes: it should end in about 1 minute.
    ray_a = running(conn, "alice", "node-a", started, 1200)
    ray_b = running(conn, "carol", "node-b", started, None)
    finished(conn, "carol", 600, 3)
    big = pending(conn, "bob", now - timedelta(minutes=20), now - timedelta(minutes=10))
    ray = FakeRay(ray_a, ray_b)
    run(database_url, monkeypatch, ray)
    first = row(conn, big)
    # The estimate of carol's job: node-b frees first.
    assert (first["reserved_node"], first["reserved_kind"], first["reason"]) == ("node-b", "head", "Resources")
    assert first["reserved_start"] == started + timedelta(seconds=600)
    assert first["message"].startswith("reserved node node-b; expected to start about ")

    # carol's late runs now took 50 minutes: judged afresh, node-a (11 minutes) would come first.
    finished(conn, "carol", 3000, 5)
    run(database_url, monkeypatch, ray)
    second = row(conn, big)
    assert (second["reserved_node"], second["reserved_kind"], second["reserved_at"]) == (
        "node-b", "head", first["reserved_at"])
    assert second["reserved_start"] == started + timedelta(seconds=3000)

    # What `jobs` and `show` say, from the reservation.
    expected = time_of_day(second["reserved_start"], datetime.now(UTC))
    table = run_cli(capsys, "jobs", "--state", "PENDING")
    header, line = table.out.splitlines()
    assert line[header.index("RESERVED"):].split()[0] == "node-b"
    assert line[header.index("EST_START"):].startswith(expected)
    listed = json.loads(run_cli(capsys, "jobs", "--json", "--state", "PENDING").out)
    assert listed[0]["reservation"] == {"kind": "head", "nodes": ["node-b"]}
    assert listed[0]["expected_start"] == second["reserved_start"].isoformat().replace("+00:00", "Z")
    shown = run_cli(capsys, "show", str(big)).out
    assert re.search(rf"\nreserved: +node node-b \(first in line\), expected to start about {expected}\n", shown), shown

    # carol's job ends: the job starts on its node, its reservation and its wait over.
    ray.known[ray_b.submission_id] = RayJob(ray_b.submission_id, states.SUCCEEDED, "node-b", started, now, None, 0)
    run(database_url, monkeypatch, ray)
    placed = row(conn, big)
    assert (placed["state"], placed["node"]) == ("SUBMITTED", "node-b")
    assert [placed[c] for c in ("reserved_node", "reserved_kind", "reserved_start", "reserved_at", "waiting_since")] == [None] * 5
    assert json.loads(run_cli(capsys, "show", "--json", str(big)).out)["reservation"] is None


def test_a_cancelled_job_shows_no_reservation(conn, database_url, monkeypatch, capsys, now):
    ray = FakeRay(running(conn, "alice", "node-a", now, 600), running(conn, "carol", "node-b", now, 1200))
    big = pending(conn, "bob", now - timedelta(minutes=20), now - timedelta(minutes=10))
    run(database_url, monkeypatch, ray)
    assert row(conn, big)["reserved_node"] == "node-a"
    assert run_cli(capsys, "cancel", str(big)).status == 0
    shown = json.loads(run_cli(capsys, "show", "--json", str(big)).out)
    assert (shown["state"], shown["reservation"], shown["expected_start"]) == ("CANCELLED", None, None)


def test_reserve_after_counts_from_when_the_tick_first_saw_the_job_wait_for_resources(conn, database_url, monkeypatch,
                                                                                        now):
    ray = FakeRay(running(conn, "alice", "node-a", now, 600), running(conn, "carol", "node-b", now, 1200))
    # Submitted an hour ago, back in line a moment ago (its intent cleared its wait); and one whose
    # start time is still to come.
    requeued = pending(conn, "bob", now - timedelta(hours=1))
    later = pending(conn, "bob", now - timedelta(hours=2), not_before=now + timedelta(hours=1))
    run(database_url, monkeypatch, ray)
    first = row(conn, requeued)
    assert first["reason"] == "Resources" and first["reserved_node"] is None
    assert now <= first["waiting_since"] <= datetime.now(UTC)
    assert (row(conn, later)["reason"], row(conn, later)["waiting_since"]) == ("NotBefore", None)
    # The next tick keeps when its wait began; once past reserve_after (5 minutes), it reserves.
    run(database_url, monkeypatch, ray)
    assert row(conn, requeued)["waiting_since"] == first["waiting_since"]
    conn.execute("UPDATE jobs SET waiting_since = waiting_since - interval '5 minutes' WHERE id = %s", (requeued,))
    run(database_url, monkeypatch, ray)
    assert row(conn, requeued)["reserved_node"] == "node-a"

