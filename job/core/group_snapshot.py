"""The planner's snapshot of one group, built from what the tick read: Ray's nodes, our active jobs
and the group's pending rows, users and state; and its plan read back. Pure: the rows come in, the
snapshot goes out, the plan comes back as `Decisions`. The planner's JSON names jobs by strings,
the tick by the table's ints: the two meet here and nowhere else."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

import msgspec
from pydantic import TypeAdapter, ValidationError

from job.core import states
from job.core.estimates import RunTimes, expected_end
from job.core.group import GroupConfig
from job.core.job import FIELDS, ActiveJob, PendingRow
from job.core.job_row import stored_problem
from job.core.members import AccountRow, Member
from job.core.observed import Bundle, Observed, RunningJob
from job.core.planner import Plan, Snapshot
from job.core.planner.snapshot import Bundles, BundleStrategy, Pending, PlannedReservation, ReservationKind, ResourceMap
from job.core.reconcile import STOP_REASONS, runtime_end
from job.core.resources import Resources, accumulate, to_units
from job.core.states import RAY_RUNNING

_T = TypeVar("_T")


class Held(NamedTuple):
    """A reservation as the tick stores it: the driver's node, why it is held, the node of each
    bundle (None: all on `node`) and its expected start (a preemption's: None, it starts as soon as
    its victims have stopped; a head-of-line one's: None when not known)."""

    node: str
    kind: ReservationKind = "preemption"
    bundle_nodes: tuple[str, ...] | None = None
    start: datetime | None = None


# The waiting reasons of a job that waits for resources: its wait, that `reserve_after` counts,
# runs from the first tick that gave it one of them.
WAITS_FOR_RESOURCES = (states.Reason.RESOURCES, states.Reason.RESERVED, states.Reason.PREEMPTING)


def expired(row: PendingRow, timeout_s: float, now: datetime) -> bool:
    """Whether a stored reservation has ended by time: one rule for both kinds, the group's start
    timeout past its due time, that is its expected start as the last plan judged it (a
    preemption's: when it was made, its victims being stopped at once). A head-of-line one whose
    start is not known is not due."""
    due = row.reserved_start if row.reserved_kind == "head" else row.reserved_start or row.reserved_at
    return due is not None and now - due > timedelta(seconds=timeout_s)


def _stored(row: PendingRow, node: str) -> Held:
    """`row`'s stored reservation, on `node` (its reserved_node)."""
    return Held(node, row.reserved_kind or "preemption",
                None if row.reserved_bundle_nodes is None else tuple(row.reserved_bundle_nodes),
                row.reserved_start if row.reserved_kind == "head" else None)


def _reservation(job: str, held: Held) -> PlannedReservation:
    """A stored reservation as the snapshot gives it to the planner."""
    record: PlannedReservation = {"job": job, "node": held.node, "kind": held.kind}
    if held.bundle_nodes is not None:
        record["bundle_nodes"] = list(held.bundle_nodes)
    return record


# How long after Ray reported a job of ours ended its resources count as ours on its node: Ray frees
# them when the job's supervisor exits, a few seconds after it reports the job ended (up to 5 ticks
# a second apart in the tests here), and meanwhile they are not outside load.
RELEASE_S = 30.0
# The group state document that keeps them from one tick to the next.
RELEASING = "ray.releasing"

_REQUEST = TypeAdapter(ResourceMap)
_LABELS = TypeAdapter(dict[str, str])
_BUNDLES = TypeAdapter(Bundles)


def _checked(adapter: TypeAdapter[_T], text: str, field: str) -> _T | str:
    """The validated value of a JSON text, or what is wrong with it."""
    try:
        return adapter.validate_json(text)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        return f"{'.'.join(str(part) for part in (field, *error['loc']))}: {error['msg']}"


def releasing(document: dict, ended: list[tuple[str, dict]], now: datetime) -> tuple[list[tuple[str, dict]], dict]:
    """Our jobs whose resources Ray may still count as used, as (node, request): those that ended
    in this tick (`ended`) and those the group state `document` keeps from earlier ticks, until
    RELEASE_S after they ended; and the document to keep for the next ticks."""
    until = (now + timedelta(seconds=RELEASE_S)).isoformat()
    kept = [entry for entry in document.get("jobs", []) if datetime.fromisoformat(entry["until"]) > now]
    kept += [{"node": node, "resources": resources, "until": until} for node, resources in ended]
    return [(entry["node"], entry["resources"]) for entry in kept], {"jobs": kept}


def held_parts(job: ActiveJob) -> list[tuple[str, dict]]:
    """(node, request) of each part of a placed job's footprint: its driver on its node, each bundle
    on the node planned for it. Held in the books there until the job ends."""
    # Its callers' jobs are placed, on a node: job.node is set, which the checker cannot know.
    return [(job.node, job.resources),  # type: ignore[list-item]
            *zip(job.bundle_nodes or (), job.bundles or (), strict=False)]


def running_of(active: list[ActiveJob], ray_jobs: Mapping[str, Any]) -> list[RunningJob]:
    """Our jobs whose driver Ray runs, as `observe` takes them: the driver's request on the node
    Ray runs it on, the driver's job id once it called `ray.init()`, and the bundles it declared
    on their planned nodes."""
    running = []
    for job in active:
        if job.submission_id is None:  # not sent to Ray
            continue
        ray_job = ray_jobs.get(job.submission_id)
        driver_node = None if ray_job is None else ray_job.driver_node_id or job.node
        if ray_job is not None and ray_job.status == RAY_RUNNING and driver_node:
            bundles = tuple(Bundle(node, Resources.of(bundle))
                            for node, bundle in zip(job.bundle_nodes or (), job.bundles or (), strict=False))
            running.append(RunningJob(job.id, job.user_name, job.submission_id, ray_job.driver_job_id,
                                      driver_node, Resources.of(job.resources), bundles))
    return running


def outside_load(nodes: list, active: list[ActiveJob], releasing: Iterable[tuple[str, dict]] = (),
                 use: Observed | None = None) -> dict[str, dict[str, float | int]]:
    """What work outside the queue holds on each node, by node id, in Ray's amounts: the node's
    total, less what Ray reports free, less what our started jobs hold there, per resource, never
    below zero. Nodes where nothing is held outside, or where Ray did not say what is free (`free`
    None), are left out.

    Our started jobs are those RUNNING: Ray has started their driver and counts its resources as
    used. What they hold is their observed use (`use`, core/observed.py: their drivers, placement
    groups, actors and tasks wherever Ray put them, and what they declared and have not claimed
    yet), of the jobs still active; without it, their requests on their nodes. A SUBMITTED job is
    accepted but not started, and Ray does not count it yet; the planner charges it to its node all
    the same (as every active job), so it is not outside load either. `releasing`: (node, request)
    of our jobs that have just ended, whose resources Ray may still count as used for a few seconds
    (its job supervisor ends after the job): ours as well. Amounts are compared in Ray's fixed
    point: float noise in what Ray reports is no load."""
    started: dict[str, dict[str, int]] = {}
    if use is None:
        ours = [(node, Resources.of(request)) for job in active if job.state == states.RUNNING and job.node
                for node, request in held_parts(job)]
    else:
        ours = [part for job in active if job.id in use.jobs for part in use.jobs[job.id].held().items()]
    for node_id, resources in [*ours, *((node_id, Resources.of(request)) for node_id, request in releasing)]:
        accumulate(started.setdefault(node_id, {}), resources)
    found = {}
    for node in nodes:
        if node.free is None:
            continue
        ours_there = started.get(node.id, {})
        # A resource Ray does not list as free is taken as all free: nothing known is held there.
        held = Resources((name, max(to_units(total) - to_units(node.free.get(name, total)) - ours_there.get(name, 0), 0))
                         for name, total in node.resources.items())
        if held:
            found[node.id] = held.amounts()
    return found


class MadeJobs:
    """The planner's pending job made of each row by the last snapshot, for the next one: where
    the rows are kept between ticks (scheduler/pending.py), a row nobody wrote is the same object
    and its job is the same Struct, not made again (at 100,000 pending, making them cost a third of
    the plan). Only jobs that owe nothing to the tick's now are kept (their wait for resources has
    begun; no reservation, whose end is judged each tick), and none once the group's classes
    changed. The planner only reads its jobs."""

    def __init__(self) -> None:
        self.classes: frozenset[str] = frozenset()
        self.jobs: dict[int, tuple[PendingRow, Pending]] = {}
        # The last snapshot's list of rows and its list of jobs: the rows given again, the same
        # list of the same rows (scheduler/pending.py, when no row was written since), every one
        # of them kept, make the same jobs, without a pass over 100,000 rows.
        self.rows: list[PendingRow] | None = None
        self.listed: list[Pending] = []
        # The rows read, less those the dependencies hold back, and the ids held back (core/dependents.py):
        # the same rows read and the same held back, the same list, which the check above finds.
        self.read: list[PendingRow] | None = None
        self.held_back: frozenset[int] = frozenset()
        self.plannable: list[PendingRow] = []


def _cached(cache: dict[str, _T | str], value: str, shape: TypeAdapter[_T], field: str) -> _T | str:
    """`value` checked against `shape` once per distinct value: what it holds, or why it is wrong."""
    found = cache.get(value)
    if found is None:
        found = _checked(shape, value, field)
        cache[value] = found
    return found


# The planner's fields that a pending row gives as the planner's job takes them (job.FIELDS, each
# `planned` one the row and the job name alike, less those read by hand below: JSON texts and the
# class), and those of them whose stored value is checked first.
_READ_HERE = frozenset({"resources", "node_labels", "priority_class", "bundles", "bundle_strategy"})
_AS_READ = tuple(field.column for field in FIELDS if field.planned and field.column not in _READ_HERE
                 and field.column in PendingRow._fields and field.column in Pending.__struct_fields__)
_CHECKED = tuple(field.column for field in FIELDS if field.column in _AS_READ and field.stored)
_read = attrgetter(*_AS_READ)


def _pending_job(row: PendingRow, group: GroupConfig, classes: frozenset[str], now: datetime,
                 requests: dict[str, dict[str, float] | str], labels: dict[str, dict[str, str] | str]) -> Pending | str:
    """The planner's job of one pending row, or why the row cannot be planned."""
    request = _cached(requests, row.resources, _REQUEST, "resources")
    label_map = _cached(labels, row.node_labels, _LABELS, "node_labels")
    if isinstance(request, str):
        return request
    if isinstance(label_map, str):
        return label_map
    bundles: list[dict[str, float]] | str | msgspec.UnsetType
    strategy: BundleStrategy | msgspec.UnsetType
    priority_class: str | msgspec.UnsetType
    bundles = strategy = priority_class = msgspec.UNSET
    if row.bundles is not None:
        bundles = _checked(_BUNDLES, row.bundles, "bundles")
        if isinstance(bundles, str):
            return bundles
        strategy = row.bundle_strategy or "PACK"
    if row.priority_class is not None:
        if row.priority_class not in classes:
            return (f"priority_class: {row.priority_class!r} is no longer a class of group {group.name!r} "
                    f"(its classes: {', '.join(sorted(classes))})")
        priority_class = row.priority_class
    plain = dict(zip(_AS_READ, _read(row), strict=True))
    for column in _CHECKED:
        if plain[column] is not None and (problem := stored_problem(column, plain[column])):
            return problem
    return Pending(id=str(row.id), user=row.user_name, resources=request, node_labels=label_map,
                   priority_class=priority_class, bundles=bundles, bundle_strategy=strategy,
                   # A job whose wait for resources has not begun before this tick begins it now.
                   waiting_since=row.waiting_since or now, **plain)


def _pending_jobs(group: GroupConfig, pending: list[PendingRow], now: datetime, made: MadeJobs | None = None
                  ) -> tuple[list[Pending], dict[int, str], list[PlannedReservation]]:
    """The planner's pending jobs, the rows that cannot be planned (id -> why) and the reservations
    still held, as build_snapshot says; `made` is read and brought up to date."""
    classes = group.class_names
    requests: dict[str, dict[str, float] | str] = {}
    labels: dict[str, dict[str, str] | str] = {}
    jobs: list[Pending] = []
    invalid: dict[int, str] = {}
    reservations: list[PlannedReservation] = []
    before = made.jobs if made is not None and made.classes == classes else {}
    if made is not None and pending is made.rows and len(before) == len(pending):
        return made.listed, {}, []
    kept: dict[int, tuple[PendingRow, Pending]] = {}
    for row in pending:
        known = before.get(row.id)
        if known is not None and known[0] is row:
            kept[row.id] = known
            jobs.append(known[1])
            continue
        job = _pending_job(row, group, classes, now, requests, labels)
        if isinstance(job, str):
            invalid[row.id] = job
            continue
        if row.reserved_node is not None:
            if not expired(row, group.start_timeout_s, now):
                reservations.append(_reservation(job.id, _stored(row, row.reserved_node)))
        elif row.waiting_since is not None:
            kept[row.id] = (row, job)
        jobs.append(job)
    if made is not None:
        made.classes, made.jobs, made.rows, made.listed = classes, kept, pending, jobs
    return jobs, invalid, reservations


def held_beyond(active: list[ActiveJob], use: Observed) -> dict[str, list[dict]]:
    """Per node, what each of our still active jobs holds there beyond what it declared there
    (the snapshot's `nodes[].held`), in Ray's amounts."""
    found: dict[str, list[dict]] = {}
    for job in active:
        job_use = use.jobs.get(job.id)
        if job_use is None:
            continue
        for node_id, held in job_use.held().items():
            beyond = held - job_use.declared.get(node_id, Resources())
            beyond = Resources((name, amount) for name, amount in beyond.items() if amount > 0)
            if beyond:
                found.setdefault(node_id, []).append({"job": str(job.id), "resources": beyond.amounts()})
    return found


def build_snapshot(group: GroupConfig, now: datetime, nodes: list, active: list[ActiveJob], pending: list[PendingRow],
                   users: list[Member], state: dict, ended: Sequence[tuple[str, dict]] = (),
                   use: Observed | None = None, accounts: Sequence[AccountRow] = (),
                   run_times: RunTimes | None = None, made: MadeJobs | None = None) -> tuple[Snapshot, dict[int, str]]:
    """The planner's snapshot, and the pending jobs left out of it because their row cannot be
    planned (e.g. a negative amount written around `submit`): id -> what is wrong.

    Pending jobs are checked here rather than by Snapshot's own validation, which costs about as
    much as the whole plan: ids, users, priorities and times come typed from PostgreSQL, and what a
    row can get wrong, its request and labels, is checked once per distinct value.

    Each node carries `outside`, what work outside the queue holds there (`outside_load`), where
    there is any. With our running jobs' observed use (`use`), each node also carries what they
    hold there beyond their declaration (`held`), and each running job what Ray shows it holding
    (`uses`): its user's charge, and the words naming it in the messages of the jobs it holds back.
    A pending job that names a class the group no longer has cannot be planned; a
    running one counts as of the group's default class. A reservation older than the group's start
    timeout has ended: the plan leaves it out. A job of ours that ended less than RELEASE_S ago
    (`ended` in this tick, (node, request) of those Ray ran; the group state RELEASING for earlier
    ticks) holds its node's resources in what Ray reports for a few seconds more: not outside load
    either. The snapshot's state holds RELEASING as it stands after this tick, to be saved.
    `accounts`: every account (name, parent, shares, limits), the users naming theirs.
    `run_times`: the tick's estimates of run times, for the running jobs without a max runtime.
    `made`: the pending jobs made by the last snapshot of the group (MadeJobs), brought up to date."""
    classes = group.class_names
    jobs, invalid, reservations = _pending_jobs(group, pending, now, made)
    freeing, kept = releasing(state.get(RELEASING, {}), list(ended), now)
    state = {**state, RELEASING: kept}
    outside = outside_load(nodes, active, freeing, use)
    held = {} if use is None else held_beyond(active, use)
    uses = {} if use is None else use.jobs
    snapshot = Snapshot.model_validate({
        "group": group.planner_group(),
        "now": now,
        "nodes": [{"id": n.id, "resources": n.resources, "labels": n.labels,
                   **({"outside": outside[n.id]} if n.id in outside else {}),
                   **({"held": held[n.id]} if n.id in held else {})} for n in nodes],
        "running": [{"id": str(j.id), "user": j.user_name, "node": j.node, "resources": j.resources,
                     **({"class": j.priority_class} if j.priority_class in classes else {}),
                     "started_at": j.started_at if j.state == states.RUNNING else None,
                     "stopping": _stopping(j), **_held_bundles(j), **expected_end(j, now, run_times),
                     **({"uses": Resources.total(uses[j.id].observed.values()).amounts()} if j.id in uses else {})}
                    for j in active if j.node],
        "users": {u.name: {"shares": u.shares, "usage": u.usage, "max_running": u.max_running,
                           "max_resources": u.max_resources, "account": u.account} for u in users},
        "accounts": {a.name: {"parent": a.parent, "shares": a.shares, "max_running": a.max_running,
                              "max_resources": a.max_resources} for a in accounts},
        "state": state,
    })
    snapshot.pending = jobs
    snapshot.reservations = reservations
    return snapshot, invalid


def _held_bundles(job: ActiveJob) -> dict:
    """A placed job's bundles with their nodes, whose room the planner keeps until it ends."""
    if not (job.bundles and job.bundle_nodes):
        return {}
    return {"bundles": job.bundles, "bundle_strategy": job.bundle_strategy or "PACK", "bundle_nodes": job.bundle_nodes}


def _stopping(job: ActiveJob) -> bool:
    """Asked to stop already (a cancel, a preemption, its max runtime): never a victim again."""
    return job.cancel_requested_at is not None or job.preempted_at is not None or job.reason in STOP_REASONS


@dataclass(frozen=True, slots=True)
class Decisions:
    """A plan in the tick's terms, by job id."""

    # (job, node), in the plan's order.
    placements: list[tuple[int, str]]
    # Victim -> the job it makes room for.
    victims: dict[int, int]
    # Job -> its reservation, as the reservations stand after the plan.
    reservations: dict[int, Held]
    # Job -> the node planned for each of its bundles, for the placed jobs that have bundles.
    bundle_nodes: dict[int, list[str]]

    @classmethod
    def of(cls, plan: Plan) -> Decisions:
        return cls([(int(p["job"]), p["node"]) for p in plan.placements],
                   {int(victim): int(p["job"]) for p in plan.preemptions or [] for victim in p["victims"]},
                   {int(r["job"]): _held(r) for r in plan.reservations or []},
                   {int(p["job"]): p["bundle_nodes"] for p in plan.placements if "bundle_nodes" in p})


def _held(record: PlannedReservation) -> Held:
    kind = record.get("kind", "preemption")
    homes = record.get("bundle_nodes")
    return Held(record["node"], kind, None if homes is None else tuple(homes),
                record.get("expected_start") if kind == "head" else None)


def reservation_changes(pending: list[PendingRow], after: dict[int, Held]) -> dict[int, Held | None]:
    """The pending jobs whose reservation the plan changed (`after`, Decisions.reservations): id ->
    the reservation, None where it ended (the job placed, or its reservation expired or no longer
    valid). A head-of-line one whose expected start moved is written again. `pending`: the rows
    read; only those with a reservation count (the tick gives those alone)."""
    before = {row.id: _stored(row, row.reserved_node) for row in pending if row.reserved_node is not None}
    return {job: after.get(job) for job in before.keys() | after.keys() if before.get(job) != after.get(job)}


def due_at(pending: list[PendingRow], active: list[ActiveJob], now: datetime) -> datetime | None:
    """The next instant a tick has something to do that no event announces: a pending job's
    not_before passing, a running job reaching its run time limit (reconcile.runtime_end). The loop
    wakes then, not up to its timer's period later."""
    times = [row.not_before for row in pending if row.not_before is not None and row.not_before > now]
    times += [end for job in active if job.state == states.RUNNING and (end := runtime_end(job, job.started_at))]
    return min((at for at in times if at > now), default=None)
