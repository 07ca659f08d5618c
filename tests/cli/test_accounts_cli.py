"""The account commands on a real PostgreSQL: a team set up as a person would, the tree listed, and
bad input (a cycle, an unknown parent, a bad share, a busy account) refused in one line with exit
status 2 and nothing written."""

from __future__ import annotations

import json

import pytest
from cli_helpers import database_contents, run_cli


def contents(conn) -> list:
    return [*database_contents(conn), conn.execute("SELECT * FROM accounts ORDER BY name").fetchall()]


def setup_teams(capsys):
    for argv in (["account", "add", "physics", "--shares", "2"], ["account", "add", "theory", "--parent", "physics"],
                 ["account", "add", "bio"], ["user", "set", "alice", "--account", "theory"],
                 ["user", "set", "bob", "--account", "bio"], ["user", "set", "carol"]):
        result = run_cli(capsys, *argv)
        assert result.status == 0, result.err


def test_accounts_are_listed_as_a_tree_with_their_users(database_url, capsys):
    setup_teams(capsys)
    listed = run_cli(capsys, "account", "list").out.splitlines()
    assert [line.split()[0] for line in listed] == ["ACCOUNT", "bio", "physics", "theory"]
    assert listed[3].startswith("  theory")
    tree = json.loads(run_cli(capsys, "account", "list", "--json").out)
    assert [(a["name"], a["parent"], a["shares"], a["users"], a["children"]) for a in tree] == [
        ("bio", None, 1.0, ["bob"], []), ("physics", None, 2.0, [], ["theory"]), ("theory", "physics", 1.0, ["alice"], [])]
    users = {u["name"]: u["account"] for u in json.loads(run_cli(capsys, "user", "list", "--json").out)}
    assert users == {"alice": "theory", "bob": "bio", "carol": None}


def test_set_keeps_what_it_is_not_given_and_moves_accounts_and_users(database_url, capsys):
    setup_teams(capsys)
    assert run_cli(capsys, "account", "set", "theory", "--max-running", "4", "--max-resources", "GPU=2").status == 0
    theory = json.loads(run_cli(capsys, "account", "show", "theory", "--json").out)
    assert ((theory["parent"], theory["shares"], theory["max_running"], theory["max_resources"])
            == ("physics", 1.0, 4, {"GPU": 2.0}))
    assert run_cli(capsys, "account", "set", "theory", "--no-parent").status == 0
    assert json.loads(run_cli(capsys, "account", "show", "theory", "--json").out)["parent"] is None
    assert run_cli(capsys, "user", "set", "alice", "--shares", "3").status == 0
    alice = json.loads(run_cli(capsys, "user", "show", "alice", "--json").out)
    assert (alice["account"], alice["shares"]) == ("theory", 3)
    assert run_cli(capsys, "user", "set", "alice", "--no-account").status == 0
    assert json.loads(run_cli(capsys, "user", "show", "alice", "--json").out)["account"] is None
    assert run_cli(capsys, "account", "remove", "theory").out == "account theory removed\n"
    assert "theory" not in run_cli(capsys, "account", "list").out


BAD_INPUT = [
    (["account", "set", "physics", "--parent", "theory"],
     "parent: account physics: parent theory is below it, which would make a cycle"),
    (["account", "set", "physics", "--parent", "physics"], "parent: account 'physics' cannot be its own parent"),
    (["account", "add", "chem", "--parent", "nope"], "parent: account 'nope' does not exist"),
    (["account", "set", "bio", "--parent", "nope"], "parent: account 'nope' does not exist"),
    (["account", "add", "chem", "--shares", "0"], "shares: Input should be greater than 0"),
    (["account", "add", "chem", "--shares", "inf"], "shares: Input should be a finite number"),
    (["account", "add", "chem", "--shares", "-1"], "shares: Input should be greater than 0"),
    (["account", "add", "chem", "--shares", "lots"], "shares: Input should be a valid number"),
    (["account", "add", "chem", "--max-running", "0"], "max_running: Input should be greater than 0"),
    (["account", "add", "chem", "--max-resources", "CPU=x"], "max_resources: CPU: not a number"),
    (["account", "add", "bad name"], "name: 'bad name' is not a valid account name"),
    (["account", "add", "bio"], "account 'bio' already exists"),
    (["account", "set", "nope", "--shares", "2"], "account 'nope' does not exist"),
    (["account", "show", "nope"], "account 'nope' does not exist"),
    (["account", "remove", "bio"], "account 'bio' has 1 user(s) and 0 child account(s)"),
    (["account", "remove", "physics"], "account 'physics' has 0 user(s) and 1 child account(s)"),
    (["user", "set", "carol", "--account", "nope"], "account: 'nope' does not exist"),
    (["user", "set", "dave", "--account", "no such"], "account: 'no such' is not a valid account name"),
]


@pytest.mark.parametrize("argv,message", BAD_INPUT, ids=[" ".join(argv) for argv, _ in BAD_INPUT])
def test_bad_input_is_refused_and_nothing_changes(database_url, conn, capsys, argv, message):
    setup_teams(capsys)
    before = contents(conn)
    result = run_cli(capsys, *argv)
    assert result.status == 2, (result.out, result.err)
    assert message in result.err
    assert result.err.startswith("error: ") and result.err.count("\n") == 1
    assert result.out == ""
    assert contents(conn) == before
