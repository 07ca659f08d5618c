"""A tick's cost does not grow with history: finished jobs stay in PostgreSQL until `python -m job
prune` deletes them, and no statement a tick sends may read them.

The database of this module holds a million finished jobs. It is built once per module (10 s on a
quiet 2-CPU machine, up to 50 s on a busy one; printed on each run; most of it the INSERT, for which
the indexes and keys of `jobs` are dropped and then made again from their own definitions, which
halves it) and each test that commits works on its own copy of it (1 to 5 s).

Every statement a tick sends is captured as it is sent, with its parameters: by a real tick
(`run_tick`, against a fake Ray cluster that answers from a table), and by each store function a
tick calls, run on a group of a few jobs and on a group of 20,000 pending jobs. Each goes through
EXPLAIN, inside a transaction rolled back, and a plan that reads `jobs` other than through an index
over unfinished rows (a partial index whose predicate names unfinished states only), a lookup by
key (the primary key, submission_id), or the newest rows of an index over finished ones under a
LIMIT with no filter (the recent run times of estimates: as many rows as the LIMIT) fails the test,
naming the statement. Then `prune` on the
million rows, in batches, and its messages."""

from __future__ import annotations

import inspect
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import fake_ray
import psycopg
import pytest
from cli_helpers import run_cli
from fake_ray import REFUSED, FakeRay
from psycopg import sql
from psycopg.rows import dict_row

from job.cli import build_parser
from job.core import states
from job.core.group_snapshot import Held
from job.core.states import Reason
from job.devtools.local_postgres import with_database
from job.scheduler.config import TickConfig
from job.serve.report import read_report
from job.store import events, groups, reports, tick_jobs, users
from job.store import prune as prune_rows

HISTORY = 1_000_000
# Finished jobs end 5 s apart, the newest now, the oldest about 59 days ago, none between 29.5 and
# 30.5 days ago: a prune of 30d deletes the same rows whenever in the test it computes its cutoff.
SPACING_S = 5
GAP = (29.5 * 86400, 30.5 * 86400)
RETENTION = "30d"
USERS = [f"u{i:02}" for i in range(20)]
BIG_PENDING, BIG_ACTIVE = 20_000, 500
FAKE_RAY = "http://fake-ray.invalid:8265"


def _admin(server_url: str) -> psycopg.Connection:
    return psycopg.connect(server_url, autocommit=True)


def _say(request, line: str) -> None:
    """A line in pytest's output, shown even when output is captured: the figures of this module."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"test_history: {line}")


# --- the database: a million finished jobs -------------------------------------------------------


@pytest.fixture(scope="module")
def history_template(request, pg_server_url, pg_template):
    name = f"jobtest_{os.getpid()}_history"
    with _admin(pg_server_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    try:
        started = time.monotonic()
        with psycopg.connect(with_database(pg_server_url, name), row_factory=dict_row) as conn:
            timings = _build(conn)
        _say(request, f"{HISTORY:,} finished jobs built in {time.monotonic() - started:.1f} s ({timings})")
        yield name
    finally:
        with _admin(pg_server_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def _copy(server_url: str, template: str) -> Iterator[str]:
    name = f"{template}_{os.urandom(3).hex()}"
    with _admin(server_url) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield with_database(server_url, name)
    finally:
        with _admin(server_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def history_db(history_template, pg_server_url, monkeypatch):
    """A copy of the million-job database for this test, also set as JOB_DATABASE_URL."""
    with _copy(pg_server_url, history_template) as url:
        monkeypatch.setenv("JOB_DATABASE_URL", url)
        from job.settings import settings

        settings.cache_clear()
        yield url
        settings.cache_clear()


@pytest.fixture(scope="module")
def history_rolled_back(history_template, pg_server_url):
    """One copy shared by the tests that commit nothing there (each rolls its writes back)."""
    with _copy(pg_server_url, history_template) as url:
        yield url


def _build(conn: psycopg.Connection) -> str:
    conn.execute(
        """INSERT INTO resource_groups (name, clusters, pending_timeout_s, usage_charged_at, half_life_s)
           VALUES ('main', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %(ray)s::text)),
                   86400, now() - interval '1 minute', 3600),
                  ('big', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %(ray)s::text)),
                   86400, now() - interval '1 minute', 3600),
                  ('old', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %(ray)s::text)), NULL, NULL, 3600)""",
        {"ray": FAKE_RAY},
    )
    conn.execute("INSERT INTO users (name) SELECT unnest(%s::text[])", (USERS,))
    started = time.monotonic()
    with _bulk_load(conn):
        conn.execute(
            """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, attempt, submission_id, node,
                                 reason, message, exit_code, submitted_at, started_at, finished_at, updated_at)
               SELECT (%(users)s::text[])[1 + i %% %(n_users)s], (ARRAY['main', 'big', 'old'])[1 + i %% 3],
                      (%(finished)s::text[])[1 + i %% %(n_finished)s], 'python train.py', '{"CPU": 1}', 1, 'hist-' || i,
                      'node-' || i %% 8, 'Succeeded', 'exit code 0', 0,
                      f - interval '2 hours', f - interval '1 hour', f, f
               FROM generate_series(1, %(n)s) AS i,
                    LATERAL (SELECT (%(n)s - i) * %(spacing)s AS ago) a,
                    LATERAL (SELECT now() - make_interval(secs => a.ago + CASE WHEN a.ago > %(gap_from)s
                                                          THEN %(gap)s ELSE 0 END) AS f) t""",
            {"users": USERS, "n_users": len(USERS), "finished": list(states.FINISHED),
             "n_finished": len(states.FINISHED), "n": HISTORY, "spacing": SPACING_S,
             "gap_from": GAP[0], "gap": GAP[1] - GAP[0]},
        )
    loaded = time.monotonic() - started
    _add_unfinished(conn)
    conn.commit()
    conn.autocommit = True
    started = time.monotonic()
    conn.execute("VACUUM ANALYZE")
    return f"insert and indexes {loaded:.1f} s, VACUUM ANALYZE {time.monotonic() - started:.1f} s"


@contextmanager
def _bulk_load(conn: psycopg.Connection) -> Iterator[None]:
    """Without the indexes and keys of `jobs` during a bulk insert, then the same ones made again
    from their own definitions: building an index at once costs a fraction of a million inserts
    into it, and checking a foreign key once a fraction of a million lookups. Keys of other tables
    that reference jobs, if any, are dropped first and made again last. The history is loaded
    without its events (the triggers of sql/0008 off): no statement of a tick reads them."""
    constraints = conn.execute(
        """SELECT conname AS name, conrelid::regclass::text AS tab, pg_get_constraintdef(oid) AS definition
           FROM pg_constraint
           WHERE (conrelid = 'jobs'::regclass AND contype IN ('p', 'u', 'f', 'x'))
              OR (confrelid = 'jobs'::regclass AND conrelid <> 'jobs'::regclass)
           ORDER BY conrelid = 'jobs'::regclass, contype DESC""").fetchall()
    indexes = conn.execute(
        """SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
           WHERE i.indrelid = 'jobs'::regclass
             AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)""").fetchall()
    before = _index_definitions(conn)
    for constraint in constraints:
        conn.execute(sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
            sql.Identifier(constraint["tab"]), sql.Identifier(constraint["name"])))
    for index in indexes:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(index["name"])))
    conn.execute("ALTER TABLE jobs DISABLE TRIGGER USER")
    yield
    conn.execute("ALTER TABLE jobs ENABLE TRIGGER USER")
    conn.execute("SET maintenance_work_mem = '256MB'")
    for constraint in reversed(constraints):  # keys before the foreign keys
        conn.execute(sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} ").format(
            sql.Identifier(constraint["tab"]), sql.Identifier(constraint["name"])) + sql.SQL(constraint["definition"]))
    for index in indexes:
        conn.execute(index["definition"])
    assert _index_definitions(conn) == before


def _index_definitions(conn: psycopg.Connection) -> list[str]:
    return sorted(row["d"] for row in conn.execute(
        "SELECT pg_get_indexdef(indexrelid) AS d FROM pg_index WHERE indrelid = 'jobs'::regclass"))


def _add(conn: psycopg.Connection, **columns: Any) -> int:
    columns = {"entrypoint": "python train.py", "resources": '{"CPU": 1}', **columns}
    query = sql.SQL("INSERT INTO jobs ({}) VALUES ({}) RETURNING id").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)), sql.SQL(", ").join(sql.Placeholder() * len(columns)))
    return conn.execute(query, list(columns.values())).fetchone()["id"]


def _add_unfinished(conn: psycopg.Connection) -> None:
    now = datetime.now(UTC)
    ago = lambda **kw: now - timedelta(**kw)  # noqa: E731
    # Group main: a job of each kind the tick handles, for the real tick below.
    active = dict(group_name="main", attempt=1, submitted_at=ago(minutes=30), updated_at=ago(minutes=20))
    _add(conn, **active, user_name="u00", state="SUBMITTED", submission_id="live-done", node="node-a")
    _add(conn, **active, user_name="u01", state="RUNNING", submission_id="live-overtime", node="node-b",
         started_at=ago(minutes=10), max_runtime_s=60)
    _add(conn, **active, user_name="u02", state="RUNNING", submission_id="live-running", node="node-a",
         started_at=ago(minutes=10))
    _add(conn, **active, user_name="u03", state="SUBMITTED", submission_id="live-lost", node="node-b")
    _add(conn, **active, user_name="u04", state="SUBMITTING", submission_id="live-cancelled", node="node-a",
         cancel_requested_at=ago(minutes=1))
    running = _add(conn, **active, user_name="u00", state="SUBMITTING", submission_id="live-unsent", node="node-b")
    # A schedule whose last run is going and whose next slot is due: its job made by the tick.
    conn.execute("""INSERT INTO schedules (name, user_name, group_name, template, every_s, created_at)
                    VALUES ('often', 'u00', 'main', '{"entrypoint": "true", "resources": {"CPU": 1}}', 60, %s)""",
                 (ago(minutes=10, seconds=30),))
    conn.execute("""INSERT INTO schedule_slots (schedule_name, slot, outcome, job_id)
                    VALUES ('often', %s, 'submitted', %s)""", (ago(minutes=5, seconds=30), running))
    pending = dict(group_name="main", state="PENDING", reason="Queued", message="waiting for the next tick")
    _add(conn, **pending, user_name="u01", submitted_at=ago(days=2))  # past the group's pending timeout
    _add(conn, **pending, user_name="u02", resources='{"CPU": -1}')  # a row the planner cannot read
    _add(conn, **pending, user_name="u03", entrypoint=REFUSED, priority=10)
    for i in range(3):
        _add(conn, **pending, user_name=USERS[i], submitted_at=ago(minutes=5 - i))
    for i in range(30):
        _add(conn, **pending, user_name=USERS[i % 5], resources='{"CPU": 64}', submitted_at=ago(minutes=4))
    # Group big: a long queue, for the statements over many rows.
    conn.execute(
        """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, reason, message, submitted_at)
           SELECT (%(users)s::text[])[1 + i %% %(n_users)s], 'big', 'PENDING', 'python train.py', '{"CPU": 1}', 'Resources',
                  'an older message', now() - make_interval(secs => %(n)s - i)
           FROM generate_series(1, %(n)s) AS i""",
        {"users": USERS, "n_users": len(USERS), "n": BIG_PENDING})
    conn.execute(
        """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, attempt, submission_id, node,
                             submitted_at, started_at)
           SELECT (%(users)s::text[])[1 + i %% %(n_users)s], 'big', 'RUNNING', 'python train.py', '{"CPU": 1}', 1,
                  'big-' || i, 'node-' || i %% 8, now() - interval '1 hour', now() - interval '50 minutes'
           FROM generate_series(1, %(n)s) AS i""",
        {"users": USERS, "n_users": len(USERS), "n": BIG_ACTIVE})
    # Group old: unfinished jobs with an old finished_at (as no write leaves it, but a prune must
    # go by the state all the same).
    for state in states.UNFINISHED:
        _add(conn, group_name="old", user_name="u05", state=state, finished_at=ago(days=90),
             submission_id=None if state == states.PENDING else f"decoy-{state.lower()}")


# --- capturing statements and reading their plans ------------------------------------------------


@dataclass
class Statement:
    name: str  # the store function that sent it, e.g. "tick_jobs.pending_jobs"
    query: Any
    params: Any

    def text(self) -> str:
        return self.query if isinstance(self.query, str) else repr(self.query)


def _sender() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("job.store.") and module != "job.store.connection":
            return f"{module.removeprefix('job.store.')}.{frame.f_code.co_name}"
        frame = frame.f_back
    return "(not job.store)"


@contextmanager
def recording(monkeypatch) -> Iterator[list[Statement]]:
    """Every statement sent through a psycopg cursor meanwhile (Connection.execute too), with its
    parameters and the store function that sent it."""
    sent: list[Statement] = []
    execute = psycopg.Cursor.execute

    def recorded(self, query, params=None, **kwargs):
        sent.append(Statement(_sender(), query, params))
        return execute(self, query, params, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", recorded)
        yield sent


_EXPLAINABLE = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", re.IGNORECASE)


def plans(url: str, statements: list[Statement]) -> list[tuple[Statement, dict]]:
    """Each statement's plan as PostgreSQL would run it with its parameters (EXPLAIN, not run),
    inside a transaction that is rolled back."""
    found = []
    with psycopg.connect(url, row_factory=dict_row) as conn:
        for statement in statements:
            query = statement.query
            if isinstance(query, sql.Composable):
                query = sql.SQL("EXPLAIN (FORMAT JSON) ") + query
            elif _EXPLAINABLE.match(query if isinstance(query, str) else query.decode()):
                query = "EXPLAIN (FORMAT JSON) " + (query if isinstance(query, str) else query.decode())
            else:
                continue
            found.append((statement, conn.execute(query, statement.params).fetchone()["QUERY PLAN"][0]["Plan"]))
        conn.rollback()
    return found


def index_kinds(url: str) -> dict[str, str]:
    """Each index of jobs: 'unfinished' (partial, its predicate names unfinished states only),
    'key' (unique: a lookup by key reads as many rows as it asks for), 'recent' (partial, its
    predicate names finished states only: read under a LIMIT, as many rows as it asks for),
    'written' (on the group and the writing transaction, sql/0020: read from a snapshot's xmin on,
    as many rows as were written since), or 'history'."""
    kinds = {}
    with psycopg.connect(url, row_factory=dict_row) as conn:
        for row in conn.execute(
                """SELECT c.relname AS name, i.indisunique AS is_unique, pg_get_expr(i.indpred, i.indrelid) AS predicate,
                          pg_get_indexdef(i.indexrelid) AS definition
                   FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'jobs'::regclass"""):
            named = set(re.findall(r"'([A-Z]+)'", row["predicate"] or ""))
            if row["definition"].endswith("(group_name, version)"):
                kinds[row["name"]] = "written"
            elif named and named <= set(states.UNFINISHED):
                kinds[row["name"]] = "unfinished"
            elif named and named <= set(states.FINISHED) and not row["is_unique"]:
                kinds[row["name"]] = "recent"
            else:
                kinds[row["name"]] = "key" if row["is_unique"] else "history"
    return kinds


# Nodes that read `jobs` by an index (checked by the index's kind) or change it.
_BY_INDEX_OR_WRITE = {"Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Tid Scan", "ModifyTable"}


def history_reads(plan: dict, kinds: dict[str, str]) -> list[str]:
    """The nodes of a plan that read jobs other than through an index over unfinished rows, a
    lookup by key, an index scan of recent finished rows right under a LIMIT, in the index's
    order and with no filter (which stops after the LIMIT's rows), or the rows written from a
    version on."""
    found = []

    def walk(node: dict, parent: dict | None) -> None:
        kind = node["Node Type"]
        if node.get("Relation Name") == "jobs" and kind not in _BY_INDEX_OR_WRITE:
            found.append(f"{'Parallel ' if node.get('Parallel Aware') else ''}{kind} on jobs"
                         + (f" (Filter: {node['Filter']})" if "Filter" in node else ""))
        index = node.get("Index Name")
        limited = (kind == "Index Scan" and parent is not None and parent["Node Type"] == "Limit"
                   and "Filter" not in node)
        since = "version >=" in node.get("Index Cond", "")
        if index in kinds and (kinds[index] == "history" or (kinds[index] == "key" and not node.get("Index Cond"))
                               or (kinds[index] == "recent" and not limited) or (kinds[index] == "written" and not since)):
            found.append(f"{kind} using {index}, an index over finished jobs too"
                         + (f" (Index Cond: {node['Index Cond']})" if "Index Cond" in node else ""))
        for child in node.get("Plans", []):
            walk(child, node)

    walk(plan, None)
    return found


def assert_no_history_read(url: str, statements: list[Statement]) -> None:
    kinds = index_kinds(url)
    assert "unfinished" in kinds.values(), f"no index over unfinished jobs found: {kinds}"
    offences = []
    for statement, plan in plans(url, statements):
        for read in history_reads(plan, kinds):
            first = " ".join(statement.text().split())[:160]
            offences.append(f"{statement.name}: {read}\n      {first}")
    assert not offences, ("statements of a tick that read finished jobs "
                          f"({HISTORY:,} in the table):\n  " + "\n  ".join(sorted(set(offences))))


# --- a fake Ray cluster, for a real tick ---------------------------------------------------------




# --- the tick's statements -----------------------------------------------------------------------


def test_a_real_tick_reads_no_finished_job(history_db, monkeypatch):
    from job.scheduler import tick

    ray = FakeRay(fake_ray.finished("live-done", "node-a"), fake_ray.running("live-overtime", "node-b", minutes=10),
                  fake_ray.running("live-running", "node-a", minutes=10))
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    config = TickConfig(database_url=history_db, submit_concurrency=4, ray_timeout_s=5.0)
    with recording(monkeypatch) as sent:
        [result] = tick.run_tick(config, "main")
    assert result.status == "ticked", result.cause
    assert ray.submitted and ray.stopped == ["live-overtime"]
    # The scenario made the tick send each kind of statement it has.
    names = {statement.name for statement in sent}
    expected = {"tick_jobs.active_jobs", "tick_jobs.pending_jobs", "tick_jobs.fail_pending_timeouts",
                "tick_jobs.update_jobs", "tick_jobs.requeue_infra", "tick_jobs.return_to_pending", "tick_jobs.cancel_absent",
                "tick_jobs.intents_of", "tick_jobs.fail_pending", "tick_jobs.commit_intents", "tick_jobs.set_waiting",
                "tick_jobs.mark_submitted", "tick_jobs.recent_run_times", "users.users_of_group", "groups.groups",
                "groups.group_state", "groups.charge_usage", "schedules.group_schedules", "schedules.take_slot",
                "schedules.insert_slot_job"}
    assert expected <= names, f"not sent by this tick: {sorted(expected - names)}"
    assert_no_history_read(history_db, sent)


def _store_calls(conn: psycopg.Connection, group: str) -> set[str]:
    """Each store function of a tick that reads or writes jobs, on every job of the group it
    applies to (as a tick that finds them all in that case would); returns the names of the
    functions called. (The tick's statements on other tables are left to the real tick above.)
    Each call is committed, as a tick commits its steps: in one transaction, every UPDATE of rows
    that an earlier call updated walks their chain of row versions, which nothing can prune before
    the end."""
    called = set()

    def call(function, *args):
        called.add(f"{function.__module__.removeprefix('job.store.')}.{function.__name__}")
        result = function(*args)
        conn.commit()
        return result

    now = datetime.now(UTC)
    installation = groups.installation_id(conn)
    active = call(tick_jobs.active_jobs, conn, group)
    since = call(tick_jobs.current_snapshot, conn)
    pending = call(tick_jobs.pending_jobs, conn, group)
    assert active and pending
    active_ids, pending_ids = [job.id for job in active], [job.id for job in pending]
    call(users.users_of_group, conn, group)
    call(tick_jobs.fail_pending_timeouts, conn, group, 86400.0, now)
    call(tick_jobs.update_jobs, conn, {job.id: {column: getattr(job, column) for column in tick_jobs.JOB_UPDATE_COLUMNS}
                                       for job in active})
    call(tick_jobs.set_observed, conn, {job_id: {"used": {"CPU": 1}, "over_since": None} for job_id in active_ids})
    call(tick_jobs.return_to_pending, conn, {job.id: (job.state, "LostInRay", "lost") for job in active}, 3)
    call(tick_jobs.requeue_infra, conn, {job.id: (job.state, "InfraFailure", "node died") for job in active}, 5)
    call(tick_jobs.requeue_preempted, conn, {job.id: (job.state, "stopped to make room") for job in active})
    call(tick_jobs.mark_victims, conn, {job_id: pending_ids[0] for job_id in active_ids}, now)
    call(tick_jobs.victims_stopping, conn, {job_id: "being stopped" for job_id in active_ids})
    call(tick_jobs.set_reservations, conn, {job_id: Held("node-a") for job_id in pending_ids}, now)
    call(tick_jobs.set_estimates, conn, {job_id: (1, now, "from max runtimes") for job_id in pending_ids})
    call(tick_jobs.recent_run_times, conn, group, 500)
    call(tick_jobs.cancel_absent, conn, active_ids)
    call(tick_jobs.intents_of, conn, active_ids)
    call(tick_jobs.fail_pending, conn, {job_id: "resources.CPU: negative" for job_id in pending_ids[:10]}, Reason.INVALID_JOB)
    call(tick_jobs.states_of, conn, active_ids + pending_ids)
    call(tick_jobs.commit_intents, conn, [(job_id, "node-a") for job_id in pending_ids], installation)
    call(events.note_placements, conn, {job_id: (1, {"policy": "fifo"}) for job_id in pending_ids})
    call(tick_jobs.set_waiting, conn, {job_id: ("Resources", "needs CPU 1") for job_id in pending_ids}, now)
    call(tick_jobs.mark_submitted, conn, pending_ids)
    # After every write above: all of the group's pending jobs written since.
    call(tick_jobs.pending_changes, conn, group, since)
    return called


@pytest.mark.parametrize("group", ["main", "big"])
def test_each_statement_of_a_tick_reads_no_finished_job(history_db, monkeypatch, group):
    with psycopg.connect(history_db, row_factory=dict_row) as conn, recording(monkeypatch) as sent:
        called = _store_calls(conn, group)
    defined = {f"tick_jobs.{name}" for name, function in inspect.getmembers(tick_jobs, inspect.isfunction)
               if function.__module__ == tick_jobs.__name__ and not name.startswith("_")}
    assert defined <= called, f"add a call of {sorted(defined - called)} to _store_calls in tests/store/test_history.py"
    assert called <= {statement.name for statement in sent}
    assert_no_history_read(history_db, sent)


def test_the_reports_read_no_finished_job(history_rolled_back, monkeypatch):
    """What `share`, the metrics and the status page read (job/store/reports.py, every function)."""
    with psycopg.connect(history_rolled_back, row_factory=dict_row) as conn, recording(monkeypatch) as sent:
        report = read_report(conn, totals=True, queue=50)
        conn.rollback()
    defined = {f"reports.{name}" for name, function in inspect.getmembers(reports, inspect.isfunction)
               if function.__module__ == reports.__name__}
    assert defined <= {statement.name for statement in sent}
    assert {"main", "big"} <= {job["group_name"] for job in report.queue}
    assert_no_history_read(history_rolled_back, sent)


def test_the_check_catches_a_scan_of_the_history(history_rolled_back):
    # users_of_group as it was: one EXISTS over every unfinished state, which neither partial index
    # matches; and a lookup of a user's jobs through jobs_user, which holds every job they ever had.
    before = Statement("users.users_of_group (before)", """
        SELECT u.name, u.shares, u.max_running, u.max_resources, coalesce(uu.usage, 0) AS usage
        FROM users u LEFT JOIN user_usage uu ON uu.user_name = u.name AND uu.group_name = %(group)s
        WHERE uu.usage > 0 OR EXISTS (
            SELECT 1 FROM jobs j WHERE j.user_name = u.name AND j.group_name = %(group)s
              AND j.state = ANY(%(unfinished)s))""", {"group": "main", "unfinished": list(states.UNFINISHED)})
    by_user = Statement("by user", "SELECT id FROM jobs WHERE user_name = %s AND state = ANY(%s)",
                        ("u01", list(states.UNFINISHED)))
    # The recent run times without their LIMIT, or with a filter the index cannot answer: each
    # reads the group's whole history through jobs_succeeded_recent.
    unlimited = Statement("recent, no limit", "SELECT started_at FROM jobs WHERE group_name = %s AND state = %s "
                          "ORDER BY finished_at DESC", ("main", states.SUCCEEDED))
    filtered = Statement("recent, filtered", "SELECT started_at FROM jobs WHERE group_name = %s AND state = %s "
                         "AND user_name = %s ORDER BY finished_at DESC LIMIT 20", ("main", states.SUCCEEDED, "u01"))
    # A group's jobs in the order they were written, from the first: its whole history.
    unbounded = Statement("written, from the first", "SELECT id FROM jobs WHERE group_name = %s ORDER BY version",
                          ("main",))
    kinds = index_kinds(history_rolled_back)
    assert kinds.get("jobs_pending") == kinds.get("jobs_active") == "unfinished" and kinds.get("jobs_user") == "history"
    assert kinds.get("jobs_succeeded_recent") == "recent" and kinds.get("jobs_group_version") == "written"
    for statement, plan in plans(history_rolled_back, [before, by_user, unlimited, filtered, unbounded]):
        assert history_reads(plan, kinds), (statement.name, plan)
    with pytest.raises(AssertionError, match=r"users_of_group \(before\): "):
        assert_no_history_read(history_rolled_back, [before])


# --- prune ---------------------------------------------------------------------------------------


def _census(url: str) -> dict:
    """What a prune of RETENTION may delete and what it must keep (a checksum of every row kept)."""
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return conn.execute(
            """SELECT count(*) FILTER (WHERE old) AS old, count(*) FILTER (WHERE NOT old) AS kept,
                      count(*) FILTER (WHERE state <> ALL(%(finished)s)) AS unfinished,
                      sum(hashtextextended(jobs::text, 0)::numeric) FILTER (WHERE NOT old) AS kept_checksum
               FROM jobs, LATERAL (SELECT state = ANY(%(finished)s) AND finished_at < now() - interval '30 days'
                                          AS old) o""",
            {"finished": list(states.FINISHED)}).fetchone()


def _nodes(plan: dict) -> Iterator[dict]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_prune_deletes_exactly_the_old_finished_jobs_in_batches(request, history_db, capsys, monkeypatch):
    before = _census(history_db)
    assert before["old"] > 400_000 and before["unfinished"] > BIG_PENDING

    # Each batch walks the primary key from where the last one ended: no batch reads the table again.
    with psycopg.connect(history_db, row_factory=dict_row) as conn, recording(monkeypatch) as sent:
        prune_rows.delete_finished_before(conn, prune_rows.cutoff(conn, 30 * 86400), 0, 5000)
        conn.rollback()
    [(_, batch_plan)] = [(s, p) for s, p in plans(history_db, sent) if s.name == "prune.delete_finished_before"]
    assert not [node for node in _nodes(batch_plan) if node["Node Type"] == "Seq Scan"], batch_plan
    assert any(node.get("Index Name") == "jobs_pkey" and "Index Cond" in node for node in _nodes(batch_plan))

    dry = run_cli(capsys, "prune", "--finished-before", RETENTION, "--dry-run")
    assert dry.status == 0, dry.err
    assert re.fullmatch(rf"would delete {before['old']} finished job\(s\) that finished before \S+Z "
                        r"\(older than 30d\)\nwould delete 0 tick record\(s\) from before \S+Z\n", dry.out), dry.out
    assert _census(history_db) == before

    started = time.monotonic()
    done = run_cli(capsys, "prune", "--finished-before", RETENTION)
    seconds = time.monotonic() - started
    assert done.status == 0, done.err
    batches = math.ceil(before["old"] / 5000)
    assert done.out.startswith(f"deleted {before['old']} finished job(s) that finished before ")
    assert f", in {batches} batch(es) of at most 5000\n" in done.out, done.out
    after = _census(history_db)
    assert after == {**before, "old": 0}, "a pending, active or recent job was deleted, or changed"
    _say(request, f"prune of {before['old']:,} of {before['old'] + before['kept']:,} jobs: {seconds:.1f} s "
                  f"({batches} batches)")

    again = run_cli(capsys, "prune", "--finished-before", RETENTION)
    assert again.status == 0 and again.out.startswith("deleted 0 finished job(s)") and "in 0 batch(es)" in again.out


def _small_history(conn: psycopg.Connection, old: int, recent: int) -> None:
    conn.execute("INSERT INTO resource_groups (name, clusters) "
                 "VALUES ('main', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %s::text)))", (FAKE_RAY,))
    conn.execute("INSERT INTO users (name) VALUES ('u00')")
    conn.execute(
        """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, submission_id, finished_at)
           SELECT 'u00', 'main', (%(finished)s::text[])[1 + i %% 4], 'true', '{"CPU": 1}', 'small-' || i,
                  CASE WHEN i <= %(old)s THEN now() - interval '40 days' ELSE now() - interval '20 days' END
           FROM generate_series(1, %(n)s) AS i""",
        {"finished": list(states.FINISHED), "old": old, "n": old + recent})
    for state in states.UNFINISHED:
        conn.execute(
            """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, submission_id, finished_at)
               VALUES ('u00', 'main', %s, 'true', '{"CPU": 1}', %s, now() - interval '90 days')""",
            (state, None if state == states.PENDING else f"decoy-{state}"))


def test_prune_with_a_small_batch(conn, capsys):
    _small_history(conn, old=2345, recent=100)
    done = run_cli(capsys, "prune", "--finished-before", "30d", "--batch", "1000")
    assert done.status == 0, done.err
    assert done.out.startswith("deleted 2345 finished job(s)") and ", in 3 batch(es) of at most 1000\n" in done.out
    left = conn.execute("SELECT state, count(*) AS n FROM jobs GROUP BY state").fetchall()
    assert {row["state"]: row["n"] for row in left} == {
        **{state: 25 for state in states.FINISHED}, **{state: 1 for state in states.UNFINISHED}}


@pytest.mark.parametrize("args, option", [
    (["--finished-before=-5d"], "--finished-before"),
    (["--finished-before", "-5"], "--finished-before"),
    (["--finished-before", "soon"], "--finished-before"),
    (["--finished-before", "0"], "--finished-before"),
    (["--finished-before", "30d", "--batch", "0"], "--batch"),
    (["--finished-before", "30d", "--batch", "-5"], "--batch"),
    (["--finished-before", "30d", "--batch", "many"], "--batch"),
    (["--finished-before", "30d", "--batch", "1000000"], "--batch"),
])
def test_prune_refuses_bad_input_and_deletes_nothing(conn, capsys, args, option):
    _small_history(conn, old=10, recent=0)
    refused = run_cli(capsys, "prune", *args)
    assert refused.status == 2 and refused.out == ""
    assert refused.err.startswith(f"error: {option}: ") and refused.err.count("\n") == 1, refused.err
    assert conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 10 + len(states.UNFINISHED)


def test_prune_needs_a_retention():
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["prune"])
    assert exited.value.code == 2
