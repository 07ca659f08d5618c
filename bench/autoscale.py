"""Benchmark of the autoscale step's pure part, against the plan it follows.

    python bench/autoscale.py                   # 10k and 100k pending jobs
    python bench/autoscale.py --sizes 100k --repeat 5

On bench/plan.py's snapshot (1,000 nodes, 10k running jobs, a few dozen request shapes), with
node types that can add 1,000 CPU nodes and 200 GPU nodes. For each size it prints the median time
of `plan(snapshot)`, the median time of `scale_up` plus `demand` on that plan, their ratio, and
the demand's size (bundles, shapes). The demand is bounded by the node types' max, so its cost
grows with the waiting jobs it looks at, not with the bundles it asks for.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan import snapshot

from job.cli.options import parse_node_type
from job.core import autoscale
from job.core.planner import Snapshot, plan
from job.core.specs import parse_node_types

GIB = 2**30
TYPES = parse_node_types([parse_node_type(text) for text in (
    "cpu=CPU:128,memory:512GiB@ray.io/node-group=cpu:max=1000",
    "gpu=CPU:96,GPU:8,memory:1024GiB,licence:4@ray.io/node-group=gpu@ray.io/accelerator-type=A100:max=200",
)])


def run(pending: int, repeat: int) -> None:
    base = Snapshot.model_validate(snapshot(pending))
    plans, autoscales = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        decided = plan(base)
        middle = time.perf_counter()
        autoscale.scale_up(base, decided, TYPES, {})
        bundles = autoscale.demand(base, decided, TYPES, {})
        end = time.perf_counter()
        plans.append(middle - start)
        autoscales.append(end - middle)
    planned, scaled = statistics.median(plans), statistics.median(autoscales)
    reasons = {}
    for record in decided.waiting:
        reasons[record["reason"]] = reasons.get(record["reason"], 0) + 1
    print(f"{pending:>7} pending  plan {planned * 1000:8.1f} ms  scale_up+demand {scaled * 1000:8.1f} ms  "
          f"ratio {scaled / planned:5.2f}  demand {sum(b['count'] for b in bundles)} bundles in {len(bundles)} shapes  "
          f"waiting {dict(sorted(reasons.items()))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k,100k")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for size in args.sizes.split(","):
        run(int(size.lower().replace("k", "000")), args.repeat)


if __name__ == "__main__":
    main()
