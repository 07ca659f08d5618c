"""The simulation: a trace replayed on a virtual clock through the real planner.

Every `every_s` of virtual time a tick does what the scheduler's tick does, in the same order:
jobs whose run time is over end and give their resources back, users are charged the usage of
what they held since the last charge (`core/usage.py`), and the pending jobs are planned
(`core/planner`) on a snapshot of the group; a placed job starts at once and runs for its trace
run time. A job holds its node from the tick that places it until the first tick at or after its
end, as in the scheduler, where a tick sees that a job ended. The plans are not worded
(`plan(..., worded=False)`): the simulation reads no waiting message.

Ticks where nothing can change are skipped. Between two events (an arrival, the end of a job) a
plan would place nothing: every job left waiting by a plan waits because of something that only
an event changes (free resources only fall within a plan, so what did not fit at its turn does not
fit after it; a user's running jobs and resources only grow; the group's nodes are fixed). The
clock jumps to the first tick at or after the next event. A user holds the same resources
throughout the jump, and its usage is brought up to date tick by tick (usage.charge_ticks): one
charge over the jump gives the same U only up to rounding, and users whose usage ties when charged
per tick (the same share held from the same tick) must tie here too, or their order flips.

Preemption (`group.preemption` not `off`): a victim the plan names stops at the next tick, gives
its resources back and waits again in its place in the queue; placed again, it runs its whole run
time from the start. The plan's reservations go into the next snapshot. While jobs wait no tick is
skipped, since time alone makes running jobs possible victims (`min_runtime_s`).

Reservations for the head of the line (`group.max_reservations` above 0, the default): once a
waiting job has waited past `reserve_after`, or while a reservation holds, plans take every job as
it is (the job first in line is one that cannot be placed, and reservations count on the running
jobs' expected ends); before, no plan can make one, and the compressed snapshot plans the same.
While the last plan's reservations hold every slot (`max_reservations`), a plan can make no new
one and judges the held ones again on their own nodes: those nodes' running jobs go in as they
are (their entries set aside from the carried picture, below), the rest compressed (not with
gangs, whose parts span nodes), and of the pending jobs those it may place, as without
reservations, with the reserving jobs (each goes to its own node alone: behind it in its user's
queue of its shape, one more job may be placed). The
tick at which a waiting job passes `reserve_after` is not skipped while an arrival or an end is
to come: time alone makes that change;
nor is the tick after a plan that changed the reservations (a reservation whose job started frees
its slot for the next plan, and a new one changes what the next plan holds) or, with a slot free,
started jobs (the users' order moves, and with it the first job to wait for resources), nor, under a policy
that remembers usage, any tick while a slot is free: the users' order moves as usage decays, and
the first job to wait for resources, which takes the slot, may become another user's. A job
with a max runtime is stopped there, and its expected end is its start
plus its max runtime. A job's wait, that reserve_after counts, runs from when it may start (its
not_before, if after its submission) or, stopped by a preemption, from its stop: the tick's
`waiting_since`.

A job with bundles (a gang) goes into the snapshot with them and its strategy; placed whole by
the planner, it holds its driver on the plan's node and each bundle on its node of the plan's
`bundle_nodes`, its user is charged its whole footprint, and it frees every part when it ends.
Whether the empty nodes can take a gang at all is the planner's own question (its Unschedulable).

The snapshot is compressed (compress.py): running jobs summed per node and per user, pending
jobs that cannot be placed left out. Under `strict_order` and a policy that does not keep each
user's order (`lifo`; the traits of core/planner/rules.py) every pending job goes in: a job that
waits there changes what the others do, or the order within a user is reversed. The nodes and
the sums per node are not in the snapshot but in the planner's carried picture
(core/planner/carried.py), which the engine keeps and updates as jobs start and end, so that a
plan costs what it plans and what changed, not the thousand nodes; a plan that reads every running
job as it is (preemption, reservations made) is made from its snapshot alone. Round-robin counts
positions (a `positional` selector): its held reservations are judged on every job as it is.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import count
from typing import cast

from msgspec import UNSET
from msgspec.structs import replace

from job.core import states
from job.core.dependencies import SETTLES
from job.core.planner import Plan, Snapshot, plan
from job.core.planner import snapshot as planned
from job.core.planner.carried import Carried
from job.core.planner.picture import add_to
from job.core.planner.reservations import may_backfill
from job.core.planner.rules import POLICIES, PREEMPTIONS, SELECTORS
from job.core.planner.snapshot import DEFAULT_USER, Account, Group, Node, User
from job.core.resources import Resources, dominant_share, footprint
from job.core.simulate.compress import NODES_USER, TRACKED_SHAPES, candidates, copies, node_entry, user_entries
from job.core.simulate.trace import EPOCH, Dependency, TraceJob
from job.core.usage import charge_ticks, charge_usage


@dataclass(eq=False, slots=True)
class JobRecord:
    job: TraceJob
    # On the simulation's clock: its submission, when it may first be planned (its not_before if
    # later), and since when it has waited for resources where the job says (a forecast's), else None.
    submit_s: float
    ready_s: float
    since_s: float | None
    # Its whole footprint (its driver's request and every bundle): what its user is charged.
    need: Resources
    # Its queue's key: `need`, or for a job with bundles (need, bundles, strategy), since a gang
    # places otherwise than a plain job of the same footprint.
    shape: Resources | tuple
    # Its parts (driver, then each bundle) and, while it runs, the node each is held on.
    parts: tuple[Resources, ...]
    homes: tuple[str, ...] = ()
    # Where the job ran last and when it started there; None if it never started.
    node: str | None = None
    start_s: float | None = None
    end_s: float | None = None
    unschedulable: bool = False
    # The job as the snapshot lists it while it waits, and its place in its user's queue.
    pending: planned.Pending | None = None
    queue_key: tuple | None = None
    # Preemption: whether a plan chose it as a victim (it stops at the next tick), its running
    # entry while it runs, and its runs that were stopped, as (node, start, stop), the start None
    # for a job running when the simulation starts that Ray had not started (a forecast's).
    stopping: bool = False
    running: planned.Running | None = None
    # Its start's number: tells the end of its current run from that of a run stopped before.
    number: int = 0
    stopped: list[tuple[str, float | None, float]] = field(default_factory=list)
    # How it ended (SUCCEEDED, STOPPED at its max runtime, FAILED on a dependency that can never
    # hold: the job named in `failed_on`); None while it has not. Its dependencies not held yet.
    state: str | None = None
    failed_on: str | None = None
    waits: int = 0


@dataclass(eq=False, slots=True)
class UserRecord:
    name: str
    spec: User
    held: dict[str, int] = field(default_factory=dict)
    # What the user's running and pending jobs ask for together: its demand.
    wanted: dict[str, int] = field(default_factory=dict)
    running: int = 0
    held_share: float = 0.0
    usage: float = 0.0
    charged_at: float = 0.0
    # (time, dominant share held, dominant share wanted), from the time on: a step function.
    timeline: list[tuple[float, float, float]] = field(default_factory=list)
    # Its running entries in the snapshot: what its jobs hold, on a node outside the group.
    entries: list[planned.Running] = field(default_factory=list)


@dataclass(slots=True)
class Outcome:
    records: list[JobRecord]
    users: dict[str, UserRecord]
    # The group's totals, in units.
    totals: dict[str, int]
    every_s: float
    ticks: int = 0
    plans: int = 0
    # Arrivals, starts, ends and preemptions.
    events: int = 0
    # When the last job gave its resources back.
    end_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RunningAtStart:
    """A job already running when the simulation starts (a forecast's), as the planner's snapshot
    has it, ending at `end_s` (None: unknown, it never ends here)."""

    job: planned.Running
    end_s: float | None


@dataclass(slots=True)
class ArrayRoom:
    """A throttled array: its tasks waiting for resources or running, and those held back, in order."""

    active: int = 0
    held: deque[JobRecord] = field(default_factory=deque)


@dataclass(frozen=True, slots=True)
class Start:
    """Where a simulation starts other than from an empty group: the time of its clock's 0, the jobs
    running then, and the planner's state and reservations."""

    epoch: datetime
    running: list[RunningAtStart] = field(default_factory=list)
    state: dict[str, dict] = field(default_factory=dict)
    reservations: list[planned.PlannedReservation] = field(default_factory=list)


def _record(job: TraceJob, requests: dict[tuple, Resources], epoch: datetime) -> JobRecord:
    """The job's record; `requests` holds the plain requests made so far, by their items as written:
    a trace's many jobs ask for a few dozen."""
    pending = job.pending
    submit_s = _seconds(pending.submitted_at, epoch) or 0.0
    not_before_s = _seconds(pending.not_before, epoch)
    ready_s = submit_s if not_before_s is None else max(submit_s, not_before_s)
    since_s = _seconds(pending.waiting_since, epoch)
    if not pending.bundles:
        raw = tuple(pending.resources.items())
        need = requests.get(raw)
        if need is None:
            need = requests[raw] = Resources.of(pending.resources)
        return JobRecord(job=job, need=need, shape=need, parts=(need,), submit_s=submit_s, ready_s=ready_s, since_s=since_s)
    need = footprint({"resources": pending.resources, "bundles": pending.bundles})
    shape = (need, tuple(tuple(bundle.items()) for bundle in pending.bundles), pending.bundle_strategy)
    return JobRecord(job=job, need=need, shape=shape, parts=tuple(map(Resources.of, (pending.resources, *pending.bundles))),
                     submit_s=submit_s, ready_s=ready_s, since_s=since_s)


def _seconds(moment: datetime | None, epoch: datetime) -> float | None:
    return None if moment is None else (moment - epoch).total_seconds()


def _gang(job: planned.Pending | planned.Running) -> dict:
    """A job's bundles and strategy as the snapshot's jobs carry them; {} for a plain job."""
    return {"bundles": job.bundles, "bundle_strategy": job.bundle_strategy or "PACK"} if job.bundles else {}


def _held(reservations: list[planned.PlannedReservation]) -> set[tuple]:
    """What reservations hold, as a plan takes them: their jobs, kinds and nodes."""
    return {(held["job"], held.get("kind"), held["node"], tuple(held.get("bundle_nodes", ()))) for held in reservations}


def _ready(record: JobRecord) -> float:
    return record.ready_s


def simulate(jobs: list[TraceJob], nodes: list[Node], group: Group, users: dict[str, User] | None = None,
             every_s: float = 5.0, start: Start | None = None, accounts: dict[str, Account] | None = None,
             until_s: float | None = None) -> Outcome:
    """Replays `jobs` on `nodes` under `group`'s options; `users` gives shares, limits, usage and
    account (missing: shares 1, no limit, no usage, the root), `accounts` the tree above them. A
    job whose run time is infinite never ends. Without `start`, the group is empty at first; with
    it, the clock starts at 0. With `until_s`, the simulation stops at that virtual time: jobs
    running then are cut there, those waiting never start. Pure and deterministic."""
    if every_s <= 0:
        raise ValueError("every_s must be above zero")
    return _Simulation(jobs, nodes, group, users or {}, every_s, start, accounts or {}, until_s).run()


def _check_classes(jobs: list[TraceJob], group: Group) -> None:
    classes = {c.name for c in group.priority_classes}
    for job in jobs:
        if job.pending.priority_class and job.pending.priority_class not in classes:
            raise ValueError(f"job {job.id}: class {job.pending.priority_class!r} is not one of the group's priority classes "
                             f"({', '.join(sorted(classes))})")


@dataclass(frozen=True, slots=True)
class Setting:
    """What the simulation's inputs fix for the whole run: the group and its clock, and which
    snapshots its plans read (`_setting`)."""

    group: Group
    every_s: float
    accounts: dict[str, Account]
    until_s: float | None
    # The time of the clock's 0, and where the run starts other than from an empty group.
    epoch: datetime
    start: Start | None
    gangs: bool
    # The half-life its users' usage decays with: 0 under a policy that remembers no usage.
    half_life_s: float
    # What tells which pending jobs a plan may leave out (compress.candidates): whether a job
    # limit applies; whether the jobs of a shape that a plan places are the first of one order
    # of all users' jobs, as many as fit (the policy takes every job in one order, fifo; no limit
    # holds a job back while others of its shape still fit; no gangs, whose parts go apart);
    # whether a job may use a reservation's room (backfill: its max runtime ends before the
    # reservation's start) where an earlier job of its shape may not.
    limited: bool
    one_order: bool
    backfills: bool
    # Under preemption a job that fits nowhere may still make room, and a full node may give
    # it: every pending job, every node and every running job (with its class and start) go
    # in, and no tick is skipped while jobs wait (a running job becomes a possible victim as
    # time passes, min_runtime_s after its start).
    preempting: bool
    # Whether plans reserve for the head of the line (`_reserving`).
    reserving: bool
    # Every job as it is also for jobs with node labels, whose shapes the counts below do not
    # tell apart, from a given start, and once a job waited past reserve_after.
    exact: bool
    exact_queue: bool
    # Round-robin's state is a position among the nodes: every node's running jobs go in as
    # they are whenever reservations are judged (no `_around_reservations`).
    every_node: bool
    class_values: dict[str, int]


def _setting(jobs: list[TraceJob], group: Group, users: dict[str, User], every_s: float, start: Start | None,
             accounts: dict[str, Account], until_s: float | None) -> Setting:
    policy, gangs = POLICIES[group.policy], any(job.pending.bundles for job in jobs)
    specs: tuple[User | Account, ...] = (*users.values(), *accounts.values())
    limited = group.max_running_per_user is not None or any(spec.max_running is not None for spec in specs)
    limits = limited or group.max_resources_per_user is not None or any(
        spec.max_resources is not None for spec in specs)
    preempting = PREEMPTIONS[group.preemption].preempts
    exact = preempting or start is not None or any(job.pending.node_labels for job in jobs)
    return Setting(
        group=group, every_s=every_s, accounts=accounts, until_s=until_s,
        epoch=start.epoch if start is not None else EPOCH, start=start, gangs=gangs,
        half_life_s=group.half_life_s if policy.remembers_usage else 0.0,
        limited=limited, one_order=policy.keeps_global_order and not limits and not gangs,
        backfills=any(may_backfill(job.pending) for job in jobs),
        preempting=preempting, reserving=group.max_reservations > 0, exact=exact,
        exact_queue=group.strict_order or not policy.keeps_user_order or exact,
        every_node=SELECTORS[group.selector].positional or exact,
        class_values={c.name: c.value for c in group.priority_classes})


class ClusterState:
    """The simulated cluster: each node's totals, what runs there and what it has free."""

    def __init__(self, nodes: list[Node], group: Group, exact: bool):
        self.nodes = nodes
        # Nodes of one kind share their totals: 10,000 nodes are of a few kinds.
        kinds: dict[tuple, Resources] = {}
        self.node_totals: dict[str, Resources] = {}
        for node in nodes:
            kind = tuple(node.resources.items())
            total = kinds.get(kind)
            self.node_totals[node.id] = total if total is not None else kinds.setdefault(kind, Resources.of(node.resources))
        self.totals: dict[str, int] = {}
        for total in self.node_totals.values():
            add_to(self.totals, total)
        self.free = dict(self.totals)
        self.held_on: dict[str, dict[str, int]] = {node.id: {} for node in nodes}
        self.free_on = {node_id: dict(total.items()) for node_id, total in self.node_totals.items()}
        # The nodes and what runs on them, summed per node (`node_entries`), as the planner starts
        # from them, kept from one plan to the next (planner/carried.py): all but the plans that
        # read every running job as it is.
        self.carried = None if exact else Carried(nodes, group)
        # Per node with running jobs, its running entry.
        self.node_entries: dict[str, planned.Running] = {}
        # Running jobs by id; per node, the running jobs whose driver is there, by id: those of
        # the reserved nodes.
        self.running: dict[str, JobRecord] = {}
        self.running_on: dict[str, dict[str, JobRecord]] = {}
        # Per shape (the request, with its labels where it has any): whether any node can take it.
        self.schedulable: dict[Resources | tuple, bool] = {}
        # Per tracked shape, how many copies of it each node's free resources hold, and in all.
        self.copies: dict[Resources, dict[str, int]] = {}
        # Keyed as compress.candidates reads it, by any shape: only plain ones are tracked.
        self.fit: dict[Resources | tuple, int] = {}

    def hold_on(self, node: str, need: Resources, sign: int) -> None:
        """`need` taken (1) or given back (-1) on `node`: its free units, its copies of the tracked
        shapes, the group's free total and the node's running entry."""
        held = self.held_on[node]
        add_to(held, need, sign)
        free = self.free_on[node]
        add_to(free, need, -sign)
        for shape, counts in self.copies.items():
            now_there = copies(free, shape)
            if now_there != counts[node]:
                self.fit[shape] += now_there - counts[node]
                counts[node] = now_there
        add_to(self.free, need, -sign)
        entry = node_entry(node, held)
        if self.carried is not None:
            if entry is not None:
                self.carried.put(entry)
            elif node in self.node_entries:
                self.carried.drop(self.node_entries[node].id)
        if entry is not None:
            self.node_entries[node] = entry
        else:
            self.node_entries.pop(node, None)


@dataclass(eq=False, slots=True)
class Events:
    """What happens on the clock: arrivals in the order they may first be planned, the ends of
    runs, the times waiting jobs pass reserve_after, and the victims that stop at the next tick."""

    arrivals: list[JobRecord]
    # (end, start number, record): an entry whose start number is no longer the record's is
    # the end of a run that was stopped.
    ends: list[tuple[float, int, JobRecord]] = field(default_factory=list)
    # When waiting jobs pass reserve_after, and the waiting jobs by submission (`_reserving`).
    reserve_at: list[float] = field(default_factory=list)
    oldest: list[tuple[float, int, JobRecord]] = field(default_factory=list)
    enqueued: count = field(default_factory=count)
    victims: list[JobRecord] = field(default_factory=list)
    # Starts so far: orders the ends of jobs that end at the same time.
    started: int = 0


class Ledger:
    """The users' books: what each holds, wants and has used, and the timeline of its shares."""

    def __init__(self, specs: dict[str, User], totals: dict[str, int], half_life_s: float, every_s: float, limited: bool):
        self.specs, self.totals, self.half_life_s, self.limited = specs, totals, half_life_s, limited
        self.every_s = every_s
        self.users: dict[str, UserRecord] = {}

    def user(self, name: str) -> UserRecord:
        user = self.users.get(name)
        if user is None:
            spec = self.specs.get(name, DEFAULT_USER)
            user = self.users[name] = UserRecord(name=name, spec=spec, usage=spec.usage)
        return user

    def charge(self, user: UserRecord, now_s: float) -> None:
        """The user's usage brought up to `now_s`: it held the same resources since it was last charged,
        charged tick by tick as the scheduler charges it (what is left past the last whole tick, at
        the end of a run cut at until_s, at once)."""
        if self.half_life_s:
            ticks, rest = divmod(now_s - user.charged_at, self.every_s)
            usage = charge_ticks(user.usage, user.held_share, int(ticks), self.every_s, self.half_life_s)
            user.usage = charge_usage(usage, user.held_share, rest, self.half_life_s) if rest else usage
        user.charged_at = now_s

    def take(self, name: str, need: Resources, sign: int, now_s: float, touched: set[UserRecord]) -> None:
        """A job's resources taken (1) or given back (-1) by its user."""
        user = self.user(name)
        self.charge(user, now_s)
        add_to(user.held, need, sign)
        user.running += sign
        user.held_share = dominant_share(user.held, self.totals)
        user.entries = user_entries(user.name, user.held, user.running, self.limited)
        touched.add(user)

    def mark(self, user: UserRecord, now_s: float) -> None:
        point = (now_s, user.held_share, dominant_share(user.wanted, self.totals))
        if user.timeline and user.timeline[-1][0] == now_s:
            user.timeline[-1] = point
        else:
            user.timeline.append(point)


class _Simulation:
    def __init__(self, jobs: list[TraceJob], nodes: list[Node], group: Group, users: dict[str, User], every_s: float,
                 start: Start | None, accounts: dict[str, Account], until_s: float | None):
        self.setting = setting = _setting(jobs, group, users, every_s, start, accounts, until_s)
        _check_classes(jobs, group)
        self.cluster = ClusterState(nodes, group, setting.exact)
        self.books = Ledger(users, self.cluster.totals, setting.half_life_s, setting.every_s, setting.limited)
        self.requests: dict[tuple, Resources] = {}
        self.records = [_record(job, self.requests, setting.epoch) for job in jobs]
        self.events = Events(sorted(self.records, key=_ready))
        # The reservations of the last plan, and the planner's state.
        self.reservations: list[planned.PlannedReservation] = list(start.reservations) if start is not None else []
        self.state: dict[str, dict] = dict(start.state) if start is not None else {}
        # The jobs that arrived, by id; per shape, per user, the user's waiting jobs of that shape
        # in queue order, and how many wait.
        self.by_id: dict[str, JobRecord] = {}
        # The records waiting for a job, by its id; the throttled arrays, by their id.
        self.dependents: dict[str, list[JobRecord]] = {}
        self.arrays: dict[str, ArrayRoom] = {}
        self.waiting: dict[Resources | tuple, dict[str, list[tuple]]] = {}
        self.pending_count = 0
        # Whether this tick's plan changed the reservations (_plan): the next tick is then planned.
        self.replan = False
        # The first of the arrivals not arrived yet.
        self.next_arrival = 0
        self.outcome = Outcome(records=self.records, users=self.books.users, totals=self.cluster.totals, every_s=every_s)

    def run(self) -> Outcome:
        outcome = self.outcome
        if not self.events.arrivals and self.setting.start is None:
            return outcome
        tick = math.ceil(_ready(self.events.arrivals[0]) / self.setting.every_s)
        if self.setting.start is not None:
            tick = 0
            self._begin(self.setting.start.running)
        self.next_arrival = 0
        while True:
            now = tick * self.setting.every_s
            if self.setting.until_s is not None and now > self.setting.until_s:
                # What runs then is cut there, what waits never starts: the figures end here.
                outcome.end_s = self.setting.until_s
                break
            self._tick(now)
            upcoming = self._upcoming(now)
            if upcoming is None:
                outcome.end_s = now
                break
            tick = max(tick + 1, math.ceil(upcoming / self.setting.every_s - 1e-9))
        return outcome

    def _tick(self, now: float) -> None:
        """What the scheduler's tick does at `now`: the ends, the victims' stops, the arrivals, the plan."""
        touched: set[UserRecord] = set()
        while self.events.ends and self.events.ends[0][0] <= now:
            _, number, record = heapq.heappop(self.events.ends)
            if record.running is not None and record.number == number:
                self._release(record, now, touched)
        victims, self.events.victims = self.events.victims, []
        for record in victims:
            if record.stopping:  # not ended meanwhile
                self._stop(record, now, touched)
        arrivals = self.events.arrivals
        while self.next_arrival < len(arrivals) and _ready(arrivals[self.next_arrival]) <= now:
            self._arrive(arrivals[self.next_arrival], now, touched)
            self.next_arrival += 1
        # Whether this tick's plan changed the reservations (_plan): the next tick is then planned.
        self.replan = False
        if self.pending_count:
            self._plan(now, touched)
        for user in touched:
            self.books.mark(user, now)
        self.outcome.ticks += 1

    def _upcoming(self, now: float) -> float | None:
        """When something may change next, after `now`: an arrival, a job passing reserve_after, an
        end, or under preemption or a changed reservation the next tick; None: nothing ever will."""
        upcoming = []
        if self.next_arrival < len(self.events.arrivals):
            upcoming.append(_ready(self.events.arrivals[self.next_arrival]))
        while self.events.reserve_at and (self.events.reserve_at[0] <= now or not self.pending_count):
            heapq.heappop(self.events.reserve_at)
        if self.events.ends:
            upcoming.append(self.events.ends[0][0])
        # Passing reserve_after, a job may only reserve. With no arrival and no end to come, and no
        # preemption or changed reservation to move the next plan, nothing frees room or asks for
        # it: no job would start again, and a forecast of 10,000 nodes saves a plan.
        if self.events.reserve_at and (upcoming or self.setting.preempting or self.replan):
            upcoming.append(self.events.reserve_at[0])
        if not upcoming:
            return None
        if (self.setting.preempting or self.replan) and self.pending_count:
            upcoming.append(now + self.setting.every_s)
        return min(upcoming)

    def _arrive(self, record: JobRecord, now_s: float, touched: set[UserRecord]) -> None:
        """The record is submitted: it waits for its dependencies, fails on one that cannot hold, or
        goes to its array's throttle."""
        self.by_id[record.job.id] = record
        self.outcome.events += 1
        for dependency in record.job.after:
            if self._settled(dependency) is False:
                self._never(record, dependency, now_s, touched)
                return
        # Each job waited for once, however many ways it is named.
        for job in {dependency.job for dependency in record.job.after if self._settled(dependency) is None}:
            record.waits += 1
            self.dependents.setdefault(job, []).append(record)
        if not record.waits:
            self._throttle(record, None, touched)

    def _settled(self, dependency: Dependency) -> bool | None:
        """Whether the dependency holds (True), never will (False), or is waited for (None)."""
        ended = self.by_id.get(dependency.job)
        return None if ended is None or ended.state is None else SETTLES[dependency.when][ended.state]

    def _never(self, record: JobRecord, dependency: Dependency, now_s: float, touched: set[UserRecord]) -> None:
        """A dependency of the record can never hold: it ends FAILED (DependencyNeverSatisfied), and
        its own dependents follow, as at the tick."""
        record.state, record.end_s, record.failed_on = states.FAILED, now_s, dependency.job
        self._ended(record, now_s, touched)

    def _ended(self, record: JobRecord, now_s: float, touched: set[UserRecord]) -> None:
        """The record ended (its `state`): the jobs waiting for it are judged again, and its array's
        next task held back by the throttle may go."""
        for waiting in self.dependents.pop(record.job.id, ()):
            if waiting.state is not None:
                continue
            never = next((item for item in waiting.job.after if item.job == record.job.id and self._settled(item) is False),
                         None)
            if never is not None:
                self._never(waiting, never, now_s, touched)
                continue
            waiting.waits -= 1
            if not waiting.waits:
                self._throttle(waiting, now_s, touched)
        if record.job.throttle is not None and record.start_s is not None:
            assert record.job.array is not None, "a throttle is an array's"
            room = self.arrays[record.job.array]
            room.active -= 1
            while room.held and room.active < record.job.throttle:
                room.active += 1
                if not self._admit(room.held.popleft(), now_s, touched):
                    room.active -= 1

    def _throttle(self, record: JobRecord, since_s: float | None, touched: set[UserRecord]) -> None:
        """The record goes to the planner, unless its array has as many tasks waiting for resources
        or running as its throttle: it is then held back until one ends (the tick's ArrayThrottle)."""
        throttle = record.job.throttle
        if throttle is None:
            self._admit(record, since_s, touched)
            return
        assert record.job.array is not None, "a throttle is an array's"
        room = self.arrays.setdefault(record.job.array, ArrayRoom())
        if room.active >= throttle:
            room.held.append(record)
            return
        room.active += 1
        if not self._admit(record, since_s, touched):
            room.active -= 1

    def _admit(self, record: JobRecord, since_s: float | None, touched: set[UserRecord]) -> bool:
        """The record waits for resources, from `since_s` if held back until then, else from its
        own waiting_since (a forecast's) or when it may start, as the tick's waiting_since; False
        if no node of the group can ever take it."""
        pending = record.job.pending
        # What the tick would give the planner: the engine itself holds the job until its not_before.
        changes: dict = {"not_before": None} if pending.not_before is not None else {}
        if pending.submitted_at is None:
            changes["submitted_at"] = self.setting.epoch
        if since_s is not None:
            changes["waiting_since"] = self.setting.epoch + timedelta(seconds=since_s)
        elif record.since_s is not None:
            since_s = record.since_s
        else:
            since_s = record.ready_s
            if since_s > record.submit_s:
                changes["waiting_since"] = pending.not_before
        if changes:
            pending = replace(pending, **changes)
        if not self._schedulable(record, pending):
            record.unschedulable = True
            return False
        if pending.user == NODES_USER:
            raise ValueError(f"job {pending.id}: the user name {NODES_USER!r} is the simulation's own")
        user = self.books.user(pending.user)
        add_to(user.wanted, record.need)
        touched.add(user)
        record.pending = pending
        self._enqueue(record, since_s)
        return True

    def _schedulable(self, record: JobRecord, pending: planned.Pending) -> bool:
        """Whether the empty nodes can take the job, once per shape; a plain shape's copies on each
        node are counted from then on (the first TRACKED_SHAPES of them)."""
        labels = pending.node_labels or {}
        shape = (record.shape, tuple(sorted(labels.items()))) if labels else record.shape
        schedulable = self.cluster.schedulable.get(shape)
        if schedulable is not None:
            return schedulable
        if pending.bundles:
            # Whether a gang fits the empty nodes is the planner's question, asked as it does.
            alone = Snapshot.model_construct(group=self.setting.group, now=self.setting.epoch, nodes=self.cluster.nodes,
                                             running=[],
                                             pending=[pending], users={}, state={}, reservations=[])
            schedulable = all(waiting["reason"] != "Unschedulable" for waiting in plan(alone).waiting)
        else:
            schedulable = any(record.need.fits_in(self.cluster.node_totals[node.id]) for node in self.cluster.nodes
                              if all(node.labels.get(key) == value for key, value in labels.items()))
            if schedulable and not labels and len(self.cluster.copies) < TRACKED_SHAPES:
                counts = self.cluster.copies[record.need] = {node: copies(free, record.need)
                                                             for node, free in self.cluster.free_on.items()}
                self.cluster.fit[record.need] = sum(counts.values())
        self.cluster.schedulable[shape] = schedulable
        return schedulable

    def _enqueue(self, record: JobRecord, since_s: float) -> None:
        """The record waits, since `since_s` (what reserve_after counts from)."""
        job = record.pending
        assert job is not None, "set as the record is admitted (_admit) or begun (_begin)"
        # The planner's order within a user, and fifo's of all jobs: higher class, higher priority,
        # then older (the time it reads, to the microsecond), then by id (shorter first).
        value = self.setting.class_values[job.priority_class or self.setting.group.default_class]
        record.queue_key = (-value, -job.priority, job.submitted_at, len(job.id), job.id, job)
        insort(self.waiting.setdefault(record.shape, {}).setdefault(job.user, []), record.queue_key)
        self.pending_count += 1
        if self.setting.reserving:
            heapq.heappush(self.events.reserve_at, since_s + self.setting.group.reserve_after_s)
            heapq.heappush(self.events.oldest, (since_s, next(self.events.enqueued), record))

    def _dequeue(self, record: JobRecord) -> None:
        queues = self.waiting[record.shape]
        queue = queues[record.job.user]
        assert record.queue_key is not None, "only a waiting record leaves its queue"
        del queue[bisect_left(queue, record.queue_key)]
        record.queue_key = None
        if not queue:
            del queues[record.job.user]
        self.pending_count -= 1

    def _plan(self, now_s: float, touched: set[UserRecord]) -> None:
        exact = self.setting.exact or self._reserving(now_s)
        # With every reservation slot held by the last plan's, no new one can be made: the jobs
        # that cannot be placed are left out as without reservations, and the reserving jobs go
        # in. Here a held reservation holds at the plan's start (its job is in, its node is there
        # and no outside load keeps its job off it for ever: reservations.judge), so no slot frees.
        held_slots = exact and self._slots_held()
        # A job that may use a reservation's room before an earlier one of its shape: every job.
        if held_slots and not self.setting.backfills:
            pending = self._with_reserving()
        else:
            pending = candidates(self.waiting, self.cluster.fit, self.cluster.free, self.setting.exact_queue or exact,
                                 self.setting.one_order)
        if not pending:
            return
        now = self.setting.epoch + timedelta(seconds=now_s)
        # Preemption weighs the scores of the running jobs' users too; a team's score, what every
        # user of it holds and has used. With the reservation slots held, the others' jobs are
        # compressed (_around_reservations): those of users without a job to plan order nothing.
        named: Sequence[planned.Pending | JobRecord] = ([*pending, *self.cluster.running.values()]
                                                       if exact and not held_slots else pending)
        users = self._users([job.user if isinstance(job, planned.Pending) else job.job.user for job in named], now_s)
        aside: list[planned.Running] = []
        if held_slots:
            running, aside = self._around_reservations(users)
        elif exact:
            # A record is in cluster.running while it runs, its running entry set (_run).
            running = cast(list[planned.Running], [record.running for record in self.cluster.running.values()])
        else:
            running = [entry for name in users for entry in self.books.users[name].entries]
        snapshot = Snapshot.model_construct(group=self.setting.group, now=now, nodes=self.cluster.nodes, running=running,
                                            pending=pending, users=users, accounts=self.setting.accounts, state=self.state,
                                            reservations=self.reservations)
        result = plan(snapshot, None if exact and not held_slots else self.cluster.carried, worded=False)
        if aside:
            carried = self.cluster.carried
            assert carried is not None, "set aside from the carried picture (_around_reservations)"
            for entry in aside:
                carried.put(entry)
        self.outcome.plans += 1
        self.state = {**self.state, **result.state}
        self._follow(result, now_s, touched)
        # A reservation that ended (its job started) frees a slot that only the next plan gives,
        # and a new one changes what the next plan holds: that plan is not skipped. Nor is it while
        # a slot is free and usage decays: the users' order then moves with time alone, and the
        # first job to wait for resources, which takes the slot, may be another user's.
        after = result.reservations or []
        self.replan = (_held(after) != _held(self.reservations) or self._slot_free(after, now_s)
                       or (bool(result.placements) and self._head_open(after, now_s)))
        self.reservations = after

    def _users(self, names: list[str], now_s: float) -> dict[str, User]:
        """The users a plan reads (under accounts, every one), their usage brought up to `now_s`."""
        users: dict[str, User] = {}
        for name in [*self.books.users, *names] if self.setting.accounts else names:
            if name not in users:
                user = self.books.user(name)
                spec = user.spec
                if self.setting.half_life_s:
                    self.books.charge(user, now_s)
                    spec = spec.model_copy(update={"usage": user.usage})
                users[name] = spec
        return users

    def _follow(self, result: Plan, now_s: float, touched: set[UserRecord]) -> None:
        """The plan's placements start; its victims stop at the next tick."""
        for placement in result.placements:
            self._start(self.by_id[placement["job"]], placement, now_s, touched)
        for preemption in result.preemptions or ():
            for victim in preemption["victims"]:
                record = self.cluster.running[victim]
                assert record.running is not None, "a running job is the victim"
                record.stopping = True
                record.running = replace(record.running, stopping=True)
                self.events.victims.append(record)

    def _with_reserving(self) -> list[planned.Pending]:
        """The jobs a plan around the held reservations may place, and the reserving jobs."""
        reserving: dict[Resources | tuple, dict[str, int]] = {}
        waiting: list[planned.Pending] = []
        for held in self.reservations:
            record = self.by_id[held["job"]]
            behind = reserving.setdefault(record.shape, {})
            behind[record.job.user] = behind.get(record.job.user, 0) + 1
            assert record.pending is not None, "a reserving job was admitted (_admit)"
            waiting.append(record.pending)
        pending = candidates(self.waiting, self.cluster.fit, self.cluster.free, self.setting.exact_queue,
                             self.setting.one_order, reserving)
        listed = {job.id for job in pending}
        return [*pending, *(job for job in waiting if job.id not in listed)]

    def _slot_free(self, reservations: list[planned.PlannedReservation], now_s: float) -> bool:
        """Whether a later plan, with no event between, may make a head-of-line reservation for
        another job than this one's: under a policy whose order moves with time, a free slot."""
        heads = sum(held.get("kind") == "head" for held in reservations)
        return bool(self.setting.half_life_s) and heads < self.setting.group.max_reservations and self._reserving(now_s)

    def _head_open(self, reservations: list[planned.PlannedReservation], now_s: float) -> bool:
        """Whether a plan that started jobs leaves a slot a later plan may fill with no event between:
        the jobs it started change the users' order, and the first job to wait for resources, which
        the plan judged before they started (one not yet past reserve_after), may then be another."""
        heads = sum(held.get("kind") == "head" for held in reservations)
        return heads < self.setting.group.max_reservations and self._reserving(now_s)

    def _reserving(self, now_s: float) -> bool:
        """Whether this plan may make or hold a reservation for the head of the line."""
        if not self.setting.reserving:
            return False
        oldest = self.events.oldest
        while oldest and oldest[0][2].queue_key is None:
            heapq.heappop(oldest)
        return ((bool(oldest) and now_s - oldest[0][0] >= self.setting.group.reserve_after_s)
                or any(held.get("kind") == "head" for held in self.reservations))

    def _slots_held(self) -> bool:
        """Whether the plan can make no new head-of-line reservation, all its slots being held by
        the last plan's (kept: their jobs wait, their nodes are there): only the reserved nodes'
        running jobs are then read one by one (their ends judge the reservations again)."""
        if self.setting.exact or self.setting.every_node or self.setting.gangs:
            return False
        heads = sum(1 for held in self.reservations if held.get("kind") == "head")
        return heads >= self.setting.group.max_reservations

    def _around_reservations(self, users: dict[str, User]) -> tuple[list[planned.Running], list[planned.Running]]:
        """The running entries of a plan whose reservations are all held (`_slots_held`), beside
        the carried picture's: on the reserved nodes every running job as it is, their nodes'
        entries set aside from the picture (returned: they go back after the plan); the users'
        entries hold what their jobs hold off those nodes."""
        reserved = {held["node"] for held in self.reservations}
        # In the order of `running`, that of their starts.
        exact = sorted((record for node in reserved for record in self.cluster.running_on.get(node, {}).values()),
                       key=lambda record: record.number)
        aside = [self.cluster.node_entries[node] for node in sorted(reserved) if node in self.cluster.node_entries]
        carried = self.cluster.carried
        assert carried is not None, "held slots are judged on the carried picture (_slots_held: not exact)"
        for entry in aside:
            carried.drop(entry.id)
        held: list[planned.Running] = []
        off: dict[str, tuple[dict[str, int], int]] = {}
        for record in exact:
            units, count = off.get(record.job.user, ({}, 0))
            add_to(units, record.need)
            off[record.job.user] = (units, count + 1)
        for name in users:
            user = self.books.users[name]
            if name not in off:
                held.extend(user.entries)
                continue
            units, count = off[name]
            rest = dict(user.held)
            add_to(rest, units, -1)
            held.extend(user_entries(name, rest, user.running - count, self.setting.limited))
        # A record in running_on runs: its running entry is set (_run).
        return [*held, *cast(list[planned.Running], [record.running for record in exact])], aside

    def _start(self, record: JobRecord, placement: planned.Placement, now_s: float, touched: set[UserRecord]) -> None:
        self._dequeue(record)
        self._run(record, placement["node"], now_s, now_s + record.job.runs_s, placement.get("bundle_nodes", ()))
        self._hold(record, 1, now_s, touched)
        self.outcome.events += 1

    def _run(self, record: JobRecord, node: str, start_s: float | None, end_s: float,
             bundle_nodes: list[str] | tuple = ()) -> None:
        """The record running on `node` since `start_s` (None: not started yet) until `end_s`, its
        bundles on `bundle_nodes`."""
        record.node, record.start_s, record.end_s = node, start_s, end_s
        record.homes = (node, *bundle_nodes)
        self.events.started += 1
        if not math.isinf(end_s):
            heapq.heappush(self.events.ends, (end_s, self.events.started, record))
        job = record.job.pending
        started_at = None if start_s is None else self.setting.epoch + timedelta(seconds=start_s)
        record.running = planned.started(job, node, bundle_nodes, started_at, self.setting.group.default_class)
        record.number = self.events.started
        self.cluster.running[job.id] = record
        self.cluster.running_on.setdefault(node, {})[job.id] = record

    def _begin(self, running: list[RunningAtStart]) -> None:
        """The jobs running at the start: on their nodes, charged to their users from 0 on."""
        touched: set[UserRecord] = set()
        epoch = self.setting.epoch
        for begun in running:
            job = begun.job
            started_s = _seconds(job.started_at, epoch)
            # Stopped by a preemption, it waits again, in its place in the queue: its start stands
            # for its submission, which the snapshot does not say.
            pending = planned.Pending(id=job.id, user=job.user, resources=job.resources,
                                      priority_class=job.priority_class or UNSET,
                                      submitted_at=job.started_at or epoch, **_gang(job))
            record = _record(TraceJob(pending, math.inf), self.requests, epoch)
            self.by_id[job.id] = record
            record.pending = pending
            self._run(record, job.node, started_s, math.inf if begun.end_s is None else begun.end_s,
                      tuple(job.bundle_nodes or ()))
            # A forecast's running job ends when it is expected to: what reservations count on.
            ends = ({"expected_end": epoch + timedelta(seconds=begun.end_s)}
                    if begun.end_s is not None and started_s is not None else {})
            record.stopping = job.stopping
            assert record.running is not None, "_run set it"
            record.running = replace(record.running, stopping=job.stopping, **ends)
            if job.stopping:
                self.events.victims.append(record)
            add_to(self.books.user(job.user).wanted, record.need)
            self._hold(record, 1, 0.0, touched)

    def _release(self, record: JobRecord, now_s: float, touched: set[UserRecord]) -> None:
        """The record's run is over: SUCCEEDED, or STOPPED at its max runtime, as the tick ends it."""
        self._hold(record, -1, now_s, touched)
        self._leave(record)
        add_to(self.books.user(record.job.user).wanted, record.need, -1)
        self.outcome.events += 1
        record.state = states.STOPPED if record.job.cut else states.SUCCEEDED
        self._ended(record, now_s, touched)

    def _leave(self, record: JobRecord) -> None:
        """The record runs no more."""
        node = record.node
        assert node is not None, "a running job has its node (_run)"
        del self.cluster.running[record.job.id]
        here = self.cluster.running_on[node]
        del here[record.job.id]
        if not here:
            del self.cluster.running_on[node]
        record.running = None
        record.stopping = False

    def _stop(self, record: JobRecord, now_s: float, touched: set[UserRecord]) -> None:
        """A victim stops: its resources come back, and it waits again in its place in the queue
        (its submission time is kept), its wait for resources from now; its next run starts from
        the beginning."""
        self._hold(record, -1, now_s, touched)
        self._leave(record)
        assert record.node is not None and record.pending is not None, "a victim ran, as it was admitted or begun"
        record.stopped.append((record.node, record.start_s, now_s))
        record.node = record.start_s = record.end_s = None
        record.homes = ()
        record.pending = replace(record.pending, waiting_since=self.setting.epoch + timedelta(seconds=now_s))
        self._enqueue(record, now_s)
        touched.add(self.books.user(record.job.user))
        self.outcome.events += 1

    def _hold(self, record: JobRecord, sign: int, now_s: float, touched: set[UserRecord]) -> None:
        """The record's resources taken (1) or given back (-1): each part on its node, the whole
        footprint by its user."""
        for node, part in zip(record.homes, record.parts, strict=False):
            # A node that left the group holds nothing there; its job is still its user's.
            if node in self.cluster.held_on:
                self.cluster.hold_on(node, part, sign)
        self.books.take(record.job.user, record.need, sign, now_s, touched)

