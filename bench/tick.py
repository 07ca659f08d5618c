"""Benchmark of the tick on a real PostgreSQL and a real local Ray cluster.

    python bench/tick.py                       # 1k, 10k and 100k pending jobs, 50 submissions, history
    python bench/tick.py --sizes 1k,10k --ticks 5
    python bench/tick.py --sizes '' --submit 0 --history 1m --ray-history 10000   # the history part only

Part 1: for each size, a fresh database holding that many pending jobs of 1,000 users (each asking
CPU 1, so a handful fit the cluster and the rest wait; the ones placed sleep through the whole
measurement, so that no Ray driver starts or ends while ticks are timed). Several ticks run, one after
the other in one process as the loop runs them (the pending rows kept between ticks: the first tick
reads them all, the later ones those written since); the first ones write every job's first
waiting reason, the later ones are the steady state. Printed per size: the median time
of each step, the time outside Ray calls (reconcile, plan, commit, and the database part of the
observe step), and the SQL statements per tick; then the planner alone (`plan`) on the snapshot of
the last steady tick, timed again by itself, and the steady tick outside Ray against it and against
the budget (TICK_BUDGET_S, TICK_BUDGET_RATIO: bench/README.md). Wall times, as the tick reports
its steps; the process's CPU time of the tick and of the planner alone beside them (the load of a
shared machine inflates the wall times, not these; PostgreSQL's own time is in the wall time only).

Part 2: how fast the tick submits 50 jobs that all fit, against a bare JobSubmissionClient loop
submitting 50 equivalent jobs (same resources, pinned the same way) in the same run.

Part 3, history: a tick's time with a million finished jobs in PostgreSQL, and then also thousands
of finished jobs in Ray's history, against the same tick with none. Two databases alike (1,000
pending jobs of 1,000 users; each group on its own worker, where two of its jobs run through the
whole measurement), one of them also holding the finished rows; their ticks alternate, so that
the load of the machine weighs on both alike. Then Ray's history is grown to --ray-history jobs:
--ray-history-run trivial `true` jobs run straight on Ray (a wave at a time), the rest written into
its history as Ray writes a finished submission (each real one costs a supervisor process, seconds
on a small machine). Ray's history is the cluster's, so it cannot alternate with the databases:
the written part comes and goes between four rounds instead, and the four combinations (Ray's
history small or large, PostgreSQL's none or a million) are printed with their ratios to the first.
RAY_ADDRESS's cluster gets only real jobs (written ones too with RAY_GCS_ADDRESS); the history
part needs two workers labelled bench-worker (the bench's own cluster has them).

PostgreSQL: JOB_DATABASE_URL's server, else an embedded one. Ray: RAY_ADDRESS, else a head and two
workers started here and stopped at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from psycopg.types.json import Jsonb

from job import log
from job.core.planner import plan
from job.devtools.local_postgres import start_embedded, with_database
from job.scheduler import tick as tick_module
from job.scheduler.config import TickConfig
from job.scheduler.pending import PendingRows
from job.scheduler.tick import run_tick
from job.store.migrations import migrate

USERS = 1000
# A steady tick at 100,000 pending jobs, outside Ray: at most this long, and at most this many times
# the planner alone on the same snapshot.
TICK_BUDGET_S = 1.0
TICK_BUDGET_RATIO = 2.0


def size(text: str) -> int:
    text = text.strip().lower()
    for suffix, factor in (("k", 1000), ("m", 1_000_000)):
        if text.endswith(suffix):
            return int(float(text[:-1]) * factor)
    return int(text)


@contextmanager
def postgres_server() -> Iterator[str]:
    """JOB_DATABASE_URL's server, else an embedded one for the time of the block: its URL."""
    server_url = os.environ.get("JOB_DATABASE_URL")
    if server_url:
        yield server_url
        return
    server_url, server = start_embedded(Path(tempfile.mkdtemp(prefix="jobbench-pg")) / "data")
    try:
        yield server_url
    finally:
        server.cleanup()


def fresh_database(server_url: str, name: str) -> str:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = with_database(server_url, name)
    with psycopg.connect(url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        migrate(conn)
    return url


def fill(url: str, address: str, pending: int, cpu: float, entrypoint: str, node_labels: dict | None = None) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO resource_groups (name, clusters, policy, selector, half_life_s, node_labels)"
                     " VALUES ('bench', %s, 'fairshare', 'dispersed', 3600, %s)",
                     (Jsonb([{"name": "c", "address": address}]), Jsonb(node_labels or {})))
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
        # Kept from tick to tick, as the loop keeps them: the first tick reads every row.
        kept = PendingRows()
        while len(results) < 50:
            [result] = run_tick(TickConfig(database_url=url, submit_concurrency=8, ray_timeout_s=10.0), "bench",
                                pending=kept)
            assert result.status == "ticked", result.cause
            results.append(result)
            if result.reasons_written < 1000 and len(results) > 1:
                break
        catch_up = len(results) - 1
        cpu = []
        with planned() as snapshots:
            for _ in range(ticks):
                began = time.process_time()
                [result] = run_tick(TickConfig(database_url=url, submit_concurrency=8, ray_timeout_s=10.0), "bench",
                                    pending=kept)
                cpu.append(time.process_time() - began)
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
        alone, alone_cpu = planner_alone(snapshots[-1], ticks)
        ratio = outside / alone
        verdict = "within" if outside <= TICK_BUDGET_S and ratio <= TICK_BUDGET_RATIO else "over"
        print(f"{'':>8} planner alone on the last steady tick's snapshot: {alone:.3f} s ({alone_cpu:.3f} s CPU); "
              f"steady tick outside Ray {outside:.3f} s = {ratio:.2f}x the planner alone; whole tick "
              f"{statistics.median(cpu):.3f} s CPU = {statistics.median(cpu) / alone_cpu:.2f}x its CPU; budget "
              f"{TICK_BUDGET_S:g} s and {TICK_BUDGET_RATIO:g}x: {verdict}")
        stop_all(url, address)


@contextmanager
def planned():
    """The snapshots the tick's plan step plans, in order (the tick calls the planner by this name)."""
    seen = []
    original = tick_module.plan

    def plan_keeping(snapshot):
        seen.append(snapshot)
        return original(snapshot)

    tick_module.plan = plan_keeping
    try:
        yield seen
    finally:
        tick_module.plan = original


def planner_alone(snapshot, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of the planner by itself on `snapshot`, collector off as in the tick."""
    wall, cpu = [], []
    gc.disable()
    try:
        for _ in range(repeat):
            began, began_cpu = time.perf_counter(), time.process_time()
            plan(snapshot)
            wall.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
    finally:
        gc.enable()
    return statistics.median(wall), statistics.median(cpu)


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
    from ray.job_submission import JobSubmissionClient

    from job.adapters.ray_cluster import cluster_for

    print(f"\n== submitting {count} jobs: through the tick vs a bare JobSubmissionClient loop "
          f"(medians of {rounds} rounds, each batch on an idle cluster) ==")
    nodes = cluster_for(address, 10.0).nodes({}, use_head_node=False)
    client = JobSubmissionClient(address)
    bare, tick, submit_step = [], [], []
    for _ in range(rounds):
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


WORKER_LABEL = "bench-worker"
STATES_FINISHED = ("SUCCEEDED", "FAILED", "STOPPED", "CANCELLED")


def add_finished(url: str, rows: int) -> None:
    """`rows` finished jobs of the bench's users, ended 5 s apart up to now, as years of use leave."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO jobs (user_name, group_name, state, entrypoint, resources, attempt, submission_id, node,
                                 reason, message, exit_code, submitted_at, started_at, finished_at, updated_at)
               SELECT 'user' || (1 + i %% %(users)s), 'bench', (%(states)s::text[])[1 + i %% 4], 'python train.py',
                      '{"CPU": 1}', 1, 'old-' || i, 'node-' || i %% 8, 'Succeeded', 'exit code 0', 0,
                      f - interval '2 hours', f - interval '1 hour', f, f
               FROM generate_series(1, %(rows)s) AS i,
                    LATERAL (SELECT now() - make_interval(secs => (%(rows)s - i) * 5) AS f) t""",
            {"users": USERS, "states": list(STATES_FINISHED), "rows": rows})
        conn.execute("VACUUM ANALYZE jobs")


def tick_once(url: str):
    [result] = run_tick(TickConfig(database_url=url, submit_concurrency=8, ray_timeout_s=10.0), "bench")
    assert result.status == "ticked", result.cause
    return result


def steady(url: str) -> None:
    """Ticks until one places nothing and writes no waiting reason."""
    for _ in range(50):
        result = tick_once(url)
        if result.placed == 0 and result.reasons_written == 0 and result.running > 0:
            return
        time.sleep(0.5)
    raise SystemExit("the history databases did not settle in 50 ticks")


def measure(urls: dict[str, str], ticks: int) -> dict[str, list]:
    """`ticks` ticks of each database, alternating (and which goes first, too)."""
    results: dict[str, list] = {name: [] for name in urls}
    names = list(urls)
    for round_ in range(ticks):
        for name in names if round_ % 2 == 0 else names[::-1]:
            results[name].append(tick_once(urls[name]))
    return results


def ray_history(address: str, count: int, wave: int = 24) -> None:
    """`count` trivial jobs run straight on Ray (not through the queue), a wave at a time, until
    they are all finished: Ray's job history, as months of use leave it."""
    from job.adapters.ray_cluster import cluster_for

    cluster = cluster_for(address, 60.0)
    head = next(node for node in cluster.nodes({}, use_head_node=True) if node.is_head)
    prefix = uuid.uuid4().hex[:6]
    started, shown = time.perf_counter(), 0
    for first in range(0, count, wave):
        ids = [f"history-{prefix}-{i}" for i in range(first, min(count, first + wave))]
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda sid: cluster.submit(submission_id=sid, entrypoint="true", node_id=head.id,
                                                     resources={}, runtime_env={}, metadata={}), ids))
        wait_finished(address, ids, timeout_s=600)
        done = first + len(ids)
        if done * 10 // count > shown:
            shown = done * 10 // count
            print(f"    {done} jobs in Ray's history, {time.perf_counter() - started:.0f} s", flush=True)


class WrittenRayHistory:
    """Finished submissions written into Ray's history as Ray's job manager writes each one
    (ray.dashboard.modules.job.common.JobInfoStorageClient: one key per submission in the GCS's
    internal KV, namespace `job`, the JobInfo as JSON), and removed again: a history of thousands
    without running thousands of jobs (each costs a supervisor process, seconds on a small machine),
    and one that can come and go between measurements."""

    def __init__(self, gcs_address: str, count: int) -> None:
        from ray._private import ray_constants
        from ray._raylet import GcsClient
        from ray.dashboard.modules.job.common import JobInfo, JobInfoStorageClient, JobStatus

        self.gcs, self.namespace, self.count = GcsClient(address=gcs_address), ray_constants.KV_NAMESPACE_JOB, count
        self.prefix = JobInfoStorageClient.JOB_DATA_KEY.format(job_id=f"written-{uuid.uuid4().hex[:6]}-")
        now_ms = int(time.time() * 1000)
        self.value = json.dumps(JobInfo(
            status=JobStatus.SUCCEEDED, entrypoint="python train.py", message="Job finished successfully.",
            start_time=now_ms - 60_000, end_time=now_ms - 1_000, metadata={"team": "bench"}, runtime_env={},
            driver_exit_code=0).to_json()).encode()

    def write(self) -> None:
        for i in range(self.count):
            self.gcs.internal_kv_put(f"{self.prefix}{i}".encode(), self.value, True, self.namespace)

    def remove(self) -> None:
        self.gcs.internal_kv_del(self.prefix.encode(), True, self.namespace)


def listed_jobs(address: str) -> tuple[int, float]:
    """How many jobs Ray's whole history lists (what the tick no longer asks), and how long it took."""
    import requests

    started = time.perf_counter()
    answer = requests.get(f"{address}/api/jobs/", timeout=600)
    answer.raise_for_status()
    return len(answer.json()), time.perf_counter() - started


def bench_history(server_url: str, address: str, rows: int, ray_jobs: int, pending: int, ticks: int,
                  real_ray_jobs: int, gcs_address: str | None) -> None:
    from job.adapters.ray_cluster import cluster_for

    print(f"\n== history: a tick with {rows:,} finished jobs in PostgreSQL and {ray_jobs:,} in Ray's history, "
          f"against the same tick with none ==")
    print(f"   ({pending:,} pending jobs of {USERS} users in each of two databases, each group on its own worker "
          f"with 2 of its jobs running; medians of {ticks} ticks each, the databases alternating)")
    workers = sorted({node.labels.get(WORKER_LABEL) for node in cluster_for(address, 10.0).nodes({}, False)} - {None})
    if len(workers) < 2:
        raise SystemExit(f"the history part needs two workers labelled {WORKER_LABEL}=... (the bench's own cluster has them)")
    urls = {}
    for name, worker in (("none", workers[0]), ("history", workers[1])):
        url = fresh_database(server_url, f"bench_tick_history_{name}")
        fill(url, address, pending, cpu=1, entrypoint="sleep 3600", node_labels={WORKER_LABEL: worker})
        urls[name] = url
    started = time.perf_counter()
    add_finished(urls["history"], rows)
    print(f"   {rows:,} finished rows inserted and vacuumed in {time.perf_counter() - started:.0f} s")
    for url in urls.values():
        steady(url)
    header = f"{'':<52} {'tick ms':>8} {'outside Ray ms':>14} {'Ray ms':>7} {'SQL/tick':>8}"
    print(header)
    before = measure(urls, ticks)
    base = _row("Ray's history empty, PostgreSQL none", before["none"])
    _row(f"Ray's history empty, PostgreSQL {rows:,}", before["history"], base)
    if ray_jobs:
        real = min(real_ray_jobs, ray_jobs) if gcs_address else ray_jobs
        started = time.perf_counter()
        ray_history(address, real)
        print(f"   {real:,} trivial jobs run on Ray in {time.perf_counter() - started:.0f} s")
        if ray_jobs == real:
            after = measure(urls, ticks)
            _row(f"Ray's history {real:,}, PostgreSQL none", after["none"], base)
            _row(f"Ray's history {real:,}, PostgreSQL {rows:,}", after["history"], base)
        else:
            _written_history_rounds(urls, address, ticks, rows, ray_jobs, real, gcs_address)
    for url in urls.values():
        stop_all(url, address)


def _written_history_rounds(urls: dict[str, str], address: str, ticks: int, rows: int, ray_jobs: int, real: int,
                            gcs_address: str) -> None:
    """The ticks with Ray's history beyond what was run written into its GCS KV, in rounds."""
    # Ray's history cannot alternate with the databases (it is the cluster's), so it comes
    # and goes between rounds instead: with, without, with, without.
    written = WrittenRayHistory(gcs_address, ray_jobs - real)
    results: dict[tuple[bool, str], list] = {(present, name): [] for present in (True, False) for name in urls}
    for round_ in range(4):
        present = round_ % 2 == 0
        started = time.perf_counter()
        if present:
            written.write()
        else:
            written.remove()
        if round_ == 0:
            print(f"   {ray_jobs - real:,} finished submissions written into Ray's history (its GCS KV) in "
                  f"{time.perf_counter() - started:.0f} s; then removed and written again between rounds")
            listed, seconds = listed_jobs(address)
            print(f"   Ray's whole history lists {listed:,} jobs; listing it (/api/jobs/, which the tick "
                  f"never asks) takes {seconds:.2f} s")
        if round_ == 1:
            assert listed_jobs(address)[0] == listed - written.count, "the written history was not removed"
        for name, found in measure(urls, ticks).items():
            results[(present, name)].extend(found)
    print(f"   ({ticks * 2} ticks each, in 4 rounds; ratios to the first of these four lines)")
    small = _row(f"Ray's history {real:,}, PostgreSQL none", results[(False, "none")])
    _row(f"Ray's history {real:,}, PostgreSQL {rows:,}", results[(False, "history")], small)
    _row(f"Ray's history {ray_jobs:,}, PostgreSQL none", results[(True, "none")], small)
    _row(f"Ray's history {ray_jobs:,}, PostgreSQL {rows:,}", results[(True, "history")], small)


def _row(label: str, results: list, base: tuple[float, float, float] | None = None) -> tuple[float, float, float]:
    tick = statistics.median(sum(r.steps_ms.values()) for r in results)
    outside = statistics.median(sum(r.steps_ms.values()) - r.ray_ms for r in results)
    ray = statistics.median(r.ray_ms for r in results)
    statements = "/".join(map(str, sorted({r.statements for r in results})))
    ratio = (f"  ratio {tick / base[0]:.2f} (outside Ray {outside / max(base[1], 0.1):.2f}, Ray {ray / max(base[2], 0.1):.2f})"
             if base else "")
    print(f"{label:<52} {tick:>8.1f} {outside:>14.1f} {ray:>7.1f} {statements:>8}{ratio}")
    return tick, outside, ray


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1k,10k,100k")
    parser.add_argument("--ticks", type=int, default=4)
    parser.add_argument("--submit", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the submit comparison")
    parser.add_argument("--history", default="1m", help="finished jobs in PostgreSQL for the history part (0: skip it)")
    parser.add_argument("--ray-history", type=int, default=10000, help="finished jobs put in Ray's history there")
    parser.add_argument("--ray-history-run", type=int, default=100,
                        help="of those, how many are real jobs run on Ray (the rest are written into its history)")
    parser.add_argument("--history-pending", default="1k", help="pending jobs of each database there")
    parser.add_argument("--history-ticks", type=int, default=20, help="ticks measured per database and step there")
    args = parser.parse_args()
    log.configure(level="WARNING")
    with ExitStack() as stack:
        server_url = stack.enter_context(postgres_server())
        address, gcs_address = os.environ.get("RAY_ADDRESS"), os.environ.get("RAY_GCS_ADDRESS")
        if not address:
            from job.devtools.local_ray import LocalRayCluster, NodeSpec

            cluster = LocalRayCluster(head=NodeSpec(cpus=1), workers=[NodeSpec(cpus=2, labels={WORKER_LABEL: "a"}),
                                                                      NodeSpec(cpus=2, labels={WORKER_LABEL: "b"})])
            stack.callback(cluster.stop)
            address = cluster.start()
            gcs_address = cluster.gcs_address
        sizes = [size(s) for s in args.sizes.split(",") if s.strip()]
        if sizes:
            bench_ticks(server_url, address, sizes, args.ticks)
        if args.submit:
            bench_submit(server_url, address, args.submit, args.rounds)
        if size(args.history):
            bench_history(server_url, address, size(args.history), args.ray_history, size(args.history_pending),
                          args.history_ticks, args.ray_history_run, gcs_address)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
