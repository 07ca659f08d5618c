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
from dataclasses import dataclass
from datetime import datetime, timedelta

from job.core.planner.gang import first_fit, on_empty, place
from job.core.planner.picture import NodeState, Reservation, Shape, add_to

# A job expected to end this many seconds from now, what it holds on a node: (after_s, job id,
# units). An unknown end is math.inf.
End = tuple[float, str, dict[str, int]]


@dataclass(eq=False, slots=True)
class Judgement:
    """Where and when a job fits soonest: its parts' nodes (the driver's last), the start (None:
    not known), what the jobs ending by then free on each node, and those jobs."""

    nodes: list[NodeState]
    start_s: float
    freed: dict[NodeState, dict[str, int]]
    blockers: tuple[str, ...]


def soonest(shape: Shape, nodes: list[NodeState], ends: dict[str, list[End]]) -> Judgement | None:
    """Among `nodes` (their free resources as they are now), where a job of `shape` fits soonest;
    None where it does not fit even once every job there has ended (outside load)."""
    if shape.gang is not None:
        return _soonest_gang(shape, nodes, ends)
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


def judge(reservation: Reservation, ends: dict[str, list[End]]) -> Judgement | None:
    """When a reservation's job fits on its nodes (their free resources before it holds any);
    None if never (outside load)."""
    judged = _sweep(_events(ends, list(reservation.needs)), lambda freed: _fits(reservation.needs, freed))
    if judged is None:
        return None
    return Judgement([*(reservation.bundle_nodes or ()), reservation.node], *judged)


def _soonest_gang(shape: Shape, nodes: list[NodeState], ends: dict[str, list[End]]) -> Judgement | None:
    """A gang: placed whole (first fit, in node order) on copies of the nodes' free resources and
    what has freed, as the jobs on them end in turn."""
    placed: list[NodeState] = []

    def fits(freed: dict[NodeState, dict[str, int]]) -> bool:
        copies = on_empty(nodes, "free")
        for copy, node in zip(copies, nodes):
            add_to(copy.free, freed.get(node, {}))
        chosen = place(shape.gang, copies, first_fit)
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


def _events(ends: dict[str, list[End]], nodes: list[NodeState]) -> list[tuple[End, NodeState]]:
    """The ends on `nodes`, the soonest first, each with its node."""
    return sorted(((end, node) for node in nodes for end in ends.get(node.id, ())), key=lambda e: (e[0][0], len(e[0][1]), e[0][1]))


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


def expected_start(now: datetime, start_s: float) -> datetime | None:
    return now + timedelta(seconds=start_s) if math.isfinite(start_s) else None


def held_room(needs: dict[NodeState, dict[str, int]], freed: dict[NodeState, dict[str, int]]) -> dict[NodeState, dict[str, int]]:
    """Of the request on each node, the part that what frees there by the start will not cover."""
    return {node: {name: amount - freed.get(node, {}).get(name, 0) for name, amount in need.items()
                   if amount > freed.get(node, {}).get(name, 0)}
            for node, need in needs.items()}
