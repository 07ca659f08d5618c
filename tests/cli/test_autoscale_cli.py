"""`group add/set --autoscale --node-type` on a real PostgreSQL: what is stored and shown, and bad
input refused with one line naming the field, exit status 2, and nothing changed."""

from __future__ import annotations

import json

import pytest
from cli_helpers import database_contents, run_cli


def test_node_types_and_autoscale_are_stored_and_shown(database_url, capsys):
    added = run_cli(capsys, "group", "add", "burst", "--ray-address", "http://127.0.0.1:8265", "--autoscale", "on",
                    "--node-type", "cpu=CPU:4,memory:16GiB:max=10", "--node-type", "gpu=CPU:8,GPU:1@pool=gpu:max=2")
    assert added.status == 0, added.err
    group = json.loads(run_cli(capsys, "group", "show", "burst", "--json").out)
    assert group["autoscale"] is True
    assert group["node_types"] == [
        {"name": "cpu", "resources": {"CPU": 4, "memory": 16 * 2**30}, "labels": {}, "min": 0, "max": 10},
        {"name": "gpu", "resources": {"CPU": 8, "GPU": 1}, "labels": {"pool": "gpu"}, "min": 0, "max": 2},
    ]
    shown = run_cli(capsys, "group", "show", "burst").out
    assert "cpu=CPU:4,memory:17179869184:max=10 gpu=CPU:8,GPU:1@pool=gpu:max=2" in shown
    # `set` replaces the list, and leaves autoscale as it was.
    assert run_cli(capsys, "group", "set", "burst", "--node-type", "big=CPU:64:max=1").status == 0
    group = json.loads(run_cli(capsys, "group", "show", "burst", "--json").out)
    assert group["autoscale"] is True and [t["name"] for t in group["node_types"]] == ["big"]
    assert run_cli(capsys, "group", "set", "burst", "--autoscale", "off").status == 0
    assert json.loads(run_cli(capsys, "group", "show", "burst", "--json").out)["autoscale"] is False


BAD_INPUT = [
    (["group", "add", "g2", "--ray-address", "http://h:1", "--autoscale", "on"],
     "node_types: an http:// group that autoscales needs its node types (--node-type)"),
    (["group", "add", "g2", "--ray-address", "http://h:1", "--autoscale", "yes please"],
     "autoscale: 'yes please': use on or off"),
    (["group", "add", "g2", "--ray-address", "http://h:1", "--node-type", "gpu=CPU:8"],
     "node_types: 'gpu=CPU:8': ends with :max=N"),
    (["group", "add", "g2", "--ray-address", "raycluster://ml/shared", "--node-type", "gpu=CPU:8:max=1"],
     "node_types: a raycluster:// group's node types are read from its RayCluster"),
    (["group", "set", "main", "--node-type", "gpu=GPU:-1:max=1"], "node_types: node type 'gpu': resources: GPU: must be finite"),
    (["group", "add", "g2", "--ray-address", "http://127.0.0.1:8265", "--autoscale", "on", "--node-type", "a=CPU:1:max=1"],
     "group 'main' already autoscales the Ray cluster http://127.0.0.1:8265: Ray keeps one demand per cluster"),
    (["group", "set", "other", "--autoscale", "on", "--node-type", "a=CPU:1:max=1", "--ray-address", "http://127.0.0.1:8265"],
     "group 'main' already autoscales"),
]


@pytest.mark.parametrize("argv,message", BAD_INPUT, ids=[" ".join(argv[-2:]) for argv, _ in BAD_INPUT])
def test_bad_autoscale_options_are_refused_and_nothing_changes(database_url, conn, capsys, argv, message):
    assert run_cli(capsys, "group", "add", "main", "--ray-address", "http://127.0.0.1:8265", "--autoscale", "on",
                   "--node-type", "cpu=CPU:4:max=2").status == 0
    assert run_cli(capsys, "group", "add", "other", "--ray-address", "http://127.0.0.1:9265").status == 0
    before = database_contents(conn)
    result = run_cli(capsys, *argv)
    assert result.status == 2, (result.out, result.err)
    assert message in result.err
    assert result.err.startswith("error: ") and result.err.count("\n") == 1
    assert database_contents(conn) == before


def test_node_types_written_around_the_cli_fail_that_group_only(database_url, conn):
    from job.cli.scheduler import tick_config
    from job.scheduler import tick
    from job.settings import settings

    conn.execute("INSERT INTO resource_groups (name, clusters, autoscale, node_types) VALUES "
                 "('broken', '[{\"name\": \"c\", \"address\": \"http://127.0.0.1:9\"}]', true,"
                 " '[{\"name\": \"x\", \"resources\": {\"CPU\": -1}, \"max\": 1}]')")
    settings.cache_clear()
    [result] = tick.run_tick(tick_config(), "broken", dry_run=True)
    assert result.status == "failed"
    # Refused before any call to Ray (nothing listens at its address).
    assert result.cause == "group broken: node_types: node type 'x': resources: CPU: must be finite and not negative, got -1"
