"""How good and how costly are the estimated starts the tick stores (job/core/estimates.py)?

    python bench/estimates.py                          # 3,000 jobs, fifo and drf, 12 moments
    python bench/estimates.py --jobs 5000 --policies drf --moments 20 --cost 100k

Error: a generated trace (job.core.simulate.generate, load 2.0 so a queue builds) is replayed by the
simulation; that replay is what happened. At moments spread over it, a snapshot of the group as
it was then (the running jobs, the pending ones) is forecast as the tick does it: run times from
the medians of the jobs finished so far (core/estimates.py RunTimes: the user's of the same
request, else the group's; max runtimes unused, the trace has none), the first 1,000 jobs in
line. Each estimate is compared with the start the replay gave the job: median and 90th
percentile of the absolute error, with, as a baseline, the same forecast from the true run times
(what is left is the error of the forecast itself: jobs submitted later unseen, and the head only
carried, backfill behind it unseen; `--carry-all` carries every pending job, to tell the two apart).

Cost: the plan of a snapshot of N pending jobs, and the plan plus the estimates of its first 1,000,
as a tick runs them (medians of CPU time); the ratio is what estimates add to a tick's plan step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from msgspec.structs import replace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.plan import size
from job.core.estimates import RECENT, Finished, RunTimes
from job.core.forecast import forecast
from job.core.planner import Snapshot, plan
from job.core.planner.snapshot import Group, Pending
from job.core.simulate.cluster import parse_nodes
from job.core.simulate.engine import simulate
from job.core.simulate.generate import generate

NODES = "20x{CPU:32,memory:256GiB}"
EVERY_S = 5.0
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
FIRST = 1000


def snapshot_at(records, t: float, nodes, group: Group) -> Snapshot:
    """The group as the replay had it at `t`: what runs, what waits."""
    at = lambda seconds: EPOCH + timedelta(seconds=seconds)  # noqa: E731
    running = [r for r in records if r.start_s is not None and r.start_s <= t < r.end_s]
    pending = [r for r in records if r.submit_s <= t and (r.start_s is None or r.start_s > t)]
    shot = Snapshot.model_validate({
        "group": group.model_dump(), "now": at(t),
        "nodes": [{"id": n.id, "resources": n.resources} for n in nodes],
        "running": [{"id": r.job.id, "user": r.job.user, "node": r.node, "resources": r.job.pending.resources,
                     "started_at": at(r.start_s)} for r in running],
    })
    shot.pending = [Pending(id=r.job.id, user=r.job.user, resources=r.job.pending.resources, submitted_at=at(r.submit_s),
                            node_labels={}) for r in pending]
    return shot


def errors(records, t: float, nodes, group: Group, oracle: bool, carried: int | None) -> tuple[list[float], int]:
    """The absolute errors of the estimates at `t` (s), and how many had no estimate."""
    shot = snapshot_at(records, t, nodes, group)
    by_id = {r.job.id: r for r in records}
    done = sorted((r for r in records if r.end_s is not None and r.end_s <= t), key=lambda r: -r.end_s)[:RECENT]
    known = RunTimes(Finished(r.job.user, r.job.pending.resources, r.end_s - r.start_s) for r in done)

    def run_time(ident: str) -> float | None:
        job = by_id[ident].job
        return job.run_s if oracle else known.of(job.user, job.pending.resources, None).seconds

    ends = {}
    for job in shot.running:
        run = run_time(job.id)
        ends[job.id] = None if run is None else job.started_at + timedelta(seconds=run)
    estimates = forecast(shot, ends, {job.id: run_time(job.id) for job in shot.pending}, first=FIRST,
                         every_s=EVERY_S, carried=carried)
    found, unknown = [], 0
    for estimate in estimates:
        actual = by_id[estimate.job].start_s
        if estimate.start is None:
            unknown += 1
        elif actual is not None:
            found.append(abs((estimate.start - EPOCH).total_seconds() - actual))
    return found, unknown


def accuracy(count: int, policy: str, moments: int, carried: int | None) -> None:
    nodes = parse_nodes(NODES)
    totals: dict[str, float] = {}
    for node in nodes:
        for name, amount in node.resources.items():
            totals[name] = totals.get(name, 0) + amount
    jobs = generate(count, seed=7, totals=totals, load=2.0)
    group = Group(policy=policy, selector="dispersed")
    outcome = simulate(jobs, nodes, group, every_s=EVERY_S)
    span = max(record.submit_s for record in outcome.records)
    # From a fifth of the trace on (medians need finished jobs), on the tick grid.
    times = [round((span * (0.2 + 0.8 * k / moments)) / EVERY_S) * EVERY_S for k in range(moments)]
    for label, oracle in (("medians of finished jobs", False), ("true run times (baseline)", True)):
        found, unknown, pending = [], 0, []
        for t in times:
            errs, missing = errors(outcome.records, t, nodes, group, oracle, carried)
            found += errs
            unknown += missing
            pending.append(len(errs) + missing)
        found.sort()
        print(f"{policy:9} {label:27} estimates {len(found):6}  unknown {unknown:4}  "
              f"median |error| {statistics.median(found) / 60:7.1f} min  "
              f"p90 {found[int(len(found) * 0.9)] / 60:7.1f} min  (head per moment: median {statistics.median(pending):.0f})")


def cost(pending: int, repeat: int) -> None:
    nodes = parse_nodes(NODES)
    group = Group(policy="drf", selector="dispersed")
    jobs = generate(pending, seed=3, totals={"CPU": 640, "memory": 640 * 8 * 2**30}, load=1.0)
    # All submitted, nothing started: the whole trace waits, as a tick at 100k pending sees it.
    now = max(job.pending.submitted_at for job in jobs) + timedelta(seconds=1)
    shot = Snapshot.model_validate({"group": group.model_dump(), "now": now,
                                    "nodes": [{"id": n.id, "resources": n.resources} for n in nodes]})
    shot.pending = [replace(j.pending, node_labels={}) for j in jobs]
    runs = {j.id: 600.0 for j in jobs}
    plans, withs = [], []
    for _ in range(repeat):
        started = time.process_time()
        decided = plan(shot)
        planned = time.process_time()
        forecast(shot, {}, runs, first=FIRST, every_s=EVERY_S, carried=FIRST, order=decided)
        plans.append(planned - started)
        withs.append(time.process_time() - started)
    p, w = statistics.median(plans), statistics.median(withs)
    print(f"cost at {pending:,} pending: plan {p:.2f} s, plan + estimates of the first {FIRST:,} {w:.2f} s "
          f"(x{w / p:.2f}; CPU time, median of {repeat})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--policies", default="fifo,drf")
    parser.add_argument("--moments", type=int, default=12)
    parser.add_argument("--cost", default="10k,100k", help="pending counts to time (empty: none)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--carry-all", action="store_true",
                        help="the forecast carries every pending job, not the first 1,000 (what the cap costs)")
    args = parser.parse_args()
    for policy in args.policies.split(","):
        accuracy(args.jobs, policy, args.moments, None if args.carry_all else FIRST)
    for count in filter(None, args.cost.split(",")):
        cost(size(count), args.repeat)


if __name__ == "__main__":
    main()
