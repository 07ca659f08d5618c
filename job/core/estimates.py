"""Position and estimated start of the first pending jobs, as the tick stores them with each job.

How long a job should run (its basis): its max runtime when set; else the median run time of its
user's recent finished jobs of the same request; else the median of the group's recent finished
jobs; else unknown, and said so. The forecast (core/forecast.py) runs the planner forward with
those; here, the run times, the sentence each estimate is explained by, and the rows to write.
Pure: the rows come in, the values go out.
"""

from __future__ import annotations

import heapq
import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import chain, islice
from typing import Any

from job.core.forecast import Estimate, among, forecast
from job.core.job import ActiveJob
from job.core.planner import Plan, Snapshot
from job.core.states import RUNNING
from job.core.units import LATEST_TIME

# How many pending jobs of a group get an estimate, and how many recent finished jobs it rests on.
FIRST = 1000
RECENT = 500
# Of the group's recent finished jobs (newest first), how many of one user and request make a median.
PER_USER = 20
MAX_RUNTIMES = "max runtimes"
GROUP = "the group's recent run times"


@dataclass(frozen=True, slots=True)
class RunTime:
    seconds: float | None  # None: not known
    basis: str  # where the seconds come from (MAX_RUNTIMES, "bob's recent run times", GROUP), or why unknown


@dataclass(frozen=True, slots=True)
class Finished:
    """A recent finished job of the group: who, what it asked for, how long it ran."""

    user: str
    resources: Mapping[str, Any]
    seconds: float
    bundles: list[Mapping[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class Stored:
    """What a pending job carries: its place in line, when it should start, and why then."""

    position: int | None
    start: datetime | None
    basis: str | None


NOTHING = Stored(None, None, None)


def _request(resources: Mapping[str, Any], bundles: Iterable[Mapping[str, Any]] | None) -> tuple:
    """A job's whole request, its driver's and its bundles': jobs alike in both run alike."""
    return tuple(sorted(resources.items())), tuple(tuple(sorted(bundle.items())) for bundle in bundles or ())


class RunTimes:
    """Expected run times from the group's recent finished jobs (newest first)."""

    def __init__(self, recent: Iterable[Finished]):
        self.by_request: dict[tuple[str, tuple], list[float]] = {}
        seconds = []
        for job in recent:
            seconds.append(job.seconds)
            runs = self.by_request.setdefault((job.user, _request(job.resources, job.bundles)), [])
            if len(runs) < PER_USER:
                runs.append(job.seconds)
        self.group = statistics.median(seconds) if seconds else None

    def of(self, user: str, resources: Mapping[str, Any], max_runtime_s: float | None,
           bundles: Iterable[Mapping[str, Any]] | None = None) -> RunTime:
        if max_runtime_s is not None:
            return RunTime(float(max_runtime_s), MAX_RUNTIMES)
        runs = self.by_request.get((user, _request(resources, bundles)))
        if runs:
            return RunTime(statistics.median(runs), f"{user}'s recent run times")
        if self.group is not None:
            return RunTime(self.group, GROUP)
        return RunTime(None, "no max runtime and no recent finished job in the group")


def expected_end(job: ActiveJob, now: datetime, run_times: RunTimes | None) -> dict:
    """When a placed job is expected to end, what a reservation for the head of the line counts on
    (docs/planner.md, "Reservations and backfill"): its start plus its max runtime where set, else
    its run time as `run_times` estimate it; none when neither is known. A job not started yet
    counts from when Ray accepted it (not sent yet: now), not from each tick's now: while Ray was
    slow to start drivers, an end that moved with the clock moved the reservation's start with it,
    and each backfilled job let the next one in, so the reserved job never started."""
    seconds = job.max_runtime_s
    if seconds is None and run_times is not None:
        seconds = run_times.of(job.user_name, job.resources, None, job.bundles).seconds
    if seconds is None:
        return {}
    started = (job.started_at if job.state == RUNNING and job.started_at is not None
               else job.accepted_at or now)
    return {"expected_end": started + timedelta(seconds=seconds)}


def explain(estimates: list[Estimate], running: Mapping[str, RunTime], pending: Mapping[str, RunTime],
            placed: int) -> dict[str, Stored]:
    """Each estimate as stored (jobs placed by this tick, the first `placed` in plan order, are not
    in line any more: positions count from the first job left waiting). The basis names the run
    times the start rests on: the running jobs' and those of the jobs ahead in line; an estimate
    that is unknown names the first of those whose run time is not known."""
    stored = {}
    ahead = dict(running)
    for estimate in estimates:
        if estimate.position > placed:
            if estimate.later:
                basis = f"unknown: later than {LATEST_TIME:%Y-%m-%d}, the last time the queue plans for"
            elif estimate.start is None:
                blocker = next((job for job, run in ahead.items() if run.seconds is None), None)
                basis = ("unknown: waits on a job whose run time is not known" if blocker is None else
                         f"unknown: waits on job {blocker}, whose run time is not known ({ahead[blocker].basis})")
            else:
                known = sorted({run.basis for run in ahead.values() if run.seconds is not None})
                basis = f"from {', '.join(known)}" if known else "from the plan: nothing ahead of it runs"
            stored[estimate.job] = Stored(estimate.position - placed, estimate.start, basis)
        ahead[estimate.job] = pending[estimate.job]
    return stored


def rounded(moment: datetime) -> datetime:
    """To the minute: an estimate is read as a time of day, and its seconds would change at every
    tick (the virtual clock's ticks fall where the real one's do), rewriting every row."""
    return (moment + timedelta(seconds=30)).replace(second=0, microsecond=0)


def changes(before: Mapping[int, Stored], after: Mapping[str, Stored]) -> dict[int, Stored]:
    """The pending jobs whose stored estimate is not what it was: id -> the new one (NOTHING: cleared,
    for a job that fell out of the head of the line)."""
    found = {}
    for job_id in before.keys() | {int(job) for job in after}:
        now = after.get(str(job_id), NOTHING)
        if now.start is not None:
            now = Stored(now.position, rounded(now.start), now.basis)
        if before.get(job_id, NOTHING) != now:
            found[job_id] = now
    return found


@dataclass(frozen=True, slots=True)
class WaitingOn:
    """A pending job its dependencies hold out of the plan: the jobs it still waits for, by id,
    and what its own run time is read from."""

    waits_for: list[str]
    user: str
    resources: Mapping[str, Any]
    max_runtime_s: float | None
    bundles: list[Mapping[str, Any]] | None = None

    @classmethod
    def of_row(cls, row: Any, waits_for: list[str]) -> WaitingOn:
        """Of a pending row as the tick reads it (job.PendingRow: its request is JSON text)."""
        return cls(waits_for, row.user_name, json.loads(row.resources), row.max_runtime_s,
                   json.loads(row.bundles) if row.bundles else None)


@dataclass(frozen=True, slots=True)
class Room:
    """Room for `size` jobs at once, held by the jobs `holding` (by id): an array's throttle, a
    cluster's driver cap. `basis`: the basis of the estimate of a job that waits for it."""

    size: int
    holding: list[str]
    basis: str


@dataclass(frozen=True, slots=True)
class Rooms:
    """Jobs held back for want of a room of their own (`Room`), and those rooms by name: the jobs
    in the order they go, each with the rooms it may take and what its run time is read from."""

    rooms: dict[str, Room] = field(default_factory=dict)
    waiting: list[tuple[str, list[str], WaitingOn]] = field(default_factory=list)

    def __add__(self, other: Rooms) -> Rooms:
        return Rooms({**self.rooms, **other.rooms}, [*self.waiting, *other.waiting])


def estimate(snapshot: Snapshot, decided: Plan, active: list[ActiveJob], pending: list, recent: Iterable[Finished],
             first: int = FIRST, every_s: float = 5.0, held: Mapping[str, WaitingOn] | None = None,
             rooms: Rooms = Rooms()) -> dict[int, Stored]:
    """The stored estimates a tick changes: the forecast of the first `first` jobs in plan order
    (`decided`, the plan of `snapshot`), from the active jobs and pending rows (PendingRow) read:
    only those with a stored estimate count (the tick gives those alone). A job `held` by its
    dependencies starts no sooner than the expected end of each job it waits for (`after_ends`),
    one held back for want of a room (`rooms`) when the first of its rooms comes free (`room_ends`)."""
    known = RunTimes(recent)
    now = snapshot.now
    if now is None:  # as forecast says it, before the active jobs' ends are taken from it
        raise ValueError("the snapshot needs its now")
    running: dict[str, RunTime] = {}
    ends: dict[str, datetime | None] = {}
    for job in active:
        run = running[str(job.id)] = known.of(job.user_name, job.resources, job.max_runtime_s, job.bundles)
        # Not started yet (submitted to Ray): taken to start now.
        ends[str(job.id)] = None if run.seconds is None else (job.started_at or now) + timedelta(seconds=run.seconds)
    # Only the head of the line is carried by the forecast: the run times of the rest are never read.
    head = {entry["job"] for entry in islice(chain(decided.placements, decided.waiting), first)}
    head_jobs = list(among(snapshot.pending, head))
    runs = {job.id: known.of(job.user, job.resources, job.max_runtime_s, job.bundles or None)
            for job in head_jobs}
    estimates = forecast(snapshot, ends, {job: run.seconds for job, run in runs.items()}, first=first, every_s=every_s,
                         carried=first, order=decided, carried_jobs=head_jobs)
    before = {row.id: Stored(row.queue_position, row.estimated_start_at, row.estimate_basis) for row in pending
              if row.queue_position is not None or row.estimate_basis is not None}
    stored = explain(estimates, running, runs, len(decided.placements))
    if held or rooms.waiting:
        for estimate in estimates:
            head_run = runs.get(estimate.job)
            ends[estimate.job] = (None if estimate.start is None or head_run is None or head_run.seconds is None
                                  else estimate.start + timedelta(seconds=head_run.seconds))
        stored.update(room_ends(rooms, ends, known))
        stored.update(after_ends(held or {}, ends, known))
    return changes(before, stored)


def throttled_arrays(rows: Mapping[int, Any], held: Any, active: Iterable[ActiveJob]) -> Rooms:
    """The arrays the throttle held back this tick (`held`: arrays.throttle's answer over the pending
    rows, `rows` by id), a room each, held by its tasks active and those given to the planner. Of
    their held tasks, the first FIRST get an estimate, as many as of the jobs in line."""
    rooms = Rooms()
    if not held.waiting:
        return rooms
    keys: dict[tuple[str, int], str] = {}
    for record in held.waiting[:FIRST]:
        row = rows[int(record["job"])]
        name = keys.setdefault((row.user_name, row.array_id), f"array {row.array_id}")
        rooms.rooms.setdefault(name, Room(row.array_throttle, [],
                                          f"when a task of array {row.array_id} should end (its throttle)"))
        rooms.waiting.append((record["job"], [name], WaitingOn.of_row(row, [])))
    for job in chain(active, held.planned):
        if (holds := keys.get((job.user_name, job.array_id))) is not None:
            rooms.rooms[holds].holding.append(str(job.id))
    return rooms


def room_ends(rooms: Rooms, ends: dict[str, datetime | None], known: RunTimes) -> dict[str, Stored]:
    """The estimates of the jobs waiting for a room: each, in its order, takes the first of its
    rooms to come free, and is expected to end after its own run time (written into `ends`, for
    what waits for it). A room comes free as a job holding it is expected to end (`ends`), once as
    many as hold it past its size (a cap lowered since) have ended; one whose end is not known never
    frees it, and the jobs that find no room coming free get no estimate."""
    frees: dict[str, list[datetime]] = {}
    for name, room in rooms.rooms.items():
        found = sorted(end for job in room.holding if (end := ends.get(job)) is not None)
        frees[name] = found[max(len(room.holding) - room.size, 0):]  # sorted, so a heap
    stored: dict[str, Stored] = {}
    for job, names, wait in rooms.waiting:
        free = [(heap[0], name) for name in names if (heap := frees.get(name))]
        if not free:
            continue
        start, name = min(free)
        heapq.heappop(frees[name])
        stored[job] = Stored(None, start, rooms.rooms[name].basis)
        run = known.of(wait.user, wait.resources, wait.max_runtime_s, wait.bundles)
        if run.seconds is not None:
            end = ends[job] = start + timedelta(seconds=run.seconds)
            heapq.heappush(frees[name], end)
    return stored


def after_ends(held: Mapping[str, WaitingOn], ends: Mapping[str, datetime | None], known: RunTimes) -> dict[str, Stored]:
    """The estimate of each job held by its dependencies: the latest expected end of the jobs it
    waits for (`ends`: of the active jobs and those the forecast estimates, and of the held ones as
    they are estimated here, a chain in its order), with no place in line. None is given where one
    of those ends is not known (a job further back than the forecast, in another group, of unknown
    run time, or an array)."""
    ends = dict(ends)
    stored: dict[str, Stored] = {}
    left = dict(held)
    while left:
        ready = [job for job, wait in left.items() if not any(other in left for other in wait.waits_for)]
        if not ready:
            break  # a cycle, which submit refuses: none of these is estimated
        for job in ready:
            wait = left.pop(job)
            found = [ends.get(other) for other in wait.waits_for]
            if not found or any(end is None for end in found):
                continue
            start = max(end for end in found if end is not None)
            run = known.of(wait.user, wait.resources, wait.max_runtime_s, wait.bundles)
            ends[job] = None if run.seconds is None else start + timedelta(seconds=run.seconds)
            stored[job] = Stored(None, start, "after the expected end of job " + ", ".join(wait.waits_for))
    return stored
