"""Heap keys packed into ints, for the dispersed and concentrated selectors.

The selectors keep, per shape, a heap of the nodes that may fit it, ordered as the tuples

    (extras, *(sign·free[r] for r in order), index)

would be: fewest extras, then the free amounts resource by resource in `order` (the least first
for `sign` 1, the most first for -1), then the node's index in id order. Comparing two such tuples
walks them field by field; an int whose bit fields hold the same values in the same order compares
in one step, and a heap of 1,000 nodes compares a lot. `PackedKeys` owns that layout: it works out
the fields' widths from the nodes, packs, and hands the hot loop the masks it reads entries with.

Layout of an entry, most significant bits first:

    | extras | order[0] | order[1] | ... | order[-1] | index |
             '------------------- key -------------------'

- index: the node's index, 0 <= index < number of nodes, in the lowest `index_mask.bit_length()`
  bits (`entry & index_mask`).
- one field per resource of `order`, the last one lowest: sign·(free - zero), where `zero` is the
  resource's lower bound for `sign` 1 and its upper bound for -1, so the field is never negative
  and grows with sign·free; it is (upper - lower).bit_length() bits wide.
- the key: the resource fields and the index, everything below the extras (`entry & key_mask`).
  It depends only on the node, so it is worked out once per change of the node, not per shape.
- extras: how many resources the node has that the shape does not ask for; the top field, as wide
  as it needs to be (extras >= 0).

Bounds: each free amount must stay between the resource's lower bound, min(0, the least free on
any node at the start), and its upper bound, max(0, the most free on any node at the start);
`bounds` holds them. The planner keeps to them for the whole plan: free amounts only go down, and a
placement leaves the amounts it takes from at 0 or more, so an amount ends either where it started
or at 0 or more. Within the bounds, the order of the ints is the order of the tuples, whatever the
free amounts have become.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class PackedKeys:
    """The packing for one selector: one per plan, built from the nodes as they are at the start.

    `key(free, index)` and `entry(extras, key)` pack; `index_mask`, `key_mask` and `extras_mask`
    read an entry: `entry & index_mask` is the node's index, `entry & key_mask` its key as it was
    when the entry was made, and `entry & extras_mask | key` the same entry with a new key."""

    __slots__ = ("_fields", "bounds", "extras_mask", "extras_shift", "index_mask", "key_mask", "sign")

    def __init__(self, frees: Sequence[Mapping[str, int]], order: Sequence[str], sign: int,
                 reach: Sequence[Mapping[str, int]] = ()):
        """`frees`: every node's free amounts at the start, a node's index being its position in
        the list; `order`: the resources, most significant first; `sign`: 1 for the least free
        first, -1 for the most; `reach`: amounts the free ones may rise to later, which the bounds
        hold too (a selector kept from one plan to the next, carried.py: the nodes' totals)."""
        if sign not in (1, -1):
            raise ValueError(f"sign must be 1 or -1, not {sign!r}")
        self.sign = sign
        self.index_mask = (1 << len(frees).bit_length()) - 1
        self.bounds: dict[str, tuple[int, int]] = {}
        # (name, zero, weight): the field is (free - zero)·weight, where zero makes it start at 0
        # and weight is ±the field's lowest bit. Lowest field first.
        self._fields: tuple[tuple[str, int, int], ...] = ()
        shift = self.index_mask.bit_length()
        for name in reversed(order):
            amounts = [free.get(name, 0) for free in (*frees, *reach)]
            low, high = min([0, *amounts]), max([0, *amounts])
            self.bounds[name] = (low, high)
            self._fields += ((name, low if sign > 0 else high, sign << shift),)
            shift += (high - low).bit_length()
        self.extras_shift = shift
        self.key_mask = (1 << shift) - 1
        # All bits above the key (a negative int: as many as the extras need).
        self.extras_mask = ~self.key_mask

    def key(self, free: Mapping[str, int], index: int) -> int:
        """The node's key: its free amounts (within `bounds`) and its index."""
        key = index
        for name, zero, weight in self._fields:
            key += (free.get(name, 0) - zero) * weight
        return key

    def keys(self, frees: Sequence[Mapping[str, int]]) -> list[int]:
        """`key` of every node, its index being its position in `frees`, worked out a resource at
        a time: a plan packs every node at its start."""
        keys = list(range(len(frees)))
        for name, zero, weight in self._fields:
            keys = [key + (free.get(name, 0) - zero) * weight for key, free in zip(keys, frees, strict=False)]
        return keys

    def entry(self, extras: int, key: int) -> int:
        """A heap entry: the node's extras for one shape (>= 0) above its key."""
        return (extras << self.extras_shift) | key

    def short_of(self, amount: int) -> int:
        """For sign -1 (the most free first): the least key of a node short of a request that asks
        `amount` of the first resource of `order`, on that resource. It is the key's top field, so a
        node has at least `amount` of it if and only if its key is below this one. A request that
        asks none of it (0) is short nowhere, whatever a node has: the bound is above every key."""
        if not self._fields or amount <= 0:
            return self.key_mask + 1
        _, high, weight = self._fields[-1]
        return (high - amount + 1) * -weight

    def within_bounds(self, free: Mapping[str, int]) -> bool:
        """Whether the free amounts can be packed so that the order holds."""
        return all(low <= free.get(name, 0) <= high for name, (low, high) in self.bounds.items())
