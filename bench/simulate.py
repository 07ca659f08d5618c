"""Benchmark of the simulation (`python -m job simulate`) on generated traces.

    python bench/simulate.py                                  # 10k, 30k and 100k jobs, fifo, drf and fairshare
    python bench/simulate.py --sizes 100k --policies fifo --repeat 3

The cluster is the issue's: 1,000 users on 1,000 nodes of {CPU:32, GPU:8, memory:256GiB}, a tick
every 5 s, the generator's default load (1.0: the trace offers what the nodes can run). Each size
runs in its own process. For each policy it prints the median time of `simulate` (the trace
generated beforehand, the figures computed after), the events simulated (arrivals, starts, ends)
per second, the ticks and plans run, the time per plan, and the ratio of the time to the smallest
size's. Times are given as elapsed and as the process's CPU time: on a machine shared with other
work, the CPU time is the figure that says what the simulation costs; ratios and rates use it.
Last, the largest size's slowest policy against the budget (BUDGET_S, for 100,000 jobs:
bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.plan import size
from job.core.planner.snapshot import Group
from job.core.simulate.cluster import parse_nodes
from job.core.simulate.engine import simulate
from job.core.simulate.generate import generate

NODES = "1000x{CPU:32,GPU:8,memory:256GiB}"
USERS = 1000
# Simulating 100,000 jobs on the 1,000 nodes, per configuration (policy).
BUDGET_S = 40.0


def run_size(count: int, policies: list[str], repeat: int) -> dict:
    nodes = parse_nodes(NODES)
    totals: dict[str, float] = {}
    for node in nodes:
        for name, amount in node.resources.items():
            totals[name] = totals.get(name, 0) + amount
    jobs = generate(count, seed=1, totals=totals, users=USERS)
    figures = {}
    for policy in policies:
        group = Group(policy=policy, selector="dispersed", half_life_s=3600)
        times, cpu_times = [], []
        for _ in range(repeat):
            started, cpu_started = time.perf_counter(), time.process_time()
            outcome = simulate(jobs, nodes, group)
            times.append(time.perf_counter() - started)
            cpu_times.append(time.process_time() - cpu_started)
        figures[policy] = {"seconds": statistics.median(times), "cpu_seconds": statistics.median(cpu_times),
                           "events": outcome.events, "ticks": outcome.ticks, "plans": outcome.plans}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k,30k,100k", help="jobs per trace, comma-separated")
    # Every policy by default: the budget is per configuration, and they plan differently (drf's
    # plans around held reservations were 4x fifo's until only the placeable jobs went in).
    parser.add_argument("--policies", default="fifo,drf,fairshare", help="comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (the median is printed)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    policies = args.policies.split(",")
    if args.one:
        print(json.dumps(run_size(size(args.one), policies, args.repeat)))
        return
    print(f"{USERS} users, nodes {NODES}, a tick every 5 s; median of {args.repeat} run(s)")
    base: dict[str, float] = {}
    last: dict[str, dict] = {}
    for text in args.sizes.split(","):
        # A process per size, so that one size's garbage does not weigh on the next.
        done = subprocess.run([sys.executable, __file__, "--one", text, "--policies", args.policies,
                               "--repeat", str(args.repeat)], check=True, capture_output=True, text=True)
        last = json.loads(done.stdout)
        for policy, figure in last.items():
            seconds = figure["cpu_seconds"]
            base.setdefault(policy, seconds)
            print(f"  {size(text):>8,} jobs  {policy:<9}  {figure['seconds']:7.1f} s ({seconds:.1f} s CPU)"
                  f"  {figure['events'] / seconds:9,.0f} events per CPU second"
                  f"  ticks {figure['ticks']:>6,}  plans {figure['plans']:>6,}"
                  f"  {1000 * seconds / max(figure['plans'], 1):5.1f} ms/plan"
                  f"  x{seconds / base[policy]:5.2f} of the first size", flush=True)
    policy, slowest = max(last.items(), key=lambda item: item[1]["cpu_seconds"])
    print(f"slowest configuration at {size(args.sizes.split(',')[-1]):,} jobs: {policy}, {slowest['seconds']:.1f} s "
          f"({slowest['cpu_seconds']:.1f} s CPU); budget {BUDGET_S:g} s (for 100,000 jobs): ratio "
          f"{slowest['seconds'] / BUDGET_S:.2f} (wall), {slowest['cpu_seconds'] / BUDGET_S:.2f} (CPU)")


if __name__ == "__main__":
    main()
