"""Node selectors: which candidate node a chosen job goes to (docs/planner.md, "Choosing the node").

A selector answers `select(shape)` with a node whose free resources cover the shape, or None when
none does, and hears about every placement through `placed(node)` (after the node's free resources
changed). One made `lasting` outlives its plan (carried.py): each plan then `begin`s it, and it
hears of every change of free resources between plans too, up as well as down. Its state between ticks
is a pydantic model with an empty default, stored in the group
state under its rule's `state_name`. The selectors are declared, with their traits, in rules.py.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from typing import Annotated, ClassVar

from pydantic import BaseModel, Field

from job.core.planner.heap_keys import PackedKeys
from job.core.planner.picture import NodeState, Shape
from job.core.resources import fits


class NoState(BaseModel):
    pass


class RoundRobinState(BaseModel):
    # One index per candidate pool, keyed like Pool.key.
    next_index: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)


class Selector:
    State: ClassVar[type[BaseModel]] = NoState

    def __init__(self, nodes: list[NodeState], order: tuple[str, ...], state: BaseModel, lasting: bool = False):
        # Every resource that can matter, in comparison order: the group's priority list, then
        # the other requested resources by name. Per-node resources Ray adds (`node:<ip>`) that no
        # job asks for would only make every comparison longer.
        self.order = order
        self.begin(state)

    def begin(self, state: BaseModel) -> None:
        """A plan starts, from the selector's stored state. What a selector keeps per shape holds
        only within a plan (free resources only go down there): it goes."""
        self.state = state

    def select(self, shape: Shape) -> NodeState | None:
        raise NotImplementedError

    def placed(self, node: NodeState) -> None:
        """The node's free resources just went down."""

    def bounded(self, free: Mapping[str, int]) -> bool:
        """Whether a node's free resources may be these and the selector's order of the nodes
        hold (heap_keys.py: the bounds of its keys)."""
        return True

    def pick(self, shape: Shape, nodes: Sequence[NodeState]) -> NodeState | None:
        """Among `nodes`, the one the selector prefers that fits the shape, changing nothing it
        keeps: a gang's parts are chosen so (gang.py), and may all be given back."""
        fitting = [node for node in nodes if fits(shape.items, node.free)]
        return min(fitting, key=lambda node: self.preference(node, shape)) if fitting else None

    def preference(self, node: NodeState, shape: Shape) -> tuple:
        """The node's rank for the shape, the lowest first, as `select` orders nodes."""
        raise NotImplementedError

    def picked(self, shape: Shape, node: NodeState) -> None:
        """A gang's part of this shape went to the node, once the whole gang is placed."""

    def state_document(self) -> dict | None:
        """The state as it stands after the plan; None when the selector keeps none."""
        return self.state.model_dump(mode="json") if type(self.state).model_fields else None


def _extras(node: NodeState, shape: Shape) -> int:
    return len(node.has - shape.names)


class Legacy(Selector):
    """Fewest extras, then the largest total capacity, whatever runs there, then the smaller id."""


    def __init__(self, nodes: list[NodeState], order: tuple[str, ...], state: BaseModel, lasting: bool = False):
        super().__init__(nodes, order, state)
        biggest_first = sorted(nodes, key=lambda node: (tuple(-node.total.get(r, 0) for r in order), node.id))
        self._rank = {node: rank for rank, node in enumerate(biggest_first)}

    def begin(self, state: BaseModel) -> None:
        super().begin(state)
        # Per shape: its pool in preference order, and where the first node that may still fit is.
        # The order never changes, and nodes before the cursor can no longer fit the shape.
        self._ranking: dict[Shape, tuple[list[NodeState], list[int]]] = {}

    def preference(self, node: NodeState, shape: Shape) -> tuple:
        return _extras(node, shape), self._rank[node]

    def select(self, shape: Shape) -> NodeState | None:
        ranking = self._ranking.get(shape)
        if ranking is None:
            rank = self._rank
            nodes = sorted(shape.pool.nodes, key=lambda node: (_extras(node, shape), rank[node]))
            ranking = self._ranking[shape] = (nodes, [0])
        nodes, cursor = ranking
        for index in range(cursor[0], len(nodes)):
            if fits(shape.items, nodes[index].free):
                cursor[0] = index
                return nodes[index]
        cursor[0] = len(nodes)
        return None


class _ByFree(Selector):
    """Fewest extras, then free capacity compared resource by resource in priority order: the least
    (`sign` 1) or the most (`sign` -1); then the smaller id.

    Nodes are ordered by ints that order as the tuples (extras, *sign·free, id) would, packed by
    `PackedKeys` (heap_keys.py, which documents the layout): a comparison is then one step between
    two ints instead of two tuples field by field. A node's key (its free amounts and index) is
    worked out once per placement on it, and kept in `_keys`; the subclasses keep the nodes in
    that order their own way."""

    sign: ClassVar[int]

    def __init__(self, nodes: list[NodeState], order: tuple[str, ...], state: BaseModel, lasting: bool = False):
        super().__init__(nodes, order, state)
        self._nodes = sorted(nodes, key=lambda node: node.id)
        self._index = {node: index for index, node in enumerate(self._nodes)}
        # Free resources stay within the packing's bounds: in a plan they only go down, and a
        # placement leaves them at 0 or more. For a selector that outlives its plan (`lasting`),
        # between plans they rise at most to the node's total, and a reservation held on a full
        # node takes them down to 0 less its request, at most the total.
        frees = [node.free for node in self._nodes]
        reach = [{name: sign * amount for name, amount in node.total.items()} for node in self._nodes
                 for sign in (1, -1)] if lasting else ()
        self._packing = PackedKeys(frees, order, self.sign, reach)
        self._keys = self._packing.keys(frees)

    def placed(self, node: NodeState) -> None:
        index = self._index[node]
        self._keys[index] = self._packing.key(node.free, index)

    def bounded(self, free: Mapping[str, int]) -> bool:
        return self._packing.within_bounds(free)

    def preference(self, node: NodeState, shape: Shape) -> tuple:
        free, sign = node.free, self.sign
        return _extras(node, shape), tuple(sign * free.get(name, 0) for name in self.order), node.id


class Dispersed(_ByFree):
    """Spread: the most free capacity.

    Within a plan a placement only lowers a node's free resources, so its key (negated) only
    grows: a node only ever sorts later. One list of keys per kind of node (`has`, which alone sets
    a node's extras for a shape), kept sorted, then serves every shape, where a heap per shape
    would cost a pass over the nodes per shape and plan. A shape reads each list from where it last
    found a node: every node that sorts before that key now sorted before it then and did not fit,
    and still does not (free only goes down). A node whose free resources go up (between plans,
    for a selector kept from one to the next: carried.py) and that now sorts before a reading's key
    is noted in that reading: the shape's node in that list is then the first of those noted that
    fits, if any, else the first that fits from the key on. A reading's key never moves back, so
    that its readings hold from plan to plan and a shape looks at the nodes freed since, not again
    at every node after the first of them. The nodes short of the first resource of the order sort
    last (it is the key's top field): a shape's reading stops at them."""

    sign = -1

    def __init__(self, nodes: list[NodeState], order: tuple[str, ...], state: BaseModel, lasting: bool = False):
        super().__init__(nodes, order, state, lasting)
        self._sorted: dict[frozenset[str], list[int]] = {}
        for node, key in zip(self._nodes, self._keys, strict=False):
            self._sorted.setdefault(node.has, []).append(key)
        for keys in self._sorted.values():
            keys.sort()
        # Per shape (its request and pool), its kinds' lists grouped by extras, the fewest first,
        # each with its reading; and the key from which nodes are short of the first resource. Per
        # kind, the readings of its list.
        self._levels: dict[tuple, tuple[list[list[tuple[list[int], _Reading]]], int]] = {}
        self._readings: dict[frozenset[str], list[_Reading]] = {}

    def _levels_of(self, shape: Shape) -> tuple[list[list[tuple[list[int], _Reading]]], int]:
        by_extras: dict[int, list[tuple[list[int], _Reading]]] = {}
        for has, keys in self._sorted.items():
            reading = _Reading()
            self._readings.setdefault(has, []).append(reading)
            by_extras.setdefault(len(has - shape.names), []).append((keys, reading))
        first = dict(shape.items).get(self.order[0], 0) if self.order else 0
        levels = self._levels[shape.items, shape.pool.key] = ([by_extras[extras] for extras in sorted(by_extras)],
                                                              self._packing.short_of(first))
        return levels

    def select(self, shape: Shape) -> NodeState | None:
        levels, short = self._levels.get((shape.items, shape.pool.key)) or self._levels_of(shape)
        nodes, index_mask, need = self._nodes, self._packing.index_mask, shape.items
        # Outside the shape's pool is as good as too small: never its node.
        members = None if len(shape.pool.nodes) == len(nodes) else shape.pool.members
        for level in levels:
            best = short
            for keys, reading in level:
                # A node noted again that fits sorts before every node from the reading's key on.
                found = self._again(reading, shape, members, short) if reading.again else short
                if found == short:
                    for position in range(bisect_left(keys, reading.at), bisect_left(keys, short)):
                        key = keys[position]
                        node = nodes[key & index_mask]
                        if members is not None and node not in members:
                            continue
                        # `fits` inline, with for/else: this runs over many nodes, per shape, per plan.
                        free = node.free
                        for name, amount in need:
                            if free.get(name, 0) < amount:
                                break
                        else:
                            found = key
                            break
                    reading.at = found
                best = min(best, found)
            if best < short:
                return nodes[best & index_mask]
        return None

    def placed(self, node: NodeState) -> None:
        index = self._index[node]
        old = self._keys[index]
        super().placed(node)
        new = self._keys[index]
        if new != old:
            keys = self._sorted[node.has]
            del keys[bisect_left(keys, old)]
            insort(keys, new)
            if new < old:
                for reading in self._readings.get(node.has, ()):
                    if new < reading.at:
                        reading.again.add(index)

    def _again(self, reading: _Reading, shape: Shape, members: frozenset[NodeState] | None, short: int) -> int:
        """The key of the first of the reading's nodes noted again that sorts before its key and fits
        the shape, else `short`. Those that no longer may go: the others stay, as a reading that
        does not move back does not pass over the nodes from its new key to its key again."""
        keys, nodes, at = self._keys, self._nodes, reading.at
        found = short
        gone = []
        for index in reading.again:
            key = keys[index]
            if key >= at or (members is not None and nodes[index] not in members) or not fits(shape.items, nodes[index].free):
                gone.append(index)
            elif key < found:
                found = key
        reading.again.difference_update(gone)
        return found


@dataclass(eq=False, slots=True)
class _Reading:
    """Where a shape's reading of a kind's list of keys starts (`at`), and the nodes (indices) that
    sort before it since their free resources went up and may fit the shape: every other node
    before `at` does not."""

    at: int = 0
    again: set[int] = field(default_factory=set)


class Concentrated(_ByFree):
    """Pack: the least free capacity that still fits.

    Each shape has a heap of entries, its extras above each node's key (`PackedKeys.entry`), of
    the nodes that may fit it. A node that no longer fits a shape leaves its heap for good. A
    placement makes a node come earlier, so each heap must hear of it: the node's new entry is
    pushed when the shape is next asked (`_fresh`); an entry whose key is not the node's current
    one is left over, and dropped when it reaches the top."""

    sign = 1

    def begin(self, state: BaseModel) -> None:
        super().begin(state)
        self._heaps: dict[Shape, list[int]] = {}
        # The nodes placed on, in order, and how far each shape has read.
        self._changed: list[NodeState] = []
        self._read: dict[Shape, int] = {}

    def _heap(self, shape: Shape) -> list[int]:
        shift, keys, index, need = self._packing.extras_shift, self._keys, self._index, shape.items
        # Nodes of one kind have the same extras for the shape: worked out once per kind.
        extras: dict[frozenset[str], int] = {}
        heap = []
        # `fits` inline, with for/else: this runs over every node of the pool, per shape, per plan.
        for node in shape.pool.nodes:
            free = node.free
            for name, amount in need:
                if free.get(name, 0) < amount:
                    break
            else:
                count = extras.get(node.has)
                if count is None:
                    count = extras[node.has] = _extras(node, shape)
                # PackedKeys.entry, inline.
                heap.append((count << shift) | keys[index[node]])
        self._heaps[shape] = heap
        heapify(heap)
        return heap

    def select(self, shape: Shape) -> NodeState | None:
        heap = self._fresh(shape)
        nodes, keys = self._nodes, self._keys
        packing = self._packing
        index_mask, key_mask = packing.index_mask, packing.key_mask
        need = shape.items
        while heap:
            entry = heap[0]
            index = entry & index_mask
            # Whether a node fits does not depend on its key: an entry out of date is dropped
            # first, and the node is checked once it is on top with its current key.
            if entry & key_mask != keys[index]:
                heappop(heap)
                continue
            node = nodes[index]
            free = node.free
            for name, amount in need:
                if free.get(name, 0) < amount:
                    heappop(heap)
                    break
            else:
                return node
        return None

    def placed(self, node: NodeState) -> None:
        super().placed(node)
        self._changed.append(node)

    def _fresh(self, shape: Shape) -> list[int]:
        heap = self._heaps.get(shape)
        if heap is None:
            heap = self._heap(shape)
        elif self._read.get(shape, 0) < len(self._changed):
            # In any order: the heap's top is the same whatever order the pushes come in.
            entry, keys, index, need = self._packing.entry, self._keys, self._index, shape.items
            for node in shape.pool.members.intersection(self._changed[self._read.get(shape, 0):]):
                if fits(need, node.free):
                    heappush(heap, entry(_extras(node, shape), keys[index[node]]))
        self._read[shape] = len(self._changed)
        return heap


class RoundRobin(Selector):
    """The pool's nodes sorted by id; from the stored index of the pool, going round, the first
    that fits; the index becomes its position + 1."""

    State = RoundRobinState

    def begin(self, state: BaseModel) -> None:
        # Its State, as the plan reads the group state (`SelectorRule.kind.State`).
        assert isinstance(state, RoundRobinState)
        super().begin(state)
        self._next = dict(state.next_index)
        # Per shape: positions in the pool that may still fit it, sorted.
        self._open: dict[Shape, list[int]] = {}

    def select(self, shape: Shape) -> NodeState | None:
        nodes = shape.pool.nodes
        open_ = self._open.get(shape)
        if open_ is None:
            open_ = self._open[shape] = list(range(len(nodes)))
        start = self._next.get(shape.pool.key, 0) % len(nodes)
        while open_:
            index = bisect_left(open_, start)
            if index == len(open_):
                index = 0
            position = open_[index]
            if fits(shape.items, nodes[position].free):
                self._next[shape.pool.key] = position + 1
                return nodes[position]
            del open_[index]
            start = position
        return None

    def pick(self, shape: Shape, nodes: Sequence[NodeState]) -> NodeState | None:
        ring = shape.pool.nodes
        start = self._next.get(shape.pool.key, 0) % len(ring)
        position = {node: index for index, node in enumerate(ring)}
        fitting = [node for node in nodes if fits(shape.items, node.free)]
        # Going round from the stored index: positions before it come after the others.
        return min(fitting, key=lambda node: (position[node] < start, position[node])) if fitting else None

    def picked(self, shape: Shape, node: NodeState) -> None:
        self._next[shape.pool.key] = shape.pool.nodes.index(node) + 1

    def state_document(self) -> dict:
        return RoundRobinState(next_index=dict(sorted(self._next.items()))).model_dump(mode="json")
