"""A job's history and the ticks' record (sql/0008_observability.sql) on the real PostgreSQL: each
store write of jobs records its event in its own transaction, a message refresh records none, a
real tick (against the fake Ray of tests/fake_ray.py) records its summary and the policy's figures
of each placement; `events` shows them; `prune` deletes old ticks and the events of the jobs it
deletes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from cli_helpers import run_cli
from fake_ray import FakeRay

from job import api
from job.core import states
from job.core.reconcile import STOP_REASONS
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.store import events, groups, tick_jobs

FAKE = "http://fake-ray.invalid:8265"


@pytest.fixture
def queue(conn):
    conn.execute("INSERT INTO resource_groups (name, clusters, policy) "
                 "VALUES ('main', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %s::text)), 'fairshare')", (FAKE,))
    conn.execute("INSERT INTO users (name, shares) VALUES ('alice', 1), ('bob', 2)")
    return conn


def submit(database_url: str, user: str = "alice", cpus: int = 1) -> int:
    return api.submit(user=user, group="main", entrypoint="true", resources={"CPU": cpus}, database_url=database_url)


def kinds(conn, job_id: int) -> list[tuple]:
    return [(row["kind"], row["from_state"], row["state"], row["reason"]) for row in conn.execute(
        "SELECT kind, from_state, state, reason FROM job_events WHERE job_id = %s ORDER BY id", (job_id,))]


def update(conn, job_id: int, **fields) -> None:
    job = conn.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()
    tick_jobs.update_jobs(conn, {job_id: {column: fields.get(column, job[column]) for column in tick_jobs.JOB_UPDATE_COLUMNS}})


def assert_counted(conn) -> None:
    """job_counts, kept by the triggers, against counting the unfinished jobs themselves; both
    before and after folding."""
    direct = conn.execute(
        """SELECT group_name, user_name, state, coalesce(reason, '') AS reason, count(*) AS jobs FROM jobs
           WHERE state = ANY(%s) GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4""", (list(states.UNFINISHED),)).fetchall()
    for _ in range(2):
        kept = conn.execute(
            """SELECT group_name, user_name, state, reason, sum(jobs) AS jobs FROM job_counts
               GROUP BY 1, 2, 3, 4 HAVING sum(jobs) <> 0 ORDER BY 1, 2, 3, 4""").fetchall()
        assert kept == direct
        events.fold_counts(conn)
    assert conn.execute("SELECT count(*) AS n FROM job_counts").fetchone()["n"] == len(direct)


def test_each_write_records_its_event_and_a_message_refresh_none(queue, database_url):
    conn = queue
    job = submit(database_url)
    tick_jobs.set_waiting(conn, {job: ("Resources", "needs CPU 1; the most free on any node is CPU 0")}, datetime.now(UTC))
    # The same reason with new figures: a message refresh, no event.
    tick_jobs.set_waiting(conn, {job: ("Resources", "needs CPU 1; the most free on any node is CPU 0.5")}, datetime.now(UTC))
    [intent] = tick_jobs.commit_intents(conn, [(job, "node-a")], "inst")
    tick_jobs.mark_submitted(conn, [job])
    update(conn, job, reason="Starting", message="held 3 s")
    update(conn, job, reason="Starting", message="held 8 s")  # refresh again
    update(conn, job, state=states.RUNNING, reason=None, started_at=datetime.now(UTC))
    tick_jobs.requeue_infra(conn, {job: (states.RUNNING, "InfraFailure", "its node has died")}, 5)
    tick_jobs.commit_intents(conn, [(job, "node-b")], "inst")
    tick_jobs.return_to_pending(conn, {job: (states.SUBMITTING, "Refused", "Ray refused it")}, 3)
    tick_jobs.commit_intents(conn, [(job, "node-a")], "inst")
    tick_jobs.mark_submitted(conn, [job])
    api.cancel([job], conn=conn)
    update(conn, job, reason="Cancelled", message="stop requested by `cancel`")
    update(conn, job, state=states.STOPPED, reason="Cancelled", message="cancelled while it ran",
           finished_at=datetime.now(UTC))
    assert kinds(conn, job) == [
        ("queued", None, "PENDING", "Queued"),
        ("waiting", "PENDING", "PENDING", "Resources"),
        ("placed", "PENDING", "SUBMITTING", "Submitting"),
        ("submitted", "SUBMITTING", "SUBMITTED", None),
        ("waiting_in_ray", "SUBMITTED", "SUBMITTED", "Starting"),
        ("started", "SUBMITTED", "RUNNING", None),
        ("requeued", "RUNNING", "PENDING", "InfraFailure"),
        ("placed", "PENDING", "SUBMITTING", "Submitting"),
        ("requeued", "SUBMITTING", "PENDING", "Refused"),
        ("placed", "PENDING", "SUBMITTING", "Submitting"),
        ("submitted", "SUBMITTING", "SUBMITTED", None),
        ("cancel_requested", "SUBMITTED", "SUBMITTED", None),
        ("stop_requested", "SUBMITTED", "SUBMITTED", "Cancelled"),
        ("finished", "SUBMITTED", "STOPPED", "Cancelled"),
    ]
    placed = conn.execute("SELECT node, attempt FROM job_events WHERE job_id = %s AND kind = 'placed' ORDER BY id",
                          (job,)).fetchall()
    assert [(row["node"], row["attempt"]) for row in placed] == [("node-a", 1), ("node-b", 2), ("node-a", 3)]
    assert intent.attempt == 1
    totals = {(row["kind"], row["reason"]): row["count"] for row in conn.execute(
        "SELECT kind, reason, sum(count) AS count FROM job_event_totals WHERE group_name = 'main' GROUP BY 1, 2")}
    assert totals[("placed", "Submitting")] == 3 and totals[("requeued", "InfraFailure")] == 1
    assert totals[("requeued", "Refused")] == 1 and totals[("queued", "Queued")] == 1
    assert_counted(conn)


def test_the_counts_follow_every_write(queue, database_url):
    jobs = [submit(database_url, user) for user in ("alice", "bob", "alice", "bob")]
    assert_counted(queue)
    tick_jobs.set_waiting(queue, {jobs[0]: ("Resources", "x"), jobs[1]: ("Limit", "y")}, datetime.now(UTC))
    tick_jobs.commit_intents(queue, [(jobs[2], "node-a")], "inst")
    assert_counted(queue)
    api.cancel([jobs[3], jobs[2]], conn=queue)
    queue.execute("UPDATE jobs SET user_name = 'bob' WHERE id = %s", (jobs[0],))  # as an admin might
    assert_counted(queue)
    queue.execute("DELETE FROM jobs WHERE id = %s", (jobs[1],))  # as an admin might
    tick_jobs.mark_submitted(queue, [jobs[2]])
    assert_counted(queue)


def test_a_rolled_back_write_leaves_no_event(queue, database_url):
    job = submit(database_url)
    queue.execute("BEGIN")
    tick_jobs.commit_intents(queue, [(job, "node-a")], "inst")
    queue.execute("ROLLBACK")
    assert [k[0] for k in kinds(queue, job)] == ["queued"]


@pytest.mark.parametrize("reason", [*STOP_REASONS, "Preempted"])
def test_every_stop_reason_is_a_stop_request(queue, database_url, reason):
    job = submit(database_url)
    tick_jobs.commit_intents(queue, [(job, "node-a")], "inst")
    tick_jobs.mark_submitted(queue, [job])
    update(queue, job, reason=reason, message="stopping")
    assert kinds(queue, job)[-1] == ("stop_requested", "SUBMITTED", "SUBMITTED", reason)


def test_a_victim_chosen_stopped_and_back_in_the_queue(queue, database_url):
    job, waiting = submit(database_url), submit(database_url, "bob")
    tick_jobs.commit_intents(queue, [(job, "node-a")], "inst")
    update(queue, job, state=states.RUNNING, reason=None, started_at=datetime.now(UTC))
    tick_jobs.mark_victims(queue, {job: waiting}, datetime.now(UTC))
    tick_jobs.victims_stopping(queue, {job: f"stopped to make room for job {waiting}"})
    tick_jobs.requeue_preempted(queue, {job: (states.RUNNING, f"stopped to make room for job {waiting}")})
    assert kinds(queue, job)[-3:] == [("victim", "RUNNING", "RUNNING", None),
                                      ("stop_requested", "RUNNING", "RUNNING", "Preempted"),
                                      ("preempted", "RUNNING", "PENDING", "Preempted")]
    victim = queue.execute("SELECT details FROM job_events WHERE job_id = %s AND kind = 'victim'", (job,)).fetchone()
    assert victim["details"] == {"for_job": waiting}
    assert_counted(queue)


def test_a_tick_records_its_summary_and_the_figures_of_each_placement(queue, database_url, monkeypatch, capsys):
    jobs = [submit(database_url, "alice", 3), submit(database_url, "alice", 3), submit(database_url, "bob", 3)]
    ray = FakeRay()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    [result] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0))
    assert result.status == "ticked" and result.placed == 2
    [row] = queue.execute("SELECT * FROM ticks").fetchall()
    assert (row["group_name"], row["outcome"], row["placed"], row["waiting"]) == ("main", "ticked", 2, {"Resources": 1})
    assert set(row["steps"]) == {"observe", "reconcile", "schedules", "plan", "commit", "submit"}
    assert row["seconds"] >= sum(row["steps"].values()) and row["statements"] == result.statements
    assert [node["id"] for node in row["nodes"]] == ["node-a", "node-b"]
    totals = {(r["outcome"], r["step"]): r["ticks"] for r in queue.execute("SELECT * FROM tick_totals")}
    assert totals == {("ticked", ""): 1, **{("ticked", step): 1 for step in row["steps"]}}

    placed = {r["job_id"]: r["details"] for r in queue.execute("SELECT job_id, details FROM job_events WHERE kind = 'placed'")}
    # Both start with nothing: alice goes first (ties by name), then bob (alice's 3 CPUs of 8 count).
    assert set(placed) == {jobs[0], jobs[2]}
    assert placed[jobs[0]]["score"] == 0 and placed[jobs[0]]["policy"] == "fairshare"
    assert placed[jobs[2]] == {**placed[jobs[2]], "shares": 2.0, "dominant_share": 0.0, "score": 0.0}

    shown = run_cli(capsys, "events", str(jobs[0]))
    assert shown.status == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0] == f"job {jobs[0]}: alice in main, CPU=3, now SUBMITTED"
    assert [line.split()[3] for line in lines[2:]] == ["queued", "placed", "submitted"]
    # AFTER: the time since the event before.
    assert [line.split()[2][:1] for line in lines[2:]] == ["-", "+", "+"], lines
    assert "fairshare: score 0 (shares 1, usage 0, dominant share 0), lowest first" in lines[3]
    waiting = run_cli(capsys, "events", str(jobs[1]), "--json")
    assert [e["kind"] for e in json.loads(waiting.out)["events"]] == ["queued", "waiting"]

    # A second tick: skipped while another holds the group's lock, and its record says so.
    queue.execute("SELECT pg_advisory_lock(%s, hashtext('main'))", (groups.TICK_LOCK_CLASS,))
    tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0))
    queue.execute("SELECT pg_advisory_unlock(%s, hashtext('main'))", (groups.TICK_LOCK_CLASS,))
    assert [r["outcome"] for r in queue.execute("SELECT outcome FROM ticks ORDER BY id")] == ["ticked", "skipped"]
    # A third, successful: the nodes stay on the group's last successful tick alone (sql/0030).
    tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0))
    rows = queue.execute("SELECT outcome, nodes FROM ticks ORDER BY id").fetchall()
    assert [(r["outcome"], [node["id"] for node in r["nodes"]]) for r in rows] == [
        ("ticked", []), ("skipped", []), ("ticked", ["node-a", "node-b"])]
    assert_counted(queue)


def test_events_of_an_unknown_or_malformed_id(queue, capsys):
    missing = run_cli(capsys, "events", "999")
    assert (missing.status, missing.out, missing.err) == (2, "", "error: job 999 does not exist\n")
    bad = run_cli(capsys, "events", "x1")
    assert bad.status == 2 and bad.err.startswith("error: job id: 'x1' is not a job id")


def test_prune_deletes_old_ticks_and_the_events_of_the_jobs_it_deletes(queue, database_url, capsys):
    old, kept = submit(database_url), submit(database_url)
    api.cancel([old, kept], conn=queue)
    queue.execute("UPDATE jobs SET finished_at = now() - interval '40 days' WHERE id = %s", (old,))
    queue.execute(
        """INSERT INTO ticks (group_name, at, outcome, seconds)
           VALUES ('main', now() - interval '40 days', 'ticked', 1), ('main', now() - interval '1 day', 'ticked', 1)""")
    dry = run_cli(capsys, "prune", "--finished-before", "30d", "--dry-run")
    assert dry.out.splitlines()[1].startswith("would delete 1 tick record(s) from before ")
    done = run_cli(capsys, "prune", "--finished-before", "30d")
    assert done.status == 0, done.err
    assert done.out.splitlines()[1].startswith("deleted 1 tick record(s) from before ")
    assert queue.execute("SELECT count(*) AS n FROM ticks").fetchone()["n"] == 1
    left = queue.execute("SELECT DISTINCT job_id FROM job_events").fetchall()
    assert [row["job_id"] for row in left] == [kept]
    # The totals are kept: counters never go down.
    assert queue.execute("SELECT sum(count) AS n FROM job_event_totals WHERE kind = 'queued'").fetchone()["n"] == 2



def test_every_move_of_the_state_machine_has_its_kind(queue):
    """Each move a store write may make (job/core/states.py WRITES) is named by job_event_kind: a
    new state or write that the SQL does not know would show as 'changed'."""
    moves = sorted({move for write in states.WRITES for move in write.moves if move[0] != move[1]})
    assert len(moves) > 10
    for source, target in moves:
        reason = "Preempted" if target == states.PENDING else None
        kind = queue.execute("SELECT job_event_kind(%s, %s, NULL, %s, false, false) AS kind",
                             (source, target, reason)).fetchone()["kind"]
        assert kind not in ("changed", "queued"), (source, target, kind)
        assert kind == {states.SUBMITTING: "placed", states.SUBMITTED: "submitted", states.RUNNING: "started",
                        states.PENDING: "preempted"}.get(target, "finished"), (source, target, kind)


def _trigger_join_of_each_update(conn) -> list[str]:
    """The join nodes of the events trigger's old/new pairing, for each UPDATE of this session (the
    plans auto_explain reports of the statements the trigger runs)."""
    joins: list[str] = []

    def explained(notice) -> None:
        if "new_jobs n JOIN old_jobs o" in notice.message_primary:
            joins.extend(line.strip() for line in notice.message_primary.splitlines()
                         if "Join" in line or "Nested Loop" in line)

    conn.add_notice_handler(explained)
    conn.execute("LOAD 'auto_explain'")
    for setting in ("log_min_duration = 0", "log_nested_statements = on", "log_level = notice"):
        conn.execute(f"SET auto_explain.{setting}")
    return joins


def test_the_events_trigger_plans_its_join_for_each_update_not_once_per_session(conn):
    """A plan kept from a session's first UPDATE of one row paired 20,000 rows by a nested loop, n²
    comparisons (230 s): each UPDATE's own plan (sql/0011) pairs them by a hash join."""
    conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('g', '[{\"name\": \"c\", \"address\": \"http://ray:8265\"}]')")
    conn.execute("INSERT INTO users (name) VALUES ('alice')")
    conn.execute("""INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, reason, message)
                    SELECT 'alice', 'g', 'PENDING', 'true', '{"CPU": 1}', 'Queued', 'x' FROM generate_series(1, 5000)""")
    conn.execute("ANALYZE jobs")
    joins = _trigger_join_of_each_update(conn)
    conn.execute("UPDATE jobs SET reason = 'Resources' WHERE id = (SELECT min(id) FROM jobs)")
    small = list(joins)
    conn.execute("UPDATE jobs SET reason = 'Resources', message = 'y' WHERE reason = 'Queued'")
    big = joins[len(small):]
    assert small and big, joins
    assert not any("Nested Loop" in node for node in big), big
