"""Benchmark of the tick on a real PostgreSQL and a real local Ray cluster.

    python bench/tick.py                       # 1k, 10k and 100k pending jobs, then 50 submissions
    python bench/tick.py --sizes 1k,10k --ticks 5

Part 1: for each size, a fresh database holding that many pending jobs of 1,000 users (each asking
CPU 1, so a handful fit the cluster and the rest wait; the ones placed sleep through the whole
measurement, so that no Ray driver starts or ends while ticks are timed). Several ticks run; the first one writes every
job's first waiting reason, the later ones are the steady state. Printed per size: the median time
of each step, the time outside Ray calls (reconcile, plan, commit, and the database part of the
observe step), and the SQL statements per tick.

Part 2: how fast the tick submits 50 jobs that all fit, against a bare JobSubmissionClient loop
submitting 50 equivalent jobs (same resources, pinned the same way) in the same run.

PostgreSQL: JOB_DATABASE_URL's server, else an embedded one. Ray: RAY_ADDRESS, else a head and two
workers started here and stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from job import log  # noqa: E402
from job.devtools.local_postgres import start_embedded, with_database  # noqa: E402
from job.store.migrations import migrate  # noqa: E402
from job.scheduler.config import TickConfig  # noqa: E402
from job.scheduler.tick import run_tick  # noqa: E402

USERS = 1000


def size(text: str) -> int:
    text = text.strip().lower()
    return int(float(text[:-1]) * 1000) if text.endswith("k") else int(text)


def fresh_database(server_url: str, name: str) -> str:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = with_database(server_url, name)
    with psycopg.connect(url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        migrate(conn)
    return url


def fill(url: str, address: str, pending: int, cpu: float, entrypoint: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO resource_groups (name, ray_address, policy, selector, half_life_s)"
                     " VALUES ('bench', %s, 'fairshare', 'dispersed', 3600)", (address,))
        conn.execute("INSERT INTO users (name, shares) SELECT 'user' || i, 1 + i %% 3 FROM generate_series(1, %s) i", (USERS,))
        conn.execute(
            """INSERT INTO jobs (user_name, group_name, entrypoint, resources, priority, submitted_at)
               SELECT 'user' || (1 + i %% %s), 'bench', %s, jsonb_build_object('CPU', %s::float8), i %% 3,
                      now() - make_interval(secs => %s - i)
               FROM generate_series(1, %s) i""",
            (USERS, entrypoint, cpu, pending, pending),
        )
        # As autovacuum would soon: without it the first tick also pays for PostgreSQL setting hint
        # bits on 100k freshly inserted rows, which is the insert's cost, not the tick's.
        conn.execute("VACUUM ANALYZE jobs")


def stop_all(url: str, address: str) -> None:
    """Stop what the size's ticks started, and wait until Ray is done with it."""
    from job.adapters.ray_cluster import cluster_for

    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:
        rows = conn.execute("SELECT submission_id FROM jobs WHERE state IN ('SUBMITTING', 'SUBMITTED', 'RUNNING')").fetchall()
    for row in rows:
        cluster_for(address, 10.0).stop(row["submission_id"])
    wait_finished(address, [row["submission_id"] for row in rows])


def bench_ticks(server_url: str, address: str, sizes: list[int], ticks: int) -> None:
    print(f"\n== tick over N pending jobs ({USERS} users; medians of {ticks} steady ticks) ==")
    header = f"{'pending':>8} {'first tick s':>12} {'tick s':>7} {'outside Ray s':>13} {'observe':>8} {'reconcile':>9} " \
             f"{'plan':>6} {'commit':>7} {'submit':>7} {'SQL/tick':>8}"
    print(header)
    for pending in sizes:
        url = fresh_database(server_url, f"bench_tick_{pending}")
        fill(url, address, pending, cpu=1, entrypoint="sleep 600")
        # The first ticks write the jobs' first waiting reasons, a bounded number per tick; the
        # steady state starts with the first tick that has none left to write.
        results = []
        while len(results) < 50:
            [result] = run_tick(TickConfig(database_url=url, submit_concurrency=8, ray_timeout_s=10.0), "bench")
            assert result.status == "ticked", result.cause
            results.append(result)
            if result.reasons_written < 1000 and len(results) > 1:
                break
        catch_up = len(results) - 1
        for _ in range(ticks):
            [result] = run_tick(TickConfig(database_url=url, submit_concurrency=8, ray_timeout_s=10.0), "bench")
            results.append(result)
        steady = results[-ticks:]
        step = {name: statistics.median(r.steps_ms.get(name, 0) for r in steady) / 1000
                for name in ("observe", "reconcile", "plan", "commit", "submit")}
        outside = statistics.median(_outside_ray(r) for r in steady)
        total = statistics.median(sum(r.steps_ms.values()) for r in steady) / 1000
        statements = sorted({r.statements for r in results})
        print(f"{pending:>8} {sum(results[0].steps_ms.values()) / 1000:>12.3f} {total:>7.3f} {outside:>13.3f} "
              f"{step['observe']:>8.3f} {step['reconcile']:>9.3f} {step['plan']:>6.3f} {step['commit']:>7.3f} "
              f"{step['submit']:>7.3f} {'/'.join(map(str, statements)):>8}")
        catching = results[1:catch_up] or results[:1]
        print(f"{'':>8} first tick outside Ray: {_outside_ray(results[0]):.3f} s; {catch_up} ticks wrote the first waiting "
              f"reasons ({results[0].reasons_written} in the first), median outside Ray "
              f"{statistics.median(_outside_ray(r) for r in catching):.3f} s")
        stop_all(url, address)


def _outside_ray(result) -> float:
    return (sum(result.steps_ms.values()) - result.ray_ms) / 1000


def wait_finished(address: str, submission_ids: list[str], timeout_s: float = 300) -> None:
    """Until Ray has finished these jobs: drivers still starting would slow the next batch."""
    from job.adapters.ray_cluster import cluster_for

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        known = cluster_for(address, 10.0).jobs(submission_ids)
        if all(known.get(i) is not None and known[i].status in ("SUCCEEDED", "FAILED", "STOPPED") for i in submission_ids):
            return
        time.sleep(1)
    raise SystemExit(f"jobs not finished after {timeout_s} s")


def bench_submit(server_url: str, address: str, count: int, rounds: int) -> None:
    from job.adapters.ray_cluster import cluster_for
    from ray.job_submission import JobSubmissionClient

    print(f"\n== submitting {count} jobs: through the tick vs a bare JobSubmissionClient loop "
          f"(medians of {rounds} rounds, each batch on an idle cluster) ==")
    nodes = cluster_for(address, 10.0).nodes({}, use_head_node=False)
    client = JobSubmissionClient(address)
    bare, tick, submit_step = [], [], []
    for round_ in range(rounds):
        prefix = uuid.uuid4().hex[:6]
        ids = [f"bare-{prefix}-{i}" for i in range(count)]
        started = time.perf_counter()
        for i, submission_id in enumerate(ids):
            client.submit_job(entrypoint="true", submission_id=submission_id, entrypoint_num_cpus=0.01,
                              entrypoint_label_selector={"ray.io/node-id": nodes[i % len(nodes)].id})
        bare.append(time.perf_counter() - started)
        wait_finished(address, ids)

        url = fresh_database(server_url, "bench_tick_submit")
        fill(url, address, count, cpu=0.01, entrypoint="true")
        started = time.perf_counter()
        [result] = run_tick(TickConfig(database_url=url, submit_concurrency=8, ray_timeout_s=10.0), "bench")
        tick.append(time.perf_counter() - started)
        assert result.placed == count, (result.placed, result.waiting)
        submit_step.append(result.steps_ms["submit"] / 1000)
        with psycopg.connect(url) as conn:
            wait_finished(address, [row[0] for row in conn.execute("SELECT submission_id FROM jobs")])
    print(f"{'':<34} {'seconds':>8} {'jobs/s':>8}")
    for label, times in (("bare client loop", bare), ("tick, submit step", submit_step),
                         ("tick, whole (observe..submit)", tick)):
        median = statistics.median(times)
        print(f"{label:<34} {median:>8.3f} {count / median:>8.1f}")
    print(f"rate ratio tick/bare (whole tick): {statistics.median(bare) / statistics.median(tick):.2f}   "
          f"(submit step): {statistics.median(bare) / statistics.median(submit_step):.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1k,10k,100k")
    parser.add_argument("--ticks", type=int, default=4)
    parser.add_argument("--submit", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the submit comparison")
    args = parser.parse_args()
    log.configure(level="WARNING")
    with ExitStack() as stack:
        server_url = os.environ.get("JOB_DATABASE_URL")
        if not server_url:
            server_url, server = start_embedded(Path(tempfile.mkdtemp(prefix="jobbench-pg")) / "data")
            stack.callback(server.cleanup)
        address = os.environ.get("RAY_ADDRESS")
        if not address:
            from job.devtools.local_ray import LocalRayCluster, NodeSpec

            cluster = LocalRayCluster(head=NodeSpec(cpus=1), workers=[NodeSpec(cpus=2), NodeSpec(cpus=2)])
            stack.callback(cluster.stop)
            address = cluster.start()
        bench_ticks(server_url, address, [size(s) for s in args.sizes.split(",")], args.ticks)
        if args.submit:
            bench_submit(server_url, address, args.submit, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
