"""A row written past the CLI (an admin's SQL) with a value the CLI would refuse: a tick and every
read command end without a traceback, and the other group's rows go on as before. Random bad
values go into every column of `jobs` and `resource_groups` of group `bad`; group `good` beside it
must tick and read exactly as it does with no bad row at all."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import psycopg
import pytest
from cli_helpers import run_cli
from fake_ray import FakeRay, running
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from job import api, log
from job.devtools.local_postgres import with_database
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.serve.metrics import exposition
from job.serve.page import render
from job.serve.report import read_report
from job.settings import settings

_databases = itertools.count()

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["CPU", "GPU", "memory", "name", "x", ""]),
                                                                inner, max_size=3),
    max_leaves=6,
)
# Values of each column type that the CLI would refuse somewhere; the database refuses some of
# them by its own checks (then nothing is written, which is fine too).
BY_TYPE = {
    "jsonb": JSON_VALUES.map(Jsonb) | st.sampled_from([{"CPU": "lots"}, {"CPU": -1}, {"CPU": 1e300}, [[]], {"": {}}]).map(Jsonb),
    "text": st.sampled_from(["", " ", "PENDING", "nope", "x" * 300, "raycluster://", "http://", "CPU", "-1", "\t"])
    | st.text(max_size=12),
    "integer": st.sampled_from([-2**31, -1, 0, 1, 2**31 - 1]),
    "bigint": st.sampled_from([-1, 0, 2**40]),
    "double precision": st.sampled_from([-1.0, 0.0, 1e-300, 1e300, float("inf"), float("nan")]),
    "boolean": st.booleans(),
    "timestamp with time zone": st.datetimes(datetime(1970, 1, 1), datetime(2200, 1, 1), timezones=st.just(UTC)),
    "ARRAY": st.lists(st.sampled_from(["", "CPU", "x y", "GPU", "GPU"]), max_size=3),
    # jobs.version: the trigger writes the writing transaction's over whatever is set.
    "xid8": st.sampled_from(["0", "1", str(2**40)]),
}
# Keys: what no admin would rewrite without meaning to move the row elsewhere (a job's id, the
# group's name, that other rows point at).
KEYS = {("jobs", "id"), ("resource_groups", "name")}


def _columns(conn) -> list[tuple[str, str, str]]:
    return [(row["table_name"], row["column_name"], row["data_type"]) for row in conn.execute(
        """SELECT table_name, column_name, data_type FROM information_schema.columns
           WHERE table_schema = 'public' AND table_name IN ('jobs', 'resource_groups') ORDER BY 1, ordinal_position""")
            if (row["table_name"], row["column_name"]) not in KEYS]


@pytest.fixture(scope="module")
def columns(pg_server_url, pg_template):
    with psycopg.connect(with_database(pg_server_url, pg_template), row_factory=dict_row) as conn:
        return _columns(conn)


@contextmanager
def _world(admin_url: str, template: str, monkeypatch) -> Iterator[tuple[str, dict[str, list[int]]]]:
    """A fresh database: groups `bad` and `good`, each with a pending, a running and a finished job."""
    name = f"jobtest_{os.getpid()}_bad_{next(_databases)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield _fill(with_database(admin_url, name), name, monkeypatch)
    finally:
        settings.cache_clear()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _fill(url: str, name: str, monkeypatch) -> tuple[str, dict[str, list[int]]]:
    monkeypatch.setenv("JOB_DATABASE_URL", url)
    settings.cache_clear()
    ray = FakeRay()
    ids: dict[str, list[int]] = {}
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("UPDATE installation SET id = substr(md5(%s), 1, 8)", (name,))
        conn.execute("INSERT INTO users (name) VALUES ('alice')")
        for group in ("bad", "good"):
            conn.execute("INSERT INTO resource_groups (name, clusters, priority_classes, default_class) "
                         "VALUES (%s, '[{\"name\": \"c\", \"address\": \"http://ray:8265\"}]', %s, 'low')",
                         (group, Jsonb([{"name": "low", "value": 0, "preemptible": True}])))
            ids[group] = [api.submit(user="alice", group=group, entrypoint="true", resources={"CPU": 1},
                                     bundles=[{"CPU": 1}], bundle_strategy="PACK", database_url=url)
                          for _ in range(3)]
            _pending, active, done = ids[group]
            for job_id, state in ((active, "RUNNING"), (done, "SUCCEEDED")):
                submission = f"{group}-{job_id}"
                conn.execute("UPDATE jobs SET state = %s, submission_id = %s, node = 'node-a', attempt = 1, "
                             "started_at = now(), observed = %s WHERE id = %s",
                             (state, submission, Jsonb(OBSERVED), job_id))
                ray.known[submission] = running(submission, "node-a")
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    return url, ids


OBSERVED = {"declared": {"CPU": 1.0}, "used": {"CPU": 1.0}, "charged": {"CPU": 1.0}, "nodes": {"node-a": {"CPU": 1.0}},
            "placement_groups": 0, "actors": 0, "tasks": 0, "over_since": None}


def _reads(capsys, ids: dict[str, list[int]]) -> dict[str, str]:
    """Every read command's output, none of them ending in a traceback (a raised exception)."""
    outputs = {}
    for argv in (["jobs"], ["jobs", "--json"], ["jobs", "--state", "PENDING"], ["share"], ["share", "--json"],
                 ["group", "list"], ["group", "show", "good"], ["group", "show", "bad"], ["group", "list", "--json"],
                 *[["show", str(i), *json_flag] for group in ids.values() for i in group for json_flag in ([], ["--json"])]):
        result = run_cli(capsys, *argv)
        assert result.status in (0, 1, 2) and "Traceback" not in result.err, (argv, result)
        outputs[" ".join(argv)] = result.out
    with psycopg.connect(os.environ["JOB_DATABASE_URL"], row_factory=dict_row) as conn:
        report = read_report(conn, totals=True, queue=10)
    render(report, datetime.now(UTC))
    outputs["metrics"] = exposition(report).decode()
    return outputs


def _good_rows(url: str) -> list[tuple]:
    """Group `good`'s jobs as a tick leaves them, in id order."""
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT state, reason, attempt, node, bundle_nodes, exit_code FROM jobs "
                            "WHERE group_name = 'good' ORDER BY id").fetchall()


def _tick(url: str):
    return {result.group: result for result in tick.run_tick(TickConfig(database_url=url, submit_concurrency=2,
                                                                          ray_timeout_s=5.0))}


@pytest.fixture(scope="module")
def baseline(pg_server_url, pg_template):
    """What group `good`'s jobs become after a tick with no bad row."""
    with pytest.MonkeyPatch.context() as monkeypatch, _world(pg_server_url, pg_template, monkeypatch) as (url, _):
        results = _tick(url)
        assert {name: r.status for name, r in results.items()} == {"bad": "ticked", "good": "ticked"}
        return _good_rows(url)


@hypothesis_settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_bad_value_in_any_column_stops_no_tick_and_no_read(data, columns, baseline, pg_server_url, pg_template,
                                                              monkeypatch, capsys):
    table, column, data_type = data.draw(st.sampled_from(columns), label="column")
    with _world(pg_server_url, pg_template, monkeypatch) as (url, ids):
        _bad_row_ticks_and_reads(data, table, column, data_type, url, ids, baseline, capsys)


def _bad_row_ticks_and_reads(data, table, column, data_type, url, ids, baseline, capsys) -> None:
    value = data.draw(BY_TYPE[data_type], label="value")
    row = data.draw(st.sampled_from(ids["bad"]), label="job") if table == "jobs" else "bad"
    key = "id" if table == "jobs" else "name"
    # The database's own checks may refuse it: then nothing bad was written.
    with (psycopg.connect(url, autocommit=True) as admin,
          contextlib.suppress(psycopg.errors.IntegrityError, psycopg.errors.DataError,
                              psycopg.errors.InvalidTextRepresentation)):
        admin.execute(f'UPDATE {table} SET "{column}" = %s WHERE {key} = %s', (value, row))
    _reads(capsys, ids)

    results = _tick(url)

    assert results["good"].status == "ticked", results["good"]
    assert _good_rows(url) == baseline
    after = _reads(capsys, ids)
    if results["bad"].status == "failed":
        assert results["bad"].cause
        assert 'job_ticks_total{group="bad",outcome="failed"} 1.0' in after["metrics"]



@pytest.fixture
def world(pg_server_url, pg_template, monkeypatch):
    with _world(pg_server_url, pg_template, monkeypatch) as made:
        yield made


@pytest.fixture
def failures(monkeypatch):
    """The `group_failed` lines of the test, as their fields."""
    lines = []
    error = log.error

    def record(event_name, **fields):
        if event_name == "group_failed":
            lines.append(fields)
        error(event_name, **fields)

    monkeypatch.setattr(log, "error", record)
    return lines


def test_a_group_whose_default_class_names_no_class_fails_alone_and_shows_failing(world, failures, capsys):
    url, _ids = world
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("UPDATE resource_groups SET default_class = 'nope' WHERE name = 'bad'")

    results = _tick(url)

    assert results["good"].status == "ticked" and results["bad"].status == "failed"
    [line] = failures
    assert (line["group"], line["field"], line["value"]) == ("bad", "default_class", "'nope'"), line
    assert "'nope' is not one of the group's classes (low)" in line["cause"]
    shown = run_cli(capsys, "group", "show", "bad")
    assert shown.status == 0 and "problem:" in shown.out, shown.out
    assert "group bad: default_class: 'nope' is not one of the group's classes (low)" in shown.out
    with psycopg.connect(url, row_factory=dict_row) as conn:
        report = read_report(conn, totals=True, queue=10)
    page = render(report, datetime.now(UTC))
    assert "failing since" in page.split("id='group-bad'")[1].split("</section>")[0]
    assert "failing since" not in page.split("id='group-good'")[1].split("</section>")[0]
    assert 'job_ticks_total{group="bad",outcome="failed"} 1.0' in exposition(report).decode()


def test_a_job_asking_lots_of_cpu_is_read_with_its_problem_and_failed_by_the_tick(world, capsys):
    url, ids = world
    pending, running_job, _ = ids["bad"]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("""UPDATE jobs SET resources = '{"CPU": "lots"}' WHERE id = ANY(%s)""", ([pending, running_job],))

    listed = run_cli(capsys, "jobs", "--state", "PENDING")
    assert listed.status == 0
    [row] = [line for line in listed.out.splitlines() if line.split()[0] == str(pending)]
    assert "invalid row: resources.CPU: Input should be a valid number (stored: {'CPU': 'lots'})" in row
    for job_id in (pending, running_job):
        shown = run_cli(capsys, "show", str(job_id))
        assert shown.status == 0 and "problem:" in shown.out and "resources.CPU" in shown.out, shown
        as_json = json.loads(run_cli(capsys, "show", str(job_id), "--json").out)
        assert as_json["problem"].startswith("resources.CPU: ") and as_json["resources"] == {"CPU": "lots"}
    assert run_cli(capsys, "share").status == 0

    results = _tick(url)

    assert results["bad"].status == "ticked" and results["good"].status == "ticked"
    with psycopg.connect(url, row_factory=dict_row) as conn:
        row = conn.execute("SELECT state, reason, message FROM jobs WHERE id = %s", (pending,)).fetchone()
    assert (row["state"], row["reason"]) == ("FAILED", "InvalidJob") and "resources.CPU" in row["message"], row


@pytest.mark.parametrize("clusters", [[None], [{"address": "http://127.0.0.1:1"}], [{"name": 7}], ["east"]])
def test_a_group_with_malformed_clusters_is_listed_and_fails_alone(world, baseline, clusters, capsys):
    """Found by the test above: `group list` read each cluster's name, and a list holding a null
    ended it in a traceback."""
    url, ids = world
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("UPDATE resource_groups SET clusters = %s WHERE name = 'bad'", (Jsonb(clusters),))
    read = _reads(capsys, ids)
    line = next(line for line in read["group list"].splitlines() if line.startswith("bad "))
    assert "invalid" in line, read["group list"]
    assert 'job_cluster_active_jobs{cluster="c",group="good"} 1.0' in read["metrics"]
    results = _tick(url)
    assert results["good"].status == "ticked", results["good"]
    assert _good_rows(url) == baseline
