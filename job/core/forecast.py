"""When will the first jobs in line start? The simulation (core/simulate) run forward from a
snapshot: the same planner, tick after tick, the running jobs ending when they are expected to.

Given the planner's snapshot (with `now`), the expected end of each running job and the expected
run time of each pending job (None, or missing: unknown), it returns, for the first `first` jobs
in plan order, their position and estimated start. Plan order is the order of the plan at `now`:
the jobs it places, then the waiting ones as the planner considered them.

A job with bundles, running or pending, counts its whole footprint: a running one holds each
bundle on its node (`bundle_nodes`). A job of unknown run time, running or started on the way, is
taken never to end: what can start only once it ends gets no estimate (None), rather than a guess.
Reservations for the head of the line are the planner's, in the simulation as in the tick: those of
the snapshot are kept on their nodes, and a job's wait counts from its `waiting_since`. Victims of a
preemption stop at the
next tick, as in the simulation. Pure: no clock (the snapshot's `now`), deterministic.

`carried`: how many pending jobs, in plan order, the simulation carries (None: all). The tick
carries its head only, so that the cost stays that of `first` jobs however long the queue: a job
further back that would start early by backfill is then not seen taking its room, and the
estimates of the head may come out early by that much. `order`: the plan of the snapshot, if
already made (the tick's), not made again.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import chain, compress, islice
from operator import attrgetter

from job.core.planner import Plan, Snapshot, plan
from job.core.planner import snapshot as planned
from job.core.simulate.engine import RunningAtStart, Start, simulate
from job.core.simulate.trace import TraceJob
from job.core.units import LATEST_TIME


def among(jobs: list[planned.Pending], ids: set[str]) -> Iterator[planned.Pending]:
    """The jobs whose id is in `ids`, in their order: tested in C, as the head of a line of 100k is
    picked out of it at every tick."""
    return compress(jobs, map(ids.__contains__, map(_ID, jobs)))


_ID = attrgetter("id")


@dataclass(frozen=True, slots=True)
class Estimate:
    job: str
    position: int  # 1 for the first in plan order
    start: datetime | None  # None: depends on a run time that is not known, or is past LATEST_TIME
    # Not started by LATEST_TIME, where the simulation stops.
    later: bool = False


def forecast(snapshot: Snapshot, ends: Mapping[str, datetime | None], run_times: Mapping[str, float | None],
             first: int = 10, every_s: float = 5.0, carried: int | None = None,
             order: Plan | None = None, carried_jobs: list[planned.Pending] | None = None) -> list[Estimate]:
    """`carried_jobs`: the snapshot's pending jobs among the first `carried` of `order`, in the
    snapshot's order, where the caller picked them out already (a second pass over a line of 100k
    costs as much as the forecast of its head)."""
    now = snapshot.now
    if now is None:
        raise ValueError("the snapshot needs its now")
    order = plan(snapshot) if order is None else order
    # Of a line of 100k, only its head is read.
    in_line = [entry["job"] for entry in islice(chain(order.placements, order.waiting), None if carried is None
                                                else max(first, carried))]
    head = in_line[:first]
    if not head:
        return []
    kept = None if carried is None else set(in_line[:carried])

    pending = [TraceJob(job, math.inf if (run_s := run_times.get(job.id)) is None else run_s)
               for job in (snapshot.pending if kept is None
                           else carried_jobs if carried_jobs is not None else among(snapshot.pending, kept))]
    running = [RunningAtStart(job, None if (end := ends.get(job.id)) is None else max((end - now).total_seconds(), 0.0))
               for job in snapshot.running]
    start = Start(epoch=now, running=running, state=snapshot.state, reservations=list(snapshot.reservations))
    # Not past LATEST_TIME: a thousand jobs ahead of a 100-year max runtime each would take the
    # simulation's clock past what a datetime holds.
    horizon_s = (LATEST_TIME - now).total_seconds()
    outcome = simulate(pending, snapshot.nodes, snapshot.group, users=snapshot.users, every_s=every_s, start=start,
                       accounts=snapshot.accounts, until_s=horizon_s)
    first_start = {}
    for record in outcome.records:
        # A run stopped with no start (Ray had not started the job) is no start.
        runs = [start_s for _, start_s, _ in record.stopped if start_s is not None] + (
            [record.start_s] if record.start_s is not None else [])
        if runs:
            first_start[record.job.id] = runs[0]
    cut = outcome.end_s == horizon_s
    return [Estimate(job=ident, position=position, later=cut and ident not in first_start,
                     start=None if ident not in first_start else now + timedelta(seconds=first_start[ident]))
            for position, ident in enumerate(head, start=1)]

