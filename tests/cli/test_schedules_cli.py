"""`python -m job schedule`: add with the job options of `submit`, refusals in one line naming the
option with nothing written, list, show, pause, resume, remove; the jobs a schedule made carry it
in `jobs --json` and `show`, and a submit cannot claim one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from cli_helpers import database_contents, run_cli
from tick_helpers import add_group

from job.scheduler.schedules import run_schedules

JOB = ("--user", "alice", "--group", "main", "--entrypoint", "python train.py")


@pytest.fixture
def group(conn):
    add_group(conn, "http://127.0.0.1:1")


@pytest.mark.parametrize(("options", "refusal"), [
    (("--cron", "61 * * * *"), "error: --cron: minute: '61' is not 0..59"),
    (("--cron", "* * *"), "error: --cron: '* * *' is not a cron expression: give 5 fields"),
    (("--cron", "0 0 30 feb *"), "error: --cron: '0 0 30 feb *' never runs"),
    (("--cron", "0 2 * * *", "--timezone", "Europe/Pariss"), "error: --timezone: 'Europe/Pariss' is not a time zone"),
    (("--every", "0s"), "error: --every: must be more than 0"),
    (("--every", "soon"), "error: --every: "),
    (("--every", "1m", "--timezone", "UTC"), "error: --timezone: a period (--every) counts real time"),
    (("--every", "1m", "--starting-deadline=-5s"), "error: --starting-deadline: "),
    (("--every", "1m", "--cpus=-1"), "error: resources: CPU: must be finite and not negative"),
    (("--every", "1m", "--class", "nope"), "error: priority_class: 'nope' is not a class of group 'main'"),
    (("--every", "1m", "--after", "1"), "error: --after: a schedule's jobs cannot wait for other jobs"),
    (("--every", "1m", "--not-before", "2030-01-01T00:00:00Z"), "error: --not-before: a schedule's jobs cannot all"),
    (("--cron", "0 2 * * *", "--timezone", ""), "error: --timezone: '' is not a time zone"),
    # The machine's own zone: the command's and the tick's machines need not share it.
    (("--cron", "0 2 * * *", "--timezone", "localtime"), "error: --timezone: 'localtime' is not a time zone"),
    (("--cron", "0 2 * * *", "--timezone", "posixrules"), "error: --timezone: 'posixrules' is not a time zone"),
])
def test_refusals_name_the_option_and_write_nothing(group, conn, capsys, options, refusal):
    before = database_contents(conn)
    result = run_cli(capsys, "schedule", "add", "nightly", *options, *JOB)
    assert result.status == 2 and result.err.startswith(refusal) and result.err.count("\n") == 1, result.err
    assert database_contents(conn) == before


def test_a_bad_name_and_a_taken_one_are_refused(group, conn, capsys):
    assert run_cli(capsys, "schedule", "add", "b@d", "--every", "1m", *JOB).status == 2
    assert run_cli(capsys, "schedule", "add", "nightly", "--every", "1m", *JOB).status == 0
    again = run_cli(capsys, "schedule", "add", "nightly", "--every", "1m", *JOB)
    assert (again.status, again.err) == (2, "error: name: a schedule named 'nightly' exists already\n")


def test_add_list_show_pause_resume_remove(group, conn, capsys):
    added = run_cli(capsys, "schedule", "add", "nightly", "--cron", "30 2 * * mon-fri", "--timezone", "Europe/Paris",
                    "--concurrency", "forbid", *JOB, "--cpus", "2", "--metadata", "team=ml")
    assert added.status == 0, added.err
    assert added.out.startswith("schedule nightly added: cron '30 2 * * mon-fri' Europe/Paris, next slot 20")
    [row] = conn.execute("SELECT * FROM schedules").fetchall()
    assert row["template"] == {"entrypoint": "python train.py", "resources": {"CPU": 2.0}, "bundles": None,
                               "bundle_strategy": None, "node_labels": {}, "runtime_env": {},
                               "metadata": {"team": "ml"}, "priority": 0, "priority_class": None,
                               "not_before": None, "max_runtime_s": None, "after": None}
    listed = run_cli(capsys, "schedule", "list").out.splitlines()
    assert listed[0].split() == ["NAME", "USER", "GROUP", "WHEN", "NEXT", "LAST", "JOB", "STATE"]
    assert listed[1].split()[:8] == ["nightly", "alice", "main", "cron", "'30", "2", "*", "*"]
    assert listed[1].endswith("active")

    shown = run_cli(capsys, "schedule", "show", "nightly").out
    assert "when:" in shown and "job entrypoint:" in shown and "python train.py" in shown
    assert run_cli(capsys, "schedule", "pause", "nightly").out == "schedule nightly paused\n"
    assert json.loads(run_cli(capsys, "schedule", "show", "nightly", "--json").out)["state"] == "paused"
    assert run_cli(capsys, "schedule", "resume", "nightly").status == 0
    assert run_cli(capsys, "schedule", "remove", "nightly").out == "schedule nightly removed (the jobs it made stay)\n"
    gone = run_cli(capsys, "schedule", "show", "nightly")
    assert gone.status == 2 and "schedule 'nightly' does not exist" in gone.err


def test_a_scheduled_job_carries_its_schedule_and_slot(group, conn, capsys):
    assert run_cli(capsys, "schedule", "add", "often", "--every", "1m", *JOB).status == 0
    created = conn.execute("SELECT created_at FROM schedules").fetchone()["created_at"]
    run_schedules(conn, "main", created + timedelta(minutes=1, seconds=1))
    [job] = json.loads(run_cli(capsys, "jobs", "--json").out)
    slot = (created + timedelta(minutes=1)).astimezone(UTC)
    assert job["schedule"] == "often" and datetime.fromisoformat(job["slot"]) == slot
    assert "schedule:" in run_cli(capsys, "show", str(job["id"])).out
    shown = json.loads(run_cli(capsys, "schedule", "show", "often", "--json").out)
    assert shown["last_job"] == job["id"] and shown["slots"][0]["job"] == job["id"]
    # `submit` has no option for them.
    with pytest.raises(SystemExit) as refused:
        run_cli(capsys, "submit", *JOB, "--schedule", "often")
    assert refused.value.code == 2 and "unrecognized arguments: --schedule often" in capsys.readouterr().err
