"""Preemption: which running jobs to stop so that a waiting job fits (docs/planner.md, "Priority
classes and preemption").

The planner asks `Preemptor.victims_for` about a job that fits no node now. A running job may be a
victim only if Ray started it at least `min_runtime_s` ago, its class is preemptible, it is not
being stopped already, and either its class is strictly lower than the waiting job's, or (in
`fairshare` mode) it is of the same class, of another user, and the waiting job's user, with the
new job running, would still score strictly below the victim's user without the victim. A victim
of that rule can never preempt back: its user's score would then be above the other's. With
accounts the two users' paths are compared where they part, the children of their lowest common
ancestor (two teams, or two users of one team), with the same strict inequality: no ping-pong
between teams either.

On each node that carries the job's labels and is big enough when empty, eligible jobs are taken
lowest class first, then (fairshare) the user with the highest score, then the most recently
started, then by id, until the job fits once they stop. The node with the fewest victims wins,
then the lowest highest-victim class, then the least run time lost, then the node id. At most
`max_preemptions` victims per plan. A job with bundles that no one node may hold whole (by its
strategy or its size) takes its victims across the nodes of its pool instead (`_across`), in the
same order and under the same rules, and reserves each node of its footprint.

A plan works out at most ATTEMPTS preemptions, for the jobs first in line: each looks at every
node of the job's pool, and a queue of 100k jobs that cannot preempt would otherwise cost 100k
such looks. The jobs after them wait for `Resources` and try in a later plan, once those first in
line are placed (Kueue's scheduler, likewise, preempts for the head of each queue only).

Reclaim within a class is decided after the plan's placements, by the planner's last pass: a
placement later in the same plan could raise the waiting user's score past the victim's user's,
and the victim could then preempt back.

Scores after a preemption count the waiting job as running and the victims as gone, so that one
plan never stops more of a user than the rule allows. A request refused once is not asked again in
the same plan (refusals are remembered per shape, class and, in fairshare, user), so a queue of
100k jobs of a few shapes asks a few times. That can only hold a preemption back until the next
tick, never allow one: within a plan free resources only go down and victims are used up, and the
one change that could turn a refusal into a preemption, a placement raising the score of a user
whose jobs could be victims, is seen by the next plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from job.core.planner.gang import first_fit, on_empty, place
from job.core.planner.picture import NodeState, Shape, Sharer, UserState, add_to, parting, user_score
from job.core.planner.rules import PREEMPTIONS
from job.core.planner.snapshot import Group
from job.core.resources import Resources, dominant_share, fits

# Preemptions worked out per plan, refusals remembered from earlier ones not counted.
ATTEMPTS = 64
# A gang across nodes: past this many victims on its nodes, none is spared one by one (each try
# places it anew); max_preemptions is far below it in practice.
SPARED_TRIES = 64


@dataclass(eq=False, slots=True)
class Candidate:
    """A running job that may be stopped, as the preemption reads it."""

    id: str
    user: UserState
    value: int  # its class's value
    need: Resources  # its whole footprint: what its user stops holding
    started_at: datetime
    run_s: float  # how long it has run: the work its stop loses
    # What it holds on the node it is a candidate on: its need, but for a job with bundles on
    # several nodes, a candidate on each of them.
    here: Resources
    # Every node it is a candidate on: stopped, it is no candidate anywhere.
    nodes: tuple[str, ...]


@dataclass(eq=False, slots=True)
class Decision:
    node: NodeState  # the waiting job's driver's
    victims: list[Candidate]
    # What the victims free on each node, and for a gang spread over nodes, the node of each bundle
    # (None: every part on `node`).
    freed: dict[NodeState, dict[str, int]]
    bundle_nodes: list[NodeState] | None = None


@dataclass(slots=True)
class _After:
    """What a user will hold once the plan's preemptions are carried out, as a change of `used`."""

    gained: dict[str, int] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)


class Preemptor:
    def __init__(self, group: Group, totals: dict[str, int], candidates: dict[str, list[Candidate]],
                 coming: list[tuple[UserState, Resources]], going: list[tuple[UserState, Resources]]):
        """`candidates`: per node id, its running jobs that are old enough, preemptible and not
        stopping already. Earlier plans' preemptions still under way count in the scores as
        carried out: `coming`, the requests of pending jobs holding a reservation, as running, and
        `going`, those of running jobs being stopped, as gone; else the next plans would take a
        user's stopping jobs for still held, and stop more of them."""
        self.reclaims = PREEMPTIONS[group.preemption].reclaims
        self.budget = group.max_preemptions
        self.totals = totals
        # Each node's candidates in the order victims are taken, but for fairshare's user scores,
        # which change as the plan goes: the most recently started first, then by id, lowest
        # class first (sorts are stable, so a sort by class and score keeps this order within).
        self.candidates = {node: _in_order(pool) for node, pool in candidates.items()}
        # Per node id, what all its candidates hold together, and the lowest class among them: a
        # node where even all of them would not make room, or none is of a class that may be
        # stopped, is passed over without looking at its jobs one by one.
        self.held = {node: _sum(pool) for node, pool in self.candidates.items()}
        self.lowest = {node: pool[0].value for node, pool in self.candidates.items() if pool}
        # Victims are only used up, so the lowest class anywhere only goes up: as it was at the
        # start, it may let a request through that then finds nothing, never the other way.
        self.lowest_anywhere = min(self.lowest.values(), default=None)
        # Per user and per account (what its users gain and lose).
        self.after: dict[Sharer, _After] = {}
        for changes, side in ((coming, "gained"), (going, "lost")):
            for user, need in changes:
                self._change(user, side, need)
        self.refused: set[tuple[Shape, int, UserState | None, bool]] = set()
        self.attempts = ATTEMPTS

    def started(self, user: UserState, need: Resources) -> None:
        """A reserving job was placed: the user's `used` holds it now, no longer to come."""
        self._change(user, "gained", need, -1)

    def _change(self, user: UserState, side: str, need: Resources | dict, sign: int = 1) -> None:
        """`need` gained or lost (`side`) by the user, and so by each of its accounts."""
        for sharer in (user, *user.accounts):
            add_to(getattr(self.after.setdefault(sharer, _After()), side), need, sign)

    def victims_for(self, shape: Shape, user: UserState, value: int, reclaim: bool = False) -> Decision | None:
        """The preemption that makes room for a job of `shape`, of `user`, of class `value`, which
        fits no node now; None when no allowed one does. Jobs of lower classes only, or with
        `reclaim` (fairshare), of its own class too. A decision is carried out in the preemptor's
        picture (victims used up, scores after it) before it is returned."""
        reclaim = reclaim and self.reclaims
        key = (shape, value, user if reclaim else None, reclaim)
        if self.budget <= 0 or self.attempts <= 0 or key in self.refused:
            return None
        if self.lowest_anywhere is None or not self._may_stop(self.lowest_anywhere, value, reclaim):
            return None
        self.attempts -= 1
        gang = shape.gang
        best = None
        if gang is None or gang.strategy != "STRICT_SPREAD" or len(gang.bundles) == 1:
            best = self._one_node(shape, user, value, reclaim)
        if best is None and gang is not None and gang.strategy != "STRICT_PACK":
            best = self._across(shape, user, value, reclaim)
        if best is None:
            self.refused.add(key)
            return None
        self._carry_out(best, shape, user)
        return best

    def _one_node(self, shape: Shape, user: UserState, value: int, reclaim: bool) -> Decision | None:
        """The whole request on one node: the node whose victims rank best."""
        best, best_rank = None, None
        for node in shape.pool.nodes:
            if not shape.need.fits_in(node.total):
                continue
            victims = self._on_node(node, shape, user, value, reclaim)
            if victims is None or len(victims) > self.budget:
                continue
            rank = (len(victims), max(v.value for v in victims), sum(v.run_s for v in victims), node.id)
            if best_rank is None or rank < best_rank:
                best, best_rank = Decision(node, victims, {node: _sum(victims)}), rank
        return best

    def _on_node(self, node: NodeState, shape: Shape, user: UserState, value: int, reclaim: bool
                 ) -> list[Candidate] | None:
        """The victims on `node`, in the order they are taken, until the job fits; None if it
        cannot fit there even with every eligible job stopped."""
        pool = self.candidates.get(node.id)
        if not pool or not self._may_stop(self.lowest[node.id], value, reclaim):
            return None
        short = {name: amount - node.free.get(name, 0) for name, amount in shape.items if node.free.get(name, 0) < amount}
        if not short:
            return None  # it fits already: the planner asks only for jobs that fit nowhere
        held = self.held[node.id]
        if any(held.get(name, 0) < amount for name, amount in short.items()):
            return None

        def enough(taken: list[Candidate]) -> bool:
            for name, amount in taken[-1].here.items():
                if name in short:
                    short[name] -= amount
            return all(amount <= 0 for amount in short.values())

        return self._take(self._by_score(pool, user), shape, user, value, reclaim, enough)

    def _across(self, shape: Shape, user: UserState, value: int, reclaim: bool) -> Decision | None:
        """A gang no one node can take whole (STRICT_SPREAD's bundles, or more than a node holds):
        victims taken across the nodes of its pool, in the victims' order, until the gang fits whole
        by its strategy once they stop (gang.py, first fit). Then those on none of the nodes it
        would take are spared, and each other one it fits without, the last taken first. One such
        choice, not the best of all: the sets of nodes are too many to rank."""
        nodes = shape.pool.nodes
        parts: dict[str, list[tuple[int, Candidate]]] = {}
        for index, node in enumerate(nodes):
            for candidate in self.candidates.get(node.id, ()):
                parts.setdefault(candidate.id, []).append((index, candidate))
        if not parts or not shape.need.fits_in(self._room(nodes)):
            return None
        trial = _Trial(shape, nodes)
        if trial.placed() is not None:
            return None  # it fits already: the planner asks only for jobs that fit nowhere
        chosen: list[int] = []

        def enough(taken: list[Candidate]) -> bool:
            chosen[:] = trial.free(parts[taken[-1].id]) or ()
            return bool(chosen)

        order = self._by_score(_in_order([found[0][1] for found in parts.values()]), user)
        victims = self._take(order, shape, user, value, reclaim, enough)
        if victims is None:
            return None
        # From here on, only the nodes it would take: it fits there, whatever the others free.
        used = sorted(set(chosen))
        nodes, at = [nodes[index] for index in used], {index: new for new, index in enumerate(used)}
        parts = {ident: [(at[index], c) for index, c in found if index in at] for ident, found in parts.items()}
        victims = _spared(shape, nodes, parts, [victim for victim in victims if parts[victim.id]])
        if len(victims) > self.budget:
            return None
        found = [found for victim in victims for found in parts[victim.id]]
        placed = _Trial(shape, nodes, found).placed()
        assert placed is not None, "the victims kept make room for it"
        freed: dict[NodeState, dict[str, int]] = {}
        for index, candidate in found:
            add_to(freed.setdefault(nodes[index], {}), candidate.here)
        homes = [nodes[index] for index in placed]
        return Decision(homes[-1], victims, freed, homes[:-1])

    def _room(self, nodes: list[NodeState]) -> Resources:
        """What the nodes would have free, summed, once every candidate on them stopped (as
        _Trial counts a node's room: nothing below zero)."""
        room: dict[str, int] = {}
        for node in nodes:
            here = dict(node.free)
            add_to(here, self.held.get(node.id, {}))
            add_to(room, {name: amount for name, amount in here.items() if amount > 0})
        return Resources(room)

    def _by_score(self, pool: list[Candidate], user: UserState) -> list[Candidate]:
        """Candidates in `_in_order`'s order, and in fairshare, within a class, highest score first:
        of the victim's side where its path and the waiting `user`'s part, then of its user."""
        if not self.reclaims:
            return pool
        sides = {c.user: parting(user, c.user)[1] for c in pool}
        scores = {sharer: self._score(sharer) for c in pool for sharer in (c.user, sides[c.user])}
        return sorted(pool, key=lambda c: (c.value, -scores[sides[c.user]], -scores[c.user]))

    def _take(self, order: list[Candidate], shape: Shape, user: UserState, value: int, reclaim: bool,
              enough: Callable[[list[Candidate]], bool]) -> list[Candidate] | None:
        """The eligible victims of `order`, taken in turn until `enough(taken)` says the job fits
        once they stop; None if it does not with every eligible one taken."""
        # Across teams, the two users' paths are compared where they part: the waiting side with
        # the new job running, the victim's side without the victim (and those taken before it).
        waiting: dict[Sharer, float] = {}
        taken: list[Candidate] = []
        lost: dict[Sharer, dict[str, int]] = {}
        for victim in order:
            if victim.value > value or (victim.user is user and victim.value == value):
                continue
            if victim.value == value:
                if not reclaim:
                    continue
                mine, theirs = parting(user, victim.user)
                if mine not in waiting:
                    waiting[mine] = self._score(mine, gain=shape.need)
                trial = dict(lost.get(theirs, {}))
                add_to(trial, victim.need)
                if not waiting[mine] < self._score(theirs, loss=trial):
                    continue
                lost[theirs] = trial
            taken.append(victim)
            if enough(taken):
                return taken
        return None

    @staticmethod
    def _may_stop(lowest: int, value: int, reclaim: bool) -> bool:
        """Whether a job of class `value` may stop one of class `lowest`: a lower class, or, when
        reclaiming, the same class too."""
        return lowest < value or (reclaim and lowest == value)

    def _score(self, user: Sharer, gain: Resources | dict | None = None, loss: dict | None = None) -> float:
        """The user's or account's score (policies: (dominant share + memory) / shares) once the plan's
        preemptions are carried out, with `gain` more running and `loss` less."""
        held = dict(user.used)
        after = self.after.get(user)
        changes: list[tuple[Mapping[str, int], int]] = [(after.gained, 1), (after.lost, -1)] if after else []
        changes += [(gain or {}, 1), (loss or {}, -1)]
        for amounts, sign in changes:
            add_to(held, amounts, sign)
        return user_score(dominant_share(held, self.totals), user.memory, user.shares)

    def _carry_out(self, decision: Decision, shape: Shape, user: UserState) -> None:
        self.budget -= len(decision.victims)
        gone = {victim.id for victim in decision.victims}
        for node in {node for victim in decision.victims for node in victim.nodes}:
            self.candidates[node] = [c for c in self.candidates[node] if c.id not in gone]
            self.held[node] = _sum(self.candidates[node])
        self._change(user, "gained", shape.need)
        for victim in decision.victims:
            self._change(victim.user, "lost", victim.need)


def _spared(shape: Shape, nodes: list[NodeState], parts: dict[str, list[tuple[int, Candidate]]],
            victims: list[Candidate]) -> list[Candidate]:
    """The victims less each one the gang fits without, the last taken first (the first
    SPARED_TRIES only: each try is a trial placement)."""
    for victim in reversed(victims[:-1] if len(victims) <= SPARED_TRIES else ()):
        spared = [other for other in victims if other is not victim]
        if _Trial(shape, nodes, [found for other in spared for found in parts[other.id]]).placed() is not None:
            victims = spared
    return victims


class _Trial:
    """A gang tried on copies of its pool's nodes as victims are taken, their parts freed into the
    copies. Before gang.py's placement, two cheap questions it must pass: the nodes' room in all,
    and how many of its bundles the nodes could hold, each node counting the copies of the least
    that every bundle asks (STRICT_SPREAD: one a node at most), which both only grow."""

    def __init__(self, shape: Shape, nodes: list[NodeState], found: Sequence[tuple[int, Candidate]] = ()):
        gang = shape.gang
        assert gang is not None, "only a gang is tried across nodes"
        self.shape, self.gang = shape, gang
        self.copies = on_empty(nodes, "free")
        self.at = {id(copy): index for index, copy in enumerate(self.copies)}
        names = set().union(*(bundle.names for bundle in self.gang.bundles))
        self.least = {name: min(bundle.need.get(name) for bundle in self.gang.bundles) for name in names}
        self.least = {name: amount for name, amount in self.least.items() if amount > 0}
        self.one_each = self.gang.strategy == "STRICT_SPREAD"
        # The room of the nodes in all, each counting what it has free, and no less than nothing: a
        # node over-committed (an outside job Ray placed there) takes nothing from the others' room.
        self.room: dict[str, int] = {}
        self.holds: list[float] = []
        for copy in self.copies:
            add_to(self.room, {name: amount for name, amount in copy.free.items() if amount > 0})
            self.holds.append(self._holds(copy))
        self.held: float = sum(self.holds)
        if found:
            self.free(found)

    def _holds(self, copy: NodeState) -> float:
        if not self.least:
            return math.inf
        most = min(max(copy.free.get(name, 0), 0) // amount for name, amount in self.least.items())
        return min(most, 1) if self.one_each else most

    def free(self, found: Sequence[tuple[int, Candidate]]) -> list[int] | None:
        """What each of `found` holds freed on its node; then where the gang goes, as `placed`
        (not tried again when none of it is of a resource the gang asks for: it did not fit)."""
        names = self.shape.names
        for index, candidate in found:
            copy = self.copies[index]
            for name, amount in candidate.here.items():
                before = copy.free.get(name, 0)
                copy.free[name] = before + amount
                self.room[name] = self.room.get(name, 0) + max(before + amount, 0) - max(before, 0)
            held_before, self.holds[index] = self.holds[index], self._holds(copy)
            self.held += self.holds[index] - held_before
        if not any(name in names for _, candidate in found for name in candidate.here):
            return None
        return self.placed()

    def placed(self) -> list[int] | None:
        """The index of each part's node (the bundles', then the driver's), or None."""
        if self.held < len(self.gang.bundles) or not fits(self.shape.items, self.room):
            return None
        chosen = place(self.gang, self.copies, first_fit)
        if chosen is None:
            return None
        for copy, part in zip(chosen, (*self.gang.bundles, self.gang.driver), strict=False):
            add_to(copy.free, part.need)
        return [self.at[id(copy)] for copy in chosen]


def _in_order(pool: list[Candidate]) -> list[Candidate]:
    """Lowest class first, then the most recently started, then by id (sorts are stable)."""
    return sorted(sorted(pool, key=lambda c: (-c.started_at.timestamp(), len(c.id), c.id)), key=lambda c: c.value)


def _sum(pool: list[Candidate]) -> dict[str, int]:
    total: dict[str, int] = {}
    for candidate in pool:
        add_to(total, candidate.here)
    return total
