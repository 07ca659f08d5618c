"""A group's nodes and the running jobs on them as a plan starts, carried from one plan to the next.

The planner makes its picture of the nodes from the snapshot: each node's free resources, its
pools, the node selector's order of them (picture.py, selectors.py). For a thousand nodes that is
most of a plan's work when few jobs can be placed, and a caller that plans one group again and
again, where a few jobs start or end between two plans (the simulation, core/simulate/engine.py),
would make it again every time. It keeps a `Carried` instead: the running jobs it is given (`put`,
`drop`) are taken off their nodes' free resources and charged to their users as they come and go,
and `plan(snapshot, carried)` starts from it. A plan then costs what changed and what it plans, not
the size of the cluster.

`plan(snapshot, carried)` is `plan(snapshot)` with the snapshot's nodes those the Carried was made
with and its running jobs the Carried's followed by the snapshot's own. A plan changes free
resources as it goes; the Carried is given back as the plan found it, node by node, on the nodes
the plan could have changed: those of the snapshot's running jobs and reservations and of the
plan's placements and reservations.

It holds plain running jobs (`id`, `user`, `node`, `resources`), on a node of the group or not (a
node outside the group: charged to the user alone), for a group that does not preempt: there every
running job is a possible victim, read one by one.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from pydantic import BaseModel

from job.core.planner.nodes import node_states
from job.core.planner.picture import NodeState, Pool, UserState, add_to
from job.core.planner.rules import PREEMPTIONS
from job.core.planner.selectors import Selector
from job.core.planner.snapshot import Group, Node, Plan, Running, Snapshot
from job.core.resources import Resources

# The fields of a running job a Carried holds: what charges a node and a user, nothing that makes
# it a possible victim, a gang or a job that holds more than it asked for.
PLAIN = frozenset({"id", "user", "node", "resources"})
# Node selectors kept, each hearing of every change between plans; beyond, the oldest goes.
KEPT_SELECTORS = 4


class Carried:
    def __init__(self, nodes: list[Node], group: Group):
        self.priority = group.resource_priority
        self.nodes = node_states(nodes, self.priority)
        self.by_id = {node.id: node for node in self.nodes}
        # What the planner reads of every node once per plan, and the pools of nodes per labels.
        self.outside = any(node.outside or node.held for node in self.nodes)
        self.holding = frozenset(job for node in self.nodes for job in node.held)
        self.totals: dict[str, int] = {}
        for node in self.nodes:
            add_to(self.totals, node.total)
        self.pools: dict[str, Pool] = {}
        # Per node, its free resources without our jobs, and as a plan starts (a plan changes the
        # node's own; they are made so again after it).
        self._empty = {node: dict(node.free) for node in self.nodes}
        self._start = {node: dict(node.free) for node in self.nodes}
        # The running jobs by id, with their node (None: outside the group) and units; per node id
        # those on it; per user, what its jobs hold and how many they are.
        self._entries: dict[str, tuple[Running, NodeState | None, dict[str, int]]] = {}
        self.on_node: dict[str, list[Running]] = {}
        self._used: dict[str, dict[str, int]] = {}
        self._running: dict[str, int] = {}
        # The node selectors kept between plans, by kind and the resources they order by (those
        # the plan's jobs ask for: a few sets), and the one of the plan under way.
        self._selectors: dict[tuple[type[Selector], tuple[str, ...]], Selector] = {}
        self._planning: Selector | None = None

    def put(self, entry: Running) -> None:
        """A running job more, or the one of its id changed (as the sum of a node's jobs does)."""
        given = _given(entry)
        if given - PLAIN:
            raise ValueError(f"running job {entry.id}: a carried picture holds plain jobs "
                             f"({', '.join(sorted(PLAIN))}), not {', '.join(sorted(given - PLAIN))}")
        ident, user = entry.id, entry.user
        units = dict(Resources.of(entry.resources).items())
        node = self.by_id.get(entry.node)
        changes: dict[NodeState, dict[str, int]] = {}
        if ident in self._entries:
            self._forget(ident, changes)
        self._entries[ident] = (entry, node, units)
        if node is not None:
            self.on_node.setdefault(node.id, []).append(entry)
            add_to(changes.setdefault(node, {}), units, -1)
        add_to(self._used.setdefault(user, {}), units)
        self._running[user] = self._running.get(user, 0) + 1
        self._change(changes)

    def drop(self, ident: str) -> None:
        """A running job less: the one of id `ident`."""
        changes: dict[NodeState, dict[str, int]] = {}
        self._forget(ident, changes)
        self._change(changes)

    def _forget(self, ident: str, changes: dict[NodeState, dict[str, int]]) -> None:
        """The job of id `ident` held no more: what it gave back to its node goes into `changes`."""
        entry, node, units = self._entries.pop(ident)
        user = entry.user
        if node is not None:
            others = [job for job in self.on_node[node.id] if job.id != ident]
            if others:
                self.on_node[node.id] = others
            else:
                del self.on_node[node.id]
            add_to(changes.setdefault(node, {}), units)
        used = self._used[user]
        add_to(used, units, -1)
        self._running[user] -= 1
        if not self._running[user]:
            del self._running[user], self._used[user]
        else:
            for name in [name for name, amount in used.items() if not amount]:
                del used[name]

    def _change(self, changes: dict[NodeState, dict[str, int]]) -> None:
        """Per node, units given back to its free resources (taken: below 0). A resource the node
        has not, that only our jobs' requests put there, goes when they end, as a plan made from
        the snapshot would never have had it."""
        for node, units in changes.items():
            empty = self._empty[node]
            for free in (self._start[node], node.free):
                add_to(free, units)
                for name in units:
                    if not free[name] and name not in empty:
                        del free[name]
            # Free amounts up to the node's total are within any kept selector's bounds.
            low = min(node.free.values(), default=0) < 0
            for made, selector in list(self._selectors.items()):
                if not low or selector.bounded(node.free):
                    selector.placed(node)
                else:
                    del self._selectors[made]

    def check(self, group: Group) -> None:
        if group.resource_priority != self.priority:
            raise ValueError("the group's resource priority is not that of its carried picture")
        if PREEMPTIONS[group.preemption].preempts:
            raise ValueError("a carried picture is for a group that does not preempt")

    def charge(self, user_of: Callable[[str], UserState]) -> None:
        """Its running jobs charged to their users, `user_of` giving the plan's state of each."""
        for name, used in self._used.items():
            user = user_of(name)
            add_to(user.used, used)
            user.running += self._running[name]

    def selector(self, kind: type[Selector], order: tuple[str, ...], state: BaseModel, snapshot: Snapshot) -> Selector:
        """The node selector of a plan of `snapshot` that starts now, the snapshot's running jobs
        and reservations held: kept from the last plan, or made again if it orders by other
        resources (or some node's free resources went beyond its keys' bounds). The others do
        not hear of the plan's changes: each node is as they know it again once the plan is over
        (`restore`)."""
        changed = self._touched(snapshot)
        selector = self._selectors.get((kind, order))
        if selector is None or not all(selector.bounded(node.free) for node in changed):
            if len(self._selectors) >= KEPT_SELECTORS:
                del self._selectors[next(iter(self._selectors))]
            selector = self._selectors[kind, order] = kind(self.nodes, order, state, lasting=True)
        else:
            selector.begin(state)
            for node in changed:
                selector.placed(node)
        self._planning = selector
        return selector

    def restore(self, snapshot: Snapshot, result: Plan | None) -> None:
        """The nodes as they were before the plan of `snapshot`, which gave `result` (None: it
        failed midway, and any node may have changed)."""
        selector, self._planning = self._planning, None
        node: NodeState | None
        if result is None:
            for node in self.nodes:
                node.free.clear()
                node.free.update(self._start[node])
            self._selectors.clear()
            return
        changed = self._touched(snapshot)
        for done in (*result.placements, *(result.reservations or ())):
            for ident in (done["node"], *done.get("bundle_nodes", ())):
                node = self.by_id.get(ident)
                if node is not None:
                    changed.add(node)
        for node in changed:
            start = self._start[node]
            if node.free != start:
                node.free.clear()
                node.free.update(start)
                if selector is not None:
                    selector.placed(node)

    def _touched(self, snapshot: Snapshot) -> set[NodeState]:
        """The nodes that a plan of `snapshot` changes before its first job: those of its running
        jobs and of its reservations."""
        touched = set()
        held = [(job.node, *(job.bundle_nodes or ())) for job in snapshot.running]
        held += [(job["node"], *job.get("bundle_nodes", ())) for job in snapshot.reservations]
        for idents in held:
            for ident in idents:
                node = self.by_id.get(ident)
                if node is not None:
                    touched.add(node)
        return touched



def _given(entry: Running) -> set[str]:
    """The keys a running job was given, as its JSON names them (a field at its default is left
    out of a dump)."""
    return set(msgspec.to_builtins(entry))
