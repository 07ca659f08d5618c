"""A tick plans down the account tree: the accounts and users' accounts it reads from PostgreSQL
(sql/0017_accounts.sql) reach the planner's snapshot. Ray is the table of tests/fake_ray.py (two
nodes of 4 CPUs): the subject is what the tick reads and writes, not Ray."""

from __future__ import annotations

from collections import Counter

from cli_helpers import run_cli
from fake_ray import FakeRay
from tick_helpers import add_group, jobs

from job.api import submit
from job.scheduler import tick
from job.scheduler.config import TickConfig

TEAM = {"a1": "A", "a2": "A", "a3": "A", "b": "B"}


def setup(conn, capsys, **account_options) -> None:
    add_group(conn, "http://127.0.0.1:8265", users=())
    for name in ("A", "B"):
        options = [arg for key, value in account_options.get(name, {}).items() for arg in (f"--{key}", value)]
        assert run_cli(capsys, "account", "add", name, *options).status == 0
    for user, account in TEAM.items():
        assert run_cli(capsys, "user", "set", user, "--account", account).status == 0
        for _ in range(4):
            submit(user=user, group="main", entrypoint="true", resources={"CPU": 1})


def tick_once(database_url, monkeypatch) -> dict[int, dict]:
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: FakeRay())
    [result] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "main")
    assert result.status == "ticked", result.cause


def test_a_tick_shares_the_group_between_teams_first(database_url, conn, capsys, monkeypatch):
    setup(conn, capsys)
    tick_once(database_url, monkeypatch)
    placed = Counter(row["user_name"] for row in jobs(conn).values() if row["state"] != "PENDING")
    # 8 CPUs: half to B's one user, half to A's three (2, 1, 1: a1 first by name).
    assert placed == {"b": 4, "a1": 2, "a2": 1, "a3": 1}


def test_an_account_limit_holds_its_users_jobs_with_its_reason(database_url, conn, capsys, monkeypatch):
    setup(conn, capsys, A={"max-running": "2"})
    tick_once(database_url, monkeypatch)
    rows = jobs(conn).values()
    placed = Counter(row["user_name"] for row in rows if row["state"] != "PENDING")
    assert sum(count for user, count in placed.items() if TEAM[user] == "A") == 2 and placed["b"] == 4
    held = {(row["reason"], row["message"]) for row in rows if row["state"] == "PENDING" and TEAM[row["user_name"]] == "A"}
    assert held == {("AccountJobLimit", "account A has 2 jobs running or starting, the most allowed is 2")}


def test_a_placements_event_carries_the_figures_of_each_level(database_url, conn, capsys, monkeypatch):
    setup(conn, capsys)
    tick_once(database_url, monkeypatch)
    details = [row["details"] for row in conn.execute(
        "SELECT e.details FROM job_events e JOIN jobs j ON j.id = e.job_id WHERE e.kind = 'placed' ORDER BY e.id")]
    firsts = {}
    for figure in details:
        firsts.setdefault(figure["accounts"][0]["account"], figure)
    # The first placement of each team: nothing held yet by either.
    assert [level["account"] for level in firsts["A"]["accounts"]] == ["A"]
    assert firsts["B"]["accounts"] == [{"account": "B", "shares": 1.0, "usage": 0.0, "dominant_share": 0.0, "score": 0.0}]
    # B's last placement: B held 3 of the 8 CPUs just before it.
    last_b = [figure for figure in details if figure["accounts"][0]["account"] == "B"][-1]
    assert last_b["accounts"][0]["dominant_share"] == 0.375 and last_b["dominant_share"] == 0.375
