"""Benchmark of the planner on synthetic snapshots.

    python bench/plan.py                        # 10k, 100k and 1M pending jobs, every policy and selector
    python bench/plan.py --sizes 10k,100k --repeat 5
    python bench/plan.py --sizes 100k --preemption  # also with classes and preemption, against without

Each size runs in its own process, so that its peak memory (max RSS) is its own. The snapshot has
1,000 users, 1,000 nodes, 10k running jobs and a few dozen request shapes. For each policy and
selector it prints the median time of `plan(snapshot)`, the median time of `json.loads` on the
same snapshot's JSON, and their ratio; per size, the median time of `Snapshot.from_json` on the
JSON's bytes (parsing and validation in one pass, as `python -m job plan` reads a file) and of
`Snapshot.model_validate` on the loaded dict (the way in for dicts), each with the cyclic collector
paused as `python -m job plan` pauses it, the peak memory of one plan (tracemalloc) and the
process's max RSS. Times are wall and, in brackets, the
process's CPU time, which the load of a shared machine does not inflate. Last, over the sizes: the
largest one's slowest plan, its growth from the size before and its validation per million jobs
(of the loaded dict; from JSON, parsing included, beside json.loads) against the budgets (bench/README.md: for
1,000,000 jobs after 100,000), and a line saying which budgets hold.

With --accounts, each policy and selector also plans the same snapshot with its 1,000 users in a
tree of accounts (4 divisions of 5 teams, 50 users a team), and prints the time beside the flat
plan: the ratio is what fair share down the tree costs.

With --preemption, each policy and selector also plans the same snapshot with two priority classes
(1% of pending jobs high, every running job low and started an hour ago) under `priority` and
`fairshare` preemption, and prints the time beside the plan without classes: the ratio is what
classes and preemption cost.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from job.core import collection
from job.core.planner import Snapshot, plan

POLICIES = ("fifo", "lifo", "drf", "fairshare")
SELECTORS = ("legacy", "concentrated", "dispersed", "roundrobin")
GIB = 2**30
# For 1,000,000 pending jobs (bench/README.md): the plan, its growth from 100,000, the
# snapshot's validation per million jobs, the process's peak memory.
PLAN_BUDGET_S = 4.0
GROWTH_BUDGET = 11.0
VALIDATE_BUDGET_S = 1.0
RSS_BUDGET_GIB = 1.5
# The line a size's process gives its figures on, for the budgets.
FIGURES = "figures: "
NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def shapes() -> list[tuple[dict, dict]]:
    """A few dozen distinct (resources, node_labels) requests."""
    cpu_jobs = [({"CPU": cpu, "memory": cpu * mem * GIB}, {}) for cpu in (0.5, 1, 2, 4, 8, 16) for mem in (1, 2, 4, 8)]
    gpu_jobs = [({"CPU": 8 * gpu, "GPU": gpu, "memory": 64 * gpu * GIB}, {}) for gpu in (1, 2, 4, 8)]
    a100_jobs = [({"CPU": 4, "GPU": gpu, "memory": 32 * GIB}, {"ray.io/accelerator-type": "A100"}) for gpu in (1, 2)]
    custom = [({"CPU": 1, "licence": 1}, {})]
    return cpu_jobs + gpu_jobs + a100_jobs + custom


def _nodes(rng: random.Random) -> list[dict]:
    """1,000 nodes: every fifth a GPU node, the rest CPU nodes of three sizes, some with a licence."""
    nodes = []
    for i in range(1000):
        if i % 5 == 0:
            accelerator = "A100" if i % 10 == 0 else "H100"
            resources = {"CPU": 96, "GPU": 8, "memory": 1024 * GIB}
            labels = {"ray.io/node-group": "gpu", "ray.io/accelerator-type": accelerator}
        else:
            resources = {"CPU": rng.choice((32, 64, 128)), "memory": rng.choice((128, 256, 512)) * GIB}
            labels = {"ray.io/node-group": "cpu"}
        if i % 50 == 1:
            resources["licence"] = 4
        resources[f"node:10.0.{i // 256}.{i % 256}"] = 1
        nodes.append({"id": f"{i:040x}", "resources": resources, "labels": labels})
    return nodes


def _running(rng: random.Random, nodes: list[dict], kinds: list, users: list[str]) -> list[dict]:
    """10,000 running jobs of the smaller kinds, each on a node with room for it."""
    running: list[dict] = []
    free = [dict(node["resources"]) for node in nodes]
    while len(running) < 10_000:
        resources, _ = rng.choice(kinds[:24])
        index = rng.randrange(len(nodes))
        if all(free[index].get(r, 0) >= a for r, a in resources.items()):
            for r, a in resources.items():
                free[index][r] -= a
            running.append({"id": f"r{len(running)}", "user": rng.choice(users), "node": nodes[index]["id"],
                            "resources": resources})
    return running


def _pending(rng: random.Random, pending: int, kinds: list, users: list[str]) -> list[dict]:
    """`pending` jobs, mostly small, half of them from a few heavy users; one in 100 not before an hour."""
    jobs = []
    for j in range(pending):
        resources, labels = kinds[min(int(rng.expovariate(0.12)), len(kinds) - 1)]
        job = {
            "id": str(100_000 + j),
            "user": users[min(int(rng.paretovariate(1.2)) - 1, 999)] if j % 2 else rng.choice(users),
            "resources": resources,
            "priority": rng.choice((0, 0, 0, 0, 1, 2)),
            "submitted_at": (NOW - timedelta(seconds=rng.randrange(86_400))).isoformat(),
        }
        if labels:
            job["node_labels"] = labels
        if j % 100 == 0:
            job["not_before"] = (NOW + timedelta(hours=1)).isoformat()
        jobs.append(job)
    return jobs


def snapshot(pending: int, policy: str = "drf", selector: str = "dispersed", seed: int = 1) -> dict:
    rng = random.Random(seed)
    nodes = _nodes(rng)
    kinds = shapes()
    users = [f"user{u:04d}" for u in range(1000)]
    running = _running(rng, nodes, kinds, users)
    jobs = _pending(rng, pending, kinds, users)
    user_specs = {name: {"shares": rng.choice((1, 1, 2, 4)), "usage": rng.uniform(0, 10_000)} for name in users}
    for name in users[::20]:
        user_specs[name]["max_running"] = 20
    for name in users[5::20]:
        user_specs[name]["max_resources"] = {"CPU": 64, "GPU": 4}
    return {
        "group": {"name": "bench", "policy": policy, "selector": selector, "half_life_s": 3600, "max_running_per_user": 200},
        "now": NOW.isoformat(),
        "nodes": nodes,
        "running": running,
        "pending": jobs,
        "users": user_specs,
        "state": {"selector.roundrobin": {"next_index": {"": 17}}},
    }


def median_time(function, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `function()`. Its result is freed after the clock stops: freeing
    a million validated jobs (0.25-0.35 s) is not their validation, nor freeing a plan planning."""
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = function()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        del result
    return statistics.median(times), statistics.median(cpu)


def validate(loaded: dict) -> Snapshot:
    with collection.paused():
        return Snapshot.model_validate(loaded)


def read(data: bytes) -> Snapshot:
    with collection.paused():
        return Snapshot.from_json(data)


def with_preemption(shot: Snapshot, mode: str) -> Snapshot:
    classes = [{"name": "low", "value": 0}, {"name": "high", "value": 10}]
    group = shot.group.model_validate({**shot.group.model_dump(), "priority_classes": classes, "default_class": "low",
                                       "preemption": mode})
    started = (NOW - timedelta(hours=1)).isoformat()
    document = shot.model_dump()
    running = [{**job, "started_at": started} for job in document["running"]]
    pending = [{**job, "class": "high"} if index % 100 == 7 else job for index, job in enumerate(document["pending"])]
    return Snapshot.model_validate({**document, "group": group.model_dump(), "running": running, "pending": pending})


def with_accounts(shot: Snapshot) -> Snapshot:
    """The snapshot with its users in 4 divisions of 5 teams each, 50 users a team."""
    accounts = {f"div{d}": {"shares": 1 + d % 2} for d in range(4)}
    accounts.update({f"team{t}": {"parent": f"div{t // 5}", "shares": 1 + t % 3} for t in range(20)})
    users = {name: {**spec.model_dump(), "account": f"team{index // 50}"} for index, (name, spec) in
             enumerate(sorted(shot.users.items()))}
    return Snapshot.model_validate({**shot.model_dump(), "users": users, "accounts": accounts})


def run_size(pending: int, repeat: int, policies, selectors, preemption: bool = False, teams: bool = False) -> dict:
    document = snapshot(pending)
    text = json.dumps(document)
    del document
    load, load_cpu = median_time(partial(json.loads, text), repeat)
    data = text.encode()
    del text
    decoded, decoded_cpu = median_time(partial(read, data), repeat)
    # The text is not held while the dict is (nor the dict with the text before): the process's
    # peak memory stays that of a plan's.
    loaded = json.loads(data)
    del data
    validated, validated_cpu = median_time(partial(validate, loaded), repeat)
    base = validate(loaded)
    del loaded
    print(f"pending {pending:>9,}: json.loads {load:7.3f}s ({load_cpu:.3f}s CPU)  Snapshot.from_json (parse + validation) "
          f"{decoded:7.3f}s ({decoded_cpu:.3f}s CPU)  Snapshot.model_validate of the loaded dict {validated:7.3f}s "
          f"({validated_cpu:.3f}s CPU)", flush=True)
    first, slowest = None, (0.0, 0.0, "")
    for policy in policies:
        for selector in selectors:
            group = base.group.model_copy(update={"policy": policy, "selector": selector})
            shot = base.model_copy(update={"group": group})
            seconds, cpu = median_time(partial(plan, shot), repeat)
            result = plan(shot)
            first = first or (shot, policy, selector)
            slowest = max(slowest, (seconds, cpu, f"{policy}/{selector}"))
            print(
                f"  {policy:<9} {selector:<12} plan {seconds:7.3f}s ({cpu:.3f}s CPU)  ratio to load {seconds / load:5.2f}"
                f"  placed {len(result.placements):>6,}  waiting {len(result.waiting):>9,}",
                flush=True,
            )
            if teams:
                tree = with_accounts(shot)
                down, _ = median_time(partial(plan, tree), repeat)
                print(f"    + accounts (4x5 teams) plan {down:7.3f}s  ratio to flat {down / seconds:5.2f}  "
                      f"placed {len(plan(tree).placements):>6,}", flush=True)
            for mode in ("priority", "fairshare") if preemption else ():
                classed = with_preemption(shot, mode)
                with_classes, _ = median_time(partial(plan, classed), repeat)
                result = plan(classed)
                print(f"    + classes, preemption {mode:<9} plan {with_classes:7.3f}s  ratio to no classes "
                      f"{with_classes / seconds:5.2f}  placed {len(result.placements):>6,}  "
                      f"preemptions {len(result.preemptions):>3} ({sum(len(p['victims']) for p in result.preemptions)} victims)",
                      flush=True)
    shot, policy, selector = first
    tracemalloc.start()
    plan(shot)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"  peak memory: one plan ({policy}/{selector}) {peak / 2**20:,.0f} MiB; "
          f"process max RSS {rss / 2**20:,.0f} MiB", flush=True)
    return {"pending": pending, "plan": slowest[0], "plan_cpu": slowest[1], "which": slowest[2], "decode": decoded,
            "decode_cpu": decoded_cpu, "load": load, "load_cpu": load_cpu, "validate": validated,
            "validate_cpu": validated_cpu, "rss": rss}


def budgets(figures: list[dict]) -> None:
    """The largest size against the budgets, its growth from the size before it."""
    last = figures[-1]
    million = 1e6 / last["pending"]
    print(f"at {last['pending']:,} pending: slowest plan ({last['which']}) {last['plan']:.3f}s ({last['plan_cpu']:.3f}s CPU), "
          f"budget {PLAN_BUDGET_S:g}s; validation per million (the loaded dict) {last['validate'] * million:.3f}s "
          f"({last['validate_cpu'] * million:.3f}s CPU), budget {VALIDATE_BUDGET_S:g}s; from JSON, parsing included, "
          f"{last['decode'] * million:.3f}s ({last['decode_cpu'] * million:.3f}s CPU) where json.loads alone takes "
          f"{last['load'] * million:.3f}s; "
          f"max RSS {last['rss'] / GIB:.2f} GiB, budget {RSS_BUDGET_GIB:g} GiB")
    checked = {"plan": last["plan"] <= PLAN_BUDGET_S, "validation": last["validate"] * million <= VALIDATE_BUDGET_S,
               "memory": last["rss"] / GIB <= RSS_BUDGET_GIB}
    if len(figures) > 1:
        before = figures[-2]
        growth = last["plan"] / before["plan"]
        print(f"growth from {before['pending']:,}: {growth:.1f}x ({last['plan_cpu'] / before['plan_cpu']:.1f}x CPU) "
              f"for {last['pending'] / before['pending']:g}x the jobs, budget {GROWTH_BUDGET:g}x")
        checked["growth"] = growth <= GROWTH_BUDGET
    print("budgets: " + ", ".join(f"{name} {'within' if held else 'over'}" for name, held in checked.items()))


def size(text: str) -> int:
    text = text.strip().lower()
    for suffix, factor in (("k", 1_000), ("m", 1_000_000)):
        if text.endswith(suffix):
            return int(float(text[:-1]) * factor)
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k,100k,1M", help="pending jobs per snapshot, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (the median is printed)")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--selectors", default=",".join(SELECTORS))
    parser.add_argument("--preemption", action="store_true", help="also plan with priority classes and preemption")
    parser.add_argument("--accounts", action="store_true", help="also plan with the users in a tree of accounts")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    policies, selectors = args.policies.split(","), args.selectors.split(",")
    if args.one:
        figures = run_size(size(args.one), args.repeat, policies, selectors, args.preemption, args.accounts)
        print(FIGURES + json.dumps(figures))
        return
    figures = []
    for text in args.sizes.split(","):
        # A process per size: its max RSS is then this size's peak memory.
        done = subprocess.run(
            [sys.executable, __file__, "--one", text, "--repeat", str(args.repeat), "--policies", args.policies,
             "--selectors", args.selectors, *(["--preemption"] if args.preemption else []),
             *(["--accounts"] if args.accounts else [])],
            check=True, stdout=subprocess.PIPE, text=True,
        )
        for line in done.stdout.splitlines():
            if line.startswith(FIGURES):
                figures.append(json.loads(line.removeprefix(FIGURES)))
            else:
                print(line, flush=True)
    budgets(figures)


if __name__ == "__main__":
    main()
