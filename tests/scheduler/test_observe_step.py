"""The tick's observe step on fake_ray.py, where Ray's side is what the test says it is: a running
job's observed use is recorded once and written again only when it changes, charged to its user,
and a truncated list, or a state API that fails, is said in the summary line, counting the
declaration instead."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import fake_ray
import pytest
from fake_ray import FakeRay

from job.core.errors import Unavailable
from job.core.observed import SUPERVISOR_PREFIX, ClusterWork, Work
from job.core.resources import Resources
from job.scheduler import report, tick
from job.scheduler.config import TickConfig

FAKE = "http://fake-ray.invalid:8265"
DRIVER_JOB_ID = "04000000"


@pytest.fixture
def greedy(conn):
    """Greedy's job, declaring CPU 0.5 on node-a, RUNNING in Ray with its driver job id."""
    conn.execute("INSERT INTO resource_groups (name, clusters, policy, half_life_s) "
                 "VALUES ('main', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %s::text)), 'drf', 3600)",
                 (FAKE,))
    conn.execute("INSERT INTO users (name) VALUES ('greedy')")
    started = datetime.now(UTC) - timedelta(minutes=1)
    job_id = conn.execute(
        """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, attempt, submission_id, node,
                             started_at, submitted_at)
           VALUES ('greedy', 'main', 'RUNNING', 'python greedy.py', '{"CPU": 0.5}', 1, 'greedy-1', 'node-a', %s, %s)
           RETURNING id""", (started, started)).fetchone()["id"]
    return job_id, FakeRay(replace(fake_ray.running("greedy-1", "node-a"), driver_job_id=DRIVER_JOB_ID))


def work(actors: int, truncated: tuple[str, ...] = ()) -> ClusterWork:
    return ClusterWork(actors=(Work("01000000", "node-a", Resources.of({"CPU": 0.5}), name=SUPERVISOR_PREFIX + "greedy-1"),
                               *(Work(DRIVER_JOB_ID, "node-b", Resources.of({"CPU": 1})) for _ in range(actors))),
                       truncated=truncated)


def run(database_url, monkeypatch, ray: FakeRay):
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    [result] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "main")
    assert result.status == "ticked", result.cause
    return result


def observed(conn, job_id: int) -> tuple[dict | None, str]:
    row = conn.execute("SELECT observed, xmin::text FROM jobs WHERE id = %s", (job_id,)).fetchone()
    return row["observed"], row["xmin"]


def test_the_use_is_recorded_once_and_written_again_only_when_it_changes(conn, database_url, monkeypatch, greedy):
    job_id, ray = greedy
    monkeypatch.setattr(ray, "work", lambda: work(3))
    run(database_url, monkeypatch, ray)
    first, xmin = observed(conn, job_id)
    assert (first["declared"], first["used"], first["charged"], first["actors"]) == ({"CPU": 0.5}, {"CPU": 3.5},
                                                                                   {"CPU": 3.5}, 3)
    assert first["nodes"] == {"node-a": {"CPU": 0.5}, "node-b": {"CPU": 3}} and first["over_since"] is not None
    run(database_url, monkeypatch, ray)
    assert observed(conn, job_id) == (first, xmin)
    monkeypatch.setattr(ray, "work", lambda: work(1))
    run(database_url, monkeypatch, ray)
    changed, _ = observed(conn, job_id)
    assert changed["used"] == {"CPU": 1.5} and changed["over_since"] == first["over_since"]


def test_usage_is_charged_on_what_the_job_uses(conn, database_url, monkeypatch, greedy):
    _job_id, ray = greedy
    monkeypatch.setattr(ray, "work", lambda: work(3))
    run(database_url, monkeypatch, ray)  # the first charge only starts the clock
    conn.execute("UPDATE resource_groups SET usage_charged_at = now() - interval '100 seconds'")
    run(database_url, monkeypatch, ray)
    usage = conn.execute("SELECT usage FROM user_usage WHERE user_name = 'greedy'").fetchone()["usage"]
    # CPU 3.5 of the fake's 8 for 100 s: a dominant share of 0.4375, about 43.7 share-seconds (0.5
    # declared would be 6.25).
    assert usage == pytest.approx(43.75, rel=0.02)


def test_a_truncated_list_is_said_in_the_summary_and_the_declaration_counted(conn, database_url, monkeypatch, greedy):
    job_id, ray = greedy
    monkeypatch.setattr(ray, "work", lambda: work(3, truncated=("tasks",)))
    result = run(database_url, monkeypatch, ray)
    assert result.observed_fallback == ("ray truncated its list of tasks: counting what each job declared, "
                                        "not what it uses")
    assert observed(conn, job_id)[0] is None
    said = {}
    monkeypatch.setattr(report.log, "event", lambda event, **fields: said.update(fields))
    report.summary(result)
    assert said["observed"] == result.observed_fallback


@pytest.mark.parametrize("failure", ["ray at http://fake-ray.invalid:8265 unreachable: timed out",
                                     "ray at http://fake-ray.invalid:8265 failed list tasks: HTTP 500: boom"])
def test_a_state_api_that_fails_does_not_fail_the_tick(conn, database_url, monkeypatch, greedy, failure):
    job_id, ray = greedy

    def fails():
        raise Unavailable(failure)

    monkeypatch.setattr(ray, "work", fails)
    conn.execute("""INSERT INTO jobs (user_name, group_name, entrypoint, resources)
                    VALUES ('greedy', 'main', 'x', '{"CPU": 4}')""")
    result = run(database_url, monkeypatch, ray)
    assert result.observed_fallback == f"unavailable ({failure}): counting what each job declared, not what it uses"
    assert observed(conn, job_id)[0] is None
    # The tick went on: the pending job was planned on the node greedy's declaration leaves whole.
    assert result.placed == 1 and ray.submitted
    said = {}
    monkeypatch.setattr(report.log, "event", lambda event, **fields: said.update(fields))
    report.summary(result)
    assert said["observed"] == result.observed_fallback


def test_while_the_state_api_fails_no_job_is_stopped_for_its_over_use(conn, database_url, monkeypatch, greedy):
    job_id, ray = greedy
    conn.execute("UPDATE resource_groups SET overuse = 'stop', overuse_grace_s = 3600")
    monkeypatch.setattr(ray, "work", lambda: work(3))
    run(database_url, monkeypatch, ray)
    assert observed(conn, job_id)[0]["over_since"] is not None and ray.stopped == []
    # Past the grace now; but with no reading of its use, its last one is no reason to stop it.
    conn.execute("UPDATE resource_groups SET overuse_grace_s = 0")

    def fails():
        raise Unavailable("ray at http://fake-ray.invalid:8265 unreachable: timed out")

    monkeypatch.setattr(ray, "work", fails)
    run(database_url, monkeypatch, ray)
    assert ray.stopped == []
    monkeypatch.setattr(ray, "work", lambda: work(3))
    run(database_url, monkeypatch, ray)
    assert ray.stopped == ["greedy-1"]
