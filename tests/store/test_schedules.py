"""The tick's schedule step on a real PostgreSQL, at instants of the test's choosing: each slot's job
once however often it runs, the latest slot only after a downtime, forbid, replace, the starting
deadline, pauses, the next slot for the loop's wake, and one read per tick."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from cli_helpers import run_cli
from fake_ray import FakeRay
from tick_helpers import add_group, wait_for

from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.scheduler.schedules import run_schedules
from job.store import schedules
from job.store.connection import connect

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def add_schedule(capsys, conn, name="nightly", *options, created=T0):
    result = run_cli(capsys, "schedule", "add", name, *options, "--user", "alice", "--group", "main",
                     "--entrypoint", "echo hi", "--cpus", "0.5")
    assert result.status == 0, result.err
    conn.execute("UPDATE schedules SET created_at = %s WHERE name = %s", (created, name))


def scheduled(conn) -> list[dict]:
    return conn.execute("SELECT id, state, schedule, slot, user_name, resources, entrypoint FROM jobs ORDER BY id"
                        ).fetchall()


def slots(conn) -> list[tuple]:
    return [(row["slot"], row["outcome"], row["job_id"], row["message"])
            for row in conn.execute("SELECT * FROM schedule_slots ORDER BY slot")]


@pytest.fixture
def group(conn):
    add_group(conn, "http://127.0.0.1:1")


def test_each_slot_makes_one_job_however_often_the_step_runs(group, conn, capsys):
    add_schedule(capsys, conn, "often", "--every", "1m")
    assert run_schedules(conn, "main", T0 + timedelta(seconds=30)) == T0 + timedelta(minutes=1)
    assert scheduled(conn) == []
    for _ in range(3):
        wake = run_schedules(conn, "main", T0 + timedelta(minutes=1, seconds=5))
    assert wake == T0 + timedelta(minutes=2)
    [job] = scheduled(conn)
    assert (job["state"], job["schedule"], job["slot"], job["user_name"], job["resources"], job["entrypoint"]) == (
        "PENDING", "often", T0 + timedelta(minutes=1), "alice", {"CPU": 0.5}, "echo hi")
    assert slots(conn) == [(T0 + timedelta(minutes=1), "submitted", job["id"], None)]


def test_after_a_downtime_only_the_latest_slot_runs(group, conn, capsys):
    add_schedule(capsys, conn, "often", "--cron", "*/5 * * * *")
    run_schedules(conn, "main", T0 + timedelta(hours=3, minutes=7))
    assert [job["slot"] for job in scheduled(conn)] == [T0 + timedelta(hours=3, minutes=5)]


def test_a_slot_missed_by_more_than_the_starting_deadline_is_skipped(group, conn, capsys):
    add_schedule(capsys, conn, "often", "--every", "1m", "--starting-deadline", "20s")
    run_schedules(conn, "main", T0 + timedelta(minutes=1, seconds=30))
    assert scheduled(conn) == []
    assert slots(conn) == [(T0 + timedelta(minutes=1), "skipped", None,
                            "missed by 30s, more than the starting deadline of 20s")]
    run_schedules(conn, "main", T0 + timedelta(minutes=2, seconds=10))
    assert [job["slot"] for job in scheduled(conn)] == [T0 + timedelta(minutes=2)]


@pytest.mark.parametrize("policy", ["allow", "forbid", "replace"])
def test_concurrency_while_the_last_run_is_going(group, conn, capsys, policy):
    add_schedule(capsys, conn, "often", "--every", "1m", "--concurrency", policy)
    run_schedules(conn, "main", T0 + timedelta(minutes=1))
    [first] = scheduled(conn)
    conn.execute("UPDATE jobs SET state = 'RUNNING', attempt = 1, submission_id = 'x-1-1', node = 'n' WHERE id = %s",
                 (first["id"],))
    run_schedules(conn, "main", T0 + timedelta(minutes=2))
    rows = {job["id"]: job for job in scheduled(conn)}
    second = slots(conn)[1]
    if policy == "forbid":
        assert list(rows) == [first["id"]]
        assert second == (T0 + timedelta(minutes=2), "skipped", None,
                          f"the last run, job {first['id']}, is RUNNING (concurrency forbid)")
    else:
        assert len(rows) == 2 and second[1] == "submitted"
        cancel = conn.execute("SELECT cancel_requested_at FROM jobs WHERE id = %s", (first["id"],)).fetchone()
        assert (cancel["cancel_requested_at"] is not None) == (policy == "replace")
    # Once the last run ended, forbid submits again.
    conn.execute("UPDATE jobs SET state = 'SUCCEEDED', finished_at = now() WHERE id = %s", (first["id"],))
    run_schedules(conn, "main", T0 + timedelta(minutes=3))
    assert slots(conn)[2][1] == "submitted"


def test_paused_schedules_and_other_groups_submit_nothing(group, conn, capsys):
    add_group(conn, "http://127.0.0.1:2", name="other", users=())
    add_schedule(capsys, conn, "often", "--every", "1m")
    assert run_cli(capsys, "schedule", "pause", "often").status == 0
    assert run_schedules(conn, "main", T0 + timedelta(minutes=5)) is None
    assert run_schedules(conn, "other", T0 + timedelta(minutes=5)) is None
    assert scheduled(conn) == []
    assert run_cli(capsys, "schedule", "resume", "often").status == 0
    run_schedules(conn, "main", T0 + timedelta(minutes=5, seconds=1))
    assert [job["slot"] for job in scheduled(conn)] == [T0 + timedelta(minutes=5)]


def test_a_second_transaction_taking_the_same_slot_waits_and_makes_no_job(group, conn, capsys, database_url):
    add_schedule(capsys, conn, "often", "--every", "1m")
    now = T0 + timedelta(minutes=1)
    with psycopg.connect(database_url, row_factory=psycopg.rows.dict_row) as first, \
            psycopg.connect(database_url, row_factory=psycopg.rows.dict_row) as second:
        # The first takes the slot and has not committed; the second's step then blocks on the
        # slot's key until the first commits, and finds it taken.
        assert schedules.take_slot(first, "often", now, "submitted", None)
        schedules.insert_slot_job(first, "often", now)
        done = threading.Event()
        thread = threading.Thread(target=lambda: (run_schedules(second, "main", now), done.set()))
        thread.start()
        pid = second.info.backend_pid
        wait_for(lambda: conn.execute("SELECT wait_event_type = 'Lock' AS waits FROM pg_stat_activity WHERE pid = %s",
                                      (pid,)).fetchone()["waits"])
        assert not done.is_set()
        first.commit()
        thread.join(30)
        assert done.is_set()
    assert len(scheduled(conn)) == 1


def test_the_step_reads_the_group_s_schedules_in_one_statement(group, conn, capsys, database_url):
    for index in range(20):
        add_schedule(capsys, conn, f"s{index}", "--every", "1h")
    with connect(database_url, counting=True) as counted:
        before = counted.statements
        run_schedules(counted, "main", T0 + timedelta(minutes=30))
        assert counted.statements - before == 1


def test_a_schedule_change_wakes_the_loop(group, conn, capsys, database_url):
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN job_wake")
        add_schedule(capsys, conn, "often", "--every", "1m")
        assert run_cli(capsys, "schedule", "pause", "often").status == 0
        payloads = [note.payload for note in listener.notifies(timeout=5, stop_after=3)]
    assert payloads.count("main") >= 2


def test_a_schedule_written_past_the_cli_fails_itself_not_the_group(group, conn, capsys):
    add_schedule(capsys, conn, "good", "--every", "1m")
    for name, column, value in [("cron", "cron", "61 * * * *"), ("zone", "timezone", "Mars/Olympus"),
                                ("template", "template", '{"priority": "high"}')]:
        add_schedule(capsys, conn, name, "--cron", "* * * * *")
        conn.execute(f"UPDATE schedules SET {column} = %s WHERE name = %s", (value, name))
    # Template keys a submit leaves to its defaults are filled in.
    add_schedule(capsys, conn, "sparse", "--every", "1m")
    conn.execute("""UPDATE schedules SET template = '{"entrypoint": "true"}' WHERE name = 'sparse'""")
    run_schedules(conn, "main", T0 + timedelta(minutes=1, seconds=1))
    made = {job["schedule"]: job for job in scheduled(conn)}
    assert sorted(made) == ["good", "sparse"] and made["sparse"]["resources"] == {"CPU": 1.0}
    [skipped] = [row for row in slots(conn) if row[1] == "skipped"]
    assert skipped[3].startswith("the template is not a job: invalid input syntax for type integer")


def test_a_tick_plans_the_job_of_the_slot_it_took_and_wakes_for_the_next(group, conn, capsys, database_url,
                                                                         monkeypatch):
    ray = FakeRay()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    now = datetime.now(UTC)
    add_schedule(capsys, conn, "often", "--every", "1h", created=now - timedelta(hours=1, seconds=1))
    [result] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "main")
    assert result.status == "ticked" and result.placed == 1
    [job] = conn.execute("SELECT state, submission_id FROM jobs").fetchall()
    assert job["state"] == "SUBMITTED" and ray.submitted == [job["submission_id"]]
    # Nothing else due: the loop wakes at the next slot.
    assert result.due_at == now - timedelta(seconds=1) + timedelta(hours=1)
