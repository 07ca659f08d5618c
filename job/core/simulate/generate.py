"""Synthetic traces, so that anyone can try a policy without a trace of their own. Deterministic:
the same arguments and seed give the same jobs.

Users are skewed: user k (from 1) submits with weight 1/k, so a few users submit most jobs, as in
real clusters. Each user has a usual job size (1 to 16 CPUs, a tenth of users GPU jobs of 1 to 8
GPUs) and varies around it; run times are log-normal (median 10 min, a long tail, at most 8 h).
Arrivals are a Poisson process whose rate makes the trace offer `load` times what the cluster can
run on its busiest resource: 1.0 keeps it just busy, more builds a queue, less leaves room."""

from __future__ import annotations

import math
import random

from job.core.simulate.trace import TraceJob

GIB = 2**30
CPU_SIZES = (1, 2, 4, 8, 16)
GPU_SIZES = (1, 2, 4, 8)
MEDIAN_RUN_S = 600.0
RUN_SIGMA = 1.2
MAX_RUN_S = 8 * 3600.0


def generate(count: int, seed: int, totals: dict[str, float], users: int | None = None, load: float = 1.0) -> list[TraceJob]:
    """`count` jobs of `users` users (default: one per 100 jobs, at least 2), for a cluster of
    `totals` (its summed resources: the arrival rate follows from them and `load`)."""
    if count < 1:
        raise ValueError("at least one job")
    if load <= 0:
        raise ValueError("load must be above zero")
    rng = random.Random(seed)
    users = users or max(2, count // 100)
    gpus = totals.get("GPU", 0) > 0
    habits = []
    for _ in range(users):
        if gpus and rng.random() < 0.1:
            habits.append(("GPU", rng.randrange(len(GPU_SIZES))))
        else:
            habits.append(("CPU", rng.randrange(len(CPU_SIZES))))
    names = [f"user{k:04d}" for k in range(1, users + 1)]
    picked = rng.choices(range(users), weights=[1 / k for k in range(1, users + 1)], k=count)
    shapes: list[dict[str, float]] = []
    runs: list[float] = []
    for user in picked:
        kind, usual = habits[user]
        sizes = GPU_SIZES if kind == "GPU" else CPU_SIZES
        size = sizes[min(max(usual + rng.choice((-1, 0, 0, 0, 1)), 0), len(sizes) - 1)]
        if kind == "GPU":
            shapes.append({"CPU": 4 * size, "GPU": size, "memory": 32 * size * GIB})
        else:
            shapes.append({"CPU": size, "memory": 4 * size * GIB})
        runs.append(round(min(rng.lognormvariate(math.log(MEDIAN_RUN_S), RUN_SIGMA), MAX_RUN_S), 1))
    # The span over which arrivals spread: the work asked of the busiest resource over its capacity.
    work = {name: sum(shape.get(name, 0) * run for shape, run in zip(shapes, runs, strict=False)) for name in totals}
    span = max((work[name] / (amount * load) for name, amount in totals.items() if amount > 0), default=0.0)
    rate = count / span if span > 0 else 1.0
    jobs, clock = [], 0.0
    for index, (user, shape, run) in enumerate(zip(picked, shapes, runs, strict=False)):
        jobs.append(TraceJob.at(str(index + 1), names[user], round(clock, 1), shape, run))
        clock += rng.expovariate(rate)
    return jobs
