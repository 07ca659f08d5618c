"""The loop wakes on changes (job/scheduler/wake.py, sql/0024_wake.sql): a submit made by another
connection is placed, and a job's end in Ray is recorded, long before the loop's timer would tick;
the triggers notify a submit, a cancel and a change of a group or a user, and none of the tick's
own writes. Ray is the table-driven fake: what is tested is when the loop ticks."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from cli_helpers import run_cli
from fake_ray import FakeRay, finished, running
from tick_helpers import wait_for

from job import api, log
from job.scheduler import loop as loop_module
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.scheduler.wake import CHANNEL, Wakes

# The loop's timer: no tick in a test's waits can be the timer's.
EVERY_S = 60.0
# How long a wake may take here, on a shared and loaded machine (a tick is ~0.1 s).
WOKEN_WITHIN_S = 10.0


def loop_beside(database_url: str, meanwhile, seen: dict) -> int:
    """The loop's status, run until `meanwhile` (in a thread beside it) is done and sends SIGTERM;
    an error of `meanwhile` fails the test."""

    def run() -> None:
        try:
            meanwhile()
        except BaseException as exc:  # handed to the test's thread
            seen["error"] = exc
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    helper = threading.Thread(target=run)
    helper.start()
    config = TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0)
    status = loop_module.loop(config, 3 * WOKEN_WITHIN_S + 60, EVERY_S)
    helper.join()
    assert "error" not in seen, seen
    return status


@pytest.fixture
def group(conn):
    conn.execute("INSERT INTO users (name) VALUES ('alice')")
    conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('main', '[{\"name\": \"c\", \"address\": \"http://ray:8265\"}]')")


def test_the_loop_places_a_submit_and_records_an_end_in_ray_at_once(conn, database_url, group, monkeypatch, capsys):
    ray = FakeRay()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    finished_lines = []
    original = log.event
    monkeypatch.setattr(log, "event", lambda name, **fields: (finished_lines.append(fields) if name == "loop_finished"
                                                              else None, original(name, **fields)))
    seen: dict = {}

    def state(job_id):
        return conn.execute("SELECT state, submission_id, node FROM jobs WHERE id = %s", (job_id,)).fetchone()

    def meanwhile():
        wait_for(lambda: conn.execute("SELECT count(*) AS n FROM ticks").fetchone()["n"], timeout=60)
        began = time.monotonic()
        seen["job"] = job_id = api.submit(user="alice", group="main", entrypoint="true", database_url=database_url)
        row = wait_for(lambda: (r := state(job_id))["state"] == "SUBMITTED" and r, timeout=WOKEN_WITHIN_S)
        seen["placed_s"] = time.monotonic() - began
        began = time.monotonic()
        ray.known[row["submission_id"]] = finished(row["submission_id"], row["node"])
        wait_for(lambda: state(job_id)["state"] == "SUCCEEDED", timeout=WOKEN_WITHIN_S)
        seen["ended_s"] = time.monotonic() - began

    status = loop_beside(database_url, meanwhile, seen)
    assert status == 0
    [line] = finished_lines
    assert line["reason"] == "sigterm" and line["woken_by_notify"] >= 1 and line["woken_by_ray"] >= 1, line
    assert line["woken_by_timer"] == 0, line
    # Where the job's time went: submitted, placed by a tick, taken by Ray.
    row = conn.execute("SELECT submitted_at, placed_at, accepted_at FROM jobs WHERE id = %s", (seen["job"],)).fetchone()
    assert row["submitted_at"] < row["placed_at"] <= row["accepted_at"], row
    shown = run_cli(capsys, "show", str(seen["job"])).out
    assert re.search(r"after submit:\s+placed \+\d+\.\d\ds, in Ray \+\d+\.\d\ds\n", shown), shown
    listed = run_cli(capsys, "jobs").out.splitlines()
    assert listed[0].split()[12:14] == ["PLACED", "IN_RAY"] and re.search(r" \+\d+\.\d\ds +\+\d+\.\d\ds ", listed[1]), listed
    history = run_cli(capsys, "events", str(seen["job"])).out
    assert re.search(r"\+\d+\.\d\ds\s+placed", history), history


def _notified(listener, sender) -> list[str]:
    """The payloads received until a marker sent now: every NOTIFY committed before it."""
    sender.execute(f"NOTIFY {CHANNEL}, 'marker'")
    payloads = []
    for notify in listener.notifies(timeout=30):
        if notify.payload == "marker":
            return payloads
        payloads.append(notify.payload)
    raise AssertionError(f"the marker never came; got {payloads}")


def test_the_triggers_notify_submits_cancels_and_changes_of_groups_and_users_not_the_tick(
        conn, database_url, group, monkeypatch):
    ray = FakeRay()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        assert _notified(listener, conn) == []
        first = api.submit(user="alice", group="main", entrypoint="true", database_url=database_url)
        api.submit(user="alice", group="main", entrypoint="true", database_url=database_url)
        assert _notified(listener, conn) == ["main", "main"]
        # A burst in one statement is one NOTIFY per group.
        conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('other', '[{\"name\": \"c\", \"address\": \"http://ray:8265\"}]')")
        assert _notified(listener, conn) == ["other"]
        conn.execute("INSERT INTO jobs (user_name, group_name, entrypoint, resources) "
                     "SELECT 'alice', g, 'true', '{\"CPU\": 1}' FROM (VALUES ('main'), ('main'), ('other')) AS v(g)")
        assert sorted(_notified(listener, conn)) == ["main", "other"]
        conn.execute("DELETE FROM jobs WHERE group_name = 'other'")
        assert _notified(listener, conn) == []

        config = TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0)
        [result] = [r for r in tick.run_tick(config) if r.group == "main"]
        assert result.placed == 4 and result.busy_clusters == [ray], result
        # The tick's writes (intents, submits, usage charged, waiting reasons) wake nothing.
        tick.run_tick(config)
        assert _notified(listener, conn) == []

        api.cancel([first], database_url=database_url)
        assert _notified(listener, conn) == ["main"]
        conn.execute("UPDATE resource_groups SET max_attempts = 5 WHERE name = 'main'")
        assert _notified(listener, conn) == ["main"]
        conn.execute("UPDATE users SET shares = 2 WHERE name = 'alice'")
        assert _notified(listener, conn) == [""]

        # A job that ends wakes the groups where jobs wait for it, its own group but through its tick.
        later = api.submit(user="alice", group="other", entrypoint="true", after=[first + 1], database_url=database_url)
        api.submit(user="alice", group="main", entrypoint="true", after=[first + 1], database_url=database_url)
        assert _notified(listener, conn) == ["other", "main"]
        conn.execute("UPDATE jobs SET state = 'SUCCEEDED', finished_at = now() WHERE id = %s", (first + 1,))
        assert _notified(listener, conn) == ["other"]
        api.cancel([later], database_url=database_url)
        assert _notified(listener, conn) == ["other"]
        # None waits for it elsewhere: nothing.
        conn.execute("UPDATE jobs SET state = 'FAILED', finished_at = now() WHERE id = %s", (first + 2,))
        assert _notified(listener, conn) == []


def test_of_two_overlapping_loops_one_ticks_on_its_timer_until_it_ends(database_url):
    """A CronJob pod and the next tick on their timers as one: the first to listen holds the timer,
    the other's timer comes due only once the first has let it go (its pod ended)."""
    first, second = Wakes(database_url, every_s=0.5), Wakes(database_url, every_s=0.5)
    try:
        first.listen()
        second.listen()
        began = time.monotonic()
        assert first.wait(began + 0.5, lambda: False) == "timer"
        assert second.wait(began + 0.5, lambda: time.monotonic() > began + 3.0) == "over"
        first.close()
        assert second.wait(time.monotonic() + 0.5, lambda: False) == "timer"
    finally:
        first.close()
        second.close()


def test_the_loop_wakes_when_a_not_before_passes_and_when_a_max_runtime_ends(conn, database_url, group, monkeypatch):
    """No event announces either instant: the tick tells the loop when the next is due, and the
    loop wakes then, not at its timer (a minute here)."""
    ray = FakeRay()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    seen: dict = {}

    def row(job_id):
        return conn.execute("SELECT state, submission_id, node, placed_at, reason FROM jobs WHERE id = %s",
                            (job_id,)).fetchone()

    def meanwhile():
        wait_for(lambda: conn.execute("SELECT count(*) AS n FROM ticks").fetchone()["n"], timeout=60)
        not_before = datetime.now(UTC) + timedelta(seconds=3)
        seen["job"] = job_id = api.submit(user="alice", group="main", entrypoint="true", not_before=not_before,
                                          max_runtime=2, database_url=database_url)
        placed = wait_for(lambda: (r := row(job_id))["state"] == "SUBMITTED" and r, timeout=WOKEN_WITHIN_S + 3)
        seen["placed_late_s"] = (placed["placed_at"] - not_before).total_seconds()
        started = datetime.now(UTC)
        ray.known[placed["submission_id"]] = running(placed["submission_id"], placed["node"], minutes=0)
        # A submit wakes a tick, which finds the job RUNNING and its max runtime due in 2 s.
        api.submit(user="alice", group="main", entrypoint="true", database_url=database_url)
        wait_for(lambda: placed["submission_id"] in ray.stopped, timeout=WOKEN_WITHIN_S + 2)
        seen["stopped_late_s"] = (datetime.now(UTC) - started).total_seconds() - 2

    loop_beside(database_url, meanwhile, seen)
    assert 0 <= seen["placed_late_s"] < WOKEN_WITHIN_S, seen
    assert seen["stopped_late_s"] < WOKEN_WITHIN_S, seen
    assert row(seen["job"])["reason"] == "RuntimeLimit", row(seen["job"])
