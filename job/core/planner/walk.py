"""The planner's third step: the walk. Jobs are taken class by class, the highest value first,
and in policy order within a class (policies.py). Each is checked against its shape
(Unschedulable), its start time, its user's limits, its accounts' limits and strict order, then
offered to the node selector; a placement updates the node's free resources, the user's share and
the selector's state before the next job. A job that fits nowhere may preempt (preemption.py): it
then reserves the node it preempted on and waits, `Preempting`, until its victims have stopped.

A reservation holds room for its job on its node(s): the job preempted there, or it is first in
line of its class and has waited past the group's `reserve_after` (reservations.py). Of its request
it holds, for every other job, what the jobs expected to end by its start will not free; the
reserving job itself is placed there once the node has room for it beside everything else, and
nowhere else. A job that will end before a reservation's start may use its held room (backfill);
one kept off it waits, `Reserved`."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from operator import itemgetter

from job.core.planner.entries import ID, JOB, NOT_BEFORE, SHAPE, USER, Entry
from job.core.planner.gang import first_fit, on_empty, place
from job.core.planner.picture import Gang, NodeState, Reservation, Shape, UserState, add_to
from job.core.planner.preemption import Decision, Preemptor
from job.core.planner.reservations import Ends, RunningEnds, ends_before, expected_start, held_room, soonest
from job.core.planner.rules import POLICIES, PREEMPTIONS
from job.core.planner.selectors import Selector
from job.core.planner.snapshot import Pending, Reason, Running, Snapshot

# Why a job waits: its reason, and the subject its message depends on.
Why = tuple[Reason, object]

# An entry's id, and how many entries the walk reads ahead at first and at most (Walk._run).
_ID = itemgetter(ID)
_READ_FIRST, _READ_MOST = 8, 512


class Results:
    """The walk's results as they are made, job by job, and what the running jobs and those
    placed are expected to end (the reservations' starts)."""

    def __init__(self, running: list[Running], now: datetime | None, carried_ends: dict[str, list[Running]]):
        self.placements: list[dict] = []
        # The pending job of each placement, by id (a reservation's expected ends read them).
        self.placed_jobs: dict[str, Pending] = {}
        self.waiting: list[dict] = []
        self.preemptions: list[dict] = []
        # Jobs that may reclaim within their class (fairshare), once every placement is made.
        self.reclaiming: list[tuple[dict, Why, Shape, UserState, int]] = []
        # Why those that did reclaim waited before: their records left those lists (words).
        self.reclaimed: set[Why] = set()
        # Per reason and what its message depends on, the entries waiting for that message.
        self.unsaid: dict[Why, list[dict]] = {}
        self.running, self.now, self.carried_ends = running, now, carried_ends
        # The running jobs' ends, made when a reservation first needs them.
        self.running_ends: RunningEnds | None = None

    def ends(self) -> Ends:
        """Per node id, the jobs expected to end there (reservations.py), as the plan stands."""
        if self.running_ends is None:
            self.running_ends = RunningEnds(self.running, self.now, self.carried_ends)
        return Ends(self.running_ends, self.placements, self.placed_jobs.__getitem__)


def _take_room(part: Shape, node: NodeState, rooms: Iterable[dict[str, int]]) -> None:
    """A gang's part placed on `node`: the reservations' held room there first, as `_backfill`
    takes it, then the node's free resources. What it takes of the room is held no more, and free
    room stays free for others."""
    for name, amount in part.items:
        for room in rooms:
            taken = min(amount, room.get(name, 0))
            room[name] = room.get(name, 0) - taken
            amount -= taken
        node.free[name] = node.free.get(name, 0) - amount


def _on_room(gang: Gang, nodes: list[NodeState], rooms: dict[NodeState, list[dict[str, int]]]) -> list[NodeState] | None:
    """Where a gang fits, first fit, on the nodes' free resources and the `rooms` held on them; the
    real nodes of its parts (bundles, then driver), None if it does not fit. Nothing is taken."""
    copies = on_empty(nodes, "free")
    for copy, node in zip(copies, nodes, strict=False):
        for room in rooms.get(node, ()):
            add_to(copy.free, room)
    chosen = place(gang, copies, first_fit)
    return None if chosen is None else [nodes[copies.index(copy)] for copy in chosen]


class Walk:
    """The walk over the queue: where each job goes, or why it waits, into `results`."""

    def __init__(self, snapshot: Snapshot, totals: dict[str, int], results: Results,
                 reserved: dict[str, Reservation], selector: Selector, preemptor: Preemptor | None):
        self.group = group = snapshot.group
        self.now = snapshot.now
        self.policy = POLICIES[group.policy]
        self.reclaims = PREEMPTIONS[group.preemption].reclaims
        self.totals, self.results, self.reserved = totals, results, reserved
        self.selector, self.preemptor = selector, preemptor
        # The head-of-line reservations, how many more the plan may make, and whether the class
        # walked may make one still (its first job to wait for resources: `_head`).
        self.heads = [held for held in reserved.values() if held.kind == "head"]
        self.head_slots = group.max_reservations - len(self.heads) if snapshot.now is not None else 0
        self.head_open = False
        # Under strict order, the first job that waits for resources: those after it wait too.
        self.blocker: str | None = None
        # What holds only until the next placement or reservation (`_changed`), per shape: the
        # room of the reservations it fits (`_rooms`); for a shape that fits no node's free
        # resources, why any job of it waits (`_no_room`), where nothing of the job itself counts.
        self.rooms: dict[Shape, list[tuple[Reservation, NodeState, dict[str, int]]]] = {}
        self.settled: dict[Shape, Why] = {}

    def tier(self, value: int, entries: list[Entry]) -> None:
        """The jobs of one class value, in the order of the group's policy."""
        end = 0
        # The first job of the class to wait for resources may reserve (_head).
        self.head_open = self.head_slots > 0

        def taken() -> int:
            return end

        for queue, start in self.policy.order(entries, taken):
            end = self._run(queue, start, value)

    def _run(self, queue: list[Entry], start: int, value: int) -> int:  # noqa: C901 (inline: see below)
        """The entries of a run from `start` on, until one is placed: the index after it, else
        the run's end. Each is held back (why it waits whatever the nodes: its shape, its start
        time, its user's limits), or goes somewhere, or waits for want of room. Inline, not a call
        per step: this runs once per pending job."""
        results = self.results
        go, waiting, unsaid, settled, reserved = self._go, results.waiting, results.unsaid, self.settled, self.reserved
        reclaims, reclaiming = self.reclaims, results.reclaiming
        why: Why | None
        index, step = start, _READ_FIRST
        while index < len(queue):
            # Sorted, the entries and their ids lie scattered in memory: a cache miss or two per
            # entry, one after the other in this loop (a fifth of the plan's time at a million
            # jobs), but many at once in the C loops that take the next few entries and their ids.
            # Few at first: a run often ends at its first entry, and the next starts where it ended.
            ahead = queue[index:index + step]
            step = min(2 * step, _READ_MOST)
            for entry, ident in zip(ahead, list(map(_ID, ahead)), strict=False):
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
                    reclaiming.append((record, why, shape, user, value))
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
            for part, home in zip((*gang.bundles, gang.driver), nodes, strict=False):
                self.selector.placed(home)
                self.selector.picked(part, home)
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
            gang = shape.gang
            kept_off = self._backfill(job, shape, user) if gang is None else self._backfill_gang(job, shape, gang, user)
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
        now = self.now
        # A plan without a now makes no head reservation (`head_slots`).
        assert now is not None
        if ident in self.reserved or (now - submitted).total_seconds() < reserve_after:
            return why
        since = job.waiting_since or job.submitted_at
        if since is None or (now - since).total_seconds() < reserve_after:
            return why
        taken = {node for held in self.reserved.values() for node in held.needs}
        judged = soonest(shape, [node for node in shape.pool.nodes if node not in taken], self.results.ends())
        if judged is None:
            return why
        *homes, node = judged.nodes
        reservation = Reservation(ident, node, shape, user, "head", homes if shape.gang is not None else None,
                                  start=expected_start(now, judged.start_s), blockers=judged.blockers)
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
        kept_off = None
        for reservation, node, room in self._rooms(shape):
            if not ends_before(job, reservation, self.now):
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

    def _backfill_gang(self, job: Pending, shape: Shape, gang: Gang, user: UserState) -> Reservation | bool | None:
        """A job with bundles (`gang`, its shape's), as `_backfill` does a plain one: placed whole
        (first fit, in node order) on the nodes' free resources and the room held by the
        reservations it ends before, True once placed; else the first reservation whose room it
        would fit with, or None."""
        nodes = shape.pool.nodes
        rooms: dict[NodeState, list[dict[str, int]]] = {}
        delayed = []
        for reservation in self.heads:
            if ends_before(job, reservation, self.now):
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
        for part, node in zip((*gang.bundles, gang.driver), chosen, strict=False):
            _take_room(part, node, rooms.get(node, ()))
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
        results = self.results
        results.placed_jobs[ident] = job
        user.take(shape, self.totals)
        self.selector.placed(node)
        if bundle_nodes is None:
            results.placements.append({"job": ident, "node": node.id})
        else:
            results.placements.append({"job": ident, "node": node.id, "bundle_nodes": [n.id for n in bundle_nodes]})

    def reclaim(self) -> None:
        """Reclaim within a class, after every placement: a later placement of the waiting user
        could otherwise undo the inequality that allowed it (preemption.py)."""
        preemptor = self.preemptor
        # Only a group that preempts reclaims.
        if preemptor is None:
            return
        for record, why, shape, user, value in self.results.reclaiming:
            if record["job"] in self.reserved:
                continue
            decision = preemptor.victims_for(shape, user, value, reclaim=True)
            if decision is not None:
                self._preempt(record["job"], shape, user, decision)
                record["reason"] = "Preempting"
                self.results.unsaid["Preempting", decision] = [record]
                self.results.reclaimed.add(why)

    def _preempt(self, ident: str, shape: Shape, user: UserState, decision: Decision) -> None:
        """The job reserves the decision's node(s): of its request on each, what its victims will
        not free there is held from every later job."""
        homes = decision.bundle_nodes
        self._hold(Reservation(ident, decision.node, shape, user, bundle_nodes=homes), decision.freed)
        record = {"job": ident, "node": decision.node.id, "victims": [v.id for v in decision.victims]}
        if homes is not None:
            record["bundle_nodes"] = [node.id for node in homes]
        self.results.preemptions.append(record)
