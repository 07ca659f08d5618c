"""The planner's in-memory picture of one group, shared by the planner and the node selectors.

Free resources only ever go down during a plan (placements take, nothing gives back), so a node
that cannot take a request now cannot take it later in the same plan: several caches below rely
on that, and stay exact because of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from job.core.resources import Resources


@dataclass(eq=False, slots=True)
class NodeState:
    id: str
    labels: dict[str, str]
    total: Resources
    # In units: total, less what outside load and our running and placed jobs hold.
    free: dict[str, int]
    # Resources of the priority list the node has: what a job that does not ask for them would waste.
    has: frozenset[str]
    # In units: what work outside the queue holds, per resource the node has, at most its total;
    # only the amounts above 0. Already taken off `free`; kept for the waiting messages.
    outside: dict[str, int] = field(default_factory=dict)
    # In units, by job id: what our running jobs hold there beyond their declaration, at most what
    # outside load left of its total. Already taken off `free`; kept for the waiting messages.
    held: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class Pool:
    """The nodes that carry a set of required labels, sorted by id."""

    key: str  # the labels as sorted `k=v` pairs joined by commas, "" for none
    labels: dict[str, str]
    nodes: list[NodeState]
    members: frozenset[NodeState] = field(init=False)

    def __post_init__(self) -> None:
        self.members = frozenset(self.nodes)


@dataclass(eq=False, slots=True)
class Shape:
    """One distinct request: resources and required labels. Jobs of the same shape share every
    answer about nodes, so 100k jobs of a few dozen shapes ask the nodes a few dozen times."""

    need: Resources
    pool: Pool
    # What the selectors use on their hot path: (name, units) pairs and the requested names.
    items: tuple[tuple[str, int], ...] = field(init=False)
    names: frozenset[str] = field(init=False)
    unschedulable: bool = field(init=False)
    # Set once no node can take the shape: true until the end of the plan.
    full: bool = False
    # A job with bundles: `need` is then its whole footprint, which the gang places part by part.
    gang: Gang | None = None

    def __post_init__(self) -> None:
        self.items = tuple(self.need.items())
        self.names = frozenset(self.need)
        # A gang is spread over nodes: whether empty nodes hold it is the gang's own question.
        self.unschedulable = self.gang is None and not any(self.need.fits_in(node.total) for node in self.pool.nodes)


@dataclass(eq=False, slots=True)
class Gang:
    """A job's driver and bundles, placed all or nothing (gang.py), each part a plain shape of the
    job's pool."""

    driver: Shape
    bundles: tuple[Shape, ...]
    strategy: str
    # Every bundle as one request: STRICT_PACK's only way, and PACK's first try.
    together: Shape


def add_to(target: dict[str, int], amounts: Mapping[str, int], sign: int = 1) -> None:
    """`amounts` added to (sign 1) or taken from (-1) the units of `target`, a plain dict that a
    plan changes in place (free, used, held): a Resources is immutable."""
    for name, amount in amounts.items():
        target[name] = target.get(name, 0) + sign * amount


def user_score(dominant: float, memory: float, shares: float) -> float:
    """The fair policies' score of a user, the lowest first: its dominant share and its memory of
    past use (0 but under fairshare), over its shares."""
    return (dominant + memory) / shares


@dataclass(eq=False, slots=True)
class Sharer:
    """What fair share orders and limits: a user, or an account (a team: its subtree's jobs)."""

    name: str
    shares: float
    # Fair share's memory, U·ln 2 / H; 0 under drf, and under fairshare with a half life of 0. An
    # account's is the sum of its users' (as Slurm sums a subtree's usage).
    memory: float
    max_running: int | None
    # Units per limited resource. A plain dict, not Resources: a limit of 0 is a limit.
    max_resources: dict[str, int] | None
    used: dict[str, int] = field(default_factory=dict)
    # Running jobs in the snapshot plus jobs placed so far in this plan.
    running: int = 0
    dominant: float = 0.0
    # "user" or "account": the words of the waiting messages, the reports' kind of node.
    kind: ClassVar[str] = "user"

    def score(self) -> float:
        return user_score(self.dominant, self.memory, self.shares)

    def may_take(self, shape: Shape) -> bool:
        """Whether the shape keeps it within max_resources. Only what the job adds counts: a user
        already over a lowered limit on GPUs may still run CPU jobs."""
        assert self.max_resources is not None
        for name, amount in shape.items:
            limit = self.max_resources.get(name)
            if limit is not None and self.used.get(name, 0) + amount > limit:
                return False
        return True

    def _take(self, shape: Shape, totals: dict[str, int]) -> None:
        # Used amounts only grow, so the dominant share is the max of the old one and the ratios
        # of what changed: the same floats as recomputing it from scratch.
        used = self.used
        for name, amount in shape.items:
            held = used[name] = used.get(name, 0) + amount
            total = totals.get(name, 0)
            if total > 0 and held / total > self.dominant:
                self.dominant = held / total
        self.running += 1


@dataclass(eq=False, slots=True)
class AccountState(Sharer):
    kind: ClassVar[str] = "account"


@dataclass(eq=False, slots=True)
class UserState(Sharer):
    # Its accounts from the top down; () for a user in the root (every user, without accounts).
    accounts: tuple[AccountState, ...] = ()

    def take(self, shape: Shape, totals: dict[str, int]) -> None:
        self._take(shape, totals)
        for account in self.accounts:
            account._take(shape, totals)

    def limited(self, shape: Shape) -> tuple[str, object] | None:
        """The first of its accounts, from the top, whose limits the shape would break: the
        reason and its subject; None when none would."""
        for account in self.accounts:
            if account.max_running is not None and account.running >= account.max_running:
                return "AccountJobLimit", account
            if account.max_resources is not None and not account.may_take(shape):
                return "AccountResourceLimit", (account, shape)
        return None


def parting(first: UserState, second: UserState) -> tuple[Sharer, Sharer]:
    """Where the two users' paths part: the children of their lowest common ancestor on each
    side (the users themselves when they share every account)."""
    left, right = (*first.accounts, first), (*second.accounts, second)
    depth = 0
    while depth < min(len(left), len(right)) - 1 and left[depth] is right[depth]:
        depth += 1
    return left[depth], right[depth]


@dataclass(eq=False, slots=True)
class Reservation:
    """A pending job that holds room on its node(s) and starts there, and only there: one that
    preempted for its node (`kind` "preemption"), or one first in line that has waited past the
    group's reserve_after ("head", reservations.py).

    `held`, per node, is what of the node's free resources is kept from every other job: of its
    request there (`needs`), the part that what is expected to free by `start` will not cover.
    A job that will end before `start` may use it too (backfill); `start` None: not known."""

    job: str
    node: NodeState  # its driver's
    shape: Shape
    user: UserState
    kind: str = "preemption"
    # A job with bundles: the node of each bundle (else all on `node`).
    bundle_nodes: list[NodeState] | None = None
    needs: dict[NodeState, dict[str, int]] = field(default_factory=dict)
    held: dict[NodeState, dict[str, int]] = field(default_factory=dict)
    start: datetime | None = None
    # The jobs whose ends it waits for, by id.
    blockers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.needs:
            self.needs = parts_by_node(self.shape, self.node, self.bundle_nodes)

    def fits(self) -> bool:
        """Whether its request fits now on every node of it, beside everything else."""
        return all(node.free.get(name, 0) + self.held[node].get(name, 0) >= amount
                   for node, need in self.needs.items() for name, amount in need.items())

    def document(self) -> dict[str, Any]:
        record: dict[str, Any] = {"job": self.job, "node": self.node.id}
        if self.kind != "preemption":
            record["kind"] = self.kind
            record["expected_start"] = self.start
        if self.bundle_nodes is not None:
            record["bundle_nodes"] = [node.id for node in self.bundle_nodes]
        return record


def parts_by_node(shape: Shape, node: NodeState, bundle_nodes: list[NodeState] | None) -> dict[NodeState, dict[str, int]]:
    """What a job of `shape` takes on each node: its driver on `node`, each bundle on its node of
    `bundle_nodes` (all on `node` when None)."""
    if shape.gang is None:
        return {node: dict(shape.items)}
    needs: dict[NodeState, dict[str, int]] = {}
    homes = bundle_nodes or [node] * len(shape.gang.bundles)
    for part, home in zip((*shape.gang.bundles, shape.gang.driver), (*homes, node), strict=False):
        add_to(needs.setdefault(home, {}), part.need)
    return needs
