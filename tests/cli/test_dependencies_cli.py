"""`submit --after` on a real PostgreSQL: the dependencies stored, shown both ways by `show`, in
`jobs --json`; ids unknown or malformed refused in one line, exit 2, nothing written."""

from __future__ import annotations

import json

import pytest
from cli_helpers import database_contents, run_cli

SUBMIT = ["submit", "--user", "alice", "--group", "main", "--entrypoint", "true"]


@pytest.fixture
def chain(database_url, conn, capsys) -> list[int]:
    assert run_cli(capsys, "group", "add", "main", "--ray-address", "http://127.0.0.1:8265").status == 0
    assert run_cli(capsys, "user", "set", "alice").status == 0
    first = int(run_cli(capsys, *SUBMIT).out)
    second = int(run_cli(capsys, *SUBMIT, "--after", str(first)).out)
    third = run_cli(capsys, *SUBMIT, "--after", f"{first}:fail,{second}:any", "--after", f"{first}:any")
    assert third.status == 0, third.err
    return [first, second, int(third.out)]


def test_dependencies_are_stored_and_shown_both_ways(conn, capsys, chain):
    first, second, third = chain
    listed = {job["id"]: job for job in json.loads(run_cli(capsys, "jobs", "--json").out)}
    assert listed[first]["after"] is None
    assert listed[second]["after"] == [{"job": first, "when": "ok"}]
    # The same job given twice: its last kind.
    assert listed[third]["after"] == [{"job": first, "when": "any"}, {"job": second, "when": "any"}]
    conn.execute("UPDATE jobs SET state = 'FAILED', finished_at = now() WHERE id = %s", (first,))
    shown = " ".join(run_cli(capsys, "show", str(third)).out.split())
    assert f"after: {first} to end (FAILED), {second} to end (PENDING)" in shown
    assert "before: -" in shown
    shown = " ".join(run_cli(capsys, "show", str(first)).out.split())
    assert "after: -" in shown and f"before: {second}, {third}" in shown
    assert json.loads(run_cli(capsys, "show", str(first), "--json").out)["before"] == [second, third]


@pytest.mark.parametrize(("after", "message"), [
    ("999999", "after: job 999999 does not exist"),
    ("1:maybe", "after: '1:maybe': 'maybe' is not one of ok, any, fail"),
    ("one", "after: 'one': 'one' is not a job id (a positive whole number)"),
    ("1,,2", "after: '': '' is not a job id"),
])
def test_bad_dependencies_are_refused_and_nothing_is_written(conn, capsys, chain, after, message):
    before = database_contents(conn)
    result = run_cli(capsys, *SUBMIT, "--after", after)
    assert result.status == 2, result
    assert result.err.startswith(f"error: {message}") and result.err.count("\n") == 1, result.err
    assert result.out == ""
    assert database_contents(conn) == before
