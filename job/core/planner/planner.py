"""The planner: a snapshot of one resource group in, a plan out. Pure: no I/O, no clock, no
randomness; the same snapshot gives the same plan.

Jobs are taken class by class, the highest value first, and in policy order within a class. Each
is checked against its shape (Unschedulable), its `not_before`, its user's limits and strict order,
then offered to the node selector; a placement updates the node's free resources, the user's share
and the selector's state before the next job. A job that fits nowhere may preempt (preemption.py):
it then reserves the node it preempted on and waits, `Preempting`, until its victims have stopped.

A reservation takes the reserving job's request off its node's free resources for every other
job, from the start of the plan; the reserving job itself is placed there once the node has room
for it beside everything else, and nowhere else.

A node's free resources start at its total, less what work outside the queue holds there
(`nodes[].outside`, at most the total) and what our running jobs hold. Outside load costs work per
node, once, and per waiting shape in its message: nothing per job.
"""

from __future__ import annotations

import gc
from datetime import datetime, timezone
from typing import get_args

from job.core.planner.entries import SHAPE, USER, Entry
from job.core.planner.picture import NodeState, Pool, Shape, UserState
from job.core.planner.policies import POLICIES, memory
from job.core.planner.preemption import Candidate, Decision, Preemptor
from job.core.resources import Resources, describe, dominant_share, fits, format_amount, to_units
from job.core.planner.selectors import SELECTORS
from job.core.planner.snapshot import DEFAULT_USER, Node, Plan, Reason, Snapshot, limits_of

# At most this many nodes are named in a message on outside load; the others are counted.
OUTSIDE_NODES_NAMED = 3

# Jobs without submitted_at are ordered by their place in the list, before those with one.
_NO_TIME = datetime.min.replace(tzinfo=timezone.utc)


def plan(snapshot: Snapshot) -> Plan:
    # A plan allocates a few objects per pending job and frees none before it returns, so the
    # cyclic collector would only walk them again and again: a quarter of the time at 100k jobs.
    # It makes no cycles worth collecting early; the collector's state is restored as it was.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _Planner(snapshot).run()
    finally:
        if collecting:
            gc.enable()


def _node(node: Node, priority: list[str], kinds: dict[tuple, tuple[Resources, frozenset[str]]]) -> NodeState:
    """The node as the plan starts: free is its total less what outside load holds there. Outside
    load counts at most the node's total of a resource, and not at all on a resource the node has
    none of: no more than a node has can be held there. `kinds`: the totals and priority resources
    of each distinct node resources met so far in this plan (a thousand nodes are of a few kinds)."""
    kind = tuple(node.resources.items())
    known = kinds.get(kind)
    if known is None:
        total = Resources.of(node.resources)
        known = kinds[kind] = (total, frozenset(name for name in priority if total.get(name) > 0))
    total, has = known
    free = dict(total.items())
    outside = {}
    for name, amount in node.outside.items():
        held = min(to_units(amount), free.get(name, 0))
        if held > 0:
            outside[name] = held
            free[name] -= held
    return NodeState(id=node.id, labels=node.labels, total=total, free=free, has=has, outside=outside)


class _Planner:
    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot
        group = self.group = snapshot.group
        priority = group.resource_priority
        kinds: dict[tuple, tuple[Resources, frozenset[str]]] = {}
        self.nodes = [_node(node, priority, kinds) for node in sorted(snapshot.nodes, key=lambda node: node.id)]
        # Whether any node has outside load: the waiting messages look for it only then.
        self.outside = any(node.outside for node in self.nodes)
        self.totals: dict[str, int] = {}
        for node in self.nodes:
            for name, amount in node.total.items():
                self.totals[name] = self.totals.get(name, 0) + amount
        self.users: dict[str, UserState] = {}
        self.pools: dict[str, Pool] = {}
        self.shapes: dict[tuple, Shape] = {}
        # Two ways of writing the same request (key order, 1 vs 1.0) share one shape.
        self.interned: dict[tuple[Resources, str], Shape] = {}
        self.values = {c.name: c.value for c in group.priority_classes}
        self.default_value = self.values[group.default_class]
        # Running jobs that may be stopped, by node id, and those being stopped (user, request):
        # filled only when the group preempts.
        self.candidates: dict[str, list[Candidate]] = {}
        self.going: list[tuple[UserState, Resources]] = []
        self._charge_running()
        # Reserving jobs by id: [their node, then their entry once read].
        self.reserved: dict[str, list] = {r["job"]: [r["node"]] for r in snapshot.reservations}
        self.tiers = self._entries()
        self._hold_reservations()
        requested = set().union(*(shape.names for shape in self.shapes.values())) - set(priority)
        self.order = (*priority, *sorted(requested))
        selector = SELECTORS[group.selector]
        self.selector = selector(self.nodes, self.order, selector.State.model_validate(snapshot.state.get(selector.state_name(), {})))
        coming = [(held[1][USER], held[1][SHAPE].need) for held in self.reserved.values()]
        self.preemptor = (Preemptor(group, self.totals, self.candidates, coming, self.going)
                          if group.preemption != "off" else None)

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
            )
        return user

    def _charge_running(self) -> None:
        by_id = {node.id: node for node in self.nodes}
        requests: dict[tuple, Resources] = {}
        group, now = self.group, self.snapshot.now
        preemptible = {c.name for c in group.priority_classes if c.preemptible}
        for job in self.snapshot.running:
            raw = tuple(job["resources"].items())
            need = requests.get(raw)
            if need is None:
                need = requests[raw] = Resources.of(job["resources"])
            user = self.users.get(job["user"]) or self._user(job["user"])
            user.running += 1
            used = user.used
            for name, amount in need.items():
                used[name] = used.get(name, 0) + amount
            node = by_id.get(job["node"])
            if node is not None:
                free = node.free
                for name, amount in need.items():
                    free[name] = free.get(name, 0) - amount
                started = job.get("started_at")
                if group.preemption != "off" and job.get("stopping"):
                    self.going.append((user, need))
                elif group.preemption != "off" and started is not None:
                    run_s = (now - started).total_seconds()
                    name = job.get("class", group.default_class)
                    if run_s >= group.min_runtime_s and name in preemptible:
                        self.candidates.setdefault(node.id, []).append(
                            Candidate(job["id"], user, self.values[name], need, started, run_s))
        for user in self.users.values():
            user.dominant = dominant_share(user.used, self.totals)

    def _entries(self) -> list[tuple[int, list[Entry]]]:
        """The entries by class value, the highest first."""
        entries: list[Entry] = []
        append = entries.append
        shapes = self.shapes
        users = self.users
        now = self.snapshot.now
        # One class (the usual case): no class to read per job.
        values = self.values if len(self.values) > 1 else None
        tiers: dict[int, list[Entry]] = {self.default_value: entries}
        reserved = self.reserved
        for position, job in enumerate(self.snapshot.pending):
            labels = job.get("node_labels")
            raw = (tuple(job["resources"].items()), tuple(labels.items())) if labels else tuple(job["resources"].items())
            shape = shapes.get(raw) or self._new_shape(raw, job)
            submitted = job.get("submitted_at")
            ident = job["id"]
            user = users.get(job["user"]) or self._user(job["user"])
            # Only a start time still to come holds a job back. Decided here, it spares the plan
            # reading the job itself again, in an order that is not the list's.
            later = job.get("not_before")
            if later is not None and later <= now:
                later = None
            # An Entry, a plain tuple in the order of entries.py: NEG_PRIORITY, SUBMITTED_AT,
            # POSITION, ID_LENGTH, ID, NOT_BEFORE, SHAPE, USER.
            entry = (-job.get("priority", 0), submitted or _NO_TIME, 0 if submitted else position, len(ident), ident, later, shape, user)
            if values is None:
                append(entry)
            else:
                tier = tiers.get(values[job.get("class", self.group.default_class)])
                if tier is None:
                    tier = tiers[values[job["class"]]] = []
                tier.append(entry)
            if reserved and ident in reserved:
                reserved[ident].append(entry)
        return sorted(tiers.items(), key=lambda item: -item[0])

    def _hold_reservations(self) -> None:
        """Each reservation whose job waits and whose node is still there takes the job's request
        off the node's free resources; the others end here."""
        by_id = {node.id: node for node in self.nodes}
        for ident, held in list(self.reserved.items()):
            node = by_id.get(held[0])
            if len(held) < 2 or node is None or not held[1][SHAPE].need.fits_in(node.total):
                del self.reserved[ident]
                continue
            held[0] = node
            free = node.free
            for name, amount in held[1][SHAPE].items:
                free[name] = free.get(name, 0) - amount

    def _new_shape(self, raw: tuple, job: dict) -> Shape:
        # `raw` is the request as written: its items alone without labels, the pair of items and
        # labels with them (the two cannot be equal: items start with a name, not a tuple).
        need = Resources.of(job["resources"])
        labels = job.get("node_labels") or {}
        pool_key = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pool = self.pools.get(pool_key)
        if pool is None:
            pool = self.pools[pool_key] = Pool(
                key=pool_key,
                labels=labels,
                nodes=[n for n in self.nodes if all(n.labels.get(k) == v for k, v in labels.items())],
            )
        shape = self.interned.get((need, pool_key))
        if shape is None:
            shape = self.interned[(need, pool_key)] = Shape(need=need, pool=pool)
        self.shapes[raw] = shape
        return shape

    def run(self) -> Plan:
        strict = self.group.strict_order
        totals = self.totals
        select = self.selector.select
        placed = self.selector.placed
        reserved = self.reserved
        preemptor = self.preemptor
        placements = []
        waiting: list[dict] = []
        preemptions: list[dict] = []
        reservations: list[dict] = []

        def preempting(ident: str, shape: Shape, decision: Decision) -> None:
            self._reserve(decision, shape)
            preemptions.append({"job": ident, "node": decision.node.id, "victims": [v.id for v in decision.victims]})
            reservations.append({"job": ident, "node": decision.node.id})

        # Jobs that may reclaim within their class (fairshare), once every placement is made.
        reclaim = preemptor is not None and preemptor.fairshare
        reclaiming: list[tuple[dict, Shape, UserState, int]] = []
        # Per reason, per what its message depends on, the entries waiting for that message.
        unsaid: dict[str, dict[object, list[dict]]] = {reason: {} for reason in get_args(Reason)}
        blocker = None
        for value, entries in self.tiers:
            runs = POLICIES[self.group.policy](entries)
            taken = None
            while True:
                try:
                    queue, start = runs.send(taken)
                except StopIteration:
                    break
                taken = len(queue)
                for index in range(start, taken):
                    # The entry's fields in the order of entries.py; the first four only sort.
                    _, _, _, _, ident, later, shape, user = queue[index]
                    if shape.unschedulable:
                        reason, subject = "Unschedulable", shape
                    elif later is not None:
                        reason, subject = "NotBefore", later
                    elif user.max_running is not None and user.running >= user.max_running:
                        reason, subject = "UserJobLimit", user
                    elif user.max_resources is not None and not user.may_take(shape):
                        reason, subject = "UserResourceLimit", (user, shape)
                    elif reserved and ident in reserved:
                        node = reserved[ident][0]
                        # Its own request is held off the node's free resources: it fits once
                        # nothing else is short there.
                        if all(node.free.get(name, 0) >= 0 for name, _ in shape.items):
                            del reserved[ident]
                            user.take(shape, totals)
                            if preemptor is not None:
                                preemptor.started(user, shape.need)
                            placed(node)
                            placements.append({"job": ident, "node": node.id})
                            taken = index + 1
                            break
                        reason, subject = "Preempting", node
                        # It waits for resources, only on its node: behind it, strict order waits too.
                        if strict:
                            blocker = ident
                    elif blocker is not None:
                        reason, subject = "Priority", blocker
                    else:
                        node = None if shape.full else select(shape)
                        if node is not None:
                            free = node.free
                            for name, amount in shape.items:
                                free[name] -= amount
                            user.take(shape, totals)
                            placed(node)
                            placements.append({"job": ident, "node": node.id})
                            taken = index + 1
                            break
                        shape.full = True
                        decision = None if preemptor is None else preemptor.victims_for(shape, user, value)
                        if decision is None:
                            reason, subject = "Resources", shape
                        else:
                            preempting(ident, shape, decision)
                            reason, subject = "Preempting", decision
                        if strict:
                            blocker = ident
                    record = {"job": ident, "reason": reason, "message": ""}
                    waiting.append(record)
                    if reclaim and reason == "Resources":
                        reclaiming.append((record, shape, user, value))
                    same = unsaid[reason].get(subject)
                    if same is None:
                        unsaid[reason][subject] = [record]
                    else:
                        same.append(record)
        for record, shape, user, value in reclaiming:
            decision = preemptor.victims_for(shape, user, value, reclaim=True)
            if decision is not None:
                preempting(record["job"], shape, decision)
                record["reason"] = "Preempting"
                unsaid["Preempting"][decision] = [record]
        messages = _Messages(self)
        for reason, by_subject in unsaid.items():
            for subject, records in by_subject.items():
                text = messages.say(reason, subject)
                for record in records:
                    # A job that reclaimed after the placements left its first reason's list.
                    if record["reason"] == reason:
                        record["message"] = text
        kept = [{"job": ident, "node": held[0].id} for ident, held in reserved.items()]
        if preemptor is None and not self.snapshot.reservations:
            return Plan.model_construct(placements=placements, waiting=waiting, state=self._state())
        return Plan.model_construct(placements=placements, waiting=waiting, state=self._state(),
                                    preemptions=preemptions, reservations=kept + reservations)

    def _reserve(self, decision: Decision, shape: Shape) -> None:
        """Holds the room the job will need on the decision's node once its victims stop: of what
        is free there now, the part the victims' resources will not cover. No less than 0 is left
        free, since the job fits once they stop."""
        node = decision.node
        freed: dict[str, int] = {}
        for victim in decision.victims:
            for name, amount in victim.need.items():
                freed[name] = freed.get(name, 0) + amount
        free = node.free
        for name, amount in shape.items:
            free[name] -= max(amount - freed.get(name, 0), 0)
        self.selector.placed(node)

    def _state(self) -> dict[str, dict]:
        document = self.selector.state_document()
        return {} if document is None else {self.selector.state_name(): document}


class _Messages:
    """Why jobs wait, in words. Each message depends only on its subject (the shape for Resources,
    the user for UserJobLimit...), so 100k waiting jobs share a handful of them. They are written
    after the plan: "free" means free after it."""

    def __init__(self, planner: _Planner):
        self.planner = planner
        self.group = planner.group.name
        self.rank = {name: index for index, name in enumerate(planner.order)}
        # The most of a resource on any node of a pool, total or free, by (pool, "total" or
        # "free", name): the shapes of one pool share them.
        self.maxima: dict[tuple[Pool, str, str], int] = {}
        # The nodes of a pool with outside load, by id: the shapes of one pool share them.
        self.loaded: dict[Pool, list[NodeState]] = {}
        # Class names by value, for messages (classes of one value read as one).
        self.classes = {}
        for c in planner.group.priority_classes:
            self.classes[c.value] = "/".join(filter(None, (self.classes.get(c.value), c.name)))

    def say(self, reason: str, subject) -> str:
        return getattr(self, reason)(subject)

    def _in_order(self, amounts) -> list[tuple[str, int]]:
        return sorted(amounts, key=lambda item: self.rank[item[0]])

    def _needs(self, shape: Shape) -> str:
        labels = f" on a node labelled {shape.pool.key}" if shape.pool.key else ""
        return f"needs {describe(self._in_order(shape.items))}{labels}"

    def _most(self, shape: Shape, held: str) -> list[tuple[str, int]]:
        most = []
        for name, _ in self._in_order(shape.items):
            key = (shape.pool, held, name)
            amount = self.maxima.get(key)
            if amount is None:
                amount = self.maxima[key] = max(getattr(node, held).get(name, 0) for node in shape.pool.nodes)
            most.append((name, amount))
        return most

    def _short(self, shape: Shape, most: list[tuple[str, int]]) -> list[tuple[str, int]]:
        return [(name, amount) for (name, amount), (_, need) in zip(most, self._in_order(shape.items)) if amount < need]

    def Unschedulable(self, shape: Shape) -> str:
        where = f"group {self.group}" + (f" labelled {shape.pool.key}" if shape.pool.key else "")
        if not shape.pool.nodes:
            return f"{self._needs(shape)}; no node of {where}"
        most = self._most(shape, "total")
        short = self._short(shape, most)
        if short:
            return f"{self._needs(shape)}; no node of {where} has more than {describe(short)}"
        return f"{self._needs(shape)}; no single node of {where} has all of it (the most of each on any node: {describe(most)})"

    def Resources(self, shape: Shape) -> str:
        most = self._most(shape, "free")
        where = "node labelled " + shape.pool.key if shape.pool.key else "node"
        if self._short(shape, most):
            return f"{self._needs(shape)}; the most free on any {where} is {describe(most)}{self._outside(shape)}"
        return (f"{self._needs(shape)}; no {where} has all of it free at once (the most free of each on any node: "
                f"{describe(most)}){self._outside(shape)}")

    def _outside(self, shape: Shape) -> str:
        """` (work outside the queue holds CPU 2 on node a; CPU 1 on node b)`: the nodes of the pool
        that would take the shape now but for outside load, by id, each with what outside load
        holds of the resources the shape is short of there; "" when there are none. At most
        OUTSIDE_NODES_NAMED are named, the others counted (`; and more on 4 other nodes`)."""
        if not self.planner.outside:
            return ""
        loaded = self.loaded.get(shape.pool)
        if loaded is None:
            loaded = self.loaded[shape.pool] = [node for node in shape.pool.nodes if node.outside]
        need = self._in_order(shape.items)
        held = []
        for node in loaded:
            free, outside = node.free, node.outside
            if fits(need, free):
                continue
            if all(free.get(name, 0) + outside.get(name, 0) >= amount for name, amount in need):
                held.append((node, [(name, outside[name]) for name, amount in need if free.get(name, 0) < amount]))
        if not held:
            return ""
        named = "; ".join(f"{describe(amounts)} on node {node.id}" for node, amounts in held[:OUTSIDE_NODES_NAMED])
        others = len(held) - OUTSIDE_NODES_NAMED
        more = f"; and more on {others} other node{'s' if others > 1 else ''}" if others > 0 else ""
        return f" (work outside the queue holds {named}{more})"

    def NotBefore(self, start: datetime) -> str:
        left = int((start - self.planner.snapshot.now).total_seconds())
        return f"not to start before {start.isoformat().replace('+00:00', 'Z')}, in {_duration(left)}"

    def UserJobLimit(self, user: UserState) -> str:
        return f"user {user.name} has {user.running} jobs running or starting, the most allowed is {user.max_running}"

    def UserResourceLimit(self, subject: tuple[UserState, Shape]) -> str:
        user, shape = subject
        limits = user.max_resources
        over = [
            f"{name} {format_amount(name, user.used.get(name, 0))} of at most {format_amount(name, limits[name])}"
            for name, amount in self._in_order(shape.items)
            if name in limits and user.used.get(name, 0) + amount > limits[name]
        ]
        return f"{self._needs(shape)}; user {user.name} already uses {', '.join(over)}"

    def Preempting(self, subject: NodeState | Decision) -> str:
        if isinstance(subject, NodeState):
            return f"node {subject.id} is held for it while the jobs stopped to make room for it end"
        victims = ", ".join(f"{victim.id} ({victim.user.name}, {self.classes[victim.value]}, ran {_duration(int(victim.run_s))})"
                            for victim in subject.victims)
        return f"stopping {len(subject.victims)} job{'s' if len(subject.victims) > 1 else ''} on node {subject.node.id} to make room for it: {victims}"

    def Priority(self, blocker: str) -> str:
        return f"strict order: waits behind job {blocker}, which is first in line and waits for resources"


def _duration(seconds: int) -> str:
    days, seconds = divmod(max(seconds, 1), 86_400)
    hours, seconds = divmod(seconds, 3_600)
    minutes, seconds = divmod(seconds, 60)
    parts = [f"{value}{unit}" for value, unit in ((days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")) if value]
    return " ".join(parts[:2])
