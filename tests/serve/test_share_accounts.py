"""`share`, the metrics and the status page with accounts, on the real PostgreSQL after a real tick
(fake Ray: two nodes of 4 CPUs): the tree and each node's figures, each user's account in --json."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from cli_helpers import run_cli
from fake_ray import FakeRay
from prometheus_client.parser import text_string_to_metric_families

from job import api
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.serve.metrics import exposition
from job.serve.page import render
from job.serve.report import read_report

FAKE = "http://fake-ray.invalid:8265"


@pytest.fixture
def teams(conn, database_url, capsys, monkeypatch):
    """Accounts A (with A1 below it) and B, one share each; a1 and a2 in A1, b in B, r in the root.
    Each of the four submits three jobs of 2 CPUs; one tick places four of them on 8 CPUs."""
    conn.execute("INSERT INTO resource_groups (name, clusters, policy) "
                 "VALUES ('cpu', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %s::text)), 'drf')", (FAKE,))
    for argv in (["account", "add", "A"], ["account", "add", "A1", "--parent", "A"], ["account", "add", "B"],
                 ["user", "set", "a1", "--account", "A1"], ["user", "set", "a2", "--account", "A1"],
                 ["user", "set", "b", "--account", "B"], ["user", "set", "r"]):
        assert run_cli(capsys, *argv).status == 0
    for user in ("a1", "a2", "b", "r"):
        for _ in range(3):
            api.submit(user=user, group="cpu", entrypoint="true", resources={"CPU": 2}, database_url=database_url)
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: FakeRay())
    [result] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "cpu")
    assert result.status == "ticked", result.cause


def test_share_shows_the_tree_with_each_nodes_figures(teams, capsys):
    result = run_cli(capsys, "share")
    assert result.status == 0, result.err
    header, *lines = result.out.splitlines()
    assert header.split()[:4] == ["GROUP", "ACCOUNT/USER", "SHARES", "NORM_SHARES"]
    at = header.index("ACCOUNT/USER")
    assert [line[at:at + 6].rstrip() for line in lines] == ["A/", "  A1/", "    a1", "    a2", "B/", "  b", "r"]
    figures = {line[at:].split()[0]: dict(zip(header[at:].lower().split()[1:], line[at:].split()[1:], strict=True))
               for line in lines}
    # Three active children of the root (A, B, r): a third each; A's third goes to A1, then halved.
    assert {name: row["entitled"] for name, row in figures.items()} == {
        "A/": "0.333", "A1/": "0.333", "a1": "0.167", "a2": "0.167", "B/": "0.333", "b": "0.333", "r": "0.333"}
    # The tick placed one job of 2 CPUs for each of A, B, r first, then A's second lowest path:
    # A holds 4 of 8 CPUs (a1 and a2 one job each), B and r 2 each.
    assert {name: (row["dominant"], row["running"], row["pending"]) for name, row in figures.items()} == {
        "A/": ("0.500", "2", "4"), "A1/": ("0.500", "2", "4"), "a1": ("0.250", "1", "2"), "a2": ("0.250", "1", "2"),
        "B/": ("0.250", "1", "2"), "b": ("0.250", "1", "2"), "r": ("0.250", "1", "2")}
    assert figures["A/"]["norm_shares"] == "0.333" and figures["a1"]["norm_shares"] == "0.500"
    assert figures["a1"]["waiting"] == "Resources=2" and figures["A/"].get("waiting") == "-"


def test_share_json_names_each_users_account(teams, capsys):
    rows = json.loads(run_cli(capsys, "share", "--json").out)
    assert {row["user"]: row["account"] for row in rows} == {"a1": "A1", "a2": "A1", "b": "B", "r": None}
    by_user = {row["user"]: row for row in rows}
    assert by_user["a1"]["entitlement"] == pytest.approx(1 / 6) and by_user["r"]["entitlement"] == pytest.approx(1 / 3)


def test_the_metrics_carry_the_account_and_the_page_its_bars(teams, conn):
    report = read_report(conn, totals=True, queue=5)
    found = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
             for family in text_string_to_metric_families(exposition(report).decode()) for sample in family.samples}
    assert found[("job_user_account_info", (("account", "A1"), ("group", "cpu"), ("user", "a1")))] == 1
    assert found[("job_user_account_info", (("account", ""), ("group", "cpu"), ("user", "r")))] == 1
    assert found[("job_account_dominant_share_ratio", (("account", "A"), ("group", "cpu"), ("parent", "")))] == 0.5
    assert found[("job_account_entitlement_ratio", (("account", "A1"), ("group", "cpu"), ("parent", "A")))] == \
        pytest.approx(1 / 3)
    page = render(report, datetime.now(UTC))
    assert "aria-label='share of the group per account'" in page
    assert page.count("<g class='account'>") == 3 and "A1: dominant share 50.0%, entitled to 33.3%" in page
