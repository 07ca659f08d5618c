"""What a job really uses, on the real local cluster: user greedy's job declares CPU 0.5 and its
real Python driver starts three 1-CPU actors. The tick sees them as greedy's, not as work outside
the queue: greedy is charged CPU 3.5 (`share --json`), `show` gives declared and used side by side,
and user modest's job waits naming greedy's. Under `--overuse stop` the same job is stopped past
the grace and ends FAILED with reason OverUse."""

from __future__ import annotations

import json
import shlex
import time

import pytest
from cli_helpers import run_process
from tick_helpers import add_group, jobs, tick_until

from job.adapters.ray_cluster import cluster_for
from job.api import submit

pytestmark = pytest.mark.ray

# The driver is placed on worker a (its node label); one actor beside it there, two on worker b:
# 1.5 and 2 of their 2 CPUs. (Its own node id is not the worker's: on one host, the driver may
# connect to the head's raylet.)
DRIVER = """
import time
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init()
pools = {n.get("Labels", {}).get("pool"): n["NodeID"] for n in ray.nodes() if n["Alive"]}
here, there = pools["a"], pools["b"]


@ray.remote(num_cpus=1)
class Holder:
    def ping(self):
        return 1


holders = [Holder.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
           for node in (here, there, there)]
ray.get([holder.ping.remote() for holder in holders])
print("holding " + str(len(holders)) + " actors", flush=True)
time.sleep(600)
"""
GREEDY = "python -c " + shlex.quote(DRIVER)


def holding(conn, job_id):
    """Greedy's job once the tick recorded its three actors."""
    observed = jobs(conn)[job_id]["observed"]
    return observed is not None and observed["actors"] == 3


def test_a_job_using_more_than_it_declared_is_charged_its_use_and_named_in_others_reasons(ray, conn):
    add_group(conn, ray.address, users=("greedy", "modest"))
    greedy = submit(user="greedy", group="main", entrypoint=GREEDY, resources={"CPU": 0.5}, node_labels={"pool": "a"})
    tick_until(conn, lambda rows: holding(conn, greedy), timeout=90)
    row = jobs(conn)[greedy]
    assert row["state"] == "RUNNING"
    assert (row["observed"]["declared"], row["observed"]["used"], row["observed"]["charged"]) == (
        {"CPU": 0.5}, {"CPU": 3.5}, {"CPU": 3.5})
    assert row["observed"]["over_since"] is not None
    assert row["observed"]["nodes"] == {ray.a_id: {"CPU": 1.5}, ray.b_id: {"CPU": 2}}

    modest = submit(user="modest", group="main", entrypoint="sleep 1", resources={"CPU": 1})
    ticked = run_process("tick")
    assert ticked.status == 0 and "placed=0" in ticked.err and "observed=" not in ticked.err, ticked.err
    print("\n" + ticked.err)
    waiting = jobs(conn)[modest]
    named = f"held by job {greedy} of greedy, which uses CPU 3.5 and declared CPU 0.5"
    assert waiting["reason"] == "Resources" and named in waiting["message"], waiting["message"]
    assert "outside the queue" not in waiting["message"]
    print(f"\nmodest's job {modest}: {waiting['reason']}: {waiting['message']}")

    share = run_process("share", "--json")
    assert share.status == 0, share.err
    users = {row["user"]: row for row in json.loads(share.out)}
    assert users["greedy"]["held"] == {"CPU": 3.5}, users["greedy"]
    assert users["greedy"]["dominant_share"] == 3.5 / 4
    print(share.out)
    show = run_process("show", str(greedy))
    assert show.status == 0 and "declared" in show.out and "3 actors" in show.out, show.out
    print(show.out)
    # Stopped, its actors go with it (before Ray reports it stopped): modest's job gets the room.
    cluster_for(ray.address, 10.0).stop(row["submission_id"])
    tick_until(conn, lambda rows: rows[greedy]["state"] == "STOPPED" and rows[modest]["state"] != "PENDING", timeout=60)


def test_under_overuse_stop_a_job_over_its_declaration_past_the_grace_is_stopped_and_fails(ray, conn):
    add_group(conn, ray.address, users=("greedy",), overuse="stop", overuse_grace_s=5)
    greedy = submit(user="greedy", group="main", entrypoint=GREEDY, resources={"CPU": 0.5}, node_labels={"pool": "a"})
    tick_until(conn, lambda rows: holding(conn, greedy), timeout=90)
    over_since, said = time.monotonic(), []
    deadline = over_since + 60
    # Ticked as `python -m job tick` runs: its log lines are the ones users read.
    while (row := jobs(conn)[greedy])["state"] != "FAILED":
        assert time.monotonic() < deadline, (row["state"], row["reason"], row["message"])
        ticked = run_process("tick")
        assert ticked.status == 0, ticked.err
        said += [line for line in ticked.err.splitlines() if "event=stop_requested" in line or "event=job_finished" in line]
        time.sleep(1)
    assert time.monotonic() - over_since >= 4
    assert any("reason=OverUse" in line for line in said if "stop_requested" in line), said
    assert any("state=FAILED reason=OverUse" in line for line in said if "job_finished" in line), said
    print("\n" + "\n".join(said))
    assert row["reason"] == "OverUse", (row["reason"], row["message"])
    assert row["message"].startswith("used CPU 3.5 and declared CPU 0.5 for "), row["message"]
    assert row["message"].endswith("past the group's over-use grace of 5s"), row["message"]
    print(f"\njob {greedy}: {row['state']} {row['reason']}: {row['message']}")
    print(run_process("show", str(greedy)).out)
