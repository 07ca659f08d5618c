"""Arrays on a real PostgreSQL: `submit --array` makes one job per index in one statement, `jobs`
shows the array on one line until asked for its tasks, `show` and `cancel` take its id; a bad spec,
or a job setting the queue's own variables, is refused in one line with nothing written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_helpers import database_contents, run_cli

from job import api
from job.core.errors import BadInput

SUBMIT = ("submit", "--user", "alice", "--group", "gpu", "--entrypoint", "python task.py")


@pytest.fixture
def queue(database_url, capsys):
    assert run_cli(capsys, "group", "add", "gpu", "--ray-address", "http://127.0.0.1:8265").status == 0
    assert run_cli(capsys, "user", "set", "alice").status == 0


def tasks(conn, array_id: int) -> list[dict]:
    return conn.execute("SELECT id, array_id, array_index, array_throttle, state, entrypoint FROM jobs "
                        "WHERE array_id = %s ORDER BY id", (array_id,)).fetchall()


def test_an_array_from_submit_to_cancel(queue, conn, capsys):
    submitted = run_cli(capsys, *SUBMIT, "--array", "0-5%2", "--cpus", "2")
    assert submitted.status == 0, submitted.err
    *said, last = submitted.out.strip().splitlines()
    array_id = int(last)
    assert said == [f"array 0-5%2: 6 tasks, ids from {array_id}"]
    made = tasks(conn, array_id)
    # Ids in index order from the array's own, each task its index and the array's throttle.
    assert [(t["id"] - array_id, t["array_index"], t["array_throttle"]) for t in made] == [(i, i, 2) for i in range(6)]
    assert {(t["array_id"], t["state"], t["entrypoint"]) for t in made} == {(array_id, "PENDING", "python task.py")}
    lone = int(run_cli(capsys, *SUBMIT).out)

    table = run_cli(capsys, "jobs").out.splitlines()
    assert len(table) == 3 and table[1].startswith(f"{lone} ") and table[2].startswith(f"{array_id} ")
    assert "array 0-5%2" in table[2] and table[2].rstrip().endswith("PENDING 6")
    listed = json.loads(run_cli(capsys, "jobs", "--json").out)
    assert [(job["id"], job["array_id"]) for job in listed] == [(lone, None), (array_id, array_id)]
    assert listed[1]["array"] == {"id": array_id, "spec": "0-5%2", "tasks": 6, "states": {"PENDING": 6}}

    own = json.loads(run_cli(capsys, "jobs", "--array", str(array_id), "--json", "--limit", "4").out)
    assert [(job["array_id"], job["array_index"]) for job in own] == [(array_id, i) for i in range(4)]

    shown = run_cli(capsys, "show", str(array_id)).out
    assert "array:               0-5%2: PENDING 6" in shown
    assert json.loads(run_cli(capsys, "show", str(array_id + 3), "--json").out)["array_index"] == 3
    assert "array" not in json.loads(run_cli(capsys, "show", str(array_id + 3), "--json").out)

    # A task ended already is left as it is.
    for task, state in ((array_id + 4, "RUNNING"), (array_id + 5, "SUCCEEDED")):
        conn.execute("UPDATE jobs SET state = %s, submission_id = %s, attempt = 1, node = 'n', started_at = now(), "
                     "finished_at = CASE WHEN %s = 'SUCCEEDED' THEN now() END WHERE id = %s",
                     (state, f"s-{task}", state, task))
    # Each job said once: the array named twice, and one of its tasks besides, make one line.
    cancelled = run_cli(capsys, "cancel", str(array_id), str(array_id + 1), str(array_id))
    assert cancelled.status == 0
    assert cancelled.out.strip() == (f"array {array_id}: 4 cancelled, 1 cancel requested (the next tick stops them in "
                                     "Ray), 1 already ended")
    assert [t["state"] for t in tasks(conn, array_id)] == ["CANCELLED"] * 4 + ["RUNNING", "SUCCEEDED"]
    assert run_cli(capsys, "show", str(lone), "--json").status == 0
    assert json.loads(run_cli(capsys, "show", str(lone), "--json").out)["state"] == "PENDING"
    line = run_cli(capsys, "jobs").out.splitlines()[2]
    assert line.rstrip().endswith("RUNNING 1, SUCCEEDED 1, CANCELLED 4")


def test_the_api_submits_ten_thousand_tasks_and_returns_the_arrays_id(queue, conn):
    array_id = api.submit(user="alice", group="gpu", entrypoint="true", array="0-19998:2%100")
    found = conn.execute("""SELECT count(*) AS n, min(id) AS first, max(id) - min(id) AS span,
                                   bool_and(array_index = (id - %(a)s) * 2) AS in_order, min(array_throttle) AS throttle
                            FROM jobs WHERE array_id = %(a)s""", {"a": array_id}).fetchone()
    assert found == {"n": 10_000, "first": array_id, "span": 9_999, "in_order": True, "throttle": 100}
    assert api.cancel([array_id])[array_id + 9_999] == ("PENDING", "CANCELLED")


@pytest.mark.parametrize("argv, says", [
    (("--array", "0-10000"), "array: at most 10000 tasks an array, '0-10000' alone makes 10001"),
    (("--array", "0-9999,20000"), "array: at most 10000 tasks an array, got more"),
    (("--array", "5-1"), "array: '5-1': a range goes up"),
    (("--array", "0-9%0"), "array: '0' after '%' is not a throttle"),
    (("--array", "x"), "array: 'x' is not an index or a range"),
    (("--array", "2000000"), "array: '2000000': indexes go from 0 to 1000000"),
    (("--runtime-env", '{"env_vars": {"JOB_ARRAY_INDEX": "3"}}'),
     "runtime_env: env_vars.JOB_ARRAY_INDEX: the queue sets it in the job's environment"),
    (("--array", "0-3", "--runtime-env", '{"env_vars": {"JOB_ARRAY_ID": "1"}}'),
     "runtime_env: env_vars.JOB_ARRAY_ID: the queue sets it"),
])
def test_refused_in_one_line_and_nothing_written(queue, conn, capsys, argv, says):
    before = database_contents(conn)
    refused = run_cli(capsys, *SUBMIT, *argv)
    assert refused.status == 2 and refused.out == ""
    assert refused.err.strip() == f"error: {refused.err.strip().removeprefix('error: ')}" and "\n" not in refused.err.strip()
    assert says in refused.err
    assert database_contents(conn) == before


@pytest.mark.parametrize("array, says", [
    ("0-10000", "array: at most 10000 tasks an array"),
    (7, "array: 7 is not an array spec"),
    ("1,,2", "array: '' is not an index or a range"),
])
def test_the_api_refuses_as_the_cli(queue, conn, array, says):
    before = database_contents(conn)
    with pytest.raises(BadInput, match=says):
        api.submit(user="alice", group="gpu", entrypoint="true", array=array)
    assert database_contents(conn) == before


def test_a_listing_cut_short_by_its_reader_ends_quietly(queue):
    # 2,000 lines, more than a pipe holds: the command is still writing when `head` leaves.
    array_id = api.submit(user="alice", group="gpu", entrypoint="true", array="0-1999")
    listing = subprocess.Popen([sys.executable, "-m", "job", "jobs", "--array", str(array_id), "--limit", "2000"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert listing.stdout is not None and listing.stdout.readline().startswith(b"ID ")
    listing.stdout.close()
    _, err = listing.communicate(timeout=60)
    assert (listing.returncode, err) == (141, b"")
