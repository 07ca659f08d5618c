"""The planner's second step: the queue. Each pending job becomes an entry (entries.py) of its
shape, by class value, the highest class first; and the reservations of the snapshot that still
hold take their room on their nodes before any job is walked."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from operator import itemgetter
from typing import TypeGuard

from job.core.planner.books import Books, NodesPicture
from job.core.planner.entries import ID, ID_LENGTH, POSITION, SHAPE, USER, Entry
from job.core.planner.gang import first_fit, on_empty, place
from job.core.planner.picture import Gang, NodeState, Pool, Reservation, Shape, add_to
from job.core.planner.reservations import Ends, expected_start, held_room, judge
from job.core.planner.snapshot import Bundles, Pending, PlannedReservation, Snapshot
from job.core.resources import Resources, footprint_of

# Jobs without submitted_at are ordered by their place in the list, before those with one.
_NO_TIME = datetime.min.replace(tzinfo=UTC)

# The entries of one class value, the classes the highest first.
Tiers = list[tuple[int, list[Entry]]]


class Shapes:
    """The plan's shapes, per request as written; two ways of writing the same request (key
    order, 1 vs 1.0) share one shape."""

    def __init__(self, picture: NodesPicture):
        self.nodes = picture.nodes
        self.pools = picture.pools
        self.shapes: dict[tuple, Shape] = {}
        self.interned: dict[tuple[Resources, str], Shape] = {}

    def new(self, raw: tuple, job: Pending) -> Shape:
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
        shape = self._gang(job, bundles, pool) if bundles else self._plain(Resources.of(job.resources), pool)
        self.shapes[raw] = shape
        return shape

    def _plain(self, need: Resources, pool: Pool) -> Shape:
        shape = self.interned.get((need, pool.key))
        if shape is None:
            shape = self.interned[(need, pool.key)] = Shape(need=need, pool=pool)
        return shape

    def _gang(self, job: Pending, given: Bundles, pool: Pool) -> Shape:
        """The shape of a job with bundles (`given`, its own): its whole footprint, and its parts as
        plain shapes of its pool (which plain jobs of the same request share)."""
        bundles = tuple(self._plain(Resources.of(bundle), pool) for bundle in given)
        gang = Gang(driver=self._plain(Resources.of(job.resources), pool), bundles=bundles,
                    strategy=job.bundle_strategy or "PACK",
                    together=self._plain(Resources.total(bundle.need for bundle in bundles), pool))
        shape = Shape(need=footprint_of(job.resources, given), pool=pool, gang=gang)
        shape.unschedulable = place(gang, on_empty(pool.nodes), first_fit) is None
        return shape

    def order(self, priority: list[str]) -> tuple[str, ...]:
        """The resources the selectors order by: the group's priority, then the others asked for."""
        requested = set().union(*(shape.names for shape in self.shapes.values())) - set(priority)
        return (*priority, *sorted(requested))


def queue_of(snapshot: Snapshot, books: Books, shapes: Shapes, wanted: dict[str, PlannedReservation],
             reserving: dict[str, Entry]) -> Tiers:
    """The entries by class value, the highest first, each class's in the order of their last
    fields that sort (POSITION, ID_LENGTH, ID), as the policies take them (policies.py); those
    of the jobs in `wanted` (that hold a reservation) also go to `reserving`."""
    entries: list[Entry] = []
    append = entries.append
    known, new_shape = shapes.shapes, shapes.new
    users, user_of = books.users, books.user
    now = snapshot.now
    default_class = snapshot.group.default_class
    # One class (the usual case): no class to read per job.
    values = books.values if len(books.values) > 1 else None
    tiers: dict[int, list[Entry]] = {books.values[default_class]: entries}
    # Whether the list is in that order already, as the tick's is: every job submitted (its
    # POSITION 0), by id in the order of entries.py. Else each class is sorted so here.
    ordered, last_length, last = True, 0, ""
    for position, job in enumerate(snapshot.pending):
        labels = job.node_labels
        raw: tuple = (tuple(job.resources.items()), tuple(labels.items())) if labels else tuple(job.resources.items())
        bundles = job.bundles
        if bundles:
            raw = (None, raw, tuple(tuple(bundle.items()) for bundle in bundles), job.bundle_strategy or "PACK")
        shape = known.get(raw) or new_shape(raw, job)
        submitted = job.submitted_at
        ident = job.id
        user = users.get(job.user) or user_of(job.user)
        # Only a start time still to come holds a job back. Decided here, it spares the plan
        # reading the job itself again, in an order that is not the list's.
        later = job.not_before
        if later is not None and now is not None and later <= now:
            later = None
        # An Entry, a plain tuple in the order of entries.py: NEG_PRIORITY, SUBMITTED_AT,
        # POSITION, ID_LENGTH, ID, NOT_BEFORE, SHAPE, USER, JOB.
        length = len(ident)
        entry = (-job.priority, submitted or _NO_TIME, 0 if submitted else position, length, ident, later,
                 shape, user, job)
        if ordered:
            ordered = submitted is not None and (length > last_length or (length == last_length and ident > last))
            last_length, last = length, ident
        if values is None:
            append(entry)
        else:
            value = values[job.priority_class or default_class]
            tier = tiers.get(value)
            if tier is None:
                tier = tiers[value] = []
            tier.append(entry)
        if wanted and ident in wanted:
            reserving[ident] = entry
    if not ordered:
        for tier in tiers.values():
            tier.sort(key=itemgetter(POSITION, ID_LENGTH, ID))
    return sorted(tiers.items(), key=lambda item: -item[0])


def _homes_fit(homes: list[NodeState | None] | None, shape: Shape) -> TypeGuard[list[NodeState] | None]:
    """Whether a reservation's bundle nodes (None: all on its node) are there, one per bundle."""
    if homes is None:
        return True
    return shape.gang is not None and len(homes) == len(shape.gang.bundles) and None not in homes


def held_reservations(snapshot: Snapshot, by_id: dict[str, NodeState], wanted: dict[str, PlannedReservation],
                      reserving: dict[str, Entry], ends: Callable[[], Ends]) -> dict[str, Reservation]:
    """The reservations that hold, by job: each whose job waits and whose nodes are still there
    and big enough holds its room there (a head-of-line one judged again, at most the group's
    max_reservations of them); the others end here."""
    max_reservations = snapshot.group.max_reservations
    kept: dict[str, Reservation] = {}
    heads = 0
    known = None
    for ident, record in wanted.items():
        entry, node = reserving.get(ident), by_id.get(record["node"])
        homes = [by_id.get(home) for home in record["bundle_nodes"]] if "bundle_nodes" in record else None
        kind = record.get("kind", "preemption")
        if entry is None or node is None or not _homes_fit(homes, entry[SHAPE]):
            continue
        if kind == "head" and heads >= max_reservations:
            continue
        reservation = Reservation(ident, node, entry[SHAPE], entry[USER], kind, homes)
        if not all(home.total.get(name, 0) >= amount for home, need in reservation.needs.items()
                   for name, amount in need.items()):
            continue
        freed = {}
        if kind == "head":
            known = known if known is not None else ends()
            judged = judge(reservation, known)
            if judged is None:
                continue
            heads += 1
            reservation.start, reservation.blockers = expected_start(snapshot.now, judged.start_s), judged.blockers
            freed = judged.freed
        reservation.held = held_room(reservation.needs, freed)
        for home, amounts in reservation.held.items():
            add_to(home.free, amounts, -1)
        kept[ident] = reservation
    return kept
