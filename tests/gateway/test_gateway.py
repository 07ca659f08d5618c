"""The gateway without a Ray cluster: what waits in the queue is all PostgreSQL. Ray's own CLI and
JobSubmissionClient submit, read, list, stop and delete; tokens confine each caller to its own
jobs; no token, a bad, revoked or expired one get 401 and nothing else; bad submissions get Ray's
error shape (400, plain text) with one line naming the field, and nothing is written."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import aiohttp
import psycopg
import pytest
import requests
from cli_helpers import database_contents, run_cli
from conftest import ALICE, BOB, GATEWAY_LOGIN, GROUP, as_role, headers, ray_cli
from psycopg import sql
from ray.job_submission import JobStatus, JobSubmissionClient
from tick_helpers import add_group, wait_for

from job import api
from job.store import gateway as gateway_store
from job.store import tokens

NOWHERE = "http://ray.invalid:8265"
CAROL = "jobgw_carol"


@pytest.fixture
def group(conn):
    add_group(conn, NOWHERE, name=GROUP, users=(), priority_classes=json.dumps(
        [{"name": "low", "value": 0, "preemptible": True}, {"name": "high", "value": 10, "preemptible": False}]),
        default_class="low")
    return GROUP


def client(gateway, token) -> JobSubmissionClient:
    return JobSubmissionClient(gateway.address(), headers=headers(token))


def gateway_rows(conn) -> dict[str, dict]:
    return {row["gateway_id"]: row for row in conn.execute(
        "SELECT j.*, s.submission_id AS gateway_id FROM gateway_submissions s JOIN jobs j ON j.id = s.job_id")}


def test_ray_cli_submits_reads_lists_and_stops_a_waiting_job(gateway, users, group, conn):
    token = users[ALICE]
    submitted = ray_cli(gateway, token, "submit", "--no-wait", "--submission-id", "train-1",
                        "--entrypoint-num-cpus", "2", "--metadata-json", '{"team": "vision", "queue.priority": "5"}',
                        "--", "python", "train.py")
    assert submitted.status == 0, submitted
    assert "Job 'train-1' submitted successfully" in submitted.out + submitted.err
    [row] = gateway_rows(conn).values()
    assert (row["gateway_id"], row["user_name"], row["group_name"], row["state"]) == ("train-1", ALICE, GROUP, "PENDING")
    assert (row["entrypoint"], row["resources"], row["priority"], row["metadata"]) == (
        "python train.py", {"CPU": 2.0}, 5, {"team": "vision"})

    status = ray_cli(gateway, token, "status", "train-1")
    assert status.status == 0, status
    assert "Status for job 'train-1': PENDING" in status.out + status.err
    assert "Status message: Queued: waiting for the next tick" in status.out + status.err

    listed = ray_cli(gateway, token, "list")
    assert listed.status == 0 and "submission_id='train-1'" in listed.out + listed.err, listed

    stopped = ray_cli(gateway, token, "stop", "train-1")
    assert stopped.status == 0, stopped
    assert "Job 'train-1' was stopped" in stopped.out + stopped.err
    assert gateway_rows(conn)["train-1"]["state"] == "CANCELLED"
    assert client(gateway, token).get_job_status("train-1") == JobStatus.STOPPED


def test_the_sdk_carries_resources_labels_and_the_queues_options(gateway, users, group, conn):
    sdk = client(gateway, users[ALICE])
    submission_id = sdk.submit_job(
        entrypoint="python serve.py", entrypoint_num_gpus=1, entrypoint_memory=2**30,
        entrypoint_resources={"special": 1}, entrypoint_label_selector={"pool": "a"},
        runtime_env={"env_vars": {"MODE": "eval"}, "pip": ["requests==2.31"]},
        metadata={"queue.class": "high", "queue.max_runtime": "2h", "queue.not_before": "2030-01-01T00:00:00Z",
                  "queue.bundles": '[{"GPU": 1}, {"GPU": 1}]', "queue.bundle_strategy": "SPREAD", "run": "7"})
    assert submission_id.startswith("raysubmit_")
    row = gateway_rows(conn)[submission_id]
    assert row["resources"] == {"GPU": 1.0, "memory": float(2**30), "special": 1.0}
    assert (row["node_labels"], row["runtime_env"], row["priority_class"], row["max_runtime_s"], row["metadata"]) == (
        {"pool": "a"}, {"env_vars": {"MODE": "eval"}, "pip": {"packages": ["requests==2.31"], "pip_check": False}},
        "high", 7200.0, {"run": "7"})
    assert (row["bundles"], row["bundle_strategy"], row["not_before"].year) == ([{"GPU": 1.0}, {"GPU": 1.0}], "SPREAD", 2030)
    after = sdk.submit_job(entrypoint="python eval.py", metadata={"queue.after": f"{row['id']}:any, {row['id']}"})
    assert gateway_rows(conn)[after]["after"] == [{"job": row["id"], "when": "ok"}]
    sdk.stop_job(after)
    sdk.delete_job(after)

    info = sdk.get_job_info(submission_id)
    assert (info.status, info.submission_id, info.entrypoint, info.metadata) == (
        JobStatus.PENDING, submission_id, "python serve.py", {"run": "7"})
    assert info.message == "Queued: waiting for the next tick"
    assert [job.submission_id for job in sdk.list_jobs()] == [submission_id]
    assert sdk.get_job_logs(submission_id) == ""

    with pytest.raises(RuntimeError, match="not in a terminal state"):
        sdk.delete_job(submission_id)
    assert sdk.stop_job(submission_id) is True
    assert sdk.stop_job(submission_id) is False  # stopped already, as Ray says of an ended job
    assert sdk.delete_job(submission_id) is True
    assert gateway_rows(conn) == {}
    assert conn.execute("SELECT state FROM jobs").fetchone()["state"] == "CANCELLED"  # the queue keeps its history
    with pytest.raises(RuntimeError, match="status code 404"):
        sdk.get_job_info(submission_id)


def test_the_waiting_reason_is_the_pending_message(gateway, users, group, conn):
    sdk = client(gateway, users[ALICE])
    submission_id = sdk.submit_job(entrypoint="python big.py", entrypoint_num_cpus=64)
    # What a tick writes of a job that cannot be placed (the tick itself is tested in tests/scheduler).
    conn.execute("UPDATE jobs SET reason = 'Resources', message = 'needs CPU 64; the most free on any node is CPU 2'")
    info = sdk.get_job_info(submission_id)
    assert (info.status, info.message) == (JobStatus.PENDING, "Resources: needs CPU 64; the most free on any node is CPU 2")


def test_a_token_sees_reads_and_stops_only_its_users_jobs(gateway, users, group, conn):
    alice, bob = client(gateway, users[ALICE]), client(gateway, users[BOB])
    mine = alice.submit_job(entrypoint="python a.py", submission_id="alice-1")
    bob.submit_job(entrypoint="python b.py", submission_id="bob-1")
    assert {row["gateway_id"]: row["user_name"] for row in gateway_rows(conn).values()} == {
        "alice-1": ALICE, "bob-1": BOB}
    assert [job.submission_id for job in bob.list_jobs()] == ["bob-1"]
    for call in (bob.get_job_info, bob.stop_job, bob.get_job_logs, bob.delete_job):
        with pytest.raises(RuntimeError, match="status code 404: Job alice-1 does not exist"):
            call(mine)
    # Alice's id is Bob's to use too: his own job; hers untouched, and nothing told of it.
    assert bob.submit_job(entrypoint="python b2.py", submission_id="alice-1") == "alice-1"
    assert (bob.get_job_info("alice-1").entrypoint, alice.get_job_info("alice-1").entrypoint) == ("python b2.py", "python a.py")
    assert sorted(job.submission_id for job in bob.list_jobs()) == ["alice-1", "bob-1"]
    assert bob.stop_job("alice-1") and bob.delete_job("alice-1")
    assert alice.get_job_status("alice-1") == JobStatus.PENDING
    assert conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 3


def test_each_user_reuses_none_of_its_own_submission_ids_and_any_of_anothers(gateway, users, group, conn):
    def submit(token: str) -> requests.Response:
        return requests.post(gateway.address() + "/api/jobs/", json={"entrypoint": "python x.py", "submission_id": "run-7"},
                             headers=headers(token), timeout=30)

    # Ten of each user's submissions of one id at once: one job each, the others refused as taken.
    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(submit, [users[ALICE], users[BOB]] * 10))
    assert sorted(answer.status_code for answer in answers) == [200] * 2 + [400] * 18
    refused = {answer.text for answer in answers if answer.status_code == 400}
    assert refused == {"submission_id: 'run-7' is already the id of another job"}
    assert conn.execute("SELECT s.user_name, s.submission_id, j.user_name AS owner FROM gateway_submissions s "
                        "JOIN jobs j ON j.id = s.job_id ORDER BY 1").fetchall() == [
        {"user_name": ALICE, "submission_id": "run-7", "owner": ALICE},
        {"user_name": BOB, "submission_id": "run-7", "owner": BOB}]
    assert conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 2


def test_no_token_a_bad_one_a_revoked_one_and_an_expired_one_get_401_and_nothing_else(gateway, users, group, conn, capsys):
    api_url = gateway.address() + "/api"
    submit = {"entrypoint": "python x.py"}
    calls = [("GET", "/version", None), ("POST", "/jobs/", submit), ("GET", "/jobs/", None), ("GET", "/jobs/x", None),
             ("POST", "/jobs/x/stop", None), ("DELETE", "/jobs/x", None), ("GET", "/jobs/x/logs", None),
             ("GET", "/packages/gcs/_ray_pkg_0.zip", None), ("PUT", "/packages/gcs/_ray_pkg_0.zip", None)]
    revoked = users[BOB]
    token_id = conn.execute("SELECT id FROM tokens WHERE user_name = %s", (BOB,)).fetchone()["id"]
    assert run_cli(capsys, "token", "revoke", str(token_id)).status == 0
    expired = run_cli(capsys, "token", "create", ALICE, "--expires", "1s").out.strip()
    conn.execute("UPDATE tokens SET expires_at = now() - interval '1 second' WHERE expires_at IS NOT NULL")
    for who in ({}, {"Authorization": "Bearer jobtok_not-a-token"}, {"Authorization": "Basic YWxpY2U6eA=="},
                headers(revoked), headers(expired)):
        for method, path, body in calls:
            answer = requests.request(method, api_url + path, json=body, headers=who, timeout=10)
            assert (answer.status_code, answer.text) == (401, ""), (who, method, path)
    assert conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 0
    # Ray's CLI says so in its own words, and fails.
    refused = ray_cli(gateway, None, "list")
    assert refused.status == 1 and "Authentication required" in refused.err
    log = gateway.log()
    assert "gateway_unauthorized" in log
    assert not any(token in log for token in (*users.values(), expired))


@pytest.mark.parametrize("body, message", [
    ({}, "entrypoint: required, a string"),
    ({"entrypoint": "  "}, "entrypoint: must not be empty"),
    ({"entrypoint": "x", "entrypoint_num_cpus": "many"}, "entrypoint_num_cpus: "),
    ({"entrypoint": "x", "entrypoint_num_cpus": -1}, "entrypoint_num_cpus: "),
    ({"entrypoint": "x", "entrypoint_resources": {"GPU": 1}}, "entrypoint_resources.GPU: give it as entrypoint_num_gpus"),
    ({"entrypoint": "x", "entrypoint_resources": {"special": "x"}}, "entrypoint_resources.special: "),
    ({"entrypoint": "x", "entrypoint_label_selector": ["pool"]}, "entrypoint_label_selector: must be a JSON object"),
    ({"entrypoint": "x", "runtime_env": {"working_dir": "./src"}}, "runtime_env"),
    ({"entrypoint": "x", "runtime_env": {"no_such_key": 1}}, "runtime_env"),
    ({"entrypoint": "x", "runtime_env": {"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "600"}}},
     "runtime_env: env_vars.RAY_JOB_STOP_WAIT_TIME_S: Ray reads it to run and stop the job, so a job may not set it"),
    ({"entrypoint": "x", "metadata": {"queue.priorty": "1"}}, "metadata.queue.priorty: not one of the queue's keys"),
    ({"entrypoint": "x", "metadata": {"queue.priority": "high"}}, "metadata.queue.priority: "),
    ({"entrypoint": "x", "metadata": {"queue.class": "urgent"}}, "metadata.queue.class: 'urgent' is not a class of group 'gpu'"),
    ({"entrypoint": "x", "metadata": {"queue.max_runtime": "soon"}}, "metadata.queue.max_runtime: "),
    # Out of range: each one named, never a 500.
    ({"entrypoint": "x", "metadata": {"queue.not_before": "9999-12-31T23:59:59-14:00"}},
     "metadata.queue.not_before: '9999-12-31T23:59:59-14:00' is out of range"),
    ({"entrypoint": "x", "metadata": {"queue.max_runtime": "1000000000w"}},
     "metadata.queue.max_runtime: a duration must be at most"),
    ({"entrypoint": "x", "entrypoint_num_cpus": 10**3999}, "entrypoint_num_cpus: at most 922337203685477"),
    ({"entrypoint": "x", "entrypoint_resources": {f"r{i}": 1 for i in range(65)}},
     "entrypoint_resources: at most 64 resource names"),
    ({"entrypoint": "x", "metadata": {"queue.\x1b[2J\n": "1"}}, "metadata.'queue.\\x1b[2J\\n': not one of the queue's keys"),
    ({"entrypoint": "x", "metadata": {"queue.bundles": "[{"}}, "metadata.queue.bundles: not valid JSON"),
    ({"entrypoint": "x", "metadata": {"queue.after": "1:maybe"}}, "metadata.queue.after: '1:maybe': 'maybe' is not one"),
    ({"entrypoint": "x", "metadata": {"queue.after": "999999"}}, "metadata.queue.after: job 999999 does not exist"),
    ({"entrypoint": "x", "metadata": {"queue.array": "0-10000"}}, "metadata.queue.array: at most 10000 tasks an array"),
    ({"entrypoint": "x", "metadata": {"queue.array": "9-1"}}, "metadata.queue.array: '9-1': a range goes up"),
    ({"entrypoint": "x", "runtime_env": {"env_vars": {"JOB_ARRAY_ID": "1"}}},
     "runtime_env: env_vars.JOB_ARRAY_ID: the queue sets it in the job's environment"),
    ({"entrypoint": "x", "metadata": {"n": 1}}, "metadata.n: values must be strings"),
    ({"entrypoint": "x", "submission_id": "a b"}, "submission_id: 'a b' is not a submission id"),
    # Path segments of a URL: Ray's client could never address them.
    ({"entrypoint": "x", "submission_id": "."}, "submission_id: '.' is not a submission id"),
    ({"entrypoint": "x", "submission_id": ".."}, "submission_id: '..' is not a submission id"),
    ({"entrypoint": "x", "entrypoint_numcpus": 1}, "entrypoint_numcpus: not a field of Ray's job submission"),
    ([1, 2], "request: must be a JSON object"),
])
def test_a_bad_submission_gets_rays_error_shape_naming_the_field_and_writes_nothing(gateway, users, group, conn,
                                                                                    body, message):
    before = database_contents(conn)
    answer = requests.post(gateway.address() + "/api/jobs/", json=body, headers=headers(users[ALICE]), timeout=10)
    assert answer.status_code == 400, answer.text
    assert answer.text.startswith(message) and "\n" not in answer.text.strip(), answer.text
    assert answer.headers["Content-Type"].startswith("text/plain")
    assert database_contents(conn) == before
    assert conn.execute("SELECT count(*) AS n FROM gateway_submissions").fetchone()["n"] == 0


def test_an_array_through_the_sdk_is_known_and_stopped_by_its_first_tasks_submission_id(gateway, users, group, conn):
    sdk = client(gateway, users[ALICE])
    submission_id = sdk.submit_job(entrypoint="python sweep.py", submission_id="sweep-1",
                                   metadata={"queue.array": "0-3%2", "run": "9"})
    first = gateway_rows(conn)[submission_id]
    made = conn.execute("SELECT array_index, array_throttle, metadata FROM jobs WHERE array_id = %s ORDER BY id",
                        (first["id"],)).fetchall()
    assert first["array_id"] == first["id"]
    assert made == [{"array_index": i, "array_throttle": 2, "metadata": {"run": "9"}} for i in range(4)]
    assert sdk.get_job_status(submission_id) == JobStatus.PENDING
    # Stopped by that id, the array is: each of its tasks.
    assert sdk.stop_job(submission_id)
    assert {row["state"] for row in conn.execute("SELECT state FROM jobs WHERE array_id = %s", (first["id"],))} == {
        "CANCELLED"}


def test_bad_requests_of_ray_clients_themselves(gateway, users, group, conn):
    sdk = client(gateway, users[ALICE])
    with pytest.raises(RuntimeError, match=r"status code 400: entrypoint_num_cpus: "):
        sdk.submit_job(entrypoint="python x.py", entrypoint_num_cpus=-2)
    answer = requests.post(gateway.address() + "/api/jobs/", data="{not json", headers=headers(users[ALICE]), timeout=10)
    assert (answer.status_code, answer.text) == (400, "request: not valid JSON")
    answer = requests.get(gateway.url + "/groups/nosuchgroup/api/version", headers=headers(users[ALICE]), timeout=10)
    assert (answer.status_code, answer.text) == (404, "group 'nosuchgroup' does not exist")
    answer = requests.post(gateway.url + "/groups/nosuchgroup/api/jobs/", json={"entrypoint": "x"},
                           headers=headers(users[ALICE]), timeout=10)
    assert answer.status_code == 404 and answer.text.startswith("group: 'nosuchgroup' does not exist"), answer.text
    assert conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 0


def test_token_commands_print_the_token_once_and_keep_only_its_hash(conn, capsys):
    conn.execute("INSERT INTO users (name) VALUES (%s)", (ALICE,))
    created = run_cli(capsys, "token", "create", ALICE, "--expires", "90d")
    assert created.status == 0, created
    token = created.out.strip()
    assert token.startswith("jobtok_") and len(token) > 40 and "expires" in created.err
    [row] = conn.execute("SELECT * FROM tokens").fetchall()
    assert bytes(row["hash"]) == hashlib.sha256(token.encode()).digest()
    assert token not in json.dumps([{k: str(v) for k, v in row.items()}])
    listed = run_cli(capsys, "token", "list", "--json")
    [shown] = json.loads(listed.out)
    assert (shown["id"], shown["user"], shown["state"]) == (row["id"], ALICE, "active") and token not in listed.out
    assert run_cli(capsys, "token", "revoke", str(row["id"])).status == 0
    assert json.loads(run_cli(capsys, "token", "list", "--json").out)[0]["state"] == "revoked"
    # The user's own role confines the gateway: made where missing, a submitter, granted to job_gateway.
    role = conn.execute(
        """SELECT rolcanlogin, pg_has_role(oid, 'job_submitter', 'MEMBER') AS submits,
                  pg_has_role('job_gateway', oid, 'MEMBER') AS gateway_may_act FROM pg_roles WHERE rolname = %s""",
        (ALICE,)).fetchone()
    assert role == {"rolcanlogin": False, "submits": True, "gateway_may_act": True}


@pytest.mark.parametrize("argv, message", [
    (("create", "nobody"), "error: user: 'nobody' does not exist"),
    (("create", ALICE, "--expires", "soon"), "error: --expires: "),
    (("create", ALICE, "--expires", "0s"), "error: --expires: must be more than 0"),
    (("create", "postgres"), "error: user: 'postgres' does not exist"),
    (("revoke", "x"), "error: token id: 'x' is not a token id"),
    (("revoke", "99"), "error: token 99 does not exist"),
])
def test_bad_token_commands_exit_2_with_one_line_and_write_nothing(conn, capsys, argv, message):
    conn.execute("INSERT INTO users (name) VALUES (%s)", (ALICE,))
    before = conn.execute("SELECT count(*) AS n FROM tokens").fetchone()
    result = run_cli(capsys, "token", *argv)
    assert result.status == 2 and result.err.startswith(message) and result.err.count("\n") == 1, result
    assert conn.execute("SELECT count(*) AS n FROM tokens").fetchone() == before


def test_a_token_never_carries_more_than_a_submitters_rights(conn, capsys):
    # A queue user whose database role may do more (here: the test server's superuser) gets no token.
    superuser = conn.execute("SELECT current_user AS name").fetchone()["name"]
    conn.execute("INSERT INTO users (name) VALUES (%s)", (superuser,))
    result = run_cli(capsys, "token", "create", superuser)
    assert result.status == 2 and "a token acts only as a submitter of its own jobs" in result.err, result
    assert conn.execute("SELECT count(*) AS n FROM tokens").fetchone()["n"] == 0


def test_a_token_whose_role_is_later_granted_job_admin_is_refused_at_each_use(gateway, users, group, conn):
    # A user of this test alone: roles are the server's, and alice's serves concurrent runs.
    carol = sql.Identifier(CAROL)
    conn.execute(sql.SQL("""DO $$ BEGIN CREATE ROLE {} NOLOGIN IN ROLE job_submitter;
                            EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$""").format(carol))
    conn.execute(sql.SQL("REVOKE job_admin FROM {}").format(carol))
    conn.execute("INSERT INTO users (name) VALUES (%s)", (CAROL,))
    token = tokens.create_token(conn, CAROL, None)[1]
    client(gateway, token).submit_job(entrypoint="python c.py", submission_id="carol-1")
    client(gateway, users[BOB]).submit_job(entrypoint="python b.py", submission_id="bob-1", runtime_env={
        "env_vars": {"SECRET": "s3"}})
    conn.execute(sql.SQL("GRANT job_admin TO {}").format(carol))
    try:
        refused = f"token of {CAROL} refused: its database role is not exactly a submitter (member of job_admin)"
        for method, path in (("GET", "/api/jobs/"), ("GET", "/api/jobs/bob-1"), ("POST", "/api/jobs/bob-1/stop")):
            answer = requests.request(method, gateway.address() + path, headers=headers(token), timeout=10)
            assert (answer.status_code, answer.text) == (403, refused), (path, answer.text)
        assert {row["gateway_id"]: row["state"] for row in gateway_rows(conn).values()} == {
            "carol-1": "PENDING", "bob-1": "PENDING"}
        warned = [line for line in gateway.log().splitlines() if "gateway_token_refused" in line]
        assert len(warned) == 3 and "level=warning" in warned[0] and token not in gateway.log(), gateway.log()
    finally:
        conn.execute(sql.SQL("REVOKE job_admin FROM {}").format(carol))
    # A submitter again, and no more: the same token acts again, for its own jobs.
    assert [job.submission_id for job in client(gateway, token).list_jobs()] == ["carol-1"]


def test_a_log_tail_of_a_waiting_job_ends_when_its_client_leaves(gateway, users, group, conn):
    sdk = client(gateway, users[ALICE])
    sdk.submit_job(entrypoint="python wait.py", submission_id="waits")

    async def open_and_leave() -> None:
        async with (aiohttp.ClientSession(headers=headers(users[ALICE])) as session,
                    session.ws_connect(gateway.address() + "/api/jobs/waits/logs/tail") as ws):
            await asyncio.sleep(1.5)  # the tail polls the queue meanwhile
            assert not ws.closed
    asyncio.run(open_and_leave())
    wait_for(lambda: "gateway_tail_ended" in gateway.log())
    assert 'event=gateway_tail_ended group=gpu submission_id=waits why="client left"' in gateway.log(), gateway.log()
    # A job that ended closes the tail from the gateway's side, as Ray's does.
    sdk.stop_job("waits")

    async def follow() -> list[str]:
        async with (aiohttp.ClientSession(headers=headers(users[ALICE])) as session,
                    session.ws_connect(gateway.address() + "/api/jobs/waits/logs/tail") as ws):
            return [message.data async for message in ws]
    assert asyncio.run(asyncio.wait_for(follow(), 30)) == []
    assert 'submission_id=waits why="job CANCELLED"' in gateway.log(), gateway.log()


def test_the_gateways_login_holds_no_users_rights_outside_set_role(gateway, users, group, conn, database_url):
    client(gateway, users[ALICE]).submit_job(entrypoint="python a.py", submission_id="alice-1")
    with psycopg.connect(as_role(database_url, GATEWAY_LOGIN), autocommit=True) as own:
        # It reads what a token check needs, and no more.
        assert own.execute("SELECT count(*) FROM tokens WHERE revoked_at IS NULL").fetchone() == (2,)
        for statement in ("SELECT count(*) FROM jobs", "SELECT count(*) FROM gateway_submissions",
                          "SELECT created_at FROM tokens", "INSERT INTO jobs (user_name, group_name, entrypoint, resources)"
                          f" VALUES ('{ALICE}', 'gpu', 'x', '{{}}')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                own.execute(statement)
        # Under a token's user's role it sees that user's jobs only.
        with own.transaction():
            own.execute(f"SET LOCAL ROLE {BOB}")
            assert own.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


class Dashboard(ThreadingHTTPServer):
    """A Ray dashboard's package endpoint, recording what it is asked (its GET pins a package)."""

    def __init__(self):
        self.asked: list[str] = []
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the standard library's name
                dashboard.asked.append(self.path)
                self.send_response(200 if self.path.startswith("/api/packages/gcs/") else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def test_the_packages_of_waiting_jobs_stay_pinned_in_ray_while_they_wait(launch, users, conn):
    dashboard = Dashboard()
    try:
        add_group(conn, dashboard.url, name=GROUP, users=())
        gateway = launch("--keep-packages", "1s")
        sdk = client(gateway, users[ALICE])
        sdk.submit_job(entrypoint="python a.py", submission_id="waits", runtime_env={
            "working_dir": "gcs://_ray_pkg_0123456789abcdef.zip", "py_modules": ["gcs://_ray_pkg_mod.zip", "s3://b/m.zip"]})
        pins = {"/api/packages/gcs/_ray_pkg_0123456789abcdef.zip", "/api/packages/gcs/_ray_pkg_mod.zip"}
        wait_for(lambda: "gateway_packages_pinned pinned=2 missing=0 failed=0" in gateway.log())
        assert set(dashboard.asked) == pins  # the s3:// one is not Ray's to keep
        # A job that no longer waits holds nothing.
        sdk.stop_job("waits")
        assert conn.execute("SELECT * FROM gateway_waiting_packages()").fetchall() == []
    finally:
        dashboard.shutdown()


def raw(gateway, head: str, body: bytes) -> tuple[int, bytes]:
    """`head` and the start of a body sent on one connection, the answer read without sending the
    rest: a server that waits for the whole body never answers (the socket's timeout fails it)."""
    address = urlsplit(gateway.url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
        status = int(answer.split(b" ", 2)[1])
        headers_, _, rest = answer.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", headers_).group(1))
        while len(rest) < length:
            rest += sock.recv(65536)
        return status, rest


def post_head(gateway, path: str, length: int, token: str | None = None, chunked: bool = False) -> str:
    host = urlsplit(gateway.url).netloc
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
    auth = f"Authorization: Bearer {token}\n" if token else ""
    return f"POST {path} HTTP/1.1\nHost: {host}\n{auth}Content-Type: application/json\n{framing}\n"


def test_without_a_token_nothing_of_the_body_is_read_or_parsed(gateway, users, group, conn):
    submit_path = "/groups/gpu/api/jobs/"
    # 30 MB announced, 64 KiB sent: the answer comes before the rest, for no token and a bad one.
    for token in (None, "jobtok_not-a-token"):
        assert raw(gateway, post_head(gateway, submit_path, 30_000_000, token), b"[{}," * 16384) == (401, b"")
    # What such a body holds is never looked at: not JSON, nested deep, it is 401 all the same.
    for who in ({}, {"Authorization": "Bearer jobtok_not-a-token"}):
        for body in ("{not json", "[" * 100_000 + "]" * 100_000):
            answer = requests.post(gateway.address() + "/api/jobs/", data=body, headers=who, timeout=10)
            assert (answer.status_code, answer.text) == (401, ""), who
    assert conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 0


def test_a_body_over_its_routes_limit_is_413_and_deep_json_400_in_one_line(gateway, users, group, conn):
    submit_path = "/groups/gpu/api/jobs/"
    token = users[ALICE]
    limit = 1024 * 1024
    # Announced over the limit: refused before it is read; streamed over it: refused as it passes it.
    status, text = raw(gateway, post_head(gateway, submit_path, 50_000_000, token), b"{" * 1024)
    assert (status, text) == (413, f"request: the body is over this route's limit of {limit} bytes".encode())
    chunk = b'{"entrypoint": "' + b"x" * limit + b'"}'
    status, text = raw(gateway, post_head(gateway, submit_path, 0, token, chunked=True),
                       f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    assert status == 413, text
    for body, message in (("[" * 100_000 + "]" * 100_000, "request: JSON nested deeper than 32 levels"),
                          ('{"entrypoint": "x", "runtime_env": {"env_vars": ' + "[" * 40 + "]" * 40 + "}}",
                           "request: JSON nested deeper than 32 levels"),
                          ("[" + "[]," * 20_000 + "[]]", "request: more than 16384 JSON values")):
        answer = requests.post(gateway.address() + "/api/jobs/", data=body, headers=headers(token), timeout=10)
        assert (answer.status_code, answer.text) == (400, message)
    assert conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 0
    # Refusals are one line each, none a traceback.
    log = gateway.log()
    assert "Traceback" not in log and log.count("gateway_too_large") == 2, log


def test_control_characters_in_a_path_are_400_never_an_outage(gateway, users, group, conn):
    token = users[ALICE]
    for path, message in (("/groups/gpu/api/jobs/a%00b", "submission_id: must not contain control characters"),
                          ("/groups/gpu/api/jobs/a%1b%5b2J/stop", "submission_id: must not contain control characters"),
                          ("/groups/g%00pu/api/jobs/", "group: must not contain control characters"),
                          ("/groups/g%7fpu/api/version", "group: must not contain control characters")):
        method = "POST" if path.endswith("/stop") else "GET"
        answer = requests.request(method, gateway.url + path, headers=headers(token), timeout=10)
        assert (answer.status_code, answer.text) == (400, message), path
    # Without a token it is 401 first, and what the path held is logged escaped.
    assert requests.get(gateway.url + "/groups/gpu/api/jobs/a%00%1bb", timeout=10).status_code == 401
    log = gateway.log()
    assert "gateway_unavailable" not in log and "\x00" not in log and "\x1b" not in log, log
    assert r"\u0000\u001bb" in log


def test_the_package_proxy_reaches_only_rays_package_routes(launch, users, conn):
    dashboard = Dashboard()
    try:
        add_group(conn, dashboard.url, name=GROUP, users=())
        gateway = launch()
        token = users[ALICE]
        for path in ("%2E%2E/cluster_status", "gcs/%2E%2E", "gcs/..%2Fcluster_status", "gcs/_ray_pkg_0.zip%3Fx",
                     "http/_ray_pkg_0.zip", "gcs/cluster_status"):
            answer = requests.get(f"{gateway.address()}/api/packages/{path}", headers=headers(token), timeout=10)
            assert answer.status_code == 404, path
        assert dashboard.asked == []
        # Ray's own shapes pass, as Ray's client names them.
        answer = requests.get(gateway.address() + "/api/packages/gcs/_ray_pkg_0123456789abcdef.zip",
                              headers=headers(token), timeout=10)
        assert answer.status_code == 200 and dashboard.asked == ["/api/packages/gcs/_ray_pkg_0123456789abcdef.zip"]
    finally:
        dashboard.shutdown()


def test_a_list_answer_is_capped_newest_jobs_first(gateway, users, group, conn):
    # Each job near the most a job may hold (~150 KB as JSON): 80 of them are 12 MB, over the 8 MiB cap.
    big = {"entrypoint": "python x.py " + "e" * 60_000, "runtime_env": {"env_vars": {"PAD": "r" * 60_000}},
           "metadata": {"pad": "m" * 15_000}}
    for i in range(80):
        job_id = api.submit(conn=conn, user=ALICE, group=GROUP, **big)
        gateway_store.name_job(conn, f"big-{i}", job_id)
    answer = requests.get(gateway.address() + "/api/jobs/", headers=headers(users[ALICE]), timeout=30)
    assert answer.status_code == 200
    assert 7 * 1024 * 1024 < len(answer.content) <= 8 * 1024 * 1024
    listed = [job["submission_id"] for job in answer.json()]
    assert listed == [f"big-{i}" for i in range(79, 79 - len(listed), -1)] and len(listed) < 80
