"""Priority classes and preemption against a real local Ray cluster and a real PostgreSQL: a high
class job makes room by stopping a low class one, which comes back and succeeds; a light user
reclaims its fair share from a heavy one; a crash at each new failpoint loses nothing and stops
nothing twice; a STRICT_SPREAD gang stops a job on each worker and starts whole on both."""

from __future__ import annotations

import sys
import time

import pytest
from cli_helpers import run_process
from psycopg.types.json import Jsonb
from tick_helpers import FINAL, add_group, jobs, ray_submissions, run_tick, tick_until

from job import log
from job.adapters.ray_cluster import cluster_for
from job.api import cancel, submit
from job.core.errors import BadInput

pytestmark = pytest.mark.ray

CLASSES = [{"name": "low", "value": 0, "preemptible": True}, {"name": "high", "value": 10, "preemptible": True}]
# The first attempt runs until it is stopped; the next ones end at once. It says what it was told.
LONG_FIRST = ('echo "class=$JOB_CLASS attempt=$JOB_ATTEMPT preemptible=$JOB_PREEMPTIBLE"; '
              'if [ "$JOB_ATTEMPT" = 1 ]; then sleep 300; else sleep 2; fi')


def add_classes_group(conn, address, mode, **options):
    add_group(conn, address, priority_classes=Jsonb(CLASSES), default_class="low", preemption=mode, min_runtime_s=0,
              **options)
    for user in ("bob", "ann"):
        conn.execute("INSERT INTO users (name) VALUES (%s) ON CONFLICT DO NOTHING", (user,))


@pytest.fixture
def events(monkeypatch):
    """The `preempted` and `requeued` log lines of the test's ticks, as their fields, by event."""
    lines = {"preempted": [], "requeued": []}
    event = log.event

    def record(event_name, **fields):
        if event_name in lines:
            lines[event_name].append(fields)
        event(event_name, **fields)

    monkeypatch.setattr(log, "event", record)
    return lines


def running(rows, *ids):
    return all(rows[i]["state"] == "RUNNING" for i in ids)


def fill_both_workers(conn) -> list[int]:
    """Two low class jobs of bob's, one on each worker, running."""
    low = [submit(user="bob", group="main", entrypoint=LONG_FIRST, resources={"CPU": 2}) for _ in range(2)]
    tick_until(conn, lambda rows: running(rows, *low))
    return low


def test_a_high_class_job_stops_a_low_one_runs_on_its_node_and_the_victim_comes_back(ray, conn, events):
    add_classes_group(conn, ray.address, "priority")
    low = fill_both_workers(conn)
    high = submit(user="ann", group="main", entrypoint=LONG_FIRST.replace("300", "3"), resources={"CPU": 2},
                  priority_class="high")

    run_tick()
    rows = jobs(conn)
    [line] = events["preempted"]
    victim = line["job"]
    assert victim in low and line["by_job"] == high
    assert (line["user"], line["job_class"], line["by_user"], line["by_class"]) == ("bob", "low", "ann", "high")
    assert line["node"] == rows[victim]["node"] and line["run_time_lost_s"] > 0
    assert (rows[high]["reason"], rows[high]["reserved_node"]) == ("Preempting", rows[victim]["node"])
    assert rows[victim]["preempted_by"] == high and rows[victim]["reason"] == "Preempted"
    reserved = rows[high]["reserved_node"]

    # Tick by tick: the victim is stopped in Ray and requeued; then the high job goes to its node.
    ticks_after_requeue = None
    history = []
    while True:
        run_tick()
        rows = jobs(conn)
        history.append((rows[victim]["state"], rows[high]["state"], rows[high]["reason"]))
        if rows[victim]["state"] == "PENDING" and ticks_after_requeue is None:
            ticks_after_requeue = 0
        elif ticks_after_requeue is not None:
            ticks_after_requeue += 1
        if rows[high]["state"] in ("SUBMITTED", "RUNNING", "SUCCEEDED"):
            break
        assert len(history) < 60, history
        time.sleep(1)
    assert ticks_after_requeue is not None and ticks_after_requeue <= 2, history
    assert rows[high]["node"] == reserved and rows[high]["reserved_node"] is None
    # Back in the queue as Preempted (its reason since then is why it waits: the plan's).
    [requeued] = events["requeued"]
    assert (requeued["job"], requeued["reason"], requeued["preemptions"]) == (victim, "Preempted", 1)
    assert rows[victim]["state"] == "PENDING" and rows[victim]["preemptions"] == 1
    assert rows[victim]["attempt"] == 1 and rows[victim]["requeues"] == 0
    assert rows[victim]["submitted_at"] < rows[high]["submitted_at"]

    rows = tick_until(conn, lambda rows: rows[high]["state"] in FINAL and rows[victim]["state"] in FINAL)
    assert rows[high]["state"] == rows[victim]["state"] == "SUCCEEDED"
    assert rows[victim]["attempt"] == 2 and rows[victim]["preemptions"] == 1
    submissions = ray_submissions(ray.address, conn)
    # One Ray submission per attempt: the victim's first, stopped, and its second, succeeded.
    assert sorted(submissions[victim].values()) == ["STOPPED", "SUCCEEDED"]
    assert list(submissions[high].values()) == ["SUCCEEDED"]
    cluster = cluster_for(ray.address, 10.0)
    assert "class=high attempt=1 preemptible=true" in cluster.logs(rows[high]["submission_id"])
    assert "class=low attempt=2 preemptible=true" in cluster.logs(rows[victim]["submission_id"])


def test_a_light_user_reclaims_its_fair_share_from_a_heavy_one(ray, conn, events, capsys):
    """Bob fills the group's 4 CPUs with long jobs; Ann arrives with as many. Under fairshare
    preemption, with equal shares, each is entitled to half the group.

    At two jobs each their dominant shares are equal, and only Bob's memory of past use, the
    seconds he had the group alone, keeps Ann's score strictly below his for her second job. A
    10 minute half life keeps that memory above zero and far below the quarter of the group that
    would let her take a third job, however long the machine takes to start his."""
    add_classes_group(conn, ray.address, "fairshare", policy="fairshare", half_life_s=600)
    heavy = [submit(user="bob", group="main", entrypoint="sleep 300", resources={"CPU": 1}) for _ in range(4)]
    tick_until(conn, lambda rows: running(rows, *heavy))
    light = [submit(user="ann", group="main", entrypoint="sleep 300", resources={"CPU": 1}) for _ in range(4)]

    def shares(rows):
        held = {"ann": 0.0, "bob": 0.0}
        for row in rows.values():
            if row["state"] in ("SUBMITTING", "SUBMITTED", "RUNNING"):
                held[row["user_name"]] += row["resources"]["CPU"] / 4
        return held

    preempted = events["preempted"]
    report = ["tick  ann share  bob share  entitlement  ann running  preempted so far"]
    met_at = None
    for number in range(1, 41):
        run_tick()
        rows = jobs(conn)
        held = shares(rows)
        running_ann = sum(rows[i]["state"] == "RUNNING" for i in light)
        report.append(f"{number:>4}  {held['ann']:>9.0%}  {held['bob']:>9.0%}  {0.5:>11.0%}"
                      f"  {running_ann:>11}  {len(preempted):>16}")
        if running_ann == 2 and met_at is None:
            met_at = number
        if met_at is not None and number >= met_at + 3:
            break
        time.sleep(1)
    with capsys.disabled():
        print("\n" + "\n".join(report))
    assert met_at is not None, "\n".join(report)
    # They meet at the entitlement and stay there: no job of Ann's is stopped to give back.
    assert shares(jobs(conn)) == {"ann": 0.5, "bob": 0.5}
    assert len(preempted) == 2
    assert all(line["user"] == "bob" and line["by_user"] == "ann" for line in preempted)
    rows = jobs(conn)
    assert sorted(rows[i]["state"] for i in heavy) == ["PENDING", "PENDING", "RUNNING", "RUNNING"]
    assert all(rows[i]["preemptions"] == 1 for i in heavy if rows[i]["state"] == "PENDING")


@pytest.mark.parametrize("failpoint", ["after-preempt-intent", "after-stop"])
def test_a_crash_at_a_preemption_failpoint_loses_nothing_and_stops_nothing_twice(ray, conn, failpoint):
    add_classes_group(conn, ray.address, "priority")
    low = fill_both_workers(conn)
    high = submit(user="ann", group="main", entrypoint=LONG_FIRST.replace("300", "3"), resources={"CPU": 2},
                  priority_class="high")
    crashed = run_process("tick", env={"JOB_FAILPOINT": failpoint})
    assert crashed.status == -9, crashed.err
    assert f"event=failpoint name={failpoint}" in crashed.err
    rows = jobs(conn)
    [victim] = [i for i in low if rows[i]["preempted_at"] is not None]
    # The decision was committed before the crash: the victim is marked, the node reserved.
    assert rows[high]["reserved_node"] == rows[victim]["node"] and rows[victim]["preempted_by"] == high
    # Not recorded as told: the stop may or may not have reached Ray; the next tick asks again.
    assert rows[victim]["reason"] is None
    rows = tick_until(conn, lambda rows: rows[high]["state"] in FINAL and rows[victim]["state"] in FINAL)
    assert rows[high]["state"] == rows[victim]["state"] == "SUCCEEDED"
    other = next(i for i in low if i != victim)
    assert rows[other]["state"] == "RUNNING" and rows[other]["preemptions"] == 0
    assert rows[victim]["preemptions"] == 1 and rows[victim]["attempt"] == 2
    assert all(row["reserved_node"] is None for row in rows.values())
    submissions = ray_submissions(ray.address, conn)
    assert sorted(submissions[victim].values()) == ["STOPPED", "SUCCEEDED"]
    assert list(submissions[high].values()) == ["SUCCEEDED"]
    assert list(submissions[other].values()) == ["RUNNING"]


def test_a_strict_spread_gang_stops_a_job_on_each_worker_and_starts_whole_on_both(ray, conn, events):
    add_classes_group(conn, ray.address, "priority")
    low = fill_both_workers(conn)
    gang = submit(user="ann", group="main", entrypoint="sleep 2", resources={"CPU": 0}, bundles=[{"CPU": 2}] * 2,
                  bundle_strategy="STRICT_SPREAD", priority_class="high")

    run_tick()
    rows = jobs(conn)
    # No one worker holds both bundles: one victim on each, and the gang reserves both.
    assert sorted(line["job"] for line in events["preempted"]) == sorted(low)
    workers = sorted(rows[victim]["node"] for victim in low)
    assert rows[gang]["reason"] == "Preempting" and sorted(rows[gang]["reserved_bundle_nodes"]) == workers
    assert "are held for it" in rows[gang]["message"] or "stopping 2 jobs on nodes" in rows[gang]["message"]

    rows = tick_until(conn, lambda rows: rows[gang]["state"] in ("SUBMITTED", "RUNNING", *FINAL), timeout=90)
    assert sorted(rows[gang]["bundle_nodes"]) == workers
    assert rows[gang]["reserved_node"] is None and rows[gang]["reserved_bundle_nodes"] is None
    rows = tick_until(conn, lambda rows: all(rows[i]["state"] in FINAL for i in (gang, *low)))
    assert [rows[i]["state"] for i in (gang, *low)] == ["SUCCEEDED"] * 3
    assert all(rows[victim]["preemptions"] == 1 for victim in low)


# Ignores SIGTERM and would run for ever: only Ray's SIGKILL after its stop wait ends it.
IGNORES_SIGTERM = (f'exec {sys.executable} -c "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '
                   '[time.sleep(1) for _ in iter(int, 1)]"')
UNSTOPPABLE = {"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "600"}}


def test_a_job_that_ignores_sigterm_is_still_stopped_by_cancel_preemption_and_max_runtime(ray, conn):
    add_classes_group(conn, ray.address, "priority", max_attempts=1)
    # A stop wait of its own would keep it RUNNING for 600 s after every stop: refused at submit.
    with pytest.raises(BadInput, match=r"env_vars\.RAY_JOB_STOP_WAIT_TIME_S: "):
        submit(user="bob", group="main", entrypoint=IGNORES_SIGTERM, runtime_env=UNSTOPPABLE)
    b = {"node_labels": {"pool": "b"}, "priority_class": "high"}
    victim = submit(user="bob", group="main", entrypoint=IGNORES_SIGTERM, resources={"CPU": 2}, node_labels={"pool": "a"})
    cancelled = submit(user="bob", group="main", entrypoint=IGNORES_SIGTERM, resources={"CPU": 0.5}, **b)
    limited = submit(user="bob", group="main", entrypoint=IGNORES_SIGTERM, resources={"CPU": 0.5}, max_runtime="8s", **b)
    # One written around submit (before this check, or by hand) fails at the tick's submit, never reaching Ray.
    slipped = submit(user="bob", group="main", entrypoint=IGNORES_SIGTERM, resources={"CPU": 0.5}, **b)
    conn.execute("UPDATE jobs SET runtime_env = %s WHERE id = %s", (Jsonb(UNSTOPPABLE), slipped))

    rows = tick_until(conn, lambda rows: running(rows, victim, cancelled) and rows[slipped]["state"] != "PENDING")
    assert (rows[slipped]["state"], rows[slipped]["reason"]) == ("FAILED", "SubmitRefused")
    assert "env_vars.RAY_JOB_STOP_WAIT_TIME_S" in rows[slipped]["message"]
    submit(user="ann", group="main", entrypoint="true", resources={"CPU": 2}, node_labels={"pool": "a"}, priority_class="high")
    cancel([cancelled])

    def stopped(rows):
        submissions = ray_submissions(ray.address, conn)
        return (rows[cancelled]["state"] in FINAL and rows[limited]["state"] in FINAL
                and submissions[victim].get(first_run) == "STOPPED")

    first_run = rows[victim]["submission_id"]
    # Ray's own stop wait is 3 s; a tick or two before and after it.
    rows = tick_until(conn, stopped, timeout=60)
    assert (rows[cancelled]["state"], rows[cancelled]["reason"]) == ("STOPPED", "Cancelled")
    assert (rows[limited]["state"], rows[limited]["reason"]) == ("STOPPED", "RuntimeLimit")
    assert rows[victim]["preemptions"] == 1
    submissions = ray_submissions(ray.address, conn)
    assert (submissions[cancelled], submissions[limited]) == ({rows[cancelled]["submission_id"]: "STOPPED"},
                                                              {rows[limited]["submission_id"]: "STOPPED"})
    assert slipped not in submissions
