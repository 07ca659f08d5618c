"""A tick and the jobs' dependencies on a real PostgreSQL: what waits stays out of the plan with its
reason, what never holds ends FAILED naming the job, what holds is planned in the tick that records
the end, across groups too. Ray is the table of tests/fake_ray.py: the subject is what the tick reads
and writes (the chain on a real Ray cluster: test_tick_dependencies_ray.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cli_helpers import run_cli
from fake_ray import FakeRay, running
from tick_helpers import add_group, jobs

from job.adapters.ray_cluster import RayJob
from job.api import submit
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.store import tick_jobs


def tick_once(database_url, monkeypatch, ray: FakeRay, group: str = "main"):
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    [result] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), group)
    assert result.status == "ticked", result.cause
    return result


def end_in_ray(ray: FakeRay, row: dict, status: str) -> None:
    now = datetime.now(UTC)
    ray.known[row["submission_id"]] = RayJob(row["submission_id"], status, row["node"], now, now, None,
                                             0 if status == "SUCCEEDED" else 1)


def why(row: dict) -> tuple:
    return row["state"], row["reason"], row["message"]


def events(conn, job: int) -> list[tuple]:
    return [(row["kind"], row["reason"]) for row in conn.execute(
        "SELECT kind, reason FROM job_events WHERE job_id = %s ORDER BY id", (job,))]


def test_a_chain_waits_then_follows_how_its_first_job_ended(database_url, conn, monkeypatch):
    add_group(conn, "http://127.0.0.1:8265")
    add_group(conn, "http://127.0.0.1:8266", name="other", users=())
    a = submit(user="alice", group="main", entrypoint="exit 1")
    # B asks for the whole cluster: were it planned, it would hold a reservation.
    b = submit(user="alice", group="main", entrypoint="true", after=[a], resources={"CPU": 8})
    c = submit(user="alice", group="main", entrypoint="true", after=f"{b}:any")
    d = submit(user="bob", group="main", entrypoint="true", after=[f"{a}:fail"])
    e = submit(user="bob", group="other", entrypoint="true", after=[a])
    ray = FakeRay()
    first = tick_once(database_url, monkeypatch, ray)
    rows = jobs(conn)
    assert rows[a]["state"] == "SUBMITTED"
    # A's state as the tick read it, before it placed A; the next tick says SUBMITTED.
    assert why(rows[b]) == ("PENDING", "Dependency", f"waits for job {a} to succeed (PENDING)")
    assert why(rows[c]) == ("PENDING", "Dependency", f"waits for job {b} to end (PENDING)")
    assert why(rows[d]) == ("PENDING", "Dependency", f"waits for job {a} to fail (PENDING)")
    assert first.waiting["Dependency"] == 3
    # Out of the plan: no reservation, no place in line, no estimate.
    assert all(rows[job]["reserved_node"] is None and rows[job]["queue_position"] is None for job in (b, c, d))

    assert why(jobs(conn)[d]) == ("PENDING", "Dependency", f"waits for job {a} to fail (PENDING)")
    tick_once(database_url, monkeypatch, ray)
    assert why(jobs(conn)[d]) == ("PENDING", "Dependency", f"waits for job {a} to fail (SUBMITTED)")
    end_in_ray(ray, rows[a], "FAILED")
    tick_once(database_url, monkeypatch, ray)
    rows = jobs(conn)
    assert rows[a]["state"] == "FAILED"
    # In the tick that recorded A's end: B never runs, and C, which waited for B to end, runs.
    assert why(rows[b]) == ("FAILED", "DependencyNeverSatisfied",
                            f"job {a} ended FAILED, and this job waited for job {a} to succeed")
    assert rows[b]["finished_at"] is not None
    assert rows[c]["state"] == rows[d]["state"] == "SUBMITTED"
    assert events(conn, d) == [("queued", "Queued"), ("waiting", "Dependency"), ("dependency_satisfied", "Queued"),
                               ("placed", "Submitting"), ("submitted", None)]
    assert events(conn, b)[-1] == ("finished", "DependencyNeverSatisfied")
    message = conn.execute("SELECT message FROM job_events WHERE job_id = %s AND kind = 'dependency_satisfied'",
                           (c,)).fetchone()["message"]
    assert message == f"dependencies satisfied: job {b} FAILED"
    # Another group's job follows at its own group's tick.
    tick_once(database_url, monkeypatch, FakeRay(), "other")
    assert why(jobs(conn)[e]) == ("FAILED", "DependencyNeverSatisfied",
                                  f"job {a} ended FAILED, and this job waited for job {a} to succeed")


def test_a_job_waited_for_that_is_gone_or_cancelled_never_lets_its_dependents_run(database_url, conn, monkeypatch):
    add_group(conn, "http://127.0.0.1:8265")
    pruned = submit(user="alice", group="main", entrypoint="true", not_before="2100-01-01T00:00:00Z")
    cancelled = submit(user="alice", group="main", entrypoint="true", not_before="2100-01-01T00:00:00Z")
    waits = submit(user="alice", group="main", entrypoint="true", after=[f"{pruned}:any"])
    ends = submit(user="alice", group="main", entrypoint="true", after=[f"{cancelled}:any"])
    fails = submit(user="alice", group="main", entrypoint="true", after=[f"{cancelled}:fail"])
    conn.execute("DELETE FROM jobs WHERE id = %s", (pruned,))
    conn.execute("UPDATE jobs SET state = 'CANCELLED', finished_at = now() WHERE id = %s", (cancelled,))
    tick_once(database_url, monkeypatch, FakeRay())
    rows = jobs(conn)
    assert why(rows[waits]) == ("FAILED", "DependencyNeverSatisfied",
                                f"job {pruned} is gone (pruned), and this job waited for job {pruned} to end")
    assert why(rows[fails]) == ("FAILED", "DependencyNeverSatisfied",
                                f"job {cancelled} was cancelled, and this job waited for job {cancelled} to fail")
    assert rows[ends]["state"] == "SUBMITTED"


def test_the_states_waited_for_are_one_statement_and_none_without_dependencies(database_url, conn, monkeypatch):
    add_group(conn, "http://127.0.0.1:8265")
    calls = []
    real = tick_jobs.states_of
    monkeypatch.setattr(tick_jobs, "states_of", lambda connection, ids: calls.append(ids) or real(connection, ids))
    first = submit(user="alice", group="main", entrypoint="true", resources={"CPU": 4})
    ray = FakeRay()
    tick_once(database_url, monkeypatch, ray)
    # No job waits: no statement (states_of sends none for no id).
    assert calls == [[]]
    for _ in range(20):
        submit(user="alice", group="main", entrypoint="true", after=[first])
    second = submit(user="bob", group="main", entrypoint="true", after=[first, f"{first + 1}:any"])
    tick_once(database_url, monkeypatch, ray)
    assert calls[1:] == [[first, first + 1]]
    assert jobs(conn)[second]["message"] == (f"waits for job {first} to succeed (SUBMITTED), "
                                             f"job {first + 1} to end (PENDING)")


def test_a_job_after_an_array_waits_for_every_task(database_url, conn, monkeypatch):
    """An array's id stands for its tasks: `--after ARRAY_ID` holds once every task succeeded, and
    `:any` holds once every task ended, one of them failed."""
    add_group(conn, "http://127.0.0.1:8265")
    array = submit(user="alice", group="main", entrypoint="true", array="0-2")
    ok = submit(user="alice", group="main", entrypoint="true", after=[array])
    ended = submit(user="alice", group="main", entrypoint="true", after=[f"{array}:any"])
    ray = FakeRay()
    tick_once(database_url, monkeypatch, ray)
    tasks = [array, array + 1, array + 2]
    rows = jobs(conn)
    assert all(rows[task]["state"] == "SUBMITTED" for task in tasks)
    # Two of three ended: both still wait for the array.
    end_in_ray(ray, rows[array], "SUCCEEDED")
    end_in_ray(ray, rows[array + 1], "FAILED")
    tick_once(database_url, monkeypatch, ray)
    rows = jobs(conn)
    assert why(rows[ok])[:2] == why(rows[ended])[:2] == ("PENDING", "Dependency")
    assert why(rows[ok])[2] == f"waits for job {array} to succeed (RUNNING)"
    end_in_ray(ray, rows[array + 2], "SUCCEEDED")
    tick_once(database_url, monkeypatch, ray)
    rows = jobs(conn)
    assert why(rows[ok]) == ("FAILED", "DependencyNeverSatisfied", why(rows[ok])[2]) and str(array) in why(rows[ok])[2]
    assert rows[ended]["state"] == "SUBMITTED"


def test_a_waiting_job_is_estimated_to_start_when_what_it_waits_for_should_end(database_url, conn, monkeypatch, capsys):
    add_group(conn, "http://127.0.0.1:8265")
    a = submit(user="alice", group="main", entrypoint="sleep 600", max_runtime="10m")
    b = submit(user="alice", group="main", entrypoint="true", after=[a], max_runtime="5m")
    c = submit(user="bob", group="main", entrypoint="true", after=[f"{b}:any"])
    ray = FakeRay()
    tick_once(database_url, monkeypatch, ray)
    row = jobs(conn)[a]
    ray.known[row["submission_id"]] = running(row["submission_id"], row["node"], minutes=0)
    tick_once(database_url, monkeypatch, ray)
    rows = jobs(conn)
    started = rows[a]["started_at"]
    assert rows[a]["state"] == "RUNNING"
    # Stored to the minute, as every estimate.
    assert abs(rows[b]["estimated_start_at"] - (started + timedelta(minutes=10))) <= timedelta(seconds=30)
    assert abs(rows[c]["estimated_start_at"] - (started + timedelta(minutes=15))) <= timedelta(seconds=30)
    assert rows[b]["queue_position"] is None and rows[b]["estimate_basis"] == f"after the expected end of job {a}"
    header, *lines = run_cli(capsys, "jobs").out.splitlines()
    listed = {line.split()[0]: line[header.index("EST_START"):].split()[0] for line in lines}
    assert listed[str(b)] == f"{rows[b]['estimated_start_at'].astimezone(UTC):%H:%M}"
    assert listed[str(c)] == f"{rows[c]['estimated_start_at'].astimezone(UTC):%H:%M}"
