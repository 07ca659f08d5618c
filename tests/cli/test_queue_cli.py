"""The operator's commands on a real PostgreSQL: a session as a person would type it, and bad input
refused with a message naming the field, exit status 2, and an unchanged database."""

from __future__ import annotations

import json
import sys

import pytest
from cli_helpers import database_contents, run_cli, run_process

from job.cli import scheduler as scheduler_cli


def setup_group_and_users(capsys):
    assert run_cli(capsys, "group", "add", "gpu", "--ray-address", "http://127.0.0.1:8265", "--policy", "drf").status == 0
    assert run_cli(capsys, "user", "set", "alice", "--shares", "2").status == 0
    assert run_cli(capsys, "user", "set", "bob").status == 0


def test_operator_session_in_real_processes(database_url):
    assert run_process("group", "add", "main", "--ray-address", "http://127.0.0.1:8265",
                       "--selector", "roundrobin", "--half-life", "30m").status == 0
    assert run_process("user", "set", "alice", "--shares", "3").status == 0
    submitted = run_process("submit", "--user", "alice", "--group", "main", "--entrypoint", "python train.py",
                            "--cpus", "2", "--memory", "4GiB", "--resource", "special=0.5",
                            "--node-label", "pool=a", "--runtime-env", '{"env_vars": {"A": "1"}}',
                            "--priority", "5", "--max-runtime", "2h", "--metadata", "team=ml")
    assert submitted.status == 0, submitted.err
    job_id = int(submitted.out.strip())

    shown = run_process("show", str(job_id), "--json")
    job = json.loads(shown.out)
    assert job["id"] == job_id and job["user"] == "alice" and job["group"] == "main"
    assert job["state"] == "PENDING" and job["priority"] == 5 and job["attempt"] == 0
    assert job["resources"] == {"CPU": 2, "memory": 4 * 2**30, "special": 0.5}
    assert job["node_labels"] == {"pool": "a"} and job["runtime_env"] == {"env_vars": {"A": "1"}}
    assert job["max_runtime_s"] == 7200 and job["metadata"] == {"team": "ml"}
    for key in ("submission_id", "node", "reason", "message", "ray_status", "submitted_at", "started_at", "finished_at"):
        assert key in job

    table = run_process("jobs", "--user", "alice")
    assert table.status == 0 and "PENDING" in table.out and "CPU=2,memory=4 GiB,special=0.5" in table.out

    cancelled = run_process("cancel", str(job_id))
    assert cancelled.status == 0 and "cancelled" in cancelled.out
    again = run_process("cancel", str(job_id))
    assert again.status == 0 and "already CANCELLED" in again.out
    assert json.loads(run_process("show", str(job_id), "--json").out)["state"] == "CANCELLED"


def test_job_without_resources_asks_for_one_cpu(database_url, capsys):
    setup_group_and_users(capsys)
    job_id = int(run_cli(capsys, "submit", "--user", "bob", "--group", "gpu", "--entrypoint", "true").out)
    assert json.loads(run_cli(capsys, "show", str(job_id), "--json").out)["resources"] == {"CPU": 1}


def test_a_tenant_s_control_characters_are_shown_escaped(database_url, capsys):
    # An operator lists everyone's jobs: a job's text must not drive the operator's terminal.
    setup_group_and_users(capsys)
    text = "echo \x1b[31mred\nsecond \u202eline\x07"
    job_id = run_cli(capsys, "submit", "--user", "bob", "--group", "gpu", "--entrypoint", text,
                     "--metadata", "k=\x1b[2J").out.strip()
    shown = run_cli(capsys, "show", job_id).out
    assert "entrypoint:          echo \\x1b[31mred\\nsecond \\u202eline\\x07\n" in shown
    assert "metadata:            k=\\x1b[2J\n" in shown
    listed = run_cli(capsys, "jobs").out
    assert not any(character in shown + listed for character in "\x1b\x07\u202e")
    assert json.loads(run_cli(capsys, "show", job_id, "--json").out)["entrypoint"] == text


@pytest.mark.parametrize("terminal, shown", [
    # On a terminal: colours, line breaks, tabs and carriage returns kept; a clipboard write
    # (OSC 52), a bell and a screen clear shown escaped.
    (True, "\x1b[32mok\x1b[0m\t50%\r100%\n\\x1b]52;c;ZXZpbA==\\x07 \\x1b[2J\n"),
    # Into a file or a pipe: as the job wrote it.
    (False, "\x1b[32mok\x1b[0m\t50%\r100%\n\x1b]52;c;ZXZpbA==\x07 \x1b[2J\n"),
])
def test_another_user_s_log_cannot_drive_the_terminal(database_url, conn, capsys, monkeypatch, terminal, shown):
    setup_group_and_users(capsys)
    job_id = int(run_cli(capsys, "submit", "--user", "bob", "--group", "gpu", "--entrypoint", "true").out)
    conn.execute("UPDATE jobs SET submission_id = 'q-1-1', state = 'RUNNING' WHERE id = %s", (job_id,))
    conn.commit()
    written = "\x1b[32mok\x1b[0m\t50%\r100%\n\x1b]52;c;ZXZpbA==\x07 \x1b[2J\n"

    class Cluster:  # Ray's answer, as test_tick reads it from a real cluster
        def logs(self, submission_id):
            assert submission_id == "q-1-1"
            return written

    monkeypatch.setattr(scheduler_cli, "cluster_of", lambda address, timeout_s: Cluster())
    monkeypatch.setattr(sys.stdout, "isatty", lambda: terminal)
    result = run_cli(capsys, "logs", str(job_id))
    assert (result.status, result.out, result.err) == (0, shown, "")


def test_python_function_validates_like_the_cli(database_url, conn, capsys):
    from job.api import submit
    from job.core.errors import BadInput

    setup_group_and_users(capsys)
    job_id = submit(user="alice", group="gpu", entrypoint="python x.py", resources={"GPU": 1, "memory": "512MiB"})
    row = conn.execute("SELECT resources FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row["resources"] == {"GPU": 1, "memory": 512 * 2**20}
    with pytest.raises(BadInput, match="entrypoint: must not be empty"):
        submit(user="alice", group="gpu", entrypoint="  ")
    # Enqueued inside the caller's transaction: rolled back with it.
    conn.autocommit = False
    submit(user="bob", group="gpu", entrypoint="true", conn=conn)
    conn.rollback()
    conn.autocommit = True
    assert conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 1


@pytest.mark.parametrize("ids, message", [
    ("17", "ids: give a list of job ids, got str '17'"),  # was read as the ids 1 and 7
    (17, "ids: give a list of job ids, got int 17"),
    ([True], "ids: True is not a job id (a positive whole number)"),
    ([0], "ids: 0 is not a job id (a positive whole number)"),
    ([2**63], "ids: 9223372036854775808 is not a job id (a positive whole number)"),
])
def test_the_python_cancel_refuses_what_is_not_a_list_of_ids_before_the_database(ids, message):
    from job.api import cancel
    from job.core.errors import BadInput

    with pytest.raises(BadInput) as refused:
        cancel(ids, database_url="postgresql://nobody@127.0.0.1:1/none")
    assert str(refused.value) == message


def test_cancel_of_running_job_is_a_request(database_url, conn, capsys):
    setup_group_and_users(capsys)
    job_id = int(run_cli(capsys, "submit", "--user", "bob", "--group", "gpu", "--entrypoint", "sleep 9").out)
    conn.execute("UPDATE jobs SET state = 'RUNNING', submission_id = 'x-1-1', attempt = 1 WHERE id = %s", (job_id,))
    result = run_cli(capsys, "cancel", str(job_id))
    assert result.status == 0 and "cancel requested" in result.out
    row = conn.execute("SELECT state, cancel_requested_at FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row["state"] == "RUNNING" and row["cancel_requested_at"] is not None


def test_group_set_show_remove(database_url, conn, capsys):
    setup_group_and_users(capsys)
    assert run_cli(capsys, "group", "set", "gpu", "--selector", "concentrated", "--max-running-per-user", "4",
                   "--max-resources-per-user", "GPU=2", "--strict-order", "--pending-timeout", "1d").status == 0
    group = json.loads(run_cli(capsys, "group", "show", "gpu", "--json").out)
    assert group["selector"] == "concentrated" and group["policy"] == "drf"
    assert group["max_running_per_user"] == 4 and group["max_resources_per_user"] == {"GPU": 2}
    assert group["strict_order"] is True and group["pending_timeout_s"] == 86400

    run_cli(capsys, "submit", "--user", "bob", "--group", "gpu", "--entrypoint", "true")
    refused = run_cli(capsys, "group", "remove", "gpu")
    assert refused.status == 2 and "1 pending or active job" in refused.err
    conn.execute("UPDATE jobs SET state = 'SUCCEEDED', submission_id = 'x-1-1'")
    assert run_cli(capsys, "group", "remove", "gpu").status == 0
    assert json.loads(run_cli(capsys, "group", "list", "--json").out) == []


def test_priority_classes_and_preemption_options(database_url, conn, capsys):
    setup_group_and_users(capsys)
    assert run_cli(capsys, "group", "set", "gpu", "--priority-class", "default=0", "--priority-class", "high=10",
                   "--priority-class", "system=100:non-preemptible", "--preemption", "fairshare",
                   "--min-runtime", "30m", "--max-preemptions", "3").status == 0
    group = json.loads(run_cli(capsys, "group", "show", "gpu", "--json").out)
    assert group["priority_classes"] == [{"name": "default", "value": 0, "preemptible": True},
                                         {"name": "high", "value": 10, "preemptible": True},
                                         {"name": "system", "value": 100, "preemptible": False}]
    assert (group["default_class"], group["preemption"], group["min_runtime_s"], group["max_preemptions"]) == (
        "default", "fairshare", 1800, 3)
    shown = run_cli(capsys, "group", "show", "gpu").out
    assert "default=0, high=10, system=100:non-preemptible" in shown and "30m" in shown
    high = int(run_cli(capsys, *SUBMIT, "--class", "high").out)
    plain = int(run_cli(capsys, *SUBMIT).out)
    listed = {job["id"]: job["class"] for job in json.loads(run_cli(capsys, "jobs", "--json").out)}
    assert listed == {high: "high", plain: None}
    table = run_cli(capsys, "jobs").out.splitlines()
    assert table[0].split()[:6] == ["ID", "USER", "GROUP", "STATE", "CLASS", "RESOURCES"]
    assert json.loads(run_cli(capsys, "show", str(high), "--json").out)["preemptions"] == 0
    # The default may change to another class, and "default" may go: no job names it (a job
    # submitted without --class is of whichever class is the group's default).
    assert run_cli(capsys, "group", "set", "gpu", "--priority-class", "low=-1", "--priority-class", "high=10",
                   "--default-class", "low").status == 0
    assert json.loads(run_cli(capsys, "group", "show", "gpu", "--json").out)["default_class"] == "low"
    refused = run_cli(capsys, "group", "set", "gpu", "--priority-class", "low=-1", "--default-class", "low")
    assert refused.status == 2 and "1 of class high" in refused.err


def test_overuse_options(database_url, capsys):
    setup_group_and_users(capsys)
    group = json.loads(run_cli(capsys, "group", "show", "gpu", "--json").out)
    assert (group["overuse"], group["overuse_grace_s"]) == ("allow", 60)
    assert run_cli(capsys, "group", "set", "gpu", "--overuse", "stop", "--overuse-grace", "5s").status == 0
    group = json.loads(run_cli(capsys, "group", "show", "gpu", "--json").out)
    assert (group["overuse"], group["overuse_grace_s"]) == ("stop", 5)


def test_user_show_and_list(database_url, capsys):
    setup_group_and_users(capsys)
    run_cli(capsys, "submit", "--user", "alice", "--group", "gpu", "--entrypoint", "true")
    user = json.loads(run_cli(capsys, "user", "show", "alice", "--json").out)
    assert user["shares"] == 2 and user["groups"][0]["pending"] == 1
    names = [u["name"] for u in json.loads(run_cli(capsys, "user", "list", "--json").out)]
    assert names == ["alice", "bob"]
    assert run_cli(capsys, "user", "set", "alice", "--max-running", "3").status == 0
    assert json.loads(run_cli(capsys, "user", "show", "alice", "--json").out)["shares"] == 2  # kept


SUBMIT = ["submit", "--user", "alice", "--group", "gpu", "--entrypoint", "true"]

BAD_INPUT = [
    # (argv, text the error must contain)
    (["submit", "--user", "alice", "--group", "gpu", "--entrypoint", "   "], "entrypoint: must not be empty"),
    ([*SUBMIT, "--cpus", "-1"], "CPU: must be finite and not negative"),
    ([*SUBMIT, "--cpus", "nan"], "CPU: must be finite and not negative"),
    ([*SUBMIT, "--cpus", "0.00001"], "steps of 0.0001"),
    ([*SUBMIT, "--cpus", "1e300"], "CPU: at most 922337203685477 (the most Ray can count)"),
    ([*SUBMIT, "--memory", "1000PiB"], "memory: at most 922337203685477 (the most Ray can count)"),
    ([*SUBMIT, "--gpus", "two"], "GPU: not a number"),
    ([*SUBMIT, "--memory", "4 gigs"], "not a memory size"),
    ([*SUBMIT, "--resource", "cpu=2"], "unknown resource 'cpu': did you mean 'CPU'?"),
    ([*SUBMIT, "--resource", "node:10.0.0.1=1"], "node resources are chosen by the scheduler"),
    ([*SUBMIT, "--resource", "special"], "--resource: expected NAME=VALUE"),
    ([*SUBMIT, "--runtime-env", "[1, 2]"], "--runtime-env: must be a JSON object"),
    ([*SUBMIT, "--runtime-env", "{not json"], "--runtime-env: not valid JSON"),
    ([*SUBMIT, "--runtime-env", "@/nonexistent/env.json"], "--runtime-env: cannot read /nonexistent/env.json"),
    ([*SUBMIT, "--runtime-env", "@/dev/zero"], "--runtime-env: cannot read /dev/zero: larger than 1 MiB"),
    ([*SUBMIT, "--runtime-env", '{"working_dir": "."}'], "runtime_env: working_dir: '.' is not a remote URI"),
    ([*SUBMIT, "--runtime-env", '{"pip": "/proc/self/environ"}'], "runtime_env: pip: give a list of requirements"),
    ([*SUBMIT, "--runtime-env", '{"nsight": "default"}'], "runtime_env: nsight: not a runtime_env key"),
    ([*SUBMIT, "--runtime-env", '{"env_vars": {"A": "' + "x" * 70_000 + '"}}'], "runtime_env: at most 65536 bytes as JSON"),
    ([*SUBMIT, "--cpus", "0"], "resources: ask for more than nothing: at least one amount above zero"),
    ([*SUBMIT, "--resource", "CPU=0", "--resource", "special=0"], "resources: ask for more than nothing"),
    (["submit", "--user", "alice", "--group", "gpu", "--entrypoint", "echo a\x00b"], "entrypoint: must not contain NUL"),
    (["submit", "--user", "alice", "--group", "gpu", "--entrypoint", "x" * 70_000], "entrypoint: at most 65536 bytes, got 70000"),
    ([*SUBMIT, *[arg for i in range(33) for arg in ("--node-label", f"k{i}=v")]], "node_labels: at most 32 labels, got 33"),
    ([*SUBMIT, *[arg for i in range(65) for arg in ("--metadata", f"k{i}=v")]], "metadata: at most 64 keys, got 65"),
    ([*SUBMIT, "--priority", "high"], "priority: Input should be a valid integer"),
    ([*SUBMIT, "--not-before", "tomorrow"], "not_before: not a time"),
    # Out of range: one line naming the field, never a traceback.
    ([*SUBMIT, "--not-before", "9999-12-31T23:59:59-14:00"], "not_before: '9999-12-31T23:59:59-14:00' is out of range"),
    ([*SUBMIT, "--cpus", "9" * 4000], "resources: CPU: at most 922337203685477 (the most Ray can count), got inf"),
    ([*SUBMIT, "--max-runtime", "1000000000w"], "max_runtime_s: a duration must be at most 100 years"),
    ([*SUBMIT, "--runtime-env", "[" * 100_000], "--runtime-env: nested too deeply"),
    ([*SUBMIT, *[arg for i in range(65) for arg in ("--resource", f"r{i}=1")]], "resources: at most 64 resource names, got 65"),
    (["show", "\u00b2"], "job id: '\u00b2' is not a job id"),
    (["cancel", "9" * 5000], "job id: '99999"),
    (["jobs", "--limit", "\u00b2"], "--limit: '\u00b2' is not a positive whole number"),
    ([*SUBMIT, "--max-runtime", "forever"], "max_runtime_s: not a duration"),
    ([*SUBMIT, "--max-runtime", "0s"], "max_runtime_s: Input should be greater than 0"),
    ([*SUBMIT, "--node-label", "bad key=x"], "not a valid label key"),
    ([*SUBMIT, "--metadata", "scheduler.job_id=7"], "set by the scheduler"),
    # The gateway's keys, which only the gateway reads: elsewhere they were Ray's metadata, unread.
    ([*SUBMIT, "--metadata", "queue.priority=5"],
     "metadata: 'queue.priority': the gateway's key for priority: give priority itself (--priority)"),
    ([*SUBMIT, "--metadata", "queue.array=0-3"], "metadata: 'queue.array': the gateway's key for array"),
    ([*SUBMIT, "--metadata", "queue.nice=5"], "metadata: 'queue.nice': keys starting with 'queue.' are the gateway's"),
    (["submit", "--user", "carol", "--group", "gpu", "--entrypoint", "true"], "user: 'carol' does not exist"),
    (["submit", "--user", "alice", "--group", "cpu", "--entrypoint", "true"], "group: 'cpu' does not exist"),
    (["submit", "--user", "al ice", "--group", "gpu", "--entrypoint", "true"], "user: 'al ice' is not a valid user name"),
    (["group", "add", "g2", "--ray-address", "localhost:8265"], "clusters.0.address: 'localhost:8265': use http://host:port"),
    (["group", "add", "g2", "--ray-address", "http://h:1", "--policy", "random"], "policy: Input should be 'fifo'"),
    (["group", "add", "g2", "--ray-address", "http://h:1", "--selector", "best"], "selector: Input should be 'legacy'"),
    (["group", "add", "g2", "--ray-address", "http://h:1", "--resource-priority", "GPU,,CPU"],
     "resource_priority: give resource names"),
    (["group", "add", "g2", "--ray-address", "http://h:1", "--half-life=-5m"], "half_life_s: not a duration"),
    (["group", "add", "g2", "--ray-address", "http://h:1", "--max-attempts", "0"],
     "max_attempts: Input should be greater than 0"),
    (["group", "add", "gpu", "--ray-address", "http://h:1"], "group 'gpu' already exists"),
    (["group", "set", "nope", "--policy", "fifo"], "group 'nope' does not exist"),
    (["user", "set", "bob", "--shares", "0"], "shares: Input should be greater than 0"),
    (["user", "set", "bob", "--shares", "nan"], "shares: Input should be a finite number"),
    (["user", "set", "public"], "name: 'public' is reserved: a user's name is its database role's"),
    (["user", "set", "pg_monitor"], "name: 'pg_monitor' is reserved"),
    ([*SUBMIT, "--class", "urgent"], "class: 'urgent' is not a class of group 'gpu' (its classes: default)"),
    ([*SUBMIT, "--class", "no such"], "class: 'no such' is not a valid class name"),
    (["group", "set", "gpu", "--priority-class", "low=0"], "default_class: 'default' is not one of the group's classes (low)"),
    (["group", "set", "gpu", "--priority-class", "low=zero"], "priority_classes: 'low=zero': give NAME=VALUE"),
    # Eleven digits were 'give NAME=VALUE'; ten were out of range.
    (["group", "set", "gpu", "--priority-class", "low=99999999999", "--default-class", "low"],
     "priority_classes: 'low=99999999999': the value is out of range (at most 2147483647 either way)"),
    (["group", "set", "gpu", "--priority-class", "a=1", "--priority-class", "a=2", "--default-class", "a"],
     "priority_classes: class 'a' is given more than once"),
    (["group", "set", "gpu", "--priority-class", "a=1:never", "--default-class", "a"],
     "give NAME=VALUE or NAME=VALUE:non-preemptible"),
    (["group", "set", "gpu", "--preemption", "always"], "preemption: Input should be 'off', 'priority' or 'fairshare'"),
    (["group", "set", "gpu", "--min-runtime", "soon"], "min_runtime_s: not a duration"),
    (["group", "set", "gpu", "--max-preemptions", "-1"], "max_preemptions: Input should be greater than or equal to 0"),
    (["group", "set", "gpu", "--overuse", "kill"], "overuse: Input should be 'allow' or 'stop'"),
    (["group", "set", "gpu", "--overuse-grace", "soon"], "overuse_grace_s: not a duration"),
    (["jobs", "--state", "DONE"], "state: unknown 'DONE'"),
    # Empty names were 'unknown , , ', and a name's control characters reached the terminal.
    (["jobs", "--state", ",,"], "state: unknown '', '', '' (one of PENDING"),
    (["jobs", "--state", "\x1b[2J"], "state: unknown '\\x1b[2J' (one of PENDING"),
    (["cancel", "abc"], "job id: 'abc' is not a job id"),
    (["show", "999"], "job 999 does not exist"),
]


@pytest.mark.parametrize("argv,message", BAD_INPUT, ids=[" ".join(argv[:1] + argv[-2:]) for argv, _ in BAD_INPUT])
def test_bad_input_is_refused_and_nothing_changes(database_url, conn, capsys, argv, message):
    setup_group_and_users(capsys)
    run_cli(capsys, *SUBMIT)
    before = database_contents(conn)
    result = run_cli(capsys, *argv)
    assert result.status == 2, (result.out, result.err)
    assert message in result.err
    assert result.err.startswith("error: ") and result.err.count("\n") == 1
    assert result.out == ""
    assert database_contents(conn) == before


def test_unmigrated_database_says_to_migrate(pg_server_url, capsys, monkeypatch):
    import psycopg

    from job.devtools.local_postgres import with_database

    name = "jobtest_unmigrated"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    monkeypatch.setenv("JOB_DATABASE_URL", with_database(pg_server_url, name))
    try:
        result = run_cli(capsys, "jobs")
        assert result.status == 2 and "run `python -m job migrate`" in result.err
        status = run_cli(capsys, "migrate", "--status")
        assert "pending  0001_initial.sql" in status.out
        assert run_cli(capsys, "migrate").status == 0
        assert "applied  0001_initial.sql" in run_cli(capsys, "migrate", "--status").out
        assert run_cli(capsys, "jobs").status == 0
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_settings_errors_name_the_variable_and_hide_the_password():
    missing = run_process("jobs", env={"JOB_DATABASE_URL": ""})
    assert missing.status == 2 and "JOB_DATABASE_URL" in missing.err
    bad = run_process("jobs", env={"JOB_DATABASE_URL": "mysql://u:s3cret@h/db"})
    assert bad.status == 2 and "JOB_DATABASE_URL" in bad.err and "s3cret" not in bad.err
    level = run_process("jobs", env={"JOB_LOG_LEVEL": "loud"})
    assert level.status == 2 and "JOB_LOG_LEVEL" in level.err
    down = run_process("jobs", env={"JOB_DATABASE_URL": "postgresql://u:s3cret@127.0.0.1:1/db"})
    assert down.status == 1 and "unreachable" in down.err and "s3cret" not in down.err and "***" in down.err
    assert "Traceback" not in down.err
