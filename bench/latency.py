"""As fast as Ray alone? Ray alone and the queue side by side, in one run, on a private Ray cluster.

    python bench/latency.py                              # Ray alone, then the queue of this code
    python bench/latency.py --before /tmp/before         # and the code in that folder, as it ran

The cluster is one 4-CPU node started here (job/devtools/local_ray.py), PostgreSQL a private
embedded server; both end with the run. The queue's scheduler is run as k8s/cronjob.yaml runs it:
a `python -m job loop` process started at every minute of the bench's own clock (this code: `--for
75s --every 5s`, the next pod started while the last runs; the code before: `--for 55s --every 5s`,
never two at once), so the samples fall on either side of a minute's boundary. Its Ray traffic
goes through a proxy here that counts the requests.

For each of Ray alone, this code and the code before (`--before`, a checkout whose scheduler the
same database serves), it measures:
- submit to RUNNING: one 1-CPU `sleep 1` job at a time on the idle cluster, from the submit call to
  Ray's first RUNNING (polled every 20 ms), `--samples` times a few seconds apart; p50 and p90;
- the makespan of a burst: `--burst` 1-CPU `sleep 3` jobs submitted at once, from the first submit
  to the last end Ray records;
- Ray's own CLI, as teams submit: `ray job submit --no-wait` of the same job, from the command's
  start to RUNNING, straight to Ray's dashboard (Ray alone) and through this code's gateway
  (`python -m job gateway`, alice's token in `--headers`): the CLI's own start is in both;
- for the queue, what an idle minute costs: Ray requests through the proxy and PostgreSQL
  transactions and connections (pg_stat_database) over `--idle` seconds, per minute.
The last lines are the budgets (bench/README.md): at most +0.3 s at p50 and +1 s at p90 over Ray
alone (through the gateway: over Ray alone with the same CLI), a makespan at most 1.05x Ray alone,
and an idle minute no dearer than the code before.

The machine is shared: run it once, and read its figures beside the load at the time."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import requests
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from job import api
from job.devtools.local_postgres import start_embedded, with_database
from job.devtools.local_ray import GIB, MIB, LocalRayCluster, NodeSpec
from job.store.migrations import migrate
from job.store.tokens import create_token

HERE = Path(__file__).resolve().parent.parent
BUDGET_P50_S, BUDGET_P90_S, BUDGET_MAKESPAN = 0.3, 1.0, 1.05
POLL_S = 0.02
TIMEOUT_S = 180.0
# How each code's CronJob runs the loop: (its args, whether the next pod may start while one runs).
CRON = {"this code": (["--for", "75s", "--every", "5s"], True),
        "code before": (["--for", "55s", "--every", "5s"], False)}
# The CronJob's startingDeadlineSeconds: a run held back longer than this is skipped.
STARTING_DEADLINE_S = 30.0


class CountingProxy:
    """Forwards every request to the dashboard and counts them, by path."""

    def __init__(self, target: str) -> None:
        self.counts: Counter = Counter()
        session = requests.Session()
        counts = self.counts

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                counts[self.path.split("?")[0]] += 1
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer = session.request(self.command, target + self.path, data=body or None,
                                         headers={"Content-Type": self.headers.get("Content-Type", "application/json")},
                                         timeout=60)
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_DELETE = _forward

            def log_message(self, *_) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def total(self) -> int:
        return sum(self.counts.values())


class Cron:
    """A CronJob of `python -m job loop` processes, each started at a minute of its own clock."""

    def __init__(self, code: Path, url: str, args: list[str], overlap: bool, folder: Path) -> None:
        self.code, self.url, self.args, self.overlap, self.folder = code, url, args, overlap, folder
        self.pods: list[subprocess.Popen] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        began = time.monotonic()
        minute = 0
        while not self.stopping.is_set():
            due = began + 60 * minute
            if self.stopping.wait(max(0.0, due - time.monotonic())):
                return
            if not self.overlap:
                while self.pods and self.pods[-1].poll() is None and time.monotonic() < due + STARTING_DEADLINE_S:
                    if self.stopping.wait(0.1):
                        return
                if self.pods and self.pods[-1].poll() is None:
                    minute += 1
                    continue  # skipped, as the CronJob does past its starting deadline
            env = {**os.environ, "JOB_DATABASE_URL": self.url, "JOB_LOG_FORMAT": "json", "JOB_LOG_LEVEL": "INFO",
                   "PYTHONPATH": str(self.code)}
            with open(self.folder / f"loop-{len(self.pods)}.log", "wb") as out:
                self.pods.append(subprocess.Popen([sys.executable, "-m", "job", "loop", *self.args], cwd=self.code,
                                                  stdout=out, stderr=subprocess.STDOUT, env=env))
            minute += 1

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        for pod in self.pods:
            if pod.poll() is None:
                pod.terminate()
        for pod in self.pods:
            try:
                pod.wait(30)
            except subprocess.TimeoutExpired:
                pod.kill()
                pod.wait(10)


class Bench:
    def __init__(self, stack: ExitStack, folder: Path) -> None:
        self.folder = folder
        server_url, server = start_embedded(folder / "pg")
        stack.callback(server.cleanup)
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE latency")
            # The idle minute counts the scheduler's transactions: autovacuum's, after the bursts,
            # would land in one code's minute and not the other's (this server is the bench's own).
            admin.execute("ALTER SYSTEM SET autovacuum = off")
            admin.execute("SELECT pg_reload_conf()")
        self.url = with_database(server_url, "latency")
        self.ray = LocalRayCluster(NodeSpec(cpus=4, memory_bytes=2 * GIB, object_store_bytes=100 * MIB), [])
        stack.callback(self.ray.stop)
        self.dashboard = self.ray.start()
        self.proxy = CountingProxy(self.dashboard)
        stack.callback(self.proxy.server.shutdown)
        self.http = requests.Session()
        self.db = psycopg.connect(self.url, autocommit=True, row_factory=dict_row)
        stack.callback(self.db.close)
        migrate(self.db)
        self.db.execute("INSERT INTO users (name) VALUES ('alice')")
        self.db.execute("INSERT INTO resource_groups (name, clusters, policy, use_head_node) "
                        "VALUES ('main', %s, 'fifo', true)", (Jsonb([{"name": "c", "address": self.proxy.url}]),))
        self.installation = self.db.execute("SELECT id FROM installation").fetchone()["id"]
        self.token = create_token(self.db, "alice", None)[1]
        self.gateway = ""

    # --- Ray's side --------------------------------------------------------------------------

    def ray_job(self, submission_id: str) -> dict | None:
        answer = self.http.get(f"{self.dashboard}/api/jobs/{submission_id}", timeout=30)
        return answer.json() if answer.status_code == 200 else None

    def until(self, what, timeout: float = TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while not (found := what()):
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what.__doc__}")
            time.sleep(POLL_S)
        return found

    def running(self, submission_id: str) -> float:
        """the job RUNNING in Ray"""

        def seen():
            job = self.ray_job(submission_id)
            return job is not None and job["status"] in ("RUNNING", "SUCCEEDED") and time.monotonic()

        return self.until(seen)

    def ended(self, submission_ids: list[str]) -> float:
        """every job ended in Ray: the last end, epoch seconds"""

        def ends():
            jobs = [self.ray_job(sid) for sid in submission_ids]
            done = [job for job in jobs if job is not None and job.get("end_time")]
            return len(done) == len(submission_ids) and max(job["end_time"] for job in done) / 1000

        return self.until(ends)

    # --- the two ways to submit --------------------------------------------------------------

    def submit_to_ray(self, entrypoint: str) -> str:
        submission_id = f"alone-{uuid.uuid4().hex[:12]}"
        answer = self.http.post(f"{self.dashboard}/api/jobs/", timeout=30, json={
            "entrypoint": entrypoint, "submission_id": submission_id, "entrypoint_num_cpus": 1})
        answer.raise_for_status()
        return submission_id

    def submit_to_queue(self, entrypoint: str) -> str:
        job_id = api.submit(user="alice", group="main", entrypoint=entrypoint, resources={"CPU": 1}, conn=self.db)
        return f"{self.installation}-{job_id}-1"

    def cli_to_ray(self, entrypoint: str) -> str:
        return self._ray_cli(self.dashboard, [], f"cli-{uuid.uuid4().hex[:12]}", entrypoint)

    def cli_to_gateway(self, entrypoint: str) -> str:
        given = self._ray_cli(f"{self.gateway}/groups/main",
                              ["--headers", json.dumps({"Authorization": f"Bearer {self.token}"})],
                              f"gw-{uuid.uuid4().hex[:12]}", entrypoint)
        job_id = self.db.execute("SELECT job_id FROM gateway_submissions WHERE submission_id = %s",
                                 (given,)).fetchone()["job_id"]
        return f"{self.installation}-{job_id}-1"

    def _ray_cli(self, address: str, extra: list[str], submission_id: str, entrypoint: str) -> str:
        subprocess.run([str(Path(sys.executable).parent / "ray"), "job", "submit", "--address", address, *extra,
                        "--submission-id", submission_id, "--entrypoint-num-cpus", "1", "--no-wait", "--",
                        *entrypoint.split()], check=True, capture_output=True, timeout=TIMEOUT_S)
        return submission_id

    def start_gateway(self, code: Path, stack: ExitStack) -> None:
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        out = stack.enter_context(open(self.folder / "gateway.log", "wb"))  # noqa: SIM115 - the stack closes it
        process = subprocess.Popen([sys.executable, "-m", "job", "gateway", "--host", "127.0.0.1", "--port", str(port)],
                                   cwd=code, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "JOB_DATABASE_URL": self.url, "PYTHONPATH": str(code)})
        stack.callback(process.wait, 30)
        stack.callback(process.terminate)
        self.gateway = f"http://127.0.0.1:{port}"

        def healthy():
            """the gateway answering"""
            try:
                return self.http.get(f"{self.gateway}/healthz", timeout=2).status_code == 200
            except requests.ConnectionError:
                return False

        self.until(healthy, timeout=60)

    # --- the measures ------------------------------------------------------------------------

    def latencies(self, submit, samples: int) -> list[float]:
        found = []
        for index in range(samples):
            began = time.monotonic()
            submission_id = submit("sleep 1")
            found.append(self.running(submission_id) - began)
            self.ended([submission_id])
            # Spread over the minute, whatever the cadence of a tick.
            time.sleep(1.0 + (index * 1.7) % 3)
        return found

    def makespan(self, submit, burst: int) -> float:
        began = time.time()
        ids = [submit("sleep 3") for _ in range(burst)]
        return self.ended(ids) - began

    def pg_counts(self) -> tuple[int, int]:
        self.db.execute("SELECT pg_stat_clear_snapshot()")
        row = self.db.execute("SELECT xact_commit + xact_rollback AS xacts, sessions FROM pg_stat_database "
                              "WHERE datname = current_database()").fetchone()
        return row["xacts"], row["sessions"]

    def idle(self, seconds: float) -> dict:
        """Per minute while nothing is pending and nothing runs."""
        time.sleep(2.0)  # the last ends recorded, the loop's polls of Ray over
        ray_before, (xacts_before, sessions_before) = self.proxy.total(), self.pg_counts()
        time.sleep(seconds)
        # pg_stat_database takes up to a second to see a transaction.
        time.sleep(1.0)
        ray_after, (xacts_after, sessions_after) = self.proxy.total(), self.pg_counts()
        per_minute = 60.0 / seconds
        return {"ray_requests": round((ray_after - ray_before) * per_minute, 1),
                # Less this bench's own two transactions (the snapshot's clear and read).
                "pg_transactions": round((xacts_after - xacts_before - 2) * per_minute, 1),
                "pg_connections": round((sessions_after - sessions_before) * per_minute, 1)}

    def run_queue(self, name: str, code: Path, args: argparse.Namespace) -> dict:
        loop_args, overlap = CRON[name]
        cron = Cron(code, self.url, loop_args, overlap,
                    self.folder / name.replace(" ", "-"))
        try:
            # The first pod's start-up (imports, migrations checked) is not a submit's to pay.
            time.sleep(5.0)
            latencies = self.latencies(self.submit_to_queue, args.samples)
            makespan = self.makespan(self.submit_to_queue, args.burst)
            cli = None
            if name == "this code":
                with ExitStack() as gateway:
                    self.start_gateway(code, gateway)
                    cli = self.latencies(self.cli_to_gateway, args.samples)
            idle = self.idle(args.idle)
        finally:
            cron.stop()
        return {"latencies": latencies, "makespan": makespan, "cli": cli, "idle": idle, "pods": len(cron.pods)}


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(results: dict) -> None:
    alone = results["Ray alone"]
    base50, base90 = p(alone["latencies"], 0.5), p(alone["latencies"], 0.9)
    print(f"{'':12} {'p50':>7} {'p90':>7} {'max':>7} {'makespan':>9} {'ratio':>6}   idle per minute")
    for name, figures in results.items():
        lat = figures["latencies"]
        idle = figures.get("idle")
        idle_text = "" if idle is None else (f"Ray {idle['ray_requests']:g} requests, PostgreSQL "
                                             f"{idle['pg_transactions']:g} transactions, {idle['pg_connections']:g} connections")
        print(f"{name:12} {p(lat, 0.5):6.2f}s {p(lat, 0.9):6.2f}s {max(lat):6.2f}s {figures['makespan']:8.1f}s "
              f"{figures['makespan'] / alone['makespan']:5.2f}x   {idle_text}")
    figures = results["this code"]
    over50, over90 = p(figures["latencies"], 0.5) - base50, p(figures["latencies"], 0.9) - base90
    ratio = figures["makespan"] / alone["makespan"]
    verdicts = [("p50 overhead", f"{over50:+.2f} s", f"+{BUDGET_P50_S} s", over50 <= BUDGET_P50_S),
                ("p90 overhead", f"{over90:+.2f} s", f"+{BUDGET_P90_S} s", over90 <= BUDGET_P90_S),
                ("makespan", f"{ratio:.2f}x", f"{BUDGET_MAKESPAN}x", ratio <= BUDGET_MAKESPAN)]
    if "code before" in results:
        before, now = results["code before"]["idle"], figures["idle"]
        verdicts.append(("idle minute", f"Ray {now['ray_requests']:g}, PostgreSQL {now['pg_transactions']:g}",
                         f"<= before's Ray {before['ray_requests']:g}, PostgreSQL {before['pg_transactions']:g}",
                         now["ray_requests"] <= before["ray_requests"] * 1.1
                         and now["pg_transactions"] <= before["pg_transactions"] * 1.1))
    cli, alone_cli = figures.get("cli"), alone.get("cli")
    if cli and alone_cli:
        print(f"ray job submit: Ray alone p50 {p(alone_cli, 0.5):.2f}s p90 {p(alone_cli, 0.9):.2f}s, "
              f"through the gateway p50 {p(cli, 0.5):.2f}s p90 {p(cli, 0.9):.2f}s")
        cli50, cli90 = p(cli, 0.5) - p(alone_cli, 0.5), p(cli, 0.9) - p(alone_cli, 0.9)
        verdicts += [("gateway p50", f"{cli50:+.2f} s", f"+{BUDGET_P50_S} s", cli50 <= BUDGET_P50_S),
                     ("gateway p90", f"{cli90:+.2f} s", f"+{BUDGET_P90_S} s", cli90 <= BUDGET_P90_S)]
    for what, value, budget, held in verdicts:
        print(f"{what:13} {value:>28}  budget {budget:<44} {'within' if held else 'OVER'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of the code before, run as its CronJob ran it")
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of the idle measure")
    args = parser.parse_args()
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="latency-", dir="/tmp") as folder, ExitStack() as stack:
        bench = Bench(stack, Path(folder))
        results["Ray alone"] = {"latencies": bench.latencies(bench.submit_to_ray, args.samples),
                                "makespan": bench.makespan(bench.submit_to_ray, args.burst),
                                "cli": bench.latencies(bench.cli_to_ray, args.samples)}
        print(json.dumps({"Ray alone": results["Ray alone"]}), flush=True)
        for name, code in (("code before", args.before), ("this code", HERE)):
            if code is None:
                continue
            (Path(folder) / name.replace(" ", "-")).mkdir()
            results[name] = bench.run_queue(name, code.resolve(), args)
            print(json.dumps({name: results[name]}), flush=True)
    report(results)


if __name__ == "__main__":
    main()
