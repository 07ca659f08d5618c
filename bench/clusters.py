"""Benchmark of a group over several Ray clusters: 10 clusters of 1,000 nodes, 1,000,000 pending jobs.

    python bench/clusters.py                      # 10 clusters of 1,000 nodes, 1,000,000 pending jobs
    python bench/clusters.py --pending 100k       # the quick run

The clusters are served by local HTTP servers, one port each, all in one process of its own (as
bench/observe.py serves its state API), in Ray's exact shape: copies of the answers Ray 2.60 gave
on the local test cluster (bench/ray_cluster_records.json), ids and amounts varied. Each cluster
has a head and --nodes workers (16 CPU each, all in use by work outside the queue, so that nothing
placed changes the state between ticks), --running of our jobs running (their /api/jobs/ID answer
RUNNING, a job supervisor actor each in the actors' list) and no other job. What is timed is the
client's side: the requests, JSON decoding, the records; not the dashboards' own time to gather
their answers, which real clusters add (--answer-ms adds a fixed delay to each answer for that).

Part 1, the tick: a fresh database (JOB_DATABASE_URL's server, else an embedded one) with the
group over the clusters and --pending jobs of 1,000 users; ticks run one after the other in one
process as the loop runs them (`run_tick`, unmodified, its pending rows kept). The first tick's
plan gives every job its waiting reason; the bench writes them all at once, as the ticks would
over 200 ticks of 5,000 new reasons each (NEW_REASONS_PER_TICK), and ticks on until one writes
fewer than 1,000: the steady state. Printed: the median steady tick, its time outside Ray (all but
the calls to Ray: the reading of the clusters counts as Ray's), and the planner alone (`plan`) on
the last steady tick's snapshot, with the ratio against the budget (TICK_BUDGET_RATIO), in wall
and CPU time.

Part 2, observing: `read_clusters` (scheduler/clusters.py, a thread per cluster) of the group's 10
clusters against the same group with its first cluster only, alternately, --repeat times each:
medians, wall and CPU time, and the ratio against the budget (OBSERVE_BUDGET_RATIO).
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from psycopg.types.json import Jsonb

from bench.tick import USERS, fresh_database, planned, planner_alone, size
from job import log
from job.core.planner import plan
from job.devtools.local_postgres import start_embedded
from job.scheduler.clusters import read_clusters
from job.scheduler.config import TickConfig
from job.scheduler.pending import PendingRows
from job.scheduler.tick import run_tick
from job.store import groups, tick_jobs
from job.store.connection import connect

RECORDS = json.loads((Path(__file__).resolve().parent / "ray_cluster_records.json").read_text())
STATE_RECORDS = json.loads((Path(__file__).resolve().parent / "ray_state_records.json").read_text())
# A steady tick outside Ray at most this many times the planner alone on the same snapshot; the
# clusters read at once: 10 at most this many times one (issue 39).
TICK_BUDGET_RATIO = 2.0
OBSERVE_BUDGET_RATIO = 1.5
WORKER_CPU = 16.0
GIB = 2.0**30
TIMEOUT_S = 60.0


def node_id(cluster: int, i: int) -> str:
    return f"{cluster:08x}{i:048x}"


def cluster_name(cluster: int) -> str:
    return f"c{cluster}"


def submission_id(cluster: int, k: int) -> str:
    return f"bench-{cluster}-{k}"


def driver_job_id(cluster: int, k: int) -> str:
    return f"{cluster * 1000 + k + 2:08x}"


def running_node(cluster: int, k: int, nodes: int) -> str:
    """The worker that runs our job `k` of the cluster (the head is node 0)."""
    return node_id(cluster, 1 + k * 97 % nodes)


def answers(cluster: int, nodes: int, running: int) -> dict[str, bytes]:
    """One cluster's answers by path: its head and `nodes` workers, `running` of our jobs."""
    head_record, worker_record = RECORDS["nodes"]["data"]["result"]["result"]
    records, usage = [], {}
    for i in range(nodes + 1):
        ident, head = node_id(cluster, i), i == 0
        ip = f"10.{cluster}.{i // 256}.{i % 256}"
        record = copy.deepcopy(head_record if head else worker_record)
        cpu, memory = (8.0, 32 * GIB) if head else (WORKER_CPU, 64 * GIB)
        record.update(node_id=ident, node_ip=ip, node_name=ip, start_time_ms=record["start_time_ms"] + i,
                      labels={**record["labels"], "ray.io/node-id": ident},
                      resources_total={f"node:{ip}": 1.0, **({"node:__internal_head__": 1.0} if head else {}),
                                       "object_store_memory": 4 * GIB, "CPU": cpu, "memory": memory})
        records.append(record)
        # Every CPU of the workers in use (by work outside the queue, and our few jobs): nothing fits.
        usage[ident] = {f"node:{ip}": [0.0, 1.0], **({"node:InternalHead": [0.0, 1.0]} if head else {}),
                        "objectStoreMemory": [0.0, 4 * GIB], "memory": [0.0, memory],
                        "CPU": [0.0 if head else cpu, cpu]}
    listed = copy.deepcopy(RECORDS["nodes"])
    listed["data"]["result"].update(total=len(records), num_after_truncation=len(records), num_filtered=len(records),
                                    result=records)
    status = copy.deepcopy(RECORDS["cluster_status"])
    status["data"]["clusterStatus"]["loadMetricsReport"]["usageByNode"] = usage
    status["data"]["clusterStatus"]["autoscalerReport"]["activeNodes"] = {f"node{ident}": 1 for ident in usage}
    served = {"/api/v0/nodes": json.dumps(listed).encode(), "/api/cluster_status": json.dumps(status).encode()}
    supervisors = []
    for k in range(running):
        sid, node = submission_id(cluster, k), running_node(cluster, k, nodes)
        job = copy.deepcopy(RECORDS["job"])
        job.update(submission_id=sid, job_id=driver_job_id(cluster, k), driver_node_id=node, entrypoint="sleep 3600",
                   metadata={"job": sid})
        served[f"/api/jobs/{sid}"] = json.dumps(job).encode()
        supervisor = copy.deepcopy(STATE_RECORDS["supervisor"])
        supervisor.update(actor_id=f"{cluster:08x}{k:024x}", name=f"_ray_internal_job_actor_{sid}", node_id=node)
        supervisors.append(supervisor)
    for kind, listing in (("actors", supervisors), ("tasks", []), ("placement_groups", [])):
        body = copy.deepcopy(STATE_RECORDS["envelope"])
        body["data"]["result"].update(total=len(listing), num_after_truncation=len(listing), num_filtered=len(listing),
                                      result=listing)
        served[f"/api/v0/{kind}"] = json.dumps(body).encode()
    return served


class Dashboard(ThreadingHTTPServer):
    """One cluster's dashboard: its prepared answers by path, whatever the query (they hold what
    the filters keep); a job it does not hold is Ray's 404."""

    daemon_threads = True

    def __init__(self, served: dict[str, bytes], answer_s: float):
        self.served, self.answer_s = served, answer_s
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    # Kept alive, as the dashboard's aiohttp keeps the client's connections, and without Nagle's
    # delay as aiohttp (TCP_NODELAY): else each answer on a kept connection waits 40 ms for an ACK.
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        path = unquote(urlparse(self.path).path)
        body = self.server.served.get(path)
        if self.server.answer_s:
            time.sleep(self.server.answer_s)
        if body is None and path.startswith("/api/jobs/"):
            self._send(404, f"Job {path.rsplit('/', 1)[-1]} does not exist".encode(), "text/plain")
        elif body is None:
            self._send(404, b"404: Not Found", "text/plain")
        else:
            self._send(200, body, "application/json")

    def do_POST(self):
        # Nothing fits: a submission or a stop here is the bench's mistake, answered as Ray's 4xx.
        self._send(400, b"bench: no submission or stop expected", "text/plain")

    def _send(self, status: int, body: bytes, kind: str):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _serve(clusters: int, nodes: int, running: int, answer_s: float, ready) -> None:
    servers = [Dashboard(answers(c, nodes, running), answer_s) for c in range(clusters)]
    for server in servers[1:]:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    ready.put(([server.server_address[1] for server in servers], len(servers[0].served["/api/v0/nodes"]),
               len(servers[0].served["/api/cluster_status"])))
    servers[0].serve_forever()


@contextmanager
def dashboards(clusters: int, nodes: int, running: int, answer_s: float):
    """The addresses of `clusters` dashboards served from a process of their own, and the bytes of
    one's node list and cluster status."""
    ready = multiprocessing.Queue()
    process = multiprocessing.Process(target=_serve, args=(clusters, nodes, running, answer_s, ready), daemon=True)
    process.start()
    try:
        ports, listed, status = ready.get(timeout=600)
        yield [f"http://127.0.0.1:{port}" for port in ports], listed, status
    finally:
        process.terminate()
        process.join()


def fill(url: str, addresses: list[str], pending: int, nodes: int, running: int) -> None:
    """The group over the clusters, `pending` jobs of USERS users asking CPU 1, and `running` jobs
    running in each cluster (written as the tick leaves them)."""
    clusters = [{"name": cluster_name(c), "address": address, "removing": False} for c, address in enumerate(addresses)]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO resource_groups (name, clusters, policy, selector, half_life_s)"
                     " VALUES ('bench', %s, 'fairshare', 'dispersed', 3600)", (Jsonb(clusters),))
        conn.execute("INSERT INTO users (name, shares) SELECT 'user' || i, 1 + i %% 3 FROM generate_series(1, %s) i",
                     (USERS,))
        conn.execute(
            """INSERT INTO jobs (user_name, group_name, entrypoint, resources, priority, submitted_at)
               SELECT 'user' || (1 + i %% %s), 'bench', 'python train.py', '{"CPU": 1}', i %% 3,
                      now() - make_interval(secs => %s - i)
               FROM generate_series(1, %s) i""", (USERS, pending, pending))
        with conn.cursor() as cursor:
            cursor.executemany(
                """INSERT INTO jobs (user_name, group_name, entrypoint, resources, state, attempt, submission_id,
                                     node, cluster, ray_status, submitted_at, started_at, accepted_at)
                   VALUES (%s, 'bench', 'sleep 3600', '{"CPU": 1}', 'RUNNING', 1, %s, %s, %s, 'RUNNING',
                           now() - interval '2 hours', now() - interval '1 hour', now() - interval '1 hour')""",
                [(f"user{1 + (c * running + k) % USERS}", submission_id(c, k), running_node(c, k, nodes), cluster_name(c))
                 for c in range(len(addresses)) for k in range(running)])
        conn.execute("VACUUM ANALYZE jobs")


def tick(url: str, kept: PendingRows):
    [result] = run_tick(TickConfig(database_url=url, submit_concurrency=8, ray_timeout_s=TIMEOUT_S), "bench",
                        pending=kept)
    assert result.status == "ticked", result.cause
    assert result.placed == 0, "nothing fits: a placement is the bench's mistake"
    return result


def settle_reasons(url: str, snapshot) -> int:
    """Every waiting job's reason and message in the plan of `snapshot` written at once: where the
    ticks' 5,000 new reasons each would get in 200 ticks at a million jobs."""
    waiting = {int(record["job"]): (record["reason"], record["message"]) for record in plan(snapshot).waiting}
    with connect(url) as conn:
        tick_jobs.set_waiting(conn, waiting, snapshot.now)
        conn.commit()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE jobs")
    return len(waiting)


def _outside_ray(result) -> float:
    return (sum(result.steps_ms.values()) - result.ray_ms) / 1000


def bench_tick(url: str, pending: int, ticks: int) -> None:
    print(f"\n== the steady tick over {pending:,} pending jobs ({USERS} users), medians of {ticks} ticks ==")
    kept = PendingRows()
    with planned() as snapshots:
        began = time.perf_counter()
        first = tick(url, kept)
        print(f"   first tick {time.perf_counter() - began:.1f} s ({first.reasons_written:,} reasons written)")
    began = time.perf_counter()
    written = settle_reasons(url, snapshots[-1])
    print(f"   {written:,} waiting reasons written at once in {time.perf_counter() - began:.1f} s")
    catch_up = []
    while len(catch_up) < 20:
        result = tick(url, kept)
        catch_up.append(result)
        if result.reasons_written < 1000:
            break
    print(f"   {len(catch_up)} ticks to the steady state (reasons written: "
          f"{', '.join(str(r.reasons_written) for r in catch_up)})")
    results, cpu = [], []
    with planned() as snapshots:
        for _ in range(ticks):
            began = time.process_time()
            results.append(tick(url, kept))
            cpu.append(time.process_time() - began)
    steps = {name: statistics.median(r.steps_ms.get(name, 0) for r in results) / 1000
             for name in ("observe", "reconcile", "plan", "commit", "submit")}
    whole = statistics.median(sum(r.steps_ms.values()) for r in results) / 1000
    outside = statistics.median(_outside_ray(r) for r in results)
    ray = statistics.median(r.ray_ms for r in results) / 1000
    print(f"{'tick s':>8} {'Ray s':>7} {'outside Ray s':>13} {'observe':>8} {'reconcile':>9} {'plan':>6} {'commit':>7} "
          f"{'submit':>7} {'SQL/tick':>8} {'nodes':>6} {'running':>7}")
    print(f"{whole:>8.3f} {ray:>7.3f} {outside:>13.3f} {steps['observe']:>8.3f} {steps['reconcile']:>9.3f} "
          f"{steps['plan']:>6.3f} {steps['commit']:>7.3f} {steps['submit']:>7.3f} "
          f"{'/'.join(map(str, sorted({r.statements for r in results}))):>8} {len(results[-1].nodes):>6} "
          f"{results[-1].running:>7}")
    alone, alone_cpu = planner_alone(snapshots[-1], ticks)
    ratio = outside / alone
    verdict = "within" if ratio <= TICK_BUDGET_RATIO else "OVER"
    print(f"planner alone on the last steady tick's snapshot: {alone:.3f} s ({alone_cpu:.3f} s CPU); steady tick "
          f"outside Ray {outside:.3f} s = {ratio:.2f}x the planner alone; whole tick {statistics.median(cpu):.3f} s "
          f"CPU = {statistics.median(cpu) / alone_cpu:.2f}x its CPU; budget {TICK_BUDGET_RATIO:g}x: {verdict}")


def bench_observe(url: str, repeat: int) -> None:
    with connect(url) as conn:
        group = groups.get_group(conn, "bench")
        active = tick_jobs.active_jobs(conn, "bench")
        conn.rollback()
    one = group.model_copy(update={"clusters": group.clusters[:1]})
    alone = [job for job in active if job.cluster == group.clusters[0].name]
    print(f"\n== observing: read_clusters of {len(group.clusters)} clusters against 1, alternately, "
          f"medians of {repeat} ==")
    figures: dict[str, list[tuple[float, float]]] = {"one": [], "all": []}
    for round_ in range(repeat):
        order = (("one", one, alone), ("all", group, active))
        for name, chosen, jobs in order if round_ % 2 == 0 else order[::-1]:
            began, began_cpu = time.perf_counter(), time.process_time()
            read = read_clusters(chosen, jobs, TIMEOUT_S)
            figures[name].append((time.perf_counter() - began, time.process_time() - began_cpu))
            assert not read.failed, read.failed
            assert len(read.nodes()) == len(chosen.clusters) * len(read.readings[chosen.clusters[0].name].nodes)
            assert len(read.jobs()) == len(jobs)
    wall = {name: statistics.median(w for w, _ in rows) for name, rows in figures.items()}
    cpu = {name: statistics.median(c for _, c in rows) for name, rows in figures.items()}
    ratio = wall["all"] / wall["one"]
    verdict = "within" if ratio <= OBSERVE_BUDGET_RATIO else "OVER"
    print(f"{'clusters':>8} {'wall ms':>8} {'CPU ms':>8}")
    print(f"{1:>8} {wall['one'] * 1000:>8.1f} {cpu['one'] * 1000:>8.1f}")
    print(f"{len(group.clusters):>8} {wall['all'] * 1000:>8.1f} {cpu['all'] * 1000:>8.1f}")
    print(f"observing {len(group.clusters)} clusters = {ratio:.2f}x one (CPU {cpu['all'] / cpu['one']:.2f}x); "
          f"budget {OBSERVE_BUDGET_RATIO:g}x: {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", default="1m", help="pending jobs (the quick run: 100k)")
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=1000, help="workers per cluster (and a head)")
    parser.add_argument("--running", type=int, default=3, help="our jobs running in each cluster")
    parser.add_argument("--ticks", type=int, default=5, help="steady ticks measured")
    parser.add_argument("--repeat", type=int, default=15, help="reads of the clusters measured, each way")
    parser.add_argument("--answer-ms", type=float, default=0.0,
                        help="a delay added to every answer: the dashboard's own time, which the local servers lack")
    parser.add_argument("--observe-only", action="store_true", help="part 2 only (the database holds no pending job)")
    args = parser.parse_args()
    log.configure(level="WARNING")
    pending = 0 if args.observe_only else size(args.pending)
    with ExitStack() as stack:
        server_url = os.environ.get("JOB_DATABASE_URL")
        if not server_url:
            server_url, server = start_embedded(Path(tempfile.mkdtemp(prefix="jobbench-pg")) / "data")
            stack.callback(server.cleanup)
        addresses, listed, status = stack.enter_context(
            dashboards(args.clusters, args.nodes, args.running, args.answer_ms / 1000))
        print(f"{args.clusters} clusters of {args.nodes:,} workers and a head, {args.running} of our jobs running in "
              f"each; a node list answer {listed / 2**20:.2f} MiB, a cluster status {status / 2**20:.2f} MiB"
              f"{f', each answer delayed {args.answer_ms:g} ms' if args.answer_ms else ''}")
        url = fresh_database(server_url, "bench_clusters")
        began = time.perf_counter()
        fill(url, addresses, pending, args.nodes, args.running)
        print(f"{pending:,} pending jobs inserted and vacuumed in {time.perf_counter() - began:.0f} s")
        if pending:
            bench_tick(url, pending, args.ticks)
        bench_observe(url, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
