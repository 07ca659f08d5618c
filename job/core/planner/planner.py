"""The planner: a snapshot of one resource group in, a plan out. Pure: no I/O, no clock, no
randomness; the same snapshot gives the same plan.

Jobs are taken class by class, the highest value first, and in policy order within a class (with
accounts, fair share goes down their tree: policies.py). Each is checked against its shape
(Unschedulable), its `not_before`, its user's limits, its accounts' limits and strict order,
then offered to the node selector; a placement updates the node's free resources, the user's share
and the selector's state before the next job. A job that fits nowhere may preempt (preemption.py):
it then reserves the node it preempted on and waits, `Preempting`, until its victims have stopped.

A reservation holds room for its job on its node(s): the job preempted there, or it is first in
line of its class and has waited past the group's `reserve_after` (reservations.py). Of its request
it holds, for every other job, what the jobs expected to end by its start will not free; the
reserving job itself is placed there once the node has room for it beside everything else, and
nowhere else. A job that will end before a reservation's start may use its held room (backfill);
one kept off it waits, `Reserved`.

A node's free resources start at its total, less what work outside the queue holds there
(`nodes[].outside`, at most the total) and what our running jobs hold. Outside load costs work per
node, once, and per waiting shape in its message: nothing per job.
"""

from __future__ import annotations

import gc
from datetime import datetime, timezone
from operator import itemgetter
from typing import TYPE_CHECKING

from job.core.planner.entries import ID, ID_LENGTH, JOB, NOT_BEFORE, POSITION, SHAPE, USER, Entry
from job.core.planner.gang import first_fit, on_empty, place
from job.core.observed import naming
from job.core.planner.messages import MESSAGES, Words
from job.core.planner.picture import AccountState, Gang, NodeState, Pool, Reservation, Shape, UserState, add_to
from job.core.planner.nodes import node_states
from job.core.planner.preemption import Candidate, Decision, Preemptor
from job.core.planner.reservations import Ends, RunningEnds, expected_start, held_room, judge, soonest
from job.core.planner.rules import POLICIES, PREEMPTIONS, SELECTORS, memory
from job.core.planner.snapshot import DEFAULT_USER, Pending, Plan, Reason, Running, Snapshot, account_path, limits_of
from job.core.resources import Resources, dominant_share, footprint_of, to_units

if TYPE_CHECKING:
    from job.core.planner.carried import Carried

# Jobs without submitted_at are ordered by their place in the list, before those with one.
_NO_TIME = datetime.min.replace(tzinfo=timezone.utc)

# Why a job waits: its reason, and the subject its message depends on.
Why = tuple[Reason, object]

# An entry's id, and how many entries the planner's walk reads ahead at first and at most (_walk).
_ID = itemgetter(ID)
_READ_FIRST, _READ_MOST = 8, 512


def plan(snapshot: Snapshot, carried: Carried | None = None, worded: bool = True) -> Plan:
    """The plan of `snapshot`; with `carried`, of the snapshot whose nodes and first running jobs
    are the carried picture's (carried.py), which the plan gives back as it found it. Not
    `worded`, its waiting records carry no message ("") and its `said` is None: for a caller that
    reads none, the simulation, whose plans' wording was a tenth of its time."""
    # A plan allocates a few objects per pending job and frees none before it returns, so the
    # cyclic collector would only walk them again and again: a quarter of the time at 100k jobs.
    # It makes no cycles worth collecting early; the collector's state is restored as it was.
    collecting = gc.isenabled()
    gc.disable()
    result = None
    try:
        result = _Planner(snapshot, carried).run(worded)
        return result
    finally:
        if carried is not None:
            carried.restore(snapshot, result)
        if collecting:
            gc.enable()


def _charged(need: Resources, job: Running) -> Resources:
    """What a running job's user is charged: per resource, the larger of its declaration (`need`)
    and what Ray shows it holding (`uses`)."""
    uses = job.uses
    if not uses:
        return need
    used = Resources.of(uses)
    return Resources((name, max(need.get(name), used.get(name))) for name in {*need, *used})


def _homes_fit(shape: Shape, homes: list[NodeState | None] | None) -> bool:
    """Whether a reservation's bundle nodes (None: all on its node) are there, one per bundle."""
    if homes is None:
        return True
    return shape.gang is not None and len(homes) == len(shape.gang.bundles) and None not in homes


def _on_room(gang: Gang, nodes: list[NodeState], rooms: dict[NodeState, list[dict[str, int]]]) -> list[NodeState] | None:
    """Where a gang fits, first fit, on the nodes' free resources and the `rooms` held on them; the
    real nodes of its parts (bundles, then driver), None if it does not fit. Nothing is taken."""
    copies = on_empty(nodes, "free")
    for copy, node in zip(copies, nodes):
        for room in rooms.get(node, ()):
            add_to(copy.free, room)
    chosen = place(gang, copies, first_fit)
    return None if chosen is None else [nodes[copies.index(copy)] for copy in chosen]


class _Planner:
    def __init__(self, snapshot: Snapshot, carried: Carried | None = None):
        self.snapshot = snapshot
        group = self.group = snapshot.group
        self.policy = POLICIES[group.policy]
        self.preemption = PREEMPTIONS[group.preemption]
        priority = group.resource_priority
        if carried is None:
            self.nodes = node_states(snapshot.nodes, priority)
            self.by_id = {node.id: node for node in self.nodes}
            # Whether any node has outside load or our jobs' use beyond their declaration: the
            # waiting messages look for them only then.
            self.outside = any(node.outside or node.held for node in self.nodes)
            self.holding = {job for node in self.nodes for job in node.held}
            self.totals: dict[str, int] = {}
            for node in self.nodes:
                add_to(self.totals, node.total)
            self.pools: dict[str, Pool] = {}
            self.carried_ends: dict[str, list[Running]] = {}
        else:
            carried.check(group)
            self.nodes, self.by_id, self.outside, self.holding = carried.nodes, carried.by_id, carried.outside, carried.holding
            self.totals, self.pools, self.carried_ends = dict(carried.totals), carried.pools, carried.on_node
        self.users: dict[str, UserState] = {}
        self.accounts = self._accounts()
        self.shapes: dict[tuple, Shape] = {}
        # Two ways of writing the same request (key order, 1 vs 1.0) share one shape.
        self.interned: dict[tuple[Resources, str], Shape] = {}
        self.values = {c.name: c.value for c in group.priority_classes}
        self.default_value = self.values[group.default_class]
        self.preemptible = {c.name for c in group.priority_classes if c.preemptible}
        # Running jobs that may be stopped, by node id, and those being stopped (user, request):
        # filled only when the group preempts.
        self.candidates: dict[str, list[Candidate]] = {}
        self.going: list[tuple[UserState, Resources]] = []
        # The words naming each running job that holds a node beyond its declaration, by id.
        self.holders: dict[str, str] = {}
        self.requests: dict[tuple, Resources] = {}
        if carried is not None:
            carried.charge(self._user)
        self._charge_running()
        self._start_plan()
        wanted = {r["job"]: r for r in snapshot.reservations}
        reserving: dict[str, Entry] = {}
        self.tiers = self._entries(wanted, reserving)
        # The running jobs' ends, made when a reservation first needs them.
        self.running_ends: RunningEnds | None = None
        self.reserved = self._hold_reservations(wanted, reserving)
        # The head-of-line reservations, and how many more the plan may make.
        self.heads = [held for held in self.reserved.values() if held.kind == "head"]
        self.head_slots = group.max_reservations - len(self.heads) if snapshot.now is not None else 0
        self.head_open = False
        requested = set().union(*(shape.names for shape in self.shapes.values())) - set(priority)
        self.order = (*priority, *sorted(requested))
        rule = self.selector_rule = SELECTORS[group.selector]
        state = rule.kind.State.model_validate(snapshot.state.get(rule.state_name, {}))
        self.selector = (rule.kind(self.nodes, self.order, state) if carried is None
                         else carried.selector(rule.kind, self.order, state, snapshot))
        coming = [(held.user, held.shape.need) for held in self.reserved.values() if held.kind == "preemption"]
        self.preemptor = (Preemptor(group, self.totals, self.candidates, coming, self.going)
                          if self.preemption.preempts else None)

    def _start_plan(self) -> None:
        """The plan as it is made, job by job."""
        self.placements: list[dict] = []
        # The pending job of each placement, by id (a reservation's expected ends read them).
        self.placed_jobs: dict[str, Pending] = {}
        self.waiting: list[dict] = []
        self.preemptions: list[dict] = []
        # Jobs that may reclaim within their class (fairshare), once every placement is made.
        self.reclaiming: list[tuple[dict, Why, Shape, UserState, int]] = []
        # Why those that did reclaim waited before: their records left those lists (_word).
        self.reclaimed: set[Why] = set()
        # Per reason and what its message depends on, the entries waiting for that message.
        self.unsaid: dict[Why, list[dict]] = {}
        # Under strict order, the first job that waits for resources: those after it wait too.
        self.blocker: str | None = None
        # What holds only until the next placement or reservation (`_changed`), per shape: the
        # room of the reservations it fits (`_rooms`); for a shape that fits no node's free
        # resources, why any job of it waits (`_no_room`), where nothing of the job itself counts.
        self.rooms: dict[Shape, list[tuple[Reservation, NodeState, dict[str, int]]]] = {}
        self.settled: dict[Shape, Why] = {}

    def _user(self, name: str) -> UserState:
        user = self.users.get(name)
        if user is None:
            spec = self.snapshot.users.get(name, DEFAULT_USER)
            max_running, max_resources = limits_of(self.group, spec)
            user = self.users[name] = UserState(
                name=name,
                shares=spec.shares,
                memory=memory(self.group.policy, spec.usage, self.group.half_life_s),
                max_running=max_running,
                max_resources=max_resources,
                accounts=tuple(self.accounts[account] for account in account_path(self.snapshot.accounts, spec.account)),
            )
        return user

    def _accounts(self) -> dict[str, AccountState]:
        """The snapshot's accounts, each with the memory of every user below it (an account's
        usage is the sum of its users')."""
        snapshot = self.snapshot
        accounts = {}
        for name, spec in snapshot.accounts.items():
            limits = None if spec.max_resources is None else {r: to_units(a) for r, a in spec.max_resources.items()}
            accounts[name] = AccountState(name, spec.shares, 0.0, spec.max_running, limits)
        for spec in snapshot.users.values():
            if spec.account is not None and spec.usage:
                past = memory(self.group.policy, spec.usage, self.group.half_life_s)
                for name in account_path(snapshot.accounts, spec.account):
                    accounts[name].memory += past
        return accounts

    def _charge_running(self) -> None:
        by_id = self.by_id
        preempts = self.preemption.preempts
        holding = self.holding
        users, user_of = self.users, self._user
        # A plain job (no bundles, no use shown beyond its request) charged inline: a thousand
        # nodes' running jobs are a few thousand per plan, every plan.
        # Per request as written, its units as (name, units) pairs.
        units_of: dict[tuple, tuple[tuple[str, int], ...]] = {}
        for job in self.snapshot.running:
            name = job.user
            user = users.get(name) or user_of(name)
            user.running += 1
            if job.bundles or job.uses or preempts or job.id in holding:
                self._charge_one(job, user, by_id, holding)
                continue
            raw = tuple(job.resources.items())
            units = units_of.get(raw)
            if units is None:
                units = units_of[raw] = tuple(self._request(raw).items())
            used = user.used
            node = by_id.get(job.node)
            if node is None:
                for resource, amount in units:
                    used[resource] = used.get(resource, 0) + amount
                continue
            free = node.free
            for resource, amount in units:
                used[resource] = used.get(resource, 0) + amount
                free[resource] = free.get(resource, 0) - amount
        for user in self.users.values():
            user.dominant = dominant_share(user.used, self.totals)
            for account in user.accounts:
                add_to(account.used, user.used)
                account.running += user.running
        for account in self.accounts.values():
            account.dominant = dominant_share(account.used, self.totals)

    def _charge_one(self, job: Running, user: UserState, by_id: dict[str, NodeState], holding: set[str]) -> None:
        """A running job charged on its own: one with bundles, one that uses more than it asked
        for or holds a node beyond it, or any when the group preempts (each a possible victim)."""
        if job.id in holding:
            self.holders[job.id] = naming(job.id, user.name, Resources.of(job.uses or {}), footprint_of(job.resources, job.bundles))
        if job.bundles:
            self._charge_gang(job, user, by_id)
            return
        need = self._request(tuple(job.resources.items()))
        add_to(user.used, _charged(need, job))
        node = by_id.get(job.node)
        if node is not None:
            add_to(node.free, need, -1)
            if self.preemption.preempts:
                self._may_be_victim(job, user, need, {node.id: need})

    def _request(self, raw: tuple) -> Resources:
        """A running job's request from its items as written, made once per distinct one."""
        need = self.requests.get(raw)
        if need is None:
            need = self.requests[raw] = Resources.of(dict(raw))
        return need

    def _charge_gang(self, job: Running, user: UserState, by_id: dict[str, NodeState]) -> None:
        """A running job with bundles holds its driver's request on its node and each bundle on the
        bundle's node; its user is charged the whole footprint."""
        need = footprint_of(job.resources, job.bundles)
        add_to(user.used, _charged(need, job))
        here: dict[str, dict[str, int]] = {}
        for node_id, part in zip([job.node, *job.bundle_nodes], [job.resources, *job.bundles]):
            if node_id in by_id:
                add_to(here.setdefault(node_id, {}), Resources.of(part))
        for node_id, amounts in here.items():
            add_to(by_id[node_id].free, amounts, -1)
        if here and self.preemption.preempts:
            self._may_be_victim(job, user, need, {node_id: Resources(amounts) for node_id, amounts in here.items()})

    def _may_be_victim(self, job: Running, user: UserState, need: Resources, holds: dict[str, Resources]) -> None:
        """A running job of a group that preempts: being stopped already, it is going; old enough
        and of a preemptible class, a candidate on each node it holds something on (`holds`)."""
        group = self.group
        started = job.started_at
        if job.stopping:
            self.going.append((user, need))
        elif started is not None:
            run_s = (self.snapshot.now - started).total_seconds()
            name = job.priority_class or group.default_class
            if run_s >= group.min_runtime_s and name in self.preemptible:
                nodes = tuple(holds)
                for node_id, here in holds.items():
                    self.candidates.setdefault(node_id, []).append(
                        Candidate(job.id, user, self.values[name], need, started, run_s, here, nodes))

    def _entries(self, wanted: dict[str, str], reserving: dict[str, Entry]) -> list[tuple[int, list[Entry]]]:
        """The entries by class value, the highest first, each class's in the order of their last
        fields that sort (POSITION, ID_LENGTH, ID), as the policies take them (policies.py); those
        of the jobs in `wanted` (that hold a reservation) also go to `reserving`."""
        entries: list[Entry] = []
        append = entries.append
        shapes = self.shapes
        users = self.users
        now = self.snapshot.now
        # One class (the usual case): no class to read per job.
        values = self.values if len(self.values) > 1 else None
        tiers: dict[int, list[Entry]] = {self.default_value: entries}
        # Whether the list is in that order already, as the tick's is: every job submitted (its
        # POSITION 0), by id in the order of entries.py. Else each class is sorted so here.
        ordered, last_length, last = True, 0, ""
        for position, job in enumerate(self.snapshot.pending):
            labels = job.node_labels
            raw = (tuple(job.resources.items()), tuple(labels.items())) if labels else tuple(job.resources.items())
            bundles = job.bundles
            if bundles:
                raw = (None, raw, tuple(tuple(bundle.items()) for bundle in bundles), job.bundle_strategy or "PACK")
            shape = shapes.get(raw) or self._new_shape(raw, job)
            submitted = job.submitted_at
            ident = job.id
            user = users.get(job.user) or self._user(job.user)
            # Only a start time still to come holds a job back. Decided here, it spares the plan
            # reading the job itself again, in an order that is not the list's.
            later = job.not_before
            if later is not None and later <= now:
                later = None
            # An Entry, a plain tuple in the order of entries.py: NEG_PRIORITY, SUBMITTED_AT,
            # POSITION, ID_LENGTH, ID, NOT_BEFORE, SHAPE, USER, JOB.
            length = len(ident)
            entry = (-job.priority, submitted or _NO_TIME, 0 if submitted else position, length, ident, later,
                     shape, user, job)
            if ordered:
                ordered = submitted is not None and (length > last_length or length == last_length and ident > last)
                last_length, last = length, ident
            if values is None:
                append(entry)
            else:
                tier = tiers.get(values[job.priority_class or self.group.default_class])
                if tier is None:
                    tier = tiers[values[job.priority_class]] = []
                tier.append(entry)
            if wanted and ident in wanted:
                reserving[ident] = entry
        if not ordered:
            for tier in tiers.values():
                tier.sort(key=itemgetter(POSITION, ID_LENGTH, ID))
        return sorted(tiers.items(), key=lambda item: -item[0])

    def _hold_reservations(self, wanted: dict[str, dict], reserving: dict[str, Entry]) -> dict[str, Reservation]:
        """The reservations that hold, by job: each whose job waits and whose nodes are still there
        and big enough holds its room there (a head-of-line one judged again, at most the group's
        max_reservations of them); the others end here."""
        by_id = self.by_id
        kept: dict[str, Reservation] = {}
        heads = 0
        ends = None
        for ident, record in wanted.items():
            entry, node = reserving.get(ident), by_id.get(record["node"])
            homes = [by_id.get(home) for home in record["bundle_nodes"]] if "bundle_nodes" in record else None
            kind = record.get("kind", "preemption")
            if entry is None or node is None or not _homes_fit(entry[SHAPE], homes):
                continue
            if kind == "head" and heads >= self.group.max_reservations:
                continue
            reservation = Reservation(ident, node, entry[SHAPE], entry[USER], kind, homes)
            if not all(home.total.get(name, 0) >= amount for home, need in reservation.needs.items()
                       for name, amount in need.items()):
                continue
            freed = {}
            if kind == "head":
                ends = ends if ends is not None else self._ends()
                judged = judge(reservation, ends)
                if judged is None:
                    continue
                heads += 1
                reservation.start, reservation.blockers = expected_start(self.snapshot.now, judged.start_s), judged.blockers
                freed = judged.freed
            reservation.held = held_room(reservation.needs, freed)
            for home, amounts in reservation.held.items():
                add_to(home.free, amounts, -1)
            kept[ident] = reservation
        return kept

    def _ends(self) -> Ends:
        """Per node id, the jobs expected to end there (reservations.py), as the plan stands."""
        if self.running_ends is None:
            self.running_ends = RunningEnds(self.snapshot.running, self.snapshot.now, self.carried_ends)
        return Ends(self.running_ends, self.placements, self.placed_jobs.__getitem__)

    def _new_shape(self, raw: tuple, job: Pending) -> Shape:
        # `raw` is the request as written: its items alone without labels, the pair of items and
        # labels with them (the two cannot be equal: items start with a name, not a tuple), and
        # for a job with bundles (None, that, its bundles' items, its strategy).
        labels = job.node_labels or {}
        pool_key = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pool = self.pools.get(pool_key)
        if pool is None:
            pool = self.pools[pool_key] = Pool(
                key=pool_key,
                labels=labels,
                nodes=[n for n in self.nodes if all(n.labels.get(k) == v for k, v in labels.items())] if labels
                else list(self.nodes),
            )
        bundles = job.bundles
        shape = self._gang_shape(job, pool) if bundles else self._plain(Resources.of(job.resources), pool)
        self.shapes[raw] = shape
        return shape

    def _plain(self, need: Resources, pool: Pool) -> Shape:
        shape = self.interned.get((need, pool.key))
        if shape is None:
            shape = self.interned[(need, pool.key)] = Shape(need=need, pool=pool)
        return shape

    def _gang_shape(self, job: Pending, pool: Pool) -> Shape:
        """The shape of a job with bundles: its whole footprint, and its parts as plain shapes of
        its pool (which plain jobs of the same request share)."""
        bundles = tuple(self._plain(Resources.of(bundle), pool) for bundle in job.bundles)
        gang = Gang(driver=self._plain(Resources.of(job.resources), pool), bundles=bundles,
                    strategy=job.bundle_strategy or "PACK",
                    together=self._plain(Resources.total(bundle.need for bundle in bundles), pool))
        shape = Shape(need=footprint_of(job.resources, job.bundles), pool=pool, gang=gang)
        shape.unschedulable = place(gang, on_empty(pool.nodes), first_fit) is None
        return shape

    def run(self, worded: bool) -> Plan:
        for value, entries in self.tiers:
            self._tier(value, entries)
        self._reclaim()
        if worded:
            self._word()
        else:
            self.said = None
        return self._plan()

    def _tier(self, value: int, entries: list[Entry]) -> None:
        """The jobs of one class value, in the order of the group's policy."""
        end = 0
        # The first job of the class to wait for resources may reserve (_head).
        self.head_open = self.head_slots > 0

        def taken() -> int:
            return end

        for queue, start in self.policy.order(entries, taken):
            end = self._walk(queue, start, value)

    def _walk(self, queue: list[Entry], start: int, value: int) -> int:
        """The entries of a run from `start` on, until one is placed: the index after it, else
        the run's end. Each is held back (why it waits whatever the nodes: its shape, its start
        time, its user's limits), or goes somewhere, or waits for want of room. Inline, not a call
        per step: this runs once per pending job."""
        go, waiting, unsaid, settled, reserved = self._go, self.waiting, self.unsaid, self.settled, self.reserved
        reclaims = self.preemption.reclaims
        index, step = start, _READ_FIRST
        while index < len(queue):
            # Sorted, the entries and their ids lie scattered in memory: a cache miss or two per
            # entry, one after the other in this loop (a fifth of the plan's time at a million
            # jobs), but many at once in the C loops that take the next few entries and their ids.
            # Few at first: a run often ends at its first entry, and the next starts where it ended.
            ahead = queue[index:index + step]
            step = min(2 * step, _READ_MOST)
            for entry, ident in zip(ahead, list(map(_ID, ahead))):
                later, shape, user = entry[NOT_BEFORE], entry[SHAPE], entry[USER]
                if shape.unschedulable:
                    why = "Unschedulable", shape
                elif later is not None:
                    why = "NotBefore", later
                elif user.max_running is not None and user.running >= user.max_running:
                    why = "UserJobLimit", user
                elif user.max_resources is not None and not user.may_take(shape):
                    why = "UserResourceLimit", (user, shape)
                elif not user.accounts or (why := user.limited(shape)) is None:
                    # A job of a shape that fits nowhere, and holds no reservation, waits as the last one did.
                    why = settled.get(shape)
                    if why is None or (reserved and ident in reserved):
                        why = go(entry[JOB], shape, user, value)
                        if why is None:
                            return index + 1
                    if self.head_open and why[0] == "Resources":
                        why = self._head(entry, why)
                reason = why[0]
                record = {"job": ident, "reason": reason, "message": ""}
                waiting.append(record)
                if reclaims and reason == "Resources":
                    self.reclaiming.append((record, why, shape, user, value))
                same = unsaid.get(why)
                if same is None:
                    unsaid[why] = [record]
                else:
                    same.append(record)
                index += 1
        return len(queue)

    def _go(self, job: Pending, shape: Shape, user: UserState, value: int) -> Why | None:
        """Where the job goes: its reserved node, else the node the selector chooses; None once
        it is placed, else why it waits (strict order, no room, or preempting to make room)."""
        reservation = self.reserved.get(job.id) if self.reserved else None
        if reservation is not None:
            return self._to_reserved(reservation, job)
        if self.blocker is not None:
            return "Priority", self.blocker
        if not shape.full and self._fitted(job, shape, user):
            return None
        # Free resources only go down: what did not fit now will not fit later in the plan.
        shape.full = True
        return self._no_room(job, shape, user, value)

    def _fitted(self, job: Pending, shape: Shape, user: UserState) -> bool:
        """Whether the job is placed on the nodes' free resources, where the selector chooses (a
        job with bundles: whole, as its strategy and the selector allow)."""
        gang = shape.gang
        if gang is not None:
            nodes = place(gang, shape.pool.nodes, self.selector.pick)
            if nodes is None:
                return False
            for part, node in zip((*gang.bundles, gang.driver), nodes):
                self.selector.placed(node)
                self.selector.picked(part, node)
            self._placed(job, nodes[-1], shape, user, nodes[:-1])
            return True
        node = self.selector.select(shape)
        if node is None:
            return False
        free = node.free
        for name, amount in shape.items:
            free[name] -= amount
        self._placed(job, node, shape, user)
        return True

    def _no_room(self, job: Pending, shape: Shape, user: UserState, value: int) -> Why | None:
        """A job that fits no node's free resources: placed on the room a reservation holds
        (backfill), else it waits, or preempts for its whole footprint (a job with bundles: on
        one node, else across nodes)."""
        kept_off = None
        if self.heads:
            kept_off = self._backfill(job, shape, user) if shape.gang is None else self._backfill_gang(job, shape, user)
            if kept_off is True:
                return None
        decision = None if self.preemptor is None else self.preemptor.victims_for(shape, user, value)
        if self.group.strict_order:
            self.blocker = job.id
        if decision is None:
            why = ("Reserved", kept_off) if kept_off is not None else ("Resources", shape)
            # Where nothing of the job itself was read, every job of its shape waits so until the
            # next change (most of the jobs of a large queue). Strict order: the jobs after this
            # one wait for it instead.
            if self.preemptor is None and not self.group.strict_order and self._alike(shape):
                self.settled[shape] = why
            return why
        self._preempt(job.id, shape, user, decision)
        return "Preempting", decision

    def _alike(self, shape: Shape) -> bool:
        """Whether the backfill of a job of the shape, as the plan stands, is that of any other:
        it reads a job's max runtime only on a reservation's room with a start."""
        if shape.gang is not None:
            return not self.heads
        return all(reservation.start is None for reservation, _, _ in self._rooms(shape))

    def _to_reserved(self, reservation: Reservation, job: Pending) -> Why | None:
        """A reserving job starts on its node(s), and only there."""
        if reservation.fits():
            del self.reserved[reservation.job]
            if reservation.kind == "head":
                self.heads.remove(reservation)
            elif self.preemptor is not None:
                self.preemptor.started(reservation.user, reservation.shape.need)
            for node, need in reservation.needs.items():
                add_to(node.free, reservation.held[node])
                add_to(node.free, need, -1)
                # What it held may be less than it takes: the selectors see each node's new free.
                self.selector.placed(node)
            node, gang = reservation.node, reservation.shape.gang
            here = None if gang is None else reservation.bundle_nodes or [node] * len(gang.bundles)
            self._placed(job, node, reservation.shape, reservation.user, here)
            return None
        # It waits for resources, only on its node: behind it, strict order waits too.
        if self.group.strict_order:
            self.blocker = reservation.job
        return ("Resources", reservation) if reservation.kind == "head" else ("Preempting", reservation)

    def _head(self, entry: Entry, why: Why) -> Why:
        """The first job of its class to wait for resources: past the group's reserve_after, it
        reserves where it fits soonest (reservations.py), unless it holds a reservation already."""
        self.head_open = False
        _, submitted, _, _, _, _, shape, user, job = entry
        # It waits for resources since it was submitted at the earliest: a job submitted since
        # reserve_after is passed over without reading the job itself.
        reserve_after = self.group.reserve_after_s
        ident = job.id
        if ident in self.reserved or (self.snapshot.now - submitted).total_seconds() < reserve_after:
            return why
        since = job.waiting_since or job.submitted_at
        if since is None or (self.snapshot.now - since).total_seconds() < reserve_after:
            return why
        taken = {node for held in self.reserved.values() for node in held.needs}
        judged = soonest(shape, [node for node in shape.pool.nodes if node not in taken], self._ends())
        if judged is None:
            return why
        *homes, node = judged.nodes
        reservation = Reservation(ident, node, shape, user, "head", homes if shape.gang is not None else None,
                                  start=expected_start(self.snapshot.now, judged.start_s), blockers=judged.blockers)
        self._hold(reservation, judged.freed)
        self.heads.append(reservation)
        self.head_slots -= 1
        return "Resources", reservation

    def _hold(self, reservation: Reservation, freed: dict[NodeState, dict[str, int]]) -> None:
        """Holds, from the rest of the plan, what of the request what frees by the start will not
        cover; never below 0 left free (what the selectors' keys allow, heap_keys.py), and what
        was taken is what the reservation holds."""
        self._changed()
        reservation.held = {}
        for node, amounts in held_room(reservation.needs, freed).items():
            taken = reservation.held[node] = {}
            free = node.free
            for name, amount in amounts.items():
                before = free.get(name, 0)
                free[name] = max(before - amount, min(before, 0))
                taken[name] = before - free[name]
            self.selector.placed(node)
        self.reserved[reservation.job] = reservation

    def _backfill(self, job: Pending, shape: Shape, user: UserState) -> Reservation | bool | None:
        """A job that fits no node's free resources, on the room a head-of-line reservation holds:
        True once placed there (it ends before that reservation's start), else the reservation it
        would delay, or None when no reserved node has room for it."""
        kept_off = runtime = None
        for reservation, node, room in self._rooms(shape):
            start = reservation.start
            # Without a start nothing ends before it: the job itself is not read.
            if start is not None:
                runtime = runtime or job.max_runtime_s
            if runtime is None or start is None or (start - self.snapshot.now).total_seconds() < runtime:
                kept_off = kept_off or reservation
                continue
            for name, amount in shape.items:
                real = node.free.get(name, 0) + room.get(name, 0) - amount
                node.free[name] = min(node.free.get(name, 0), real)
                room[name] = real - node.free[name]
            self._placed(job, node, shape, user)
            return True
        return kept_off

    def _rooms(self, shape: Shape) -> list[tuple[Reservation, NodeState, dict[str, int]]]:
        """The head-of-line reservations' nodes of the shape's pool with room for it, free and
        held together, in order: what `_backfill` tries. The same for every job of the shape until
        the next placement or reservation: made once per shape between two of them, where the jobs
        that wait, most of them, are many more."""
        known = self.rooms.get(shape)
        if known is not None:
            return known
        found = [(reservation, node, room) for reservation in self.heads for node, room in reservation.held.items()
                 if node in shape.pool.members
                 and all(node.free.get(name, 0) + room.get(name, 0) >= amount for name, amount in shape.items)]
        self.rooms[shape] = found
        return found

    def _ends_before(self, job: Pending, reservation: Reservation) -> bool:
        """Whether the job will end before the reservation's start: its max runtime is known and
        short enough."""
        runtime, start = job.max_runtime_s, reservation.start
        return runtime is not None and start is not None and (start - self.snapshot.now).total_seconds() >= runtime

    def _backfill_gang(self, job: Pending, shape: Shape, user: UserState) -> Reservation | bool | None:
        """A job with bundles, as `_backfill` does a plain one: placed whole (first fit, in node
        order) on the nodes' free resources and the room held by the reservations it ends before,
        True once placed; else the first reservation whose room it would fit with, or None."""
        gang, nodes = shape.gang, shape.pool.nodes
        rooms: dict[NodeState, list[dict[str, int]]] = {}
        delayed = []
        for reservation in self.heads:
            if self._ends_before(job, reservation):
                for node, room in reservation.held.items():
                    rooms.setdefault(node, []).append(room)
            else:
                delayed.append(reservation)
        chosen = _on_room(gang, nodes, rooms)
        if chosen is None:
            if not delayed:
                return None
            for reservation in delayed:
                for node, room in reservation.held.items():
                    rooms.setdefault(node, []).append(room)
            return delayed[0] if _on_room(gang, nodes, rooms) is not None else None
        for part, node in zip((*gang.bundles, gang.driver), chosen):
            # The held room first, as `_backfill` takes it, then its free resources: what it
            # takes of the room is held no more, and free room stays free for others.
            for name, amount in part.items:
                for room in rooms.get(node, ()):
                    taken = min(amount, room.get(name, 0))
                    room[name] = room.get(name, 0) - taken
                    amount -= taken
                node.free[name] = node.free.get(name, 0) - amount
            self.selector.placed(node)
            self.selector.picked(part, node)
        self._placed(job, chosen[-1], shape, user, chosen[:-1])
        return True

    def _changed(self) -> None:
        """Free resources or the reservations' room changed: what holds only until then goes."""
        self.rooms.clear()
        self.settled.clear()

    def _placed(self, job: Pending, node: NodeState, shape: Shape, user: UserState,
                bundle_nodes: list[NodeState] | None = None) -> None:
        self._changed()
        ident = job.id
        self.placed_jobs[ident] = job
        user.take(shape, self.totals)
        self.selector.placed(node)
        if bundle_nodes is None:
            self.placements.append({"job": ident, "node": node.id})
        else:
            self.placements.append({"job": ident, "node": node.id, "bundle_nodes": [n.id for n in bundle_nodes]})

    def _reclaim(self) -> None:
        """Reclaim within a class, after every placement: a later placement of the waiting user
        could otherwise undo the inequality that allowed it (preemption.py)."""
        for record, why, shape, user, value in self.reclaiming:
            if record["job"] in self.reserved:
                continue
            decision = self.preemptor.victims_for(shape, user, value, reclaim=True)
            if decision is not None:
                self._preempt(record["job"], shape, user, decision)
                record["reason"] = "Preempting"
                self.unsaid["Preempting", decision] = [record]
                self.reclaimed.add(why)

    def _preempt(self, ident: str, shape: Shape, user: UserState, decision: Decision) -> None:
        """The job reserves the decision's node(s): of its request on each, what its victims will
        not free there is held from every later job."""
        homes = decision.bundle_nodes
        self._hold(Reservation(ident, decision.node, shape, user, bundle_nodes=homes), decision.freed)
        record = {"job": ident, "node": decision.node.id, "victims": [v.id for v in decision.victims]}
        if homes is not None:
            record["bundle_nodes"] = [node.id for node in homes]
        self.preemptions.append(record)

    def _word(self) -> None:
        """Each waiting job's message, once per reason and subject."""
        words = Words.of(self.group, self.snapshot.now, self.order, self.outside, self.holders)
        self.said = []
        for why, records in self.unsaid.items():
            reason = why[0]
            text = MESSAGES[reason](words, why[1])
            if why in self.reclaimed:
                records = [record for record in records if record["reason"] == reason]
            # Only the lists that a job left by reclaiming are read record by record: elsewhere
            # every record is given its message, and no more (a million of them in a large queue).
            for record in records:
                record["message"] = text
            self.said.append((reason, text, records))

    def _plan(self) -> Plan:
        state = self.selector.state_document()
        state = {} if state is None else {self.selector_rule.state_name: state}
        if self.preemptor is None and not self.snapshot.reservations and not self.reserved:
            return Plan.model_construct(placements=self.placements, waiting=self.waiting, state=state, said=self.said)
        return Plan.model_construct(placements=self.placements, waiting=self.waiting, state=state, said=self.said,
                                    preemptions=self.preemptions,
                                    reservations=[held.document() for held in self.reserved.values()])
