"""Who may do what (sql/0005_roles.sql): each role, connected as a real login role to the real
PostgreSQL, does its work and tries to cross its boundary. PostgreSQL refuses, and the CLI says so
in one line with exit status 2.

Login roles belong to the server and are shared by every test database (and by concurrent test
runs): they are made once, where missing, under names no other test uses; each test database
grants them CONNECT."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import fake_ray
import psycopg
import pytest
from cli_helpers import Result, run_cli, run_process
from fake_ray import REFUSED, FakeRay
from psycopg import sql
from psycopg.rows import dict_row

from job import api
from job.core import states
from job.core.errors import PermissionDenied
from job.core.group_snapshot import RELEASING, Held
from job.core.states import Reason
from job.scheduler.config import TickConfig
from job.store import groups, jobs, tick_jobs, users

ALICE, BOB = "jobroles_alice", "jobroles_bob"
SCHEDULER, ADMIN, READER = "jobroles_scheduler", "jobroles_admin", "jobroles_reader"
LOGINS = {ALICE: "job_submitter", BOB: "job_submitter", SCHEDULER: "job_scheduler", ADMIN: "job_admin",
          READER: "job_reader"}
GROUP = "g"


def as_role(url: str, role: str) -> str:
    """The same database, logged in as `role` (the test server trusts local logins)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))


@pytest.fixture(scope="session")
def logins(pg_server_url, pg_template):
    """The login roles, each a member of its group role (made by the template's migration)."""
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        for login, group in LOGINS.items():
            admin.execute(sql.SQL(
                """DO $$ BEGIN
                       BEGIN CREATE ROLE {login} LOGIN;
                       EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END;
                       BEGIN GRANT {group} TO {login};
                       EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END;
                   END $$""").format(login=sql.Identifier(login), group=sql.Identifier(group)))
    return LOGINS


@pytest.fixture
def db(database_url, conn, logins):
    """The test database with a group, the two submitters as queue users, CONNECT for every login;
    `db.url(role)` is its URL as that role, `db.conn` the owner's connection."""
    dbname = urlsplit(database_url).path.lstrip("/")
    conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
        sql.Identifier(dbname), sql.SQL(", ").join(sql.Identifier(login) for login in logins)))
    conn.execute("INSERT INTO resource_groups (name, clusters, selector) "
                 "VALUES (%s, '[{\"name\": \"c\", \"address\": \"http://127.0.0.1:8265\"}]', 'roundrobin')",
                 (GROUP,))
    conn.execute("INSERT INTO users (name) VALUES (%s), (%s)", (ALICE, BOB))

    class Db:
        url = staticmethod(lambda role: as_role(database_url, role))

    Db.conn = conn
    return Db


def connect_as(db, role: str) -> psycopg.Connection:
    return psycopg.connect(db.url(role), row_factory=dict_row, autocommit=True)


def cli_as(db, monkeypatch, capsys, role: str, *argv: str) -> Result:
    monkeypatch.setenv("JOB_DATABASE_URL", db.url(role))
    return run_cli(capsys, *argv)


def refused_in_one_line(result: Result, *words: str) -> str:
    """A refusal as the CLI prints it: exit 2, one line on stderr naming what was refused."""
    assert result.status == 2, (result.status, result.out, result.err)
    line = result.err.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in result.err, result.err
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"
    return line


def job_of(db, user: str, state: str = states.PENDING, **columns: Any) -> int:
    """A job written by the owner, in any state."""
    columns = {"user_name": user, "group_name": GROUP, "entrypoint": "true", "resources": '{"CPU": 1}', "state": state,
               **columns}
    if state not in (states.PENDING, states.CANCELLED, states.FAILED):
        columns.setdefault("submission_id", f"test-{user}-{state}-{datetime.now().timestamp()}")
    return db.conn.execute(f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))}) RETURNING id",
                           list(columns.values())).fetchone()["id"]


def row(db, job_id: int) -> dict:
    return db.conn.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()


# --- a submitter ---------------------------------------------------------------------------------


def test_a_submitter_submits_lists_shows_and_cancels_its_own_jobs(db, monkeypatch, capsys):
    bobs = job_of(db, BOB)
    submitted = cli_as(db, monkeypatch, capsys, ALICE, "submit", "--user", ALICE, "--group", GROUP,
                       "--entrypoint", "python train.py", "--cpus", "2", "--priority", "3", "--metadata", "team=ml")
    assert submitted.status == 0, submitted.err
    mine = int(submitted.out)
    assert row(db, mine)["user_name"] == ALICE and row(db, mine)["state"] == states.PENDING

    listed = cli_as(db, monkeypatch, capsys, ALICE, "jobs", "--json")
    assert listed.status == 0 and [job["id"] for job in json.loads(listed.out)] == [mine]
    assert bobs != mine
    assert cli_as(db, monkeypatch, capsys, ALICE, "jobs", "--user", ALICE).status == 0
    shown = cli_as(db, monkeypatch, capsys, ALICE, "show", str(mine))
    assert shown.status == 0 and "python train.py" in shown.out

    running = job_of(db, ALICE, states.RUNNING, attempt=1)
    cancelled = cli_as(db, monkeypatch, capsys, ALICE, "cancel", str(mine), str(running))
    assert cancelled.status == 0, cancelled
    assert f"job {mine}: cancelled" in cancelled.out and f"job {running}: cancel requested" in cancelled.out
    assert row(db, mine)["state"] == states.CANCELLED and row(db, running)["cancel_requested_at"] is not None

    # The Python API, under the same login.
    other = api.submit(user=ALICE, group=GROUP, entrypoint="true", database_url=db.url(ALICE))
    assert api.cancel([other, mine], database_url=db.url(ALICE)) == {
        other: (states.PENDING, states.CANCELLED), mine: (states.CANCELLED, states.CANCELLED)}


def test_a_submitter_depends_on_the_jobs_it_sees_and_is_refused_the_others(db, monkeypatch, capsys):
    bobs, alices = job_of(db, BOB), job_of(db, ALICE)
    submit = ("submit", "--user", ALICE, "--group", GROUP, "--entrypoint", "true", "--after")
    mine = cli_as(db, monkeypatch, capsys, ALICE, *submit, f"{alices}:any")
    assert mine.status == 0, mine.err
    before = db.conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"]
    rule = f"you are logged in as {ALICE!r} and see and cancel only your own jobs"
    # Another user's job is not one it sees: refused as a job that does not exist.
    refused = cli_as(db, monkeypatch, capsys, ALICE, *submit, f"{alices},{bobs}")
    assert refused_in_one_line(refused) == f"error: after: job {bobs} does not exist or is not yours ({rule})"
    assert db.conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == before
    # Its `show` names only the dependents it sees.
    with connect_as(db, BOB) as bob:
        assert jobs.edges(bob, jobs.get_job(bob, bobs)) == ({}, [])
    with connect_as(db, ALICE) as alice:
        assert jobs.edges(alice, jobs.get_job(alice, alices)) == ({}, [int(mine.out)])
    # The admin sees every job, and may make any job wait for any other.
    assert cli_as(db, monkeypatch, capsys, ADMIN, *submit, str(bobs)).status == 0


def test_a_submitter_submits_and_cancels_its_own_array_only(db, monkeypatch, capsys):
    submitted = cli_as(db, monkeypatch, capsys, ALICE, "submit", "--user", ALICE, "--group", GROUP,
                       "--entrypoint", "true", "--array", "1-3%1")
    assert submitted.status == 0, submitted.err
    array_id = int(submitted.out.splitlines()[-1])
    assert [row(db, array_id + i)["array_id"] for i in range(3)] == [array_id] * 3
    # Another submitter finds no array of that id, and cancels nothing of it.
    assert cli_as(db, monkeypatch, capsys, BOB, "cancel", str(array_id)).status == 2
    assert {row(db, array_id + i)["state"] for i in range(3)} == {states.PENDING}
    cancelled = cli_as(db, monkeypatch, capsys, ALICE, "cancel", str(array_id))
    assert cancelled.out.strip() == f"array {array_id}: 3 cancelled"
    assert {row(db, array_id + i)["state"] for i in range(3)} == {states.CANCELLED}


def test_a_submitter_submits_only_as_itself(db, monkeypatch, capsys):
    result = cli_as(db, monkeypatch, capsys, BOB, "submit", "--user", ALICE, "--group", GROUP, "--entrypoint", "true")
    line = refused_in_one_line(result)
    assert line == f"error: user: you are logged in as {BOB!r} and may submit only as {BOB!r}"
    with pytest.raises(PermissionDenied, match=f"may submit only as {BOB!r}"):
        api.submit(user=ALICE, group=GROUP, entrypoint="true", database_url=db.url(BOB))
    with connect_as(db, BOB) as bob, pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        bob.execute("INSERT INTO jobs (state, user_name, group_name, entrypoint, resources) "
                    "VALUES (%s, %s, %s, 'true', '{}')", (states.PENDING, ALICE, GROUP))
    assert db.conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 0


def test_a_submitter_neither_sees_nor_cancels_another_users_job(db, monkeypatch, capsys):
    alices = job_of(db, ALICE, reason="Queued", message="waiting")
    alices_running = job_of(db, ALICE, states.RUNNING, attempt=1)
    before = [row(db, alices), row(db, alices_running)]

    with connect_as(db, BOB) as bob:
        assert bob.execute("SELECT id FROM jobs").fetchall() == []
        assert jobs.cancel_jobs(bob, [alices, alices_running]) == {alices: (None, None), alices_running: (None, None)}
    rule = f"you are logged in as {BOB!r} and see and cancel only your own jobs"
    shown = cli_as(db, monkeypatch, capsys, BOB, "show", str(alices))
    assert refused_in_one_line(shown) == f"error: job {alices} does not exist or is not yours ({rule})"
    cancelled = cli_as(db, monkeypatch, capsys, BOB, "cancel", str(alices), str(alices_running))
    assert cancelled.status == 2 and cancelled.out.splitlines() == [
        f"job {alices}: does not exist or is not yours ({rule})",
        f"job {alices_running}: does not exist or is not yours ({rule})"]
    refused_in_one_line(cli_as(db, monkeypatch, capsys, BOB, "jobs", "--user", ALICE), f"--user: {rule}")
    assert api.cancel([alices], database_url=db.url(BOB)) == {alices: (None, None)}
    assert [row(db, alices), row(db, alices_running)] == before


def test_a_submitter_cannot_write_jobs_but_through_submit_and_cancel(db, monkeypatch, capsys):
    mine = job_of(db, BOB)
    running = job_of(db, BOB, states.RUNNING, attempt=1)
    before = [row(db, mine), row(db, running)]
    denied = psycopg.errors.InsufficientPrivilege
    with connect_as(db, BOB) as bob:
        for statement, args in [
            ("UPDATE jobs SET priority = 100 WHERE id = %s", (mine,)),
            # A running job put back to PENDING would run twice; one stopped here would run on in Ray.
            ("UPDATE jobs SET state = %s WHERE id = %s", (states.PENDING, running)),
            ("DELETE FROM jobs WHERE id = %s", (mine,)),
            # No place in the queue of its choosing, no job it did not submit as PENDING.
            ("INSERT INTO jobs (user_name, group_name, entrypoint, resources, submitted_at) "
             "VALUES (current_user, %s, 'true', '{}', now() - interval '1 year')", (GROUP,)),
            ("INSERT INTO jobs (state, user_name, group_name, entrypoint, resources) "
             "VALUES (%s, current_user, %s, 'true', '{}')", (states.RUNNING, GROUP)),
            ("TRUNCATE jobs", ()),
            # The cancel function makes a cancel's moves only, whatever it is asked.
            ("SELECT * FROM job_cancel(%s, %s, %s, %s)", ([running], [states.RUNNING], states.CANCELLED, [])),
            ("SELECT * FROM job_cancel(%s, %s, %s, %s)", ([running], [states.PENDING], states.PENDING, [])),
        ]:
            with pytest.raises(denied):
                bob.execute(statement, args)
    assert [row(db, mine), row(db, running)] == before


def test_a_submitter_changes_no_group_no_user_no_usage_not_even_its_own_shares(db, monkeypatch, capsys):
    groups_before = db.conn.execute("SELECT * FROM resource_groups").fetchall()
    users_before = db.conn.execute("SELECT * FROM users ORDER BY name").fetchall()
    for argv, table in [
        (("group", "set", GROUP, "--policy", "fifo"), "resource_groups"),
        (("group", "add", "mine", "--ray-address", "http://127.0.0.1:8265"), "resource_groups"),
        (("group", "remove", GROUP), "resource_groups"),
        (("user", "set", BOB, "--shares", "100"), "users"),
        (("user", "set", "someone"), "users"),
    ]:
        line = refused_in_one_line(cli_as(db, monkeypatch, capsys, BOB, *argv), f"permission denied for table {table}")
        assert line.startswith(f"error: {argv[0]} {argv[1]}: refused to the database role {BOB!r}: ")
    with connect_as(db, BOB) as bob:
        for statement in ["UPDATE users SET shares = 100 WHERE name = current_user",
                          "UPDATE resource_groups SET usage_charged_at = now() - interval '1 year'",
                          "INSERT INTO user_usage (group_name, user_name, usage) VALUES ('g', current_user, 0)",
                          "DELETE FROM user_usage", "SELECT * FROM user_usage", "DELETE FROM group_state",
                          "CREATE TABLE mine (id int)", "ALTER TABLE jobs DISABLE ROW LEVEL SECURITY"]:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                bob.execute(statement)
        # What a submit needs to read: the groups and users by name.
        assert {r["name"] for r in bob.execute("SELECT name FROM users")} == {ALICE, BOB}
    assert cli_as(db, monkeypatch, capsys, BOB, "group", "list").status == 0
    assert db.conn.execute("SELECT * FROM resource_groups").fetchall() == groups_before
    assert db.conn.execute("SELECT * FROM users ORDER BY name").fetchall() == users_before


def test_refusals_in_a_real_process_are_one_line(db):
    env = {"JOB_DATABASE_URL": db.url(BOB)}
    refused_in_one_line(run_process("user", "set", BOB, "--shares", "9", env=env), "permission denied for table users")
    refused_in_one_line(run_process("submit", "--user", ALICE, "--group", GROUP, "--entrypoint", "true", env=env),
                        f"may submit only as {BOB!r}")
    refused_in_one_line(run_process("submit", "--user", BOB, "--group", GROUP, "--entrypoint", "true",
                                    env={"JOB_DATABASE_URL": db.url(READER)}), "permission denied for table jobs")


# --- the admin and the reader --------------------------------------------------------------------


def test_the_admin_can_do_all_of_it(db, monkeypatch, capsys):
    alices = job_of(db, ALICE)
    bobs_running = job_of(db, BOB, states.RUNNING, attempt=1)
    for argv in [("group", "set", GROUP, "--policy", "fifo"), ("group", "add", "other", "--ray-address", "http://h:8265"),
                 ("group", "remove", "other"), ("user", "set", BOB, "--shares", "5"), ("user", "set", "carol")]:
        result = cli_as(db, monkeypatch, capsys, ADMIN, *argv)
        assert result.status == 0, (argv, result.err)
    assert db.conn.execute("SELECT policy FROM resource_groups WHERE name = %s", (GROUP,)).fetchone()["policy"] == "fifo"
    assert db.conn.execute("SELECT shares FROM users WHERE name = %s", (BOB,)).fetchone()["shares"] == 5

    submitted = cli_as(db, monkeypatch, capsys, ADMIN, "submit", "--user", "carol", "--group", GROUP, "--entrypoint", "true")
    assert submitted.status == 0, submitted.err
    listed = cli_as(db, monkeypatch, capsys, ADMIN, "jobs", "--json")
    assert listed.status == 0 and len(json.loads(listed.out)) == 3
    assert cli_as(db, monkeypatch, capsys, ADMIN, "show", str(alices)).status == 0
    cancelled = cli_as(db, monkeypatch, capsys, ADMIN, "cancel", str(alices), str(bobs_running))
    assert cancelled.status == 0 and "cancelled" in cancelled.out and "cancel requested" in cancelled.out
    assert row(db, alices)["state"] == states.CANCELLED
    with connect_as(db, ADMIN) as admin:
        assert admin.execute("UPDATE jobs SET priority = 7 WHERE id = %s", (bobs_running,)).rowcount == 1
        assert admin.execute("DELETE FROM jobs WHERE id = %s", (alices,)).rowcount == 1


def test_a_reader_reads_everything_and_writes_nothing(db, monkeypatch, capsys):
    alices, bobs = job_of(db, ALICE), job_of(db, BOB)
    listed = cli_as(db, monkeypatch, capsys, READER, "jobs", "--json")
    assert listed.status == 0 and {job["id"] for job in json.loads(listed.out)} == {alices, bobs}
    assert cli_as(db, monkeypatch, capsys, READER, "show", str(bobs)).status == 0
    assert cli_as(db, monkeypatch, capsys, READER, "user", "show", ALICE).status == 0
    assert cli_as(db, monkeypatch, capsys, READER, "group", "list").status == 0
    refused_in_one_line(cli_as(db, monkeypatch, capsys, READER, "cancel", str(alices)),
                        "permission denied for function job_cancel")
    refused_in_one_line(cli_as(db, monkeypatch, capsys, READER, "submit", "--user", READER, "--group", GROUP,
                               "--entrypoint", "true"), "permission denied for table jobs")
    refused_in_one_line(cli_as(db, monkeypatch, capsys, READER, "group", "set", GROUP, "--policy", "fifo"),
                        "permission denied for table resource_groups")
    with connect_as(db, READER) as reader, pytest.raises(psycopg.errors.InsufficientPrivilege):
        reader.execute("UPDATE jobs SET priority = 1")
    assert row(db, alices)["state"] == states.PENDING


# --- the scheduler -------------------------------------------------------------------------------




def test_the_scheduler_runs_a_tick_as_itself(db, monkeypatch):
    from job.scheduler import tick

    started = datetime.now(UTC) - timedelta(minutes=9)
    db.conn.execute("UPDATE resource_groups SET pending_timeout_s = 3600, usage_charged_at = now() - interval '1 minute'")
    done = job_of(db, ALICE, states.RUNNING, attempt=1, submission_id="done", node="node-a", started_at=started)
    lost = job_of(db, BOB, states.SUBMITTED, attempt=1, submission_id="lost", node="node-a")
    running = job_of(db, BOB, states.RUNNING, attempt=1, submission_id="running", node="node-b", started_at=started)
    old = job_of(db, ALICE, submitted_at=started - timedelta(hours=2))
    # Submitted by the submitters themselves.
    placed = [api.submit(user=user, group=GROUP, entrypoint="true", database_url=db.url(user)) for user in (ALICE, BOB)]
    refused = api.submit(user=ALICE, group=GROUP, entrypoint=REFUSED, database_url=db.url(ALICE))
    assert api.cancel([running], database_url=db.url(BOB)) == {running: (states.RUNNING, states.RUNNING)}

    ray = FakeRay(fake_ray.finished("done", "node-a"), fake_ray.running("running", "node-b"))
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    [result] = tick.run_tick(TickConfig(database_url=db.url(SCHEDULER), submit_concurrency=2, ray_timeout_s=5.0))
    assert result.status == "ticked", result.cause
    state = {job_id: row(db, job_id)["state"] for job_id in (done, lost, running, old, refused, *placed)}
    # Ray lost `lost`: requeued, then placed again by the same tick as its second attempt.
    assert state == {done: states.SUCCEEDED, lost: states.SUBMITTED, running: states.RUNNING, old: states.FAILED,
                     refused: states.PENDING, **{job_id: states.SUBMITTED for job_id in placed}}
    assert ray.stopped == ["running"] and len(ray.submitted) == 3
    assert row(db, refused)["attempt"] == 1 and (row(db, lost)["attempt"], row(db, lost)["requeues"]) == (2, 1)
    # Its record, and the placements' figures on their events (sql/0008), as the scheduler too.
    assert [t["outcome"] for t in db.conn.execute("SELECT outcome FROM ticks").fetchall()] == ["ticked"]
    details = db.conn.execute("SELECT details FROM job_events WHERE kind = 'placed' AND job_id = ANY(%s)",
                              (placed,)).fetchall()
    assert len(details) == 2 and all(d["details"]["policy"] == "fairshare" for d in details)
    charged = db.conn.execute("SELECT user_name, usage FROM user_usage ORDER BY user_name").fetchall()
    assert [r["user_name"] for r in charged] == [ALICE, BOB] and all(r["usage"] > 0 for r in charged)
    # The selector's state, and the ended job Ray may still be freeing (`done`, on node-a).
    saved = {r["name"]: r["document"] for r in db.conn.execute("SELECT name, document FROM group_state")}
    assert sorted(saved) == sorted(["selector.roundrobin", RELEASING]), saved
    assert [entry["node"] for entry in saved[RELEASING]["jobs"]] == ["node-a"]

    # The same tick as a reader: PostgreSQL refuses its first write, the group fails.
    [failed] = tick.run_tick(TickConfig(database_url=db.url(READER), submit_concurrency=2, ray_timeout_s=5.0))
    assert failed.status == "failed" and "permission denied for table jobs" in failed.cause


def test_the_scheduler_role_can_make_every_write_of_a_tick(db):
    """Every function of job/store/tick_jobs.py, and the group and user statements a tick sends,
    as the scheduler (rolled back): none is refused."""
    pending = [job_of(db, ALICE) for _ in range(3)]
    active = [job_of(db, BOB, state, attempt=1) for state in states.ACTIVE]
    called = set()

    def call(function, *args):
        called.add(function.__name__)
        return function(*args)

    now = datetime.now(UTC)
    with psycopg.connect(db.url(SCHEDULER), row_factory=dict_row) as conn:
        installation = call(groups.installation_id, conn)
        assert [g.name for g in call(groups.groups, conn, None)] == [GROUP]
        assert call(groups.try_lock, conn, GROUP)
        group = call(groups.get_group, conn, GROUP)
        assert len(call(tick_jobs.active_jobs, conn, GROUP)) == 3 and len(call(tick_jobs.pending_jobs, conn, GROUP)) == 3
        since = call(tick_jobs.current_snapshot, conn)
        assert call(tick_jobs.pending_changes, conn, GROUP, since)[0] == 3
        assert {u.name for u in call(users.users_of_group, conn, GROUP)} == {ALICE, BOB}
        call(groups.group_state, conn, GROUP)
        call(groups.save_group_state, conn, GROUP, {"roundrobin": {"next": 1}})
        assert call(groups.charge_usage, conn, GROUP, {ALICE: 1.0, BOB: 2.0}, group.usage_charged_at, now)
        call(tick_jobs.fail_pending_timeouts, conn, GROUP, 60.0, now + timedelta(days=1))
        call(tick_jobs.update_jobs, conn, {active[2]: {column: None for column in tick_jobs.JOB_UPDATE_COLUMNS}
                                           | {"state": states.RUNNING}})
        call(tick_jobs.set_observed, conn, {active[2]: {"used": {"CPU": 1}, "over_since": None}})
        assert call(tick_jobs.mark_victims, conn, {active[2]: pending[2]}, now)
        call(tick_jobs.victims_stopping, conn, {active[2]: "being stopped"})
        assert call(tick_jobs.requeue_preempted, conn, {active[2]: (states.RUNNING, "stopped to make room")})
        call(tick_jobs.requeue_infra, conn, {active[1]: (states.SUBMITTED, "LostInRay", "lost")}, 5)
        call(tick_jobs.return_to_pending, conn, {active[0]: (states.SUBMITTING, "SubmitRefused", "no")}, 3)
        call(tick_jobs.cancel_absent, conn, active)
        call(tick_jobs.intents_of, conn, active)
        call(tick_jobs.fail_pending, conn, {pending[0]: "unreadable"}, Reason.INVALID_JOB)
        call(tick_jobs.states_of, conn, pending)
        call(tick_jobs.commit_intents, conn, [(pending[1], "node-a")], installation)
        call(tick_jobs.set_waiting, conn, {pending[2]: ("Resources", "needs CPU 1")}, now)
        call(tick_jobs.set_reservations, conn, {pending[2]: Held("node-a", "head", ("node-b",), now)}, now)
        call(tick_jobs.set_estimates, conn, {pending[2]: (1, now, "from max runtimes")})
        call(tick_jobs.recent_run_times, conn, GROUP, 500)
        call(tick_jobs.mark_submitted, conn, [pending[1]])
        call(groups.unlock, conn, GROUP)
        conn.rollback()
    defined = {name for name in dir(tick_jobs) if callable(getattr(tick_jobs, name)) and not name.startswith("_")
               and getattr(getattr(tick_jobs, name), "__module__", None) == tick_jobs.__name__}
    assert defined <= called, f"call {sorted(defined - called)} here as the scheduler, and grant what it needs"


def test_the_scheduler_prunes_finished_jobs_and_nothing_else(db, monkeypatch, capsys):
    long_ago = datetime.now(UTC) - timedelta(days=3)
    finished = [job_of(db, ALICE, state, finished_at=long_ago) for state in states.FINISHED]
    unfinished = [job_of(db, BOB, state, finished_at=long_ago, attempt=1) for state in states.UNFINISHED]
    pruned = cli_as(db, monkeypatch, capsys, SCHEDULER, "prune", "--finished-before", "1d")
    assert pruned.status == 0, pruned.err
    assert pruned.out.startswith(f"deleted {len(finished)} finished job(s)")
    remaining = {r["id"] for r in db.conn.execute("SELECT id FROM jobs")}
    assert remaining == set(unfinished)
    with connect_as(db, SCHEDULER) as scheduler:
        # Row-level security: the scheduler deletes finished jobs only.
        assert scheduler.execute("DELETE FROM jobs WHERE id = ANY(%s)", (unfinished,)).rowcount == 0
    assert {r["id"] for r in db.conn.execute("SELECT id FROM jobs")} == set(unfinished)


def test_the_scheduler_changes_no_group_option_no_user_and_submits_nothing(db, monkeypatch, capsys):
    groups_before = db.conn.execute("SELECT * FROM resource_groups").fetchall()
    users_before = db.conn.execute("SELECT * FROM users ORDER BY name").fetchall()
    for argv, table in [(("group", "set", GROUP, "--policy", "fifo"), "resource_groups"),
                        (("user", "set", ALICE, "--shares", "100"), "users"),
                        (("submit", "--user", ALICE, "--group", GROUP, "--entrypoint", "true"), "jobs")]:
        # It inserts a schedule's jobs only (sql/0026): a job of its own, row-level security refuses.
        refused_in_one_line(cli_as(db, monkeypatch, capsys, SCHEDULER, *argv),
                            'row-level security policy for table "jobs"' if table == "jobs"
                            else f"permission denied for table {table}")
    with connect_as(db, SCHEDULER) as scheduler:
        for statement in ["UPDATE resource_groups SET policy = 'fifo'", "UPDATE resource_groups SET max_attempts = 99",
                          "UPDATE users SET shares = 100", "DELETE FROM users", "DELETE FROM resource_groups",
                          "INSERT INTO users (name) VALUES ('mallory')", "TRUNCATE jobs",
                          "CREATE TABLE mine (id int)", "ALTER TABLE jobs ADD COLUMN mine int",
                          "ALTER TABLE jobs DISABLE ROW LEVEL SECURITY"]:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                scheduler.execute(statement)
    assert db.conn.execute("SELECT * FROM resource_groups").fetchall() == groups_before
    assert db.conn.execute("SELECT * FROM users ORDER BY name").fetchall() == users_before


# --- the migration -------------------------------------------------------------------------------


def test_a_submitter_may_insert_exactly_the_columns_a_submit_writes(db):
    granted = db.conn.execute(
        """SELECT column_name FROM information_schema.column_privileges
           WHERE grantee = 'job_submitter' AND table_name = 'jobs' AND privilege_type = 'INSERT'""").fetchall()
    assert {row["column_name"] for row in granted} == set(jobs.submit_columns())


def test_the_group_roles_exist_without_login_and_the_cancel_function_is_pinned(db):
    roles = db.conn.execute(
        "SELECT rolname, rolcanlogin, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = ANY(%s)",
        (["job_admin", "job_scheduler", "job_submitter", "job_reader"],)).fetchall()
    assert {r["rolname"]: (r["rolcanlogin"], r["rolsuper"], r["rolbypassrls"]) for r in roles} == {
        name: (False, False, False) for name in ("job_admin", "job_scheduler", "job_submitter", "job_reader")}
    function = db.conn.execute(
        "SELECT prosecdef, proconfig FROM pg_proc WHERE proname = 'job_cancel'").fetchone()
    assert function["prosecdef"] and function["proconfig"] == ["search_path=public, pg_temp"]
    # A submitter's temporary table named jobs is not the queue's.
    job_id = job_of(db, BOB)
    with connect_as(db, BOB) as bob:
        bob.execute("CREATE TEMP TABLE jobs (id bigint, state text, user_name text)")
        assert jobs.cancel_jobs(bob, [job_id]) == {job_id: (states.PENDING, states.CANCELLED)}


# --- the history and the reports (sql/0008) ------------------------------------------------------


def test_events_follow_the_jobs_rights(db, monkeypatch, capsys):
    mine = api.submit(user=ALICE, group=GROUP, entrypoint="true", database_url=db.url(ALICE))
    theirs = api.submit(user=BOB, group=GROUP, entrypoint="true", database_url=db.url(BOB))
    with connect_as(db, ALICE) as conn:
        seen = conn.execute("SELECT DISTINCT job_id FROM job_events").fetchall()
        assert [r["job_id"] for r in seen] == [mine]
        for statement in ("INSERT INTO job_events (job_id, kind, state) VALUES (%s, 'finished', 'SUCCEEDED')",
                          "UPDATE job_events SET kind = 'finished' WHERE job_id = %s",
                          "DELETE FROM job_counts WHERE user_name <> %s::text"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement, (mine,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT job_fold_counts()")
    shown = cli_as(db, monkeypatch, capsys, ALICE, "events", str(mine))
    assert shown.status == 0 and "queued" in shown.out
    refused_in_one_line(cli_as(db, monkeypatch, capsys, ALICE, "events", str(theirs)),
                        f"job {theirs} does not exist or is not yours")
    for role in (READER, ADMIN, SCHEDULER):
        result = cli_as(db, monkeypatch, capsys, role, "events", str(theirs))
        assert result.status == 0 and "queued" in result.out, (role, result.err)
    reader = cli_as(db, monkeypatch, capsys, READER, "share", "--json")
    assert {row["user"] for row in json.loads(reader.out)} == {ALICE, BOB}
    with connect_as(db, READER) as conn:
        for statement in ("INSERT INTO ticks (group_name, outcome, seconds) VALUES ('g', 'ticked', 1)",
                          "UPDATE job_events SET details = '{}'", "SELECT job_fold_counts()"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_accounts_are_read_by_every_role_and_written_by_the_admin_only(db, monkeypatch, capsys):
    """sql/0017_accounts.sql: the tick, `share`, `serve` and a submit read the tree; only admins change it."""
    added = cli_as(db, monkeypatch, capsys, ADMIN, "account", "add", "team")
    assert added.status == 0, added.err
    assert cli_as(db, monkeypatch, capsys, ADMIN, "user", "set", BOB, "--account", "team").status == 0
    for role in (SCHEDULER, READER, BOB):
        with connect_as(db, role) as conn:
            assert [r["name"] for r in conn.execute("SELECT name FROM accounts")] == ["team"]
    for role in (SCHEDULER, READER, BOB):
        refused_in_one_line(cli_as(db, monkeypatch, capsys, role, "account", "add", f"{role}-team"),
                            "permission denied for table accounts")
        refused_in_one_line(cli_as(db, monkeypatch, capsys, role, "account", "set", "team", "--shares", "9"),
                            "permission denied for table accounts")
    assert db.conn.execute("SELECT shares FROM accounts").fetchone()["shares"] == 1


# --- schedules (sql/0026) --------------------------------------------------------------------------


def test_schedules_belong_to_their_user_and_the_scheduler_makes_their_jobs(db, monkeypatch, capsys):
    def add(role, name, user):
        return cli_as(db, monkeypatch, capsys, role, "schedule", "add", name, "--every", "1s", "--user", user,
                      "--group", GROUP, "--entrypoint", "true")

    assert add(ALICE, "alices", ALICE).status == 0
    refused_in_one_line(add(ALICE, "not-alices", BOB), f"may add schedules only as '{ALICE}'")
    assert add(ADMIN, "bobs", BOB).status == 0
    listed = cli_as(db, monkeypatch, capsys, ALICE, "schedule", "list", "--json")
    assert [row["name"] for row in json.loads(listed.out)] == ["alices"]
    for action in ("show", "pause", "resume", "remove"):
        refused_in_one_line(cli_as(db, monkeypatch, capsys, ALICE, "schedule", action, "bobs"),
                            "schedule 'bobs' does not exist or is not yours")
    assert cli_as(db, monkeypatch, capsys, ADMIN, "schedule", "pause", "bobs").status == 0
    with connect_as(db, ALICE) as alice:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            alice.execute("INSERT INTO schedule_slots (schedule_name, slot, outcome) VALUES ('alices', now(), 'skipped')")
        # A submit cannot say a job is a schedule's.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            alice.execute("INSERT INTO jobs (user_name, group_name, entrypoint, state, schedule, slot) "
                          "VALUES (%s, %s, 'true', 'PENDING', 'alices', now())", (ALICE, GROUP))

    from job.scheduler.schedules import run_schedules

    with psycopg.connect(db.url(SCHEDULER), row_factory=dict_row) as scheduler:
        run_schedules(scheduler, GROUP, datetime.now(UTC) + timedelta(seconds=5))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            scheduler.execute("UPDATE schedules SET paused = false")
    made = db.conn.execute("SELECT user_name, schedule FROM jobs").fetchall()
    assert made == [{"user_name": ALICE, "schedule": "alices"}]
    shown = json.loads(cli_as(db, monkeypatch, capsys, ALICE, "schedule", "show", "alices", "--json").out)
    assert [slot["outcome"] for slot in shown["slots"]] == ["submitted"]
    assert cli_as(db, monkeypatch, capsys, ALICE, "schedule", "remove", "alices").status == 0
