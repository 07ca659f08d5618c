"""Exactly once, where answers get lost: a submit whose answer never came is sent again under the
same submission id (never as a new attempt), two ticks never charge one interval twice, and a
group with jobs in its Ray cluster cannot be moved to another one."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from cli_helpers import run_cli
from psycopg.types.json import Jsonb

from job.api import submit
from job.cli.scheduler import tick_config
from job.core.usage import charge_usage
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.store import groups


def add_group(conn, address, name="main", **options):
    columns = {"name": name, "clusters": Jsonb([{"name": "c", "address": address}]), "policy": "drf", "selector": "dispersed",
               "half_life_s": 0, **options}
    conn.execute(f"INSERT INTO resource_groups ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
                 list(columns.values()))
    conn.execute("INSERT INTO users (name) VALUES ('alice') ON CONFLICT DO NOTHING")


def job_row(conn, job_id) -> dict:
    return conn.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()


def ray_submissions_of(address: str, submission_prefix: str) -> list[str]:
    """Every submission id in Ray's whole job history that starts with the prefix."""
    return sorted(details["submission_id"] for details in requests.get(f"{address}/api/jobs/", timeout=30).json()
                  if (details.get("submission_id") or "").startswith(submission_prefix))


class HoldingProxy:
    """An HTTP proxy in front of the Ray dashboard that, while `holding` is set, keeps every job
    submission (POST /api/jobs/) to itself until `release()`, then forwards it: a request whose
    answer the client stopped waiting for, and which lands later."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.holding = threading.Event()
        self.released = threading.Event()
        self.held = 0
        self.forwarded_after_hold: list[int] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                held = method == "POST" and self.path == "/api/jobs/" and proxy.holding.is_set()
                if held:
                    proxy.held += 1
                    proxy.released.wait(timeout=120)
                answer = requests.request(method, proxy.upstream + self.path, data=body, timeout=60,
                                          headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                if held:
                    proxy.forwarded_after_hold.append(answer.status_code)
                try:
                    self.send_response(answer.status_code)
                    self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                    self.send_header("Content-Length", str(len(answer.content)))
                    self.end_headers()
                    self.wfile.write(answer.content)
                except OSError:
                    pass  # the client gave up waiting: the point of holding

            def do_GET(self):
                self._forward("GET")

            def do_POST(self):
                self._forward("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def release(self) -> None:
        self.holding.clear()
        self.released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(ray_cluster):
    holding = HoldingProxy(ray_cluster.address)
    yield holding
    holding.close()


@pytest.mark.ray
def test_a_submit_whose_answer_was_lost_and_lands_later_runs_once(ray_cluster, proxy, conn, database_url):
    add_group(conn, proxy.address)
    job_id = submit(user="alice", group="main", entrypoint="true", resources={"CPU": 0.5})
    # A short client timeout, so that the held submission times out in the client at once.
    config = TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=1.0)

    proxy.holding.set()
    [first] = tick.run_tick(config, "main")
    assert first.status == "failed" and "unreachable" in first.cause  # the submit's answer never came
    assert proxy.held >= 1
    row = job_row(conn, job_id)
    assert (row["state"], row["attempt"]) == ("SUBMITTING", 1)

    # The next tick does not find it in Ray (the request is still held) and sends it again,
    # under the same submission id; this time the answer comes.
    proxy.holding.clear()
    tick.run_tick(config, "main")
    row = job_row(conn, job_id)
    assert row["state"] in ("SUBMITTED", "RUNNING", "SUCCEEDED") and row["attempt"] == 1

    # The held requests land now: Ray refuses them as duplicates instead of running a second job.
    proxy.release()
    deadline = time.monotonic() + 60
    while len(proxy.forwarded_after_hold) < proxy.held:
        assert time.monotonic() < deadline, "the held submissions were not forwarded"
        time.sleep(0.2)
    assert all(status != 200 for status in proxy.forwarded_after_hold)
    while job_row(conn, job_id)["state"] != "SUCCEEDED":
        assert time.monotonic() < deadline, job_row(conn, job_id)
        tick.run_tick(config, "main")
        time.sleep(0.5)
    installation = conn.execute("SELECT id FROM installation").fetchone()["id"]
    assert ray_submissions_of(ray_cluster.address, f"{installation}-{job_id}-") == [f"{installation}-{job_id}-1"]


@pytest.mark.ray
def test_a_tick_with_a_stale_copy_of_its_group_charges_each_interval_once(ray_cluster, conn):
    add_group(conn, ray_cluster.address, policy="fairshare", half_life_s=600)
    job_id = submit(user="alice", group="main", entrypoint="sleep 60", resources={"CPU": 1})
    config = tick_config()
    deadline = time.monotonic() + 90
    while job_row(conn, job_id)["state"] != "RUNNING":
        assert time.monotonic() < deadline, job_row(conn, job_id)
        tick.run_tick(config, "main")
        time.sleep(0.5)
    try:
        # A copy of the group read before the next tick, as a second tick (a manual one during
        # the CronJob's loop) would have read it before waiting for the lock.
        stale = groups.get_group(conn, "main")
        installation = groups.installation_id(conn)
        tick.run_tick(config, "main")
        before = conn.execute("SELECT usage FROM user_usage WHERE user_name = 'alice'").fetchone()["usage"]
        charged_from = groups.get_group(conn, "main").usage_charged_at

        [result] = [tick.tick_group(config, stale, installation)]
        assert result.status == "ticked"
        after = conn.execute("SELECT usage FROM user_usage WHERE user_name = 'alice'").fetchone()["usage"]
        charged_to = groups.get_group(conn, "main").usage_charged_at
        # Alice held CPU 1 of the workers' 4 (a dominant share of 0.25) from the last charge on,
        # and is charged that interval once.
        elapsed = (charged_to - charged_from).total_seconds()
        assert elapsed > 0
        assert after == pytest.approx(charge_usage(before, 0.25, elapsed, 600), rel=1e-9)
    finally:
        from job.adapters.ray_cluster import cluster_for

        cluster_for(ray_cluster.address, 10.0).stop(job_row(conn, job_id)["submission_id"])


def test_a_group_with_active_jobs_cannot_move_to_another_ray_cluster(conn, capsys):
    add_group(conn, "http://127.0.0.1:8265", name="gpu")
    job_id = submit(user="alice", group="gpu", entrypoint="true")
    conn.execute("UPDATE jobs SET state = 'RUNNING', attempt = 1, submission_id = 'x-1-1', node = 'n1' WHERE id = %s",
                 (job_id,))

    moved = run_cli(capsys, "group", "set", "gpu", "--ray-address", "http://other:8265")
    assert moved.status == 2
    assert moved.err == ("error: group 'gpu' has 1 active job(s) in cluster c: use --remove-ray-address, which takes "
                         "no new job there and drops the cluster once they end\n")
    assert [c.address for c in groups.get_group(conn, "gpu").clusters] == ["http://127.0.0.1:8265"]

    # Other options change as usual while jobs run.
    assert run_cli(capsys, "group", "set", "gpu", "--policy", "fifo").status == 0
    conn.execute("UPDATE jobs SET state = 'SUCCEEDED', finished_at = now() WHERE id = %s", (job_id,))
    assert run_cli(capsys, "group", "set", "gpu", "--ray-address", "http://other:8265").status == 0
    assert [c.address for c in groups.get_group(conn, "gpu").clusters] == ["http://other:8265"]
