"""Benchmark of what the observe step reads of the cluster's work: `RayCluster.work()` (three state
API lists over HTTP, parsed into records) and `core.observed.observe` (each job's use per node).

    python bench/observe.py                       # 100 and 10,000 alive actors and running tasks
    python bench/observe.py --sizes 100,1000,10000 --repeat 9

Ten thousand real actors are ten thousand worker processes, which a small machine cannot hold.
The lists are served instead by a local HTTP server in a process of its own, as the dashboard is
(in the bench's own process, its sending took the interpreter from the client's threads and
counted in the client's time), in Ray's exact shape: copies of the records
Ray 2.60 returned on the local test cluster (bench/ray_state_records.json: an actor, a job
supervisor, a running task with its events and profiling data, a placement group), with ids,
nodes and jobs varied. For a size N the cluster runs N actors (a supervisor per job among them),
N running tasks and N/10 placement groups of two bundles, for 100 of our jobs on 100 nodes. What is
timed is the client's side: the requests, JSON decoding, the records, the computation; not the
dashboard's own time to gather the lists, which the real cluster adds.

Printed per size: the median time of `work()`, of `observe()` and of both, the bytes of the three
answers, and the ratio of each median to the smallest size's; then the largest size's both against
the budget of the observe step (BUDGET_S), in wall time and in the process's CPU time (which the
load of a shared machine does not inflate; the server's is its own process's).
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing
import statistics
import sys
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from job.adapters.ray_cluster import RayCluster
from job.core.observed import RunningJob, observe
from job.core.resources import Resources

RECORDS = json.loads((Path(__file__).resolve().parent / "ray_state_records.json").read_text())
JOBS = 100
NODES = 100
# The observe step of a group with 10,000 running actors and tasks (bench/README.md).
BUDGET_S = 0.200


def node_id(i: int) -> str:
    return f"{i:056x}"


def job_id(i: int) -> str:
    return f"{i + 2:08x}"


def submission_id(i: int) -> str:
    return f"bench-{i}-1"


def record(kind: str, i: int, **fields) -> dict:
    copied = copy.deepcopy(RECORDS[kind])
    copied.update(fields)
    return copied


def answers(size: int) -> dict[str, bytes]:
    """The three lists' JSON answers for `size` actors and tasks."""
    actors = [record("supervisor", i, actor_id=f"{i:032x}", name=f"_ray_internal_job_actor_{submission_id(i)}",
                     node_id=node_id(i % NODES)) for i in range(JOBS)]
    actors += [record("actor", i, actor_id=f"{i + JOBS:032x}", job_id=job_id(i % JOBS), node_id=node_id(i % NODES))
               for i in range(size - JOBS)]
    tasks = [record("task", i, task_id=f"{i:048x}", job_id=job_id(i % JOBS), node_id=node_id(i % NODES))
             for i in range(size)]
    groups = []
    for i in range(size // 10):
        group = record("placement_group", i, placement_group_id=f"{i:036x}", creator_job_id=job_id(i % JOBS))
        for bundle in group["bundles"]:
            bundle["node_id"] = node_id(i % NODES)
        groups.append(group)
    return {kind: _envelope(listed) for kind, listed in
            (("actors", actors), ("tasks", tasks), ("placement_groups", groups))}


def _envelope(listed: list[dict]) -> bytes:
    body = copy.deepcopy(RECORDS["envelope"])
    body["data"]["result"].update(total=len(listed), num_after_truncation=len(listed), num_filtered=len(listed),
                                  result=listed)
    return json.dumps(body).encode()


class StateApi(ThreadingHTTPServer):
    """Serves prepared answers at /api/v0/<kind>, whatever the query (they hold what the filters keep)."""

    daemon_threads = True

    def __init__(self):
        self.answers: dict[str, bytes] = {}
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.server.answers[urlparse(self.path).path.rsplit("/", 1)[-1]]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _serve(size: int, ready) -> None:
    server = StateApi()
    server.answers = answers(size)
    ready.put((server.server_address[1], sum(len(body) for body in server.answers.values())))
    server.serve_forever()


@contextmanager
def state_api(size: int):
    """The address of a state API serving `size` actors and tasks from a process of its own, and
    the bytes of its three answers."""
    ready = multiprocessing.Queue()
    process = multiprocessing.Process(target=_serve, args=(size, ready), daemon=True)
    process.start()
    try:
        port, sent = ready.get(timeout=300)
        yield f"http://127.0.0.1:{port}", sent
    finally:
        process.terminate()
        process.join()


def measure(size: int, repeat: int) -> dict[str, float]:
    with state_api(size) as (address, sent):
        return _measure(RayCluster(address, timeout_s=60.0), size, repeat, sent)


def _measure(cluster: RayCluster, size: int, repeat: int, sent: int) -> dict[str, float]:
    jobs = [RunningJob(id=i, user=f"user{i}", submission_id=submission_id(i), driver_job_id=job_id(i),
                       node=node_id(i % NODES), driver=Resources.of({"CPU": 0.5})) for i in range(JOBS)]
    fetch, compute, cpu = [], [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        work = cluster.work()
        read = time.perf_counter()
        seen = observe(jobs, work)
        fetch.append(read - start)
        compute.append(time.perf_counter() - read)
        cpu.append(time.process_time() - start_cpu)
    assert not work.truncated and len(work.actors) == size and len(work.tasks) == size and seen.fallback is None
    assert sum(use.actors for use in seen.jobs.values()) == size - JOBS
    return {"work": statistics.median(fetch), "observe": statistics.median(compute),
            "both": statistics.median(a + b for a, b in zip(fetch, compute, strict=True)), "cpu": statistics.median(cpu),
            "bytes": sent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,10000", help="alive actors (and running tasks), comma-separated")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    figures = {size: measure(size, args.repeat) for size in sizes}
    base = figures[sizes[0]]
    print(f"{'actors+tasks':>14} {'answers':>10} {'work()':>10} {'observe()':>10} {'both':>10}  ratio to {sizes[0]}")
    for size, row in figures.items():
        ratios = " / ".join(f"{row[key] / base[key]:.0f}x" for key in ("work", "observe", "both"))
        print(f"{size:>7} + {size:<6}{row['bytes'] / 2**20:>8.1f} MiB {row['work'] * 1000:>7.1f} ms "
              f"{row['observe'] * 1000:>7.1f} ms {row['both'] * 1000:>7.1f} ms  {ratios}")
    largest = figures[sizes[-1]]
    print(f"observe step at {sizes[-1]:,} actors and tasks: {largest['both'] * 1000:.0f} ms wall, "
          f"{largest['cpu'] * 1000:.0f} ms CPU; budget {BUDGET_S * 1000:.0f} ms: ratio {largest['both'] / BUDGET_S:.2f} "
          f"(wall), {largest['cpu'] / BUDGET_S:.2f} (CPU)")


if __name__ == "__main__":
    main()
