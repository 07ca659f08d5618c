"""Node selectors, table-driven: which node a job goes to."""

from __future__ import annotations

import pytest
from planner_helpers import GIB, run, snapshot

CPU_AND_GPU = {
    "big": {"CPU": 16, "memory": 64 * GIB},
    "gpu": {"CPU": 32, "GPU": 4, "memory": 128 * GIB},
    "small": {"CPU": 4, "memory": 16 * GIB},
}

# (name, selector, nodes, running, pending, expected placements)
CASES = [
    ("legacy: largest node", "legacy", {"a": {"CPU": 4}, "b": {"CPU": 8}}, [("r", "u", "b", {"CPU": 7})],
     [("1", "u", {"CPU": 1})], [("1", "b")]),
    ("legacy: no GPU wasted on a CPU job", "legacy", CPU_AND_GPU, [], [("1", "u", {"CPU": 1})], [("1", "big")]),
    ("legacy: GPU job goes where GPUs are", "legacy", CPU_AND_GPU, [], [("1", "u", {"GPU": 1})], [("1", "gpu")]),
    ("legacy: extras only when nothing else fits", "legacy", CPU_AND_GPU, [], [("1", "u", {"CPU": 20})], [("1", "gpu")]),
    ("legacy: skips full nodes", "legacy", {"a": {"CPU": 4}, "b": {"CPU": 8}}, [("r", "u", "b", {"CPU": 8})],
     [("1", "u", {"CPU": 1})], [("1", "a")]),
    ("legacy: ties to smaller id", "legacy", {"b": {"CPU": 4}, "a": {"CPU": 4}}, [], [("1", "u", {"CPU": 1})], [("1", "a")]),
    ("dispersed: most free", "dispersed", {"a": {"CPU": 8}, "b": {"CPU": 8}}, [("r", "u", "a", {"CPU": 6})],
     [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1})], [("1", "b"), ("2", "b")]),
    ("dispersed: spreads", "dispersed", {"a": {"CPU": 4}, "b": {"CPU": 4}},
     [], [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1}), ("3", "u", {"CPU": 1})], [("1", "a"), ("2", "b"), ("3", "a")]),
    ("dispersed: no GPU wasted", "dispersed", CPU_AND_GPU, [], [("1", "u", {"CPU": 1})], [("1", "big")]),
    ("dispersed: priority order, CPU before memory", "dispersed",
     {"a": {"CPU": 8, "memory": 4 * GIB}, "b": {"CPU": 4, "memory": 64 * GIB}}, [], [("1", "u", {"CPU": 1})], [("1", "a")]),
    ("concentrated: least free that fits", "concentrated", {"a": {"CPU": 8}, "b": {"CPU": 8}, "c": {"CPU": 8}},
     [("r1", "u", "a", {"CPU": 7}), ("r2", "u", "b", {"CPU": 6})], [("1", "u", {"CPU": 2}), ("2", "u", {"CPU": 1})],
     [("1", "b"), ("2", "a")]),
    ("concentrated: packs", "concentrated", {"a": {"CPU": 4}, "b": {"CPU": 4}},
     [], [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1}), ("3", "u", {"CPU": 2}), ("4", "u", {"CPU": 1})],
     [("1", "a"), ("2", "a"), ("3", "a"), ("4", "b")]),
    ("concentrated: no GPU wasted even if tighter", "concentrated",
     {"cpu": {"CPU": 64}, "gpu": {"CPU": 2, "GPU": 1}}, [], [("1", "u", {"CPU": 1})], [("1", "cpu")]),
    ("concentrated: memory decides on CPU tie", "concentrated",
     {"a": {"CPU": 4, "memory": 8 * GIB}, "b": {"CPU": 4, "memory": 4 * GIB}}, [], [("1", "u", {"CPU": 1, "memory": GIB})],
     [("1", "b")]),
    ("roundrobin: from the stored index", "roundrobin", {"a": {"CPU": 1}, "b": {"CPU": 1}, "c": {"CPU": 1}},
     [], [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1})], [("1", "b"), ("2", "c")]),
    ("roundrobin: wraps round", "roundrobin", {"a": {"CPU": 2}, "b": {"CPU": 2}, "c": {"CPU": 2}},
     [], [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1}), ("3", "u", {"CPU": 1})], [("1", "b"), ("2", "c"), ("3", "a")]),
    ("roundrobin: skips nodes that do not fit", "roundrobin", {"a": {"CPU": 2}, "b": {"CPU": 2}, "c": {"CPU": 2}},
     [("r", "u", "b", {"CPU": 2})], [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1})], [("1", "c"), ("2", "a")]),
    ("roundrobin: ignores extras", "roundrobin", {"a": {"CPU": 2, "GPU": 1}, "b": {"CPU": 2}},
     [], [("1", "u", {"CPU": 1})], [("1", "b")]),
]


@pytest.mark.parametrize("selector, nodes, running, pending, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_selector_choice(selector, nodes, running, pending, expected):
    state = {"selector.roundrobin": {"next_index": {"": 1}}} if selector == "roundrobin" else {}
    placements, _, _ = run(snapshot("fifo", selector, nodes=nodes, running=running, pending=pending, state=state))
    assert placements == expected


@pytest.mark.parametrize("priority, expected", [
    (["CPU", "memory"], "cpu-rich"),
    (["memory", "CPU"], "mem-rich"),
    # A resource missing from the list is compared after it, in name order.
    (["GPU"], "cpu-rich"),
    (["zzz"], "cpu-rich"),
])
@pytest.mark.parametrize("selector", ["legacy", "dispersed"])
def test_resource_priority_order(selector, priority, expected):
    nodes = {"cpu-rich": {"CPU": 16, "memory": 8 * GIB}, "mem-rich": {"CPU": 8, "memory": 64 * GIB}}
    document = snapshot("fifo", selector, nodes=nodes, pending=[("1", "u", {"CPU": 1, "memory": GIB})],
                        resource_priority=priority)
    assert run(document)[0] == [("1", expected)]


@pytest.mark.parametrize("selector", ["legacy", "concentrated", "dispersed", "roundrobin"])
def test_label_requirements_pick_the_pool(selector):
    nodes = {"a": ({"CPU": 8}, {"zone": "x"}), "b": ({"CPU": 8}, {"zone": "y", "gpu": "A100"}), "c": ({"CPU": 8}, {"zone": "y"})}
    pending = [
        ("1", "u", {"CPU": 1}, {"node_labels": {"zone": "y", "gpu": "A100"}}),
        ("2", "u", {"CPU": 1}, {"node_labels": {"zone": "x"}}),
        ("3", "u", {"CPU": 1}, {"node_labels": {"zone": "z"}}),
    ]
    placements, waiting, _ = run(snapshot("fifo", selector, nodes=nodes, pending=pending))
    assert placements == [("1", "b"), ("2", "a")]
    assert waiting == {"3": "Unschedulable"}


def test_roundrobin_keeps_one_index_per_pool():
    nodes = {"a": ({"CPU": 4}, {"arch": "arm"}), "b": ({"CPU": 4}, {"arch": "x86"}), "c": ({"CPU": 4}, {"arch": "arm"})}
    pending = [
        ("1", "u", {"CPU": 1}, {"node_labels": {"arch": "arm"}}),
        ("2", "u", {"CPU": 1}),
        ("3", "u", {"CPU": 1}, {"node_labels": {"arch": "arm"}}),
        ("4", "u", {"CPU": 1}, {"node_labels": {"arch": "arm", "os": "linux"}}),
    ]
    state = {"selector.roundrobin": {"next_index": {"arch=arm": 1, "": 5, "old=pool": 2}}}
    placements, waiting, new_state = run(snapshot("fifo", "roundrobin", nodes=nodes, pending=pending, state=state))
    # arm pool is [a, c]: from index 1, c then a; the "" pool is [a, b, c]: 5 % 3 = 2, c.
    assert placements == [("1", "c"), ("2", "c"), ("3", "a")]
    assert waiting == {"4": "Unschedulable"}
    assert new_state == {"selector.roundrobin": {"next_index": {"": 3, "arch=arm": 1, "old=pool": 2}}}


def test_roundrobin_state_is_read_and_written_even_when_nothing_moves():
    _, _, state = run(snapshot("fifo", "roundrobin", nodes={"a": {"CPU": 1}}))
    assert state == {"selector.roundrobin": {"next_index": {}}}


@pytest.mark.parametrize("selector", ["legacy", "concentrated", "dispersed"])
def test_stateless_selectors_write_no_state(selector):
    state = {"selector.roundrobin": {"next_index": {"": 4}}}
    _, _, new_state = run(snapshot("fifo", selector, nodes={"a": {"CPU": 1}}, pending=[("1", "u", {"CPU": 1})], state=state))
    assert new_state == {}


@pytest.mark.parametrize("selector", ["legacy", "concentrated", "dispersed", "roundrobin"])
def test_a_group_without_nodes_still_plans(selector):
    placements, waiting, _ = run(snapshot("fifo", selector, pending=[("1", "u", {"CPU": 1}), ("2", "u", {})]))
    assert placements == []
    assert waiting == {"1": "Unschedulable", "2": "Unschedulable"}
