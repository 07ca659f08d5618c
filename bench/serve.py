"""Benchmark of `python -m job serve`: a scrape of /metrics and a load of the status page `/`, with
100,000 pending jobs of 1,000 users against the same with 10 jobs.

    python bench/serve.py                      # 100k pending of 1,000 users vs 10, 10 requests each
    python bench/serve.py --pending 10k --requests 20

Each database: one group of 10 nodes (recorded by 300 ticks, as the CronJob's pods would leave
them), 50 active jobs, the pending jobs with a mix of waiting reasons, and --history finished jobs
(which no read may touch). A real `serve` process with --cache 0s (every request reads PostgreSQL)
answers 10 requests of each path after one to warm up; printed: the median and the spread of the
wall time seen by the client, the statements one read sends (counted on the same code in this
process), and the server's peak RSS.

PostgreSQL: JOB_DATABASE_URL's server, else an embedded one.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from tick import fresh_database, postgres_server, size

from job.scheduler.report import GroupResult
from job.scheduler.ticks import tick_row
from job.serve.server import Source
from job.store import events, ticks

NODES = 10
ACTIVE = 50
TICKS = 300
REASONS = ["Resources", "Limit", "Priority", "NotBefore"]


def fill(url: str, pending: int, users: int, history: int) -> None:
    with psycopg.connect(url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('bench', '[{\"name\": \"c\", \"address\": \"http://ray.invalid:8265\"}]')")
        conn.execute("INSERT INTO users (name, shares) SELECT 'user' || i, 1 + i %% 3 FROM generate_series(1, %s) i",
                     (users,))
        conn.execute("INSERT INTO user_usage (group_name, user_name, usage) "
                     "SELECT 'bench', 'user' || i, i * 10.0 FROM generate_series(1, %s) i", (users,))
        conn.execute(
            """INSERT INTO jobs (user_name, group_name, entrypoint, resources, state, reason, message, submission_id,
                                 node, attempt, finished_at)
               SELECT 'user' || (1 + i %% %(users)s), 'bench', 'true', '{"CPU": 1}',
                      (ARRAY['SUCCEEDED', 'FAILED'])[1 + i %% 2], 'Succeeded', 'exit code 0', 'hist-' || i, 'node-1', 1,
                      now() - interval '1 day'
               FROM generate_series(1, %(n)s) i""", {"users": users, "n": history})
        conn.execute(
            """INSERT INTO jobs (user_name, group_name, entrypoint, resources, state, submission_id, node, attempt)
               SELECT 'user' || (1 + i %% %(users)s), 'bench', 'true', '{"CPU": 1}', 'RUNNING', 'run-' || i,
                      'node-' || (i %% %(nodes)s), 1
               FROM generate_series(1, %(n)s) i""", {"users": users, "n": ACTIVE, "nodes": NODES})
        conn.execute(
            """INSERT INTO jobs (user_name, group_name, entrypoint, resources, reason, message, submitted_at)
               SELECT 'user' || (1 + i %% %(users)s), 'bench', 'true', '{"CPU": 1}',
                      (%(reasons)s::text[])[1 + i %% 4], 'waiting', now() - make_interval(secs => %(n)s - i)
               FROM generate_series(1, %(n)s) i""", {"users": users, "n": pending, "reasons": REASONS})
        nodes = [{"id": f"node-{i}", "resources": {"CPU": 8.0, "memory": 32 * 2**30}, "free": {"CPU": 3.0}}
                 for i in range(NODES)]
        for _ in range(TICKS):
            result = GroupResult("bench", "ticked", placed=1, running=ACTIVE, seconds=0.05, nodes=nodes,
                                 steps_ms={"observe": 10.0, "reconcile": 5.0, "plan": 20.0, "commit": 3.0,
                                           "submit": 1.0})
            ticks.record(conn, [tick_row(result)])
        events.fold_counts(conn)  # as each tick round does
        conn.execute("VACUUM ANALYZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def statements(url: str) -> int:
    source = Source(url, 0)
    source.report()
    source.close()
    return source.statements


def measure(url: str, requests: int) -> dict:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "job", "serve", "--port", str(port), "--host", "127.0.0.1",
                                "--cache", "0s"], env={**os.environ, "JOB_DATABASE_URL": url},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit("serve did not start") from None
                time.sleep(0.2)
        times = {}
        for path in ("/metrics", "/"):
            urllib.request.urlopen(base + path, timeout=60).read()  # warm up
            took = []
            for _ in range(requests):
                began = time.perf_counter()
                body = urllib.request.urlopen(base + path, timeout=60).read()
                took.append((time.perf_counter() - began) * 1000)
            times[path] = (statistics.median(took), min(took), max(took), len(body))
        peak = next(line.split()[1] for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
                    if line.startswith("VmHWM:"))
        return {"times": times, "peak_mib": int(peak) / 1024}
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", default="100k")
    parser.add_argument("--users", default="1000")
    parser.add_argument("--history", default="100k", help="finished jobs in each database")
    parser.add_argument("--requests", type=int, default=10)
    args = parser.parse_args()
    cases = {"10 jobs": (10, 10), f"{size(args.pending):,} pending, {size(args.users):,} users":
             (size(args.pending), size(args.users))}
    results = {}
    with postgres_server() as server_url:
        for label, (pending, users) in cases.items():
            url = fresh_database(server_url, f"bench_serve_{pending}")
            started = time.monotonic()
            fill(url, pending, users, size(args.history))
            print(f"{label}: built in {time.monotonic() - started:.1f} s", flush=True)
            results[label] = {**measure(url, args.requests), "statements": statements(url)}
    base = next(iter(results.values()))
    print(f"\nmedian of {args.requests} requests (min-max), through HTTP, every request reading PostgreSQL:")
    for label, result in results.items():
        for path, (median, low, high, length) in result["times"].items():
            ratio = median / base["times"][path][0]
            print(f"  {label:32} {path:9} {median:7.1f} ms ({low:.1f}-{high:.1f})  {length / 1024:7.1f} KiB  "
                  f"x{ratio:.1f} vs 10 jobs")
        print(f"  {label:32} statements per read: {result['statements']}; serve's peak RSS {result['peak_mib']:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
