"""Reservations for the head of the line (docs/planner.md, "Reservations and backfill"): where and
when a job that waits will fit soonest, judged from the expected ends of the jobs in its way.

A job first in line of its class that has waited past the group's `reserve_after` reserves the
node (for a job with bundles, the nodes) where it will fit soonest, if the running jobs there end
when they are expected to: a job without an expected end is taken never to end, and a node that
only such jobs would free is chosen last, fewest of them first, with no expected start. What the
jobs that end by the start will free is left to others (they end first); the rest of the request
is held, so that the node drains. Jobs that will end before the start may use the held room
(backfill): they delay nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from job.core.planner.gang import first_fit, on_empty, place
from job.core.planner.picture import Gang, NodeState, Reservation, Shape, add_to
from job.core.planner.snapshot import Pending, Running
from job.core.resources import Resources

# A job expected to end this many seconds from now, what it holds on a node: (after_s, job id,
# units). An unknown end is math.inf.
End = tuple[float, str, dict[str, int]]


def may_backfill(job: Pending) -> bool:
    """Whether the job may ever use the room a reservation holds (`ends_before`): only a job whose
    max runtime is known."""
    return job.max_runtime_s is not None


def ends_before(job: Pending, reservation: Reservation, now: datetime | None) -> bool:
    """Whether the job will end before the reservation's start, so that it may use the room held
    (backfill): its max runtime is known and short enough. A start is known only at a known now
    (expected_start); without one nothing ends before it."""
    start = reservation.start
    if start is None or now is None:
        return False
    runtime = job.max_runtime_s
    return runtime is not None and (start - now).total_seconds() >= runtime


class Ends:
    """Per node id, the jobs expected to end there, the soonest first (`get`, as a dict's): the
    running jobs by their expected end, and those placed so far in this plan by their max runtime
    (unknown: never). A node's are made when first asked for: a reservation judged again asks for
    its own node(s) only, and every running job of a thousand nodes is work for every plan.

    `running` (the snapshot's running jobs) by node, and their ends, are kept for the whole plan
    (`on_nodes`, `running_ends`); the placements are read as they are when this is made."""

    def __init__(self, running: RunningEnds, placements: list[dict], job) -> None:
        self.running = running
        # The placements so far by node id, and the pending job of each (`job`: by id).
        self.placed: dict[str, list[tuple[dict, Pending]]] = {}
        for placement in placements:
            pending = job(placement["job"])
            for node_id in dict.fromkeys([placement["node"], *placement.get("bundle_nodes", ())]):
                self.placed.setdefault(node_id, []).append((placement, pending))
        self.made: dict[str, list[End]] = {}

    def get(self, node_id: str, default=()) -> list[End]:
        ends = self.made.get(node_id)
        if ends is None:
            ends = self.made[node_id] = self.running.on(node_id)
            for placement, job in self.placed.get(node_id, ()):
                runtime = job.max_runtime_s
                self.running.add(ends, node_id, [placement["node"], *placement.get("bundle_nodes", ())], job,
                                 math.inf if runtime is None else runtime)
            ends.sort(key=lambda end: (end[0], len(end[1]), end[1]))
        return ends or default


class RunningEnds:
    """The running jobs' ends on each node (`on`), from the snapshot's running jobs: grouped by
    node once per plan, when first needed, and each request's units made once. `carried`: per node
    id, the running jobs a carried picture holds there (carried.py), before the snapshot's."""

    def __init__(self, running: list[Running], now: datetime | None, carried: Mapping[str, Iterable[Running]] = {}
                 ) -> None:
        self.running, self.now, self.carried = running, now, carried
        self.by_node: dict[str, list[Running]] | None = None
        self.units: dict[tuple, dict[str, int]] = {}

    def on(self, node_id: str) -> list[End]:
        """The ends of the running jobs on `node_id`, in the snapshot's order (a new list)."""
        if self.by_node is None:
            by_node: dict[str, list[Running]] = {}
            for job in self.running:
                homes = job.bundle_nodes
                for home in dict.fromkeys([job.node, *homes]) if homes else (job.node,):
                    listed = by_node.get(home)
                    if listed is None:
                        by_node[home] = [job]
                    else:
                        listed.append(job)
            self.by_node = by_node
        ends: list[End] = []
        now = self.now
        for job in (*self.carried.get(node_id, ()), *self.by_node.get(node_id, ())):
            end = job.expected_end
            after_s = (end - now).total_seconds() if end is not None and now is not None else math.inf
            self.add(ends, node_id, [job.node, *(job.bundle_nodes or ())], job, max(after_s, 0.0))
        return ends

    def add(self, ends: list[End], node_id: str, homes: list[str], job: Running | Pending, after_s: float) -> None:
        """What `job` holds on `node_id` of `homes` (its driver's node, then each bundle's), freed
        `after_s` from now."""
        for home, part in zip(homes, [job.resources, *(job.bundles or ())], strict=False):
            if home != node_id:
                continue
            raw = tuple(part.items())
            units = self.units.get(raw)
            if units is None:
                units = self.units[raw] = dict(Resources.of(part).items())
            if units:
                ends.append((after_s, job.id, units))


@dataclass(eq=False, slots=True)
class Judgement:
    """Where and when a job fits soonest: its parts' nodes (the driver's last), the start (None:
    not known), what the jobs ending by then free on each node, and those jobs."""

    nodes: list[NodeState]
    start_s: float
    freed: dict[NodeState, dict[str, int]]
    blockers: tuple[str, ...]


def soonest(shape: Shape, nodes: list[NodeState], ends: Ends) -> Judgement | None:
    """Among `nodes` (their free resources as they are now), where a job of `shape` fits soonest;
    None where it does not fit even once every job there has ended (outside load)."""
    gang = shape.gang
    if gang is not None:
        return _soonest_gang(gang, nodes, ends)
    best, rank = None, None
    for node in nodes:
        if not shape.need.fits_in(node.total):
            continue
        judged = _sweep(_events(ends, [node]), lambda freed, node=node: _fits({node: dict(shape.items)}, freed))
        if judged is None:
            continue
        start_s, freed, blockers = judged
        key = (start_s, len(blockers), node.id)
        if rank is None or key < rank:
            best, rank = Judgement([node], start_s, freed, blockers), key
    return best


def judge(reservation: Reservation, ends: Ends) -> Judgement | None:
    """When a reservation's job fits on its nodes (their free resources before it holds any);
    None if never (outside load)."""
    judged = _sweep(_events(ends, list(reservation.needs)), lambda freed: _fits(reservation.needs, freed))
    if judged is None:
        return None
    return Judgement([*(reservation.bundle_nodes or ()), reservation.node], *judged)


def _soonest_gang(gang: Gang, nodes: list[NodeState], ends: Ends) -> Judgement | None:
    """A gang: placed whole (first fit, in node order) on copies of the nodes' free resources and
    what has freed, as the jobs on them end in turn."""
    placed: list[NodeState] = []

    def fits(freed: dict[NodeState, dict[str, int]]) -> bool:
        copies = on_empty(nodes, "free")
        for copy, node in zip(copies, nodes, strict=False):
            add_to(copy.free, freed.get(node, {}))
        chosen = place(gang, copies, first_fit)
        placed[:] = [nodes[copies.index(copy)] for copy in chosen or ()]
        return chosen is not None

    judged = _sweep(_events(ends, nodes), fits)
    if judged is None:
        return None
    start_s, freed, blockers = judged
    used = set(placed)
    # Only what the jobs on its own nodes free, and only those jobs, are its concern.
    on_used = {ident for node in used for _, ident, _ in ends.get(node.id, ())}
    return Judgement(list(placed), start_s, {node: units for node, units in freed.items() if node in used},
                     tuple(ident for ident in blockers if ident in on_used))


def _events(ends: Ends, nodes: list[NodeState]) -> list[tuple[End, NodeState]]:
    """The ends on `nodes`, the soonest first, each with its node."""
    return sorted(((end, node) for node in nodes for end in ends.get(node.id, ())),
                  key=lambda e: (e[0][0], len(e[0][1]), e[0][1]))


def _fits(needs: dict[NodeState, dict[str, int]], freed: dict[NodeState, dict[str, int]]) -> bool:
    return all(node.free.get(name, 0) + freed.get(node, {}).get(name, 0) >= amount
               for node, need in needs.items() for name, amount in need.items())


def _sweep(events: list[tuple[End, NodeState]], fits) -> tuple[float, dict, tuple[str, ...]] | None:
    """The first time `fits(freed)` holds as the jobs of `events` end in turn: (after_s, what
    they freed per node, those jobs); what frees at an unknown time is not counted as freed."""
    freed: dict[NodeState, dict[str, int]] = {}
    if fits(freed):
        return 0.0, {}, ()
    blockers = []
    for (after_s, ident, units), node in events:
        add_to(freed.setdefault(node, {}), units)
        blockers.append(ident)
        if fits(freed):
            return after_s, freed if math.isfinite(after_s) else {}, tuple(blockers)
    return None


def expected_start(now: datetime | None, start_s: float) -> datetime | None:
    if not math.isfinite(start_s):
        return None
    # Without a now no end is known, but a job may fit at once (0 s): a head reservation carried
    # in a snapshot without `now` has no time to be said at.
    assert now is not None, "a head reservation judged without the snapshot's now"
    return now + timedelta(seconds=start_s)


def held_room(needs: dict[NodeState, dict[str, int]], freed: dict[NodeState, dict[str, int]]) -> dict[NodeState, dict[str, int]]:
    """Of the request on each node, the part that what frees there by the start will not cover."""
    return {node: {name: amount - freed.get(node, {}).get(name, 0) for name, amount in need.items()
                   if amount > freed.get(node, {}).get(name, 0)}
            for node, need in needs.items()}
