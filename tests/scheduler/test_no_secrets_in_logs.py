"""No secret of a job in the scheduler's log lines: the values of its runtime_env's env_vars never
appear, at any level, whether Ray runs the job or its submission is refused."""

from __future__ import annotations

import time

import pytest

from job import log
from job.api import submit
from job.cli.scheduler import tick_config
from job.scheduler import tick

pytestmark = pytest.mark.ray

SECRET = "s3cr3t-token-7d1f"


def tick_until_final(conn, ids, timeout=90):
    deadline = time.monotonic() + timeout
    while True:
        tick.run_tick(tick_config(), "main")
        states = {row["state"] for row in conn.execute("SELECT state FROM jobs WHERE id = ANY(%s)", (ids,))}
        if states <= {"SUCCEEDED", "FAILED", "STOPPED", "CANCELLED"}:
            return
        assert time.monotonic() < deadline, states
        time.sleep(0.5)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_env_var_values_never_reach_the_log(ray_cluster, conn, capsys, log_format):
    log.configure(log_format, "DEBUG")
    try:
        conn.execute("INSERT INTO resource_groups (name, clusters, max_attempts) "
                     "VALUES ('main', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %s::text)), 1)",
                     (ray_cluster.address,))
        conn.execute("INSERT INTO users (name) VALUES ('alice')")
        ran = submit(user="alice", group="main", entrypoint="true", resources={"CPU": 0.1},
                     runtime_env={"env_vars": {"TOKEN": SECRET}})
        # A row written around submit, with a runtime_env the submission check refuses.
        refused = submit(user="alice", group="main", entrypoint="true", resources={"CPU": 0.1})
        conn.execute("""UPDATE jobs SET runtime_env = jsonb_build_object(
                            'env_vars', jsonb_build_object('TOKEN', %s::text, 'N', 7)) WHERE id = %s""", (SECRET, refused))
        tick_until_final(conn, [ran, refused])
        rows = {row["id"]: row for row in conn.execute("SELECT * FROM jobs")}
        assert rows[ran]["state"] == "SUCCEEDED" and rows[refused]["state"] == "FAILED"
        output = capsys.readouterr().err
        assert "event" in output and "placed" in output  # the log was captured
        assert SECRET not in output
    finally:
        log.configure("text", "INFO")
