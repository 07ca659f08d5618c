"""PackedKeys (job/core/planner/heap_keys.py) against plain tuple keys: the packed ints must order
as the tuples (extras, *(sign·free[r] for r in order), index) do, and give the index back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from job.core.planner.heap_keys import PackedKeys

NAMES = ("GPU", "CPU", "memory", "licence")

# Small amounts collide often (ties fall through to the next field), large ones need wide fields
# (memory is in units of 1/10000 byte).
amounts = st.one_of(st.just(0), st.integers(-8, 8), st.integers(-(2**62), 2**62))
frees = st.dictionaries(st.sampled_from((*NAMES, "node:10.0.0.1")), amounts, max_size=5)


@st.composite
def cases(draw):
    order = tuple(draw(st.permutations(NAMES))[: draw(st.integers(1, len(NAMES)))])
    nodes = draw(st.lists(frees, max_size=12))
    extras = draw(st.lists(st.integers(0, 5), min_size=len(nodes), max_size=len(nodes)))
    sign = draw(st.sampled_from((1, -1)))
    return order, nodes, extras, sign


def tuple_key(free, index, order, sign, extras):
    return (extras, *(sign * free.get(name, 0) for name in order), index)


def check(packing, nodes, extras, order, sign):
    entries = [packing.entry(extra, packing.key(free, index))
               for index, (free, extra) in enumerate(zip(nodes, extras, strict=True))]
    tuples = [tuple_key(free, index, order, sign, extra) for index, (free, extra) in enumerate(zip(nodes, extras, strict=True))]
    # Every pair compares the same way (sorting alone could hide ties).
    for i in range(len(nodes)):
        for j in range(len(nodes)):
            assert (entries[i] < entries[j]) == (tuples[i] < tuples[j])
            assert (entries[i] == entries[j]) == (i == j)
    for index, entry in enumerate(entries):
        assert entry >= 0
        assert entry & packing.index_mask == index
        assert entry & packing.key_mask == packing.key(nodes[index], index)
    return entries


@settings(max_examples=300, deadline=None)
@given(cases())
def test_packed_order_is_tuple_order(case):
    order, nodes, extras, sign = case
    packing = PackedKeys(nodes, order, sign)
    assert all(packing.within_bounds(free) for free in nodes)
    check(packing, nodes, extras, order, sign)


@settings(max_examples=300, deadline=None)
@given(cases(), st.data())
def test_order_holds_after_free_goes_down_within_bounds(case, data):
    order, nodes, extras, sign = case
    packing = PackedKeys(nodes, order, sign)
    before = check(packing, nodes, extras, order, sign)
    later = []
    for free in nodes:
        free = dict(free)
        for name in order:
            low, _ = packing.bounds[name]
            now = free.get(name, 0)
            # Down to anything within the bounds, often 0 (a placement leaves 0 or more) or unchanged.
            options = [st.just(now), st.integers(low, now)] + ([st.just(0)] if now >= 0 else [])
            free[name] = data.draw(st.one_of(options))
        assert packing.within_bounds(free)
        later.append(free)
    new_extras = data.draw(st.lists(st.integers(0, 5), min_size=len(nodes), max_size=len(nodes)))
    after = check(packing, later, new_extras, order, sign)
    # An entry re-keyed the way the selectors do it keeps its extras and takes the new key.
    for index, (old, extra) in enumerate(zip(before, extras, strict=True)):
        key = packing.key(later[index], index)
        assert old & packing.extras_mask | key == packing.entry(extra, key)
    # Only going down: sign 1 never sorts a node later than it was, sign -1 never earlier.
    for old, new, extra in zip(before, after, extras, strict=True):
        same = packing.entry(extra, new & packing.key_mask)
        assert same <= old if sign > 0 else same >= old


def test_bounds_include_zero_and_nothing_packs():
    packing = PackedKeys([{"CPU": 4}, {"CPU": 8}], ("GPU", "CPU"), -1)
    assert packing.bounds == {"CPU": (0, 8), "GPU": (0, 0)}
    assert packing.within_bounds({"CPU": 0}) and not packing.within_bounds({"CPU": -1})
    assert PackedKeys([{"CPU": -3}], ("CPU",), 1).bounds == {"CPU": (-3, 0)}
    # A group without nodes: every field is empty, and there is nothing to pack.
    empty = PackedKeys([], ("GPU", "CPU"), 1)
    assert empty.index_mask == 0 and empty.key_mask == 0
    assert empty.entry(2, 0) > empty.entry(1, 0)


@settings(max_examples=300, deadline=None)
@given(cases(), st.integers(-3, 10))
def test_short_of_bounds_the_nodes_with_enough_of_the_first_resource(case, amount):
    order, nodes, _, _ = case
    packing = PackedKeys(nodes, order, -1)
    short = packing.short_of(amount)
    for index, free in enumerate(nodes):
        enough = amount <= 0 or free.get(order[0], 0) >= amount
        assert (packing.key(free, index) < short) == enough


@settings(max_examples=300, deadline=None)
@given(cases())
def test_keys_are_each_nodes_key(case):
    order, nodes, _, sign = case
    packing = PackedKeys(nodes, order, sign)
    assert packing.keys(nodes) == [packing.key(free, index) for index, free in enumerate(nodes)]
