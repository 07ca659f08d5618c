"""What a job's history costs the tick: the triggers of sql/0008 (events, counts) on against off.

    python bench/events.py                     # 100k pending jobs of 1,000 users, 6 ticks each way
    python bench/events.py --pending 10k --ticks 10

Two databases alike (one group, 1,000 users, the pending jobs, each asking CPU 1), one with the
history's triggers on `jobs` disabled; a tick on a third, small one first warms the process. A Ray
cluster answered from memory (10 nodes of 8 CPUs, every submission accepted and running at once),
so that only PostgreSQL and our code are timed. Ticks alternate between the two databases, so that
the machine's load weighs on both alike. The first tick writes 5,000 new waiting reasons (an event
each, with triggers) and 80 placements; the later ones are the steady state. Printed: each step's
median, per tick number, and the ratio.

PostgreSQL: JOB_DATABASE_URL's server, else an embedded one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from tick import fresh_database, postgres_server, size

from job import log
from job.adapters.ray_cluster import RayJob, RayNode
from job.core.observed import ClusterWork
from job.scheduler import clusters as tick_clusters
from job.scheduler import tick
from job.scheduler.config import TickConfig

USERS = 1000
NODES = 10
HISTORY_TRIGGERS = ("jobs_events_insert", "jobs_events_update", "jobs_events_delete")


class MemoryRay:
    """Every submission accepted and running at once; nothing ever ends."""

    def __init__(self) -> None:
        self.known: dict[str, RayJob] = {}

    def alive_nodes(self, labels: dict | None = None) -> list[RayNode]:
        return [RayNode(id=f"node-{i}", resources={"CPU": 8.0}, labels={}, is_head=False) for i in range(NODES)]

    def jobs(self, submission_ids: list[str]) -> dict[str, RayJob]:
        return {i: self.known[i] for i in submission_ids if i in self.known}

    def submit(self, *, submission_id: str, **_) -> None:
        self.known[submission_id] = RayJob(submission_id, "RUNNING", None, datetime.now(UTC), None, None, None)

    def stop(self, submission_id: str) -> bool:
        return True

    def work(self) -> ClusterWork:
        """Nothing but the drivers: no actor, task or placement group of theirs."""
        return ClusterWork()


def fill(url: str, pending: int, triggers: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('bench', '[{\"name\": \"c\", \"address\": \"http://ray.invalid:8265\"}]')")
        conn.execute("INSERT INTO users (name) SELECT 'user' || i FROM generate_series(1, %s) i", (USERS,))
        if not triggers:  # the history's alone: the others (versions, wakes) are the tick's own
            for trigger in HISTORY_TRIGGERS:
                conn.execute(f"ALTER TABLE jobs DISABLE TRIGGER {trigger}")
        conn.execute(
            """INSERT INTO jobs (user_name, group_name, entrypoint, resources, reason, message, submitted_at)
               SELECT 'user' || (1 + i %% %s), 'bench', 'true', '{"CPU": 1}', 'Queued', 'waiting for the next tick',
                      now() - make_interval(secs => %s - i)
               FROM generate_series(1, %s) i""", (USERS, pending, pending))
        conn.execute("VACUUM ANALYZE")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", default="100k")
    parser.add_argument("--ticks", type=int, default=6)
    args = parser.parse_args()
    log.configure("text", "WARNING")
    pending = size(args.pending)
    with postgres_server() as server_url:
        urls = {}
        for label, triggers in (("triggers on", True), ("triggers off", False)):
            urls[label] = fresh_database(server_url, f"bench_events_{'on' if triggers else 'off'}")
            fill(urls[label], pending, triggers)
        # A tick on a small database first: the process's first tick pays for its imports and
        # first calls (0.7 s of the plan step), which would count against the side ticked first.
        warm = fresh_database(server_url, "bench_events_warm")
        fill(warm, 1000, True)
        tick_clusters.cluster_of = lambda address, timeout_s, *_: MemoryRay()
        tick.run_tick(TickConfig(database_url=warm, submit_concurrency=8, ray_timeout_s=10))
        clusters = {label: MemoryRay() for label in urls}
        results: dict[str, list] = {label: [] for label in urls}
        for _ in range(args.ticks):
            for label, url in urls.items():
                tick_clusters.cluster_of = lambda address, timeout_s, *_, ray=clusters[label]: ray
                [result] = tick.run_tick(TickConfig(database_url=url, submit_concurrency=8, ray_timeout_s=10))
                assert result.status == "ticked", result.cause
                results[label].append(result)
        with psycopg.connect(urls["triggers on"]) as conn:
            events = conn.execute("SELECT count(*) FROM job_events").fetchone()[0]
    print(f"{pending:,} pending jobs of {USERS:,} users; {args.ticks} ticks each way, alternating; "
          f"{events:,} events written in all")
    steps = ["observe", "reconcile", "plan", "commit", "submit"]
    print(f"{'':14}{'tick':>6}" + "".join(f"{step:>11}" for step in steps) + f"{'total ms':>11}{'statements':>12}")
    for label, runs in results.items():
        for name, chosen in (("first", runs[:1]), ("steady", runs[1:])):
            medians = [statistics.median(r.steps_ms.get(step, 0.0) for r in chosen) for step in steps]
            total = statistics.median(r.seconds * 1000 for r in chosen)
            print(f"{label:14}{name:>6}" + "".join(f"{m:>11.1f}" for m in medians)
                  + f"{total:>11.1f}{statistics.median(r.statements for r in chosen):>12.0f}")
    for name, part in (("first", slice(0, 1)), ("steady", slice(1, None))):
        on = statistics.median(r.seconds for r in results["triggers on"][part])
        off = statistics.median(r.seconds for r in results["triggers off"][part])
        print(f"ratio on/off, {name} tick: {on / off:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
