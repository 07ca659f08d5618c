"""A job's bundles end to end off Ray (issue 20): the submit's checks, one line naming the field,
as `python -m job submit` and `job.api.submit` give them; stored, shown; the snapshot the tick builds
of pending and running jobs with bundles; and the intent that carries the planned nodes."""

from __future__ import annotations

import json
from datetime import UTC

import pytest
from cli_helpers import run_cli
from msgspec import UNSET
from snapshot_helpers import GROUP, NOW, job, node

from job.core.errors import BadInput
from job.core.group_snapshot import Decisions, Held, build_snapshot, held_parts
from job.core.job import PendingRow
from job.core.planner import plan
from job.core.specs import JobSpec, validated
from job.scheduler.submit import bundles_json

BASE = {"user": "alice", "group": "g", "entrypoint": "python train.py"}


@pytest.mark.parametrize("fields, message", [
    ({"bundles": []}, "bundles: give at least one bundle, a map of resource name to amount (e.g. CPU=2)"),
    ({"bundles": [{"CPU": 1}] * 65}, "bundles: at most 64 bundles, got 65"),
    ({"bundles": [{"CPU": 1}, {"CPU": 0}]},
     "bundles: bundle 2: ask for more than nothing: at least one amount above zero (e.g. CPU=1)"),
    ({"bundles": [{"CPU": -1}]}, "bundles: bundle 1: CPU: must be finite and not negative, got -1"),
    ({"bundles": [{"cpu": 1}]}, "bundles: bundle 1: unknown resource 'cpu': did you mean 'CPU'?"),
    ({"bundles": "CPU=1"}, "bundles: give at least one bundle, a map of resource name to amount (e.g. CPU=2)"),
    ({"bundles": [{"CPU": 1}], "bundle_strategy": "TIGHT"},
     "bundle_strategy: 'TIGHT' is not a strategy: use PACK, SPREAD, STRICT_PACK, STRICT_SPREAD"),
    ({"bundle_strategy": "PACK"}, "bundle_strategy: a strategy places bundles: give them too (--bundle)"),
    ({"resources": {"CPU": 0}}, "resources: ask for more than nothing: at least one amount above zero (e.g. CPU=1)"),
])
def test_bad_bundles_are_refused_in_one_line(fields, message):
    with pytest.raises(BadInput) as refused:
        validated(JobSpec, {**BASE, **fields})
    assert str(refused.value) == message


@pytest.mark.parametrize("fields, bundles, strategy, resources", [
    ({"bundles": [{"CPU": "2"}] * 2, "bundle_strategy": "STRICT_SPREAD", "resources": {"CPU": 0}},
     [{"CPU": 2}, {"CPU": 2}], "STRICT_SPREAD", {}),
    ({"bundles": [{"memory": "2GiB", "GPU": 0}]}, [{"memory": 2 * 2**30}], "PACK", {"CPU": 1}),
    ({}, None, None, {"CPU": 1}),
])
def test_good_bundles_are_read(fields, bundles, strategy, resources):
    spec = validated(JobSpec, {**BASE, **fields})
    assert (spec.bundles, spec.bundle_strategy, spec.resources) == (bundles, strategy, resources)


def _setup(capsys):
    assert run_cli(capsys, "group", "add", "g", "--ray-address", "http://127.0.0.1:8265").status == 0
    assert run_cli(capsys, "user", "set", "alice").status == 0


def test_submit_with_bundles_is_stored_and_shown(database_url, capsys):
    _setup(capsys)
    done = run_cli(capsys, "submit", "--user", "alice", "--group", "g", "--entrypoint", "python train.py",
                   "--cpus", "0", "--bundle", "2xCPU=2", "--bundle", "GPU=1,memory=2GiB",
                   "--bundle-strategy", "STRICT_SPREAD")
    assert done.status == 0, done.err
    job_id = done.out.strip()
    job = json.loads(run_cli(capsys, "show", job_id, "--json").out)
    assert job["resources"] == {} and job["bundle_strategy"] == "STRICT_SPREAD" and job["bundle_nodes"] is None
    assert job["bundles"] == [{"CPU": 2}, {"CPU": 2}, {"GPU": 1, "memory": 2 * 2**30}]
    shown = run_cli(capsys, "show", job_id).out
    assert "CPU=2; CPU=2; GPU=1,memory=2 GiB" in shown and "STRICT_SPREAD" in shown
    table = run_cli(capsys, "jobs").out
    assert "- + 2x{CPU=2} + 1x{GPU=1,memory=2 GiB} STRICT_SPREAD" in table


def test_api_submit_with_bundles(database_url, conn, capsys):
    from job.api import submit

    _setup(capsys)
    job_id = submit(user="alice", group="g", entrypoint="true", bundles=[{"CPU": 1}], conn=conn)
    row = conn.execute("SELECT resources, bundles, bundle_strategy FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == {"resources": {"CPU": 1}, "bundles": [{"CPU": 1}], "bundle_strategy": "PACK"}


@pytest.mark.parametrize("argv, message", [
    (["--bundle", "0xCPU=1"], "--bundle: '0xCPU=1': give 1 to 64 bundles of NAME=AMOUNT,..., e.g. 4xGPU=1,CPU=8"),
    (["--bundle", "65xCPU=1"], "--bundle: '65xCPU=1': give 1 to 64 bundles of NAME=AMOUNT,..., e.g. 4xGPU=1,CPU=8"),
    (["--bundle", "CPU"], "--bundle: expected [Nx]NAME=AMOUNT,..., got 'CPU'"),
    (["--bundle", "40xCPU=1", "--bundle", "30xCPU=1"], "--bundle: at most 64 bundles, got 70"),
    (["--bundle", "CPU=-2"], "bundles: bundle 1: CPU: must be finite and not negative, got '-2'"),
    (["--bundle", "CPU=1", "--bundle-strategy", "pack"],
     "bundle_strategy: 'pack' is not a strategy: use PACK, SPREAD, STRICT_PACK, STRICT_SPREAD"),
    (["--cpus", "0"], "resources: ask for more than nothing: at least one amount above zero (e.g. CPU=1)"),
])
def test_bad_bundle_options_write_nothing(database_url, conn, capsys, argv, message):
    _setup(capsys)
    done = run_cli(capsys, "submit", "--user", "alice", "--group", "g", "--entrypoint", "true", *argv)
    assert done.status == 2 and done.err.strip().endswith(message), done.err
    assert len(done.err.strip().splitlines()) == 1
    assert conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 0


def _row(ident: int, bundles: str | None = None, strategy: str | None = None) -> PendingRow:
    return PendingRow(ident, "u", '{"CPU": 0}' if bundles else '{"CPU": 1}', "{}", 0, NOW, None, None, None,
                      bundles=bundles, bundle_strategy=strategy)


def test_pending_rows_with_bundles_are_planned_whole():
    nodes = [node("a", {"CPU": 2}, {"CPU": 2}), node("b", {"CPU": 2}, {"CPU": 2})]
    pending = [_row(1, '[{"CPU": 2}, {"CPU": 2}]', "STRICT_SPREAD"), _row(2), _row(3, '[{"CPU": -1}]', "PACK")]
    snapshot, invalid = build_snapshot(GROUP, NOW, nodes, [], pending, [], {})
    assert snapshot.pending[0].bundles == [{"CPU": 2}, {"CPU": 2}]
    assert snapshot.pending[0].bundle_strategy == "STRICT_SPREAD" and snapshot.pending[1].bundles is UNSET
    assert invalid == {3: "bundles.0.CPU: Input should be greater than or equal to 0"}
    decisions = Decisions.of(plan(snapshot))
    assert [job for job, _ in decisions.placements] == [1]
    assert sorted(decisions.bundle_nodes[1]) == ["a", "b"]


def test_a_running_job_holds_its_bundles_on_their_nodes():
    nodes = [node("a", {"CPU": 2}, {"CPU": 0}), node("b", {"CPU": 2}, {"CPU": 2})]
    gang = job(1, "RUNNING", "b", {}, bundles=[{"CPU": 2}], bundle_strategy="PACK", bundle_nodes=["a"])
    snapshot, _ = build_snapshot(GROUP, NOW, nodes, [gang], [_row(2, '[{"CPU": 2}]', "PACK")], [], {})
    # Ray counts its placement group used on a: ours, not outside load.
    assert {n.id: n.outside for n in snapshot.nodes} == {"a": {}, "b": {}}
    assert snapshot.running[0].bundle_nodes == ["a"]
    assert [p["bundle_nodes"] for p in plan(snapshot).placements] == [["b"]]
    assert held_parts(gang) == [("b", {}), ("a", {"CPU": 2})]


def test_an_intent_carries_its_bundles_and_their_nodes(database_url, conn, capsys):
    from job.api import submit
    from job.store import tick_jobs

    _setup(capsys)
    gang = submit(user="alice", group="g", entrypoint="true", resources={"CPU": 0}, bundles=[{"CPU": 2}] * 2,
                  bundle_strategy="SPREAD", conn=conn)
    alone = submit(user="alice", group="g", entrypoint="true", conn=conn)
    rows = {row.id: row for row in tick_jobs.pending_jobs(conn, "g")}
    assert (rows[gang].bundles, rows[gang].bundle_strategy) == ('[{"CPU": 2.0}, {"CPU": 2.0}]', "SPREAD")
    assert (rows[alone].bundles, rows[alone].bundle_strategy) == (None, None)
    intents = {i.id: i for i in tick_jobs.commit_intents(conn, [(gang, "n1"), (alone, "n2")], "inst",
                                                         {gang: ["n1", "n2"]})}
    assert (intents[gang].bundles, intents[gang].bundle_nodes) == ([{"CPU": 2}, {"CPU": 2}], ["n1", "n2"])
    assert intents[alone].bundle_nodes is None
    assert json.loads(bundles_json(intents[gang])) == [{"resources": {"CPU": 2}, "node": "n1"},
                                                      {"resources": {"CPU": 2}, "node": "n2"}]
    active = {a.id: a for a in tick_jobs.active_jobs(conn, "g")}
    assert active[gang].bundle_nodes == ["n1", "n2"] and active[alone].bundles is None
    # Back in the queue, it keeps no planned node: the next plan chooses again.
    [moved] = tick_jobs.return_to_pending(conn, {gang: ("SUBMITTING", "SubmitRefused", "refused")}, 3)
    assert moved.state == "PENDING"
    assert conn.execute("SELECT node, bundle_nodes FROM jobs WHERE id = %s", (gang,)).fetchone() == \
        {"node": None, "bundle_nodes": None}


def test_shares_and_placement_figures_count_the_whole_footprint():
    from job.core.share import group_shares, placement_figures, totals_of

    totals = totals_of([{"resources": {"CPU": 8}}])
    [bob] = group_shares({"name": "g", "policy": "drf", "half_life_s": 0}, {"bob": 1.0}, {}, [],
                         [("bob", {"resources": {"CPU": 1}, "bundles": [{"CPU": 2}, {"CPU": 1}]})], totals)
    assert bob.held == {"CPU": 4 * 10_000} and bob.dominant_share == pytest.approx(0.5)
    running = job(9, "RUNNING", "a", {}, user_name="bob", bundles=[{"CPU": 2}], bundle_nodes=["a"])
    drf = GROUP.model_copy(update={"policy": "drf"})
    figures = placement_figures(drf, [], [running], totals, [(1, "a"), (2, "a")],
                                [_row(1, '[{"CPU": 2}]', "PACK")._replace(user_name="bob"), _row(2)._replace(user_name="bob")])
    assert figures[1]["dominant_share"] == pytest.approx(2 / 8) and figures[2]["dominant_share"] == pytest.approx(4 / 8)


def test_a_gangs_placement_event_names_its_bundles_nodes():
    from job.cli.observe import describe_event
    from job.core.share import placement_figures, totals_of

    drf = GROUP.model_copy(update={"policy": "drf"})
    figures = placement_figures(drf, [], [], totals_of([{"resources": {"CPU": 8}}]), [(1, "a"), (2, "a")],
                                [_row(1, '[{"CPU": 2}, {"CPU": 2}]', "STRICT_SPREAD"), _row(2)], bundle_nodes={1: ["a", "b"]})
    assert figures[1]["bundle_nodes"] == ["a", "b"] and "bundle_nodes" not in figures[2]
    text = describe_event({"kind": "placed", "message": "placed on node a", "details": figures[1]})
    assert text.startswith("placed on node a; bundles on nodes a, b; class default, drf: score")


def test_a_reservation_across_nodes_is_stored_read_back_and_cleared(database_url, conn, capsys):
    from datetime import datetime

    from job.api import submit
    from job.store import tick_jobs

    _setup(capsys)
    gang = submit(user="alice", group="g", entrypoint="true", resources={"CPU": 0}, bundles=[{"CPU": 2}] * 2,
                  bundle_strategy="STRICT_SPREAD", conn=conn)
    alone = submit(user="alice", group="g", entrypoint="true", conn=conn)
    now = datetime.now(UTC)
    tick_jobs.set_reservations(conn, {gang: Held("n1", bundle_nodes=("n1", "n2")), alone: Held("n2")}, now)
    rows = {row.id: row for row in tick_jobs.pending_jobs(conn, "g")}
    assert (rows[gang].reserved_node, rows[gang].reserved_bundle_nodes) == ("n1", ["n1", "n2"])
    assert (rows[alone].reserved_node, rows[alone].reserved_bundle_nodes) == ("n2", None)
    snapshot, _ = build_snapshot(GROUP, now, [node("n1", {"CPU": 4}, {"CPU": 4}), node("n2", {"CPU": 4}, {"CPU": 4})],
                                 [], list(rows.values()), [], {})
    assert {r["job"]: r for r in snapshot.reservations}[str(gang)] == {"job": str(gang), "node": "n1", "kind": "preemption",
                                                                      "bundle_nodes": ["n1", "n2"]}
    # Ended, and placed: neither keeps a reserved node.
    tick_jobs.set_reservations(conn, {gang: None}, now)
    tick_jobs.commit_intents(conn, [(alone, "n2")], "inst")
    assert conn.execute("SELECT count(*) AS n FROM jobs WHERE reserved_node IS NOT NULL OR reserved_bundle_nodes IS NOT NULL"
                        ).fetchone()["n"] == 0
