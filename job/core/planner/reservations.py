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
        judged = _sweep(ends.get(node.id, ()), lambda freed, node=node: _fits_on(shape, node, freed.get(node, {})), node)
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
    needs = reservation.needs
    merged = sorted((end for node in needs for end in _on(ends, node)), key=lambda e: (e[0][0], e[0][1]))
    freed_at: dict[NodeState, dict[str, int]] = {}
    blockers: list[str] = []

    def fits(freed: dict[NodeState, dict[str, int]]) -> bool:
        return all(node.free.get(name, 0) + freed.get(node, {}).get(name, 0) >= amount for node, need in needs.items() for name, amount in need.items())

    start_s = 0.0 if fits(freed_at) else None
    for (after_s, ident, units), node in merged if start_s is None else ():
        add_to(freed_at.setdefault(node, {}), units)
        blockers.append(ident)
        if fits(freed_at):
            start_s = after_s
            break
    if start_s is None:
        return None
    nodes = [*(reservation.bundle_nodes or ()), reservation.node]
    return Judgement(nodes, start_s, freed_at if math.isfinite(start_s) else {}, tuple(blockers))


def _on(ends: dict[str, list[End]], node: NodeState) -> list[tuple[End, NodeState]]:
    return [(end, node) for end in ends.get(node.id, ())]


def _fits_on(shape: Shape, node: NodeState, freed: dict[str, int]) -> bool:
    return all(node.free.get(name, 0) + freed.get(name, 0) >= amount for name, amount in shape.items)


def _sweep(ends, fits, node: NodeState) -> tuple[float, dict, tuple[str, ...]] | None:
    """The first time `fits` holds as the jobs on `node` end in turn: (after_s, freed, blockers)."""
    freed: dict[NodeState, dict[str, int]] = {}
    if fits(freed):
        return 0.0, {}, ()
    blockers = []
    for after_s, ident, units in ends:
        add_to(freed.setdefault(node, {}), units)
        blockers.append(ident)
        if fits(freed):
            return after_s, freed if math.isfinite(after_s) else {}, tuple(blockers)
    return None


def _soonest_gang(shape: Shape, nodes: list[NodeState], ends: dict[str, list[End]]) -> Judgement | None:
    """A gang: placed whole (first fit, in node order) on copies of the nodes' free resources, as
    the jobs on them end in turn."""
    copies = on_empty(nodes, "free")
    by_id = {copy.id: (copy, node) for copy, node in zip(copies, nodes)}
    merged = sorted((end for node in nodes for end in _on(ends, node)), key=lambda e: (e[0][0], e[0][1]))
    freed: dict[NodeState, dict[str, int]] = {}
    blockers: list[tuple[str, NodeState]] = []
    start_s = 0.0
    placed = place(shape.gang, copies, first_fit)
    for (after_s, ident, units), node in merged if placed is None else ():
        copy, _ = by_id[node.id]
        add_to(copy.free, units)
        add_to(freed.setdefault(node, {}), units)
        blockers.append((ident, node))
        start_s = after_s
        placed = place(shape.gang, copies, first_fit)
        if placed is not None:
            break
    if placed is None:
        return None
    chosen = [by_id[copy.id][1] for copy in placed]
    used = set(chosen)
    kept = {node: units for node, units in freed.items() if node in used} if math.isfinite(start_s) else {}
    return Judgement(chosen, start_s, kept, tuple(ident for ident, node in blockers if node in used))


def expected_start(now: datetime, start_s: float) -> datetime | None:
    return now + timedelta(seconds=start_s) if math.isfinite(start_s) else None


def held_room(needs: dict[NodeState, dict[str, int]], freed: dict[NodeState, dict[str, int]]) -> dict[NodeState, dict[str, int]]:
    """Of the request on each node, the part that what frees there by the start will not cover."""
    return {node: {name: amount - freed.get(node, {}).get(name, 0) for name, amount in need.items()
                   if amount > freed.get(node, {}).get(name, 0)}
            for node, need in needs.items()}
