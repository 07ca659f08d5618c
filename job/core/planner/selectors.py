"""Node selectors: which candidate node a chosen job goes to (docs/planner.md, "Choosing the node").

A selector answers `select(shape)` with a node whose free resources cover the shape, or None when
none does, and hears about every placement through `placed(node)` (after the node's free resources
changed). Its state between ticks is a pydantic model with an empty default, stored in the group
state under its rule's `state_name`. The selectors are declared, with their traits, in rules.py.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from heapq import heapify, heappop, heappush, heapreplace
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

    def __init__(self, nodes: list[NodeState], order: tuple[str, ...], state: BaseModel):
        # Every resource that can matter, in comparison order: the group's priority list, then
        # the other requested resources by name. Per-node resources Ray adds (`node:<ip>`) that no
        # job asks for would only make every comparison longer.
        self.order = order
        self.state = state

    def select(self, shape: Shape) -> NodeState | None:
        raise NotImplementedError

    def placed(self, node: NodeState) -> None:
        """The node's free resources just went down."""

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


    def __init__(self, nodes: list[NodeState], order: tuple[str, ...], state: BaseModel):
        super().__init__(nodes, order, state)
        biggest_first = sorted(nodes, key=lambda node: (tuple(-node.total.get(r, 0) for r in order), node.id))
        self._rank = {node: rank for rank, node in enumerate(biggest_first)}
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

    Each shape has a heap of ints that order as the tuples (extras, *sign·free, id) would, packed
    by `PackedKeys` (heap_keys.py, which documents the layout): a heap step then compares two ints
    instead of two tuples field by field. A node's key (its free amounts and index) is worked out
    once per placement on it, and kept in `_keys`. A node that no longer fits a shape leaves its
    heap for good. Heaps are not touched on placement; an entry whose key is not the node's
    current one is put right when it reaches the top: re-keyed where `rekey` is set, else dropped
    (see the subclasses)."""

    sign: ClassVar[int]
    rekey: ClassVar[bool]

    def __init__(self, nodes: list[NodeState], order: tuple[str, ...], state: BaseModel):
        super().__init__(nodes, order, state)
        self._nodes = sorted(nodes, key=lambda node: node.id)
        self._index = {node: index for index, node in enumerate(self._nodes)}
        # Free resources stay within the packing's bounds: they only go down, and a placement
        # leaves them at 0 or more.
        self._packing = packing = PackedKeys([node.free for node in self._nodes], order, self.sign)
        self._keys = [packing.key(node.free, index) for index, node in enumerate(self._nodes)]
        self._heaps: dict[Shape, list[int]] = {}

    def _heap(self, shape: Shape) -> list[int]:
        heap = self._heaps.get(shape)
        if heap is None:
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
        index_mask, key_mask, extras_mask = packing.index_mask, packing.key_mask, packing.extras_mask
        need = shape.items
        rekey = self.rekey
        while heap:
            entry = heap[0]
            index = entry & index_mask
            key = keys[index]
            # Whether a node fits does not depend on its key: an entry out of date is put right
            # first, and the node is checked once it is on top with its current key.
            if entry & key_mask != key:
                if rekey:
                    heapreplace(heap, entry & extras_mask | key)
                else:
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
        index = self._index[node]
        self._keys[index] = self._packing.key(node.free, index)

    def preference(self, node: NodeState, shape: Shape) -> tuple:
        free, sign = node.free, self.sign
        return _extras(node, shape), tuple(sign * free.get(name, 0) for name in self.order), node.id

    def _fresh(self, shape: Shape) -> list[int]:
        raise NotImplementedError


class Dispersed(_ByFree):
    """Spread: the most free capacity."""

    sign = -1

    # A placement only lowers a node's free resources, so its key (negated) only grows: an entry
    # out of date sorts too early, never too late, and is re-keyed when it reaches the top.
    rekey = True
    _fresh = _ByFree._heap


class Concentrated(_ByFree):
    """Pack: the least free capacity that still fits."""

    sign = 1
    # The node's current entry was pushed when it changed (see `_fresh`); one out of date is left
    # over.
    rekey = False

    def __init__(self, nodes: list[NodeState], order: tuple[str, ...], state: BaseModel):
        super().__init__(nodes, order, state)
        # Here a placement makes a node come earlier, so each heap must hear of it: the nodes
        # placed on, in order, and how far each shape has read.
        self._changed: list[NodeState] = []
        self._read: dict[Shape, int] = {}

    def placed(self, node: NodeState) -> None:
        super().placed(node)
        self._changed.append(node)

    def _fresh(self, shape: Shape) -> list[int]:
        fresh = shape not in self._heaps
        heap = self._heap(shape)
        read = self._read.get(shape, 0)
        if not fresh and read < len(self._changed):
            # In any order: the heap's top is the same whatever order the pushes come in.
            entry, keys, index, need = self._packing.entry, self._keys, self._index, shape.items
            for node in shape.pool.members.intersection(self._changed[read:]):
                if fits(need, node.free):
                    heappush(heap, entry(_extras(node, shape), keys[index[node]]))
        self._read[shape] = len(self._changed)
        return heap


class RoundRobin(Selector):
    """The pool's nodes sorted by id; from the stored index of the pool, going round, the first
    that fits; the index becomes its position + 1."""

    State = RoundRobinState

    def __init__(self, nodes: list[NodeState], order: tuple[str, ...], state: RoundRobinState):
        super().__init__(nodes, order, state)
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
