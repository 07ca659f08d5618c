"""Why jobs wait, in words. Each message depends only on its subject (the shape for Resources, the
user for UserJobLimit...), so 100k waiting jobs share a handful of them. They are written after the
plan: "free" means free after it. `MESSAGES` gives each reason its function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from job.core.planner.gang import first_fit, on_empty
from job.core.planner.picture import Gang, NodeState, Pool, Reservation, Shape, Sharer, add_to
from job.core.planner.preemption import Decision
from job.core.planner.snapshot import Group, Reason
from job.core.resources import describe, fits, format_amount
from job.core.units import format_duration

# At most this many nodes are named in a message on outside load; the others are counted.
OUTSIDE_NODES_NAMED = 3


@dataclass(eq=False, slots=True)
class Words:
    """What the messages of one plan share."""

    group: str
    now: datetime | None
    # Each resource's place in the plan's comparison order: amounts are said in that order.
    rank: dict[str, int]
    # Whether any node has outside load, or our jobs' use beyond their declaration: only then are
    # they looked for.
    outside: bool
    # Class names by value (classes of one value read as one).
    classes: dict[int, str]
    # The words naming each running job that holds a node beyond its declaration, by id.
    holders: dict[str, str] = field(default_factory=dict)
    # The most of a resource on any node of a pool, total or free, by (pool, "total" or "free",
    # name): the shapes of one pool share them.
    maxima: dict[tuple[Pool, str, str], int] = field(default_factory=dict)
    # The nodes of a pool with outside load or our jobs' use beyond their declaration, by id: the
    # shapes of one pool share them.
    loaded: dict[Pool, list[NodeState]] = field(default_factory=dict)

    @classmethod
    def of(cls, group: Group, now: datetime | None, order: tuple[str, ...], outside: bool,
           holders: dict[str, str] | None = None) -> Words:
        classes: dict[int, str] = {}
        for c in group.priority_classes:
            classes[c.value] = "/".join(filter(None, (classes.get(c.value), c.name)))
        return cls(group.name, now, {name: index for index, name in enumerate(order)}, outside, classes,
                   holders or {})

    def in_order(self, amounts) -> list[tuple[str, int]]:
        return sorted(amounts, key=lambda item: self.rank[item[0]])

    def most(self, shape: Shape, held: str) -> list[tuple[str, int]]:
        """The most of each resource of the shape on any node of its pool, `held` "total" or "free"."""
        most = []
        for name, _ in self.in_order(shape.items):
            key = (shape.pool, held, name)
            amount = self.maxima.get(key)
            if amount is None:
                amount = self.maxima[key] = _most(shape.pool.nodes, held, name)
            most.append((name, amount))
        return most


def _most(nodes: list[NodeState], held: str, name: str) -> int:
    """The most of resource `name` on any of `nodes` (at least one), `held` "total" or "free"."""
    # A loop, not max() over a generator: this reads every node of a pool, per waiting shape, per plan.
    most = getattr(nodes[0], held).get(name, 0)
    for node in nodes:
        amount = getattr(node, held).get(name, 0)
        if amount > most:
            most = amount
    return most


def _needs(words: Words, shape: Shape) -> str:
    labels = f" on a node labelled {shape.pool.key}" if shape.pool.key else ""
    if shape.gang is not None:
        return f"needs {_parts(words, shape.gang)}{labels.replace(' a node', ' nodes')}"
    return f"needs {describe(words.in_order(shape.items))}{labels}"


# How each strategy places the bundles, said after them.
_STRATEGY_WORDS = {"PACK": "", "SPREAD": " spread over nodes", "STRICT_PACK": " on one node",
                   "STRICT_SPREAD": " on separate nodes"}


def _parts(words: Words, gang: Gang) -> str:
    """`CPU 1 for its driver and 2 bundles of CPU 2 on separate nodes`: equal bundles in a row
    are counted."""
    runs: list[list] = []
    for bundle in gang.bundles:
        if runs and runs[-1][0] is bundle:
            runs[-1][1] += 1
        else:
            runs.append([bundle, 1])
    said = " and ".join(f"{count} bundle{'s' if count > 1 else ''} of {describe(words.in_order(bundle.items))}"
                        for bundle, count in runs)
    driver = f"{describe(words.in_order(gang.driver.items))} for its driver and " if gang.driver.items else ""
    return f"{driver}{said}{_STRATEGY_WORDS[gang.strategy]}"


def _gang_missing(words: Words, shape: Shape, held: str) -> str:
    """What keeps the gang off the pool's nodes, their free resources (`held` "free") or their
    totals ("total"): the first of its strategy's needs that no node, or too few, meet."""
    gang, nodes = shape.gang, shape.pool.nodes
    assert gang is not None
    when = " even when empty" if held == "total" else ""
    if gang.strategy == "STRICT_PACK":
        most = words.most(gang.together, held)
        if _short(words, gang.together, most):
            return (f"its bundles need {describe(words.in_order(gang.together.items))} on one node; the most "
                    f"{'free ' if held == 'free' else ''}on any node is {describe(most)}")
    elif gang.strategy == "STRICT_SPREAD":
        room = sum(1 for node in nodes if any(fits(b.items, getattr(node, held)) for b in gang.bundles))
        if room < len(gang.bundles):
            nodes_with_room = "no node has" if room == 0 else "1 node has" if room == 1 else f"{room} nodes have"
            return f"{nodes_with_room} room{when}"
    else:
        copies = on_empty(nodes, held)
        fitted = sum(1 for bundle in gang.bundles if _take_first(bundle, copies))
        if fitted < len(gang.bundles):
            return f"the nodes have room for {fitted} of its {len(gang.bundles)} bundles{when}"
    return f"its bundles and its driver do not all fit at once{when}"


def _take_first(shape: Shape, nodes: list[NodeState]) -> bool:
    node = first_fit(shape, nodes)
    if node is not None:
        add_to(node.free, shape.need, -1)
    return node is not None


def _short(words: Words, shape: Shape, most: list[tuple[str, int]]) -> list[tuple[str, int]]:
    return [(name, amount) for (name, amount), (_, need) in zip(most, words.in_order(shape.items), strict=False) if amount < need]


def unschedulable(words: Words, shape: Shape) -> str:
    where = f"group {words.group}" + (f" labelled {shape.pool.key}" if shape.pool.key else "")
    if not shape.pool.nodes:
        return f"{_needs(words, shape)}; no node of {where}"
    if shape.gang is not None:
        return f"{_needs(words, shape)}; in group {words.group}, {_gang_missing(words, shape, 'total')}"
    most = words.most(shape, "total")
    short = _short(words, shape, most)
    if short:
        return f"{_needs(words, shape)}; no node of {where} has more than {describe(short)}"
    return f"{_needs(words, shape)}; no single node of {where} has all of it (the most of each on any node: {describe(most)})"


def resources(words: Words, shape: Shape | Reservation) -> str:
    if isinstance(shape, Reservation):
        return reserved_for(words, shape)
    if shape.gang is not None:
        return f"{_needs(words, shape)}; {_gang_missing(words, shape, 'free')}"
    most = words.most(shape, "free")
    where = "node labelled " + shape.pool.key if shape.pool.key else "node"
    if _short(words, shape, most):
        return f"{_needs(words, shape)}; the most free on any {where} is {describe(most)}{_outside(words, shape)}"
    return (f"{_needs(words, shape)}; no {where} has all of it free at once (the most free of each on any node: "
            f"{describe(most)}){_outside(words, shape)}")


def _outside(words: Words, shape: Shape) -> str:
    """` (held by job 42 of greedy, which uses CPU 3.5 and declared CPU 0.5, over by CPU 1 on node a; work
    outside the queue holds CPU 2 on node b)`: the nodes of the pool that would take the shape now
    but for outside load and our running jobs' use beyond their declaration, by id, each with what
    these hold of the resources the shape is short of there: each such job named with its user,
    then outside load; "" when there are none. At most OUTSIDE_NODES_NAMED nodes are named per
    job and for outside load, the others counted (`; and more on 4 other nodes`)."""
    if not words.outside:
        return ""
    loaded = words.loaded.get(shape.pool)
    if loaded is None:
        loaded = words.loaded[shape.pool] = [node for node in shape.pool.nodes if node.outside or node.held]
    by_job, outside_held = _holders(loaded, words.in_order(shape.items))
    # "over by": what a job holds beyond its declaration, node by node, adds up to less than its use.
    said = [f"{words.holders.get(job, f'held by job {job}')}, over by {_on_nodes(held, ', ')}" for job, held in by_job.items()]
    if outside_held:
        said.append(f"work outside the queue holds {_on_nodes(outside_held, '; ')}")
    return f" ({'; '.join(said)})" if said else ""


Held = list[tuple[NodeState, list[tuple[str, int]]]]


def _holders(loaded: list[NodeState], need: list[tuple[str, int]]) -> tuple[dict[str, Held], Held]:
    """Of the nodes that would take `need` now but for outside load and our jobs' use beyond their
    declaration: per job, and for outside load, what each holds there of the resources short."""
    outside_held: Held = []
    by_job: dict[str, Held] = {}
    for node in loaded:
        free, outside = node.free, node.outside
        if fits(need, free):
            continue
        ours: dict[str, int] = {}
        for units in node.held.values():
            add_to(ours, units)
        if not all(free.get(name, 0) + outside.get(name, 0) + ours.get(name, 0) >= amount for name, amount in need):
            continue
        short = [name for name, amount in need if free.get(name, 0) < amount]
        for job, units in node.held.items():
            if part := [(name, units[name]) for name in short if units.get(name)]:
                by_job.setdefault(job, []).append((node, part))
        if part := [(name, outside[name]) for name in short if outside.get(name)]:
            outside_held.append((node, part))
    return by_job, outside_held


def _on_nodes(held: Held, between: str) -> str:
    """`CPU 2 on node a; CPU 1 on node b`, the first OUTSIDE_NODES_NAMED nodes named, the others counted."""
    named = between.join(f"{describe(amounts)} on node {node.id}" for node, amounts in held[:OUTSIDE_NODES_NAMED])
    others = len(held) - OUTSIDE_NODES_NAMED
    return named + (f"; and more on {others} other node{'s' if others > 1 else ''}" if others > 0 else "")


def later_start(words: Words, start: datetime) -> str:
    # A snapshot with a start time to come has a now (Snapshot._consistent).
    assert words.now is not None
    left = int((start - words.now).total_seconds())
    return f"not to start before {start.isoformat().replace('+00:00', 'Z')}, in {format_duration(max(left, 1), parts=2)}"


def job_limit(words: Words, user: Sharer) -> str:
    """UserJobLimit, AccountJobLimit (an account counts its subtree's jobs)."""
    return f"{user.kind} {user.name} has {user.running} jobs running or starting, the most allowed is {user.max_running}"


def resource_limit(words: Words, subject: tuple[Sharer, Shape]) -> str:
    """UserResourceLimit, AccountResourceLimit (an account counts its subtree's jobs)."""
    user, shape = subject
    limits = user.max_resources
    assert limits is not None, "only a limit is broken"
    over = [
        f"{name} {format_amount(name, user.used.get(name, 0))} of at most {format_amount(name, limits[name])}"
        for name, amount in words.in_order(shape.items)
        if name in limits and user.used.get(name, 0) + amount > limits[name]
    ]
    return f"{_needs(words, shape)}; {user.kind} {user.name} already uses {', '.join(over)}"


def preempting(words: Words, subject: Reservation | Decision) -> str:
    where = _where([*(subject.bundle_nodes or ()), subject.node])
    if isinstance(subject, Reservation):
        verb = "is" if where.startswith("node ") else "are"
        return f"{where} {verb} held for it while the jobs stopped to make room for it end"
    victims = ", ".join(f"{victim.id} ({victim.user.name}, {words.classes[victim.value]}, "
                        f"ran {format_duration(max(int(victim.run_s), 1), parts=2)})" for victim in subject.victims)
    count = len(subject.victims)
    return f"stopping {count} job{'s' if count > 1 else ''} on {where} to make room for it: {victims}"


def _where(nodes: list[NodeState]) -> str:
    """`node a`, or `nodes a, b`: each node once, in order."""
    ids = list(dict.fromkeys(node.id for node in nodes))
    return f"node {ids[0]}" if len(ids) == 1 else f"nodes {', '.join(ids)}"


# Jobs named in a reservation's message; the others are counted.
BLOCKERS_NAMED = 3


def reserved_for(words: Words, reservation: Reservation) -> str:
    """`reserved node n-3; expected to start about 14:20 UTC, when jobs 12 and 15 end`."""
    where = _where([*(reservation.bundle_nodes or ()), reservation.node])
    if reservation.start is not None and not reservation.blockers:
        return f"reserved {where}; expected to start about {_clock(words.now, reservation.start)}"
    blockers = list(reservation.blockers)
    if len(blockers) > BLOCKERS_NAMED:
        blockers = [*blockers[:BLOCKERS_NAMED - 1], f"{len(blockers) - BLOCKERS_NAMED + 1} more"]
    named = blockers[0] if len(blockers) == 1 else f"{', '.join(blockers[:-1])} and {blockers[-1]}"
    jobs = f"job {named} ends" if len(reservation.blockers) == 1 else f"jobs {named} end"
    if reservation.start is None:
        return f"reserved {where}; to start once {jobs}, at a time not known (no max runtime)"
    return f"reserved {where}; expected to start about {_clock(words.now, reservation.start)}, when {jobs}"


def _clock(now: datetime | None, when: datetime) -> str:
    """`14:20 UTC`, with its date when that is not today's."""
    # A start is known only at a known now (reservations.expected_start).
    assert now is not None
    when, now = when.astimezone(UTC), now.astimezone(UTC)
    return when.strftime("%H:%M UTC" if when.date() == now.date() else "%Y-%m-%d %H:%M UTC")


def kept_off(words: Words, reservation: Reservation) -> str:
    """`would delay job 7's reservation on n-3`."""
    return f"would delay job {reservation.job}'s reservation on {reservation.node.id}"


def priority(words: Words, blocker: str) -> str:
    return f"strict order: waits behind job {blocker}, which is first in line and waits for resources"


# ScalingUp is not the planner's (job/core/autoscale.py gives it after the plan).
MESSAGES: dict[Reason, Callable[[Words, Any], str]] = {
    "Unschedulable": unschedulable,
    "NotBefore": later_start,
    "UserJobLimit": job_limit,
    "UserResourceLimit": resource_limit,
    "AccountJobLimit": job_limit,
    "AccountResourceLimit": resource_limit,
    "Resources": resources,
    "Preempting": preempting,
    "Priority": priority,
    "Reserved": kept_off,
}
