"""Benchmark of a gang's preemption across nodes: the worst case of the victims' search.

    python bench/gang_preemption.py                  # 100, 500 and 1,000 full nodes
    python bench/gang_preemption.py --nodes 1000 --max-preemptions 40 --repeat 5

Every node (CPU 8) is full of low class jobs of CPU 1, all old enough to be stopped, started in a
scattered order; nine high class gangs of four whole-node bundles (STRICT_SPREAD, SPREAD, PACK)
wait. Taking victims in their order frees CPUs all over the cluster long before four nodes are
whole, so the search takes thousands of victims before the gang fits: what it costs is what the
cheap checks before each placement attempt save (core/planner/preemption.py, `_Trial`). Prints
the median time of `plan(snapshot)` and the victims of each preemption decided (none when they
are more than max_preemptions).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from job.core.planner import Snapshot, plan

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def snapshot(nodes: int, max_preemptions: int) -> Snapshot:
    running = [{"id": f"r{i}", "user": f"u{i % 7}", "node": f"n{i // 8:04}", "resources": {"CPU": 1}, "class": "low",
                "started_at": (NOW - timedelta(hours=1, seconds=(i * 7919) % 3000)).isoformat()} for i in range(nodes * 8)]
    pending = [{"id": f"g{j}", "user": "ann", "resources": {}, "bundles": [{"CPU": 8}] * 4, "bundle_strategy": strategy,
                "class": "high", "submitted_at": NOW.isoformat()}
               for j, strategy in enumerate(["STRICT_SPREAD", "SPREAD", "PACK"] * 3)]
    return Snapshot.model_validate({
        "group": {"policy": "drf", "selector": "dispersed", "preemption": "priority", "max_preemptions": max_preemptions,
                  "priority_classes": [{"name": "low", "value": 0}, {"name": "high", "value": 10}], "default_class": "low"},
        "now": NOW.isoformat(), "nodes": [{"id": f"n{i:04}", "resources": {"CPU": 8}} for i in range(nodes)],
        "running": running, "pending": pending})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="100,500,1000", help="full nodes per snapshot, comma-separated")
    parser.add_argument("--max-preemptions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (the median is printed)")
    args = parser.parse_args()
    for nodes in (int(part) for part in args.nodes.split(",")):
        shot = snapshot(nodes, args.max_preemptions)
        times = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            result = plan(shot)
            times.append(time.perf_counter() - began)
        victims = [len(p["victims"]) for p in result.preemptions]
        print(f"nodes={nodes} running={nodes * 8} max_preemptions={args.max_preemptions} "
              f"plan_ms={statistics.median(times) * 1000:.1f} preemptions={victims}")


if __name__ == "__main__":
    main()
