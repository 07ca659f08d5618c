"""A group over two clusters, ticked on a real PostgreSQL with each cluster a table of
tests/fake_ray.py: jobs go to both and remember theirs, a cluster that stops answering keeps its
jobs until it is lost, then they are requeued and run in the other; when it answers again, what it
still runs of them is stopped before it takes anything; the driver caps; a cluster removed. (Two
real Ray clusters: test_clusters_ray.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cli_helpers import run_cli
from fake_ray import FakeRay, running
from psycopg.types.json import Jsonb

from job.api import submit
from job.core.errors import Unavailable
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.store import groups

EAST, WEST = "http://east:8265", "http://west:8265"


class Down(FakeRay):
    """A cluster that does not answer."""

    def alive_nodes(self, labels=None):
        raise Unavailable("ray at http://west:8265: connection refused")


@pytest.fixture
def two(conn):
    conn.execute("INSERT INTO resource_groups (name, clusters, policy, half_life_s, cluster_lost_after_s) "
                 "VALUES ('main', %s, 'fifo', 0, 60)",
                 (Jsonb([{"name": "east", "address": EAST}, {"name": "west", "address": WEST}]),))
    conn.execute("INSERT INTO users (name) VALUES ('alice')")
    return {EAST: FakeRay(nodes=("e1", "e2")), WEST: FakeRay(nodes=("w1", "w2"))}


def tick_once(database_url, monkeypatch, rays):
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: rays[address])
    [result] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "main")
    assert result.status == "ticked", result.cause
    return result


def rows(conn) -> dict[int, dict]:
    return {row["id"]: row for row in conn.execute("SELECT * FROM jobs ORDER BY id")}


def start(rays, row):
    """Ray starts the job in the cluster it was sent to."""
    ray = rays[EAST if row["cluster"] == "east" else WEST]
    ray.known[row["submission_id"]] = running(row["submission_id"], row["node"], minutes=1)


def test_jobs_go_to_both_clusters_each_to_its_own(database_url, conn, monkeypatch, two):
    ids = [submit(user="alice", group="main", entrypoint="sleep 60", resources={"CPU": 4}) for _ in range(4)]
    result = tick_once(database_url, monkeypatch, two)
    assert result.placed == 4
    placed = rows(conn)
    assert sorted(placed[i]["cluster"] for i in ids) == ["east", "east", "west", "west"]
    for i in ids:
        ray = two[EAST if placed[i]["cluster"] == "east" else WEST]
        assert placed[i]["submission_id"] in ray.submitted and placed[i]["node"] in ray.node_names
    assert sorted(len(two[a].submitted) for a in (EAST, WEST)) == [2, 2]


def test_a_lost_cluster_s_jobs_run_in_the_other_and_are_stopped_when_it_returns(database_url, conn, monkeypatch, two):
    [job] = [submit(user="alice", group="main", entrypoint="sleep 60", resources={"CPU": 4},
                    node_labels={"ray.io/cluster": "west"})]
    tick_once(database_url, monkeypatch, two)
    first = rows(conn)[job]
    assert (first["cluster"], first["state"]) == ("west", "SUBMITTED")
    start(two, first)
    tick_once(database_url, monkeypatch, two)
    assert rows(conn)[job]["state"] == "RUNNING"
    # West stops answering: its job is kept as it was, every tick succeeding.
    west = two[WEST]
    two[WEST] = Down(nodes=west.node_names)
    tick_once(database_url, monkeypatch, two)
    kept = rows(conn)[job]
    assert (kept["state"], kept["cluster"], kept["requeues"]) == ("RUNNING", "west", 0)
    # Past the grace it is lost: the job is requeued (no attempt used) and may now go east.
    conn.execute("UPDATE group_state SET document = jsonb_set(document, '{since,west}', to_jsonb(%s::text)) "
                 "WHERE group_name = 'main' AND name = 'clusters'",
                 ((datetime.now(UTC) - timedelta(minutes=2)).isoformat(),))
    conn.execute("UPDATE jobs SET node_labels = '{}' WHERE id = %s", (job,))
    tick_once(database_url, monkeypatch, two)
    again = rows(conn)[job]
    assert again["requeues"] == 1 and again["attempt"] == 2 and again["cluster"] == "east", again
    assert again["state"] == "SUBMITTED"
    events = [(e["kind"], e["reason"]) for e in conn.execute("SELECT kind, reason FROM job_events WHERE job_id = %s "
                                                              "ORDER BY id", (job,))]
    assert ("requeued", "ClusterLost") in events
    # West answers again, still running the first attempt: stopped there, and west takes nothing
    # until Ray reports it ended.
    two[WEST] = west
    other = submit(user="alice", group="main", entrypoint="sleep 60", resources={"CPU": 4},
                   node_labels={"ray.io/cluster": "west"})
    # A dry run only looks: it stops nothing, and plans nothing in west.
    [dry] = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "main",
                          dry_run=True)
    assert west.stopped == [] and dry.placed == 0
    tick_once(database_url, monkeypatch, two)
    assert west.stopped == [first["submission_id"]]
    assert rows(conn)[other]["state"] == "PENDING"
    west.known[first["submission_id"]] = west.known[first["submission_id"]].__class__(
        first["submission_id"], "STOPPED", first["node"], None, datetime.now(UTC), None, None)
    tick_once(database_url, monkeypatch, two)
    assert rows(conn)[other]["state"] == "SUBMITTED" and rows(conn)[other]["cluster"] == "west"
    assert conn.execute("SELECT document FROM group_state WHERE group_name = 'main' AND name = 'clusters'"
                        ).fetchone()["document"] == {"since": {}, "requeued": {}}


def test_a_cluster_takes_at_most_its_drivers(database_url, conn, monkeypatch, two):
    conn.execute("UPDATE resource_groups SET max_drivers = 1")
    ids = [submit(user="alice", group="main", entrypoint="sleep 60", resources={"CPU": 1}) for _ in range(4)]
    result = tick_once(database_url, monkeypatch, two)
    assert result.placed == 2 and result.waiting["DriverLimit"] == 2
    placed = rows(conn)
    assert sorted(placed[i]["cluster"] for i in ids if placed[i]["state"] == "SUBMITTED") == ["east", "west"]
    waiting = [placed[i] for i in ids if placed[i]["state"] == "PENDING"]
    assert all(row["reason"] in ("DriverLimit", "Resources") for row in waiting), waiting
    # Full: the next tick places nothing more.
    assert tick_once(database_url, monkeypatch, two).placed == 0


def test_a_job_a_cap_holds_back_is_estimated_to_start_when_a_driver_there_should_end(database_url, conn, monkeypatch, two):
    conn.execute("UPDATE resource_groups SET max_drivers = 1")
    for _ in range(3):
        submit(user="alice", group="main", entrypoint="sleep 60", resources={"CPU": 0.5}, max_runtime=600)
    before = datetime.now(UTC)
    result = tick_once(database_url, monkeypatch, two)
    assert result.placed == 2 and result.waiting["DriverLimit"] == 1
    [held] = [row for row in rows(conn).values() if row["state"] == "PENDING"]
    assert held["reason"] == "DriverLimit" and held["queue_position"] is None
    # Each cluster's driver, placed now, runs at most 10 minutes: the estimate, to the minute.
    assert before + timedelta(minutes=9) <= held["estimated_start_at"] <= datetime.now(UTC) + timedelta(minutes=11)
    assert held["estimate_basis"] in {f"when a driver of ours in cluster {cluster} should end (its driver cap)"
                                      for cluster in ("east", "west")}


def test_the_default_cap_comes_from_the_head_s_memory(database_url, conn, monkeypatch, two):
    two[EAST].head_memory = 250e6  # two drivers
    two[WEST].head_memory = 120e6  # one
    for _ in range(8):
        submit(user="alice", group="main", entrypoint="sleep 60", resources={"CPU": 0.5})
    result = tick_once(database_url, monkeypatch, two)
    assert result.placed == 3 and result.waiting["DriverLimit"] == 5
    tick_once(database_url, monkeypatch, two)
    counts = {row["cluster"]: row["n"] for row in conn.execute(
        "SELECT cluster, count(*) AS n FROM jobs WHERE state <> 'PENDING' GROUP BY cluster")}
    assert counts == {"east": 2, "west": 1}


def test_placements_past_a_cluster_s_cap_go_to_another_cluster_in_the_same_tick(database_url, conn, monkeypatch, two):
    # The selector packs: the plan puts all four on east's first node, whose cluster takes two.
    conn.execute("UPDATE resource_groups SET max_drivers = 2, selector = 'concentrated'")
    ids = [submit(user="alice", group="main", entrypoint="sleep 60", resources={"CPU": 0.5}) for _ in range(4)]
    result = tick_once(database_url, monkeypatch, two)
    assert result.placed == 4 and "DriverLimit" not in result.waiting
    placed = rows(conn)
    assert sorted((placed[i]["cluster"], placed[i]["node"]) for i in ids) == [
        ("east", "e1"), ("east", "e1"), ("west", "w1"), ("west", "w1")]
    assert [placed[i]["state"] for i in ids] == ["SUBMITTED"] * 4
    # Both full now: the next jobs wait, saying why.
    later = submit(user="alice", group="main", entrypoint="sleep 60", resources={"CPU": 0.5})
    result = tick_once(database_url, monkeypatch, two)
    assert result.placed == 0
    assert (rows(conn)[later]["state"], rows(conn)[later]["reason"]) == ("PENDING", "DriverLimit")


def test_a_cluster_removed_takes_nothing_and_leaves_once_its_jobs_end(database_url, conn, monkeypatch, two, capsys):
    job = submit(user="alice", group="main", entrypoint="sleep 60", node_labels={"ray.io/cluster": "west"})
    tick_once(database_url, monkeypatch, two)
    removing = run_cli(capsys, "group", "set", "main", "--remove-ray-address", "west")
    assert removing.status == 0 and "west=http://west:8265 (removing)" in removing.out
    later = submit(user="alice", group="main", entrypoint="sleep 60", node_labels={"ray.io/cluster": "west"})
    tick_once(database_url, monkeypatch, two)
    assert rows(conn)[later]["state"] == "PENDING"
    assert [c.name for c in groups.get_group(conn, "main").clusters] == ["east", "west"]
    conn.execute("UPDATE jobs SET state = 'SUCCEEDED', finished_at = now() WHERE id = %s", (job,))
    tick_once(database_url, monkeypatch, two)
    assert [c.name for c in groups.get_group(conn, "main").clusters] == ["east"]
    assert run_cli(capsys, "group", "set", "main", "--remove-ray-address", "east").status == 2
    unknown = run_cli(capsys, "group", "set", "main", "--remove-ray-address", "north")
    assert (unknown.status, unknown.err) == (2, "error: --remove-ray-address: 'north' is not a cluster of the group\n")


def test_the_autoscaling_demand_goes_to_the_cluster_whose_node_type_fits(database_url, conn, monkeypatch, two):
    conn.execute("""UPDATE resource_groups SET autoscale = true, node_types = %s""", (Jsonb([
        {"name": "east-cpu", "resources": {"CPU": 4}, "labels": {"ray.io/cluster": "east", "pool": "cpu"}, "min": 0, "max": 2},
        {"name": "west-gpu", "resources": {"CPU": 8, "GPU": 1}, "labels": {"ray.io/cluster": "west", "pool": "gpu"}, "min": 0,
         "max": 2},
    ]),))
    gpu = submit(user="alice", group="main", entrypoint="python train.py", resources={"CPU": 2, "GPU": 1})
    result = tick_once(database_url, monkeypatch, two)
    assert rows(conn)[gpu]["reason"] == "ScalingUp"
    assert "west-gpu" in rows(conn)[gpu]["message"]
    [sent] = two[WEST].submitted
    assert sent.endswith("-main-west-1") and two[WEST].requests[sent]["node_id"] == "head-w1"
    assert next(iter(two[WEST].requests[sent]["runtime_env"]["env_vars"].values())) == '[[{"CPU":2,"GPU":1},{},1]]'
    # East is asked for nothing: its demand, cleared, is its own.
    [cleared] = two[EAST].submitted
    assert cleared.endswith("-main-east-1")
    assert next(iter(two[EAST].requests[cleared]["runtime_env"]["env_vars"].values())) == "[]"
    assert "west: " in result.demand and "east: " in result.demand
