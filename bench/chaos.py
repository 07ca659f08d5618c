"""Chaos, scripted: one `python -m job loop` process schedules 20 jobs on a Ray cluster of its own
while its PostgreSQL's postmaster is killed (SIGKILL) and started again, then Ray's dashboard is
killed and started again, then a worker node is killed under a running job.

    python bench/chaos.py          # one line per fault, then a JSON summary on the last line

PostgreSQL is a private embedded server (its data in a temporary folder), Ray a head and two
workers started here (never a shared cluster: its dashboard is killed), both ended at the end with
every process this script started. What it checks: every job succeeded exactly once (one SUCCEEDED
submission each in Ray's history, one completed run each in the jobs' own log), the loop is the
same process from start to end and exits 0, no traceback. What it measures per fault: the stall,
from the fault to the loop's first successful tick after it (for the worker, to the killed job's
requeue and its new placement).

The worker's victim is a job whose run has just begun, by the line its entrypoint writes when it
starts, not the first our rows show RUNNING on that worker: right after the dashboard's fault that
is the batch Ray ran while the loop could not see it, seen to end SUCCEEDED (rightly never
requeued) within a second of the kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path

import psutil
import psycopg
import requests
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from job import api
from job.devtools.local_postgres import start_embedded, with_database
from job.devtools.local_ray import GIB, MIB, LocalRayCluster, NodeSpec
from job.store.migrations import migrate

JOBS = 20
RUN_S = 4  # each job's sleep
DOWN_S = 5.0  # how long the postmaster and the dashboard stay dead
# The loop's window, and the bound of each wait: the faults take about 200 s on a slow machine.
TIMEOUT_S = 300.0
# How much of its run the worker's victim has left at the kill, at least. A job supervisor outlives
# its raylet until its core worker checks on it (each second; seen here: up to 1.2 s), and the
# entrypoint its supervisor until Ray's watcher of it checks (each second): a run that ends before
# its supervisor succeeds, rightly never requeued, and one that ends after it completes unseen.
AHEAD_S = 3.0
HEAD = NodeSpec(cpus=1, memory_bytes=1 * GIB, object_store_bytes=100 * MIB)
WORKERS = [NodeSpec(cpus=2, labels={"pool": pool}, memory_bytes=1 * GIB, object_store_bytes=100 * MIB) for pool in "ab"]


class Chaos:
    def __init__(self, stack: ExitStack, folder: Path):
        self.folder = folder
        server_url, self.server = start_embedded(folder / "pg")
        stack.callback(self.server.cleanup)
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE chaos")
        self.url = with_database(server_url, "chaos")
        self.ray = LocalRayCluster(HEAD, WORKERS)
        self.leftovers: list[psutil.Process] = []
        stack.callback(self._end_leftovers)
        stack.callback(self.ray.stop)
        self.ray.start()
        self.log = folder / "loop.log"
        self.runs = folder / "runs.log"
        self.starts = folder / "starts.log"
        self.loop: subprocess.Popen | None = None
        stack.callback(self._end_loop)

    # --- the world ---------------------------------------------------------------------------

    def queue(self) -> list[int]:
        with psycopg.connect(self.url, autocommit=True, row_factory=dict_row) as conn:
            migrate(conn)
            conn.execute("INSERT INTO users (name) VALUES ('alice')")
            conn.execute("INSERT INTO resource_groups (name, clusters, policy) VALUES ('chaos', %s, 'fifo')",
                         (Jsonb([{"name": "c", "address": self.ray.dashboard_url}]),))
        # A run says when it starts; a run that completes says so, a run killed with its node does not.
        entrypoint = (f"echo \"$JOB_ID $JOB_ATTEMPT $(date +%s.%N)\" >> {self.starts} && "
                      f"sleep {RUN_S} && echo \"$JOB_ID $JOB_ATTEMPT\" >> {self.runs}")
        return [api.submit(user="alice", group="chaos", entrypoint=entrypoint, resources={"CPU": 1},
                           database_url=self.url) for _ in range(JOBS)]

    def start_loop(self) -> None:
        env = {**os.environ, "JOB_DATABASE_URL": self.url, "JOB_LOG_FORMAT": "json", "JOB_LOG_LEVEL": "INFO"}
        with open(self.log, "wb") as out:
            self.loop = subprocess.Popen([sys.executable, "-m", "job", "loop", "--for", f"{TIMEOUT_S:.0f}s",
                                          "--every", "1s"], stdout=out, stderr=subprocess.STDOUT, env=env)

    def lines(self) -> list[dict]:
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                found.append({"event": "not_json", "text": line})
        return found

    def states(self) -> dict[int, dict]:
        """The jobs' rows; {} while the database does not answer."""
        try:
            with psycopg.connect(self.url, row_factory=dict_row, connect_timeout=2) as conn:
                return {row["id"]: row for row in conn.execute("SELECT id, state, node, attempt FROM jobs")}
        except psycopg.OperationalError:
            return {}

    def wait(self, what, timeout: float = TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while not (found := what()):
            if self.loop.poll() is not None:
                raise SystemExit(f"the loop ended (rc={self.loop.returncode}) while waiting for {what.__doc__}")
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what.__doc__}")
            time.sleep(0.2)
        return found

    def succeeded(self, count: int) -> None:
        self.wait(lambda: sum(row["state"] == "SUCCEEDED" for row in self.states().values()) >= count)

    def first_tick_after(self, moment: float) -> float:
        def ticked() -> float | None:
            """a successful tick after the fault"""
            times = [_epoch(line["ts"]) for line in self.lines() if line.get("event") == "group_ticked"]
            return next((t for t in times if t > moment), None)

        return self.wait(ticked)

    # --- the faults --------------------------------------------------------------------------

    def kill_postmaster(self) -> dict:
        self.succeeded(3)
        postmaster = psutil.Process(self.server.get_pid())
        began = time.time()
        postmaster.kill()
        postmaster.wait(10)
        time.sleep(DOWN_S)
        self.server.ensure_postgres_running()
        back = time.time()
        return {"fault": "postmaster killed", "down_s": round(back - began, 2),
                "stall_s": round(self.first_tick_after(began) - began, 2)}

    def kill_dashboard(self) -> dict:
        self.succeeded(8)
        [dashboard] = [p for p in self.ray.processes() if any(part.endswith("dashboard/dashboard.py") for part in _cmdline(p))]
        command, env, cwd = dashboard.cmdline(), dashboard.environ(), dashboard.cwd()
        children = dashboard.children(recursive=True)
        began = time.time()
        # SIGTERM: `ray start --block` ends the whole head when one of its processes dies of any
        # other signal; its module processes go with it.
        dashboard.terminate()
        dashboard.wait(30)
        for child in children:
            if child.is_running():
                child.kill()
        time.sleep(DOWN_S)
        with open(self.folder / "dashboard.out", "ab") as out:
            again = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.leftovers.append(psutil.Process(again.pid))
        back = time.time()
        return {"fault": "dashboard killed", "down_s": round(back - began, 2),
                "stall_s": round(self.first_tick_after(back) - began, 2)}

    def kill_worker(self) -> dict:
        b = self._node_id("b")
        [start] = [p for p in self.ray.processes() if "start" in _cmdline(p) and "pool=b" in _cmdline(p)]
        [raylet] = [p for p in start.children(recursive=True) if _cmdline(p)[:1] and _cmdline(p)[0].endswith("/raylet")]
        self.leftovers.extend(self.ray.processes())

        def begun_on_b() -> int | None:
            """a job on worker b whose run has just begun"""
            fresh = self._started_since(time.time() - (RUN_S - AHEAD_S))
            return next((i for i, row in self.states().items() if row["node"] == b and (i, row["attempt"]) in fresh), None)

        victim = self.wait(begun_on_b)
        began = time.time()
        raylet.kill()

        def requeued_and_placed() -> tuple[float, float] | None:
            """the killed job requeued and placed again"""
            lines = [line for line in self.lines() if line.get("job") == victim]
            requeued = next((_epoch(line["ts"]) for line in lines if line["event"] == "requeued"), None)
            placed = next((_epoch(line["ts"]) for line in lines if line["event"] == "placed" and line.get("attempt") == 2), None)
            ended = next((line for line in lines if line["event"] == "job_finished"), None)
            if requeued is None and ended is not None:
                raise SystemExit(f"the killed job ended before its node did: {json.dumps(ended)}")
            return (requeued, placed) if requeued and placed else None

        requeued, placed = self.wait(requeued_and_placed)
        return {"fault": "worker killed", "job": victim, "requeued_after_s": round(requeued - began, 2),
                "stall_s": round(placed - began, 2)}

    def _started_since(self, moment: float) -> set[tuple[int, int]]:
        """The (job, attempt) of the runs that started after `moment` (epoch seconds)."""
        if not self.starts.exists():
            return set()
        # A line read while it is written may be cut short: it counts once whole.
        runs = (line.split() for line in self.starts.read_text().splitlines())
        return {(int(run[0]), int(run[1])) for run in runs if len(run) == 3 and float(run[2]) > moment}

    def _node_id(self, pool: str) -> str:
        nodes = requests.get(f"{self.ray.dashboard_url}/api/v0/nodes", params={"detail": "true", "limit": 100},
                             timeout=10).json()["data"]["result"]["result"]
        return next(n["node_id"] for n in nodes if (n.get("labels") or {}).get("pool") == pool and n["state"] == "ALIVE")

    # --- the end -----------------------------------------------------------------------------

    def finish(self, ids: list[int], pid: int) -> dict:
        self.wait(lambda: all(row["state"] in ("SUCCEEDED", "FAILED", "STOPPED", "CANCELLED")
                              for row in self.states().values()))
        same = self.loop.poll() is None and self.loop.pid == pid
        self.loop.send_signal(signal.SIGTERM)
        rc = self.loop.wait(60)
        lines = self.lines()
        prefix = _installation(self.url) + "-"
        succeeded: dict[int, int] = {}
        for details in requests.get(f"{self.ray.dashboard_url}/api/jobs/", timeout=30).json():
            sid = details.get("submission_id") or ""
            if sid.startswith(prefix) and details["status"] == "SUCCEEDED":
                succeeded[int(sid.split("-")[1])] = succeeded.get(int(sid.split("-")[1]), 0) + 1
        runs = [int(line.split()[0]) for line in self.runs.read_text().splitlines()]
        states = self.states()
        return {
            "jobs": len(ids), "succeeded": sum(row["state"] == "SUCCEEDED" for row in states.values()),
            "succeeded_once_in_ray": sum(succeeded.get(i) == 1 for i in ids),
            "completed_runs": len(runs), "jobs_run_to_completion_once": sum(runs.count(i) == 1 for i in ids),
            "same_loop_process": same, "loop_rc": rc,
            "loop_finished": [line for line in lines if line.get("event") == "loop_finished"],
            "database_unavailable_lines": sum(line.get("event") == "database_unavailable" for line in lines),
            "tracebacks": sum("Traceback" in line.get("text", "") for line in lines),
            "not_json": [line["text"] for line in lines if line.get("event") == "not_json"][:5],
        }

    def _end_loop(self) -> None:
        if self.loop is not None and self.loop.poll() is None:
            self.loop.kill()
            self.loop.wait(10)

    def _end_leftovers(self) -> None:
        for process in self.leftovers:
            try:
                for p in [*process.children(recursive=True), process]:
                    p.kill()
            except psutil.NoSuchProcess:
                pass


def _cmdline(process: psutil.Process) -> list[str]:
    """Its command line; none for a process that ended since it was listed (Ray's workers come and go)."""
    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


def _epoch(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _installation(url: str) -> str:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT id FROM installation").fetchone()[0]


def run() -> dict:
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="chaos-", dir="/tmp") as folder, ExitStack() as stack:
        chaos = Chaos(stack, Path(folder))
        ids = chaos.queue()
        chaos.start_loop()
        pid = chaos.loop.pid
        faults = []
        for fault in (chaos.kill_postmaster, chaos.kill_dashboard, chaos.kill_worker):
            faults.append(fault())
            print(json.dumps(faults[-1]), flush=True)
        summary = chaos.finish(ids, pid)
    return {**summary, "faults": faults, "seconds": round(time.monotonic() - began, 1)}


if __name__ == "__main__":
    print(json.dumps(run()))
