"""Benchmark of the tick's record (`record_ticks`, after a tick's steps): one group's row with the
nodes it saw, 10,000 by default, against the same row with no node, alternately.

    python bench/record.py
    python bench/record.py --nodes 1000 --repeat 31

Each record is written and committed as a tick writes it; printed: the medians of wall and CPU
time of each, the cost of the nodes (the difference) per 1,000 nodes, and whether it stays within
the budget (bench/README.md).

PostgreSQL: JOB_DATABASE_URL's server, else an embedded one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from psycopg.types.json import Jsonb
from tick import fresh_database, postgres_server, size

from job.scheduler.report import GroupResult
from job.scheduler.ticks import record_ticks

# The nodes' share of a tick's record, per 1,000 nodes: CPU in this process.
BUDGET_CPU_MS = 10.0


def nodes(count: int) -> list[dict]:
    """As a tick sees them (scheduler/tick.py): the id, the resources and the free amounts."""
    made = []
    for i in range(count):
        ip = f"node:10.0.{i // 256}.{i % 256}"
        made.append({"id": f"{i:056x}", "resources": {"CPU": 32.0, "GPU": 4.0, "memory": 137438953472.0,
                                                      "object_store_memory": 2e9, ip: 1.0},
                     "free": {"CPU": 12.0, "GPU": 1.0, "memory": 3e10, "object_store_memory": 2e9, ip: 1.0}})
    return made


def result(seen: list[dict]) -> GroupResult:
    return GroupResult(group="bench", status="ticked", seconds=0.3, steps_ms={"observe": 100.0, "plan": 100.0},
                       placed=3, running=100, nodes=seen)


def measure(url: str, count: int, repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of a record with `count` nodes and with none, run alternately."""
    times: dict[str, list[tuple[float, float]]] = {"nodes": [], "none": []}
    rows = {"nodes": [result(nodes(count))], "none": [result([])]}
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('bench', %s)",
                     (Jsonb([{"name": "c", "address": "http://127.0.0.1:8265"}]),))
        conn.commit()
        for _ in range(repeat):
            for label, row in rows.items():
                wall, cpu = time.perf_counter(), time.process_time()
                record_ticks(conn, row)
                times[label].append((time.perf_counter() - wall, time.process_time() - cpu))
        # A record with no node empties the lists before it: the last one written holds them.
        record_ticks(conn, rows["nodes"])
        stored = conn.execute("SELECT nodes FROM ticks ORDER BY id DESC LIMIT 1").fetchone()
        assert stored is not None and stored[0] == rows["nodes"][0].nodes, "the nodes read back as written"
    return {label: (statistics.median(t[0] for t in runs), statistics.median(t[1] for t in runs))
            for label, runs in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10k")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    count = size(args.nodes)
    with postgres_server() as server_url:
        figures = measure(fresh_database(server_url, "bench_record"), count, args.repeat)
    (wall, cpu), (wall_none, cpu_none) = figures["nodes"], figures["none"]
    per_1k = (cpu - cpu_none) * 1000 / (count / 1000)
    print(f"record with {count:,} nodes: wall {wall * 1000:.1f} ms, CPU {cpu * 1000:.1f} ms")
    print(f"record with no node (baseline): wall {wall_none * 1000:.1f} ms, CPU {cpu_none * 1000:.1f} ms")
    print(f"ratio: wall {wall / wall_none:.1f}x, CPU {cpu / cpu_none:.1f}x; "
          f"the nodes cost {per_1k:.2f} ms of CPU per 1,000 (budget {BUDGET_CPU_MS:.0f} ms)")
    within = per_1k <= BUDGET_CPU_MS
    print("verdict:", "within budget" if within else "OVER BUDGET")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
